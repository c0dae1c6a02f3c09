import { setTimeout as sleep } from "node:timers/promises";
import { isBoatCreateJournalError } from "@drydock/boat-create-journal";
import { isBoatDeleteJournalError } from "@drydock/boat-delete-journal";
import { isStorageError, type StorageError } from "@drydock/storage";
import { type PostgresServer, startPostgres } from "@drydock/test-kit/postgres";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { lockKey } from "../src/database.js";
import { openPostgresStorage, type PostgresStorage, type PostgresStorageOptions } from "../src/index.js";
import { useFaultProxy, useStores } from "./helpers.js";

/**
 * Faults only a server has. Each case checks the same four things: the call ends in a typed error or a
 * success; a second begin for the same bot never mints a second key (the export shows one row); the deletion
 * fence written before the fault is still there; and the next call works.
 */

const BODY = '{"ttlSeconds":28800,"noEnv":true}';
const FENCE = { boxId: "bx_cccccccc", name: "drydock-bx_cccccccc", ownerBotId: "bot-0" };
const stores = useStores("f", {
  queryTimeoutMs: 2_000,
  connectTimeoutMs: 1_000,
  resolveTimeoutMs: 3_000,
  lockTimeoutMs: 2_000,
});
let url: string;
beforeAll(() => {
  url = stores.url();
});
const openAt = (at: string, extra: Partial<PostgresStorageOptions> = {}) =>
  stores.open({ url: at, ...extra });
const cleanups = { push: stores.later };

async function adminClient(at: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: at });
  client.on("error", () => {});
  await client.connect();
  cleanups.push(() => client.end().catch(() => {}));
  return client;
}

/** The StorageError behind a journal's own error (its cause), or the error itself. */
function storageErrorOf(error: unknown): StorageError {
  const inner = isBoatCreateJournalError(error) || isBoatDeleteJournalError(error) ? error.cause : error;
  if (!isStorageError(inner)) throw new Error(`expected a StorageError, got ${String(error)}`);
  return inner;
}

async function settle<T>(call: Promise<T>): Promise<{ ok: true; value: T } | { ok: false; error: unknown }> {
  return call.then(
    (value) => ({ ok: true as const, value }),
    (error: unknown) => ({ ok: false as const, error }),
  );
}

/** The state every case starts from: bot-0's key and a deletion fence. */
async function seed(storage: PostgresStorage) {
  await storage.createJournal.beginBoatCreate("bot-0", BODY);
  await storage.deleteJournal.prepareBoatDeletion(FENCE);
  return storage.exportAll();
}

/** The invariants after a fault, checked through `check` (a handle that reaches the server directly). */
async function afterFault(check: PostgresStorage, before: Awaited<ReturnType<typeof seed>>, bot: string) {
  const again = await check.createJournal.beginBoatCreate(bot, BODY);
  const stored = await check.exportAll();
  expect(stored.creates.filter((row) => row.botId === bot)).toHaveLength(1);
  expect(stored.creates.find((row) => row.botId === bot)?.idempotencyKey).toBe(again.request.idempotencyKey);
  expect(stored.deletes.find((row) => row.boxId === FENCE.boxId)).toEqual(before.deletes[0]);
  expect(stored.creates[0]).toEqual(before.creates[0]);
  return again;
}

/** Holds a conflicting uncommitted row so the backend's INSERT for `bot` waits mid-transaction. */
async function blockInsertOf(at: string, schema: string, bot: string) {
  const holder = await adminClient(at);
  await holder.query(`SET search_path = ${schema}`);
  await holder.query("BEGIN");
  await holder.query(
    "INSERT INTO create_rows (bot_id, request_body, idempotency_key, created_at, box_id, resolved, row_json) VALUES ($1, $2, 'holder-key', 1, NULL, false, '{}')",
    [bot, BODY],
  );
  return holder;
}

async function waitingBackend(admin: pg.Client, schemaWanted: string): Promise<number> {
  for (let i = 0; i < 2_000; i += 1) {
    const { rows } = await admin.query(
      "SELECT pid FROM pg_stat_activity WHERE application_name = 'drydock' AND wait_event_type = 'Lock' AND query LIKE 'INSERT INTO create_rows%'",
    );
    if (rows[0] !== undefined) return (rows[0] as { pid: number }).pid;
    await sleep(10);
  }
  throw new Error(`no drydock backend of ${schemaWanted} ever waited`);
}

