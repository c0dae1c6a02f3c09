import { randomUUID } from "node:crypto";
import { closeSync, existsSync, openSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { isDeepStrictEqual } from "node:util";
import { afterEach, describe, expect, it } from "vitest";
import {
  acquireLock,
  acquireLockSync,
  type FileOpName,
  failNthCall,
  fsyncAsync,
  inspectLock,
  isLockError,
  type LockHandle,
  nodeFileOps,
  takeoverLock,
} from "../src/index.js";
import { removeKeptOwners } from "../src/internal/kept-owners.js";
import { deadPid, leftovers, seedOwnerText, tempDir } from "./helpers.js";

const CODES = ["EIO", "ENOSPC", "EEXIST", "EPERM", "EXDEV"] as const;
/** Far more calls than one acquire or release makes: the loop must end because a run completes. */
const MAX_N = 200;

const dirs: Array<{ remove(): void }> = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) dir.remove();
});

function newLock(): { dir: string; lock: string } {
  const dir = tempDir();
  dirs.push(dir);
  return { dir: dir.dir, lock: join(dir.dir, "x.lock") };
}

/** failNthCall counting only while armed, so the fault lands in the operation under test and nowhere else. */
function faultWhileArmed(n: number, code: string, mutatingOnly = false) {
  let armed = false;
  const faulty = failNthCall(nodeFileOps, {
    n,
    code,
    count: (name) => armed && (!mutatingOnly || !READS.has(name)),
  });
  return {
    ops: faulty.ops,
    fired: faulty.fired,
    arm: () => {
      armed = true;
    },
    disarm: () => {
      armed = false;
    },
  };
}

const READS = new Set<FileOpName>([
  "openSync",
  "readSync",
  "fstatSync",
  "closeSync",
  "lstatSync",
  "readdirSync",
]);

function expectLockError(error: unknown): void {
  if (!isLockError(error)) throw new Error(`expected a LockError, got: ${String(error)}`);
}

/** After any failure the lock must be fully usable again by a plain acquire + release. */
function expectUsable(dir: string, lock: string): void {
  expect(leftovers(dir)).toEqual([]);
  const handle = acquireLockSync(lock, { waitMs: 500 });
  handle.release();
  expect(readdirSync(dir)).toEqual([]);
}

