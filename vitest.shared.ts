import { defineConfig } from "vitest/config";

// Every project resolves @drydock/* to its TypeScript sources (the "@drydock/source" export condition),
// so tests never run against a stale dist/.
export const shared = defineConfig({
  resolve: { conditions: ["@drydock/source"] },
  ssr: { resolve: { conditions: ["@drydock/source"] } },
  test: {
    pool: "forks",
    testTimeout: 60_000,
    hookTimeout: 60_000,
    include: ["src/**/*.test.ts", "test/**/*.test.ts"],
  },
});
