import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { findDuplicateName } from "../src/duplicate-names.js";

describe("findDuplicateName", () => {
  it("finds a repeated name at the top level, nested in a row, and written with escapes", () => {
    expect(findDuplicateName('{"version":1,"requests":[{"k":1}],"requests":[]}')).toEqual({
      name: "requests",
      offset: 34,
    });
    expect(
      findDuplicateName('{"requests":[{"botId":"a","key":"x"},{"botId":"b","key":"y","key":"z"}]}'),
    ).toMatchObject({ name: "key" });
    expect(findDuplicateName('{"a":1,"\\u0061":2}')).toMatchObject({ name: "a" });
    expect(findDuplicateName('{"\\ud800":1,"\\uD800":2}')).toMatchObject({ name: "\ud800" });
    expect(findDuplicateName('{"a\\/b":1,"a/b":2}')).toMatchObject({ name: "a/b" });
  });

  it("does not confuse names of different objects, values, or quotes and brackets inside strings", () => {
    for (const text of [
      '{"a":{"a":1},"b":[{"a":1},{"a":2}]}',
      '{"a":"a","b":"a"}',
      '{"x\\"":"{\\"a\\":1,\\"a\\":2}","x":1}',
      '{"a\\\\":1,"a":2}',
      '{"a":[1,{"b":2}],"b":3,"c":{"a":{"b":{}}}}',
      '["a","a",{"a":1},{"a":1}]',
      '"a"',
      "{}",
      '{"":1,"\\u0000":2}',
    ]) {
      expect(JSON.parse(text)).toBeDefined();
      expect(findDuplicateName(text)).toBeNull();
    }
  });

  // A JSON writer with random whitespace and randomly escaped characters in names and strings (\uXXXX, or the short forms
  // \" \\ \/ \n): what a hand edit or another program might produce, where the journal's own-serialization
  // shortcut does not apply.
  function writer(pick: () => boolean): (value: unknown) => string {
    const space = () => (pick() ? "" : pick() ? " " : pick() ? "\n  " : "\t\r\n");
    const literal = (name: string) => {
      let out = '"';
      for (let i = 0; i < name.length; i++) {
        const unit = name.charCodeAt(i);
        const mustEscape =
          unit < 0x20 || unit === 0x22 || unit === 0x5c || (unit >= 0xd800 && unit <= 0xdfff);
        const short = SHORT_ESCAPES[name[i]!];
        if (short && pick()) out += short;
        else out += mustEscape || pick() ? `\\u${unit.toString(16).padStart(4, "0")}` : name[i];
      }
      return `${out}"`;
    };
    const write = (value: unknown): string => {
      if (Array.isArray(value))
        return `[${space()}${value.map(write).join(`${space()},${space()}`)}${space()}]`;
      if (typeof value === "object" && value !== null) {
        const members = Object.entries(value).map(
          ([name, v]) => `${literal(name)}${space()}:${space()}${write(v)}`,
        );
        return `{${space()}${members.join(`,${space()}`)}${space()}}`;
      }
      return typeof value === "string" ? literal(value) : JSON.stringify(value);
    };
    return write;
  }

  const SHORT_ESCAPES: Record<string, string> = { '"': '\\"', "\\": "\\\\", "/": "\\/", "\n": "\\n" };
  // Names and strings rich in the characters a scanner can get wrong.
  const unit = fc.oneof(
    fc.constantFrom('"', "\\", "/", "\n", "a", "{", ",", ":", "]", "\ud800"),
    fc.string({ unit: "binary", maxLength: 1 }),
  );
  const text = fc.string({ unit, maxLength: 6 });
  const json = fc.letrec<{ value: unknown }>((tie) => ({
    value: fc.oneof(
      { depthSize: "small", maxDepth: 4 },
      fc.constantFrom(null, true, false, 0, -1.5e300),
      text,
      fc.array(tie("value"), { maxLength: 4 }),
      fc.dictionary(text, tie("value"), { maxKeys: 4 }),
    ),
  })).value;

  it("property: agrees with JSON.parse on valid documents without repeated names (any layout, any escapes)", () => {
    fc.assert(
      fc.property(json, fc.infiniteStream(fc.boolean()), (value, choices) => {
        const it = choices[Symbol.iterator]();
        const text = writer(() => it.next().value as boolean)(value);
        expect(JSON.parse(text)).toEqual(JSON.parse(JSON.stringify(value)));
        expect(findDuplicateName(text)).toBeNull();
        for (const indent of [0, 2, "\t"])
          expect(findDuplicateName(JSON.stringify(value, null, indent))).toBeNull();
      }),
      { numRuns: 300 },
    );
  });

  it("property: finds a name repeated anywhere, however it is escaped, that JSON.parse silently collapses", () => {
    fc.assert(
      fc.property(
        fc.dictionary(text, json, { minKeys: 1, maxKeys: 5 }),
        fc.nat(),
        json,
        fc.array(fc.constantFrom("array", "object"), { maxLength: 3 }),
        fc.infiniteStream(fc.boolean()),
        (members, which, copy, wrappers, choices) => {
          const names = Object.keys(members);
          const name = names[which % names.length]!;
          const it = choices[Symbol.iterator]();
          const write = writer(() => it.next().value as boolean);
          const inner = write(members);
          // The repeated member goes last, so it is the copy JSON.parse keeps.
          let text = `${inner.slice(0, inner.lastIndexOf("}"))},${write({ [name]: copy }).slice(1)}`;
          for (const wrapper of wrappers) text = wrapper === "array" ? `[1,${text}]` : `{"w":${text}}`;
          expect(() => JSON.parse(text)).not.toThrow();
          expect(findDuplicateName(text)?.name).toBe(name);
        },
      ),
      { numRuns: 300 },
    );
  });
});
