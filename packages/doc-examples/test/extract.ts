// Finds the code examples of drydock's markdown and turns each into a TypeScript module that can be
// type-checked and run. The conventions are documented in this package's README.md.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import ts from "typescript";

export type ExampleMode = "run" | "typecheck-only" | "outline";

export interface Example {
  /** The markdown file, relative to the repository root. */
  file: string;
  /** 1-based line of the example's first code line in `file`. */
  line: number;
  lang: "ts" | "js";
  code: string;
  mode: ExampleMode;
  /** Names the test supplies as variables (`harness:` in the marker). */
  harness: string[];
  /** Why the example is not run (required for typecheck-only and outline). */
  reason: string | null;
}

/** "packages/file-lock/README.md:12": how failures name an example. */
export function exampleId(example: Example): string {
  return `${example.file}:${example.line}`;
}

const LANGS: Record<string, "ts" | "js"> = {
  ts: "ts",
  typescript: "ts",
  js: "js",
  javascript: "js",
  mjs: "js",
};
const MARKER = /^<!--\s*example:(.*?)-->\s*$/;

/** Every markdown file whose examples are checked: the root README, packages/apps READMEs, docs/*.md, docs/decisions/*.md. */
export function markdownFiles(root: string): string[] {
  const files = ["README.md"];
  for (const dir of ["packages", "apps"]) {
    for (const name of readdirSync(join(root, dir)).sort()) {
      try {
        readFileSync(join(root, dir, name, "README.md"));
        files.push(`${dir}/${name}/README.md`);
      } catch {
        // no README
      }
    }
  }
  for (const dir of ["docs", "docs/decisions"]) {
    for (const name of readdirSync(join(root, dir)).sort()) {
      if (name.endsWith(".md")) files.push(`${dir}/${name}`);
    }
  }
  return files;
}

