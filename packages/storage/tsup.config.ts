import { defineConfig } from "tsup";

export default defineConfig({
  entry: ["src/index.ts", "src/conformance/index.ts", "src/conformance/race-worker.ts"],
  format: ["esm"],
  dts: true,
  clean: true,
  sourcemap: true,
  target: "node20",
  // The conformance suite runs inside the caller's vitest with the caller's fast-check.
  external: ["vitest", "fast-check"],
});
