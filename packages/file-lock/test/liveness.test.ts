import { type ChildProcess, spawn, spawnSync } from "node:child_process";
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
  type ProcessState,
  takeoverLock,
} from "../src/index.js";
import { procIsOwnNamespace, systemIdentityFor } from "../src/internal/identity.js";
import {
  deadPid,
  exited,
  killGroup,
  leftovers,
  PACKAGE_DIR,
  seedOwnerText,
  spawnFixture,
  spawnSleeper,
  tempDir,
  waitForLine,
} from "./helpers.js";

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

/** Fields 3 and 20 of /proc/<pid>/stat, straight from the kernel (undefined once the pid is gone). */
function statOf(pid: number): { state: string; threads: number } | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  const fields = text.slice(text.lastIndexOf(")") + 2).split(" ");
  return { state: fields[0] ?? "", threads: Number(fields[17]) };
}

/** Polls the kernel's view of a pid until `done` holds (a state change has no event to wait on). */
async function untilStat(pid: number, done: (stat: ReturnType<typeof statOf>) => boolean): Promise<void> {
  for (let i = 0; i < 500 && !done(statOf(pid)); i += 1) await new Promise((r) => setTimeout(r, 10));
  expect(done(statOf(pid)), `/proc/${pid}/stat: ${JSON.stringify(statOf(pid))}`).toBe(true);
}

/**
 * A real zombie: the shell's background child exits at once, and `exec sleep` replaces the shell, which then
 * never reaps it (what a container whose PID 1 does not wait for orphans does to every killed process).
 */
async function unreapedZombie(): Promise<number> {
  const parent = spawn("sh", ["-c", "sleep 0 & echo $!; exec sleep 60"], {
    detached: true,
    stdio: ["ignore", "pipe", "ignore"],
  });
  children.push(parent);
  const zombie = await new Promise<number>((resolve) => {
    parent.stdout.setEncoding("utf8");
    parent.stdout.once("data", (chunk: string) => resolve(Number(chunk.trim())));
  });
  await untilStat(zombie, (stat) => stat?.state === "Z");
  return zombie;
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

  it("judges a zombie owner dead (exited, never reaped by its parent) and recovers its lock", async () => {
    const { dir, lock } = newLock();
    const zombie = await unreapedZombie();
    writeFileSync(
      lock,
      ownerText({ pid: zombie, bootId: system.bootId(), startTime: system.processStartTime(zombie) }),
    );
    // kill(pid, 0) still reaches it and its start time is unchanged: only its state tells.
    expect(() => process.kill(zombie, 0)).not.toThrow();
    expect(judgeOwnerLiveness({ pid: zombie, startTime: system.processStartTime(zombie) })).toBe("dead");
    await expectRecovered(lock);
    expect(leftovers(dir)).toEqual([]);
  });
});

