import { randomUUID } from "node:crypto";
import { readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  acquireLock,
  collectLockGarbage,
  inspectLock,
  LOCK_CRASH_POINTS,
  type LockCrashPoint,
} from "../src/index.js";
import { removeKeptOwners } from "../src/internal/kept-owners.js";
import {
  captureStderr,
  deadPid,
  exited,
  killGroup,
  leftovers,
  seedOwnerText,
  spawnFixture,
  tempDir,
} from "./helpers.js";

interface Crashed {
  dir: string;
  lock: string;
  exit: { code: number | null; signal: NodeJS.Signals | null };
  stderr: string;
}

const crashed = new Map<LockCrashPoint, Crashed>();
/** The points an acquire and release meet when they publish a kept owner file (reuseOwnerFile). */
const REUSED_POINTS = ["acquire.candidate-written", "acquire.published", "release.verified"] as const;
const crashedReused = new Map<LockCrashPoint, Crashed>();
const cleanups: Array<() => void> = [];

/** Runs `flow` in a child that SIGKILLs itself at `point`, on a lock in a fresh directory. */
async function crashAt(
  point: LockCrashPoint,
  flow: "acquire" | "acquire-reused" | "takeover",
  seed: string | null,
): Promise<Crashed> {
  const temp = tempDir("file-lock-crash-");
  cleanups.push(temp.remove);
  const lock = join(temp.dir, "crash.lock");
  if (seed !== null) writeFileSync(lock, seed);
  const child = spawnFixture("crash.ts", [flow, lock], { FILE_LOCK_CRASH_AT: point });
  cleanups.push(() => killGroup(child));
  const stderr = captureStderr(child);
  const exit = await exited(child);
  return { dir: temp.dir, lock, exit, stderr: stderr() };
}

/**
 * Each point's flow starts from a lock left by a dead process, so one acquire passes every acquire, election,
 * reap and release point, and one takeover every takeover point. The reused flow starts from no lock and
 * meets its points on its second acquire. All points run in parallel processes.
 */
beforeAll(async () => {
  const dead = await deadPid();
  await Promise.all([
    ...LOCK_CRASH_POINTS.map(async (point) => {
      const flow = point.startsWith("takeover.") ? "takeover" : "acquire";
      crashed.set(point, await crashAt(point, flow, seedOwnerText(dead, randomUUID())));
    }),
    ...REUSED_POINTS.map(async (point) => {
      crashedReused.set(point, await crashAt(point, "acquire-reused", null));
    }),
  ]);
}, 120_000);

afterAll(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

const SUITES = [
  {
    title: "crash points: a process SIGKILLed at each point is recovered from by the next contender",
    points: LOCK_CRASH_POINTS,
    runs: crashed,
    reuse: false,
  },
  {
    title: "crash points with a kept owner file (reuseOwnerFile): the next contender recovers the same way",
    points: REUSED_POINTS,
    runs: crashedReused,
    reuse: true,
  },
];

for (const suite of SUITES) {
  describe(suite.title, () => {
    for (const point of suite.points) {
      it(`recovers after a crash at ${point}`, async () => {
        const result = suite.runs.get(point);
        if (!result) throw new Error("crash run missing");
        // The point was reached: the process died by its own SIGKILL, not by finishing or failing.
        expect(result.exit, result.stderr).toEqual({ code: null, signal: "SIGKILL" });
        // A dead process's kept owner file is still there, beside the lock or instead of it.
        if (suite.reuse) expect(leftovers(result.dir)).toHaveLength(1);
        const handle = await acquireLock(result.lock, { waitMs: 5_000, reuseOwnerFile: suite.reuse });
        expect(inspectLock(result.lock)?.token).toBe(handle.owner.token);
        handle.release();
        collectLockGarbage(result.lock);
        // Only this live process's kept owner may remain, and it goes when the process does.
        expect(leftovers(result.dir)).toEqual(
          suite.reuse ? [`crash.lock.candidate-${process.pid}-${handle.owner.token}`] : [],
        );
        removeKeptOwners();
        expect(readdirSync(result.dir)).toEqual([]);
      });
    }
  });
}
