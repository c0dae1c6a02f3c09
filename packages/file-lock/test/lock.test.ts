import { createHash, randomUUID } from "node:crypto";
import {
  appendFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { basename, dirname, join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  acquireLock,
  acquireLockSync,
  collectLockGarbage,
  collectLockGarbageIn,
  createSystemIdentity,
  errnoError,
  type FileOps,
  flushAncestry,
  inspectLock,
  isLockError,
  LOCK_ERROR_STATUS,
  LockError,
  type LockOptions,
  type LockOwner,
  LockOwnerSchema,
  nodeFileOps,
  takeoverLock,
  withLock,
  withLockSync,
} from "../src/index.js";
import { deadPid, freshDeadPid, leftovers, seedOwnerText, tempDir } from "./helpers.js";

const dirs: Array<{ remove(): void }> = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) dir.remove();
});

function newLock(name = "x.lock"): { dir: string; lock: string } {
  const dir = tempDir();
  dirs.push(dir);
  return { dir: dir.dir, lock: join(dir.dir, name) };
}

/** The real file system, but opening `path` fails with `code`. */
function failOpenOf(path: string, code: string): FileOps {
  return {
    ...nodeFileOps,
    openSync: ((file: string, ...rest: unknown[]) => {
      if (file === path) throw errnoError(code, "open", file);
      return (nodeFileOps.openSync as (...a: unknown[]) => number)(file, ...rest);
    }) as FileOps["openSync"],
  };
}

function snapshot(dir: string): Record<string, string> {
  return Object.fromEntries(readdirSync(dir).map((name) => [name, readFileSync(join(dir, name), "utf8")]));
}

async function caught(promise: Promise<unknown>): Promise<LockError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!isLockError(error)) throw new Error(`expected a LockError, got ${String(error)}`);
  return error;
}

