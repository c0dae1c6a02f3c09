// @drydock/storage-postgres: drydock's PostgreSQL storage backend (pg). Pass `postgresBackend` to
// @drydock/storage's openStorage (a postgres:// setting), or call openPostgresStorage directly.
import { randomUUID } from "node:crypto";
import { type BoatCreateRequest, BoatCreateRequestSchema } from "@drydock/boat-create-journal";
import { type BoatDeletionRecord, BoatDeletionRecordSchema } from "@drydock/boat-delete-journal";
import { DEFAULT_MAX_FILE_BYTES } from "@drydock/facts";
import {
  assertMetaKey,
  type BackendFactory,
  type BackendOptions,
  type Bot,
  type BotRegistryStore,
  BotSchema,
  checkImport,
  corruptFailure,
  META_VALUE,
  mintedValue,
  notEmptyFailure,
  RETIRED_VERSION,
  retiredError,
  type Storage,
  StorageError,
  type StorageExport,
  type StorageKind,
} from "@drydock/storage";
import { pgBotRegistry } from "./bots.js";
import { createTable, pgCreateJournal } from "./create-journal.js";
import { lockKey, openDatabase, type PgTx, SCHEMA_NAME, type Writer } from "./database.js";
import { deleteTable, pgDeleteJournal } from "./delete-journal.js";
import { type InstanceRegistry, pgInstances } from "./instances.js";
import { type PgWorkspaceStore, pgWorkspaces } from "./workspaces.js";

export { lockKey as advisoryLockKey, type Writer } from "./database.js";
export { redactText, redactUrl, toStorageError } from "./errors.js";
export {
  type Instance,
  InstanceError,
  type InstanceErrorCode,
  type InstanceRegistry,
  type InstanceState,
  type InstanceView,
  instanceFence,
  isInstanceError,
  type RenewResult,
} from "./instances.js";
export { SCHEMA_VERSION } from "./schema.js";
export type { PgWorkspaceStore, WorkspaceImport } from "./workspaces.js";

/** Rows per journal (and bots) at most, by default: far above any real installation, and configurable. */
export const DEFAULT_MAX_ROWS = 1_000_000;
export const DEFAULTS = {
  schema: "drydock",
  poolSize: 10,
  lockTimeoutMs: 5_000,
  idleInTransactionTimeoutMs: 60_000,
  queryTimeoutMs: 30_000,
  connectTimeoutMs: 10_000,
  resolveTimeoutMs: 15_000,
  maxRetries: 5,
} as const;

export interface PostgresStorageOptions extends BackendOptions {
  /** postgres:// or postgresql:// URL (it may hold a password: this package prints it only redacted). */
  url: string;
  /** The schema holding drydock's tables (created at open), so several stores may share a database. */
  schema?: string;
  /** The connection pool's size (default 10). */
  pool?: { max?: number };
  /** Bounded wait for another process's transaction on the same journal, ms (then STORAGE_BUSY). */
  lockTimeoutMs?: number;
  /** The server ends a transaction of this store left idle this long (its client vanished), ms. */
  idleInTransactionTimeoutMs?: number;
  /** A query without an answer for this long counts as a lost connection (and is resolved by call id), ms. */
  queryTimeoutMs?: number;
  connectTimeoutMs?: number;
  /** How long a call whose connection was lost keeps trying to learn whether it committed, ms. */
  resolveTimeoutMs?: number;
  /** Serialization failures and deadlocks retried per call before STORAGE_BUSY. */
  maxRetries?: number;
  /** Rows per journal at most (the file backend's is 4,096). */
  maxRows?: number;
  /** Bots at most (the file backend's is 4,096). */
  maxBots?: number;
  /** A workspace file's size at most, bytes (default facts' DEFAULT_MAX_FILE_BYTES, 8 MiB). */
  maxFileBytes?: number;
}

/** The storage with the members this backend has beyond today's contract (the registry slice adds them). */
export interface PostgresStorage extends Storage {
  readonly kind: "postgres";
  /** The schema holding this store's tables. */
  readonly schema: string;
  /** The database as messages name it: the URL with its password as `***`, and the schema. */
  readonly where: string;
  readonly bots: BotRegistryStore;
  /**
   * Server instances with leases and epochs (only this backend has them: see README, "Instances"). Not in
   * the export: instances belong to the running servers, not to the installation's state.
   */
  readonly instances: InstanceRegistry;
  /**
   * Workspaces as blobs and a versioned head manifest, every change one compare-and-set (see README,
   * "Workspaces"). Not in the export: `drydock storage migrate --to postgres` moves them with
   * `importWorkspace` (migration only).
   */
  readonly workspaces: PgWorkspaceStore;
  exportAll(): Promise<StorageExport & { bots: Bot[] }>;
  /** Writes an export verbatim into an empty store in one transaction; a non-empty store is refused. */
  importAll(data: StorageExport & { bots?: Bot[] }): Promise<void>;
  /**
   * Fences every later write (journals, registry, meta, import; not the instances' own calls) by `writer`,
   * read when each call is made: its transaction holds that instance's row FOR SHARE and checks it live, of
   * that epoch and within its lease by the database's clock, at its start and again with its result; else
   * STORAGE_FENCED, nothing written. A server passes its lease's `current()`. Once per store (see README,
   * "Fencing").
   */
  fenceWith(writer: () => Writer): void;
}