describe("zombies: exited processes nobody reaped are dead, a process whose main thread exited is not", () => {
  it("recovers the lock of a holder SIGKILLed under a parent that never reaps it, and lets it be taken over", async () => {
    const { dir, lock } = newLock();
    // The holder runs in the background of a shell that then becomes `sleep`, which never waits for it.
    const parent = spawnFixture("holder.ts", [lock], {}, ["sh", "-c", '"$@" & exec sleep 60', "sh"]);
    children.push(parent);
    const owner = JSON.parse((await waitForLine(parent, "held ")).slice("held ".length)) as { pid: number };
    expect(owner.pid).not.toBe(parent.pid);
    process.kill(owner.pid, "SIGKILL");
    // Node's other threads leave the count as they finish exiting; until then the verdict is still alive.
    await untilStat(owner.pid, (stat) => stat?.state === "Z" && stat.threads === 1);
    const recorded = inspectLock(lock);
    if (recorded === null) throw new Error("lock vanished");
    expect(recorded.pid).toBe(owner.pid);
    expect(judgeOwnerLiveness(recorded)).toBe("dead");
    // The workspace lock's way: reported as dead, then taken over.
    await expect(acquireLock(lock, { waitMs: 200, reapDeadOwners: false })).rejects.toMatchObject({
      code: "LOCK_OWNER_DEAD",
    });
    const taken = await takeoverLock(lock, recorded, { waitMs: 2_000 });
    expect(inspectLock(lock)?.token).toBe(taken.owner.token);
    taken.release();
    // Its leftovers (none here, but a kept owner file would be) are garbage: the zombie is dead.
    collectLockGarbage(lock);
    expect(leftovers(dir)).toEqual([]);
    await expectRecovered(lock);
  });

  it("keeps a live multi-threaded owner (node with a worker thread)", async () => {
    const { dir, lock } = newLock();
    const child = spawn(
      process.execPath,
      [
        "-e",
        `const { Worker } = require("node:worker_threads");
         const w = new Worker("setInterval(() => {}, 60000); require('node:worker_threads').parentPort.postMessage('up')", { eval: true });
         w.once("message", () => console.log("ready"));
         setInterval(() => {}, 60000);`,
      ],
      { detached: true, stdio: ["ignore", "pipe", "ignore"] },
    );
    children.push(child);
    await waitForLine(child, "ready");
    const pid = child.pid as number;
    expect(statOf(pid)?.threads).toBeGreaterThan(1);
    writeFileSync(lock, ownerText({ pid, bootId: system.bootId(), startTime: system.processStartTime(pid) }));
    expect(judgeOwnerLiveness({ pid })).toBe("alive");
    await expectRefused(dir, lock, "LOCK_TIMEOUT", {});
  });

  // A process whose main thread called pthread_exit while another thread runs: Linux shows its leader (the
  // pid) as Z, yet the process lives. Node cannot end its main thread alone; python's ctypes can.
  const python = spawnSync("python3", ["-c", "import ctypes, threading"], { stdio: "ignore" }).status === 0;
  it.skipIf(!python)(
    "keeps a live owner whose main thread exited while another thread runs (zombie leader; needs python3)",
    async () => {
      const { dir, lock } = newLock();
      const child = spawn(
        "python3",
        [
          "-c",
          [
            "import ctypes, os, threading, time",
            "threading.Thread(target=lambda: time.sleep(60)).start()",
            "print(os.getpid(), flush=True)",
            "ctypes.CDLL(None).pthread_exit(None)",
          ].join("\n"),
        ],
        { detached: true, stdio: ["ignore", "pipe", "ignore"] },
      );
      children.push(child);
      const pid = Number(await waitForLine(child, ""));
      await untilStat(pid, (stat) => stat?.state === "Z");
      expect(statOf(pid)?.threads).toBe(2);
      writeFileSync(
        lock,
        ownerText({ pid, bootId: system.bootId(), startTime: system.processStartTime(pid) }),
      );
      expect(judgeOwnerLiveness({ pid })).toBe("alive");
      await expectRefused(dir, lock, "LOCK_TIMEOUT", {});
      // Once the last thread is gone too, the process is dead (its parent, this test, reaps it).
      killGroup(child);
      await exited(child);
      expect(judgeOwnerLiveness({ pid })).toBe("dead");
    },
  );

  it("judges through the identity seam: Z or X with exactly one thread is dead, anything else alive", async () => {
    const cases: Array<[ProcessState | undefined, "alive" | "dead"]> = [
      [{ state: "Z", threads: 1 }, "dead"],
      [{ state: "X", threads: 1 }, "dead"],
      [{ state: "Z", threads: 2 }, "alive"], // a zombie leader with a live thread
      [{ state: "Z", threads: 0 }, "alive"], // the kernel could not count: the task is being released (exec)
      [{ state: "X", threads: 0 }, "alive"],
      [{ state: "S", threads: 1 }, "alive"],
      [{ state: "R", threads: 1 }, "alive"],
      [{ state: "T", threads: 1 }, "alive"], // stopped (SIGSTOP) is alive: it may be continued
      [{ state: "D", threads: 1 }, "alive"],
      [{ state: "x", threads: 1 }, "alive"], // only Z and X prove an exit
      [undefined, "alive"], // unreadable /proc/<pid>/stat
    ];
    for (const [state, verdict] of cases) {
      const options = {
        isProcessAlive: () => true,
        identity: identity({ processState: () => state }),
      };
      expect(judgeOwnerLiveness({ pid: 4242 }, options), JSON.stringify(state)).toBe(verdict);
      const { dir, lock } = newLock();
      writeFileSync(lock, ownerText({ pid: 4242 }));
      if (verdict === "dead") await expectRecovered(lock, options);
      else await expectRefused(dir, lock, "LOCK_TIMEOUT", options);
    }
    // An identity without processState (written before it existed) never proves a zombie.
    const { processState: _, ...older } = system;
    expect(judgeOwnerLiveness({ pid: await unreapedZombie() }, { identity: older })).toBe("alive");
  });

  it("reads state and thread count from /proc/<pid>/stat", () => {
    const own = system.processState?.(process.pid);
    expect(own?.state).toMatch(/^[RS]$/);
    expect(own?.threads).toBeGreaterThan(1); // node always runs helper threads
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

describe("a /proc mounted from another pid namespace says nothing about our pids", () => {
  it("procIsOwnNamespace: /proc/self must name this process's own pid", () => {
    expect(procIsOwnNamespace(123, () => "123")).toBe(true);
    expect(procIsOwnNamespace(1, () => "48213")).toBe(false);
    expect(
      procIsOwnNamespace(123, () => {
        throw Object.assign(new Error("no /proc"), { code: "ENOENT" });
      }),
    ).toBe(false);
  });

  it("the system identity reads neither a start time nor a process state from a /proc that is not its namespace's", () => {
    const foreign = systemIdentityFor(process.pid, () => String(process.pid + 1));
    expect(foreign.processStartTime(process.pid)).toBeUndefined();
    expect(foreign.processState?.(process.pid)).toBeUndefined();
    const own = systemIdentityFor(process.pid);
    expect(own.processStartTime(process.pid)).toBeGreaterThan(0);
    expect(own.processState?.(process.pid)).toMatchObject({ state: expect.stringMatching(/^[RS]$/) });
  });

  // unshare --pid --fork without --mount-proc: the process is pid 1 of a new namespace and /proc is its
  // parent namespace's, where /proc/1 is that namespace's init (and any pid may be a stranger's zombie).
  const canUnshare = spawnSync("unshare", ["--pid", "--fork", "true"], { stdio: "ignore" }).status === 0;
  it.skipIf(!canUnshare)(
    "in a pid namespace without its own /proc, nothing is read (needs unshare: root or user namespaces)",
    () => {
      const run = spawnSync(
        "unshare",
        [
          "--pid",
          "--fork",
          process.execPath,
          "--conditions=@drydock/source",
          "--import",
          "tsx",
          join(PACKAGE_DIR, "test/fixtures/proc-view.ts"),
        ],
        { cwd: PACKAGE_DIR, encoding: "utf8", timeout: 20_000 },
      );
      expect(run.status, run.stderr).toBe(0);
      expect(JSON.parse(run.stdout)).toEqual({ pid: 1, procIsOwn: false, ownStart: null, pid1State: null });
    },
  );
});
