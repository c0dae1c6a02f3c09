import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type BoatCreateRequest, openBoatCreateJournal } from "@drydock/boat-create-journal";
import { openBoatDeleteJournal } from "@drydock/boat-delete-journal";
import type { FileOps } from "@drydock/file-lock";
import { describe, expect, it } from "vitest";
import {
  type AckLog,
  crashSweep,
  type ImageContext,
  scratchFileOps,
  seededRandom,
  withoutDirectoryFlushes,
  withoutTempFileFlushes,
} from "../src/index.js";
import { report, reportSweep, scale } from "./report.js";
import { afterRebootLock, readOrNull, tickingClock } from "./restart.js";

const BOAT_ALPHABET = "23456789abcdefghjkmnpqrstuvwxyz";
const boatId = (n: number): string => {
  let s = "";
  for (let i = 0, v = n; i < 8; i += 1, v = Math.floor(v / BOAT_ALPHABET.length)) {
    s = BOAT_ALPHABET[v % BOAT_ALPHABET.length] + s;
  }
  return `bx_${s}`;
};
const operationId = (n: number): string => `bdop_${n.toString(16).padStart(32, "0")}`;

/** A workload is a plan of journal calls, fixed by its seed, each valid in the state the plan leads to. */
interface Workload {
  file: string;
  run(fs: FileOps, dataDir: string, log: AckLog | null, after: (i: number) => void): Promise<void>;
  /** Reopens the journal of an image after a reboot: reads it, then writes to it. */
  reopen(dataDir: string): Promise<void>;
}

function createJournalWorkload(seed: number, length: number): Workload {
  const random = seededRandom(seed);
  type Plan = {
    kind: "begin" | "remember" | "resolve" | "discard" | "retire" | "adopt";
    bot: number;
    box: number;
  };
  const plan: Plan[] = [];
  const state = new Map<number, "begun" | "remembered" | "resolved">();
  let boxes = 0;
  while (plan.length < length) {
    const bot = Math.floor(random() * 3);
    const s = state.get(bot);
    const r = random();
    if (s === undefined) {
      if (r < 0.8) {
        plan.push({ kind: "begin", bot, box: -1 });
        state.set(bot, "begun");
      } else {
        plan.push({ kind: "adopt", bot, box: boxes++ });
        state.set(bot, "resolved");
      }
    } else if (s === "begun") {
      if (r < 0.75) {
        plan.push({ kind: "remember", bot, box: boxes++ });
        state.set(bot, "remembered");
      } else {
        plan.push({ kind: "discard", bot, box: -1 });
        state.delete(bot);
      }
    } else if (s === "remembered") {
      plan.push({ kind: "resolve", bot, box: -1 });
      state.set(bot, "resolved");
    } else {
      plan.push({ kind: "retire", bot, box: -1 });
      state.delete(bot);
    }
  }
  return {
    file: "box-create-requests.json",
    async run(fs, dataDir, log, after) {
      const now = tickingClock();
      let keys = 0;
      const journal = openBoatCreateJournal({
        dataDir,
        now,
        fs,
        lock: { waitMs: 500 },
        newKey: () => `00000000-0000-4000-8000-${(keys++).toString(16).padStart(12, "0")}`,
      });
      const requests = new Map<number, BoatCreateRequest>();
      const boxOf = new Map<number, string>();
      for (const [i, step] of plan.entries()) {
        const bot = `bot-${step.bot}`;
        const call = async (): Promise<void> => {
          switch (step.kind) {
            case "begin":
              requests.set(step.bot, (await journal.beginBoatCreate(bot, `{"bot":"${bot}"}`)).request);
              return;
            case "remember":
              boxOf.set(step.bot, boatId(step.box));
              requests.set(
                step.bot,
                await journal.rememberCreatedBoat(requests.get(step.bot)!, boatId(step.box)),
              );
              return;
            case "resolve":
              requests.set(step.bot, await journal.resolveBoatCreate(requests.get(step.bot)!));
              return;
            case "discard":
              await journal.discardBoatCreate(requests.get(step.bot)!);
              return;
            case "adopt":
              boxOf.set(step.bot, boatId(step.box));
              await journal.adoptResolvedBoat(bot, boatId(step.box));
              return;
            case "retire":
              await journal.retireDeletedBoatCreate(boxOf.get(step.bot)!);
              return;
          }
        };
        if (log) await log.op(call);
        else await call();
        after(i + 1);
      }
    },
    async reopen(dataDir) {
      const journal = openBoatCreateJournal({
        dataDir,
        now: tickingClock(1_767_100_000_000),
        lock: afterRebootLock(),
        fs: scratchFileOps,
      });
      await journal.boatCreateRecoverySnapshot();
      await journal.beginBoatCreate("bot-after-power-loss", "{}");
    },
  };
}

