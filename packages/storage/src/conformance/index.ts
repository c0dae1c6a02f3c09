// @drydock/storage/conformance: the suite every storage backend's tests run, with a factory.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { spawnWorker, type Worker } from "@drydock/test-kit";
import fc from "fast-check";
import { afterEach, describe, expect, it } from "vitest";
import type { Storage, StorageCrashHook, StorageExport } from "../contract.js";
import { isStorageError } from "../errors.js";
import { describeChangeToken } from "./change-token.js";
import {
  applyToModel,
  applyToStorage,
  BODIES,
  canonicalExport,
  type JournalCommand,
  journalCommandArb,
  keyOf,
  newModels,
  newRunState,
  type RunState,
  registryCommandArb,
} from "./commands.js";
import { describeRegistry } from "./registry.js";
import { describeWorkspaces, type WorkspaceConformanceHooks } from "./workspaces.js";

export {
  applyToModel,
  applyToStorage,
  BOATS,
  BODIES,
  BOTS,
  canonicalExport,
  type JournalCommand,
  journalCommandArb,
  keyOf,
  newModels,
  newRunState,
  OPERATIONS,
  REGISTRY_BOTS,
  type RegistryCommand,
  type RunState,
  registryCommandArb,
  T0,
} from "./commands.js";
export { CreateModel, DeleteModel, type Outcome } from "./model.js";
export { RegistryModel } from "./registry-model.js";
export type { WorkspaceConformanceHooks } from "./workspaces.js";

export interface ConformanceOpenOptions {
  now?: () => number;
  newKey?: () => string;
  crash?: StorageCrashHook;
  /** The registry's limit, for a backend whose limit is configurable (the file backend's is 4,096). */
  maxBots?: number;
  /** Each journal's row limit, for a backend whose limit is configurable (the file formats' is 4,096). */
  maxRows?: number;
  /** A workspace file's size at most (the workspace part opens a store with a small one). */
  maxFileBytes?: number;
}

export interface ConformanceTarget {
  /** The backend's name in test titles ("file", "sqlite"). */
  name: string;
  open(dataDir: string, options?: ConformanceOpenOptions): Promise<Storage>;
  /**
   * Absolute path of a module exporting `open(dataDir, options)` like the one above, loaded by child
   * processes (via tsx with the sources) for the races and the SIGKILL tests.
   */
  workerModule: string;
  /**
   * The backend's crash points inside a write and which state a writer killed there leaves: "before"
   * (nothing of the write is visible) or "after" (all of it is).
   */
  crashPoints: { point: string; leaves: "before" | "after" }[];
  /** Runs per property (default 25; bounded, deterministic per seed). */
  runs?: number;
  /**
   * The registry's limit the limit test reaches: the backend's fixed cap (file: 4,096), or a small one it is
   * opened with (`maxBots`).
   */
  botLimit: number;
  /**
   * Each journal's row limit the import test reaches: the backend's fixed cap (default: the file formats'
   * 4,096), or one it is opened with (`maxRows`). A row backend's should be above 4,096, so the test also shows
   * that its import is not held to a file's cap.
   */
  rowLimit?: number;
  /** The test-only hooks of the workspace part (without them, the corrupted-blob test does not run). */
  workspaces?: WorkspaceConformanceHooks;
  /** The crash points a workspace restore passes, and what each leaves (default `crashPoints`). */
  workspaceCrashPoints?: { point: string; leaves: "before" | "after" }[];
  /** Whether the backend offers Storage.changeToken (default false: the suite checks it is left out). */
  changeToken?: boolean;
}

// The sources (tests, tsx) or the built dist/ next to this module.
const WORKER = fileURLToPath(
  new URL(import.meta.url.endsWith(".ts") ? "./race-worker.ts" : "./race-worker.js", import.meta.url),
);
const BODY = BODIES[0];

export function tempDir(): { dataDir: string; root: string; cleanup(): void } {
  const root = mkdtempSync(join(tmpdir(), "drydock-storage-"));
  return { root, dataDir: join(root, "data"), cleanup: () => rmSync(root, { recursive: true, force: true }) };
}

