import { defineProject, mergeConfig } from "vitest/config";
import { shared } from "../../vitest.shared.js";

// One PostgreSQL cluster for the project (test-kit's global setup): the crash sweep and the provider-fault
// matrix run on postgres too, each run in a database of its own. If it cannot start, those tests fail.
export default mergeConfig(
  shared,
  defineProject({
    test: { name: "boat-lifecycle", globalSetup: ["./test/postgres-global-setup.ts"] },
  }),
);