function deleteJournalWorkload(seed: number, length: number): Workload {
  const random = seededRandom(seed);
  type Plan = {
    kind: "prepare" | "pending" | "processing" | "completed" | "blocked" | "retire";
    box: number;
    op: number;
  };
  const plan: Plan[] = [];
  const state = new Map<number, Plan["kind"]>();
  let ops = 0;
  let nextBox = 0;
  while (plan.length < length) {
    const live = [...state.entries()].filter(([, s]) => s !== "blocked");
    const fresh = live.length === 0 || (live.length < 3 && random() < 0.3);
    if (fresh) {
      const box = nextBox++;
      plan.push({ kind: "prepare", box, op: -1 });
      state.set(box, "prepare");
      continue;
    }
    const [box, s] = live[Math.floor(random() * live.length)]!;
    const next: Plan["kind"] =
      s === "prepare"
        ? random() < 0.8
          ? "pending"
          : "blocked"
        : s === "pending"
          ? "processing"
          : s === "processing"
            ? "completed"
            : "retire";
    if (next === "pending") ops += 1;
    plan.push({ kind: next, box, op: ops });
    if (next === "retire") state.delete(box);
    else state.set(box, next);
  }
  return {
    file: "box-delete-requests.json",
    async run(fs, dataDir, log, after) {
      const journal = openBoatDeleteJournal({ dataDir, now: tickingClock(), fs, lock: { waitMs: 500 } });
      const opOf = new Map<number, number>();
      for (const [i, step] of plan.entries()) {
        const box = boatId(step.box + 1000);
        const receipt = (status: string) => ({
          id: operationId(opOf.get(step.box) ?? 0),
          kind: "sandbox",
          targetId: box,
          status,
          stage: "removing",
        });
        const call = async (): Promise<void> => {
          switch (step.kind) {
            case "prepare":
              await journal.prepareBoatDeletion({
                boxId: box,
                name: `ogb-power-loss-${step.box}`,
                ownerBotId: `bot-${step.box}`,
              });
              return;
            case "pending":
              opOf.set(step.box, step.op);
              await journal.markBoatDeletionAccepted(box, receipt("pending"));
              return;
            case "processing":
              await journal.markBoatDeletionAccepted(box, receipt("processing"));
              return;
            case "completed":
              await journal.markBoatDeletionAccepted(box, receipt("completed"));
              return;
            case "blocked":
              await journal.markBoatDeletionBlocked(box);
              return;
            case "retire":
              await journal.retireBoatDeletion(box);
              return;
          }
        };
        if (log) await log.op(call);
        else await call();
        after(i + 1);
      }
    },
    async reopen(dataDir) {
      const journal = openBoatDeleteJournal({
        dataDir,
        now: tickingClock(1_767_100_000_000),
        lock: afterRebootLock(),
        fs: scratchFileOps,
      });
      await journal.boatDeletionSnapshot();
      await journal.prepareBoatDeletion({
        boxId: boatId(999_999),
        name: "ogb-after-power-loss",
        ownerBotId: "bot-x",
      });
    },
  };
}

