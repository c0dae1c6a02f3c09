// Every ts/js example in the READMEs and docs/*.md, extracted at test time: type-checked against the real
// packages in one TypeScript program, and run (unless marked otherwise) in a fresh temporary directory, with
// its `// → …` outcomes asserted. Conventions: this package's README.md.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import ts from "typescript";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import {
  type Example,
  exampleId,
  extractExamples,
  type GeneratedModule,
  markdownFiles,
  outlineNames,
  toModule,
} from "./extract.js";
import { withHarness } from "./harness.js";

const here = dirname(new URL(import.meta.url).pathname);
const root = resolve(here, "../../..");
const examples: Example[] = markdownFiles(root).flatMap((file) =>
  extractExamples(file, readFileSync(join(root, file), "utf8")),
);
// Generated modules live inside the workspace (so `@drydock/*` resolves through this package's
// dependencies) and are removed afterwards.
const outDir = join(here, "..", ".tmp", `run-${process.pid}-${Date.now()}`);
const modules = new Map<Example, { path: string; module: GeneratedModule }>();
const diagnostics = new Map<Example, string[]>();
const unreadable = new Map<Example, string>();

function moduleFileName(example: Example): string {
  const base = `${example.file.replace(/[^A-Za-z0-9]+/g, "_")}_L${example.line}`;
  return join(outDir, example.lang === "js" ? `${base}.js` : `${base}.ts`);
}

/** The packages an example may import: its README's own package and that package's dependencies. */
function allowedImports(example: Example): string[] | null {
  const match = /^(packages|apps)\/([^/]+)\/README\.md$/.exec(example.file);
  if (!match) return null;
  const pkg = JSON.parse(readFileSync(join(root, match[1]!, match[2]!, "package.json"), "utf8"));
  return [pkg.name, ...Object.keys(pkg.dependencies ?? {}), ...Object.keys(pkg.peerDependencies ?? {})];
}

beforeAll(() => {
  mkdirSync(outDir, { recursive: true });
  const harness = relative(outDir, join(here, "harness.js"));
  for (const example of examples) {
    if (example.mode === "outline") continue;
    const path = moduleFileName(example);
    try {
      const module = toModule(example, harness.startsWith(".") ? harness : `./${harness}`);
      writeFileSync(path, module.text);
      modules.set(example, { path, module });
    } catch (error) {
      // A malformed outcome comment or marker fails that example's own test, not the whole file.
      unreadable.set(example, error instanceof Error ? error.message : String(error));
    }
  }
  // One program for every example.
  const config = ts.getParsedCommandLineOfConfigFile(
    join(here, "..", "tsconfig.json"),
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (d) => {
        throw new Error(ts.flattenDiagnosticMessageText(d.messageText, "\n"));
      },
    },
  );
  if (!config) throw new Error("tsconfig.json could not be read");
  const options = { ...config.options, noEmit: true, allowJs: true, checkJs: true };
  const program = ts.createProgram(
    [...modules.values()].map((m) => m.path),
    options,
  );
  const byPath = new Map([...modules].map(([example, m]) => [resolve(m.path), example]));
  for (const d of ts.getPreEmitDiagnostics(program)) {
    const example = d.file ? byPath.get(resolve(d.file.fileName)) : undefined;
    const message = ts.flattenDiagnosticMessageText(d.messageText, "\n  ");
    if (!example) throw new Error(`type error outside the examples: ${d.file?.fileName ?? ""} ${message}`);
    const line = d.start === undefined ? 0 : d.file!.getLineAndCharacterOfPosition(d.start).line;
    // Line 0 is the harness line; line n is the example's line n - 1.
    const where =
      line === 0 ? `${example.file} (harness line)` : `${example.file}:${example.line + line - 1}`;
    diagnostics.set(example, [...(diagnostics.get(example) ?? []), `${where}: TS${d.code} ${message}`]);
  }
}, 60_000);

afterAll(() => {
  rmSync(outDir, { recursive: true, force: true });
});

test("the markdown holds examples to check", () => {
  expect(examples.length).toBeGreaterThan(0);
  for (const example of examples) expect(example.code.trim(), exampleId(example)).not.toBe("");
});

const files = [...new Set(examples.map((e) => e.file))];
for (const file of files) {
  const inFile = examples.filter((e) => e.file === file);
  describe(file, () => {
    for (const example of inFile) {
      const id = exampleId(example);
      test(`${id} (${example.mode})`, async () => {
        if (example.mode === "outline") {
          // Not TypeScript: every API name it lists at the start of a line must be exported.
          const allowed = allowedImports(example);
          if (!allowed) throw new Error(`${id}: an outline is only checked in a package README`);
          const exported = await import(allowed[0]!);
          const names = outlineNames(example.code);
          expect(names.length, `${id}: the outline names no API`).toBeGreaterThan(0);
          const missing = names.filter((n) => !(n in exported));
          expect(missing, `${id}: named in the outline but not exported by ${allowed[0]}`).toEqual([]);
          return;
        }
        if (unreadable.has(example)) throw new Error(unreadable.get(example));
        const generated = modules.get(example)!;
        const allowed = allowedImports(example);
        if (allowed) {
          const foreign = generated.module.imports.filter(
            (s) => !allowed.includes(s.replace(/^(@[^/]+\/[^/]+).*$/, "$1")),
          );
          expect(foreign, `${id}: imports packages its README's package does not depend on`).toEqual([]);
        }
        expect(diagnostics.get(example) ?? [], `${id}: type errors`).toEqual([]);
        if (example.mode !== "run") return;
        const dir = mkdtempSync(join(tmpdir(), "drydock-doc-example-"));
        const cwd = process.cwd();
        try {
          process.chdir(dir);
          const checked = await withHarness(example.harness, dir, id, async () => {
            try {
              await import(generated.path);
            } catch (error) {
              // Name the example (its first line) before the line the failure is on.
              if (error instanceof Error) error.message = `example ${id}: ${error.message}`;
              throw error;
            }
          });
          expect(checked.length, `${id}: outcomes checked`).toBe(generated.module.outcomes);
        } finally {
          process.chdir(cwd);
          rmSync(dir, { recursive: true, force: true });
        }
      });
    }
  });
}
