import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const BENCH_ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
export const RESULTS_DIR = join(BENCH_ROOT, "results");
export const REPO_ROOT = dirname(BENCH_ROOT);

/** A scratch directory on the same disk as the repository (never /tmp, which may be tmpfs elsewhere). */
export function scratchDir(label: string): { dir: string; cleanup(): void } {
  const base = join(RESULTS_DIR, "tmp");
  mkdirSync(base, { recursive: true });
  const dir = mkdtempSync(join(base, `${label}-`));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}
