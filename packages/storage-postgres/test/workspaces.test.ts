// Workspaces on a real PostgreSQL: blobs plus a versioned head manifest, every change one compare-and-set.
// Random command sequences against an in-memory model; a stale writer refused with nothing changed; a
// restore replayed by operation id; a blob whose bytes were damaged is never served; a backend terminated
// mid-transaction and a lost COMMIT answer leave the head wholly old or wholly new.
import { createHash } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { isStorageError, isWorkspaceError, type WorkspaceHead } from "@drydock/storage";
import fc from "fast-check";
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

describe("workspaces: the operations and their refusals", () => {
  it("write, read, list, delete: each change bumps the version by one; a checkpoint does not", async () => {
    const storage = await stores.open();
    const ws = storage.workspaces;
    expect(await ws.head("ada")).toEqual({ botId: "ada", version: 0, files: [] });
    const first = await ws.writeFile("ada", "notes/plan.md", bytes("version one"));
    expect(first).toEqual({
      version: 1,
      file: { type: "file", path: "notes/plan.md", size: 11, mode: 0o600, sha256: sha("version one") },
    });
    expect((await ws.writeFile("ada", "a.txt", bytes(""), { expectedVersion: 1 })).version).toBe(2);
    const head = await ws.head("ada");
    expect([head.version, head.files.map((f) => f.path)]).toEqual([2, ["a.txt", "notes/plan.md"]]);
    const read = await ws.readFile("ada", "notes/plan.md");
    expect([text(read.bytes), read.version]).toEqual(["version one", 2]);
    const checkpoint = await ws.checkpoint("ada", "cp-1");
    expect(checkpoint).toMatchObject({ checkpointId: "cp-1", botId: "ada", version: 2, files: 2, bytes: 11 });
    expect((await ws.head("ada")).version).toBe(2);
    expect(await ws.deleteFile("ada", "a.txt", { expectedVersion: 2 })).toEqual({ version: 3 });
    expect(await codeOf(() => ws.readFile("ada", "a.txt"))).toBe("WORKSPACE_FILE_NOT_FOUND");
    // Another bot's workspace is its own.
    expect(await ws.head("bob")).toEqual({ botId: "bob", version: 0, files: [] });
    expect(await ws.listCheckpoints("ada")).toEqual([checkpoint]);
    expect(await ws.getCheckpoint("bob", "cp-1")).toBeNull();
  });

  it("a stale writer's compare-and-set is refused, names the current version, and changes nothing", async () => {
    const storage = await stores.open();
    const ws = storage.workspaces;
    await ws.writeFile("ada", "f", bytes("one"));
    await ws.checkpoint("ada", "cp-old");
    await ws.writeFile("ada", "f", bytes("two"), { expectedVersion: 1 });
    const before = await contents(storage, "ada");
    const calls = [
      () => ws.writeFile("ada", "f", bytes("zombie"), { expectedVersion: 1 }),
      () => ws.writeFile("ada", "g", bytes("zombie"), { expectedVersion: 0 }),
      () => ws.deleteFile("ada", "f", { expectedVersion: 1 }),
      () => ws.checkpoint("ada", "cp-zombie", { expectedVersion: 1 }),
      () => ws.restore("ada", "cp-old", "op-zombie", { expectedVersion: 3 }),
    ];
    for (const call of calls) {
      const error = await refusal(call);
      expect(isWorkspaceError(error) && [error.code, error.currentVersion]).toEqual([
        "WORKSPACE_VERSION_CONFLICT",
        2,
      ]);
      expect((error as Error).message).toMatch(/is at version 2, not the version .* Nothing was changed/);
    }
    expect(await contents(storage, "ada")).toEqual(before);
    expect(await ws.getCheckpoint("ada", "cp-zombie")).toBeNull();
    expect(await ws.getRestore("op-zombie")).toBeNull();
  });

  it("refuses bad input before touching anything: ids, paths, versions, size, a file on a file's path", async () => {
    const storage = await stores.open({ maxFileBytes: 8 });
    const ws = storage.workspaces;
    await ws.writeFile("ada", "dir/file", bytes("x"));
    const cases: [() => Promise<unknown>, string][] = [
      [() => ws.writeFile("no such bot!", "f", bytes("x")), "WORKSPACE_INVALID_ARGUMENT"],
      [() => ws.writeFile("ada", "/abs", bytes("x")), "WORKSPACE_INVALID_ARGUMENT"],
      [() => ws.writeFile("ada", "a/../b", bytes("x")), "WORKSPACE_INVALID_ARGUMENT"],
      [() => ws.writeFile("ada", "a//b", bytes("x")), "WORKSPACE_INVALID_ARGUMENT"],
      [() => ws.writeFile("ada", "x".repeat(1025), bytes("x")), "WORKSPACE_INVALID_ARGUMENT"],
      [() => ws.writeFile("ada", "f", bytes("123456789")), "WORKSPACE_FILE_TOO_LARGE"],
      [() => ws.writeFile("ada", "f", bytes("x"), { expectedVersion: -1 }), "WORKSPACE_INVALID_ARGUMENT"],
      [() => ws.writeFile("ada", "dir", bytes("x")), "WORKSPACE_INVALID_ARGUMENT"],
      [() => ws.writeFile("ada", "dir/file/deeper", bytes("x")), "WORKSPACE_INVALID_ARGUMENT"],
      [() => ws.deleteFile("ada", "dir"), "WORKSPACE_FILE_NOT_FOUND"],
      [() => ws.checkpoint("ada", "bad id"), "WORKSPACE_INVALID_ARGUMENT"],
      [() => ws.restore("ada", "missing", "op-1"), "WORKSPACE_CHECKPOINT_NOT_FOUND"],
      [() => ws.restore("ada", "cp", "bad op!"), "WORKSPACE_INVALID_ARGUMENT"],
    ];
    for (const [call, code] of cases) expect(await codeOf(call)).toBe(code);
    expect(await contents(storage, "ada")).toEqual({ version: 1, files: { "dir/file": "x" } });
  });

  it("a restore replaces the manifest in one step; a retry with the same operation id answers the recorded restore and applies nothing again", async () => {
    const storage = await stores.open();
    const ws = storage.workspaces;
    await ws.writeFile("ada", "plan.md", bytes("version one"));
    await ws.writeFile("ada", "keep/me", bytes("kept"));
    await ws.checkpoint("ada", "cp-1");
    await ws.writeFile("ada", "plan.md", bytes("version two"));
    await ws.deleteFile("ada", "keep/me");
    await ws.writeFile("ada", "new.txt", bytes("new"));
    const restored = await ws.restore("ada", "cp-1", "op-1");
    expect(restored).toMatchObject({ botId: "ada", checkpointId: "cp-1", fromVersion: 5, toVersion: 6 });
    expect(await contents(storage, "ada")).toEqual({
      version: 6,
      files: { "keep/me": "kept", "plan.md": "version one" },
    });
    await ws.writeFile("ada", "plan.md", bytes("version three"));
    expect(await ws.restore("ada", "cp-1", "op-1")).toEqual(restored);
    expect(await ws.getRestore("op-1")).toEqual(restored);
    expect((await contents(storage, "ada")).files["plan.md"]).toBe("version three");
    // The same ids for something else are refused; a checkpoint id retried on its bot is the same checkpoint.
    expect(await codeOf(() => ws.restore("bob", "cp-1", "op-1"))).toBe("WORKSPACE_ID_CONFLICT");
    expect(await codeOf(() => ws.checkpoint("bob", "cp-1"))).toBe("WORKSPACE_ID_CONFLICT");
    expect(await codeOf(() => ws.restore("bob", "cp-1", "op-2"))).toBe("WORKSPACE_CHECKPOINT_NOT_FOUND");
    expect(await ws.checkpoint("ada", "cp-1")).toEqual(await ws.getCheckpoint("ada", "cp-1"));
    expect((await ws.head("ada")).version).toBe(7);
  });

  it("retiring a deleted bot's workspace: kept under a name no bot can use, never listed or restored, the version moves on", async () => {
    const storage = await stores.open();
    const ws = storage.workspaces;
    await ws.writeFile("ada", "plan.md", bytes("secret"));
    await ws.checkpoint("ada", "cp-1");
    await ws.restore("ada", "cp-1", "op-1");
    const stale = (await ws.head("ada")).version;
    const { retiredAs } = await ws.retireWorkspace("ada");
    expect(retiredAs).toMatch(/^ada\.retired-\d+-[0-9a-f]{8}$/);
    expect(await ws.head("ada")).toEqual({ botId: "ada", version: stale + 1, files: [] });
    expect(await ws.listCheckpoints("ada")).toEqual([]);
    expect(await ws.getCheckpoint("ada", "cp-1")).toBeNull();
    expect(await ws.getRestore("op-1")).toBeNull();
    expect(await codeOf(() => ws.readFile("ada", "plan.md"))).toBe("WORKSPACE_FILE_NOT_FOUND");
    expect(await codeOf(() => ws.restore("ada", "cp-1", "op-2"))).toBe("WORKSPACE_CHECKPOINT_NOT_FOUND");
    expect(await codeOf(() => ws.checkpoint("ada", "cp-1"))).toBe("WORKSPACE_ID_CONFLICT");
    // A writer that read the deleted bot's workspace fails its compare-and-set on the new one.
    expect(await codeOf(() => ws.writeFile("ada", "x", bytes("zombie"), { expectedVersion: stale }))).toBe(
      "WORKSPACE_VERSION_CONFLICT",
    );
    // Kept: the files as a checkpoint of the retired name, the checkpoint and the restore with it.
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
    // Nothing left to retire: nothing changes.
    expect(await ws.retireWorkspace("ada")).toEqual({ retiredAs: null });
    expect(await ws.retireWorkspace("bob")).toEqual({ retiredAs: null });
    expect((await ws.head("ada")).version).toBe(stale + 1);
  });

  it("a blob whose stored bytes no longer hash to its name is never served (STORAGE_CORRUPT), nor restored from", async () => {
    const storage = await stores.open();
    const ws = storage.workspaces;
    await ws.writeFile("ada", "f", bytes("the real bytes"));
    await ws.checkpoint("ada", "cp-1");
    await ws.deleteFile("ada", "f");
    const sql = await admin(storage);
    await sql.query("UPDATE ws_blobs SET bytes = $1 WHERE sha256 = $2", [
      bytes("the fake bytes"),
      sha("the real bytes"),
    ]);
    await ws.restore("ada", "cp-1", "op-1");
    const error = await refusal(() => ws.readFile("ada", "f"));
    expect(isStorageError(error) && error.code).toBe("STORAGE_CORRUPT");
    expect((error as Error).message).toMatch(/does not hash to its name/);
    // A missing blob: the restore is refused whole, the head unchanged.
    await ws.writeFile("ada", "g", bytes("g"));
    await ws.checkpoint("ada", "cp-2");
    await sql.query("DELETE FROM ws_blobs WHERE sha256 = $1", [sha("g")]);
    const head = await ws.head("ada");
    expect(await codeOf(() => ws.restore("ada", "cp-2", "op-2"))).toBe("STORAGE_CORRUPT");
    expect(await ws.head("ada")).toEqual(head);
    expect(await ws.getRestore("op-2")).toBeNull();
    // A damaged manifest is reported, never read as an empty workspace.
    await sql.query(
      'UPDATE ws_heads SET manifest = \'[{"type":"file","path":"/etc"}]\' WHERE bot_id = \'ada\'',
    );
    expect(await codeOf(() => ws.head("ada"))).toBe("STORAGE_CORRUPT");
    expect(await codeOf(() => ws.writeFile("ada", "h", bytes("h")))).toBe("STORAGE_CORRUPT");
  });
});

