/** Small, dependency-free summary statistics for latency samples (milliseconds). */
export interface Summary {
  n: number;
  meanMs: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  opsPerSec: number;
}

export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank] as number;
}

export function summarize(samplesMs: readonly number[]): Summary {
  const sorted = [...samplesMs].sort((a, b) => a - b);
  const total = sorted.reduce((s, x) => s + x, 0);
  const mean = sorted.length ? total / sorted.length : Number.NaN;
  return {
    n: sorted.length,
    meanMs: mean,
    p50Ms: percentile(sorted, 50),
    p99Ms: percentile(sorted, 99),
    maxMs: sorted.length ? (sorted[sorted.length - 1] as number) : Number.NaN,
    opsPerSec: mean > 0 ? 1000 / mean : Number.NaN,
  };
}

/** Jain's fairness index over per-process completion counts: 1 = perfectly fair, 1/n = one process got all. */
export function jainIndex(counts: readonly number[]): number {
  const sum = counts.reduce((s, x) => s + x, 0);
  const squares = counts.reduce((s, x) => s + x * x, 0);
  return squares === 0 ? Number.NaN : (sum * sum) / (counts.length * squares);
}

/** Times `op` `iterations` times after `warmup` untimed runs; returns per-call samples in ms. */
export function timeSync(op: () => void, iterations: number, warmup = Math.min(50, iterations)): number[] {
  for (let i = 0; i < warmup; i++) op();
  const samples: number[] = new Array(iterations);
  for (let i = 0; i < iterations; i++) {
    const t0 = process.hrtime.bigint();
    op();
    samples[i] = Number(process.hrtime.bigint() - t0) / 1e6;
  }
  return samples;
}

export async function timeAsync(
  op: () => Promise<void>,
  iterations: number,
  warmup = Math.min(50, iterations),
): Promise<number[]> {
  for (let i = 0; i < warmup; i++) await op();
  const samples: number[] = new Array(iterations);
  for (let i = 0; i < iterations; i++) {
    const t0 = process.hrtime.bigint();
    await op();
    samples[i] = Number(process.hrtime.bigint() - t0) / 1e6;
  }
  return samples;
}

export const fmtMs = (ms: number): string =>
  Number.isNaN(ms) ? "–" : ms >= 100 ? ms.toFixed(0) : ms >= 1 ? ms.toFixed(2) : ms.toFixed(3);
export const fmtRatio = (r: number): string => (Number.isFinite(r) ? `${r.toFixed(2)}×` : "–");
