// Workspaces on a real PostgreSQL, what only this backend shows: the retired rows kept in the tables, rows
// damaged with SQL, and a backend terminated mid-transaction or a lost COMMIT answer leaving the head wholly
// old or wholly new.
import { createHash } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { isStorageError, isWorkspaceError, type WorkspaceHead } from "@drydock/storage";
import pg from "pg";
import { describe, expect, it } from "vitest";
import type { PostgresStorage } from "../src/index.js";
import { refusal, useFaultProxy, useStores } from "./helpers.js";

const stores = useStores("ws", { queryTimeoutMs: 5_000, resolveTimeoutMs: 5_000, lockTimeoutMs: 5_000 });

const bytes = (text: string) => Buffer.from(text, "utf8");
const sha = (text: string) => createHash("sha256").update(text).digest("hex");
const text = (data: Uint8Array) => Buffer.from(data).toString("utf8");

/** The code of a refusal: a WorkspaceError's or a StorageError's (anything else fails the test). */
async function codeOf(call: () => Promise<unknown>): Promise<string> {
  const error = await refusal(call);
  if (isWorkspaceError(error) || isStorageError(error)) return error.code;
  throw error;
}

async function admin(storage: PostgresStorage): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: stores.url() });
  client.on("error", () => {});
  await client.connect();
  await client.query(`SET search_path = ${storage.schema}`);
  stores.later(() => client.end().catch(() => {}));
  return client;
}

/** The head as path → text, with its version (what a client could read back). */
async function contents(storage: PostgresStorage, botId: string) {
  const head = await storage.workspaces.head(botId);
  const files: Record<string, string> = {};
  for (const file of head.files) {
    files[file.path] = text((await storage.workspaces.readFile(botId, file.path)).bytes);
  }
  return { version: head.version, files };
}

// The backend-neutral checks (operations, refusals, fuzzed input, stale compare-and-sets, idempotent ids,
// retire, a corrupted blob, model-based sequences, a CAS race and restores SIGKILLed at each crash point) are
// in the conformance suite (@drydock/storage/conformance, run by test/conformance.test.ts). Here: what only
// PostgreSQL's tables show, and its faults.
describe("workspaces on PostgreSQL: what the tables hold", () => {
  it("retiring keeps the files as a checkpoint of the retired name, with the bot's checkpoints and restores", async () => {
    const storage = await stores.open();
    const ws = storage.workspaces;
    await ws.writeFile("ada", "plan.md", bytes("secret"));
    await ws.checkpoint("ada", "cp-1");
    await ws.restore("ada", "cp-1", "op-1");
    const { retiredAs } = await ws.retireWorkspace("ada");
    expect(retiredAs).toMatch(/^ada\.retired-\d+-[0-9a-f]{8}$/);
    const sql = await admin(storage);
    const kept = await sql.query(
      "SELECT checkpoint_id, manifest FROM ws_checkpoints WHERE bot_id = $1 ORDER BY checkpoint_id",
      [retiredAs],
    );
    expect(kept.rows.map((r) => r.checkpoint_id)).toEqual([retiredAs, "cp-1"]);
    expect(kept.rows[0].manifest).toEqual([
      { type: "file", path: "plan.md", size: 6, mode: 0o600, sha256: sha("secret") },
    ]);
    expect((await sql.query("SELECT bot_id FROM ws_restores WHERE operation_id = 'op-1'")).rows).toEqual([
      { bot_id: retiredAs },
    ]);
  });

  it("a missing blob row refuses a restore whole; a damaged head manifest is reported, never read as empty", async () => {
    const storage = await stores.open();
    const ws = storage.workspaces;
    const sql = await admin(storage);
    await ws.writeFile("ada", "g", bytes("g"));
    await ws.checkpoint("ada", "cp-2");
    await ws.deleteFile("ada", "g");
    await sql.query("DELETE FROM ws_blobs WHERE sha256 = $1", [sha("g")]);
    const head = await ws.head("ada");
    expect(await codeOf(() => ws.restore("ada", "cp-2", "op-2"))).toBe("STORAGE_CORRUPT");
    expect(await ws.head("ada")).toEqual(head);
    expect(await ws.getRestore("op-2")).toBeNull();
    await sql.query(
      'UPDATE ws_heads SET manifest = \'[{"type":"file","path":"/etc"}]\' WHERE bot_id = \'ada\'',
    );
    expect(await codeOf(() => ws.head("ada"))).toBe("STORAGE_CORRUPT");
    expect(await codeOf(() => ws.writeFile("ada", "h", bytes("h")))).toBe("STORAGE_CORRUPT");
  });
});

