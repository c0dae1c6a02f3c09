import { defineConfig } from "tsup";

export default defineConfig({
  entry: { index: "src/index.ts", simulator: "src/simulator/index.ts", bin: "src/bin.ts" },
  format: ["esm"],
  dts: { entry: { index: "src/index.ts", simulator: "src/simulator/index.ts" } },
  clean: true,
  sourcemap: true,
  target: "node20",
});
