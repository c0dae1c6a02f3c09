import { createHash } from "node:crypto";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { Storage } from "../contract.js";
import { isStorageError } from "../errors.js";
import { isWorkspaceError, type WorkspaceStore } from "../workspaces.js";
import { type ConformanceTarget, type Fresh, killAtPoint, spawnRace } from "./index.js";

/**
 * The workspace part of the conformance suite, written against `WorkspaceStore` only: random command
 * sequences against an in-memory model (answers, versions, error codes, the head after each step), fuzzed
 * inputs refused with nothing changed, a compare-and-set race between two processes, idempotent checkpoint
 * and restore ids, retire, a corrupted blob never served, and a restore SIGKILLed at each crash point.
 */

/** What the suite needs from a backend beyond `open`: a way to damage a stored blob (test only). */
export interface WorkspaceConformanceHooks {
  /** Replaces the stored bytes of blob `sha256` in the store at `dataDir` with `bytes` (same length or not). */
  corruptBlob(dataDir: string, sha256: string, bytes: Uint8Array): Promise<void> | void;
}

const bytes = (text: string) => Buffer.from(text, "utf8");
const sha = (text: string) => createHash("sha256").update(text).digest("hex");
const text = (data: Uint8Array) => Buffer.from(data).toString("utf8");

/** The code of a refusal: a WorkspaceError's or a StorageError's (anything else, or success, fails the test). */
async function codeOf(call: () => Promise<unknown>): Promise<string> {
  let result: unknown;
  try {
    result = await call();
  } catch (error) {
    if (isWorkspaceError(error) || isStorageError(error)) return error.code;
    throw error;
  }
  throw new Error(`expected a refusal, got ${JSON.stringify(result)}`);
}

/** The head as path → text, with its version (what a client could read back). */
async function contents(ws: WorkspaceStore, botId: string) {
  const head = await ws.head(botId);
  const files: Record<string, string> = {};
  for (const file of head.files) files[file.path] = text((await ws.readFile(botId, file.path)).bytes);
  return { version: head.version, files };
}

// ---------------------------------------------------------------------------------------------------------
// The model: two bots, a few paths (some clash: 'd' and 'd/x'), a few checkpoint and operation ids.

type Cmd =
  | { op: "write"; bot: number; path: string; content: string; expect: number | null }
  | { op: "delete"; bot: number; path: string; expect: number | null }
  | { op: "checkpoint"; bot: number; id: number; expect: number | null }
  | { op: "restore"; bot: number; id: number; opId: number; expect: number | null }
  | { op: "retire"; bot: number }
  | { op: "read"; bot: number; path: string };

/** An owner: a bot's index, or a retired workspace's (never equal to a live bot's). */
type Owner = number | `retired-${number}`;

interface ModelState {
  bots: { version: number; files: Map<string, string> }[];
  checkpoints: Map<number, { owner: Owner; version: number; files: Map<string, string> }>;
  restores: Map<number, { owner: Owner; id: number; from: number; to: number }>;
  retired: number;
}

const PATHS = ["a", "b", "d/x", "d/y", "d", "d/x/z", "ünï/cødé"];
const offset = fc.option(fc.constantFrom(0, 0, -1, 1), { nil: null });
const commandArb: fc.Arbitrary<Cmd> = fc.oneof(
  {
    arbitrary: fc.record({
      op: fc.constant("write" as const),
      bot: fc.nat(1),
      path: fc.constantFrom(...PATHS),
      content: fc.constantFrom("", "one", "two", "ünïcode"),
      expect: offset,
    }),
    weight: 4,
  },
  {
    arbitrary: fc.record({
      op: fc.constant("delete" as const),
      bot: fc.nat(1),
      path: fc.constantFrom(...PATHS),
      expect: offset,
    }),
    weight: 2,
  },
  {
    arbitrary: fc.record({
      op: fc.constant("checkpoint" as const),
      bot: fc.nat(1),
      id: fc.nat(3),
      expect: offset,
    }),
    weight: 2,
  },
  {
    arbitrary: fc.record({
      op: fc.constant("restore" as const),
      bot: fc.nat(1),
      id: fc.nat(3),
      opId: fc.nat(3),
      expect: offset,
    }),
    weight: 2,
  },
  { arbitrary: fc.record({ op: fc.constant("retire" as const), bot: fc.nat(1) }), weight: 1 },
  {
    arbitrary: fc.record({
      op: fc.constant("read" as const),
      bot: fc.nat(1),
      path: fc.constantFrom(...PATHS),
    }),
    weight: 2,
  },
);

