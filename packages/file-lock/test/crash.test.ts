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
const cleanups: Array<() => void> = [];

/**
 * Each point's flow starts from a lock left by a dead process, so one acquire passes every acquire, election,
 * reap and release point, and one takeover every takeover point. All points run in parallel processes.
 */
beforeAll(async () => {
  const dead = await deadPid();
  await Promise.all(
    LOCK_CRASH_POINTS.map(async (point) => {
      const temp = tempDir("file-lock-crash-");
      cleanups.push(temp.remove);
      const lock = join(temp.dir, "crash.lock");
      writeFileSync(lock, seedOwnerText(dead, randomUUID()));
      const flow = point.startsWith("takeover.") ? "takeover" : "acquire";
      const child = spawnFixture("crash.ts", [flow, lock], { FILE_LOCK_CRASH_AT: point });
      cleanups.push(() => killGroup(child));
      const stderr = captureStderr(child);
      const exit = await exited(child);
      crashed.set(point, { dir: temp.dir, lock, exit, stderr: stderr() });
    }),
  );
}, 120_000);

afterAll(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

describe("crash points: a process SIGKILLed at each point is recovered from by the next contender", () => {
  for (const point of LOCK_CRASH_POINTS) {
    it(`recovers after a crash at ${point}`, async () => {
      const result = crashed.get(point);
      if (!result) throw new Error("crash run missing");
      // The point was reached: the process died by its own SIGKILL, not by finishing or failing.
      expect(result.exit, result.stderr).toEqual({ code: null, signal: "SIGKILL" });
      const handle = await acquireLock(result.lock, { waitMs: 5_000 });
      expect(inspectLock(result.lock)?.token).toBe(handle.owner.token);
      handle.release();
      collectLockGarbage(result.lock);
      expect(leftovers(result.dir)).toEqual([]);
      expect(readdirSync(result.dir)).toEqual([]);
    });
  }
});