describe("acquire and release", () => {
  it("publishes an owner in the seeds' format plus identity, and the seeds' validator accepts it", async () => {
    const { dir, lock } = newLock();
    const handle = await acquireLock(lock, { payload: { purpose: "test" } });
    const text = readFileSync(lock, "utf8");
    expect(text.endsWith("}\n")).toBe(true);
    const raw = JSON.parse(text);
    // The original lock's isLockOwner, restated: extra fields are allowed.
    expect(raw.version).toBe(1);
    expect(Number.isInteger(raw.pid) && raw.pid > 0 && raw.pid <= 0x7fffffff).toBe(true);
    expect(raw.token).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(typeof raw.createdAt === "number" && raw.createdAt > 0).toBe(true);
    expect(raw).toMatchObject({ pid: process.pid, payload: { purpose: "test" } });
    expect(typeof raw.bootId).toBe("string");
    expect(typeof raw.startTime).toBe("number");
    expect(handle.owner).toEqual(LockOwnerSchema.parse(raw));
    expect(readdirSync(dir)).toEqual(["x.lock"]);
    handle.release();
    expect(readdirSync(dir)).toEqual([]);
  });

  it("leaves out identity facts that do not fit the format instead of writing a lock nobody can read", async () => {
    const { lock } = newLock();
    const identity = {
      ...createSystemIdentity(),
      hostname: () => "h".repeat(300),
      bootId: () => "",
      processStartTime: () => -1,
      pidNamespace: () => "n".repeat(300),
    };
    const handle = await acquireLock(lock, { identity });
    const owner = inspectLock(lock);
    expect(owner).toEqual(handle.owner);
    expect(Object.keys(owner ?? {}).sort()).toEqual(["createdAt", "pid", "token", "version"]);
    handle.release();
    await expect(acquireLock(lock, { now: () => Number.NaN })).rejects.toThrow(TypeError);
  });

  it("rejects a payload that would not survive JSON before touching the disk", async () => {
    const { dir, lock } = newLock();
    await expect(acquireLock(lock, { payload: { when: new Date() } })).rejects.toThrow(TypeError);
    expect(() => acquireLockSync(lock, { payload: { n: Number.NaN } })).toThrow(TypeError);
    expect(readdirSync(dir)).toEqual([]);
  });

  it("creates a missing lock directory with mode 0700", async () => {
    const { dir } = newLock();
    const lock = join(dir, "a", "b", "x.lock");
    const handle = await acquireLock(lock);
    expect(statSync(join(dir, "a", "b")).mode & 0o777).toBe(0o700);
    expect(statSync(lock).mode & 0o777).toBe(0o600);
    handle.release();
  });

  it("inspectLock reads without creating anything, even the directory", () => {
    const { dir } = newLock();
    const lock = join(dir, "missing", "x.lock");
    expect(inspectLock(lock)).toBeNull();
    expect(existsSync(join(dir, "missing"))).toBe(false);
  });

  it("release is idempotent and never deletes a lock that another owner now holds", async () => {
    const { lock } = newLock();
    const handle = await acquireLock(lock);
    handle.release();
    handle.release();
    const other = await acquireLock(lock);
    const otherText = readFileSync(lock, "utf8");
    handle.release();
    expect(readFileSync(lock, "utf8")).toBe(otherText);
    other.release();
  });

  it("assertOwned and release report LOCK_OWNERSHIP_LOST when the lock was replaced, and leave it alone", async () => {
    const { lock } = newLock();
    const handle = await acquireLock(lock);
    handle.assertOwned();
    const replacement = seedOwnerText(process.pid, randomUUID());
    writeFileSync(lock, replacement);
    expect(() => handle.assertOwned()).toThrow(expect.objectContaining({ code: "LOCK_OWNERSHIP_LOST" }));
    expect(() => handle.release()).toThrow(expect.objectContaining({ code: "LOCK_OWNERSHIP_LOST" }));
    expect(readFileSync(lock, "utf8")).toBe(replacement);
  });

  it("assertOwned reports LOCK_OWNERSHIP_LOST once the lock file is gone", async () => {
    const { lock } = newLock();
    const handle = await acquireLock(lock);
    nodeFileOps.unlinkSync(lock);
    expect(() => handle.assertOwned()).toThrow(expect.objectContaining({ code: "LOCK_OWNERSHIP_LOST" }));
  });

  it("withLock releases after the callback, also when it throws, and returns its value", async () => {
    const { lock } = newLock();
    await expect(withLock(lock, () => Promise.resolve(7))).resolves.toBe(7);
    await expect(
      withLock(lock, () => {
        throw new Error("boom");
      }),
    ).rejects.toThrow("boom");
    expect(withLockSync(lock, (h) => h.owner.pid)).toBe(process.pid);
    expect(inspectLock(lock)).toBeNull();
  });

  it("withLockSync refuses an async fn, and keeps the lock until the work it started has settled", async () => {
    const { lock } = newLock();
    let heldDuringAwait: boolean | null = null;
    let finish: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => {
      finish = resolve;
    });
    expect(() =>
      withLockSync(lock, async () => {
        await gate;
        heldDuringAwait = inspectLock(lock) !== null;
      }),
    ).toThrow(/fn returned a promise.*Use withLock for async work/);
    // The work runs on after the first await: still under the lock, released once it settles.
    expect(inspectLock(lock)?.pid).toBe(process.pid);
    finish();
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(heldDuringAwait).toBe(true);
    expect(inspectLock(lock)).toBeNull();
    // A rejected one too, with no unhandled rejection.
    expect(() => withLockSync(lock, () => Promise.reject(new Error("late failure")))).toThrow(TypeError);
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(inspectLock(lock)).toBeNull();
    // A thenable whose then() throws never settles: the lock is released at once, and the TypeError stands.
    const broken = {
      // biome-ignore lint/suspicious/noThenProperty: the hostile thenable under test
      then() {
        throw new Error("then exploded");
      },
    };
    expect(() => withLockSync(lock, () => broken)).toThrow(/fn returned a promise/);
    expect(inspectLock(lock)).toBeNull();
  });

  it("a lock path that is not a non-empty string is a TypeError before any file is touched", async () => {
    const { dir } = newLock();
    const before = readdirSync(dir);
    for (const bad of ["", undefined, null, 7, "a\0b"]) {
      await expect(acquireLock(bad as never)).rejects.toThrow(TypeError);
      expect(() => acquireLockSync(bad as never)).toThrow(/non-empty string/);
      await expect(takeoverLock(bad as never, { torn: true } as never)).rejects.toThrow(TypeError);
      expect(() => inspectLock(bad as never)).toThrow(TypeError);
    }
    expect(readdirSync(dir)).toEqual(before);
  });

  it("takeoverLock with no expected owner is a TypeError naming what it needs, not an internal crash", async () => {
    const { lock } = newLock();
    for (const bad of [null, undefined, 5, {}]) {
      await expect(takeoverLock(lock, bad as never)).rejects.toThrow(/expected must be a lock owner/);
    }
  });

  it("is not re-entrant: a second acquire in the same process waits and times out", async () => {
    const { lock } = newLock();
    const handle = await acquireLock(lock);
    const error = await caught(acquireLock(lock, { waitMs: 60 }));
    expect(error.code).toBe("LOCK_TIMEOUT");
    expect(error.status).toBe(409);
    expect(error.message).toContain(`locked by another drydock process (pid ${process.pid}`);
    expect(error.message).not.toContain(handle.owner.token);
    handle.release();
  });

  it("never puts the lock token in an error's message or serialised fields", async () => {
    const { lock } = newLock();
    const handle = await acquireLock(lock);
    const error = await caught(acquireLock(lock, { waitMs: 30 }));
    expect(error.owner?.token).toBe(handle.owner.token);
    expect(JSON.stringify(error)).not.toContain(handle.owner.token);
    expect(`${error.message} ${error.stack}`).not.toContain(handle.owner.token);
    handle.release();
  });

  it("maps every error code to a status", () => {
    for (const [code, status] of Object.entries(LOCK_ERROR_STATUS)) {
      const error = new LockError({ code: code as keyof typeof LOCK_ERROR_STATUS, message: "m" });
      expect(error.status).toBe(status);
      expect(isLockError(error)).toBe(true);
    }
    expect(isLockError(new Error("x"))).toBe(false);
  });
});

