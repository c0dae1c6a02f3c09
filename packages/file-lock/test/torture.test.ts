import type { ChildProcess } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { collectLockGarbage, inspectLock } from "../src/index.js";
import {
  captureStderr,
  exited,
  killGroup,
  leftovers,
  spawnScript,
  tempDir,
  transpileWorker,
  waitForLine,
} from "./helpers.js";
import { judge, type Verdict } from "./torture-judge.js";

// Sizes are parameterizable for a longer run, e.g. FILE_LOCK_TORTURE_SECTIONS=50000 FILE_LOCK_TORTURE_KILLS=500.
const WORKERS = Number(process.env.FILE_LOCK_TORTURE_WORKERS ?? 4);
const SECTIONS = Number(process.env.FILE_LOCK_TORTURE_SECTIONS ?? 2_000);
const HOLDER_KILLS = Number(process.env.FILE_LOCK_TORTURE_KILLS ?? 20);
/** Hang guard only: the run normally ends far sooner; it is not a performance assertion. */
const BOUND_MS = Number(process.env.FILE_LOCK_TORTURE_BOUND_MS ?? 150_000);
/** How long a worker stays inside before and after its counter write (two kill windows). */
const HOLD_MS = process.env.FILE_LOCK_TORTURE_HOLD_MS ?? "0.5";

let workerScript: Promise<{ entry: string; remove(): void }>;
beforeAll(() => {
  workerScript = transpileWorker("torture-worker.ts");
});
afterAll(async () => {
  (await workerScript).remove();
});

interface TortureRun {
  verdict: Verdict;
  holderKills: number;
  kills: number;
  incarnations: number;
  failures: string[];
  stillRunning: number;
  overdue: boolean;
  lockAfter: unknown;
  leftoversAfterGc: string[];
  seconds: number;
}

/**
 * Spawns `workers` torture workers (half sync, half async; in every four, two with reuseOwnerFile), opens the go gate, and SIGKILLs whoever entered the
 * critical section last, respawning it, until `sections` sections completed and `holderKills` kills landed
 * inside a section. Then stops everyone and judges the log.
 */
async function runTorture(config: {
  workers: number;
  sections: number;
  holderKills: number;
  broken?: boolean;
}): Promise<TortureRun> {
  const worker = await workerScript;
  const temp = tempDir("file-lock-torture-");
  const dir = temp.dir;
  const lock = join(dir, "torture.lock");
  const log = join(dir, "torture.log");
  const counter = join(dir, "counter");
  const go = join(dir, "go");
  const stop = join(dir, "stop");
  writeFileSync(counter, "0\n");
  writeFileSync(log, "");

  const running = new Map<string, ChildProcess>();
  const failures: string[] = [];
  const killed = new Set<string>();
  let incarnations = 0;
  const env: Record<string, string> = config.broken ? { FILE_LOCK_TORTURE_BROKEN: "1" } : {};
  const spawnWorker = (slot: number): ChildProcess => {
    const id = `w${slot}.${incarnations++}`;
    const mode = slot % 2 === 0 ? "async" : "sync";
    // Slots 2 and 3 of every 4 publish a kept owner file, so both kinds of owner contend and get killed.
    const reuse = slot % 4 >= 2 ? "1" : "0";
    const child = spawnScript(worker.entry, [lock, log, counter, go, stop, id, mode, HOLD_MS], {
      ...env,
      FILE_LOCK_TORTURE_REUSE: reuse,
    });
    const stderr = captureStderr(child);
    running.set(id, child);
    child.once("exit", (code, signal) => {
      running.delete(id);
      if (!killed.has(id) && code !== 0) failures.push(`${id} exited ${code ?? signal}: ${stderr()}`);
    });
    return child;
  };
  const slotOf = (id: string): number => Number(id.slice(1, id.indexOf(".")));

  const startedAt = Date.now();
  const overdue = (): boolean => Date.now() - startedAt > BOUND_MS;
  let holderKills = 0;
  try {
    const first = Array.from({ length: config.workers }, (_, slot) => spawnWorker(slot));
    await Promise.all(first.map((child) => waitForLine(child, "ready", 60_000)));
    writeFileSync(go, "");

    let completed = 0;
    while (
      (completed < config.sections || holderKills < config.holderKills) &&
      failures.length === 0 &&
      !overdue()
    ) {
      await new Promise((resolve) => setTimeout(resolve, 40 + Math.random() * 120));
      const lines = readFileSync(log, "utf8").trimEnd().split("\n");
      completed = lines.filter((line) => line.startsWith("exit ")).length;
      if (holderKills >= config.holderKills) continue;
      // Kill whoever entered last and has not left: it holds the lock right now (or did a moment ago).
      const last = lines[lines.length - 1] ?? "";
      const [kind, id = ""] = last.split(" ");
      const victim = running.get(id);
      if (kind !== "enter" || victim === undefined) continue;
      killed.add(id);
      killGroup(victim);
      await exited(victim);
      // Judged after death, from the final log: a holder kill is one that left its section open.
      const own = readFileSync(log, "utf8")
        .trimEnd()
        .split("\n")
        .filter((line) => line.split(" ")[1] === id);
      if (own[own.length - 1]?.startsWith("enter ")) holderKills += 1;
      spawnWorker(slotOf(id));
    }
    writeFileSync(stop, "");
    const stopDeadline = Date.now() + 60_000;
    while (running.size > 0 && Date.now() < stopDeadline)
      await new Promise((resolve) => setTimeout(resolve, 50));

    const verdict = judge(readFileSync(log, "utf8"), killed, Number(readFileSync(counter, "utf8")));
    const lockAfter = config.broken ? null : inspectLock(lock);
    collectLockGarbage(lock);
    return {
      verdict,
      holderKills,
      kills: killed.size,
      incarnations,
      failures,
      stillRunning: running.size,
      overdue: overdue(),
      lockAfter,
      leftoversAfterGc: leftovers(dir),
      seconds: Math.round((Date.now() - startedAt) / 1000),
    };
  } finally {
    for (const child of running.values()) killGroup(child);
    temp.remove();
  }
}