/** The ts/js examples of one markdown text, with the marker (an HTML comment) right above each. */
export function extractExamples(file: string, text: string): Example[] {
  const lines = text.split("\n");
  const examples: Example[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\S*)\s*$/.exec(lines[i]!);
    if (!open) continue;
    const end = lines.findIndex((l, j) => j > i && /^```\s*$/.test(l));
    if (end < 0) throw new Error(`${file}:${i + 1}: code fence never closed`);
    const lang = LANGS[open[1]!.toLowerCase()];
    if (lang) {
      let above = i - 1;
      while (above >= 0 && lines[above]!.trim() === "") above--;
      const marker = above >= 0 ? MARKER.exec(lines[above]!.trim()) : null;
      const parsed = parseMarker(marker?.[1] ?? "run", `${file}:${above + 1}`);
      examples.push({ file, line: i + 2, lang, code: lines.slice(i + 1, end).join("\n"), ...parsed });
    }
    i = end;
  }
  return examples;
}

/** `example: typecheck-only; harness: dataDir, client; why it is not run` */
function parseMarker(
  body: string,
  where: string,
): { mode: ExampleMode; harness: string[]; reason: string | null } {
  const [modeText, ...rest] = body.split(";").map((s) => s.trim());
  const mode = modeText as ExampleMode;
  if (!["run", "typecheck-only", "outline"].includes(mode)) {
    throw new Error(`${where}: unknown example mode "${modeText}" (run, typecheck-only or outline)`);
  }
  let harness: string[] = [];
  const reasons: string[] = [];
  for (const part of rest) {
    const h = /^harness:\s*(.*)$/.exec(part);
    if (h) harness = h[1]!.split(/[\s,]+/).filter(Boolean);
    else if (part) reasons.push(part);
  }
  const reason = reasons.join("; ") || null;
  if (mode !== "run" && !reason) throw new Error(`${where}: a ${mode} example must say why it is not run`);
  return { mode, harness, reason };
}

// ---------------------------------------------------------------------------------------------------------
// Outcomes: `expr; // → pattern` (or `// → pattern` alone on the line after the statement).

/** What an outcome comment promises, checked by `matches` in harness.ts. */
export type Pattern =
  | { eq: string | number | boolean | null }
  | { undefined: true }
  | { array: Pattern[] }
  | { object: Record<string, Pattern | "present"> }
  | { oneOf: Pattern[] };

const ARROW = /\/\/\s*→\s*(.+)$/;

export function parsePattern(text: string, where: string): Pattern {
  const source = ts.createSourceFile("pattern.ts", `(${text});`, ts.ScriptTarget.ES2022, true);
  const statement = source.statements[0];
  if (source.statements.length !== 1 || !statement || !ts.isExpressionStatement(statement)) {
    throw new Error(`${where}: outcome "${text}" is not one expression`);
  }
  const convert = (node: ts.Expression): Pattern => {
    if (ts.isParenthesizedExpression(node)) return convert(node.expression);
    if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) return { eq: node.text };
    if (ts.isNumericLiteral(node)) return { eq: Number(node.text) };
    if (ts.isPrefixUnaryExpression(node) && node.operator === ts.SyntaxKind.MinusToken) {
      if (ts.isNumericLiteral(node.operand)) return { eq: -Number(node.operand.text) };
    }
    if (node.kind === ts.SyntaxKind.TrueKeyword) return { eq: true };
    if (node.kind === ts.SyntaxKind.FalseKeyword) return { eq: false };
    if (node.kind === ts.SyntaxKind.NullKeyword) return { eq: null };
    if (ts.isIdentifier(node) && node.text === "undefined") return { undefined: true };
    if (ts.isArrayLiteralExpression(node)) return { array: node.elements.map(convert) };
    if (ts.isBinaryExpression(node) && node.operatorToken.kind === ts.SyntaxKind.BarToken) {
      const left = convert(node.left);
      const options = "oneOf" in left ? left.oneOf : [left];
      return { oneOf: [...options, convert(node.right)] };
    }
    if (ts.isObjectLiteralExpression(node)) {
      const object: Record<string, Pattern | "present"> = {};
      for (const p of node.properties) {
        if (ts.isShorthandPropertyAssignment(p)) object[p.name.text] = "present";
        else if (ts.isPropertyAssignment(p) && (ts.isIdentifier(p.name) || ts.isStringLiteral(p.name))) {
          object[p.name.text] = convert(p.initializer);
        } else throw new Error(`${where}: outcome property "${p.getText()}" is not supported`);
      }
      return { object };
    }
    throw new Error(
      `${where}: outcome "${node.getText()}" is not a literal, an array, an object or a | of them`,
    );
  };
  return convert(statement.expression);
}

/** Keys an object pattern names at its top level (type-checked against the value's type). */
function topKeys(pattern: Pattern): string[] {
  return "object" in pattern ? Object.keys(pattern.object) : [];
}

export interface GeneratedModule {
  /** The module text. Line n of the example is line n + 1 here (one harness line comes first). */
  text: string;
  /** `@drydock/*` specifiers the example imports. */
  imports: string[];
  /** How many outcomes the module asserts. */
  outcomes: number;
}

/**
 * The example as a module: the first line imports the harness and declares the `harness:` variables;
 * every outcome comment wraps its statement's value in `__doc.expect(value, pattern, where, keys)`. Nothing
 * else of the example changes, and each example line keeps its line number (+1), so diagnostics map back.
 */
export function toModule(example: Example, harnessSpecifier: string): GeneratedModule {
  const source = ts.createSourceFile("example.ts", example.code, ts.ScriptTarget.ES2022, true);
  const lineOf = (pos: number) => source.getLineAndCharacterOfPosition(pos).line;
  const statements: ts.Statement[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isExpressionStatement(node) || ts.isVariableStatement(node)) statements.push(node);
    ts.forEachChild(node, visit);
  };
  visit(source);
  const inserts: { pos: number; text: string }[] = [];
  const codeLines = example.code.split("\n");
  let outcomes = 0;
  codeLines.forEach((lineText, index) => {
    const arrow = ARROW.exec(lineText);
    if (!arrow) return;
    const where = `${example.file}:${example.line + index}`;
    const alone = /^\s*\/\//.test(lineText);
    // The statement the outcome belongs to: the one ending on this line, or (a comment alone on its line)
    // the last one ending before it.
    // Statements at any depth (an outcome may sit inside a try block or a callback).
    const candidates = statements.filter((s) =>
      alone ? lineOf(s.getEnd()) < index : lineOf(s.getEnd()) === index,
    );
    const statement = candidates.sort((a, b) => a.getEnd() - b.getEnd())[candidates.length - 1];
    let target: ts.Expression | undefined;
    if (statement && ts.isExpressionStatement(statement)) target = statement.expression;
    else if (statement && ts.isVariableStatement(statement)) {
      const declarations = statement.declarationList.declarations;
      if (declarations.length === 1) target = declarations[0]!.initializer;
    }
    if (!target)
      throw new Error(`${where}: the outcome "// → ${arrow[1]}" follows no expression or declaration`);
    // `// → value — explanation`: the words after an em dash are for the reader.
    const pattern = parsePattern(arrow[1]!.split(" — ")[0]!.trim(), where);
    const keys = topKeys(pattern);
    inserts.push({ pos: target.getStart(source), text: "__doc.expect(" });
    inserts.push({
      pos: target.getEnd(),
      text: `, ${JSON.stringify(pattern)}, ${JSON.stringify(where)}, ${JSON.stringify(keys)})`,
    });
    outcomes++;
  });
  let text = example.code;
  for (const insert of inserts.sort((a, b) => b.pos - a.pos)) {
    text = text.slice(0, insert.pos) + insert.text + text.slice(insert.pos);
  }
  const imports = source.statements
    .filter(ts.isImportDeclaration)
    .map((s) => (s.moduleSpecifier as ts.StringLiteral).text)
    .filter((s) => s.startsWith("@drydock/"));
  const declared = example.harness.length > 0 ? ` const { ${example.harness.join(", ")} } = __doc.vars;` : "";
  const header = `import { __doc } from ${JSON.stringify(harnessSpecifier)};${declared}`;
  return { text: `${header}\n${text}\n`, imports, outcomes };
}

/**
 * For an outline (not TypeScript): the API names it lists at the start of a line (`name(…)`, or a
 * comma-separated list such as `PHASES, TRANSITIONS, PHASE_EVIDENCE (zod schema per phase)`), to check as
 * exports. Indented lines (methods, results) and comments are not names.
 */
export function outlineNames(code: string): string[] {
  const names = new Set<string>();
  for (const line of code.split("\n")) {
    if (!/^[A-Za-z_$]/.test(line)) continue;
    const segments: string[] = [];
    let depth = 0;
    let segment = "";
    for (const ch of line.replace(/\s\/\/.*$/, "")) {
      if ("({[".includes(ch)) depth++;
      if (")}]".includes(ch)) depth--;
      if (ch === "," && depth === 0) {
        segments.push(segment);
        segment = "";
      } else segment += ch;
    }
    segments.push(segment);
    for (const part of segments) {
      const name = /^\s*([A-Za-z_$][\w$]*)\s*(\(|$)/.exec(part);
      if (name) names.add(name[1]!);
    }
  }
  return [...names];
}