describe("injected file system faults (fail call N, for N = 1 .. until the operation completes)", () => {
  for (const code of CODES) {
    for (const variant of ["async", "sync"] as const) {
      it(`acquire (${variant}) with ${code} at every call either succeeds or throws a LockError, leaving nothing behind`, async () => {
        const { dir, lock } = newLock();
        let failures = 0;
        let completed = false;
        for (let n = 1; n <= MAX_N && !completed; n += 1) {
          const faulty = faultWhileArmed(n, code);
          let handle: LockHandle | undefined;
          faulty.arm();
          try {
            const options = { fs: faulty.ops, waitMs: 300 };
            handle = variant === "sync" ? acquireLockSync(lock, options) : await acquireLock(lock, options);
          } catch (error) {
            expectLockError(error);
            failures += 1;
          }
          faulty.disarm();
          if (handle) {
            expect(inspectLock(lock)?.token).toBe(handle.owner.token);
            handle.release();
          }
          completed = !faulty.fired();
          expectUsable(dir, lock);
        }
        expect(completed).toBe(true);
        expect(failures).toBeGreaterThan(0);
      });
    }

    it(`acquire and release of a kept owner (reuseOwnerFile) with ${code} at every call: success or a LockError, then only the kept owner is left`, () => {
      const { dir, lock } = newLock();
      let failures = 0;
      let completed = false;
      for (let n = 1; n <= MAX_N && !completed; n += 1) {
        const faulty = faultWhileArmed(n, code);
        const options = { fs: faulty.ops, waitMs: 300, reuseOwnerFile: true };
        acquireLockSync(lock, options).release();
        let handle: LockHandle | undefined;
        faulty.arm();
        try {
          handle = acquireLockSync(lock, options);
          handle.release();
        } catch (error) {
          expectLockError(error);
          failures += 1;
        }
        faulty.disarm();
        // A release that failed left the lock ours: the retry finishes it.
        if (handle && inspectLock(lock)?.token === handle.owner.token) handle.release();
        completed = !faulty.fired();
        expect(inspectLock(lock)).toBeNull();
        expect(leftovers(dir).length).toBeLessThanOrEqual(1);
        removeKeptOwners();
        expectUsable(dir, lock);
      }
      expect(completed).toBe(true);
      expect(failures).toBeGreaterThan(0);
    });

    it(`release with ${code} at every call either succeeds or throws a LockError; a retry then releases`, () => {
      const { dir, lock } = newLock();
      let completed = false;
      let failures = 0;
      for (let n = 1; n <= MAX_N && !completed; n += 1) {
        const faulty = faultWhileArmed(n, code);
        const handle = acquireLockSync(lock, { fs: faulty.ops });
        faulty.arm();
        try {
          handle.release();
        } catch (error) {
          faulty.disarm();
          expectLockError(error);
          failures += 1;
          // A failed release says the lock may still be held by us: retrying must finish the job.
          handle.release();
        }
        expect(inspectLock(lock)).toBeNull();
        completed = !faulty.fired();
        expectUsable(dir, lock);
      }
      expect(completed).toBe(true);
      expect(failures).toBeGreaterThan(0);
    });

    it(`recovering a dead owner's lock with ${code} at every call never leaves a second holder or a candidate`, async () => {
      const { dir, lock } = newLock();
      const dead = await deadPid();
      let completed = false;
      for (let n = 1; n <= MAX_N && !completed; n += 1) {
        writeFileSync(lock, seedOwnerText(dead, randomUUID()));
        const faulty = faultWhileArmed(n, code);
        faulty.arm();
        try {
          const handle = await acquireLock(lock, { fs: faulty.ops, waitMs: 300 });
          faulty.disarm();
          expect(inspectLock(lock)?.token).toBe(handle.owner.token);
          handle.release();
        } catch (error) {
          expectLockError(error);
        }
        faulty.disarm();
        completed = !faulty.fired();
        // The dead lock is either still there (untouched or to be reaped next time) or gone; never half-done.
        const current = inspectLock(lock);
        expect(current === null || current.pid === dead).toBe(true);
        expect(leftovers(dir).filter((name) => name.includes(".candidate-"))).toEqual([]);
        expectUsable(dir, lock);
      }
      expect(completed).toBe(true);
    });
  }

  it("takeover with a fault at every mutating call either replaces the lock whole or leaves it untouched", async () => {
    const { dir, lock } = newLock();
    const dead = await deadPid();
    for (const code of CODES) {
      let completed = false;
      for (let n = 1; n <= MAX_N && !completed; n += 1) {
        writeFileSync(lock, seedOwnerText(dead, randomUUID()));
        const expected = inspectLock(lock);
        if (!expected) throw new Error("no lock");
        const faulty = faultWhileArmed(n, code, true);
        faulty.arm();
        try {
          const handle = await takeoverLock(lock, expected, { fs: faulty.ops });
          faulty.disarm();
          expect(inspectLock(lock)?.token).toBe(handle.owner.token);
          handle.release();
        } catch (error) {
          faulty.disarm();
          expectLockError(error);
          expect(inspectLock(lock)).toEqual(expected);
          nodeFileOps.unlinkSync(lock);
        }
        completed = !faulty.fired();
        expect(leftovers(dir)).toEqual([]);
        expect(readdirSync(dir)).toEqual([]);
      }
      expect(completed).toBe(true);
    }
  });

  it("durable acquire and takeover with a fault at every call: published and flushed, or given up typed", async () => {
    const { dir, lock } = newLock();
    const dead = await deadPid();
    for (const code of CODES) {
      let completed = false;
      for (let n = 1; n <= MAX_N && !completed; n += 1) {
        const faulty = faultWhileArmed(n, code);
        faulty.arm();
        let handle: LockHandle | undefined;
        try {
          handle = acquireLockSync(lock, { fs: faulty.ops, waitMs: 300, durable: true });
        } catch (error) {
          expectLockError(error);
        }
        faulty.disarm();
        handle?.release();
        completed = !faulty.fired();
        // A failed flush gave the lock up again: nothing is left, and the lock is free.
        expectUsable(dir, lock);
      }
      expect(completed).toBe(true);
      completed = false;
      for (let n = 1; n <= MAX_N && !completed; n += 1) {
        writeFileSync(lock, seedOwnerText(dead, randomUUID()));
        const expected = inspectLock(lock);
        if (!expected) throw new Error("no lock");
        const faulty = faultWhileArmed(n, code);
        faulty.arm();
        try {
          const taken = await takeoverLock(lock, expected, { fs: faulty.ops, durable: true });
          faulty.disarm();
          taken.release();
        } catch (error) {
          faulty.disarm();
          expectLockError(error);
          const now = inspectLock(lock);
          // Untouched, or replaced and not flushed: then it names this live process, never nobody.
          if (!isDeepStrictEqual(now, expected)) {
            expect((error as Error).message).toContain("taken over but could not be flushed");
            expect(now?.pid).toBe(process.pid);
          }
          nodeFileOps.unlinkSync(lock);
        }
        completed = !faulty.fired();
        expect(readdirSync(dir)).toEqual([]);
      }
      expect(completed).toBe(true);
    }
  });

  it("acquire creating a missing directory with a fault at every call fails typed or succeeds", () => {
    const { dir } = newLock();
    for (const code of CODES) {
      let completed = false;
      for (let n = 1; n <= MAX_N && !completed; n += 1) {
        const lock = join(dir, `${code}-${n}`, "x.lock");
        const faulty = faultWhileArmed(n, code);
        faulty.arm();
        try {
          const handle = acquireLockSync(lock, { fs: faulty.ops, waitMs: 100 });
          faulty.disarm();
          handle.release();
        } catch (error) {
          expectLockError(error);
        }
        faulty.disarm();
        completed = !faulty.fired();
        const made = join(dir, `${code}-${n}`);
        if (existsSync(made)) expect(readdirSync(made)).toEqual([]);
      }
      expect(completed).toBe(true);
    }
  });

  it("counts reads too: the fault loop covers every kind of call acquire makes", () => {
    const { lock } = newLock();
    const seen = new Set<FileOpName>();
    const spy = failNthCall(nodeFileOps, {
      n: Number.MAX_SAFE_INTEGER,
      code: "EIO",
      count: (name) => {
        seen.add(name);
        return true;
      },
    });
    const handle = acquireLockSync(lock, { fs: spy.ops });
    handle.release();
    expect([...seen].sort()).toEqual(
      ["closeSync", "fstatSync", "linkSync", "openSync", "readSync", "unlinkSync", "writeFileSync"].sort(),
    );
  });
});

describe("fsyncAsync: the seam's one asynchronous call", () => {
  it("flushes through the seam, and an injected fault (thrown by the call itself) rejects the promise", async () => {
    const { dir } = newLock();
    const file = join(dir, "data");
    writeFileSync(file, "bytes");
    const fd = openSync(file, "r");
    try {
      await expect(fsyncAsync(nodeFileOps, fd)).resolves.toBeUndefined();
      const faulty = failNthCall(nodeFileOps, { n: 1, code: "EIO", count: (name) => name === "fsync" });
      const error = await fsyncAsync(faulty.ops, fd).then(
        () => null,
        (caught: unknown) => caught,
      );
      expect(faulty.fired()).toBe(true);
      expect(error).toMatchObject({ code: "EIO", syscall: "fsync" });
      // A bad descriptor fails in the callback, as node reports it.
      await expect(fsyncAsync(nodeFileOps, 987_654)).rejects.toMatchObject({ code: "EBADF" });
    } finally {
      closeSync(fd);
    }
  });
});