describe("failing closed", () => {
  const corrupt: Record<string, string> = {
    "not JSON": "hello\n",
    "truncated JSON": '{"version":1,"pid":12',
    "wrong version": JSON.stringify({ version: 2, pid: 5, token: randomUUID(), createdAt: 1 }),
    "non-uuid token": JSON.stringify({ version: 1, pid: 5, token: "abc", createdAt: 1 }),
    "pid zero": JSON.stringify({ version: 1, pid: 0, token: randomUUID(), createdAt: 1 }),
    array: "[]",
    "NUL bytes": "\0\0",
    "empty file": "",
  };
  for (const [name, text] of Object.entries(corrupt)) {
    it(`refuses a corrupt lock (${name}) with LOCK_INVALID and leaves its bytes untouched`, async () => {
      const { dir, lock } = newLock();
      writeFileSync(lock, text);
      const before = snapshot(dir);
      expect((await caught(acquireLock(lock, { waitMs: 100 }))).code).toBe("LOCK_INVALID");
      expect(() => inspectLock(lock)).toThrow(expect.objectContaining({ code: "LOCK_INVALID" }));
      expect(snapshot(dir)).toEqual(before);
    });
  }

  it("refuses a symlink planted at the lock name without following it", async () => {
    const { dir, lock } = newLock();
    const target = join(dir, "target");
    writeFileSync(target, seedOwnerText(await deadPid(), randomUUID()));
    symlinkSync(target, lock);
    const before = readFileSync(target, "utf8");
    expect((await caught(acquireLock(lock, { waitMs: 100 }))).code).toBe("LOCK_INVALID");
    expect(readFileSync(target, "utf8")).toBe(before);
    expect(readdirSync(dir).sort()).toEqual(["target", "x.lock"]);
  });

  it("refuses an unreadable lock with LOCK_UNREADABLE and leaves it", async () => {
    const { dir, lock } = newLock();
    writeFileSync(lock, seedOwnerText(await deadPid(), randomUUID()));
    const before = snapshot(dir);
    const fs: FileOps = {
      ...nodeFileOps,
      openSync: ((path: string, ...rest: unknown[]) => {
        if (path === lock) throw errnoError("EACCES", "open", path);
        return (nodeFileOps.openSync as (...a: unknown[]) => number)(path, ...rest);
      }) as FileOps["openSync"],
    };
    expect((await caught(acquireLock(lock, { waitMs: 100, fs }))).code).toBe("LOCK_UNREADABLE");
    expect(snapshot(dir)).toEqual(before);
  });

  it("names the errno, or what is wrong with the bytes, in a bad lock's message", async () => {
    const { dir, lock } = newLock();
    writeFileSync(lock, "");
    expect((await caught(acquireLock(lock, { waitMs: 100 }))).message).toContain("(empty)");
    writeFileSync(lock, seedOwnerText(await deadPid(), randomUUID()));
    const fs = failOpenOf(lock, "EACCES");
    const error = await caught(acquireLock(lock, { waitMs: 100, fs }));
    expect(error.code).toBe("LOCK_UNREADABLE");
    expect(error.message).toContain("(EACCES)");
    expect(readdirSync(dir)).toEqual(["x.lock"]);
  });

  for (const code of ["EMFILE", "ENFILE", "ENOMEM", "EAGAIN", "EINTR"]) {
    it(`does not judge a lock it could not open for want of descriptors or memory (${code}): LOCK_IO, nothing changed`, async () => {
      const { dir, lock } = newLock();
      // A lock that would be reaped at once if it were judged (its owner is from before the boot).
      writeFileSync(lock, seedOwnerText(await deadPid(), randomUUID()));
      const identity = { ...createSystemIdentity(), bootTimeMs: () => Date.now() + 60_000 };
      const fs = failOpenOf(lock, code);
      const before = snapshot(dir);
      for (const error of [
        await caught(acquireLock(lock, { waitMs: 100, fs, identity })),
        await caught(Promise.resolve().then(() => inspectLock(lock, { fs }))),
      ]) {
        expect(error.code).toBe("LOCK_IO");
        expect(error.message).toContain(code);
        expect(error.message).toContain("not judged");
        expect(error.message).not.toContain("remove it by hand");
      }
      expect(snapshot(dir)).toEqual(before);
    });
  }

  it("a release that cannot read its own lock says this process still holds it, and a retry releases", async () => {
    for (const code of ["EMFILE", "EIO"]) {
      const { dir, lock } = newLock();
      let fail = false;
      const fs: FileOps = {
        ...nodeFileOps,
        openSync: ((path: string, ...rest: unknown[]) => {
          if (fail && path === lock) {
            fail = false;
            throw errnoError(code, "open", path);
          }
          return (nodeFileOps.openSync as (...a: unknown[]) => number)(path, ...rest);
        }) as FileOps["openSync"],
      };
      const handle = await acquireLock(lock, { fs });
      fail = true;
      let error: unknown;
      try {
        handle.release();
      } catch (e) {
        error = e;
      }
      if (!isLockError(error)) throw new Error(`expected a LockError, got ${String(error)}`);
      expect(error.message).toContain(code);
      expect(error.message).toContain("this process still holds it");
      expect(error.message).toContain("Retry release()");
      expect(error.message).not.toContain("nothing was taken");
      expect(inspectLock(lock)?.token).toBe(handle.owner.token);
      handle.release();
      expect(readdirSync(dir)).toEqual([]);
    }
  });

  it("refuses an invalid election record with LOCK_INVALID and leaves both files", async () => {
    const { dir, lock } = newLock();
    const token = randomUUID();
    writeFileSync(lock, seedOwnerText(await deadPid(), token));
    writeFileSync(`${lock}.reap-${token}`, "garbage");
    const before = snapshot(dir);
    expect((await caught(acquireLock(lock, { waitMs: 100 }))).code).toBe("LOCK_INVALID");
    expect(snapshot(dir)).toEqual(before);
  });

  it("refuses an election record that names another lock token", async () => {
    const { dir, lock } = newLock();
    const token = randomUUID();
    writeFileSync(lock, seedOwnerText(await deadPid(), token));
    const record = {
      version: 1,
      pid: await deadPid(),
      token: randomUUID(),
      createdAt: 1,
      targetToken: randomUUID(),
    };
    writeFileSync(`${lock}.reap-${token}`, `${JSON.stringify(record)}\n`);
    const before = snapshot(dir);
    expect((await caught(acquireLock(lock, { waitMs: 100 }))).code).toBe("LOCK_INVALID");
    expect(snapshot(dir)).toEqual(before);
  });

  it("treats a link that reported an error but happened (NFS retransmission) as acquired", async () => {
    const { dir, lock } = newLock();
    const fs: FileOps = {
      ...nodeFileOps,
      linkSync: (from, to) => {
        nodeFileOps.linkSync(from, to);
        if (to === lock) throw errnoError("EEXIST", "link", lock);
      },
    };
    const handle = await acquireLock(lock, { fs, waitMs: 100 });
    expect(inspectLock(lock)?.token).toBe(handle.owner.token);
    expect(readdirSync(dir)).toEqual(["x.lock"]);
    handle.release();
    expect(readdirSync(dir)).toEqual([]);
  });

  it("reports LOCK_UNSUPPORTED_FS when the file system refuses hard links, leaving no candidate", async () => {
    const { dir, lock } = newLock();
    const fs: FileOps = {
      ...nodeFileOps,
      linkSync: (from, to) => {
        throw errnoError("EPERM", "link", String(to ?? from));
      },
    };
    expect((await caught(acquireLock(lock, { fs }))).code).toBe("LOCK_UNSUPPORTED_FS");
    expect(() => acquireLockSync(lock, { fs })).toThrow(
      expect.objectContaining({ code: "LOCK_UNSUPPORTED_FS" }),
    );
    expect(readdirSync(dir)).toEqual([]);
  });
});

