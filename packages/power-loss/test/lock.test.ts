import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  acquireLock,
  collectLockGarbage,
  createSystemIdentity,
  inspectLock,
  type LockOptions,
  LockOwnerSchema,
  withLock,
} from "@drydock/file-lock";
import { describe, expect, it } from "vitest";
import { crashSweep, type ImageContext } from "../src/index.js";
import { reportSweep, scale } from "./report.js";
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
});
