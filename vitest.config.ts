import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    // Each package and app is its own project with its own vitest.config.ts (which extends vitest.shared.ts).
    projects: ["packages/*", "apps/*"],
    // Two cores here: process-spawning suites contend badly beyond two files at once.
    maxWorkers: 2,
  },
});