describe("reaper election", () => {
  function successor(lock: string, token: string, identity: string): string {
    return `${lock}.reap-${token}-${createHash("sha256").update(identity).digest("hex").slice(0, 32)}`;
  }

  it("follows the successor chain past dead reapers (legacy and JSON) to recover the lock", async () => {
    const { dir, lock } = newLock();
    const token = randomUUID();
    writeFileSync(lock, seedOwnerText(await deadPid(), token));
    const firstReaper = await deadPid();
    writeFileSync(`${lock}.reap-${token}`, `${firstReaper}\n`);
    const second = {
      version: 1,
      pid: await deadPid(),
      token: randomUUID(),
      createdAt: 1,
      targetToken: token,
    };
    writeFileSync(successor(lock, token, `legacy:${firstReaper}`), `${JSON.stringify(second)}\n`);
    const handle = await acquireLock(lock, { waitMs: 1_000 });
    expect(inspectLock(lock)?.token).toBe(handle.owner.token);
    // Our own (third) record was given up after the reap; the dead reapers' records are garbage now.
    expect(leftovers(dir).sort()).toEqual(
      [`x.lock.reap-${token}`, successor("x.lock", token, `legacy:${firstReaper}`)].sort(),
    );
    handle.release();
  });

  it("waits for a live reaper's JSON election record and says the lock is being recovered", async () => {
    const { dir, lock } = newLock();
    const token = randomUUID();
    const dead = await deadPid();
    writeFileSync(lock, seedOwnerText(dead, token));
    const record = { version: 1, pid: process.pid, token: randomUUID(), createdAt: 1, targetToken: token };
    writeFileSync(`${lock}.reap-${token}`, `${JSON.stringify(record)}\n`);
    const before = snapshot(dir);
    const error = await caught(acquireLock(lock, { waitMs: 100, label: "journal" }));
    expect(error.code).toBe("LOCK_TIMEOUT");
    expect(error.message).toContain(`locked by another journal process (pid ${dead})`);
    expect(error.message).toContain("another live process is recovering it");
    expect(snapshot(dir)).toEqual(before);
  });

  it("gives up with LOCK_REAPER_EXHAUSTED after maxReaperGenerations dead reapers, changing nothing", async () => {
    const { dir, lock } = newLock();
    const token = randomUUID();
    writeFileSync(lock, seedOwnerText(await deadPid(), token));
    const first = await freshDeadPid();
    writeFileSync(`${lock}.reap-${token}`, `${first}\n`);
    // A different dead pid: the successor is named after its predecessor's pid.
    writeFileSync(successor(lock, token, `legacy:${first}`), `${await freshDeadPid()}\n`);
    const before = snapshot(dir);
    const error = await caught(acquireLock(lock, { waitMs: 100, maxReaperGenerations: 2 }));
    expect(error.code).toBe("LOCK_REAPER_EXHAUSTED");
    expect(snapshot(dir)).toEqual(before);
    const handle = await acquireLock(lock, { waitMs: 100, maxReaperGenerations: 3 });
    handle.release();
  });

  it("collectLockGarbage removes only records whose target is no longer the lock, and dead candidates", async () => {
    const { lock } = newLock();
    const handle = await acquireLock(lock);
    const current = handle.owner.token;
    const gone = randomUUID();
    const dead = await deadPid();
    const files = {
      currentRecord: `${lock}.reap-${current}`,
      goneRecord: `${lock}.reap-${gone}`,
      goneSuccessor: successor(lock, gone, "legacy:1"),
      deadCandidate: `${lock}.candidate-${dead}-${randomUUID()}`,
      liveCandidate: `${lock}.candidate-${process.pid}-${randomUUID()}`,
      deadRecordCandidate: `${lock}.reap-${gone}.candidate-${dead}-${randomUUID()}`,
      unrelated: `${lock}.reap-notes`,
    };
    for (const path of Object.values(files)) writeFileSync(path, `${dead}\n`);
    writeFileSync(files.liveCandidate, seedOwnerText(process.pid, randomUUID()));
    const { removed } = collectLockGarbage(lock);
    expect(removed.sort()).toEqual(
      [files.goneRecord, files.goneSuccessor, files.deadCandidate, files.deadRecordCandidate].sort(),
    );
    for (const kept of [files.currentRecord, files.liveCandidate, files.unrelated, lock]) {
      expect(existsSync(kept)).toBe(true);
    }
    handle.release();
    expect(collectLockGarbage(lock).removed).toEqual([files.currentRecord]);
  });

  it("collectLockGarbageIn does the same for every lock in a directory, listing it once", async () => {
    const { dir, lock: held } = newLock("held.lock");
    const absent = join(dir, "absent.lock");
    const handle = await acquireLock(held);
    const dead = await deadPid();
    const gone = randomUUID();
    const files = {
      heldCurrentRecord: `${held}.reap-${handle.owner.token}`,
      heldGoneRecord: `${held}.reap-${gone}`,
      heldDeadCandidate: `${held}.candidate-${dead}-${randomUUID()}`,
      absentDeadCandidate: `${absent}.candidate-${dead}-${randomUUID()}`,
      absentDeadRecordCandidate: `${absent}.reap-${gone}.candidate-${dead}-${randomUUID()}`,
      absentLiveCandidate: `${absent}.candidate-${process.pid}-${randomUUID()}`,
      unrelated: join(dir, "notes.txt"),
    };
    for (const path of Object.values(files)) writeFileSync(path, `${dead}\n`);
    writeFileSync(files.absentLiveCandidate, seedOwnerText(process.pid, randomUUID()));
    let listings = 0;
    const fs: FileOps = {
      ...nodeFileOps,
      readdirSync: ((path: string) => {
        listings += 1;
        return nodeFileOps.readdirSync(path);
      }) as FileOps["readdirSync"],
    };
    const { removed } = collectLockGarbageIn(dir, { fs });
    expect(listings).toBe(1);
    expect(removed.sort()).toEqual(
      [
        files.heldGoneRecord,
        files.heldDeadCandidate,
        files.absentDeadCandidate,
        files.absentDeadRecordCandidate,
      ].sort(),
    );
    for (const kept of [files.heldCurrentRecord, files.absentLiveCandidate, files.unrelated, held]) {
      expect(existsSync(kept)).toBe(true);
    }
    expect(inspectLock(held)?.token).toBe(handle.owner.token);
    handle.release();
    expect(collectLockGarbageIn(join(dir, "missing")).removed).toEqual([]);
  });
});