describe("lock torture", () => {
  it(`${WORKERS} processes, >= ${SECTIONS} sections, >= ${HOLDER_KILLS} holders SIGKILLed: never two holders, no lost update`, async () => {
    const run = await runTorture({ workers: WORKERS, sections: SECTIONS, holderKills: HOLDER_KILLS });
    expect(run.failures).toEqual([]);
    expect(run.stillRunning).toBe(0);
    expect(run.overdue).toBe(false);
    const { verdict } = run;
    expect(verdict.problems).toEqual([]);
    expect(verdict.completed).toBeGreaterThanOrEqual(SECTIONS);
    expect(run.holderKills).toBeGreaterThanOrEqual(HOLDER_KILLS);
    expect(verdict.killedLanded + verdict.killedLost).toBe(run.holderKills);
    // Every kill was recovered: each killed holder's section is followed by someone else's.
    for (const [index, section] of verdict.sections.entries()) {
      if (!section.completed)
        expect(verdict.sections[index + 1], `nobody recovered ${section.id}'s lock`).toBeDefined();
    }
    // Everyone stopped cleanly, so the lock is free; garbage of killed processes is all collectable.
    expect(run.lockAfter).toBeNull();
    expect(run.leftoversAfterGc).toEqual([]);
    console.info(
      `torture: ${verdict.completed} sections completed, ${run.holderKills} holders killed ` +
        `(${verdict.killedLanded} after their write, ${verdict.killedLost} before), ${run.kills} kills in all, ` +
        `${run.incarnations} processes, ${run.seconds} s`,
    );
  }, 240_000);

  it("catches a lock that lets two holders in (liveness sabotaged in the workers)", async () => {
    const run = await runTorture({ workers: 3, sections: 150, holderKills: 0, broken: true });
    expect(run.failures).toEqual([]);
    expect(run.verdict.problems.some((problem) => problem.startsWith("overlap:"))).toBe(true);
  }, 120_000);
});

describe("torture judge", () => {
  const ok = "enter a.0 0 0\nexit a.0 0 1\nenter b.1 0 1\nexit b.1 0 2\n";

  it("accepts a clean log whose counter matches", () => {
    expect(judge(ok, new Set(), 2).problems).toEqual([]);
  });

  it("reports an enter while a live worker is inside", () => {
    const log = "enter a.0 0 0\nenter b.1 0 0\nexit a.0 0 1\nexit b.1 0 1\n";
    expect(judge(log, new Set(), 1).problems.length).toBeGreaterThan(0);
  });

  it("reports a killed worker that kept writing after someone else entered", () => {
    const log = "enter a.0 0 0\nenter b.1 0 0\nexit b.1 0 1\nexit a.0 0 1\n";
    expect(judge(log, new Set(["a.0"]), 1).problems.length).toBeGreaterThan(0);
  });

  it("reports a lost update and a wrong final counter", () => {
    expect(
      judge("enter a.0 0 0\nexit a.0 0 1\nenter b.1 0 0\nexit b.1 0 1\n", new Set(), 1).problems.length,
    ).toBeGreaterThan(0);
    expect(judge(ok, new Set(), 3).problems.length).toBeGreaterThan(0);
  });

  it("accounts a killed section as landed or lost from what the next reader saw", () => {
    const landed = judge("enter a.0 0 0\nenter b.1 0 1\nexit b.1 0 2\n", new Set(["a.0"]), 2);
    expect([landed.problems, landed.killedLanded, landed.killedLost]).toEqual([[], 1, 0]);
    const lost = judge("enter a.0 0 0\nenter b.1 0 0\nexit b.1 0 1\n", new Set(["a.0"]), 1);
    expect([lost.problems, lost.killedLanded, lost.killedLost]).toEqual([[], 0, 1]);
  });
});
