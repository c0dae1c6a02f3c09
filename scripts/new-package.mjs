#!/usr/bin/env node
// Scaffolds packages/<name> with the layout every drydock library shares (see docs/ARCHITECTURE.md):
// node scripts/new-package.mjs <name> "<description>" [dep@version|workspace-name ...]
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const [name, description, ...deps] = process.argv.slice(2);
if (!name || !description) {
  console.error('usage: node scripts/new-package.mjs <name> "<description>" [deps...]');
  process.exit(2);
}
const dir = join("packages", name);
if (existsSync(dir)) {
  console.error(`${dir} exists`);
  process.exit(1);
}
mkdirSync(join(dir, "src"), { recursive: true });
const dependencies = {};
for (const d of deps) {
  if (d.startsWith("@drydock/")) dependencies[d] = "workspace:*";
  else {
    const at = d.lastIndexOf("@");
    dependencies[d.slice(0, at)] = d.slice(at + 1);
  }
}
const pkg = {
  name: `@drydock/${name}`,
  version: "0.1.0",
  description,
  type: "module",
  sideEffects: false,
  license: "MIT",
  exports: {
    ".": { "@drydock/source": "./src/index.ts", types: "./dist/index.d.ts", import: "./dist/index.js" },
  },
  main: "./dist/index.js",
  types: "./dist/index.d.ts",
  files: ["dist", "README.md"],
  scripts: { build: "tsup", typecheck: "tsc --noEmit -p tsconfig.json" },
  dependencies,
  engines: { node: ">=20.19" },
};
const w = (f, s) => writeFileSync(join(dir, f), s);
w("package.json", `${JSON.stringify(pkg, null, 2)}\n`);
w(
  "tsconfig.json",
  `${JSON.stringify({ extends: "../../tsconfig.base.json", include: ["src", "test"] }, null, 2)}\n`,
);
w(
  "tsup.config.ts",
  `import { defineConfig } from "tsup";

export default defineConfig({
  entry: ["src/index.ts"],
  format: ["esm"],
  dts: true,
  clean: true,
  sourcemap: true,
  target: "node20",
});
`,
);
w(
  "vitest.config.ts",
  `import { defineProject, mergeConfig } from "vitest/config";
import { shared } from "../../vitest.shared.js";

export default mergeConfig(shared, defineProject({ test: { name: "${name}" } }));
`,
);
console.log(`created ${dir}`);