describe("reapDeadOwners: false and takeoverLock", () => {
  async function deadOwnerLock(): Promise<{ dir: string; lock: string; owner: LockOwner }> {
    const { dir, lock } = newLock();
    writeFileSync(lock, seedOwnerText(await deadPid(), randomUUID()));
    const error = await caught(acquireLock(lock, { reapDeadOwners: false, waitMs: 500 }));
    expect(error.code).toBe("LOCK_OWNER_DEAD");
    expect(error.owner).toEqual(inspectLock(lock));
    return { dir, lock, owner: error.owner as LockOwner };
  }

  it("reports a dead owner as LOCK_OWNER_DEAD with the owner, leaving the lock as it is", async () => {
    const { dir, lock, owner } = await deadOwnerLock();
    const before = snapshot(dir);
    expect(() => acquireLockSync(lock, { reapDeadOwners: false })).toThrow(
      expect.objectContaining({ code: "LOCK_OWNER_DEAD", owner }),
    );
    expect(snapshot(dir)).toEqual(before);
  });

  it("takes over the lock when it still holds exactly the expected dead owner", async () => {
    const { dir, lock, owner } = await deadOwnerLock();
    const handle = await takeoverLock(lock, owner, { payload: { transactionId: "t1" } });
    expect(inspectLock(lock)).toEqual(handle.owner);
    expect(handle.owner.payload).toEqual({ transactionId: "t1" });
    expect(leftovers(dir)).toEqual([]);
    handle.assertOwned();
    handle.release();
    expect(readdirSync(dir)).toEqual([]);
  });

  it("refuses a takeover whose expected owner differs in any field, leaving the lock untouched", async () => {
    const { dir, lock, owner } = await deadOwnerLock();
    const before = snapshot(dir);
    for (const expected of [
      { ...owner, createdAt: owner.createdAt + 1 },
      { ...owner, token: randomUUID() },
      { ...owner, host: "elsewhere" },
    ]) {
      expect((await caught(takeoverLock(lock, expected))).code).toBe("LOCK_OWNERSHIP_LOST");
      expect(snapshot(dir)).toEqual(before);
    }
  });

  it("refuses a takeover when the lock changed after it was inspected", async () => {
    const { dir, lock, owner } = await deadOwnerLock();
    const changed = seedOwnerText(await deadPid(), randomUUID());
    writeFileSync(lock, changed);
    expect((await caught(takeoverLock(lock, owner))).code).toBe("LOCK_OWNERSHIP_LOST");
    expect(readFileSync(lock, "utf8")).toBe(changed);
    nodeFileOps.unlinkSync(lock);
    expect((await caught(takeoverLock(lock, owner))).code).toBe("LOCK_OWNERSHIP_LOST");
    expect(readdirSync(dir)).toEqual([]);
  });

  it("reports a torn lock from before the boot as LOCK_OWNER_DEAD with its file, never reaping it", async () => {
    // A lock published without `durable` whose bytes a power loss took: its owner is unknown, but it is a lock.
    const { dir, lock } = newLock();
    writeFileSync(lock, "");
    const rebooted = { identity: { ...createSystemIdentity(), bootTimeMs: () => Date.now() + 60_000 } };
    const before = snapshot(dir);
    const error = await caught(acquireLock(lock, { ...rebooted, reapDeadOwners: false, waitMs: 200 }));
    expect(error.code).toBe("LOCK_OWNER_DEAD");
    expect(error.owner).toBeUndefined();
    const { dev, ino, ctimeMs } = statSync(lock);
    expect(error.tornLock).toEqual({ torn: true, dev, ino, size: 0, ctimeMs });
    expect(error.message).toContain("power loss");
    expect(error.message).toContain("(empty)");
    expect(() => acquireLockSync(lock, { ...rebooted, reapDeadOwners: false })).toThrow(
      expect.objectContaining({ code: "LOCK_OWNER_DEAD" }),
    );
    expect(snapshot(dir)).toEqual(before);
  });

  it("takes over a torn lock only while it is still that very file", async () => {
    const { dir, lock } = newLock();
    const rebooted = { identity: { ...createSystemIdentity(), bootTimeMs: () => Date.now() + 60_000 } };
    const torn = async () => {
      const error = await caught(acquireLock(lock, { ...rebooted, reapDeadOwners: false, waitMs: 200 }));
      if (error.tornLock === undefined) throw new Error(`expected a torn lock, got ${error.code}`);
      return error.tornLock;
    };
    writeFileSync(lock, "\0\0\0");
    const first = await torn();
    // Another torn file at the name (another inode), then the same inode with other bytes: not what was seen.
    writeFileSync(join(dir, "other"), "\0\0\0");
    renameSync(join(dir, "other"), lock);
    expect((await caught(takeoverLock(lock, first, rebooted))).code).toBe("LOCK_OWNERSHIP_LOST");
    const second = await torn();
    appendFileSync(lock, "\0");
    expect((await caught(takeoverLock(lock, second, rebooted))).code).toBe("LOCK_OWNERSHIP_LOST");
    expect(readFileSync(lock, "utf8")).toBe("\0\0\0\0");
    // Not torn by a power loss: a file changed after the boot is never taken over.
    const third = await torn();
    expect((await caught(takeoverLock(lock, third))).code).toBe("LOCK_OWNERSHIP_LOST");
    expect(readdirSync(dir)).toEqual(["x.lock"]);
    const handle = await takeoverLock(lock, third, { ...rebooted, payload: { transactionId: "t1" } });
    expect(inspectLock(lock)).toEqual(handle.owner);
    expect(leftovers(dir)).toEqual([]);
    handle.release();
    expect(readdirSync(dir)).toEqual([]);
  });

  it("refuses to take over a lock whose owner is alive", async () => {
    const { dir, lock } = newLock();
    const holder = await acquireLock(lock);
    const before = snapshot(dir);
    expect((await caught(takeoverLock(lock, holder.owner))).code).toBe("LOCK_TIMEOUT");
    expect(snapshot(dir)).toEqual(before);
    holder.release();
  });
});

