import { existsSync, readdirSync, readFileSync, statSync, unlinkSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  acquireLock,
  acquireLockSync,
  collectLockGarbage,
  type FileOps,
  inspectLock,
  type LockError,
  type LockOptions,
  nodeFileOps,
} from "../src/index.js";
import { keptOwnerCount, MAX_KEPT_OWNERS, removeKeptOwners } from "../src/internal/kept-owners.js";
import { captureStderr, exited, killGroup, leftovers, spawnFixture, tempDir } from "./helpers.js";

const dirs: Array<{ remove(): void }> = [];
afterEach(() => {
  removeKeptOwners();
  for (const dir of dirs.splice(0)) dir.remove();
});

function newDir(): string {
  const dir = tempDir("file-lock-reuse-");
  dirs.push(dir);
  return dir.dir;
}

/** The real file system, counting the files it creates (the cost reuse avoids). */
function countingFs(): { fs: FileOps; created(): number } {
  let created = 0;
  const fs: FileOps = {
    ...nodeFileOps,
    writeFileSync: (...args: Parameters<FileOps["writeFileSync"]>) => {
      created += 1;
      nodeFileOps.writeFileSync(...args);
    },
  };
  return { fs, created: () => created };
}

const candidates = (dir: string): string[] => readdirSync(dir).filter((name) => name.includes(".candidate-"));