// ---------------------------------------------------------------------------------------------------------
// Model-based: random sequences on two bots against an in-memory model of the same rules.

type Cmd =
  | { op: "write"; bot: number; path: string; content: string; expect: number | null }
  | { op: "delete"; bot: number; path: string; expect: number | null }
  | { op: "checkpoint"; bot: number; id: number; expect: number | null }
  | { op: "restore"; bot: number; id: number; opId: number; expect: number | null }
  | { op: "read"; bot: number; path: string };

interface ModelBot {
  version: number;
  files: Map<string, string>;
}

const PATHS = ["a", "b", "d/x", "d/y", "d", "d/x/z"];
const offset = fc.option(fc.constantFrom(0, 0, -1, 1), { nil: null });
const command: fc.Arbitrary<Cmd> = fc.oneof(
  fc.record({
    op: fc.constant("write" as const),
    bot: fc.nat(1),
    path: fc.constantFrom(...PATHS),
    content: fc.constantFrom("", "one", "two", "ünïcode"),
    expect: offset,
  }),
  fc.record({
    op: fc.constant("delete" as const),
    bot: fc.nat(1),
    path: fc.constantFrom(...PATHS),
    expect: offset,
  }),
  fc.record({ op: fc.constant("checkpoint" as const), bot: fc.nat(1), id: fc.nat(3), expect: offset }),
  fc.record({
    op: fc.constant("restore" as const),
    bot: fc.nat(1),
    id: fc.nat(3),
    opId: fc.nat(3),
    expect: offset,
  }),
  fc.record({ op: fc.constant("read" as const), bot: fc.nat(1), path: fc.constantFrom(...PATHS) }),
);