describe("bounded and cancellable waits", () => {
  it("aborts a wait promptly with LOCK_ABORTED and removes its candidate", async () => {
    const { dir, lock } = newLock();
    const holder = await acquireLock(lock);
    const controller = new AbortController();
    const waiting = acquireLock(lock, { waitMs: 60_000, signal: controller.signal });
    setTimeout(() => controller.abort(), 30);
    expect((await caught(waiting)).code).toBe("LOCK_ABORTED");
    expect(readdirSync(dir)).toEqual(["x.lock"]);
    holder.release();
  });

  it("does not touch the disk when the signal is already aborted", async () => {
    const { dir, lock } = newLock();
    const signal = AbortSignal.abort();
    expect((await caught(acquireLock(lock, { signal }))).code).toBe("LOCK_ABORTED");
    expect(() => acquireLockSync(lock, { signal })).toThrow(
      expect.objectContaining({ code: "LOCK_ABORTED" }),
    );
    expect(readdirSync(dir)).toEqual([]);
  });

  it("keeps the event loop running while an async acquire waits (and the sync one blocks it)", async () => {
    const { lock } = newLock();
    const holder = await acquireLock(lock);
    let ticks = 0;
    const interval = setInterval(() => {
      ticks += 1;
    }, 5);
    try {
      await caught(acquireLock(lock, { waitMs: 300 }));
      expect(ticks).toBeGreaterThan(3);
      const before = ticks;
      expect(() => acquireLockSync(lock, { waitMs: 100 })).toThrow(
        expect.objectContaining({ code: "LOCK_TIMEOUT" }),
      );
      expect(ticks).toBe(before);
    } finally {
      clearInterval(interval);
      holder.release();
    }
  });

  /** A clock that advances 7 ms per reading: the deadline is reached after a bounded number of steps. */
  function steppingClock(): { now: () => number; readings: () => number } {
    let readings = 0;
    return { now: () => 7 * readings++, readings: () => readings };
  }

  it("still takes a dead owner's lock it reaped just as the deadline passed (one last look)", async () => {
    const { lock } = newLock();
    for (const sync of [false, true]) {
      writeFileSync(lock, seedOwnerText(await deadPid(), randomUUID()));
      const options = { waitMs: 1, monotonicNow: steppingClock().now };
      const handle = sync ? acquireLockSync(lock, options) : await acquireLock(lock, options);
      expect(inspectLock(lock)?.token).toBe(handle.owner.token);
      handle.release();
    }
  });

  it("ends the wait within waitMs when the lock vanishes between EEXIST and every read", async () => {
    const { dir, lock } = newLock();
    const fs: FileOps = {
      ...nodeFileOps,
      linkSync: (from, to) => {
        if (to === lock) throw errnoError("EEXIST", "link", lock);
        nodeFileOps.linkSync(from, to);
      },
    };
    for (const sync of [false, true]) {
      const clock = steppingClock();
      const options = { fs, waitMs: 500, monotonicNow: clock.now, retryMs: 1 };
      const error = sync
        ? (() => {
            try {
              acquireLockSync(lock, options);
            } catch (e) {
              return e as LockError;
            }
            throw new Error("acquired a lock that never existed");
          })()
        : await caught(acquireLock(lock, options));
      expect(error.code).toBe("LOCK_TIMEOUT");
      expect(clock.readings()).toBeLessThan(200);
    }
    expect(readdirSync(dir)).toEqual([]);
  });

  it("ends the wait within waitMs when the lock is replaced by a new dead owner after every reap", async () => {
    const { dir, lock } = newLock();
    const dead = await deadPid();
    let replacements = 0;
    const fs: FileOps = {
      ...nodeFileOps,
      linkSync: (from, to) => {
        if (to === lock) throw errnoError("EEXIST", "link", lock);
        nodeFileOps.linkSync(from, to);
      },
      openSync: ((path: string, ...rest: unknown[]) => {
        if (path === lock) {
          // An adversary swaps in a fresh dead owner before each look, so each reap finds a new token.
          nodeFileOps.writeFileSync(lock, seedOwnerText(dead, randomUUID()));
          replacements += 1;
        }
        return (nodeFileOps.openSync as (...a: unknown[]) => number)(path, ...rest);
      }) as FileOps["openSync"],
    };
    const clock = steppingClock();
    const error = await caught(acquireLock(lock, { fs, waitMs: 500, monotonicNow: clock.now }));
    expect(error.code).toBe("LOCK_TIMEOUT");
    expect(replacements).toBeGreaterThan(1);
    expect(clock.readings()).toBeLessThan(200);
    // Every election record was given up; only the adversary's last lock remains.
    expect(readdirSync(dir)).toEqual(["x.lock"]);
  });
});

