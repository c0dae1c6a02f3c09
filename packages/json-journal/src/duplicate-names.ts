/**
 * Finds a member name that occurs twice in one object of a JSON text. RFC 8259 only says names "SHOULD be
 * unique", and JSON.parse keeps the last copy: `{"requests":[row],"requests":[]}` would be read as an empty
 * journal and the next update would rewrite the file without `row`. A journal refuses such a file instead.
 *
 * Hand-written because the parser at hand cannot see duplicates: JSON.parse returns the object after the
 * last copy won, and its reviver is called once per *surviving* member. Libraries considered:
 * `secure-json-parse` and `json-parse-even-better-errors` call JSON.parse underneath; `json5` assigns
 * members as it parses, so the last copy wins there too; `json-dup-key-validator`,
 * `find-duplicated-property-keys` and `jsonc-parser`'s visitor can report names, but each is a second full
 * parser as a runtime dependency for what the few lines below do.
 *
 * Precondition: `text` is valid JSON (the caller ran JSON.parse on it first), so the scanner only has to
 * tell names from values and compare decoded names; it does not re-check the grammar (and on invalid text
 * it still terminates). Returns the first repeated name, decoded ("a" and "\u0061" are the same name), with
 * the offset of its second occurrence, or null.
 */
export function findDuplicateName(text: string): { name: string; offset: number } | null {
  const problem = findShapeProblem(text, Number.POSITIVE_INFINITY);
  return problem?.kind === "duplicate" ? { name: problem.name, offset: problem.offset } : null;
}

export type JsonShapeProblem =
  | { kind: "duplicate"; name: string; offset: number }
  | { kind: "too_deep"; depth: number; offset: number };

/**
 * The same scan, which also stops at the first container opened deeper than `maxDepth` (the top-level value
 * is depth 1): a journal refuses a document it could read but not write back, since cloning and
 * serialising it (structuredClone, JSON.stringify) recurse and overflow the stack a few thousand levels
 * down, while JSON.parse does not.
 */
export function findShapeProblem(text: string, maxDepth: number): JsonShapeProblem | null {
  // One frame per open container: the names seen so far in an object, null for an array.
  const stack: (Set<string> | null)[] = [];
  let expectName = false;
  let i = 0;
  while (i < text.length) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      const start = i;
      let end = text.indexOf('"', i + 1);
      while (end !== -1 && escapedQuote(text, end)) end = text.indexOf('"', end + 1);
      if (end === -1) return null;
      i = end + 1;
      const names = stack[stack.length - 1];
      if (expectName && names) {
        const literal = text.slice(start, i);
        // Only a name with an escape needs decoding; JSON.parse of the literal decodes it exactly.
        const name = literal.includes("\\") ? (JSON.parse(literal) as string) : literal.slice(1, -1);
        if (names.has(name)) return { kind: "duplicate", name, offset: start };
        names.add(name);
        expectName = false;
      }
      continue;
    }
    if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      if (stack.length >= maxDepth) return { kind: "too_deep", depth: stack.length + 1, offset: i };
      const object = c === 0x7b;
      stack.push(object ? new Set() : null);
      expectName = object;
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      stack.pop();
      expectName = false;
    } else if (c === 0x2c /* , */) {
      expectName = stack[stack.length - 1] instanceof Set;
    }
    i += 1;
  }
  return null;
}

/** True when the quote at `at` is preceded by an odd number of backslashes (it is part of the string). */
function escapedQuote(text: string, at: number): boolean {
  let slashes = 0;
  while (text.charCodeAt(at - 1 - slashes) === 0x5c) slashes += 1;
  return slashes % 2 === 1;
}
