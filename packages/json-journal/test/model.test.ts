import { join } from "node:path";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { isJsonJournalError, type JsonJournal, openJsonJournal } from "../src/index.js";
import { makeTempDir, removeDir } from "./helpers.js";

const CountersSchema = z.object({
  version: z.literal(1),
  counters: z.array(z.object({ name: z.string().min(1), value: z.number().int() })),
});
type Counters = z.infer<typeof CountersSchema>;

type Model = Map<string, number>;
interface Real {
  file: string;
  /** The journal under test; `Reopen` replaces it (a restart of this process). */
  journal: JsonJournal<Counters>;
  /** A second, independent journal on the same file (another process's view). */
  other: JsonJournal<Counters>;
}

function open(file: string): JsonJournal<Counters> {
  return openJsonJournal<Counters>({
    file,
    schema: CountersSchema,
    empty: () => ({ version: 1, counters: [] }),
    check: (doc) =>
      new Set(doc.counters.map((c) => c.name)).size === doc.counters.length ? null : "duplicate names",
    stateError: (detail, cause) => Object.assign(new Error(`counters are ${detail}`), { detail, cause }),
  });
}

function set(doc: Counters, name: string, value: number): Counters {
  const exists = doc.counters.some((c) => c.name === name);
  return {
    ...doc,
    counters: exists
      ? doc.counters.map((c) => (c.name === name ? { name, value } : c))
      : [...doc.counters, { name, value }],
  };
}

const name = fc.constantFrom("a", "b", "c", "d", "e");
const value = fc.integer({ min: -1000, max: 1000 });

class SetCommand implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly name: string,
    readonly value: number,
    readonly viaOther: boolean,
  ) {}
  check = () => true;
  async run(model: Model, real: Real) {
    const journal = this.viaOther ? real.other : real.journal;
    await journal.update((doc) => ({ next: set(doc, this.name, this.value), result: null }));
    model.set(this.name, this.value);
  }
  toString = () => `Set(${this.name}=${this.value}${this.viaOther ? ", other" : ""})`;
}

class BumpCommand implements fc.AsyncCommand<Model, Real> {
  constructor(readonly name: string) {}
  check = () => true;
  async run(model: Model, real: Real) {
    const result = await real.journal.update((doc) => {
      const found = doc.counters.find((c) => c.name === this.name);
      if (!found) return { result: null };
      return { next: set(doc, this.name, found.value + 1), result: found.value + 1 };
    });
    const expected = model.has(this.name) ? model.get(this.name)! + 1 : null;
    expect(result).toBe(expected);
    if (expected !== null) model.set(this.name, expected);
  }
  toString = () => `Bump(${this.name})`;
}

class DeleteCommand implements fc.AsyncCommand<Model, Real> {
  constructor(readonly name: string) {}
  check = () => true;
  async run(model: Model, real: Real) {
    const removed = await real.journal.update((doc) => {
      const counters = doc.counters.filter((c) => c.name !== this.name);
      return counters.length === doc.counters.length
        ? { result: false }
        : { next: { ...doc, counters }, result: true };
    });
    expect(removed).toBe(model.delete(this.name));
  }
  toString = () => `Delete(${this.name})`;
}

class ReadCommand implements fc.AsyncCommand<Model, Real> {
  constructor(readonly viaOther: boolean) {}
  check = () => true;
  async run(model: Model, real: Real) {
    const doc = await (this.viaOther ? real.other : real.journal).read();
    expect(doc.counters.map((c) => [c.name, c.value])).toEqual([...model.entries()]);
  }
  toString = () => `Read(${this.viaOther ? "other" : "journal"})`;
}

class ReopenCommand implements fc.AsyncCommand<Model, Real> {
  check = () => true;
  async run(_model: Model, real: Real) {
    real.journal = open(real.file);
  }
  toString = () => "Reopen";
}

/** A buggy caller: writing a duplicate name is refused and changes nothing. */
class DuplicateCommand implements fc.AsyncCommand<Model, Real> {
  check = (model: Readonly<Model>) => model.size > 0;
  async run(_model: Model, real: Real) {
    const error = await real.journal
      .update((doc) => ({ next: { ...doc, counters: [...doc.counters, doc.counters[0]!] }, result: null }))
      .then(
        () => null,
        (caught: unknown) => caught,
      );
    expect(isJsonJournalError(error) && error.code).toBe("INVALID_NEXT_DOCUMENT");
  }
  toString = () => "Duplicate";
}

/** A fn that mutates its copy, then throws: nothing is written. */
class ThrowCommand implements fc.AsyncCommand<Model, Real> {
  check = () => true;
  async run(_model: Model, real: Real) {
    const boom = new Error("boom");
    await expect(
      real.journal.update((doc) => {
        doc.counters.push({ name: "zz", value: 0 });
        throw boom;
      }),
    ).rejects.toBe(boom);
  }
  toString = () => "Throw";
}

describe("model-based: random updates, reads and reopenings agree with a Map", () => {
  it("two journals on one file always agree with the model", async () => {
    let runs = 0;
    const commands = [
      fc.tuple(name, value, fc.boolean()).map(([n, v, other]) => new SetCommand(n, v, other)),
      name.map((n) => new BumpCommand(n)),
      name.map((n) => new DeleteCommand(n)),
      fc.boolean().map((other) => new ReadCommand(other)),
      fc.constant(new ReopenCommand()),
      fc.constant(new DuplicateCommand()),
      fc.constant(new ThrowCommand()),
    ];
    await fc.assert(
      fc.asyncProperty(fc.commands(commands, { maxCommands: 30 }), async (cmds) => {
        const dir = makeTempDir();
        try {
          const file = join(dir, "counters.json");
          const model: Model = new Map();
          await fc.asyncModelRun(
            () => ({ model, real: { file, journal: open(file), other: open(file) } }),
            cmds,
          );
          runs += 1;
          // And a fresh reader (a restarted process) finds exactly the model on disk.
          const final = await open(file).read();
          expect(final.counters.map((c) => [c.name, c.value])).toEqual([...model.entries()]);
        } finally {
          removeDir(dir);
        }
      }),
      { numRuns: 40 },
    );
    expect(runs).toBe(40);
  });
});