function invalid(message: string): StorageError {
  return new StorageError({ code: "STORAGE_INVALID_ARGUMENT", message });
}

function positive(name: string, value: number | undefined, fallback: number): number {
  const chosen = value ?? fallback;
  if (!Number.isSafeInteger(chosen) || chosen < 1) throw invalid(`${name} must be a positive integer`);
  return chosen;
}

/** Opens the store at `url` (creating and migrating its schema on first use). */
export async function openPostgresStorage(options: PostgresStorageOptions): Promise<PostgresStorage> {
  if (typeof options?.url !== "string" || !/^postgres(ql)?:\/\//.test(options.url)) {
    throw invalid("openPostgresStorage needs a url (postgres://user:password@host:port/database)");
  }
  const schema = options.schema ?? DEFAULTS.schema;
  if (!SCHEMA_NAME.test(schema)) throw invalid(`invalid schema name (expected ${SCHEMA_NAME.source})`);
  const maxRows = positive("maxRows", options.maxRows, DEFAULT_MAX_ROWS);
  const maxBots = positive("maxBots", options.maxBots, DEFAULT_MAX_ROWS);
  const handle = await openDatabase({
    url: options.url,
    schema,
    poolSize: positive("pool.max", options.pool?.max, DEFAULTS.poolSize),
    lockTimeoutMs: positive("lockTimeoutMs", options.lockTimeoutMs, DEFAULTS.lockTimeoutMs),
    idleInTransactionTimeoutMs: positive(
      "idleInTransactionTimeoutMs",
      options.idleInTransactionTimeoutMs,
      DEFAULTS.idleInTransactionTimeoutMs,
    ),
    queryTimeoutMs: positive("queryTimeoutMs", options.queryTimeoutMs, DEFAULTS.queryTimeoutMs),
    connectTimeoutMs: positive("connectTimeoutMs", options.connectTimeoutMs, DEFAULTS.connectTimeoutMs),
    resolveTimeoutMs: positive("resolveTimeoutMs", options.resolveTimeoutMs, DEFAULTS.resolveTimeoutMs),
    maxRetries: positive("maxRetries", options.maxRetries, DEFAULTS.maxRetries),
    now: options.now,
    crash: options.crash,
  });
  // A schema `drydock storage migrate` moved away from refuses every open, naming where its state went.
  const retired = await handle
    .read((tx) => tx.query<{ value: string }>("SELECT value FROM meta WHERE key = $1", [RETIRED_META_KEY]))
    .catch(async (error) => {
      await handle.close();
      throw error;
    });
  const marker = parseRetiredMeta(retired[0]?.value);
  if (retired[0] !== undefined) {
    await handle.close();
    throw marker === null
      ? corruptFailure(handle.where, `meta ${RETIRED_META_KEY} is not a retirement marker`)
      : retiredError(handle.where, marker);
  }
  let closed = false;
  const live = () => {
    if (closed)
      throw new StorageError({ code: "STORAGE_CLOSED", message: "this storage was closed; open it again" });
  };
  const readMeta = async (tx: PgTx, key: string): Promise<string | null> => {
    const value = (await tx.query<{ value: string }>("SELECT value FROM meta WHERE key = $1", [key]))[0]
      ?.value;
    if (value === undefined) return null;
    if (!META_VALUE.test(value)) throw corruptFailure(handle.where, `meta ${key} is not a valid value`);
    return value;
  };
  const parseAll = async <Row>(
    tx: PgTx,
    sql: string,
    schemaOf: { safeParse(v: unknown): { success: boolean; data?: Row } },
    what: string,
  ): Promise<Row[]> =>
    (await tx.query<{ row_json: string }>(sql)).map((raw) => {
      const parsed = schemaOf.safeParse(JSON.parse(raw.row_json));
      if (!parsed.success) throw corruptFailure(handle.where, `a ${what} breaks its format`);
      return parsed.data as Row;
    });
  const exportIn = async (tx: PgTx) => {
    const meta: Record<string, string> = {};
    for (const row of await tx.query<{ key: string; value: string }>(
      'SELECT key, value FROM meta ORDER BY key COLLATE "C"',
    )) {
      meta[row.key] = row.value;
    }
    return {
      creates: await parseAll<BoatCreateRequest>(
        tx,
        "SELECT row_json FROM create_rows ORDER BY seq",
        BoatCreateRequestSchema,
        "create row",
      ),
      deletes: await parseAll<BoatDeletionRecord>(
        tx,
        "SELECT row_json FROM delete_rows ORDER BY seq",
        BoatDeletionRecordSchema,
        "deletion fence",
      ),
      meta,
      bots: await parseAll<Bot>(tx, "SELECT row_json FROM bots ORDER BY bot_id", BotSchema, "bot"),
    };
  };
  return {
    kind: "postgres",
    schema,
    where: handle.where,
    dataDir: options.dataDir,
    createJournal: pgCreateJournal(handle, { newKey: options.newKey ?? randomUUID, maxRows, live }),
    deleteJournal: pgDeleteJournal(handle, { maxRows, live }),
    bots: pgBotRegistry(handle, { maxBots, live }),
    fenceWith(writer) {
      live();
      if (typeof writer !== "function") throw invalid("fenceWith needs a function answering { id, epoch }");
      handle.fence(writer);
    },
    instances: pgInstances(handle, { live }),
    workspaces: pgWorkspaces(handle, {
      live,
      maxFileBytes: positive("maxFileBytes", options.maxFileBytes, DEFAULT_MAX_FILE_BYTES),
    }),
    meta: {
      async get(key) {
        live();
        assertMetaKey(key);
        return handle.read((tx) => readMeta(tx, key));
      },
      async getOrCreate(key, mint) {
        live();
        assertMetaKey(key);
        const existing = await handle.read((tx) => readMeta(tx, key));
        if (existing !== null) return existing;
        const value = mintedValue(key, mint);
        // First writer wins: the insert does nothing when another process stored the key meanwhile.
        return handle.write("meta", async (tx) => {
          await tx.query("INSERT INTO meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING", [
            key,
            value,
          ]);
          return (await readMeta(tx, key)) as string;
        });
      },
    },
    async exportAll() {
      live();
      return handle.read(exportIn);
    },
    async importAll(data) {
      live();
      const checked = checkImport(data, { maxRows, maxBots });
      await handle.write("import", async (tx) => {
        for (const name of ["create", "delete", "meta", "bots"]) {
          await tx.query("SELECT pg_advisory_xact_lock($1::bigint)", [lockKey(schema, name)]);
        }
        const stored = await exportIn(tx);
        if (
          stored.creates.length +
            stored.deletes.length +
            stored.bots.length +
            Object.keys(stored.meta).length >
          0
        ) {
          throw notEmptyFailure(handle.where, "rows (journals, bots or meta)");
        }
        const createRows = createTable(handle.where);
        const deleteRows = deleteTable(handle.where);
        for (const row of checked.creates) await createRows.insert(tx, row);
        for (const row of checked.deletes) await deleteRows.insert(tx, row);
        for (const [key, value] of Object.entries(checked.meta)) {
          await tx.query("INSERT INTO meta (key, value) VALUES ($1, $2)", [key, value]);
        }
        for (const bot of checked.bots) {
          await tx.query("INSERT INTO bots (bot_id, row_json) VALUES ($1, $2)", [
            bot.botId,
            JSON.stringify(bot),
          ]);
        }
        await tx.query("UPDATE journal_state SET version = version + 1");
      });
    },
    async retire(to, at) {
      live();
      await handle.write("meta", async (tx) => {
        await tx.query("INSERT INTO meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING", [
          RETIRED_META_KEY,
          `${to}@${at}`,
        ]);
      });
    },
    async close() {
      closed = true;
      await handle.close();
    },
  };
}

