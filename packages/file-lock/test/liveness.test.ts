import { type ChildProcess, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { linkSync, readdirSync, readFileSync, readlinkSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  acquireLock,
  acquireLockSync,
  collectLockGarbage,
  createSystemIdentity,
  errnoError,
  inspectLock,
  judgeOwnerLiveness,
  type LockIdentity,
  takeoverLock,
} from "../src/index.js";
import { deadPid, killGroup, leftovers, seedOwnerText, spawnSleeper, tempDir } from "./helpers.js";

const system = createSystemIdentity();
const children: ChildProcess[] = [];
const dirs: Array<{ remove(): void }> = [];

afterEach(() => {
  for (const child of children.splice(0)) killGroup(child);
  for (const dir of dirs.splice(0)) dir.remove();
});

function newLock(name = "x.lock"): { dir: string; lock: string } {
  const dir = tempDir();
  dirs.push(dir);
  return { dir: dir.dir, lock: join(dir.dir, name) };
}

function sleeper(): number {
  const child = spawnSleeper();
  children.push(child);
  if (child.pid === undefined) throw new Error("no sleeper");
  return child.pid;
}

function identity(overrides: Partial<LockIdentity>): LockIdentity {
  return { ...system, ...overrides };
}

function ownerText(fields: Record<string, unknown>): string {
  return `${JSON.stringify({ version: 1, pid: 1, token: randomUUID(), createdAt: Date.now(), ...fields })}\n`;
}

/** Asserts a refused acquisition: the expected code, and the directory exactly as it was. */
async function expectRefused(
  dir: string,
  lock: string,
  code: string,
  options: Parameters<typeof acquireLock>[1],
) {
  const before = Object.fromEntries(
    readdirSync(dir).map((name) => [name, readFileSync(join(dir, name), "utf8")]),
  );
  await expect(acquireLock(lock, { waitMs: 150, ...options })).rejects.toMatchObject({ code });
  expect(() => acquireLockSync(lock, { waitMs: 50, ...options })).toThrow(expect.objectContaining({ code }));
  const after = Object.fromEntries(
    readdirSync(dir).map((name) => [name, readFileSync(join(dir, name), "utf8")]),
  );
  expect(after).toEqual(before);
}

async function expectRecovered(lock: string, options: Parameters<typeof acquireLock>[1] = {}) {
  const handle = await acquireLock(lock, { waitMs: 2_000, ...options });
  expect(inspectLock(lock)?.token).toBe(handle.owner.token);
  handle.release();
  expect(inspectLock(lock)).toBeNull();
}

describe("liveness verdicts, in the order the liveness function applies them", () => {
  it("never judges an owner on another host dead, even when its pid is free here", async () => {
    const { dir, lock } = newLock();
    writeFileSync(lock, ownerText({ pid: await deadPid(), host: "some-other-host" }));
    await expectRefused(dir, lock, "LOCK_TIMEOUT", {});
  });

  it("names the other host's holder in the timeout message", async () => {
    const { lock } = newLock();
    const pid = await deadPid();
    writeFileSync(lock, ownerText({ pid, host: "build-7" }));
    await expect(acquireLock(lock, { waitMs: 50, label: "journal" })).rejects.toThrow(
      `locked by another journal process (pid ${pid} on build-7)`,
    );
  });

  it("judges an owner from another boot (bootId differs) dead even though its pid is alive", async () => {
    const { dir, lock } = newLock();
    writeFileSync(lock, ownerText({ pid: sleeper(), host: system.hostname(), bootId: randomUUID() }));
    await expectRecovered(lock);
    expect(leftovers(dir)).toEqual([]);
  });

  it("keeps an owner whose bootId is this boot's and whose pid is alive", async () => {
    const { dir, lock } = newLock();
    const pid = sleeper();
    writeFileSync(lock, ownerText({ pid, bootId: system.bootId(), startTime: system.processStartTime(pid) }));
    await expectRefused(dir, lock, "LOCK_TIMEOUT", {});
  });

  it("judges a seed-format owner whose file predates the boot (ctime < btime) dead even if its pid is alive", async () => {
    const { dir, lock } = newLock();
    writeFileSync(lock, seedOwnerText(sleeper(), randomUUID()));
    await expectRefused(dir, lock, "LOCK_TIMEOUT", {});
    await expectRecovered(lock, { identity: identity({ bootTimeMs: () => Date.now() + 60_000 }) });
  });

  it("recovers an empty or garbage lock file from before the boot, and refuses it otherwise", async () => {
    for (const garbage of ["", "\0\0\0\0", '{"version":1,"pi']) {
      const { dir, lock } = newLock();
      writeFileSync(lock, garbage);
      await expectRefused(dir, lock, "LOCK_INVALID", {});
      await expectRecovered(lock, { identity: identity({ bootTimeMs: () => Date.now() + 60_000 }) });
      expect(leftovers(dir)).toEqual([]);
    }
  });

  it("keeps a torn lock from before the boot recoverable after collectLockGarbage met its kept-owner twin", async () => {
    // What a power loss leaves of a holder that used reuseOwnerFile (restore-saga's state locks): the lock and
    // its kept owner file are one inode, and the unflushed bytes read back empty.
    const { dir, lock } = newLock();
    const twin = `${lock}.candidate-${await deadPid()}-${randomUUID()}`;
    writeFileSync(twin, "");
    linkSync(twin, lock);
    const written = statSync(lock).ctimeMs;
    await new Promise((r) => setTimeout(r, 50));
    // The machine booted 20 ms after those files were last changed.
    const rebooted = { identity: identity({ bootTimeMs: () => written + 20 }) };
    // A store sweeps garbage when it opens, before it takes any lock. Unlinking the twin would change the
    // lock's ctime (same inode), and the lock would no longer look older than the boot.
    const swept = collectLockGarbage(lock, rebooted).removed;
    await expectRecovered(lock, rebooted);
    expect(swept).toEqual([]);
    // Once the lock is gone the twin is an ordinary dead candidate.
    expect(collectLockGarbage(lock, rebooted).removed).toEqual([twin]);
    expect(readdirSync(dir)).toEqual([]);
  });

  it("lets a recorded bootId of this boot win over the ctime rule", async () => {
    const { dir, lock } = newLock();
    const pid = sleeper();
    writeFileSync(lock, ownerText({ pid, bootId: system.bootId() }));
    await expectRefused(dir, lock, "LOCK_TIMEOUT", {
      identity: identity({ bootTimeMs: () => Date.now() + 60_000 }),
    });
  });

  it("judges an owner dead when kill(pid, 0) says ESRCH (a spawned process that exited)", async () => {
    const { lock } = newLock();
    writeFileSync(
      lock,
      ownerText({ pid: await deadPid(), host: system.hostname(), bootId: system.bootId() }),
    );
    await expectRecovered(lock);
  });

  it("keeps an owner when kill(pid, 0) says EPERM", async () => {
    const { dir, lock } = newLock();
    writeFileSync(lock, ownerText({ pid: await deadPid() }));
    const isProcessAlive = (): boolean => {
      throw errnoError("EPERM", "kill");
    };
    await expectRefused(dir, lock, "LOCK_TIMEOUT", { isProcessAlive });
  });

  it("fails closed with LOCK_OWNER_UNVERIFIABLE when kill(pid, 0) gives an unexpected errno", async () => {
    const { dir, lock } = newLock();
    writeFileSync(lock, ownerText({ pid: await deadPid() }));
    const isProcessAlive = (): boolean => {
      throw errnoError("EINVAL", "kill");
    };
    await expectRefused(dir, lock, "LOCK_OWNER_UNVERIFIABLE", { isProcessAlive });
  });

  it("judges a reused pid dead: the live process's start time differs from the recorded one", async () => {
    const { dir, lock } = newLock();
    const pid = sleeper();
    const startTime = system.processStartTime(pid);
    expect(startTime).toBeTypeOf("number");
    writeFileSync(lock, ownerText({ pid, bootId: system.bootId(), startTime: (startTime as number) + 1 }));
    await expectRecovered(lock);
    expect(leftovers(dir)).toEqual([]);
  });

  it("keeps a live owner whose start time matches", async () => {
    const { dir, lock } = newLock();
    const pid = sleeper();
    writeFileSync(lock, ownerText({ pid, bootId: system.bootId(), startTime: system.processStartTime(pid) }));
    await expectRefused(dir, lock, "LOCK_TIMEOUT", {});
  });

  it("keeps a zombie owner (exited but not yet reaped by its parent)", async () => {
    const { dir, lock } = newLock();
    // The shell's background child exits at once; `exec sleep` replaces the shell and never reaps it.
    const parent = spawn("sh", ["-c", "sleep 0 & echo $!; exec sleep 60"], {
      detached: true,
      stdio: ["ignore", "pipe", "ignore"],
    });
    children.push(parent);
    const zombie = await new Promise<number>((resolve) => {
      parent.stdout.setEncoding("utf8");
      parent.stdout.once("data", (chunk: string) => resolve(Number(chunk.trim())));
    });
    const statOf = () => readFileSync(`/proc/${zombie}/stat`, "utf8");
    for (let i = 0; i < 200 && !/\) Z /.test(statOf()); i += 1) await new Promise((r) => setTimeout(r, 10));
    expect(statOf()).toMatch(/\) Z /);
    writeFileSync(
      lock,
      ownerText({ pid: zombie, bootId: system.bootId(), startTime: system.processStartTime(zombie) }),
    );
    await expectRefused(dir, lock, "LOCK_TIMEOUT", {});
  });
});