function modelRun(
  bots: ModelBot[],
  checkpoints: Map<number, { bot: number; version: number; files: Map<string, string> }>,
  restores: Map<number, { bot: number; id: number; from: number; to: number }>,
  cmd: Cmd,
): string {
  const bot = bots[cmd.bot] as ModelBot;
  const expected = cmd.op === "read" || cmd.expect === null ? null : bot.version + cmd.expect;
  const stale = () => expected !== null && expected !== bot.version;
  const bump = (files: Map<string, string>) => {
    bot.files = files;
    bot.version += 1;
    return `ok ${bot.version}`;
  };
  switch (cmd.op) {
    case "read":
      return bot.files.has(cmd.path) ? `ok ${bot.files.get(cmd.path)}` : "WORKSPACE_FILE_NOT_FOUND";
    case "write": {
      if (expected !== null && expected < 0) return "WORKSPACE_INVALID_ARGUMENT";
      if (stale()) return "WORKSPACE_VERSION_CONFLICT";
      const clash = [...bot.files.keys()].some(
        (p) => cmd.path.startsWith(`${p}/`) || p.startsWith(`${cmd.path}/`),
      );
      if (clash) return "WORKSPACE_INVALID_ARGUMENT";
      return bump(new Map(bot.files).set(cmd.path, cmd.content));
    }
    case "delete": {
      if (expected !== null && expected < 0) return "WORKSPACE_INVALID_ARGUMENT";
      if (stale()) return "WORKSPACE_VERSION_CONFLICT";
      if (!bot.files.has(cmd.path)) return "WORKSPACE_FILE_NOT_FOUND";
      const files = new Map(bot.files);
      files.delete(cmd.path);
      return bump(files);
    }
    case "checkpoint": {
      if (expected !== null && expected < 0) return "WORKSPACE_INVALID_ARGUMENT";
      const existing = checkpoints.get(cmd.id);
      if (existing !== undefined)
        return existing.bot === cmd.bot ? `ok cp ${existing.version}` : "WORKSPACE_ID_CONFLICT";
      if (stale()) return "WORKSPACE_VERSION_CONFLICT";
      checkpoints.set(cmd.id, { bot: cmd.bot, version: bot.version, files: bot.files });
      return `ok cp ${bot.version}`;
    }
    case "restore": {
      if (expected !== null && expected < 0) return "WORKSPACE_INVALID_ARGUMENT";
      const done = restores.get(cmd.opId);
      if (done !== undefined) {
        return done.bot === cmd.bot && done.id === cmd.id
          ? `ok ${done.from}->${done.to}`
          : "WORKSPACE_ID_CONFLICT";
      }
      if (stale()) return "WORKSPACE_VERSION_CONFLICT";
      const checkpoint = checkpoints.get(cmd.id);
      if (checkpoint === undefined || checkpoint.bot !== cmd.bot) return "WORKSPACE_CHECKPOINT_NOT_FOUND";
      const from = bot.version;
      bump(checkpoint.files);
      restores.set(cmd.opId, { bot: cmd.bot, id: cmd.id, from, to: bot.version });
      return `ok ${from}->${bot.version}`;
    }
  }
}

