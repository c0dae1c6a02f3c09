import { constants, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  acquireLock,
  collectLockGarbage,
  createSystemIdentity,
  type FileOps,
  inspectLock,
  type LockOptions,
  LockOwnerSchema,
  withLock,
} from "@drydock/file-lock";
import { describe, expect, it } from "vitest";
import { crashSweep, type ImageContext } from "../src/index.js";
import { report, reportSweep, scale } from "./report.js";
import { afterRebootLock } from "./restart.js";

const DEAD_PID = 4_000_001;

/** Only this process is alive; the planted owner's pid is provably dead (ESRCH). */
function workloadLock(fs: LockOptions["fs"], reuseOwnerFile = false): LockOptions {
  return {
    fs,
    reuseOwnerFile,
    waitMs: 500,
    identity: createSystemIdentity(),
    isProcessAlive: (pid) => {
      if (pid === process.pid) return true;
      throw Object.assign(new Error("ESRCH"), { code: "ESRCH" });
    },
  };
}

function plantDeadOwner(root: string): void {
  const owner = {
    version: 1,
    pid: DEAD_PID,
    token: "6f1c1f0e-2a3b-4c5d-8e9f-0a1b2c3d4e5f",
    createdAt: 1_767_000_000_000,
  };
  writeFileSync(join(root, "work.lock"), `${JSON.stringify(owner)}\n`, { mode: 0o600 });
}

/**
 * After the reboot the lock must be absent, a complete owner (of a now-dead process), or bytes that never
 * reached the disk (empty, a torn prefix, or a prefix zero-filled to the full size); whatever it is, the next acquire recovers it, and once released
 * and collected nothing of the lock is left.
 */
async function check(image: string, _context: ImageContext): Promise<string | null> {
  const lock = join(image, "work.lock");
  let bytes: string | null = null;
  try {
    bytes = readFileSync(lock, "utf8");
  } catch {
    bytes = null;
  }
  if (bytes !== null && bytes.length > 0) {
    let complete = false;
    try {
      complete = LockOwnerSchema.safeParse(JSON.parse(bytes)).success;
    } catch {
      complete = false;
    }
    // Not a complete owner: it must be a torn prefix of one (`{"version":1,...`), possibly zero-filled to
    // the full size (the model's second kind of tear), never other garbage.
    const torn = bytes.replace(/\0+$/, "");
    if (!complete && !'{"version":1,"pid":'.startsWith(torn.slice(0, 19))) {
      return `the lock holds bytes no writer produced: ${JSON.stringify(bytes.slice(0, 40))}`;
    }
  }
  try {
    const options = afterRebootLock();
    const handle = await acquireLock(lock, options);
    handle.release();
    collectLockGarbage(lock, options);
    if (inspectLock(lock) !== null) return "the lock is still held after release";
    const left = readdirSync(image).filter(
      (name) => name.startsWith("work.lock") && !name.includes(".candidate-"),
    );
    if (left.length > 0) return `left after recovery and garbage collection: ${left.join(", ")}`;
  } catch (error) {
    return `recovery after the reboot failed: ${error instanceof Error ? error.message : String(error)}`;
  }
  return null;
}

const { O_WRONLY, O_CREAT, O_EXCL } = constants;

/**
 * Sabotage: the lock published without link(2), by copying the candidate into a new file at the lock's
 * name, back to front (as a writer filling blocks out of order would). Still exclusive (O_EXCL), but not
 * atomic: a power loss between the two writes leaves bytes no owner ever had at the lock's name.
 */
function publishByCopy(fs: FileOps): FileOps {
  return {
    ...fs,
    linkSync(existing, newPath) {
      if (!String(newPath).endsWith("work.lock")) return fs.linkSync(existing, newPath);
      const bytes = fs.readFileSync(existing);
      const fd = fs.openSync(newPath, O_WRONLY | O_CREAT | O_EXCL, 0o600);
      try {
        const half = Math.floor(bytes.length / 2);
        fs.writeSync(fd, bytes, half, bytes.length - half, half);
        fs.writeSync(fd, bytes, 0, half, 0);
      } finally {
        fs.closeSync(fd);
      }
    },
  };
}

describe("file-lock under power loss", () => {
  it.each([
    ["", false],
    [" (reuseOwnerFile: the kept owner file published again)", true],
  ])(
    "every image after every call of acquire, reap of a dead owner, release and withLock is recoverable%s",
    async (_title, reuse) => {
      const result = await crashSweep({
        area: reuse ? "file-lock (reuseOwnerFile)" : "file-lock",
        randomImages: scale(4),
        setup: plantDeadOwner,
        async workload(fs, root, log) {
          const lock = join(root, "work.lock");
          const options = workloadLock(fs, reuse);
          for (let i = 0; i < 2; i += 1) {
            await log.op(async () => {
              const handle = await acquireLock(lock, options);
              handle.release();
            });
          }
          await log.op(() => withLock(lock, () => "inside", options));
          // A lock held when the power goes (never released).
          await log.op(() => acquireLock(lock, options));
        },
        check,
      });
      reportSweep(result);
      expect(result.anomalies).toEqual([]);
      expect(result.violations).toEqual([]);
      expect(result.crashPoints).toBeGreaterThan(20);
    },
  );

  // The lock writes nothing it needs to survive (no fsync on purpose: the boot-time rule recovers a lock
  // whose bytes never reached the disk), so skipping flushes cannot make this sweep fail. What it does
  // hold the lock to is an atomic publish: a sabotaged seam that publishes by copying must be caught.
  it("the sweep catches a lock published by a non-atomic copy instead of link(2)", async () => {
    const result = await crashSweep({
      area: "file-lock (sabotaged: publish by copy)",
      randomImages: 0,
      setup: plantDeadOwner,
      async workload(fs, root, log) {
        const lock = join(root, "work.lock");
        const options = workloadLock(publishByCopy(fs));
        for (let i = 0; i < 2; i += 1) {
          await log.op(async () => {
            const handle = await acquireLock(lock, options);
            handle.release();
          });
        }
      },
      check,
    });
    expect(result.anomalies).toEqual([]);
    const caught = result.violations.filter((v) => /bytes no writer produced/.test(v.detail));
    report("power-loss", "file-lock, sabotaged (publish by copy): images caught", caught.length);
    expect(caught.length, JSON.stringify(result.violations.slice(0, 3))).toBeGreaterThan(0);
  });
});