describe("pg_terminate_backend of the connection mid-transaction", () => {
  it("the call fails typed (not committed, nothing changed), one key, the fence kept, the next call works", async () => {
    const storage = await openAt(url);
    const schema = storage.schema;
    const before = await seed(storage);
    const admin = await adminClient(url);
    const holder = await blockInsertOf(url, schema, "bot-1");
    const call = settle(storage.createJournal.beginBoatCreate("bot-1", BODY));
    const pid = await waitingBackend(admin, schema);
    await admin.query("SELECT pg_terminate_backend($1)", [pid]);
    const outcome = await call;
    await holder.query("ROLLBACK");
    expect(outcome.ok).toBe(false);
    const error = storageErrorOf((outcome as { error: unknown }).error);
    expect([error.code, error.retryable]).toEqual(["STORAGE_UNAVAILABLE", true]);
    expect(error.message).toMatch(/the call did not commit\. Nothing was changed\. Retry it\./);
    expect((await storage.exportAll()).creates).toEqual(before.creates);
    const again = await afterFault(storage, before, "bot-1");
    expect(again.startedNow).toBe(true);
  });
});

describe("through a TCP proxy that injects network faults", () => {
  const proxy = useFaultProxy();

  it("a lost COMMIT answer, committed: the call succeeds with the stored result, never a second key", async () => {
    const storage = await openAt(proxy.url(url));
    const direct = await openAt(url, { schema: storage.schema });
    const before = await seed(storage);
    const commits = proxy.commits;
    proxy.set({ kind: "drop-commit-answer", count: 1 });
    const attempt = await storage.createJournal.beginBoatCreate("bot-1", BODY);
    expect(proxy.commits).toBe(commits + 1);
    expect(attempt.startedNow).toBe(true);
    const stored = await direct.exportAll();
    expect(stored.creates.at(-1)).toEqual(attempt.request);
    const again = await afterFault(direct, before, "bot-1");
    expect([again.startedNow, again.request.idempotencyKey]).toEqual([false, attempt.request.idempotencyKey]);
    // The next call through the proxy works.
    expect((await storage.createJournal.beginBoatCreate("bot-2", BODY)).startedNow).toBe(true);
  });

  it("a lost COMMIT, not committed: a typed error saying nothing was changed, and nothing was", async () => {
    const storage = await openAt(proxy.url(url));
    const direct = await openAt(url, { schema: storage.schema });
    const before = await seed(storage);
    proxy.set({ kind: "drop-commit", count: 1 });
    const outcome = await settle(
      storage.deleteJournal.prepareBoatDeletion({ ...FENCE, boxId: "bx_dddddddd" }),
    );
    expect(outcome.ok).toBe(false);
    const error = storageErrorOf((outcome as { error: unknown }).error);
    expect([error.code, error.retryable]).toEqual(["STORAGE_UNAVAILABLE", true]);
    expect(error.message).toMatch(/did not commit\. Nothing was changed/);
    expect(await direct.exportAll()).toEqual(before);
    await afterFault(direct, before, "bot-1");
    expect(
      (await storage.deleteJournal.prepareBoatDeletionOnce({ ...FENCE, boxId: "bx_dddddddd" })).prepared,
    ).toBe(true);
  });

  it("a delayed network: calls succeed, slower, with the same results", async () => {
    const storage = await openAt(proxy.url(url));
    const before = await seed(storage);
    proxy.set({ kind: "delay", ms: 30 });
    const first = await storage.createJournal.beginBoatCreate("bot-1", BODY);
    const second = await storage.createJournal.beginBoatCreate("bot-1", BODY);
    expect([first.startedNow, second.startedNow]).toEqual([true, false]);
    proxy.set({ kind: "pass" });
    await afterFault(storage, before, "bot-1");
  });

  it("connections reset: a typed retryable error, nothing changed, and the next call works", async () => {
    const storage = await openAt(proxy.url(url));
    const direct = await openAt(url, { schema: storage.schema });
    const before = await seed(storage);
    proxy.set({ kind: "reset" });
    const outcome = await settle(storage.createJournal.beginBoatCreate("bot-1", BODY));
    expect(outcome.ok).toBe(false);
    const error = storageErrorOf((outcome as { error: unknown }).error);
    expect([error.code, error.retryable]).toEqual(["STORAGE_UNAVAILABLE", true]);
    expect(error.message).toMatch(/Nothing was changed/);
    expect(error.message).not.toContain(new URL(url).password);
    expect(await direct.exportAll()).toEqual(before);
    proxy.set({ kind: "pass" });
    expect((await storage.createJournal.beginBoatCreate("bot-1", BODY)).startedNow).toBe(true);
    await afterFault(direct, before, "bot-1");
  });

  it("a blackhole after the call's INSERT: it times out, is resolved as not committed, and the next call works", async () => {
    const storage = await openAt(proxy.url(url), { queryTimeoutMs: 800 });
    const direct = await openAt(url, { schema: storage.schema });
    const before = await seed(storage);
    proxy.set({ kind: "blackhole-on", match: "INSERT INTO create_rows" });
    const outcome = await settle(storage.createJournal.beginBoatCreate("bot-1", BODY));
    const error = storageErrorOf((outcome as { error: unknown }).error);
    expect([error.code, error.retryable]).toEqual(["STORAGE_UNAVAILABLE", true]);
    expect(error.message).toMatch(/Query read timeout.*the call did not commit\. Nothing was changed/);
    expect(await direct.exportAll()).toEqual(before);
    expect((await storage.createJournal.beginBoatCreate("bot-1", BODY)).startedNow).toBe(true);
    await afterFault(direct, before, "bot-1");
  });

  it("the whole network blackholed at COMMIT: outcome unknown, said so; after it heals the next call works", async () => {
    const storage = await openAt(proxy.url(url), { queryTimeoutMs: 800, resolveTimeoutMs: 1_500 });
    const direct = await openAt(url, { schema: storage.schema });
    const before = await seed(storage);
    // The Query message "COMMIT\0" (not BEGIN ... READ COMMITTED).
    proxy.set({ kind: "blackhole-on", match: "COMMIT\u0000", everything: true });
    const outcome = await settle(storage.createJournal.beginBoatCreate("bot-1", BODY));
    const error = storageErrorOf((outcome as { error: unknown }).error);
    expect([error.code, error.retryable]).toEqual(["STORAGE_UNAVAILABLE", true]);
    expect(error.message).toMatch(/could not be reached within 1500 ms.*may or may not have taken effect/);
    expect(error.message).not.toContain(new URL(url).password);
    proxy.set({ kind: "pass" });
    // The orphaned backend (idle in its transaction, holding the journal's lock) is terminated before the
    // next write; the COMMIT never reached the server, so that write mints the key.
    const next = await storage.createJournal.beginBoatCreate("bot-1", BODY);
    expect(next.startedNow).toBe(true);
    const again = await afterFault(direct, before, "bot-1");
    expect(again.request.idempotencyKey).toBe(next.request.idempotencyKey);
  });

  it("a pooled connection that died silently: its BEGIN times out and the call runs on a fresh one", async () => {
    const storage = await openAt(proxy.url(url), { queryTimeoutMs: 800 });
    const before = await seed(storage);
    proxy.set({ kind: "blackhole-on", match: "BEGIN" });
    const attempt = await storage.createJournal.beginBoatCreate("bot-1", BODY);
    expect(attempt.startedNow).toBe(true);
    expect(proxy.commits).toBeGreaterThan(0);
    await afterFault(storage, before, "bot-1");
  });

  it("a pooled connection that died silently under a renewal: it times out and the renewal runs on a fresh one", async () => {
    const storage = await openAt(proxy.url(url), { queryTimeoutMs: 800 });
    const me = await storage.instances.register({ host: "h", pid: 4, ttlMs: 60_000 });
    proxy.set({ kind: "blackhole-on", match: "BEGIN" });
    const renewed = await storage.instances.renew(me.id, me.epoch, 60_000);
    expect(renewed).toEqual({ renewed: true, leaseUntil: expect.any(Number) });
    expect((renewed as { leaseUntil: number }).leaseUntil).toBeGreaterThan(me.leaseUntil);
  });

  it("a blackholed network before a call: it fails typed, nothing changed, and after it heals the next call works", async () => {
    const storage = await openAt(proxy.url(url), { queryTimeoutMs: 800, connectTimeoutMs: 500 });
    const direct = await openAt(url, { schema: storage.schema });
    const before = await seed(storage);
    proxy.set({ kind: "blackhole" });
    const outcome = await settle(storage.createJournal.beginBoatCreate("bot-1", BODY));
    const error = storageErrorOf((outcome as { error: unknown }).error);
    expect([error.code, error.retryable]).toEqual(["STORAGE_UNAVAILABLE", true]);
    expect(error.message).toMatch(/timeout.*Nothing was changed/);
    expect(await direct.exportAll()).toEqual(before);
    proxy.set({ kind: "pass" });
    expect((await storage.createJournal.beginBoatCreate("bot-1", BODY)).startedNow).toBe(true);
    await afterFault(direct, before, "bot-1");
  });
});