/** The journal's bytes after each operation of a crash-free run on the real file system (index 0: none). */
async function referenceStates(workload: Workload): Promise<(string | null)[]> {
  const base = mkdtempSync(join(tmpdir(), "drydock-pl-ref-"));
  try {
    const dataDir = join(base, "data");
    mkdirSync(dataDir);
    const states: (string | null)[] = [null];
    await workload.run(scratchFileOps, dataDir, null, () =>
      states.push(readOrNull(join(dataDir, workload.file))),
    );
    return states;
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
}

async function sweepJournal(
  area: string,
  workload: Workload,
  sabotage: { wrap: (fs: FileOps) => FileOps; randomImages: number } | null = null,
) {
  const states = await referenceStates(workload);
  // Every plan must change the file at least once per kind of step, or the sweep proves little.
  expect(new Set(states).size).toBeGreaterThan(states.length / 2);
  const check = async (image: string, { acked, inflight }: ImageContext): Promise<string | null> => {
    const bytes = readOrNull(join(image, workload.file));
    const allowed = [states[acked]];
    if (inflight !== null) allowed.push(states[inflight]);
    if (!allowed.includes(bytes)) {
      const which = states.indexOf(bytes);
      return `after ${acked} acknowledged operations the journal holds ${
        bytes === null
          ? "nothing"
          : which >= 0
            ? `the state after operation ${which}`
            : `bytes of no state (${bytes.length} bytes)`
      }`;
    }
    try {
      await workload.reopen(image);
    } catch (error) {
      return `reopening after the reboot failed: ${error instanceof Error ? error.message : String(error)}`;
    }
    return null;
  };
  return crashSweep({
    area,
    randomImages: sabotage ? sabotage.randomImages : scale(3),
    setup: (root) => mkdirSync(join(root, "data")),
    workload: (fs, root, log) =>
      workload.run(sabotage ? sabotage.wrap(fs) : fs, join(root, "data"), log, () => {}),
    check: (image, context) => check(join(image, "data"), context),
  });
}

const SEQUENCES = scale(1);
/** Operations per sequence: 5 in the ordinary suite, 8 when scaled. */
const LENGTH = SEQUENCES > 1 ? 8 : 5;

describe("journals under power loss: before or after the interrupted operation, never lost", () => {
  it(`create journal: ${SEQUENCES} random operation sequences, crash after every call`, async () => {
    let points = 0;
    let images = 0;
    for (let seed = 1; seed <= SEQUENCES; seed += 1) {
      const result = await sweepJournal("create journal", createJournalWorkload(seed, LENGTH));
      expect(result.anomalies).toEqual([]);
      expect(result.violations).toEqual([]);
      points += result.crashPoints;
      images += result.images;
    }
    reportSweep({
      area: "create journal",
      steps: points,
      crashPoints: points,
      images,
      violations: [],
      anomalies: [],
    });
    report("power-loss", "create journal: operation sequences", SEQUENCES);
  });

  it(`delete journal: ${SEQUENCES} random operation sequences, crash after every call`, async () => {
    let points = 0;
    let images = 0;
    for (let seed = 1; seed <= SEQUENCES; seed += 1) {
      const result = await sweepJournal("delete journal", deleteJournalWorkload(seed, LENGTH));
      expect(result.anomalies).toEqual([]);
      expect(result.violations).toEqual([]);
      points += result.crashPoints;
      images += result.images;
    }
    reportSweep({
      area: "delete journal",
      steps: points,
      crashPoints: points,
      images,
      violations: [],
      anomalies: [],
    });
    report("power-loss", "delete journal: operation sequences", SEQUENCES);
  });

  // Sabotage controls: the journals untouched, the seam silently skipping one kind of flush they ask for.
  // The same check must then report journals that lost an acknowledged operation or hold torn bytes.
  it.each([
    [
      "no directory fsync (a renamed journal can revert)",
      withoutDirectoryFlushes,
      0,
      /holds (nothing|the state after operation)/,
    ],
    [
      "no fsync of the journal's temp (renamed into place unflushed)",
      withoutTempFileFlushes,
      1,
      /holds (nothing|bytes of no state)/,
    ],
  ])("the sweep catches a create journal with %s", async (title, wrap, randomImages, expected) => {
    const result = await sweepJournal("create journal (sabotaged)", createJournalWorkload(1, LENGTH), {
      wrap,
      randomImages,
    });
    expect(result.anomalies).toEqual([]);
    const caught = result.violations.filter((v) => v.acked >= 1 && expected.test(v.detail));
    report("power-loss", `create journal, sabotaged (${title}): images caught`, caught.length);
    expect(caught.length, JSON.stringify(result.violations.slice(0, 3))).toBeGreaterThan(0);
  });
});
