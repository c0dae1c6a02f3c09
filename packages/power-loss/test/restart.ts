import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { createSystemIdentity, type LockIdentity, type LockOptions } from "@drydock/file-lock";
import { scratchFileOps } from "../src/index.js";

/**
 * The machine after the power came back: a new boot id (so every owner recorded before is dead) and a boot
 * time after every file of the image was written (so a lock whose bytes never reached the disk, empty or
 * torn, is recognised by the boot-time rule). Host and process start times are the real ones.
 */
export function afterReboot(): LockIdentity {
  const system = createSystemIdentity();
  const bootId = randomUUID();
  const bootTimeMs = Date.now() + 1_000;
  return {
    hostname: () => system.hostname(),
    bootId: () => bootId,
    bootTimeMs: () => bootTimeMs,
    processStartTime: (pid) => system.processStartTime(pid),
  };
}

export function afterRebootLock(): LockOptions {
  return { identity: afterReboot(), waitMs: 2_000, fs: scratchFileOps };
}

export function readOrNull(path: string): string | null {
  try {
    return readFileSync(path, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw error;
  }
}

/** A clock that ticks one second per reading, reset per run, so every run stamps the same times. */
export function tickingClock(start = 1_767_000_000_000): () => number {
  let t = start;
  return () => {
    t += 1_000;
    return t;
  };
}