describe("reuseOwnerFile", () => {
  it("publishes the kept owner file again: the same bytes and inode, and no new file written", () => {
    const dir = newDir();
    const lock = join(dir, "a.lock");
    const { fs, created } = countingFs();
    const options: LockOptions = { fs, reuseOwnerFile: true };

    const first = acquireLockSync(lock, options);
    const firstBytes = readFileSync(lock, "utf8");
    const firstIno = statSync(lock).ino;
    first.release();
    expect(existsSync(lock)).toBe(false);
    // Kept beside the lock while this process lives, named like any candidate (so gc judges it by its pid).
    expect(candidates(dir)).toEqual([`a.lock.candidate-${process.pid}-${first.owner.token}`]);
    expect(created()).toBe(1);

    for (let i = 0; i < 5; i++) {
      const again = acquireLockSync(lock, options);
      expect(again.owner.token).toBe(first.owner.token);
      expect(readFileSync(lock, "utf8")).toBe(firstBytes);
      expect(statSync(lock).ino).toBe(firstIno);
      // A contender reads an ordinary, valid owner of a live process.
      expect(inspectLock(lock)).toEqual(first.owner);
      again.assertOwned();
      again.release();
    }
    expect(created()).toBe(1);
    // Without the option nothing is kept and every acquire writes its own owner.
    const plain = acquireLockSync(join(dir, "b.lock"), { fs });
    plain.release();
    const plainAgain = acquireLockSync(join(dir, "b.lock"), { fs });
    expect(plainAgain.owner.token).not.toBe(plain.owner.token);
    plainAgain.release();
    expect(created()).toBe(3);
    expect(candidates(dir)).toHaveLength(1);
  });

  it("never lets two acquisitions of one process share an owner: the second waits, with its own token", async () => {
    const dir = newDir();
    const lock = join(dir, "a.lock");
    const options: LockOptions = { reuseOwnerFile: true, retryMs: 2 };
    // Keep one owner first, so the holder below is a reused one.
    (await acquireLock(lock, options)).release();
    const holder = await acquireLock(lock, options);

    const timedOut = (await acquireLock(lock, { ...options, waitMs: 60 }).catch((e) => e)) as LockError;
    expect(timedOut.code).toBe("LOCK_TIMEOUT");
    expect(inspectLock(lock)?.token).toBe(holder.owner.token);

    const waiting = acquireLock(lock, { ...options, waitMs: 5_000 });
    await new Promise((resolve) => setTimeout(resolve, 30));
    holder.release();
    const next = await waiting;
    expect(next.owner.token).not.toBe(holder.owner.token);
    expect(inspectLock(lock)?.token).toBe(next.owner.token);
    holder.release(); // idempotent: a stale handle never touches the new holder's lock
    expect(inspectLock(lock)?.token).toBe(next.owner.token);
    next.release();
    // One owner kept per lock: the extras were removed, not piled up.
    expect(candidates(dir)).toHaveLength(1);
    expect(keptOwnerCount()).toBe(1);
  });

  it("writes a new owner when the kept file was removed behind its back", () => {
    const dir = newDir();
    const lock = join(dir, "a.lock");
    const first = acquireLockSync(lock, { reuseOwnerFile: true });
    first.release();
    for (const name of candidates(dir)) unlinkSync(join(dir, name));

    const next = acquireLockSync(lock, { reuseOwnerFile: true });
    expect(next.owner.token).not.toBe(first.owner.token);
    expect(inspectLock(lock)?.token).toBe(next.owner.token);
    next.release();
    expect(existsSync(lock)).toBe(false);
    expect(candidates(dir)).toEqual([`a.lock.candidate-${process.pid}-${next.owner.token}`]);
  });

  it("keeps nothing after a release that found the lock lost", () => {
    const dir = newDir();
    const lock = join(dir, "a.lock");
    const handle = acquireLockSync(lock, { reuseOwnerFile: true });
    unlinkSync(lock);
    expect(() => handle.release()).toThrow(expect.objectContaining({ code: "LOCK_OWNERSHIP_LOST" }));
    expect(candidates(dir)).toEqual([]);
    expect(keptOwnerCount()).toBe(0);
  });

  it("keeps a failed acquire's owner for the next one, which writes no new file", async () => {
    const dir = newDir();
    const lock = join(dir, "a.lock");
    const { fs, created } = countingFs();
    const holder = acquireLockSync(lock, { fs });
    const failed = (await acquireLock(lock, { fs, reuseOwnerFile: true, waitMs: 20 }).catch(
      (e) => e,
    )) as LockError;
    expect(failed.code).toBe("LOCK_TIMEOUT");
    expect(candidates(dir)).toHaveLength(1);
    holder.release();
    const next = acquireLockSync(lock, { fs, reuseOwnerFile: true });
    expect(created()).toBe(2);
    next.release();
  });

  it("does not reuse an owner across payloads or file system seams", () => {
    const dir = newDir();
    const lock = join(dir, "a.lock");
    const a = acquireLockSync(lock, { reuseOwnerFile: true, payload: { purpose: "a" } });
    a.release();
    const b = acquireLockSync(lock, { reuseOwnerFile: true, payload: { purpose: "b" } });
    expect(b.owner.token).not.toBe(a.owner.token);
    expect(inspectLock(lock)?.payload).toEqual({ purpose: "b" });
    b.release();
    const seam = acquireLockSync(lock, {
      reuseOwnerFile: true,
      payload: { purpose: "a" },
      fs: { ...nodeFileOps },
    });
    expect(seam.owner.token).not.toBe(a.owner.token);
    seam.release();
    const aAgain = acquireLockSync(lock, { reuseOwnerFile: true, payload: { purpose: "a" } });
    expect(aAgain.owner.token).toBe(a.owner.token);
    aAgain.release();
  });

  it(`keeps at most ${MAX_KEPT_OWNERS} owner files, removing the least recently kept first`, () => {
    const dir = newDir();
    const locks = Array.from({ length: MAX_KEPT_OWNERS + 4 }, (_, i) => join(dir, `l${i}.lock`));
    for (const lock of locks) acquireLockSync(lock, { reuseOwnerFile: true }).release();
    expect(keptOwnerCount()).toBe(MAX_KEPT_OWNERS);
    const left = candidates(dir).map((name) => name.slice(0, name.indexOf(".candidate-")));
    expect(left.sort()).toEqual(
      locks
        .slice(4)
        .map((lock) => lock.slice(dir.length + 1))
        .sort(),
    );
  });

  it("leaves nothing after a clean exit, and gc removes what a SIGKILLed process kept", async () => {
    const dir = newDir();
    const clean = spawnFixture("reuse.ts", [join(dir, "clean.lock"), "exit"]);
    const cleanStderr = captureStderr(clean);
    expect(await exited(clean), cleanStderr()).toEqual({ code: 0, signal: null });
    expect(readdirSync(dir)).toEqual([]);

    const killed = spawnFixture("reuse.ts", [join(dir, "killed.lock"), "kill"]);
    const killedStderr = captureStderr(killed);
    try {
      expect(await exited(killed), killedStderr()).toEqual({ code: null, signal: "SIGKILL" });
    } finally {
      killGroup(killed);
    }
    expect(leftovers(dir)).toHaveLength(1);
    // Its process is dead, so the next contender takes the lock with its own owner and gc sweeps the rest.
    const next = await acquireLock(join(dir, "killed.lock"));
    next.release();
    expect(collectLockGarbage(join(dir, "killed.lock")).removed).toHaveLength(1);
    expect(readdirSync(dir)).toEqual([]);
  }, 30_000);
});
