/**
 * `pnpm bench [--quick] [--only <suite>[,<suite>…]] [suite …] [--<option>=<value> …]`: runs the benchmark
 * suites side by side with their peers and the fsync floor, saves each as bench/results/<suite>.json and
 * regenerates docs/BENCHMARKS.md from all saved results. `--<option>=<value>` pairs go to the suites (each
 * suite's header names the ones it reads, e.g. `--rows=1,4095,20000`, `--bots=file=300,sqlite=300`); an
 * option no chosen suite reads is refused. Timing goals live here, never in tests.
 */
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseBenchArgs, type SuiteOptions } from "./lib/args.js";
import { REPO_ROOT, RESULTS_DIR } from "./lib/dirs.js";
import { printSuite, type SuiteResult, writeBenchmarksDoc } from "./lib/report.js";

type SuiteRunner = (opts: SuiteOptions) => Promise<SuiteResult>;

// Order = order in docs/BENCHMARKS.md. Each suite is imported only when it runs, so one suite's missing
// dependency cannot stop the others.
const SUITES: Record<string, () => Promise<SuiteRunner>> = {
  floor: async () => (await import("./suites/floor.js")).runFloor,
  lock: async () => (await import("./suites/lock.js")).runLock,
  journals: async () => (await import("./suites/journals.js")).runJournals,
  postgres: async () => (await import("./suites/postgres.js")).runPostgres,
  saga: async () => (await import("./suites/saga.js")).runSaga,
  server: async () => (await import("./suites/server.js")).runServer,
  names: async () => (await import("./suites/names.js")).runNames,
  "sqlite-journals": async () => (await import("./suites/sqlite-journals.js")).runSqliteJournals,
  provision: async () => (await import("./suites/provision.js")).runProvision,
  "bots-page": async () => (await import("./suites/bots-page.js")).runBotsPage,
  hosts: async () => (await import("./suites/hosts.js")).runHosts,
};

/** The `--<option>` names each suite reads (anything else is refused, so a typo never runs the defaults). */
const SUITE_OPTIONS: Record<string, readonly string[]> = {
  "sqlite-journals": ["rows", "iterations"],
  provision: ["bots", "window", "concurrency"],
  "bots-page": ["bots", "storage", "seconds"],
  hosts: ["ttls", "samples", "bots", "concurrency"],
};

async function main(): Promise<void> {
  let parsed: ReturnType<typeof parseBenchArgs>;
  try {
    parsed = parseBenchArgs(process.argv.slice(2), Object.keys(SUITES), SUITE_OPTIONS);
  } catch (error) {
    console.error(`pnpm bench: ${(error as Error).message}`);
    process.exit(2);
  }
  const { quick, options } = parsed;
  const ids = parsed.suites.length ? parsed.suites : Object.keys(SUITES);
  mkdirSync(RESULTS_DIR, { recursive: true });
  let failed = 0;
  for (const id of ids) {
    const loader = SUITES[id];
    if (!loader) continue;
    console.log(`\n▶ ${id}${quick ? " (quick)" : ""}`);
    try {
      const result = await (await loader())({ quick, options });
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
