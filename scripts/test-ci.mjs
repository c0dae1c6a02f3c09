#!/usr/bin/env node
// Runs every vitest project once, with the JSON reporter beside the default one, and prints the
// closing line CI reads: "N passed, N failed" (plus skipped). Exit code: vitest's, or 1 if any test failed.
import { spawnSync } from "node:child_process";
import { readFileSync, rmSync } from "node:fs";

const out = ".vitest-results.json";
rmSync(out, { force: true });
const run = spawnSync(
  "pnpm",
  [
    "exec",
    "vitest",
    "run",
    "--reporter=default",
    "--reporter=json",
    `--outputFile.json=${out}`,
    ...process.argv.slice(2),
  ],
  { stdio: "inherit" },
);
let passed = 0;
let failed = 0;
let skipped = 0;
try {
  const r = JSON.parse(readFileSync(out, "utf8"));
  passed = r.numPassedTests ?? 0;
  // numFailedTestSuites counts every describe block around a failed test too (one failed test read as
  // "3 failed"), so count failed tests, plus each file that failed without a failed test (it did not load,
  // or a hook threw).
  const brokenFiles = (r.testResults ?? []).filter(
    (file) => file.status === "failed" && !(file.assertionResults ?? []).some((t) => t.status === "failed"),
  ).length;
  failed = (r.numFailedTests ?? 0) + brokenFiles;
  skipped = (r.numPendingTests ?? 0) + (r.numTodoTests ?? 0);
} catch (error) {
  console.error(`could not read vitest's JSON results (${error.message})`);
  failed += 1;
}
console.log(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ""}`);
process.exit(run.status !== 0 || failed > 0 || passed === 0 ? 1 : 0);