/** Runs `commands` on the model and on a fresh storage of `target`, checking each answer and the export. */
export async function runAgainstModel(target: ConformanceTarget, commands: JournalCommand[]): Promise<void> {
  const dir = tempDir();
  const modelState = newRunState();
  const storageState: RunState = { ...newRunState(), clock: modelState.clock };
  const models = newModels(modelState);
  const options = { now: () => modelState.clock.now, newKey: () => keyOf(++storageState.minted.n) };
  const storage = {
    current: await target.open(dir.dataDir, options),
    async reopen() {
      await this.current.close();
      this.current = await target.open(dir.dataDir, options);
    },
  };
  // Storage.changeToken, where offered: an unchanged token (same Storage object) means an unchanged export.
  let seen: { of: Storage; token: string; rows: string } | null = null;
  try {
    for (const command of commands) {
      const expected = applyToModel(models, modelState, command);
      const actual = await applyToStorage(storage, storageState, command);
      expect(actual, JSON.stringify(command)).toEqual(expected);
      const token = storage.current.changeToken?.();
      const stored = await storage.current.exportAll();
      expect(stored.creates).toEqual(models.create.rows);
      expect(stored.deletes).toEqual(models.delete.rows);
      expect((canonicalExport(stored) as { bots: unknown }).bots).toEqual(models.registry.exported());
      if (token !== undefined) {
        const rows = JSON.stringify([stored.creates, stored.deletes, canonicalExport(stored)]);
        if (seen !== null && seen.of === storage.current && seen.token === token) {
          expect(rows, `changeToken did not move across ${JSON.stringify(command)}`).toBe(seen.rows);
        }
        seen = { of: storage.current, token, rows };
      }
    }
  } finally {
    await storage.current.close();
    dir.cleanup();
  }
}

/** Registers the conformance suite for `target` (call it inside a test file). */
export function describeStorageConformance(target: ConformanceTarget): void {
  const cleanups: (() => void)[] = [];
  afterEach(() => {
    for (const cleanup of cleanups.splice(0)) cleanup();
  });
  const fresh: Fresh = () => {
    const dir = tempDir();
    cleanups.push(dir.cleanup);
    return dir;
  };
  describe(`storage conformance: ${target.name}`, () => {
    describeModelAndFuzz(target, target.runs ?? 25, fresh);
    describeMetaAndPeeks(target, fresh);
    describeRaces(target, fresh);
    describeCrashes(target, fresh);
    describeRegistry(target, fresh, WORKER);
    describeWorkspaces(target, fresh, WORKER);
    describeChangeToken(target, fresh, WORKER);
  });
}

export type Fresh = () => { dataDir: string; root: string };