describe("pid namespaces (containers on one host and boot)", () => {
  const ours = system.pidNamespace?.();
  const other = "pid:[4026500001]";

  /** An owner of this host and boot whose pid is free in our namespace. */
  async function ownerIn(pidNamespace: string | undefined, pid?: number): Promise<string> {
    return ownerText({
      pid: pid ?? (await deadPid()),
      host: system.hostname(),
      bootId: system.bootId(),
      startTime: 1,
      ...(pidNamespace === undefined ? {} : { pidNamespace }),
    });
  }

  it("records this process's pid namespace in the owner", async () => {
    const { lock } = newLock();
    expect(ours).toBe(readlinkSync("/proc/self/ns/pid"));
    const handle = await acquireLock(lock);
    expect(inspectLock(lock)?.pidNamespace).toBe(ours);
    expect(handle.owner.pidNamespace).toBe(ours);
    handle.release();
  });

  it("never judges an owner in another pid namespace dead (even with reapDeadOwners false), and names it", async () => {
    const { dir, lock } = newLock();
    const pid = await deadPid();
    writeFileSync(lock, await ownerIn(other, pid));
    await expectRefused(dir, lock, "LOCK_TIMEOUT", {});
    await expectRefused(dir, lock, "LOCK_TIMEOUT", { reapDeadOwners: false });
    const error = (await acquireLock(lock, { waitMs: 50, label: "journal" }).catch(
      (e: unknown) => e,
    )) as Error;
    expect(error.message).toContain(`locked by another journal process (pid ${pid} on ${system.hostname()}`);
    expect(error.message).toContain(`in pid namespace ${other}, not this process's ${ours}`);
    const owner = inspectLock(lock);
    if (owner === null) throw new Error("lock vanished");
    await expect(takeoverLock(lock, owner, { waitMs: 50 })).rejects.toMatchObject({ code: "LOCK_TIMEOUT" });
    expect(judgeOwnerLiveness(owner)).toBe("alive");
    // Its candidate (a crash between write and link) is kept as well.
    const candidate = `${lock}.candidate-${pid}-${randomUUID()}`;
    writeFileSync(candidate, await ownerIn(other, pid));
    expect(collectLockGarbage(lock).removed).toEqual([]);
    expect(readdirSync(dir).sort()).toEqual([lock, candidate].map((p) => p.slice(dir.length + 1)).sort());
  });

  it("never judges an owner that recorded a namespace dead when this process's own is unknown", async () => {
    const { dir, lock } = newLock();
    writeFileSync(lock, await ownerIn(ours));
    await expectRefused(dir, lock, "LOCK_TIMEOUT", { identity: identity({ pidNamespace: () => undefined }) });
  });

  it("probes an owner of this namespace as before, and an owner without the field (seed format) too", async () => {
    for (const pidNamespace of [ours, undefined]) {
      const { dir, lock } = newLock();
      writeFileSync(lock, await ownerIn(pidNamespace));
      await expectRecovered(lock);
      expect(leftovers(dir)).toEqual([]);
    }
  });
});
