import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { FileOps } from "@drydock/file-lock";
import { type CrashMode, createPowerLossFs } from "./model.js";

/**
 * Which operations of a workload were acknowledged (returned) and which one was in flight when the power
 * went. An operation that returned with an error also counts as acknowledged: it finished deciding.
 */
export interface AckLog {
  /** Runs operation number `acked + 1`. */
  op<T>(fn: () => Promise<T> | T): Promise<T>;
  readonly acked: number;
  readonly inflight: number | null;
}

export interface ImageContext {
  crashAfter: number;
  /** Operations that returned before the crash. */
  acked: number;
  /** The operation interrupted by the crash (acked + 1), or null when the crash fell between operations. */
  inflight: number | null;
  mode: CrashMode;
  seed: number;
}

export interface SweepOptions {
  /** Names the area in reports. */
  area: string;
  /** Fills the scratch root before the run; everything it writes counts as durable. */
  setup?(root: string): void;
  /**
   * The workload, on the model's file system. Must be deterministic in the calls it makes (inject clocks
   * and key generators), so that crash point k of one run is crash point k of every run.
   */
  workload(fs: FileOps, root: string, log: AckLog): Promise<void>;
  /** Checks one post-crash image; returns a violation (plain words) or null. */
  check(image: string, context: ImageContext): Promise<string | null> | string | null;
  /** Random-subset images per crash point, besides drop-all-unsynced and keep-all (default 4). */
  randomImages?: number;
  /** Seed of the random images (default 1). */
  seed?: number;
}

export interface Violation extends ImageContext {
  detail: string;
}

export interface SweepResult {
  area: string;
  /** Counted calls of a full run: the crash points are 0..steps. */
  steps: number;
  crashPoints: number;
  images: number;
  violations: Violation[];
  /** Calls that changed files inside the model's root without it seeing them (should be none). */
  anomalies: string[];
}

/**
 * An operation is acknowledged only if it returned (value or error) while the power was still on: one that
 * finishes after the crash point returned to nobody, so it stays in flight.
 */
function ackLog(crashed: () => boolean): AckLog {
  const log = {
    acked: 0,
    inflight: null as number | null,
    async op<T>(fn: () => Promise<T> | T): Promise<T> {
      const index = log.acked + 1;
      log.inflight = index;
      const settle = (): void => {
        if (crashed()) return;
        log.inflight = null;
        log.acked = index;
      };
      try {
        const result = await fn();
        settle();
        return result;
      } catch (error) {
        settle();
        throw error;
      }
    },
  };
  return log;
}

/**
 * The exhaustive crash sweep (SQLite's method) under the weak model: run the workload once to count
 * its calls, then once per crash point k = 0..N (the power goes right after call k), and check the
 * drop-all-unsynced image, the keep-all image and `randomImages` random subsets of each.
 */
export async function crashSweep(options: SweepOptions): Promise<SweepResult> {
  const scratch = mkdtempSync(join(tmpdir(), "drydock-power-loss-"));
  const randomImages = options.randomImages ?? 4;
  const baseSeed = options.seed ?? 1;
  const violations: Violation[] = [];
  const anomalies: string[] = [];
  let images = 0;
  let run = 0;
  try {
    const runOnce = async (
      crashAfter: number | undefined,
    ): Promise<{ model: ReturnType<typeof createPowerLossFs>; acked: number; inflight: number | null }> => {
      run += 1;
      const root = join(scratch, `run-${run}`);
      mkdirSync(root, { mode: 0o700 });
      options.setup?.(root);
      const model = createPowerLossFs({ root, ...(crashAfter === undefined ? {} : { crashAfter }) });
      const log = ackLog(model.crashed);
      try {
        await options.workload(model.ops, root, log);
      } catch (error) {
        if (!model.crashed()) throw error;
      }
      anomalies.push(...model.anomalies());
      return { model, acked: log.acked, inflight: log.inflight };
    };
    const full = await runOnce(undefined);
    const steps = full.model.steps();
    rmSync(join(scratch, `run-${run}`), { recursive: true, force: true });
    for (let crashAfter = 0; crashAfter <= steps; crashAfter += 1) {
      const outcome = await runOnce(crashAfter);
      const modes: { mode: CrashMode; seed: number }[] = [
        { mode: "drop-all-unsynced", seed: 0 },
        { mode: "keep-all", seed: 0 },
      ];
      for (let i = 0; i < randomImages; i += 1) {
        modes.push({ mode: "random-subset", seed: baseSeed * 1_000_003 + crashAfter * 1_009 + i });
      }
      for (const { mode, seed } of modes) {
        images += 1;
        const image = join(scratch, `image-${images}`);
        outcome.model.crashImage(image, { mode, seed });
        const context: ImageContext = {
          crashAfter,
          acked: outcome.acked,
          inflight: outcome.inflight,
          mode,
          seed,
        };
        let detail: string | null;
        try {
          detail = await options.check(image, context);
        } catch (error) {
          detail = `check threw: ${error instanceof Error ? error.message : String(error)}`;
        }
        if (detail !== null) violations.push({ ...context, detail });
        rmSync(image, { recursive: true, force: true });
      }
      rmSync(join(scratch, `run-${run}`), { recursive: true, force: true });
    }
    return { area: options.area, steps, crashPoints: steps + 1, images, violations, anomalies };
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}
