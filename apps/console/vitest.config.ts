import { defineProject, mergeConfig } from "vitest/config";
import { shared } from "../../vitest.shared.js";

// The console's end-to-end tests: a real bot server and Debian's chromium driven by playwright-core. The
// global setup installs the browser if it can (scripts/ensure-chromium.sh) and builds the page; a run that
// cannot get a browser fails.
export default mergeConfig(
  shared,
  defineProject({ test: { name: "console", globalSetup: ["test/global-setup.ts"] } }),
);
