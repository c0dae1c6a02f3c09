#!/usr/bin/env node
// Lists the longest functions in the source tree (not tests), measured in lines from the function's first
// line to its last, nested functions counted inside their parent and again on their own.
// node scripts/longest-functions.mjs [--top N] [--min LINES] [dir ...]   (default: packages apps, top 25)
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import ts from "typescript";

const args = process.argv.slice(2);
let top = 25;
let min = 0;
const roots = [];
for (let i = 0; i < args.length; i++) {
  if (args[i] === "--top") top = Number(args[++i]);
  else if (args[i] === "--min") min = Number(args[++i]);
  else roots.push(args[i]);
}
if (roots.length === 0) roots.push("packages", "apps");

function* sourceFiles(dir) {
  for (const name of readdirSync(dir)) {
    if (name === "node_modules" || name === "dist" || name === "test" || name.startsWith(".")) continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) yield* sourceFiles(path);
    else if (/\.tsx?$/.test(name) && !/\.(test|spec)\.tsx?$/.test(name) && !name.endsWith(".d.ts"))
      yield path;
  }
}

function nameOf(node) {
  if (node.name && ts.isIdentifier(node.name)) return node.name.text;
  const parent = node.parent;
  if (parent && ts.isVariableDeclaration(parent) && ts.isIdentifier(parent.name)) return parent.name.text;
  if (parent && ts.isPropertyAssignment(parent) && ts.isIdentifier(parent.name)) return parent.name.text;
  return "<anonymous>";
}

const rows = [];
for (const root of roots) {
  for (const file of sourceFiles(root)) {
    const text = readFileSync(file, "utf8");
    const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
    const visit = (node) => {
      if (
        ts.isFunctionDeclaration(node) ||
        ts.isFunctionExpression(node) ||
        ts.isArrowFunction(node) ||
        ts.isMethodDeclaration(node) ||
        ts.isConstructorDeclaration(node)
      ) {
        const start = source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1;
        const end = source.getLineAndCharacterOfPosition(node.getEnd()).line + 1;
        rows.push({
          lines: end - start + 1,
          where: `${relative(process.cwd(), file)}:${start}`,
          name: nameOf(node),
        });
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
}
rows.sort((a, b) => b.lines - a.lines);
for (const row of rows.filter((r) => r.lines >= min).slice(0, top)) {
  console.log(`${String(row.lines).padStart(5)}  ${row.name.padEnd(40)} ${row.where}`);
}
