/**
 * `pnpm bench [--quick] [suite ...]`: runs the benchmark suites side by side with their peers and the fsync
 * floor, saves each as bench/results/<suite>.json and regenerates docs/BENCHMARKS.md from all saved results.
 * Timing goals live here, never in tests.
 */
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT, RESULTS_DIR } from "./lib/dirs.js";
import { printSuite, type SuiteResult, writeBenchmarksDoc } from "./lib/report.js";

type SuiteRunner = (opts: { quick: boolean }) => Promise<SuiteResult>;

// Order = order in docs/BENCHMARKS.md. Each suite is imported only when it runs, so one suite's missing
// dependency cannot stop the others.
const SUITES: Record<string, () => Promise<SuiteRunner>> = {
  floor: async () => (await import("./suites/floor.js")).runFloor,
  lock: async () => (await import("./suites/lock.js")).runLock,
  journals: async () => (await import("./suites/journals.js")).runJournals,
  postgres: async () => (await import("./suites/postgres.js")).runPostgres,
  saga: async () => (await import("./suites/saga.js")).runSaga,
  server: async () => (await import("./suites/server.js")).runServer,
};

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const quick = args.includes("--quick");
  const chosen = args.filter((a) => !a.startsWith("--"));
  const unknown = chosen.filter((c) => !(c in SUITES));
  if (unknown.length) {
    console.error(`unknown suite(s): ${unknown.join(", ")}; known: ${Object.keys(SUITES).join(", ")}`);
    process.exit(2);
  }
  const ids = chosen.length ? chosen : Object.keys(SUITES);
  mkdirSync(RESULTS_DIR, { recursive: true });
  let failed = 0;
  for (const id of ids) {
    const loader = SUITES[id];
    if (!loader) continue;
    console.log(`\n▶ ${id}${quick ? " (quick)" : ""}`);
    try {
      const result = await (await loader())({ quick });
      printSuite(result);
      writeFileSync(join(RESULTS_DIR, `${id}.json`), `${JSON.stringify(result, null, 2)}\n`);
    } catch (error) {
      failed += 1;
      console.error(`suite ${id} failed:`, error);
    }
  }
  rmSync(join(RESULTS_DIR, "tmp"), { recursive: true, force: true });
  writeBenchmarksDoc(RESULTS_DIR, join(REPO_ROOT, "docs", "BENCHMARKS.md"), Object.keys(SUITES));
  console.log(
    `\nwrote docs/BENCHMARKS.md from bench/results/*.json${failed ? ` (${failed} suite(s) failed)` : ""}`,
  );
  process.exit(failed ? 1 : 0);
}

await main();
