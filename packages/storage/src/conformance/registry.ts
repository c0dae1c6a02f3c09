import { spawnWorker } from "@drydock/test-kit";
import fc from "fast-check";
import { expect, it } from "vitest";
import type { Bot, DeletionMark } from "../bots.js";
import type { Storage, StorageExport } from "../contract.js";
import { isStorageError } from "../errors.js";
import {
  applyToStorage,
  BODIES,
  type JournalCommand,
  journalCommandArb,
  keyOf,
  newRunState,
  T0,
} from "./commands.js";
import { type ConformanceTarget, type Fresh, runRace } from "./index.js";

/** The bot registry's part of the conformance suite (the model-based runs include it too). */
export function describeRegistry(target: ConformanceTarget, fresh: Fresh, workerPath: string): void {
  const codeOf = (promise: Promise<unknown>) =>
    promise.then(
      () => null,
      (e: unknown) => (e as { code?: unknown }).code,
    );

  it("registry: fuzzed arguments are refused as STORAGE_INVALID_ARGUMENT and change nothing", async () => {
    const dir = fresh();
    const storage = await target.open(dir.dataDir);
    try {
      await storage.bots.create({ botId: "kept", name: "Kept" });
      const before = await storage.exportAll();
      const notBotId = fc
        .anything()
        .filter((v) => !(typeof v === "string" && /^[A-Za-z0-9_-]{1,120}$/.test(v)));
      const notName = fc
        .anything()
        .filter((v) => !(typeof v === "string" && v.length >= 1 && v.length <= 200));
      const notLimit = fc.anything().filter((v) => !(Number.isSafeInteger(v) && (v as number) >= 1));
      let tried = 0;
      await fc.assert(
        fc.asyncProperty(notBotId, notName, notLimit, async (botId, name, limit) => {
          const calls = [
            storage.bots.create({ botId: botId as string, name: "ok" }),
            storage.bots.create({ botId: "fine", name: name as string }),
            storage.bots.page({ limit: limit as number }),
          ];
          for (const call of calls) {
            tried += 1;
            expect(await codeOf(call)).toBe("STORAGE_INVALID_ARGUMENT");
          }
        }),
        { numRuns: 50 },
      );
      expect(tried).toBe(150);
      expect(await storage.exportAll()).toEqual(before);
    } finally {
      await storage.close();
    }
  });

  it(`registry: the limit (${target.botLimit}) refuses the next bot with TOO_MANY_BOTS, and frees with a removal`, async () => {
    const dir = fresh();
    const storage = await target.open(dir.dataDir, { maxBots: target.botLimit });
    try {
      const bots: Bot[] = Array.from({ length: target.botLimit }, (_, i) => ({
        botId: `b${String(i).padStart(5, "0")}`,
        name: `Bot ${i}`,
        createdAt: 1_767_000_000_000 + i,
      }));
      await storage.importAll({ creates: [], deletes: [], meta: {}, bots });
      expect(await storage.bots.count()).toBe(target.botLimit);
      const before = await storage.exportAll();
      const refusal = await storage.bots.create({ botId: "one-more", name: "One more" }).then(
        () => null,
        (e: unknown) => e as { code: string; message: string },
      );
      expect(refusal).toMatchObject({
        code: "TOO_MANY_BOTS",
        message: `This installation already has ${target.botLimit} bots; delete one first.`,
      });
      expect(await storage.exportAll()).toEqual(before);
      await storage.bots.remove("b00000");
      await storage.bots.create({ botId: "one-more", name: "One more" });
      expect(await storage.bots.count()).toBe(target.botLimit);
    } finally {
      await storage.close();
    }
  });

  it("registry: 64 deletions of one bot at most (BOT_BUSY), and a registry's new mark replaces its own", async () => {
    const dir = fresh();
    const handles: Storage[] = [];
    try {
      for (let i = 0; i < 65; i += 1) handles.push(await target.open(dir.dataDir));
      const first = handles[0] as Storage;
      await first.bots.create({ botId: "busy", name: "Busy" });
      for (const handle of handles.slice(0, 64))
        expect(await handle.bots.markDeleting("busy")).not.toBeNull();
      const before = await first.exportAll();
      expect(await codeOf((handles[64] as Storage).bots.markDeleting("busy"))).toBe("BOT_BUSY");
      expect(await first.exportAll()).toEqual(before);
      // The same registry again: its leftover is replaced, so the count stays 64.
      const again = await first.bots.markDeleting("busy");
      const bot = await first.bots.get("busy");
      expect(bot?.deletions?.length).toBe(64);
      expect(bot?.deletions?.at(-1)).toEqual(again);
    } finally {
      for (const handle of handles) await handle.close();
    }
  });

  it("registry: a mark's process judged by liveness — live while it runs, abandoned once SIGKILLed", async () => {
    const dir = fresh();
    const storage = await target.open(dir.dataDir);
    const worker = spawnWorker(workerPath, [target.workerModule, dir.dataDir, "-", "bot-mark", "held"]);
    try {
      await storage.bots.create({ botId: "held", name: "Held" });
      await worker.waitFor((line) => line.startsWith("{"));
      const mark = JSON.parse(worker.lines.at(-1) as string) as DeletionMark;
      expect(mark.by.pid).not.toBe(process.pid);
      const alive = await storage.bots.liveMarks((await storage.bots.get("held")) as Bot, { ownIdle: true });
      expect(alive).toEqual({ live: [mark], abandoned: [] });
      worker.kill();
      expect((await worker.exited).signal).toBe("SIGKILL");
      const dead = await storage.bots.liveMarks((await storage.bots.get("held")) as Bot, { ownIdle: false });
      expect(dead).toEqual({ live: [], abandoned: [mark] });
      await storage.bots.dropAbandonedMarks("held", dead.abandoned);
      expect((await storage.bots.get("held"))?.deletions).toBeUndefined();
    } finally {
      worker.kill();
      await storage.close();
    }
  });

  async function raceCreates(ids: string[]) {
    const dir = fresh();
    const seed = await target.open(dir.dataDir);
    await seed.bots.create({ botId: "other", name: "Other" });
    await seed.close();
    const { results, stored } = await runRace(
      target,
      dir,
      workerPath,
      "bot-create",
      ids.map((id) => [id]),
    );
    return { results: results as { created: boolean; code?: string }[], stored };
  }

  it("registry: two real processes creating the same bot at once — exactly one wins, the other BOT_EXISTS", async () => {
    const { results, stored } = await raceCreates(["same", "same"]);
    expect(results.map((r) => r.created).sort()).toEqual([false, true]);
    expect(results.find((r) => !r.created)?.code).toBe("BOT_EXISTS");
    expect(stored.bots.map((b) => b.botId)).toEqual(["other", "same"]);
  });

  it("registry: four real processes creating distinct bots at once — every one is there", async () => {
    const { results, stored } = await raceCreates(["d0", "d1", "d2", "d3"]);
    expect(results.every((r) => r.created)).toBe(true);
    expect(stored.bots.map((b) => b.botId)).toEqual(["d0", "d1", "d2", "d3", "other"]);
  });

  it("import: a random store's export imported into an empty one exports equal; a non-empty one refuses", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(journalCommandArb, { minLength: 1, maxLength: 40 }), async (commands) => {
        const source = await runCommands(target, fresh().dataDir, commands);
        const exported = await source.exportAll();
        const dir = fresh();
        const copy = await target.open(dir.dataDir);
        try {
          await copy.importAll(exported);
          expect(await copy.exportAll()).toEqual(exported);
          // Non-empty now: refused, unchanged.
          expect(await codeOf(copy.importAll(exported))).toBe(
            exported.creates.length + exported.deletes.length + exported.bots.length > 0
              ? "STORAGE_NOT_EMPTY"
              : null,
          );
          expect(await copy.exportAll()).toEqual(exported);
        } finally {
          await copy.close();
          await source.close();
        }
      }),
      { numRuns: Math.max(5, Math.floor((target.runs ?? 25) / 3)) },
    );
  });

  it("import: an export that breaks the formats is refused whole (STORAGE_INVALID_ARGUMENT), nothing written", async () => {
    const dir = fresh();
    const storage = await target.open(dir.dataDir);
    try {
      const empty: StorageExport = { creates: [], deletes: [], meta: {}, bots: [] };
      // Each refusal names the first row at fault and what is wrong with it.
      const bad: [StorageExport, RegExp][] = [
        [
          { ...empty, bots: [{ botId: "no spaces", name: "x", createdAt: 1 }] },
          /^importAll was given bot 0 \(botId "no spaces"\) that breaks its format \(botId: .+\); nothing was imported$/,
        ],
        [
          {
            ...empty,
            bots: [
              { botId: "twice", name: "x", createdAt: 1 },
              { botId: "twice", name: "y", createdAt: 2 },
            ],
          },
          /^importAll was given the bot "twice" twice; nothing was imported$/,
        ],
        [
          { ...empty, meta: { "environment-id": "has space" } },
          /an invalid value for the meta key environment-id/,
        ],
        [
          {
            ...empty,
            creates: [{ botId: "a", requestBody: "{}", idempotencyKey: "not-a-uuid", createdAt: 1 }],
          },
          /^importAll was given create row 0 \(botId "a"\) that breaks its format \(idempotencyKey: .+\); nothing was imported$/,
        ],
        [
          {
            ...empty,
            creates: [
              { botId: "a", requestBody: "{}", idempotencyKey: keyOf(1), createdAt: 1 },
              { botId: "a", requestBody: "{}", idempotencyKey: keyOf(2), createdAt: 2 },
            ],
          },
          /create rows that break the create journal's rules \(one row per bot and request body/,
        ],
      ];
      for (const [data, reason] of bad) {
        const error = await storage.importAll(data).then(
          () => null,
          (e: unknown) => e,
        );
        expect(isStorageError(error) && error.code).toBe("STORAGE_INVALID_ARGUMENT");
        expect((error as Error).message).toMatch(reason);
      }
      expect(await storage.exportAll()).toEqual(empty);
      await storage.meta.getOrCreate("environment-id", () => "mine");
      expect(await codeOf(storage.importAll({ ...empty, meta: { "environment-id": "theirs" } }))).toBe(
        "STORAGE_NOT_EMPTY",
      );
    } finally {
      await storage.close();
    }
  });

  const rowLimit = target.rowLimit ?? 4_096;
  it(`import: up to the store's limits (${rowLimit} rows a journal, ${target.botLimit} bots); one more is refused naming the limit`, async () => {
    const alphabet = "23456789abcdefghjkmnpqrstuvwxyz";
    const boatOf = (i: number) =>
      `bx_${Array.from({ length: 8 }, (_, k) => alphabet[Math.floor(i / alphabet.length ** k) % alphabet.length]).join("")}`;
    const creates = (n: number) =>
      Array.from({ length: n }, (_, i) => ({
        botId: `r${i}`,
        requestBody: BODIES[0],
        idempotencyKey: keyOf(i + 1),
        createdAt: T0 + i,
      }));
    const deletes = (n: number) =>
      Array.from({ length: n }, (_, i) => ({
        boxId: boatOf(i),
        name: `ogb-r${i}`,
        ownerBotId: `r${i}`,
        phase: "prepared" as const,
        requestedAt: T0 + i,
        updatedAt: T0 + i,
      }));
    const bots = (n: number) =>
      Array.from({ length: n }, (_, i) => ({ botId: `b${i}`, name: `Bot ${i}`, createdAt: T0 + i }));
    const empty: StorageExport = { creates: [], deletes: [], meta: {}, bots: [] };
    const refusals: [StorageExport, string][] = [
      [
        { ...empty, creates: creates(rowLimit + 1) },
        `${rowLimit + 1} create rows, more than this store holds (maxRows ${rowLimit})`,
      ],
      [
        { ...empty, deletes: deletes(rowLimit + 1) },
        `${rowLimit + 1} deletion fences, more than this store holds (maxRows ${rowLimit})`,
      ],
      [
        { ...empty, bots: bots(target.botLimit + 1) },
        `${target.botLimit + 1} bots, more than this store holds (maxBots ${target.botLimit})`,
      ],
    ];
    const dir = fresh();
    const storage = await target.open(dir.dataDir, { maxRows: rowLimit, maxBots: target.botLimit });
    try {
      for (const [data, reason] of refusals) {
        const error = await storage.importAll(data).then(
          () => null,
          (e: unknown) => e,
        );
        expect(isStorageError(error) && error.code).toBe("STORAGE_INVALID_ARGUMENT");
        expect((error as Error).message).toBe(`importAll was given ${reason}; nothing was imported`);
        expect(await storage.exportAll()).toEqual(empty);
      }
      const full: StorageExport = {
        creates: creates(rowLimit),
        deletes: deletes(rowLimit),
        meta: {},
        bots: bots(target.botLimit).sort((a, b) => (a.botId < b.botId ? -1 : 1)),
      };
      await storage.importAll(full);
      expect(await storage.exportAll()).toEqual(full);
    } finally {
      await storage.close();
    }
  });
}

/** A store after `commands` (fixed clock and keys), left open for the caller. */
async function runCommands(target: ConformanceTarget, dataDir: string, commands: JournalCommand[]) {
  const state = newRunState();
  const options = { now: () => state.clock.now, newKey: () => keyOf(++state.minted.n) };
  const storage = {
    current: await target.open(dataDir, options),
    async reopen() {
      await this.current.close();
      this.current = await target.open(dataDir, options);
    },
  };
  for (const command of commands) {
    if (command.op === "advance") state.clock.now += command.ms;
    await applyToStorage(storage, state, command);
  }
  return storage.current;
}