/** The model-based sequences and the fuzzed arguments. */
function describeModelAndFuzz(target: ConformanceTarget, runs: number, fresh: Fresh): void {
  class Step implements fc.AsyncCommand<{ commands: JournalCommand[] }, { commands: JournalCommand[] }> {
    constructor(readonly command: JournalCommand) {}
    check = () => true;
    async run(model: { commands: JournalCommand[] }): Promise<void> {
      model.commands.push(this.command);
    }
    toString = () => JSON.stringify(this.command);
  }
  // fc.commands shrinks a failing sequence; each run replays its commands on the model and the backend.
  const modelRuns = (commands: fc.Arbitrary<JournalCommand>) =>
    fc.assert(
      fc.asyncProperty(
        fc.commands([commands.map((command) => new Step(command))], { maxCommands: 60, size: "large" }),
        async (cmds) => {
          const collected = { commands: [] as JournalCommand[] };
          await fc.asyncModelRun(() => ({ model: collected, real: collected }), cmds);
          await runAgainstModel(target, collected.commands);
        },
      ),
      { numRuns: runs },
    );
  // A hang guard, not a timing goal: a run takes 1–6 s, but on a loaded CI machine one exceeded vitest's 60 s
  // default, and a failing run must have time to shrink to its counterexample rather than time out silently.
  const MODEL_HANG_GUARD_MS = 300_000;
  it(
    "model-based command sequences (both journals, the registry, restarts, clock moves) match the reference model",
    async () => {
      await modelRuns(journalCommandArb);
    },
    MODEL_HANG_GUARD_MS,
  );

  it(
    "model-based registry sequences (create, remove, marks, pages, count, get, restarts) match the model",
    async () => {
      await modelRuns(
        fc.oneof(
          { weight: 12, arbitrary: registryCommandArb as fc.Arbitrary<JournalCommand> },
          { weight: 1, arbitrary: fc.constant({ op: "restart" as const }) },
          { weight: 1, arbitrary: fc.constant({ op: "advance" as const, ms: 1_000 }) },
        ),
      );
    },
    MODEL_HANG_GUARD_MS,
  );

  it("fuzzed arguments are refused as INVALID_ARGUMENT and change nothing", async () => {
    const dir = fresh();
    const storage = await target.open(dir.dataDir);
    try {
      await storage.createJournal.beginBoatCreate("bot-a", BODY);
      const before = await storage.exportAll();
      const notBotId = fc
        .anything()
        .filter((v) => !(typeof v === "string" && /^[A-Za-z0-9_-]{1,120}$/.test(v)));
      const notBoatId = fc.anything().filter((v) => !(typeof v === "string" && /^bx_[2-9a-z]{8}$/.test(v)));
      let tried = 0;
      await fc.assert(
        fc.asyncProperty(notBotId, notBoatId, fc.anything(), async (bot, boat, other) => {
          const calls: (() => Promise<unknown>)[] = [
            () => storage.createJournal.beginBoatCreate(bot as string, BODY),
            () => storage.createJournal.adoptResolvedBoat("bot-a", boat as string),
            () => storage.createJournal.retireDeletedBoatCreate(boat as string),
            () => storage.createJournal.rememberCreatedBoat(other as never, "bx_aaaaaaaa"),
            () => storage.createJournal.discardBoatCreate(other as never),
            () =>
              storage.deleteJournal.prepareBoatDeletion({
                boxId: boat,
                name: "n",
                ownerBotId: null,
              } as never),
            () => storage.deleteJournal.markBoatDeletionAccepted("bx_aaaaaaaa", other),
            () => storage.deleteJournal.hasPendingBoatDeletionForBot(bot as string),
          ];
          for (const call of calls) {
            tried += 1;
            const error = await call().then(
              () => null,
              (e: unknown) => e,
            );
            expect((error as { code?: unknown })?.code).toBe("INVALID_ARGUMENT");
          }
        }),
        { numRuns: runs * 4 },
      );
      expect(tried).toBe(runs * 4 * 8);
      expect(await storage.exportAll()).toEqual(before);
    } finally {
      await storage.close();
    }
  });
}