// ---------------------------------------------------------------------------------------------------------
// Server faults mid-transaction: the head is wholly old or wholly new, and the next call works.

describe("workspaces: faults mid-transaction", () => {
  const proxy = useFaultProxy();

  it("pg_terminate_backend while a restore waits on the head's row: typed error, nothing changed, the retry applies once", async () => {
    const storage = await stores.open();
    const ws = storage.workspaces;
    await ws.writeFile("ada", "f", bytes("old"));
    await ws.checkpoint("ada", "cp-1");
    await ws.writeFile("ada", "f", bytes("new"));
    const before: WorkspaceHead = await ws.head("ada");
    const holder = await admin(storage);
    await holder.query("BEGIN");
    await holder.query("SELECT 1 FROM ws_heads WHERE bot_id = 'ada' FOR UPDATE");
    const call = ws.restore("ada", "cp-1", "op-1").then(
      (value) => ({ ok: true as const, value }),
      (error: unknown) => ({ ok: false as const, error }),
    );
    const sql = await admin(storage);
    let pid: number | undefined;
    for (let i = 0; i < 2_000 && pid === undefined; i += 1) {
      const { rows } = await sql.query(
        "SELECT pid FROM pg_stat_activity WHERE application_name = 'drydock' AND wait_event_type = 'Lock' AND query LIKE '%FROM ws_heads%FOR UPDATE'",
      );
      pid = (rows[0] as { pid: number } | undefined)?.pid;
      if (pid === undefined) await sleep(10);
    }
    expect(pid).toBeDefined();
    await sql.query("SELECT pg_terminate_backend($1)", [pid]);
    const outcome = await call;
    await holder.query("ROLLBACK");
    expect(outcome.ok).toBe(false);
    const error = (outcome as { error: unknown }).error;
    expect(isStorageError(error) && [error.code, error.retryable]).toEqual(["STORAGE_UNAVAILABLE", true]);
    expect((error as Error).message).toMatch(/did not commit\. Nothing was changed/);
    expect(await ws.head("ada")).toEqual(before);
    expect(await ws.getRestore("op-1")).toBeNull();
    const retried = await ws.restore("ada", "cp-1", "op-1");
    expect([retried.fromVersion, retried.toVersion]).toEqual([before.version, before.version + 1]);
    expect((await contents(storage, "ada")).files).toEqual({ f: "old" });
  });

  it("a lost COMMIT answer on a write: resolved by call id as committed, acknowledged once, version + 1", async () => {
    const direct = await stores.open();
    const storage = await stores.open({ url: proxy.url(stores.url()), schema: direct.schema });
    await storage.workspaces.writeFile("ada", "f", bytes("one"));
    const commits = proxy.commits;
    proxy.set({ kind: "drop-commit-answer", count: 1 });
    const written = await storage.workspaces.writeFile("ada", "f", bytes("two"), { expectedVersion: 1 });
    expect(proxy.commits).toBe(commits + 1);
    expect(written.version).toBe(2);
    expect(await contents(direct, "ada")).toEqual({ version: 2, files: { f: "two" } });
    proxy.set({ kind: "pass" });
  });

  it("a lost COMMIT that never arrived, on a restore: a typed error saying nothing changed, and the head is wholly old", async () => {
    const direct = await stores.open();
    const storage = await stores.open({ url: proxy.url(stores.url()), schema: direct.schema });
    const ws = storage.workspaces;
    await ws.writeFile("ada", "f", bytes("old"));
    await ws.checkpoint("ada", "cp-1");
    await ws.writeFile("ada", "f", bytes("new"));
    await ws.writeFile("ada", "g", bytes("g"));
    const before = await contents(direct, "ada");
    proxy.set({ kind: "drop-commit", count: 1 });
    const error = await refusal(() => ws.restore("ada", "cp-1", "op-1"));
    proxy.set({ kind: "pass" });
    expect(isStorageError(error) && error.code).toBe("STORAGE_UNAVAILABLE");
    expect((error as Error).message).toMatch(/did not commit\. Nothing was changed/);
    expect(await contents(direct, "ada")).toEqual(before);
    expect(await ws.restore("ada", "cp-1", "op-1")).toMatchObject({ fromVersion: 3, toVersion: 4 });
    expect(await contents(direct, "ada")).toEqual({ version: 4, files: { f: "old" } });
  });
});