export function modelApply(state: ModelState, cmd: Cmd): string {
  const bot = state.bots[cmd.bot] as ModelState["bots"][number];
  const expected =
    cmd.op === "read" || cmd.op === "retire" || cmd.expect === null ? null : bot.version + cmd.expect;
  if (expected !== null && expected < 0) return "WORKSPACE_INVALID_ARGUMENT";
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
      if (stale()) return "WORKSPACE_VERSION_CONFLICT";
      const clash = [...bot.files.keys()].some(
        (p) => cmd.path.startsWith(`${p}/`) || p.startsWith(`${cmd.path}/`),
      );
      if (clash) return "WORKSPACE_INVALID_ARGUMENT";
      return bump(new Map(bot.files).set(cmd.path, cmd.content));
    }
    case "delete": {
      if (stale()) return "WORKSPACE_VERSION_CONFLICT";
      if (!bot.files.has(cmd.path)) return "WORKSPACE_FILE_NOT_FOUND";
      const files = new Map(bot.files);
      files.delete(cmd.path);
      return bump(files);
    }
    case "checkpoint": {
      const existing = state.checkpoints.get(cmd.id);
      if (existing !== undefined)
        return existing.owner === cmd.bot ? `ok cp ${existing.version}` : "WORKSPACE_ID_CONFLICT";
      if (stale()) return "WORKSPACE_VERSION_CONFLICT";
      state.checkpoints.set(cmd.id, { owner: cmd.bot, version: bot.version, files: bot.files });
      return `ok cp ${bot.version}`;
    }
    case "restore": {
      const done = state.restores.get(cmd.opId);
      if (done !== undefined) {
        return done.owner === cmd.bot && done.id === cmd.id
          ? `ok ${done.from}->${done.to}`
          : "WORKSPACE_ID_CONFLICT";
      }
      if (stale()) return "WORKSPACE_VERSION_CONFLICT";
      const checkpoint = state.checkpoints.get(cmd.id);
      if (checkpoint === undefined || checkpoint.owner !== cmd.bot) return "WORKSPACE_CHECKPOINT_NOT_FOUND";
      const from = bot.version;
      bump(checkpoint.files);
      state.restores.set(cmd.opId, { owner: cmd.bot, id: cmd.id, from, to: bot.version });
      return `ok ${from}->${bot.version}`;
    }
    case "retire": {
      const owns = [...state.checkpoints.values()].some((c) => c.owner === cmd.bot);
      if (bot.files.size === 0 && !owns) return "ok null";
      const retired: Owner = `retired-${++state.retired}`;
      for (const c of state.checkpoints.values()) if (c.owner === cmd.bot) c.owner = retired;
      for (const r of state.restores.values()) if (r.owner === cmd.bot) r.owner = retired;
      if (bot.version > 0) bump(new Map());
      return "ok retired";
    }
  }
}

async function storeApply(ws: WorkspaceStore, run: string, head: number, cmd: Cmd): Promise<string> {
  const bot = `${run}-bot${cmd.bot}`;
  const opts =
    cmd.op === "read" || cmd.op === "retire" || cmd.expect === null
      ? undefined
      : { expectedVersion: head + cmd.expect };
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
      case "retire": {
        const { retiredAs } = await ws.retireWorkspace(bot);
        if (retiredAs === null) return "ok null";
        expect(retiredAs).toMatch(new RegExp(`^${bot}\\.retired-\\d+-[0-9a-f]{8}$`));
        return "ok retired";
      }
    }
  } catch (error) {
    if (isWorkspaceError(error)) return error.code;
    throw error;
  }
}