/** Meta singletons, peeks and close(). */
function describeMetaAndPeeks(target: ConformanceTarget, fresh: Fresh): void {
  it("meta singletons: first writer wins, bad keys and values are refused, values survive a reopen", async () => {
    const dir = fresh();
    const storage = await target.open(dir.dataDir);
    try {
      expect(await storage.meta.get("environment-id")).toBeNull();
      expect(await storage.meta.getOrCreate("environment-id", () => "first")).toBe("first");
      expect(await storage.meta.getOrCreate("environment-id", () => "second")).toBe("first");
      for (const key of ["", "UPPER", "a.b", "../x", "a/b", 7]) {
        await expect(storage.meta.getOrCreate(key as string, () => "v")).rejects.toMatchObject({
          code: "STORAGE_INVALID_ARGUMENT",
        });
      }
      for (const value of ["", "has space", "x".repeat(4097), "line\nbreak"]) {
        await expect(storage.meta.getOrCreate("other-key", () => value)).rejects.toMatchObject({
          code: "STORAGE_INVALID_ARGUMENT",
        });
      }
      expect(await storage.meta.get("other-key")).toBeNull();
    } finally {
      await storage.close();
    }
    const again = await target.open(dir.dataDir);
    try {
      expect(await again.meta.get("environment-id")).toBe("first");
      expect((await again.exportAll()).meta["environment-id"]).toBe("first");
    } finally {
      await again.close();
    }
  });

  it("peeks are frozen, the same array while nothing changed, and see another handle's commits", async () => {
    const dir = fresh();
    const a = await target.open(dir.dataDir);
    const b = await target.open(dir.dataDir);
    try {
      await a.createJournal.beginBoatCreate("bot-a", BODY);
      await a.deleteJournal.prepareBoatDeletion({ boxId: "bx_aaaaaaaa", name: "n", ownerBotId: "bot-a" });
      const creates = await a.createJournal.peekBoatCreates();
      const fences = await a.deleteJournal.peekBoatDeletions();
      expect(await a.createJournal.peekBoatCreates()).toBe(creates);
      expect(await a.deleteJournal.peekBoatDeletions()).toBe(fences);
      expect(Object.isFrozen(creates) && Object.isFrozen(creates[0])).toBe(true);
      expect(Object.isFrozen(fences) && Object.isFrozen(fences[0])).toBe(true);
      expect(creates.map((row) => row.botId)).toEqual(["bot-a"]);
      expect(Object.keys(creates[0] ?? {})).not.toContain("idempotencyKey");
      await b.createJournal.beginBoatCreate("bot-b", BODY);
      await b.deleteJournal.retireBoatDeletion("bx_aaaaaaaa");
      const later = await a.createJournal.peekBoatCreates();
      expect(later).not.toBe(creates);
      expect(later.map((row) => row.botId)).toEqual(["bot-a", "bot-b"]);
      expect(await a.deleteJournal.peekBoatDeletions()).toEqual([]);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it("both journals keep their order past nine rows (a row's place compares as a number, not as text)", async () => {
    const dir = fresh();
    const storage = await target.open(dir.dataDir);
    try {
      const bots = Array.from({ length: 12 }, (_, i) => `bot-${String.fromCharCode(108 - i)}`);
      const boxes = Array.from({ length: 12 }, (_, i) => `bx_${("nmkjhgfedcba"[i] as string).repeat(8)}`);
      for (const bot of bots) await storage.createJournal.beginBoatCreate(bot, BODY);
      for (const [i, boxId] of boxes.entries()) {
        await storage.deleteJournal.prepareBoatDeletion({
          boxId,
          name: `n-${i}`,
          ownerBotId: bots[i] as string,
        });
      }
      const snapshot = await storage.createJournal.boatCreateRecoverySnapshot();
      expect(snapshot.map((row) => row.botId)).toEqual(bots);
      expect((await storage.createJournal.peekBoatCreates()).map((row) => row.botId)).toEqual(bots);
      expect((await storage.deleteJournal.peekBoatDeletions()).map((row) => row.boxId)).toEqual(boxes);
    } finally {
      await storage.close();
    }
  });

  it("a call after close() fails STORAGE_CLOSED", async () => {
    const dir = fresh();
    const storage = await target.open(dir.dataDir);
    await storage.close();
    const error = await storage.createJournal.boatCreateRecoverySnapshot().then(
      () => null,
      (e: unknown) => e,
    );
    expect(isStorageError(error) && error.code).toBe("STORAGE_CLOSED");
  });
}

/** Two real processes racing on one data directory. */
function describeRaces(target: ConformanceTarget, fresh: Fresh): void {
  async function race(mode: "begin" | "prepare" | "meta" | "meta-fresh", args: (i: number) => string[]) {
    const dir = fresh();
    if (mode !== "meta-fresh") {
      const seed = await target.open(dir.dataDir);
      await seed.createJournal.beginBoatCreate("other-bot", BODY);
      await seed.close();
    }
    return runRace(target, dir, WORKER, mode, [args(0), args(1)]);
  }

  it("two real processes racing beginBoatCreate for one bot: exactly one mints, both hold one key", async () => {
    const { results, stored } = await race("begin", () => ["bot-1"]);
    expect(results.map((r) => r.startedNow).sort()).toEqual([false, true]);
    expect(results[0]?.key).toBe(results[1]?.key);
    expect(stored.creates.map((r) => r.botId)).toEqual(["other-bot", "bot-1"]);
    expect(stored.creates[1]?.idempotencyKey).toBe(results[0]?.key);
  });

  it("two real processes racing prepareBoatDeletionOnce for one Boat: exactly one prepares", async () => {
    const { results, stored } = await race("prepare", () => ["bx_aaaaaaaa"]);
    expect(results.map((r) => r.prepared).sort()).toEqual([false, true]);
    expect(stored.deletes.map((r) => r.boxId)).toEqual(["bx_aaaaaaaa"]);
  });

  it("two real processes racing meta.getOrCreate: both get the first writer's value", async () => {
    const { results, stored } = await race("meta", (i) => [`value-${i}`]);
    expect(results[0]?.value).toBe(results[1]?.value);
    expect(["value-0", "value-1"]).toContain(results[0]?.value);
    expect(stored.meta["environment-id"]).toBe(results[0]?.value);
  });

  it("two real processes opening a data directory nobody created yet: one store, one value", async () => {
    const { results, stored } = await race("meta-fresh", (i) => [`value-${i}`]);
    expect(results[0]?.value).toBe(results[1]?.value);
    expect(stored.meta["environment-id"]).toBe(results[0]?.value);
    expect(stored.creates).toEqual([]);
  });
}

/**
 * One process per entry of `argsPerWorker`, all released at once by a go file; each prints one JSON line.
 * Returns those lines and the store's export afterwards.
 */
export async function runRace(
  target: ConformanceTarget,
  dir: { dataDir: string; root: string },
  workerPath: string,
  mode: string,
  argsPerWorker: string[][],
): Promise<{ results: Record<string, unknown>[]; stored: StorageExport }> {
  const results = await spawnRace(target, dir, workerPath, mode, argsPerWorker);
  const after = await target.open(dir.dataDir);
  try {
    return { results, stored: await after.exportAll() };
  } finally {
    await after.close();
  }
}

/** Starts one process per `argsPerWorker`, lets them act at the same moment, and returns their answers. */
export async function spawnRace(
  target: ConformanceTarget,
  dir: { dataDir: string; root: string },
  workerPath: string,
  mode: string,
  argsPerWorker: string[][],
): Promise<Record<string, unknown>[]> {
  const goFile = join(dir.root, "go");
  const workers: Worker[] = [];
  try {
    for (const args of argsPerWorker) {
      workers.push(spawnWorker(workerPath, [target.workerModule, dir.dataDir, goFile, mode, ...args]));
    }
    await Promise.all(workers.map((w) => w.waitFor((line) => line === "ready")));
    writeFileSync(goFile, "go");
    const exits = await Promise.all(workers.map((w) => w.exited));
    for (const exit of exits) expect(exit).toEqual({ code: 0, signal: null, stderr: "" });
    return workers.map((w) => JSON.parse(w.lines.at(-1) as string) as Record<string, unknown>);
  } finally {
    for (const w of workers) w.kill();
  }
}

/** Runs the worker's `mode` in a child process and SIGKILLs it once it stands still at crash point `point`. */
export async function killAtPoint(
  target: ConformanceTarget,
  dataDir: string,
  workerPath: string,
  mode: string,
  point: string,
): Promise<void> {
  const worker = spawnWorker(workerPath, [target.workerModule, dataDir, "-", mode, point]);
  try {
    await worker.waitFor((line) => line === "at-point");
    worker.kill();
    expect((await worker.exited).signal).toBe("SIGKILL");
  } finally {
    worker.kill();
  }
}

/** A writer SIGKILLed at each of the backend's crash points. */
function describeCrashes(target: ConformanceTarget, fresh: Fresh): void {
  for (const { point, leaves } of target.crashPoints) {
    for (const mode of ["begin", "prepare"] as const) {
      it(`a ${mode} SIGKILLed at ${point} leaves the state ${leaves} the write, never between`, async () => {
        const dir = fresh();
        const seed = await target.open(dir.dataDir);
        await seed.createJournal.beginBoatCreate("other-bot", BODY);
        await seed.deleteJournal.prepareBoatDeletion({
          boxId: "bx_cccccccc",
          name: "old",
          ownerBotId: null,
        });
        const before = await seed.exportAll();
        await seed.close();
        await killAtPoint(target, dir.dataDir, WORKER, `crash-${mode}`, point);
        const after = await target.open(dir.dataDir);
        try {
          const stored = await after.exportAll();
          if (leaves === "before") {
            expect(stored).toEqual(before);
          } else if (mode === "begin") {
            expect(stored.creates.map((r) => r.botId)).toEqual(["other-bot", "bot-1"]);
            expect(stored.deletes).toEqual(before.deletes);
          } else {
            expect(stored.deletes.map((r) => r.boxId)).toEqual(["bx_cccccccc", "bx_aaaaaaaa"]);
            expect(stored.creates).toEqual(before.creates);
          }
          // And the store works: the next writer continues from whichever state stands.
          if (mode === "begin") {
            const attempt = await after.createJournal.beginBoatCreate("bot-1", BODY);
            expect(attempt.startedNow).toBe(leaves === "before");
          } else {
            const once = await after.deleteJournal.prepareBoatDeletionOnce({
              boxId: "bx_aaaaaaaa",
              name: "drydock-bx_aaaaaaaa",
              ownerBotId: "bot-1",
            });
            expect(once.prepared).toBe(leaves === "before");
          }
        } finally {
          await after.close();
        }
      });
    }
  }
}