async function realRun(storage: PostgresStorage, run: string, head: number, cmd: Cmd): Promise<string> {
  const ws = storage.workspaces;
  const bot = `${run}-bot${cmd.bot}`;
  const opts = cmd.op === "read" || cmd.expect === null ? undefined : { expectedVersion: head + cmd.expect };
  try {
    switch (cmd.op) {
      case "read":
        return `ok ${text((await ws.readFile(bot, cmd.path)).bytes)}`;
      case "write":
        return `ok ${(await ws.writeFile(bot, cmd.path, bytes(cmd.content), opts)).version}`;
      case "delete":
        return `ok ${(await ws.deleteFile(bot, cmd.path, opts)).version}`;
      case "checkpoint":
        return `ok cp ${(await ws.checkpoint(bot, `${run}-cp${cmd.id}`, opts)).version}`;
      case "restore": {
        const r = await ws.restore(bot, `${run}-cp${cmd.id}`, `${run}-op${cmd.opId}`, opts);
        return `ok ${r.fromVersion}->${r.toVersion}`;
      }
    }
  } catch (error) {
    if (isWorkspaceError(error)) return error.code;
    throw error;
  }
}

describe("workspaces: model-based sequences", () => {
  it("every answer and every head after each step equal the model's", async () => {
    const storage = await stores.open();
    let runs = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(command, { minLength: 1, maxLength: 25 }), async (cmds) => {
        const run = `r${++runs}`;
        const bots: ModelBot[] = [
          { version: 0, files: new Map() },
          { version: 0, files: new Map() },
        ];
        const checkpoints = new Map<number, { bot: number; version: number; files: Map<string, string> }>();
        const restores = new Map<number, { bot: number; id: number; from: number; to: number }>();
        for (const cmd of cmds) {
          const head = (bots[cmd.bot] as ModelBot).version;
          const want = modelRun(bots, checkpoints, restores, cmd);
          expect(await realRun(storage, run, head, cmd)).toBe(want);
          const model = bots[cmd.bot] as ModelBot;
          const got = await contents(storage, `${run}-bot${cmd.bot}`);
          expect(got).toEqual({ version: model.version, files: Object.fromEntries([...model.files].sort()) });
        }
      }),
      { numRuns: 40 },
    );
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