/** Registers the workspace part for `target` (inside describeStorageConformance). */
export function describeWorkspaces(target: ConformanceTarget, fresh: Fresh, workerPath: string): void {
  const hooks = target.workspaces;
  const withStorage = async (
    body: (storage: Storage, dataDir: string) => Promise<void>,
    options?: { maxFileBytes?: number },
  ) => {
    const dir = fresh();
    const storage = await target.open(dir.dataDir, options);
    try {
      await body(storage, dir.dataDir);
    } finally {
      await storage.close();
    }
  };

  describe("workspaces", () => {
    it("model-based: every answer, version, error code and head after each step equal the model's", async () => {
      await withStorage(async (storage) => {
        const ws = storage.workspaces;
        let runs = 0;
        await fc.assert(
          fc.asyncProperty(fc.array(commandArb, { minLength: 1, maxLength: 25 }), async (cmds) => {
            const run = `r${++runs}`;
            const state: ModelState = {
              bots: [
                { version: 0, files: new Map() },
                { version: 0, files: new Map() },
              ],
              checkpoints: new Map(),
              restores: new Map(),
              retired: 0,
            };
            for (const cmd of cmds) {
              const head = (state.bots[cmd.bot] as ModelState["bots"][number]).version;
              const want = modelApply(state, cmd);
              expect(await storeApply(ws, run, head, cmd), JSON.stringify(cmd)).toBe(want);
              for (const [i, model] of state.bots.entries()) {
                expect(await contents(ws, `${run}-bot${i}`)).toEqual({
                  version: model.version,
                  files: Object.fromEntries([...model.files].sort(([a], [b]) => (a < b ? -1 : 1))),
                });
                const listed = (await ws.listCheckpoints(`${run}-bot${i}`)).map((c) => c.checkpointId).sort();
                const owned = [...state.checkpoints]
                  .filter(([, c]) => c.owner === i)
                  .map(([id]) => `${run}-cp${id}`);
                expect(listed).toEqual(owned.sort());
              }
              for (const [opId, r] of state.restores) {
                const got = await ws.getRestore(`${run}-op${opId}`);
                expect(got === null ? null : [got.fromVersion, got.toVersion]).toEqual(
                  typeof r.owner === "number" ? [r.from, r.to] : null,
                );
              }
            }
          }),
          { numRuns: target.runs ?? 25 },
        );
      });
    });

    it("write, read, list, delete: each change bumps the version by one; a checkpoint does not", async () => {
      await withStorage(async (storage) => {
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
        expect(checkpoint).toMatchObject({
          checkpointId: "cp-1",
          botId: "ada",
          version: 2,
          files: 2,
          bytes: 11,
        });
        expect((await ws.head("ada")).version).toBe(2);
        expect(await ws.deleteFile("ada", "a.txt", { expectedVersion: 2 })).toEqual({ version: 3 });
        expect(await codeOf(() => ws.readFile("ada", "a.txt"))).toBe("WORKSPACE_FILE_NOT_FOUND");
        expect(await ws.head("bob")).toEqual({ botId: "bob", version: 0, files: [] });
        expect(await ws.listCheckpoints("ada")).toEqual([checkpoint]);
        expect(await ws.getCheckpoint("bob", "cp-1")).toBeNull();
        // Reopened: everything is where it was.
        await storage.close();
        const again = await target.open(storage.dataDir);
        try {
          expect(await contents(again.workspaces, "ada")).toEqual({
            version: 3,
            files: { "notes/plan.md": "version one" },
          });
          expect(await again.workspaces.listCheckpoints("ada")).toEqual([checkpoint]);
        } finally {
          await again.close();
        }
      });
    });

    it("a stale writer's compare-and-set is refused, names the current version, and changes nothing", async () => {
      await withStorage(async (storage) => {
        const ws = storage.workspaces;
        await ws.writeFile("ada", "f", bytes("one"));
        await ws.checkpoint("ada", "cp-old");
        await ws.writeFile("ada", "f", bytes("two"), { expectedVersion: 1 });
        const before = await contents(ws, "ada");
        const calls = [
          () => ws.writeFile("ada", "f", bytes("zombie"), { expectedVersion: 1 }),
          () => ws.writeFile("ada", "g", bytes("zombie"), { expectedVersion: 0 }),
          () => ws.deleteFile("ada", "f", { expectedVersion: 1 }),
          () => ws.checkpoint("ada", "cp-zombie", { expectedVersion: 1 }),
          () => ws.restore("ada", "cp-old", "op-zombie", { expectedVersion: 3 }),
        ];
        for (const call of calls) {
          const error = await call().then(
            () => null,
            (e: unknown) => e,
          );
          expect(isWorkspaceError(error) && [error.code, error.currentVersion]).toEqual([
            "WORKSPACE_VERSION_CONFLICT",
            2,
          ]);
          expect((error as Error).message).toMatch(/is at version 2, not the version .* Nothing was changed/);
        }
        expect(await contents(ws, "ada")).toEqual(before);
        expect(await ws.getCheckpoint("ada", "cp-zombie")).toBeNull();
        expect(await ws.getRestore("op-zombie")).toBeNull();
      });
    });

    it("refuses bad input before touching anything: ids, paths, versions, size, a file on a file's path", async () => {
      await withStorage(
        async (storage) => {
          const ws = storage.workspaces;
          await ws.writeFile("ada", "dir/file", bytes("x"));
          const cases: [() => Promise<unknown>, string][] = [
            [() => ws.writeFile("no such bot!", "f", bytes("x")), "WORKSPACE_INVALID_ARGUMENT"],
            [() => ws.writeFile("ada", "/abs", bytes("x")), "WORKSPACE_INVALID_ARGUMENT"],
            [() => ws.writeFile("ada", "a/../b", bytes("x")), "WORKSPACE_INVALID_ARGUMENT"],
            [() => ws.writeFile("ada", "a//b", bytes("x")), "WORKSPACE_INVALID_ARGUMENT"],
            [() => ws.writeFile("ada", "x".repeat(1025), bytes("x")), "WORKSPACE_INVALID_ARGUMENT"],
            [() => ws.writeFile("ada", "f", bytes("123456789")), "WORKSPACE_FILE_TOO_LARGE"],
            [() => ws.writeFile("ada", "f", "text" as unknown as Uint8Array), "WORKSPACE_INVALID_ARGUMENT"],
            [
              () => ws.writeFile("ada", "f", bytes("x"), { expectedVersion: -1 }),
              "WORKSPACE_INVALID_ARGUMENT",
            ],
            [() => ws.writeFile("ada", "dir", bytes("x")), "WORKSPACE_INVALID_ARGUMENT"],
            [() => ws.writeFile("ada", "dir/file/deeper", bytes("x")), "WORKSPACE_INVALID_ARGUMENT"],
            [() => ws.deleteFile("ada", "dir"), "WORKSPACE_FILE_NOT_FOUND"],
            [() => ws.checkpoint("ada", "bad id"), "WORKSPACE_INVALID_ARGUMENT"],
            [() => ws.restore("ada", "missing", "op-1"), "WORKSPACE_CHECKPOINT_NOT_FOUND"],
            [() => ws.restore("ada", "cp", "bad op!"), "WORKSPACE_INVALID_ARGUMENT"],
          ];
          for (const [call, code] of cases) expect(await codeOf(call)).toBe(code);
          expect(await contents(ws, "ada")).toEqual({ version: 1, files: { "dir/file": "x" } });
        },
        { maxFileBytes: 8 },
      );
    });

    it("fuzzed ids, paths and versions are refused as WORKSPACE_INVALID_ARGUMENT and change nothing", async () => {
      await withStorage(async (storage) => {
        const ws = storage.workspaces;
        await ws.writeFile("ada", "kept", bytes("kept"));
        await ws.checkpoint("ada", "cp-1");
        const notBotId = fc
          .anything()
          .filter((v) => !(typeof v === "string" && /^[A-Za-z0-9_-]{1,120}$/.test(v)));
        const badPath = fc.oneof(
          fc.anything().filter((v) => typeof v !== "string"),
          fc.constantFrom(
            "",
            "/",
            "/a",
            "a/",
            "a//b",
            "./a",
            "a/./b",
            "..",
            "a/..",
            "a\\b",
            "a\0b",
            "x".repeat(1025),
          ),
        );
        const notId = fc
          .anything()
          .filter((v) => !(typeof v === "string" && /^[A-Za-z0-9_-]{1,64}$/.test(v)));
        const badVersion = fc.oneof(
          fc.integer({ max: -1 }),
          fc.double().filter((v) => !Number.isSafeInteger(v)),
          fc.constantFrom("1", null, Number.MAX_SAFE_INTEGER + 1),
        );
        let tried = 0;
        await fc.assert(
          fc.asyncProperty(notBotId, badPath, notId, badVersion, async (botId, path, id, version) => {
            const b = botId as string;
            const p = path as string;
            const i = id as string;
            const v = { expectedVersion: version as number };
            const calls = [
              () => ws.head(b),
              () => ws.writeFile(b, "f", bytes("x")),
              () => ws.writeFile("ada", p, bytes("x")),
              () => ws.readFile("ada", p),
              () => ws.deleteFile("ada", p),
              () => ws.writeFile("ada", "f", bytes("x"), v),
              () => ws.deleteFile("ada", "kept", v),
              () => ws.checkpoint("ada", i),
              () => ws.checkpoint("ada", "cp-2", v),
              () => ws.restore("ada", i, "op-1"),
              () => ws.restore("ada", "cp-1", i),
              () => ws.restore("ada", "cp-1", "op-1", v),
              () => ws.getRestore(i),
              () => ws.retireWorkspace(b),
            ];
            for (const call of calls) {
              tried += 1;
              expect(await codeOf(call)).toBe("WORKSPACE_INVALID_ARGUMENT");
            }
          }),
          { numRuns: 30 },
        );
        expect(tried).toBe(30 * 14);
        expect(await contents(ws, "ada")).toEqual({ version: 1, files: { kept: "kept" } });
        expect((await ws.listCheckpoints("ada")).map((c) => c.checkpointId)).toEqual(["cp-1"]);
        expect(await ws.getRestore("op-1")).toBeNull();
      });
    });

    it("a restore replaces the manifest in one step; retried ids answer what they recorded; ids of another bot conflict", async () => {
      await withStorage(async (storage) => {
        const ws = storage.workspaces;
        await ws.writeFile("ada", "plan.md", bytes("version one"));
        await ws.writeFile("ada", "keep/me", bytes("kept"));
        await ws.checkpoint("ada", "cp-1");
        await ws.writeFile("ada", "plan.md", bytes("version two"));
        await ws.deleteFile("ada", "keep/me");
        await ws.writeFile("ada", "new.txt", bytes("new"));
        const restored = await ws.restore("ada", "cp-1", "op-1");
        expect(restored).toMatchObject({
          operationId: "op-1",
          botId: "ada",
          checkpointId: "cp-1",
          fromVersion: 5,
          toVersion: 6,
          state: "completed",
        });
        expect(await contents(ws, "ada")).toEqual({
          version: 6,
          files: { "keep/me": "kept", "plan.md": "version one" },
        });
        await ws.writeFile("ada", "plan.md", bytes("version three"));
        expect(await ws.restore("ada", "cp-1", "op-1")).toEqual(restored);
        expect(await ws.getRestore("op-1")).toEqual(restored);
        expect((await contents(ws, "ada")).files["plan.md"]).toBe("version three");
        expect(await codeOf(() => ws.restore("bob", "cp-1", "op-1"))).toBe("WORKSPACE_ID_CONFLICT");
        expect(await codeOf(() => ws.restore("ada", "cp-2", "op-1"))).toBe("WORKSPACE_ID_CONFLICT");
        expect(await codeOf(() => ws.checkpoint("bob", "cp-1"))).toBe("WORKSPACE_ID_CONFLICT");
        expect(await codeOf(() => ws.restore("bob", "cp-1", "op-2"))).toBe("WORKSPACE_CHECKPOINT_NOT_FOUND");
        expect(await ws.checkpoint("ada", "cp-1")).toEqual(await ws.getCheckpoint("ada", "cp-1"));
        expect(await contents(ws, "bob")).toEqual({ version: 0, files: {} });
        expect((await ws.head("ada")).version).toBe(7);
      });
    });

    it("retiring a deleted bot's workspace: never listed, read or restored again; its ids stay taken; the version moves on", async () => {
      await withStorage(async (storage) => {
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
        expect(await codeOf(() => ws.restore("ada", "cp-1", "op-1"))).toBe("WORKSPACE_ID_CONFLICT");
        expect(
          await codeOf(() => ws.writeFile("ada", "x", bytes("zombie"), { expectedVersion: stale })),
        ).toBe("WORKSPACE_VERSION_CONFLICT");
        // Nothing left to retire: nothing changes.
        expect(await ws.retireWorkspace("ada")).toEqual({ retiredAs: null });
        expect(await ws.retireWorkspace("bob")).toEqual({ retiredAs: null });
        expect(await ws.head("bob")).toEqual({ botId: "bob", version: 0, files: [] });
        expect((await ws.head("ada")).version).toBe(stale + 1);
        // A bot created later under the id starts empty and works.
        expect(
          (await ws.writeFile("ada", "plan.md", bytes("new bot"), { expectedVersion: stale + 1 })).version,
        ).toBe(stale + 2);
      });
    });

    it.runIf(hooks !== undefined)(
      "a blob whose stored bytes no longer hash to its name is refused as STORAGE_CORRUPT, never served",
      async () => {
        await withStorage(async (storage, dataDir) => {
          const ws = storage.workspaces;
          await ws.writeFile("ada", "f", bytes("the real bytes"));
          await ws.writeFile("ada", "g", bytes("untouched"));
          await ws.checkpoint("ada", "cp-1");
          await ws.deleteFile("ada", "f");
          await hooks?.corruptBlob(dataDir, sha("the real bytes"), bytes("the fake bytes"));
          await ws.restore("ada", "cp-1", "op-1");
          const head = await ws.head("ada");
          for (const damage of [bytes("the fake bytes"), bytes("short"), bytes("")]) {
            await hooks?.corruptBlob(dataDir, sha("the real bytes"), damage);
            const error = await ws.readFile("ada", "f").then(
              (served) => served,
              (e: unknown) => e,
            );
            expect(isStorageError(error) && error.code).toBe("STORAGE_CORRUPT");
            expect((error as Error).message).toMatch(/does not hash to its name.*has not changed it/);
          }
          expect(text((await ws.readFile("ada", "g")).bytes)).toBe("untouched");
          expect(await ws.head("ada")).toEqual(head);
        });
      },
    );

    it("two processes compare-and-set the same version at the same moment: one wins, the other is told the current version", async () => {
      const dir = fresh();
      const seed = await target.open(dir.dataDir);
      await seed.workspaces.writeFile("ada", "f", bytes("seed"));
      await seed.close();
      const results = await spawnRace(target, dir, workerPath, "ws-write", [["left"], ["right"]]);
      const winners = results.filter((r) => r.version === 2);
      const losers = results.filter((r) => r.code === "WORKSPACE_VERSION_CONFLICT");
      expect([winners.length, losers.length]).toEqual([1, 1]);
      expect(losers[0]?.currentVersion).toBe(2);
      const after = await target.open(dir.dataDir);
      try {
        const got = await contents(after.workspaces, "ada");
        expect(got.version).toBe(2);
        expect(["left", "right"]).toContain(got.files.f);
      } finally {
        await after.close();
      }
    });

    for (const { point, leaves } of target.workspaceCrashPoints ?? target.crashPoints) {
      it(`a restore SIGKILLed at ${point} leaves the head wholly ${leaves === "before" ? "old" : "new"}, and the next call works`, async () => {
        const dir = fresh();
        const seed = await target.open(dir.dataDir);
        const ws = seed.workspaces;
        await ws.writeFile("ada", "plan.md", bytes("old plan"));
        await ws.checkpoint("ada", "cp-1");
        await ws.writeFile("ada", "plan.md", bytes("new plan"));
        await ws.writeFile("ada", "extra", bytes("extra"));
        const before = await contents(ws, "ada");
        await seed.close();
        await killAtPoint(target, dir.dataDir, workerPath, "crash-ws-restore", point);
        const after = await target.open(dir.dataDir);
        try {
          const restored = { version: 4, files: { "plan.md": "old plan" } };
          expect(await contents(after.workspaces, "ada")).toEqual(leaves === "before" ? before : restored);
          const retry = await after.workspaces.restore("ada", "cp-1", "op-crash");
          expect([retry.fromVersion, retry.toVersion]).toEqual([3, 4]);
          expect(await contents(after.workspaces, "ada")).toEqual(restored);
          expect(
            (await after.workspaces.writeFile("ada", "next", bytes("n"), { expectedVersion: 4 })).version,
          ).toBe(5);
        } finally {
          await after.close();
        }
      });
    }
  });
}