describe("an immediate-mode restart of PostgreSQL during a call", () => {
  let server: PostgresServer;
  beforeAll(async () => {
    // Its own cluster: restarting the project's would fail the other files' calls.
    server = await startPostgres();
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("the call fails typed (not committed), one key, the fence kept, the next call works", async () => {
    const at = await server.createDatabase();
    const storage = await openAt(at, { resolveTimeoutMs: 30_000 });
    const schema = storage.schema;
    const before = await seed(storage);
    const admin = await adminClient(at);
    await blockInsertOf(at, schema, "bot-1");
    const call = settle(storage.createJournal.beginBoatCreate("bot-1", BODY));
    await waitingBackend(admin, schema);
    await server.restart({ mode: "immediate" });
    const outcome = await call;
    expect(outcome.ok).toBe(false);
    const error = storageErrorOf((outcome as { error: unknown }).error);
    expect([error.code, error.retryable]).toEqual(["STORAGE_UNAVAILABLE", true]);
    expect(error.message).toMatch(/did not commit\. Nothing was changed/);
    expect(await storage.exportAll()).toEqual(before);
    const again = await afterFault(storage, before, "bot-1");
    expect(again.startedNow).toBe(true);
  });

  it("a restart between calls: pooled connections are stale, the next call works unchanged", async () => {
    const at = await server.createDatabase();
    const storage = await openAt(at);
    const before = await seed(storage);
    await server.restart({ mode: "immediate" });
    expect((await storage.createJournal.beginBoatCreate("bot-1", BODY)).startedNow).toBe(true);
    await afterFault(storage, before, "bot-1");
  });
});

describe("typed refusals of a server that is not usable", () => {
  it("connection refused: STORAGE_UNAVAILABLE (retryable), the URL's password redacted", async () => {
    const dead = new URL(url);
    dead.port = "1";
    const error = await openPostgresStorage({
      url: dead.toString(),
      dataDir: "/nonexistent",
      connectTimeoutMs: 1_000,
    }).then(
      () => null,
      (e: unknown) => e,
    );
    const storageError = storageErrorOf(error);
    expect([storageError.code, storageError.retryable, storageError.errno]).toEqual([
      "STORAGE_UNAVAILABLE",
      true,
      "ECONNREFUSED",
    ]);
    expect(storageError.message).toMatch(/refused the connection.*Nothing was changed/);
    expect(storageError.message).toContain("postgres:***@");
    expect(storageError.message).not.toContain(new URL(url).password);
  });

  it("a journal held past the lock timeout: STORAGE_BUSY (retryable), nothing changed, then it works", async () => {
    const storage = await openAt(url, { lockTimeoutMs: 200 });
    const before = await seed(storage);
    const holder = await adminClient(url);
    await holder.query("BEGIN");
    await holder.query("SELECT pg_advisory_xact_lock($1::bigint)", [lockKey(storage.schema, "create")]);
    const outcome = await settle(storage.createJournal.beginBoatCreate("bot-1", BODY));
    const error = storageErrorOf((outcome as { error: unknown }).error);
    expect([error.code, error.retryable]).toEqual(["STORAGE_BUSY", true]);
    expect(error.message).toMatch(/busy.*Nothing was changed\. Retry/);
    await holder.query("ROLLBACK");
    expect(await storage.exportAll()).toEqual(before);
    await afterFault(storage, before, "bot-1");
  });
});
