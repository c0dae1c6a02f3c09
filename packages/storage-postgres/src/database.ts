import { createHash, randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { type StorageCrashHook, StorageError } from "@drydock/storage";
import pg from "pg";
import { isConnectionFailure, isSerializationFailure, redactUrl, toStorageError } from "./errors.js";
import { MIGRATIONS, SCHEMA_VERSION } from "./schema.js";

/** One transaction's connection: parameterized queries, and `now` (ms, database time, or the test clock). */
export interface PgTx {
  query<T = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<T[]>;
  /** Milliseconds since the epoch, read inside the transaction after its lock (clock_timestamp()). */
  readonly now: number;
  /** Marks a journal ("create", "delete", "bots") as written: its version is bumped with the ops row. */
  touch(name: string): void;
  /** The writer this transaction was fenced with (its instance row held FOR SHARE), or null when unfenced. */
  readonly writer: Writer | null;
}

/** A fenced writer: a server's instance (its id and epoch), read at the start of each write. */
export interface Writer {
  id: string;
  epoch: number;
}

/**
 * The lock a write holds for its whole transaction: one per journal, so the pure step sees a stable slice;
 * one per bot for its workspace (`workspace:<botId>`), so bots' workspaces never wait for each other.
 */
export type LockName = "create" | "delete" | "meta" | "bots" | "import" | "instances" | `workspace:${string}`;

export interface PgHandle {
  /** The database as messages name it: the redacted URL and the schema. */
  readonly where: string;
  /**
   * Runs `body` in one READ COMMITTED transaction holding `pg_advisory_xact_lock` for `lock`, recording its
   * result under a fresh call id in `ops`. Serialization failures and deadlocks are retried (bounded), then
   * STORAGE_BUSY. A connection lost after BEGIN is resolved by the call id, never guessed (see README).
   */
  write<R>(lock: LockName, body: (tx: PgTx) => Promise<R>): Promise<R>;
  /**
   * From now on, every write (but the instances' own) is fenced by `writer()`, read when the call is made:
   * its transaction first holds that instance's row FOR SHARE — live, of that epoch, its lease unexpired by
   * the database's clock — and checks the lease again with its `ops` row, else STORAGE_FENCED, nothing
   * written. Set once per store.
   */
  fence(writer: () => Writer): void;
  /**
   * Runs `statements` as ONE simple-protocol query: BEGIN, `lock`'s advisory lock, the statements, COMMIT.
   * The server runs them and commits without waiting for this process between them, so a check among them
   * still holds at the commit even if this process is paused meanwhile (a `write` checks, then commits in a
   * later round trip). Values are inlined: the caller validates every one first. No `ops` row: a lost
   * connection leaves the outcome unknown, so it is tried again on a fresh one (bounded), then
   * STORAGE_UNAVAILABLE; use it only where a retry is harmless.
   * Answers each statement's rows.
   */
  atomic(lock: LockName, statements: string[]): Promise<Record<string, unknown>[][]>;
  /** Runs `body` in one REPEATABLE READ, READ ONLY transaction: one consistent snapshot. */
  read<R>(body: (tx: PgTx) => Promise<R>): Promise<R>;
  close(): Promise<void>;
}

export interface OpenDatabaseOptions {
  url: string;
  schema: string;
  pool?: pg.Pool | undefined;
  poolSize: number;
  lockTimeoutMs: number;
  idleInTransactionTimeoutMs: number;
  queryTimeoutMs: number;
  connectTimeoutMs: number;
  resolveTimeoutMs: number;
  maxRetries: number;
  now?: (() => number) | undefined;
  crash?: StorageCrashHook | undefined;
}

/** A SQL identifier for the schema: lower-case letters, digits and underscores, so it never needs quoting. */
export const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

/** How this store's connections name themselves in pg_stat_activity (an orphan is only ever one of them). */
const APPLICATION_NAME = "drydock";

/** How long an ops row is kept: far longer than any caller takes to resolve its own lost COMMIT. */
const OPS_KEEP = "10 minutes";

/**
 * The 64-bit advisory lock key a write of `name` ("create", "delete", "meta", "bots") holds within `schema`
 * (two stores in one database never share one); exported as `advisoryLockKey` for tools and benches.
 */
export function lockKey(schema: string, name: string): string {
  return createHash("sha256").update(`drydock:${schema}:${name}`).digest().readBigInt64BE(0).toString();
}

const NOW_SQL = "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::float8 AS now";

/**
 * A backend that held a transaction whose connection was lost: terminated (and waited for) before its call
 * reads `ops`, or before this store's next write when the server could not be reached then. Its pid is the
 * one the server sent when the connection began (BackendKeyData), known before BEGIN is even sent.
 */
interface Orphan {
  pid: number;
}

/**
 * Opens a pool on `url` (search_path = `schema`), creates the schema and applies migrations under
 * `pg_advisory_lock`. Throws a StorageError (redacted URL) when the server cannot be used or is newer.
 */
export async function openDatabase(options: OpenDatabaseOptions): Promise<PgHandle> {
  const where = `${redactUrl(options.url)} (schema ${options.schema})`;
  const clientConfig: pg.ClientConfig = {
    connectionString: options.url,
    // A transaction of this store is never idle for long: one left idle (its client vanished) is ended by
    // the server, releasing its advisory lock, even if nobody is left to terminate it.
    options: `-c search_path=${options.schema} -c lock_timeout=${options.lockTimeoutMs} -c idle_in_transaction_session_timeout=${options.idleInTransactionTimeoutMs}`,
    query_timeout: options.queryTimeoutMs,
    connectionTimeoutMillis: options.connectTimeoutMs,
    application_name: APPLICATION_NAME,
  };
  const ownsPool = options.pool === undefined;
  const pool = options.pool ?? new pg.Pool({ ...clientConfig, max: options.poolSize });
  // An idle connection the server closed (a restart, pg_terminate_backend) is dropped by the pool; the next
  // call takes a fresh one. Without a listener, node would end the process on that 'error' event.
  pool.on("error", () => {});
  pool.on("connect", (client) => {
    client.on("error", () => {});
  });
  const fail = (error: unknown) => toStorageError(error, where, options.lockTimeoutMs);
  let crash: StorageCrashHook = () => {};
  const orphans = new Map<number, Orphan>();
  let fencedBy: (() => Writer) | undefined;

  const txOf = (
    client: pg.PoolClient,
    now: number,
    touched?: Set<string>,
    writer: Writer | null = null,
  ): PgTx => ({
    now,
    writer,
    touch(name) {
      if (touched === undefined) throw new Error("a read transaction cannot write");
      touched.add(name);
    },
    async query<T>(sql: string, params?: unknown[]) {
      return (await client.query(sql, params)).rows as T[];
    },
  });
  /** A fresh connection outside the pool (whose connections may all be dead after a restart). */
  async function withFreshClient<R>(body: (client: pg.Client) => Promise<R>): Promise<R> {
    const client = new pg.Client({ ...clientConfig, query_timeout: options.queryTimeoutMs });
    client.on("error", () => {});
    try {
      await client.connect();
      return await body(client);
    } finally {
      await client.end().catch(() => {});
    }
  }

  /** Terminates `orphan`'s backend if it still runs, and waits until the server no longer lists it. */
  async function bury(client: pg.Client, orphan: Orphan): Promise<void> {
    const listed = `FROM pg_stat_activity WHERE pid = $1 AND application_name = '${APPLICATION_NAME}'`;
    await client.query(`SELECT pg_terminate_backend(pid) ${listed}`, [orphan.pid]);
    const deadline = Date.now() + options.resolveTimeoutMs;
    while (Date.now() < deadline) {
      const { rows } = await client.query(`SELECT 1 ${listed}`, [orphan.pid]);
      if (rows.length === 0) return;
      await sleep(10);
    }
    throw new Error(
      `backend ${orphan.pid} was still listed ${options.resolveTimeoutMs} ms after it was terminated`,
    );
  }

  async function buryOrphans(): Promise<void> {
    if (orphans.size === 0) return;
    await withFreshClient(async (client) => {
      for (const orphan of [...orphans.values()]) {
        await bury(client, orphan);
        orphans.delete(orphan.pid);
      }
    });
  }

  /**
   * The connection failed after BEGIN: make sure the old backend is gone (so its transaction is settled),
   * then read `ops` by call id. Present: it committed, return its result. Absent: it did not, and nothing
   * was changed. Unreachable within resolveTimeoutMs: the outcome is unknown, and the error says so.
   */
  async function resolve(callId: string, orphan: Orphan, cause: unknown): Promise<{ value: unknown }> {
    orphans.set(orphan.pid, orphan);
    const deadline = Date.now() + options.resolveTimeoutMs;
    let last: unknown = cause;
    do {
      try {
        const found = await withFreshClient(async (client) => {
          await bury(client, orphan);
          orphans.delete(orphan.pid);
          const { rows } = await client.query("SELECT result_json FROM ops WHERE call_id = $1", [callId]);
          return rows[0] as { result_json: string } | undefined;
        });
        if (found !== undefined) return JSON.parse(found.result_json) as { value: unknown };
        throw new StorageError({
          code: "STORAGE_UNAVAILABLE",
          errno: "ECONNRESET",
          retryable: true,
          message: `the connection to ${where} failed during the call (${describe(cause)}); drydock checked the server after the old connection was gone: the call did not commit. Nothing was changed. Retry it.`,
          cause,
        });
      } catch (error) {
        if (error instanceof StorageError) throw error;
        // Anything short of reading `ops` after the old backend is gone leaves the outcome unknown: try again.
        last = error;
        await sleep(50);
      }
    } while (Date.now() < deadline);
    throw new StorageError({
      code: "STORAGE_UNAVAILABLE",
      errno: "ECONNRESET",
      retryable: true,
      message: `the connection to ${where} failed while the call was under way (${describe(cause)}) and the server could not be reached within ${options.resolveTimeoutMs} ms to learn whether it committed (${describe(last)}). The call may or may not have taken effect; nothing else was changed. Retry the same call once the server is reachable: the journals hand back the same key or fence on a retry.`,
      cause,
    });
  }

  /**
   * `run` on a pooled connection, released after; a connection that failed is never reused, and a lost one
   * (a pooled connection that died silently, a restart) runs `run` again on a fresh one, bounded. Only for
   * calls whose repetition is harmless: a read changes nothing, and `atomic` says so of its callers.
   */
  async function repeatable<R>(run: (client: pg.PoolClient) => Promise<R>): Promise<R> {
    for (let tries = 0; ; tries += 1) {
      let client: pg.PoolClient;
      try {
        client = await pool.connect();
      } catch (error) {
        throw fail(error);
      }
      try {
        const value = await run(client);
        client.release();
        return value;
      } catch (error) {
        client.release(true);
        if (tries < STALE_RETRIES && isConnectionFailure(error)) continue;
        throw fail(error);
      }
    }
  }

  async function attempt<R>(lock: LockName, body: (tx: PgTx) => Promise<R>, writer: Writer | null) {
    let client: pg.PoolClient;
    try {
      await buryOrphans();
      client = await pool.connect();
    } catch (error) {
      throw fail(error);
    }
    const callId = randomUUID();
    const pid = (client as unknown as { processID: number | null }).processID;
    const orphan = typeof pid === "number" ? { pid } : undefined;
    // One round trip: BEGIN, the journal's lock, then (after the lock) the clock. The key is our own bigint.
    // A fenced write also holds its instance's row FOR SHARE (after the lock), in the same round trip: a
    // declare-dead or re-registration (an UPDATE of that row) waits for this transaction, or it sees theirs.
    const head = `BEGIN ISOLATION LEVEL READ COMMITTED; SELECT pg_advisory_xact_lock(${lockKey(options.schema, lock)}::bigint)${options.now ? "" : `; ${NOW_SQL}`}${writer ? `; ${fenceSql(writer)} FOR SHARE` : ""}`;
    let now: number;
    let held = true;
    try {
      const results = (await client.query(head)) as unknown as pg.QueryResult[];
      now = options.now ? options.now() : clockOf(results[2]);
      if (writer) held = (results.at(-1)?.rows.length ?? 0) > 0;
    } catch (error) {
      // Nothing of the call was sent but BEGIN and the lock: a pooled connection the server had closed (a
      // restart), or one that stopped answering. A fresh one may work; a backend that may still hold the lock
      // is terminated first.
      client.release(true);
      if (!isConnectionFailure(error)) throw error;
      if (orphan !== undefined) orphans.set(orphan.pid, orphan);
      throw new StaleConnection(error);
    }
    const touched = new Set<string>();
    try {
      if (!held) throw await fencedFailure(client, writer as Writer);
      const tx = txOf(client, now, touched, writer);
      crash("postgres:after-begin", lock);
      const value = await body(tx);
      // One round trip: prune old ops rows, bump the versions of the journals written, record the result —
      // on a fenced write only if its lease still holds by the database's clock (the row is held FOR SHARE,
      // so only time can have passed it; a writer paused past its lease inside the transaction is refused).
      const recorded = await client.query(
        `WITH pruned AS (DELETE FROM ops WHERE at < clock_timestamp() - interval '${OPS_KEEP}'),
              bumped AS (UPDATE journal_state SET version = version + 1 WHERE name = ANY($3::text[]))
         INSERT INTO ops (call_id, result_json) SELECT $1, $2${writer ? ` WHERE EXISTS (${fenceSql(writer)})` : ""}`,
        [callId, JSON.stringify({ value }), [...touched]],
      );
      if (recorded.rowCount !== 1) throw await fencedFailure(client, writer as Writer);
      crash("postgres:before-commit", lock);
      await client.query("COMMIT");
      client.release();
      crash("postgres:after-commit", lock);
      return { value: value as unknown };
    } catch (error) {
      if (orphan !== undefined && isConnectionFailure(error)) {
        client.release(true);
        return resolve(callId, orphan, error);
      }
      try {
        await client.query("ROLLBACK");
        client.release();
      } catch {
        client.release(true);
      }
      throw error;
    }
  }

  /**
   * Why `writer`'s row no longer fences it (read in the refused transaction, which is then rolled back), as
   * a STORAGE_FENCED error: nothing was written.
   */
  async function fencedFailure(client: pg.PoolClient, writer: Writer): Promise<StorageError> {
    const { rows } = await client.query(
      "SELECT epoch::text AS epoch, state, lease_until <= clock_timestamp() AS lapsed FROM instances WHERE id = $1::uuid",
      [writer.id],
    );
    const row = rows[0] as { epoch: string; state: string; lapsed: boolean } | undefined;
    const why =
      row === undefined
        ? "its instance row is gone"
        : Number(row.epoch) !== writer.epoch
          ? `its instance row is of epoch ${row.epoch}`
          : row.state === "dead"
            ? "it was declared dead (or replaced by a newer registration)"
            : row.state === "stopped"
              ? "it was stopped"
              : row.lapsed
                ? "its lease lapsed by the database's clock (it could not renew in time: paused, or cut off)"
                : "its lease could not be confirmed";
    return new StorageError({
      code: "STORAGE_FENCED",
      retryable: true,
      message: `This server's write to ${where} was refused: its instance ${writer.id} (epoch ${writer.epoch}) no longer holds its lease — ${why} — so another instance may own the work. Nothing was written. The server re-registers with a new epoch; retry the request (here once it has, or on another instance).`,
    });
  }

  const handle: PgHandle = {
    where,
    fence(writer) {
      if (fencedBy !== undefined) {
        throw new StorageError({
          code: "STORAGE_INVALID_ARGUMENT",
          message: `${where} is already fenced by a writer; a store is fenced once (open another store for another writer)`,
        });
      }
      fencedBy = writer;
    },
    async write(lock, body) {
      // Read when the call is made (before any await): the epoch a call starts with is the one it writes
      // with, even if the lease re-registers while it waits.
      const writer = lock === "instances" || fencedBy === undefined ? null : checkWriter(fencedBy(), where);
      let stale = 0;
      for (let tries = 0; ; tries += 1) {
        try {
          return (await attempt(lock, body, writer)).value as Awaited<ReturnType<typeof body>>;
        } catch (error) {
          if (error instanceof StaleConnection) {
            if (++stale <= STALE_RETRIES) continue;
            throw fail(error.cause);
          }
          if (isSerializationFailure(error) && tries < options.maxRetries) {
            await sleep(5 + Math.floor(Math.random() * 20 * (tries + 1)));
            continue;
          }
          throw fail(error);
        }
      }
    },
    async atomic(lock, statements) {
      const text = [
        "BEGIN ISOLATION LEVEL READ COMMITTED",
        `SELECT pg_advisory_xact_lock(${lockKey(options.schema, lock)}::bigint)`,
        ...statements,
        "COMMIT",
      ].join("; ");
      // An error ends the query string where it happened: the transaction is rolled back with the connection.
      return repeatable(async (client) => {
        const results = (await client.query(text)) as unknown as pg.QueryResult[];
        return results.slice(2, 2 + statements.length).map((result) => result.rows);
      });
    },
    read(body) {
      return repeatable(async (client) => {
        const begun = (await client.query(
          `BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY${options.now ? "" : `; ${NOW_SQL}`}`,
        )) as unknown as pg.QueryResult[];
        const now = options.now ? options.now() : clockOf(begun[1]);
        const value = await body(txOf(client, now));
        await client.query("COMMIT");
        return value;
      });
    },
    async close() {
      if (ownsPool) await pool.end().catch(() => {});
    },
  };
  try {
    await migrate(pool, options.schema, where);
  } catch (error) {
    await handle.close();
    throw fail(error);
  }
  if (options.crash) crash = options.crash;
  return handle;
}

/** Fresh connections a call tries after pooled ones the server had closed, before it reports the failure. */
const STALE_RETRIES = 2;

/** BEGIN failed on a pooled connection: nothing of the call reached the server. */
class StaleConnection extends Error {
  constructor(override readonly cause: unknown) {
    super("stale connection");
  }
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A writer as the fence reads it: a UUID and a positive safe integer (inlined into SQL only after this). */
function checkWriter(writer: Writer | null | undefined, where: string): Writer {
  if (
    typeof writer?.id !== "string" ||
    !UUID.test(writer.id) ||
    !Number.isSafeInteger(writer.epoch) ||
    writer.epoch < 1
  ) {
    throw new StorageError({
      code: "STORAGE_FENCED",
      message: `A write to ${where} was refused: the store is fenced but its writer named no instance (an id and an epoch). Nothing was written. This is a bug in the caller: report it.`,
    });
  }
  return writer;
}

/** The fence's condition: the writer's row live, of its epoch, its lease unexpired by the database's clock. */
function fenceSql(writer: Writer): string {
  return `SELECT 1 FROM instances WHERE id = '${writer.id}'::uuid AND epoch = ${writer.epoch} AND state = 'live' AND lease_until > clock_timestamp()`;
}

/** The `now` of NOW_SQL's answer. */
function clockOf(result: pg.QueryResult | undefined): number {
  const now = (result?.rows[0] as { now?: unknown } | undefined)?.now;
  if (typeof now !== "number") throw new Error("the server's answer held no clock reading");
  return now;
}

function describe(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  const message = String((error as { message?: unknown } | null)?.message ?? error);
  return typeof code === "string" ? `${code}: ${message}` : message;
}

/** Creates the schema and applies every migration above the stored version, under a session advisory lock. */
async function migrate(pool: pg.Pool, schema: string, where: string): Promise<void> {
  const client = await pool.connect();
  let broken = false;
  try {
    await client.query("SELECT pg_advisory_lock($1::bigint)", [lockKey(schema, "migrate")]);
    try {
      await client.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
      await client.query("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)");
      const { rows } = await client.query("SELECT version FROM schema_version");
      const current = (rows[0] as { version: number } | undefined)?.version ?? 0;
      if (current > SCHEMA_VERSION) {
        throw new StorageError({
          code: "STORAGE_NEWER",
          message: `${where} is at schema version ${current}, written by a newer drydock (this one knows ${SCHEMA_VERSION}). Nothing was changed. Upgrade this drydock; leave the database as it is.`,
        });
      }
      for (let version = current; version < SCHEMA_VERSION; version += 1) {
        await client.query("BEGIN");
        try {
          await client.query(MIGRATIONS[version] as string);
          if (version === 0 && rows.length === 0) {
            await client.query("INSERT INTO schema_version (version) VALUES (1)");
          } else {
            await client.query("UPDATE schema_version SET version = $1", [version + 1]);
          }
          await client.query("COMMIT");
        } catch (error) {
          await client.query("ROLLBACK").catch(() => {});
          throw error;
        }
      }
    } finally {
      await client.query("SELECT pg_advisory_unlock($1::bigint)", [lockKey(schema, "migrate")]).catch(() => {
        broken = true;
      });
    }
  } catch (error) {
    broken = true;
    throw error;
  } finally {
    client.release(broken);
  }
}