describe("durable", () => {
  /** The real file system, logging flushes and name changes by role (lock, candidate, record, dir). */
  function tracingFs(lock: string): { fs: FileOps; log: string[] } {
    const log: string[] = [];
    const open = new Map<number, string>();
    const role = (path: string): string =>
      path === lock
        ? "lock"
        : path === dirname(lock)
          ? "dir"
          : basename(path).includes(".reap-")
            ? "record"
            : basename(path).includes(".candidate-")
              ? "candidate"
              : path;
    const fs: FileOps = {
      ...nodeFileOps,
      openSync: ((path: string, ...rest: unknown[]) => {
        const fd = (nodeFileOps.openSync as (...a: unknown[]) => number)(path, ...rest);
        open.set(fd, path);
        return fd;
      }) as FileOps["openSync"],
      fsyncSync: (fd) => {
        log.push(`fsync ${role(open.get(fd) ?? "?")}`);
        nodeFileOps.fsyncSync(fd);
      },
      linkSync: (from, to) => {
        log.push(`link ${role(String(from))} -> ${role(String(to))}`);
        nodeFileOps.linkSync(from, to);
      },
      renameSync: (from, to) => {
        log.push(`rename ${role(String(from))} -> ${role(String(to))}`);
        nodeFileOps.renameSync(from, to);
      },
      unlinkSync: (path) => {
        log.push(`unlink ${role(String(path))}`);
        nodeFileOps.unlinkSync(path);
      },
    };
    return { fs, log };
  }

  /** The flushes of every directory above `dir` on its file system, as `tracingFs` logs them. */
  function ancestorFlushes(dir: string): string[] {
    const out: string[] = [];
    const device = statSync(dir).dev;
    for (let child = dir; dirname(child) !== child; child = dirname(child)) {
      if (statSync(dirname(child)).dev !== device) break;
      out.push(`fsync ${dirname(child)}`);
    }
    return out;
  }

  it("flushAncestry stops at a mount point: the file system below it is not drydock's to flush", () => {
    const { dir, lock } = newLock();
    const deep = join(dir, "a", "b");
    mkdirSync(deep, { recursive: true });
    const traced = tracingFs(lock);
    // As if `dir` (the lock's directory) were the root of a file system mounted on its parent.
    const mounted: FileOps = {
      ...traced.fs,
      statSync: ((path: string, ...rest: unknown[]) => {
        const stat = (nodeFileOps.statSync as (...a: unknown[]) => object)(path, ...rest);
        const inside = path === dir || path.startsWith(`${dir}/`);
        return inside ? stat : Object.assign(Object.create(stat), { dev: -1n });
      }) as FileOps["statSync"],
    };
    flushAncestry(mounted, deep);
    expect(traced.log).toEqual([`fsync ${join(dir, "a")}`, "fsync dir"]);
  });

  it("flushes the owner before link(2) and the directory after; without it nothing is flushed", async () => {
    const { lock } = newLock();
    const traced = tracingFs(lock);
    const handle = await acquireLock(lock, { fs: traced.fs, durable: true });
    // The lock directory's own path too, once per directory and process: it may exist without being
    // durable (made by a process killed before it flushed, or by a `mkdir -p` that never flushes).
    const above = ancestorFlushes(dirname(lock));
    expect(traced.log).toEqual([
      "fsync candidate",
      "link candidate -> lock",
      "unlink candidate",
      "fsync dir",
      ...above,
    ]);
    handle.release();
    expect(traced.log.slice(4 + above.length)).toEqual(["unlink lock"]);
    traced.log.length = 0;
    // The second time, only the lock's own directory.
    (await acquireLock(lock, { fs: traced.fs, durable: true })).release();
    expect(traced.log).toEqual([
      "fsync candidate",
      "link candidate -> lock",
      "unlink candidate",
      "fsync dir",
      "unlink lock",
    ]);
    traced.log.length = 0;
    acquireLockSync(lock, { fs: traced.fs }).release();
    expect(traced.log.filter((entry) => entry.startsWith("fsync"))).toEqual([]);
  });

  it("flushes every directory it creates into its parent before the lock is published", async () => {
    const { dir } = newLock();
    const lock = join(dir, "a", "b", "x.lock");
    const traced = tracingFs(lock);
    const handle = await acquireLock(lock, { fs: traced.fs, durable: true });
    const a = join(dir, "a");
    expect(traced.log).toEqual([
      "unlink candidate", // the first write found no directory, and cleans up after itself
      `fsync ${a}`,
      `fsync ${dir}`,
      "fsync candidate",
      "link candidate -> lock",
      "unlink candidate",
      "fsync dir",
      ...ancestorFlushes(dirname(lock)),
    ]);
    handle.release();
  });

  it("takeover flushes its owner before the rename and the directory after (election records are not)", async () => {
    const { dir, lock } = newLock();
    writeFileSync(lock, seedOwnerText(await deadPid(), randomUUID()));
    const error = await caught(acquireLock(lock, { reapDeadOwners: false }));
    const traced = tracingFs(lock);
    const handle = await takeoverLock(lock, error.owner as LockOwner, { fs: traced.fs, durable: true });
    expect(traced.log).toEqual([
      "fsync candidate",
      "link record -> record",
      "unlink record",
      "rename candidate -> lock",
      "fsync dir",
      ...ancestorFlushes(dir),
      "unlink record",
    ]);
    handle.release();
    expect(readdirSync(dir)).toEqual([]);
  });

  it("gives the lock up again when the directory cannot be flushed, and says so", async () => {
    const { dir, lock } = newLock();
    const fs: FileOps = {
      ...nodeFileOps,
      fsyncSync: (fd) => {
        if (nodeFileOps.fstatSync(fd).isDirectory()) throw errnoError("EIO", "fsync");
        nodeFileOps.fsyncSync(fd);
      },
    };
    const error = await caught(acquireLock(lock, { fs, durable: true }));
    expect(error.code).toBe("LOCK_IO");
    expect(error.message).toContain("could not be flushed to disk (EIO), so it was given up again");
    expect(readdirSync(dir)).toEqual([]);
  });

  it("cannot be combined with reuseOwnerFile, which publishes a kept file as it is", () => {
    const options: LockOptions = { durable: true, reuseOwnerFile: true };
    expect(() => acquireLockSync(join(newLock().dir, "x.lock"), options)).toThrow(TypeError);
  });
});
