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
  await Promise.all(
    REUSED_POINTS.map(async (point) => {
      const temp = tempDir("file-lock-crash-reused-");
      cleanups.push(temp.remove);
      const lock = join(temp.dir, "crash.lock");
      const child = spawnFixture("crash.ts", ["acquire-reused", lock], { FILE_LOCK_CRASH_AT: point });
      cleanups.push(() => killGroup(child));
      const stderr = captureStderr(child);
      const exit = await exited(child);
      crashedReused.set(point, { dir: temp.dir, lock, exit, stderr: stderr() });
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

describe("crash points with a kept owner file (reuseOwnerFile): the next contender recovers the same way", () => {
  for (const point of REUSED_POINTS) {
    it(`recovers after a crash at ${point}`, async () => {
      const result = crashedReused.get(point);
      if (!result) throw new Error("crash run missing");
      expect(result.exit, result.stderr).toEqual({ code: null, signal: "SIGKILL" });
      // The dead process's kept owner file is still there, beside the lock or instead of it.
      expect(leftovers(result.dir)).toHaveLength(1);
      const handle = await acquireLock(result.lock, { waitMs: 5_000, reuseOwnerFile: true });
      expect(inspectLock(result.lock)?.token).toBe(handle.owner.token);
      expect(inspectLock(result.lock)?.pid).toBe(process.pid);
      handle.release();
      collectLockGarbage(result.lock);
      // Only this (live) process's kept owner remains, and it goes when the process does.
      expect(leftovers(result.dir)).toEqual([`crash.lock.candidate-${process.pid}-${handle.owner.token}`]);
      removeKeptOwners();
      expect(readdirSync(result.dir)).toEqual([]);
    });
  }
});
