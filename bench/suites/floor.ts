import { closeSync, fsyncSync, linkSync, openSync, renameSync, unlinkSync, writeSync } from "node:fs";
import { join } from "node:path";
import { scratchDir } from "../lib/dirs.js";
import { describeEnvironment } from "../lib/env.js";
import type { SuiteResult } from "../lib/report.js";
import { fmtMs, summarize, timeSync } from "../lib/stats.js";

/**
 * The fsync floor: the cheapest durable operations the disk allows, measured with raw fs calls in the same
 * run as drydock. A durable journal write cannot beat write+fsync+rename+fsync(dir) by much, because it does
 * exactly that; the ratio to this floor is what drydock's own code costs on top.
 */
export interface Floor {
  /** write + fsync of an existing file */
  writeFsyncMs: number;
  /** temp write + fsync + rename + fsync(dir): one durable atomic replace */
  atomicReplaceMs: number;
  /** candidate write + fsync + link + unlink(lock) + unlink(candidate): a durable link(2) lock cycle */
  linkLockFsyncMs: number;
  /** the same without the fsync: what a lock must pay when durability comes from the boot-time rule */
  linkLockMs: number;
}

export function floorOps(dir: string, payload: Buffer) {
  const file = join(dir, "floor.json");
  const dirFd = () => openSync(dir, "r");
  let n = 0;
  return {
    writeFsync() {
      const fd = openSync(file, "w", 0o600);
      writeSync(fd, payload);
      fsyncSync(fd);
      closeSync(fd);
    },
    atomicReplace() {
      const tmp = join(dir, `.floor.${n++}.tmp`);
      const fd = openSync(tmp, "wx", 0o600);
      writeSync(fd, payload);
      fsyncSync(fd);
      closeSync(fd);
      renameSync(tmp, file);
      const d = dirFd();
      fsyncSync(d);
      closeSync(d);
    },
    linkLock(fsync: boolean) {
      const candidate = join(dir, `lock.candidate-${process.pid}-${n++}`);
      const fd = openSync(candidate, "wx", 0o600);
      writeSync(fd, payload);
      if (fsync) fsyncSync(fd);
      closeSync(fd);
      linkSync(candidate, join(dir, "floor.lock"));
      unlinkSync(candidate);
      unlinkSync(join(dir, "floor.lock"));
    },
  };
}

export interface FloorSamples {
  writeFsync: number[];
  atomicReplace: number[];
  linkLockFsync: number[];
  linkLock: number[];
}

export function measureFloor(
  iterations: number,
  payloadBytes = 128,
): { floor: Floor; samples: FloorSamples } {
  const { dir, cleanup } = scratchDir("floor");
  try {
    const ops = floorOps(dir, Buffer.alloc(payloadBytes, 0x61));
    const samples: FloorSamples = {
      writeFsync: timeSync(ops.writeFsync, iterations),
      atomicReplace: timeSync(ops.atomicReplace, iterations),
      linkLockFsync: timeSync(() => ops.linkLock(true), iterations),
      linkLock: timeSync(() => ops.linkLock(false), iterations),
    };
    const p50 = (s: number[]) => summarize(s).p50Ms;
    return {
      floor: {
        writeFsyncMs: p50(samples.writeFsync),
        atomicReplaceMs: p50(samples.atomicReplace),
        linkLockFsyncMs: p50(samples.linkLockFsync),
        linkLockMs: p50(samples.linkLock),
      },
      samples,
    };
  } finally {
    cleanup();
  }
}

export async function runFloor(opts: { quick: boolean }): Promise<SuiteResult> {
  const iterations = opts.quick ? 200 : 2000;
  const { samples } = measureFloor(iterations);
  const { dir, cleanup } = scratchDir("env");
  const environment = describeEnvironment(dir);
  cleanup();
  const row = (name: string, s: number[]) => {
    const m = summarize(s);
    return [name, fmtMs(m.p50Ms), fmtMs(m.p99Ms), fmtMs(m.maxMs), m.opsPerSec.toFixed(0)];
  };
  return {
    id: "floor",
    title: "The fsync floor (raw durable-write loops on the same disk)",
    environment,
    tables: [
      {
        title: `Raw loops, ${iterations} iterations each, 128-byte payload`,
        columns: ["operation", "p50 ms", "p99 ms", "max ms", "ops/s (mean)"],
        rows: [
          row("write + fsync", samples.writeFsync),
          row("temp write + fsync + rename + fsync(dir)", samples.atomicReplace),
          row("candidate write + fsync + link + unlink ×2", samples.linkLockFsync),
          row("candidate write + link + unlink ×2 (no fsync)", samples.linkLock),
        ],
      },
    ],
    figures: {
      writeFsyncP50Ms: summarize(samples.writeFsync).p50Ms,
      atomicReplaceP50Ms: summarize(samples.atomicReplace).p50Ms,
      linkLockFsyncP50Ms: summarize(samples.linkLockFsync).p50Ms,
      linkLockP50Ms: summarize(samples.linkLock).p50Ms,
    },
    notes: [],
  };
}
