import { appendFileSync } from "node:fs";
import type { SweepResult } from "../src/index.js";

/**
 * Figures for `pnpm reliability` (scripts/reliability.mjs): one JSON line per figure, appended to the file
 * named by DRYDOCK_RELIABILITY_OUT. Without it, nothing is written (the ordinary test run).
 */
export function report(area: string, metric: string, value: number | string): void {
  const out = process.env.DRYDOCK_RELIABILITY_OUT;
  if (out) appendFileSync(out, `${JSON.stringify({ area, metric, value })}\n`);
}

/** Loop counts grow with DRYDOCK_RELIABILITY_SCALE (default 1: the ordinary suite). */
export function scale(base: number): number {
  const factor = Number(process.env.DRYDOCK_RELIABILITY_SCALE ?? "1");
  return Number.isFinite(factor) && factor > 1 ? Math.round(base * factor) : base;
}

export function reportSweep(result: SweepResult): void {
  report("power-loss", `${result.area}: crash points`, result.crashPoints);
  report("power-loss", `${result.area}: images checked`, result.images);
  report("power-loss", `${result.area}: violations`, result.violations.length);
}
