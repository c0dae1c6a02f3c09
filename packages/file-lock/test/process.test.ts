import { type ChildProcess, spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  acquireLock,
  acquireLockSync,
  collectLockGarbage,
  createSystemIdentity,
  inspectLock,
  isLockError,
  type LockOwner,
  takeoverLock,
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
  waitForLine,
} from "./helpers.js";

const children: ChildProcess[] = [];
const dirs: Array<{ remove(): void }> = [];

afterEach(() => {
  for (const child of children.splice(0)) killGroup(child);
  for (const dir of dirs.splice(0)) dir.remove();
});

function track<T extends ChildProcess>(child: T): T {
  children.push(child);
  return child;
}

function newDir(): string {
  const dir = tempDir();
  dirs.push(dir);
  return dir.dir;
}

describe("real processes", () => {
  it("two processes racing for one lock never hold it at the same time", async () => {
    const dir = newDir();
    const lock = join(dir, "race.lock");
    const log = join(dir, "race.log");
    const go = join(dir, "go");
    const iterations = 40;
    const racers = [
      track(spawnFixture("racer.ts", [lock, log, go, String(iterations), "async"])),
      track(spawnFixture("racer.ts", [lock, log, go, String(iterations), "sync"])),
    ];
    const stderr = racers.map(captureStderr);
    await Promise.all(racers.map((racer) => waitForLine(racer, "ready")));
    writeFileSync(go, "");
    const results = await Promise.all(racers.map(exited));
    expect(results, stderr.map((read) => read()).join("\n")).toEqual([
      { code: 0, signal: null },
      { code: 0, signal: null },
    ]);

    const lines = readFileSync(log, "utf8").trimEnd().split("\n");
    expect(lines).toHaveLength(2 * 2 * iterations);
    // Strict alternation: every enter is immediately followed by the same section's exit.
    for (let i = 0; i < lines.length; i += 2) {
      const [kind, pid, seq] = (lines[i] ?? "").split(" ");
      expect(kind).toBe("enter");
      expect(lines[i + 1]).toBe(`exit ${pid} ${seq}`);
    }
    const pids = new Set(lines.map((line) => line.split(" ")[1]));
    expect(pids.size).toBe(2);
    expect(inspectLock(lock)).toBeNull();
    expect(leftovers(dir)).toEqual([]);
  });

  it("recovers a lock whose holder was SIGKILLed", async () => {
    const dir = newDir();
    const lock = join(dir, "killed.lock");
    const holder = track(spawnFixture("holder.ts", [lock]));
    const line = await waitForLine(holder, "held ");
    const heldBy = JSON.parse(line.slice("held ".length));
    expect(inspectLock(lock)).toEqual(heldBy);
    await expect(acquireLock(lock, { waitMs: 100 })).rejects.toMatchObject({ code: "LOCK_TIMEOUT" });

    killGroup(holder);
    await exited(holder);
    const handle = await acquireLock(lock, { waitMs: 5_000 });
    expect(handle.owner.pid).toBe(process.pid);
    expect(inspectLock(lock)?.token).toBe(handle.owner.token);
    handle.release();
    expect(inspectLock(lock)).toBeNull();
    expect(leftovers(dir)).toEqual([]);
  });

  it("recovers a lock in the seeds' exact format left by an exited process", async () => {
    const dir = newDir();
    const lock = join(dir, "seed.lock");
    const pid = await deadPid();
    writeFileSync(lock, seedOwnerText(pid, randomUUID()), { mode: 0o600 });
    const handle = acquireLockSync(lock, { waitMs: 2_000 });
    expect(inspectLock(lock)?.token).toBe(handle.owner.token);
    handle.release();
    expect(leftovers(dir)).toEqual([]);
  });

  it("recovers when the elected reaper is a dead legacy PID-only record", async () => {
    const dir = newDir();
    const lock = join(dir, "legacy.lock");
    const owner = randomUUID();
    writeFileSync(lock, seedOwnerText(await deadPid(), owner));
    const record = `${lock}.reap-${owner}`;
    writeFileSync(record, `${await deadPid()}\n`);
    const handle = await acquireLock(lock, { waitMs: 2_000 });
    expect(inspectLock(lock)?.token).toBe(handle.owner.token);
    // The legacy record is never deleted by a contender; it is garbage now that the lock holds another token.
    expect(leftovers(dir)).toEqual([`legacy.lock.reap-${owner}`]);
    expect(collectLockGarbage(lock).removed).toEqual([record]);
    handle.release();
    expect(leftovers(dir)).toEqual([]);
  });

  it("refuses a lock whose elected reaper is alive, leaving every file byte-identical", async () => {
    const dir = newDir();
    const lock = join(dir, "reaper.lock");
    const owner = randomUUID();
    const lockText = seedOwnerText(await deadPid(), owner);
    writeFileSync(lock, lockText);
    const reaper = track(spawnFixture("holder.ts", [join(dir, "other.lock")]));
    await waitForLine(reaper, "held ");
    const record = `${lock}.reap-${owner}`;
    const recordText = `${reaper.pid}\n`;
    writeFileSync(record, recordText);

    const contenders = await Promise.allSettled([
      acquireLock(lock, { waitMs: 300 }),
      Promise.resolve().then(() => acquireLockSync(lock, { waitMs: 300 })),
    ]);
    for (const outcome of contenders) {
      expect(outcome.status).toBe("rejected");
      if (outcome.status === "rejected") expect(outcome.reason).toMatchObject({ code: "LOCK_TIMEOUT" });
    }
    expect(readFileSync(lock, "utf8")).toBe(lockText);
    expect(readFileSync(record, "utf8")).toBe(recordText);
    expect(leftovers(dir).sort()).toEqual([`reaper.lock.reap-${owner}`]);
  });

  it("three processes racing to take over one dead owner: exactly one wins, the others see the change", async () => {
    const dir = newDir();
    const lock = join(dir, "takeover.lock");
    const go = join(dir, "go");
    writeFileSync(lock, seedOwnerText(await deadPid(), randomUUID()));
    const expected = inspectLock(lock);
    const racers = [1, 2, 3].map(() =>
      track(spawnFixture("takeover-racer.ts", [lock, go, JSON.stringify(expected)])),
    );
    const stderr = racers.map(captureStderr);
    await Promise.all(racers.map((racer) => waitForLine(racer, "ready")));
    const outcomes = racers.map((racer) => waitForLine(racer, "took ").catch(() => null));
    const refusals = racers.map((racer) => waitForLine(racer, "refused ").catch(() => null));
    writeFileSync(go, "");
    const exits = await Promise.all(racers.map(exited));
    expect(
      exits.map((e) => e.code),
      stderr.map((read) => read()).join("\n"),
    ).toEqual([0, 0, 0]);
    const took = (await Promise.all(outcomes)).filter((line): line is string => line !== null);
    const refused = (await Promise.all(refusals)).filter((line): line is string => line !== null);
    expect(took).toHaveLength(1);
    expect(refused).toEqual(["refused LOCK_OWNERSHIP_LOST", "refused LOCK_OWNERSHIP_LOST"]);
    expect(inspectLock(lock)?.token).toBe(took[0]?.slice("took ".length));
    expect(leftovers(dir)).toEqual([]);
  });

  it("refuses a lock left by a live process until it is killed, then recovers it", async () => {
    const dir = newDir();
    const lock = join(dir, "live.lock");
    const holder = track(spawnFixture("holder.ts", [lock, JSON.stringify({ label: "fixture" })]));
    await waitForLine(holder, "held ");
    const before = readFileSync(lock, "utf8");
    const error = await acquireLock(lock, { waitMs: 200, label: "journal" }).catch((e: unknown) => e);
    expect(isLockError(error) && error.code).toBe("LOCK_TIMEOUT");
    expect((error as Error).message).toContain(`locked by another journal process (pid ${holder.pid}`);
    expect((error as Error).message).not.toContain(JSON.parse(before).token);
    expect(readFileSync(lock, "utf8")).toBe(before);
    killGroup(holder);
    await exited(holder);
    const handle = await acquireLock(lock, { waitMs: 5_000 });
    handle.release();
  });

  it("never reaps the lock of a live holder in another pid namespace on this host and boot", async (ctx) => {
    // Two containers of one pod, or docker --network host: same host name, same boot, their own pids.
    const unshare = ["unshare", "--pid", "--fork", "--mount-proc"];
    const probe = spawnSync(unshare[0] as string, [...unshare.slice(1), "true"], { stdio: "ignore" });
    const why = probe.error
      ? `unshare is not available here (${(probe.error as NodeJS.ErrnoException).code})`
      : probe.status !== 0
        ? `unshare --pid is not permitted here (exit ${probe.status}; it needs root or user namespaces)`
        : null;
    ctx.skip(why !== null, `cannot start a process in its own pid namespace: ${why}`);
    const dir = newDir();
    const lock = join(dir, "ns.lock");
    const holder = track(spawnFixture("holder.ts", [lock], {}, unshare));
    const line = await waitForLine(holder, "held ");
    const owner = JSON.parse(line.slice("held ".length)) as LockOwner;
    const before = readFileSync(lock, "utf8");
    for (const reapDeadOwners of [true, false]) {
      const error = await acquireLock(lock, { waitMs: 300, reapDeadOwners }).catch((e: unknown) => e);
      expect(isLockError(error) && error.code).toBe("LOCK_TIMEOUT");
      expect((error as Error).message).toContain(`in pid namespace ${owner.pidNamespace}`);
    }
    // Same host and boot; only the namespace tells the holder apart.
    expect(owner.host).toBe(createSystemIdentity().hostname());
    expect(owner.pidNamespace).toMatch(/^pid:\[\d+\]$/);
    expect(owner.pidNamespace).not.toBe(createSystemIdentity().pidNamespace?.());
    const takeover = await takeoverLock(lock, owner, { waitMs: 100 }).catch((e: unknown) => e);
    expect(isLockError(takeover) && takeover.code).toBe("LOCK_TIMEOUT");
    expect(readFileSync(lock, "utf8")).toBe(before);
    expect(holder.exitCode).toBeNull();
    // Once it is gone its lock still cannot be proven dead from here (like another host's): a person removes it.
    killGroup(holder);
    await exited(holder);
    const after = await acquireLock(lock, { waitMs: 100 }).catch((e: unknown) => e);
    expect(isLockError(after) && after.code).toBe("LOCK_TIMEOUT");
    expect(readFileSync(lock, "utf8")).toBe(before);
  }, 30_000);
});