/**
 * The retirement marker of a schema `drydock storage migrate` moved away from: the meta row
 * `storage-retired` = `<to>@<ms>`, written after the move was verified. Every later open refuses
 * (STORAGE_BACKEND_MISMATCH) naming where the state went, so no server writes to the schema again.
 */
export const RETIRED_META_KEY = "storage-retired";

function parseRetiredMeta(value: string | undefined) {
  const match = /^(file|sqlite|postgres)@(\d{1,15})$/.exec(value ?? "");
  if (match === null) return null;
  return { version: RETIRED_VERSION, to: match[1] as StorageKind, at: Number(match[2]) } as const;
}

/** The instance registry of a storage opened by `openStorage`, or null on a backend without instances. */
export function instancesOf(storage: Storage): InstanceRegistry | null {
  const instances = (storage as Partial<PostgresStorage>).instances;
  return storage.kind === "postgres" && instances !== undefined ? instances : null;
}

/** The workspaces (with the migration-only import and export) of a postgres storage, or null elsewhere. */
export function pgWorkspacesOf(storage: Storage): PgWorkspaceStore | null {
  const workspaces = (storage as Partial<PostgresStorage>).workspaces;
  return storage.kind === "postgres" && workspaces?.importWorkspace !== undefined ? workspaces : null;
}

/** For `openStorage({ storage: "postgres://…", backends: { postgres: postgresBackend } })`. */
export const postgresBackend: BackendFactory = (options) =>
  openPostgresStorage(options as unknown as PostgresStorageOptions);
