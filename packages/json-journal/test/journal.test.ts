import { spawnSync } from "node:child_process";
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { dirname, join } from "node:path";
import { acquireLock, type FileOps, failNthCall, isLockError, nodeFileOps } from "@drydock/file-lock";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import {
  isJsonJournalError,
  isNotDamaged,
  MAX_NESTING_DEPTH,
  NEWER_FORMAT,
  openJsonJournal,
  TRANSIENTLY_UNREADABLE,
} from "../src/index.js";
import { deadPid, makeTempDir, removeDir, tempsIn } from "./helpers.js";

const DocSchema = z.object({
  version: z.literal(1),
  items: z.array(z.object({ name: z.string().min(1), value: z.number().int() })),
});
type Doc = z.infer<typeof DocSchema>;

class StateError extends Error {
  constructor(
    readonly detail: string,
    options?: { cause?: unknown },
  ) {
    super(`Test state is ${detail}.`, options);
  }
}

function uniqueNames(doc: Doc): string | null {
  return new Set(doc.items.map((item) => item.name)).size === doc.items.length ? null : "duplicate names";
}

let dir: string;
let file: string;
beforeEach(() => {
  dir = makeTempDir();
  file = join(dir, "things.json");
});
afterEach(() => {
  removeDir(dir);
});

function open(extra?: { fs?: FileOps; now?: () => number; waitMs?: number }) {
  return openJsonJournal<Doc>({
    file,
    schema: DocSchema,
    empty: { version: 1, items: [] },
    check: uniqueNames,
    stateError: (detail, cause) => new StateError(detail, { cause }),
    lock: { waitMs: extra?.waitMs ?? 5_000 },
    ...(extra?.fs ? { fs: extra.fs } : {}),
    ...(extra?.now ? { now: extra.now } : {}),
  });
}

const serialize = (doc: Doc) => `${JSON.stringify(doc, null, 2)}\n`;

describe("openJsonJournal basics", () => {
  it("refuses a symlink at the document's path (unreadable): never read through, never replaced", async () => {
    const target = join(dir, "elsewhere.json");
    writeFileSync(target, serialize({ version: 1, items: [{ name: "a", value: 1 }] }));
    symlinkSync(target, file);
    const journal = open();
    for (const call of [
      () => journal.read(),
      () => journal.update(() => ({ next: { version: 1, items: [] }, result: 1 })),
    ]) {
      const error = await call().then(
        () => null,
        (thrown: unknown) => thrown,
      );
      expect(error).toBeInstanceOf(StateError);
      expect((error as StateError).detail).toBe("unreadable");
    }
    expect(lstatSync(file).isSymbolicLink()).toBe(true);
    expect(JSON.parse(readFileSync(target, "utf8")).items).toHaveLength(1);
  });

  it("reads a missing file as the empty document and creates no document", async () => {
    const journal = openJsonJournal<Doc>({
      file: join(dir, "nested", "deeper", "things.json"),
      schema: DocSchema,
      empty: { version: 1, items: [] },
      stateError: (detail) => new StateError(detail),
    });
    expect(await journal.read()).toEqual({ version: 1, items: [] });
    expect(readdirSync(join(dir, "nested", "deeper"))).toEqual([]);
    expect(statSync(join(dir, "nested")).mode & 0o777).toBe(0o700);
    expect(statSync(join(dir, "nested", "deeper")).mode & 0o777).toBe(0o700);
  });

  it("update writes exactly JSON.stringify(next, null, 2) + newline with mode 0600, then releases the lock", async () => {
    const journal = open();
    const result = await journal.update((doc) => ({
      next: { ...doc, items: [...doc.items, { name: "a", value: 1 }] },
      result: "added",
    }));
    expect(result).toBe("added");
    const expected: Doc = { version: 1, items: [{ name: "a", value: 1 }] };
    expect(readFileSync(file, "utf8")).toBe(serialize(expected));
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(readdirSync(dir)).toEqual(["things.json"]);
    expect(await journal.read()).toEqual(expected);
  });

  it("update without next writes nothing and returns the result", async () => {
    const journal = open();
    expect(await journal.update((doc) => ({ result: doc.items.length }))).toBe(0);
    expect(existsSync(file)).toBe(false);
    await journal.update(() => ({ next: { version: 1, items: [{ name: "x", value: 2 }] }, result: null }));
    const before = statSync(file, { bigint: true });
    expect(await journal.update(() => ({ next: undefined, result: "kept" }))).toBe("kept");
    const after = statSync(file, { bigint: true });
    expect([after.ino, after.mtimeNs, after.ctimeNs]).toEqual([before.ino, before.mtimeNs, before.ctimeNs]);
  });

  it("concurrent updates from one process never lose an increment", async () => {
    const journal = open();
    const other = open();
    const bump = (j: typeof journal) =>
      j.update((doc) => {
        const value = (doc.items[0]?.value ?? 0) + 1;
        return { next: { version: 1, items: [{ name: "n", value }] }, result: value };
      });
    const results = await Promise.all(Array.from({ length: 40 }, (_, i) => bump(i % 2 ? journal : other)));
    expect([...results].sort((a, b) => a - b)).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
    expect((await journal.read()).items[0]?.value).toBe(40);
  });

  it("lockFile defaults to the document's name with .json replaced by .lock", async () => {
    const journal = open();
    const seen = await journal.update(() => ({ result: existsSync(join(dir, "things.lock")) }));
    expect(seen).toBe(true);
    expect(existsSync(join(dir, "things.lock"))).toBe(false);
  });

  it("hands out private copies: mutating what read or fn received changes nothing", async () => {
    const journal = open({ now: () => Date.now() + 60_000 });
    await journal.update(() => ({ next: { version: 1, items: [{ name: "a", value: 1 }] }, result: null }));
    const first = await journal.read();
    first.items.push({ name: "b", value: 2 });
    await journal.update((doc) => {
      doc.items.length = 0;
      return { result: null };
    });
    expect(await journal.read()).toEqual({ version: 1, items: [{ name: "a", value: 1 }] });
  });

  it("sweeps its own document's temps of dead writers on first use, never promoting them", async () => {
    writeFileSync(file, serialize({ version: 1, items: [{ name: "kept", value: 1 }] }));
    const dead = deadPid();
    const stale = `.things.json.${dead}.0123456789abcdef.tmp`;
    const foreign = `.other.json.${dead}.0123456789abcdef.tmp`;
    const live = `.things.json.${process.ppid}.0123456789abcdef.tmp`;
    for (const name of [stale, foreign, live]) {
      writeFileSync(join(dir, name), serialize({ version: 1, items: [{ name: "partial", value: 2 }] }));
    }
    expect(await open().read()).toEqual({ version: 1, items: [{ name: "kept", value: 1 }] });
    expect(readdirSync(dir).sort()).toEqual([foreign, live, "things.json"].sort());
  });

  it("a value `empty` is cloned per call, so a caller cannot corrupt it", async () => {
    const journal = open();
    const doc = await journal.read();
    doc.items.push({ name: "leak", value: 1 });
    expect(await journal.read()).toEqual({ version: 1, items: [] });
  });
});

describe("damaged files are refused with the caller's stateError and left byte-identical", () => {
  const valid = serialize({
    version: 1,
    items: [
      { name: "a", value: 1 },
      { name: "b", value: 2 },
    ],
  });
  const cases: { name: string; bytes: Buffer; detail: string }[] = [
    { name: "corrupt JSON", bytes: Buffer.from('{"version": 1, "items": [}\n'), detail: "unreadable" },
    {
      name: "truncated JSON",
      bytes: Buffer.from(valid.slice(0, Math.floor(valid.length / 2))),
      detail: "unreadable",
    },
    { name: "empty file", bytes: Buffer.alloc(0), detail: "unreadable" },
    {
      name: "bytes that are not UTF-8",
      bytes: Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x7d]),
      detail: "unreadable",
    },
    {
      name: "an older version",
      bytes: Buffer.from(valid.replace('"version": 1', '"version": 0')),
      detail: "invalid",
    },
    {
      name: "a newer version (not damaged: upgrade, do not repair)",
      bytes: Buffer.from(valid.replace('"version": 1', '"version": 2')),
      detail:
        "in a newer format (version 2; this drydock reads version 1): upgrade this process, and leave the file as it is",
    },
    {
      name: "schema violation",
      bytes: Buffer.from(serialize({ version: 1, items: [{ name: "a", value: "one" }] } as unknown as Doc)),
      detail: "invalid",
    },
    { name: "a JSON array", bytes: Buffer.from("[]\n"), detail: "invalid" },
    {
      name: "check violation",
      bytes: Buffer.from(
        serialize({
          version: 1,
          items: [
            { name: "a", value: 1 },
            { name: "a", value: 2 },
          ],
        }),
      ),
      detail: "duplicate names",
    },
    // JSON.parse keeps the last copy of a repeated name: read that way, the next update would drop a row.
    {
      name: "a member name repeated at the top level",
      bytes: Buffer.from('{"version":1,"items":[{"name":"a","value":1}],"items":[]}\n'),
      detail: "invalid",
    },
    {
      name: "a member name repeated inside a row",
      bytes: Buffer.from(valid.replace('"value": 2', '"value": 2,\n      "value": 3')),
      detail: "invalid",
    },
    {
      name: "a member name repeated with escapes (\\u0069tems is items)",
      bytes: Buffer.from('{"version":1,"items":[{"name":"a","value":1}],"\\u0069tems":[]}'),
      detail: "invalid",
    },
  ];

  for (const testCase of cases) {
    it(`${testCase.name}: read, peek and update all refuse with "${testCase.detail}", nothing written`, async () => {
      writeFileSync(file, testCase.bytes, { mode: 0o600 });
      const before = statSync(file, { bigint: true });
      const journal = open();
      const peekError = await journal.peek().then(
        () => null,
        (error: unknown) => error,
      );
      expect(peekError).toBeInstanceOf(StateError);
      expect((peekError as StateError).detail).toBe(testCase.detail);
      const readError = await journal.read().then(
        () => null,
        (error: unknown) => error,
      );
      expect(readError).toBeInstanceOf(StateError);
      expect((readError as StateError).detail).toBe(testCase.detail);
      let fnCalled = false;
      const updateError = await journal
        .update(() => {
          fnCalled = true;
          return { next: { version: 1, items: [] }, result: null };
        })
        .then(
          () => null,
          (error: unknown) => error,
        );
      expect(updateError).toBeInstanceOf(StateError);
      expect((updateError as StateError).detail).toBe(testCase.detail);
      expect(fnCalled).toBe(false);
      expect(readFileSync(file).equals(testCase.bytes)).toBe(true);
      const after = statSync(file, { bigint: true });
      expect([after.ino, after.mtimeNs]).toEqual([before.ino, before.mtimeNs]);
      expect(readdirSync(dir)).toEqual(["things.json"]);
    });
  }

  it("a repeated member name is refused with a cause that names it; other layouts and escapes still read", async () => {
    writeFileSync(file, '{\n  "version": 1,\n  "items": [{ "name": "a", "value": 1 }],\n  "items": []\n}\n');
    const error = (await open()
      .read()
      .catch((caught: unknown) => caught)) as StateError;
    expect(error).toBeInstanceOf(StateError);
    expect(error.detail).toBe("invalid");
    expect(String((error.cause as Error).message)).toMatch(/repeats the member name "items" .*\(line 4\)/);
    // Not the journal's own layout, but every name once: read as usual.
    const compact = '{"version":1,"\\u0069tems":[{"name":"a","value":1},{"name":"b","value":2}]}';
    writeFileSync(file, compact);
    expect((await open().read()).items).toHaveLength(2);
  });

  it("a document nested deeper than MAX_NESTING_DEPTH is invalid and left as it is; one at the limit is read and updated", async () => {
    const nested = (levels: number) =>
      `{"version": 1, "items": [], "deep": ${"[".repeat(levels - 1)}${"]".repeat(levels - 1)}}`;
    writeFileSync(file, nested(MAX_NESTING_DEPTH + 1));
    const error = (await open()
      .update(() => ({ next: { version: 1, items: [] }, result: 1 }))
      .catch((caught: unknown) => caught)) as StateError;
    expect(error.detail).toBe("invalid");
    expect(String((error.cause as Error).message)).toMatch(
      /nests values more than 128 levels deep \(line 1\)/,
    );
    expect(readFileSync(file, "utf8")).toBe(nested(MAX_NESTING_DEPTH + 1));
    // 5,000 levels: JSON.parse reads it, but it could never be written back (the stack overflows).
    writeFileSync(file, nested(5_000));
    expect(
      (
        (await open()
          .read()
          .catch((caught: unknown) => caught)) as StateError
      ).detail,
    ).toBe("invalid");
    writeFileSync(file, nested(MAX_NESTING_DEPTH));
    expect(await open().read()).toEqual({ version: 1, items: [] });
    await open().update(() => ({ next: { version: 1, items: [{ name: "a", value: 1 }] }, result: 1 }));
    expect(JSON.parse(readFileSync(file, "utf8")).items).toHaveLength(1);
  });

  it("a document in a newer version is 'in a newer format' naming both versions, not damaged, never overwritten", async () => {
    const newer = `${JSON.stringify({ version: 2, items: [], shards: ["a"] }, null, 2)}\n`;
    writeFileSync(file, newer);
    const journal = open();
    const calls: (() => Promise<unknown>)[] = [
      () => journal.read(),
      () => journal.peek(),
      () => journal.update(() => ({ next: { version: 1, items: [] }, result: 1 })),
    ];
    for (const call of calls) {
      const error = (await call().catch((caught: unknown) => caught)) as StateError;
      expect(error).toBeInstanceOf(StateError);
      expect(error.detail.startsWith(NEWER_FORMAT), error.detail).toBe(true);
      expect(error.detail).toMatch(/version 2; this drydock reads version 1\): upgrade this process/);
      expect(isNotDamaged(error.detail)).toBe(true);
    }
    expect(readFileSync(file, "utf8")).toBe(newer);
    // An older version, or a version that is not a number, is just invalid: a damaged file, not a newer one.
    for (const version of [0, "2", 1.5]) {
      writeFileSync(file, JSON.stringify({ version, items: [] }));
      const error = (await open()
        .read()
        .catch((caught: unknown) => caught)) as StateError;
      expect(error.detail).toBe("invalid");
      expect(isNotDamaged(error.detail)).toBe(false);
    }
  });

  it("a directory or a FIFO at the document's path is unreadable and left in place", async () => {
    mkdirSync(file);
    await expect(open().read()).rejects.toMatchObject({ detail: "unreadable" });
    removeDir(file);
    expect(spawnSync("mkfifo", [file]).status).toBe(0);
    await expect(
      open().update(() => ({ next: { version: 1, items: [] }, result: null })),
    ).rejects.toMatchObject({
      detail: "unreadable",
    });
    expect(statSync(file).isFIFO()).toBe(true);
  });

  it("a file larger than maxBytes is refused without being read", async () => {
    writeFileSync(file, serialize({ version: 1, items: [] }));
    const journal = openJsonJournal<Doc>({
      file,
      schema: DocSchema,
      empty: { version: 1, items: [] },
      stateError: (detail, cause) => new StateError(detail, { cause }),
      maxBytes: 8,
    });
    await expect(journal.read()).rejects.toMatchObject({ detail: "unreadable" });
  });
});

describe("a healthy document this process cannot read just now", () => {
  it("EMFILE & co. on open, fstat or read: a detail naming the errno and saying retry, never plain unreadable", async () => {
    const stored = serialize({ version: 1, items: [{ name: "a", value: 1 }] });
    writeFileSync(file, stored);
    for (const op of ["openSync", "fstatSync", "readFileSync"] as const) {
      for (const code of ["EMFILE", "ENFILE", "ENOMEM", "EAGAIN", "EINTR"]) {
        const faulty = failNthCall(nodeFileOps, {
          n: 1,
          code,
          count: (name, args) => name === op && (op !== "openSync" || String(args[0]) === file),
        });
        const error = await open({ fs: faulty.ops })
          .read()
          .then(
            () => null,
            (failure: unknown) => failure,
          );
        expect(faulty.fired(), `${op} ${code}`).toBe(true);
        expect(error).toBeInstanceOf(StateError);
        const detail = (error as StateError).detail;
        expect(detail.startsWith(TRANSIENTLY_UNREADABLE), detail).toBe(true);
        expect(detail).toContain(code);
        expect(detail).toMatch(/retry/);
        expect((error as StateError).message).toContain(code);
        expect(readFileSync(file, "utf8")).toBe(stored);
      }
    }
    // EIO is the disk: "unreadable", as before.
    const eio = failNthCall(nodeFileOps, {
      n: 1,
      code: "EIO",
      count: (name, args) => name === "openSync" && String(args[0]) === file,
    });
    await expect(open({ fs: eio.ops }).read()).rejects.toMatchObject({ detail: "unreadable" });
    expect((await open().read()).items).toHaveLength(1);
  });
});

describe("a caller's bug never reaches the disk", () => {
  const stored: Doc = { version: 1, items: [{ name: "a", value: 1 }] };

  it("a fn that throws writes nothing and its own error propagates", async () => {
    writeFileSync(file, serialize(stored));
    const before = readFileSync(file);
    const boom = new Error("boom");
    const journal = open();
    await expect(
      journal.update((doc) => {
        doc.items.push({ name: "b", value: 2 });
        throw boom;
      }),
    ).rejects.toBe(boom);
    expect(readFileSync(file).equals(before)).toBe(true);
    expect(await journal.read()).toEqual(stored);
    expect(readdirSync(dir)).toEqual(["things.json"]);
  });

  const badNexts: { name: string; next: unknown; detail: RegExp }[] = [
    { name: "fails the schema", next: { version: 1, items: [{ name: "", value: 1 }] }, detail: /invalid/ },
    {
      name: "fails the check",
      next: {
        version: 1,
        items: [
          { name: "a", value: 1 },
          { name: "a", value: 1 },
        ],
      },
      detail: /duplicate names/,
    },
    {
      name: "only fails once stored as JSON (NaN becomes null)",
      next: { version: 1, items: [{ name: "a", value: Number.NaN }] },
      detail: /invalid/,
    },
    {
      name: "cannot be stored as JSON (BigInt)",
      next: { version: 1, items: [{ name: "a", value: 1n }] },
      detail: /JSON/,
    },
  ];
  for (const bad of badNexts) {
    it(`a next that ${bad.name} writes nothing and fails with INVALID_NEXT_DOCUMENT`, async () => {
      writeFileSync(file, serialize(stored));
      const before = readFileSync(file);
      const journal = open();
      const error = await journal
        .update(() => ({ next: bad.next as Doc, result: null }))
        .then(
          () => null,
          (caught: unknown) => caught,
        );
      expect(isJsonJournalError(error)).toBe(true);
      expect(error).toMatchObject({ code: "INVALID_NEXT_DOCUMENT", status: 500 });
      expect((error as Error).message).toMatch(bad.detail);
      expect(readFileSync(file).equals(before)).toBe(true);
      expect(readdirSync(dir)).toEqual(["things.json"]);
      expect(await journal.read()).toEqual(stored);
    });
  }

  it("a next larger than maxBytes is refused before anything is written, so the journal can always read its file", async () => {
    const small = () =>
      openJsonJournal<Doc>({
        file,
        schema: DocSchema,
        empty: { version: 1, items: [] },
        stateError: (detail, cause) => new StateError(detail, { cause }),
        maxBytes: 200,
      });
    writeFileSync(file, serialize(stored));
    const before = readFileSync(file);
    const big: Doc = {
      version: 1,
      items: Array.from({ length: 20 }, (_, i) => ({ name: `item-${i}`, value: i })),
    };
    const error = await small()
      .update(() => ({ next: big, result: "saved" }))
      .catch((caught: unknown) => caught);
    expect(isJsonJournalError(error)).toBe(true);
    expect(error).toMatchObject({ code: "INVALID_NEXT_DOCUMENT", status: 500 });
    expect((error as Error).message).toMatch(/larger than maxBytes \(200\).*Nothing was written/);
    expect(readFileSync(file).equals(before)).toBe(true);
    expect(readdirSync(dir)).toEqual(["things.json"]);
    expect(await small().read()).toEqual(stored);
    // Exactly maxBytes is still allowed (and reads back).
    const exact = openJsonJournal<Doc>({
      file,
      schema: DocSchema,
      empty: { version: 1, items: [] },
      stateError: (detail, cause) => new StateError(detail, { cause }),
      maxBytes: Buffer.byteLength(serialize(big)),
    });
    await exact.update(() => ({ next: big, result: null }));
    expect(await exact.read()).toEqual(big);
  });

  it("an async fn is refused as INVALID_ARGUMENT and writes nothing", async () => {
    const journal = open();
    const asyncFn = (async () => ({ next: stored, result: null })) as unknown as (doc: Doc) => {
      next?: Doc;
      result: null;
    };
    await expect(journal.update(asyncFn)).rejects.toMatchObject({ code: "INVALID_ARGUMENT" });
    expect(existsSync(file)).toBe(false);
  });

  it("bad options are refused at open with INVALID_ARGUMENT", () => {
    const base = {
      file,
      schema: DocSchema,
      empty: { version: 1 as const, items: [] },
      stateError: (detail: string) => new StateError(detail),
    };
    expect(() => openJsonJournal({ ...base, file: "" })).toThrow(
      expect.objectContaining({ code: "INVALID_ARGUMENT" }),
    );
    expect(() => openJsonJournal({ ...base, lockFile: file })).toThrow(
      expect.objectContaining({ code: "INVALID_ARGUMENT" }),
    );
    expect(() => openJsonJournal({ ...base, schema: {} as typeof DocSchema })).toThrow(
      expect.objectContaining({ code: "INVALID_ARGUMENT" }),
    );
  });
});

describe("peek: validated, lock-free reads", () => {
  it("answers while a live process holds the lock (read would wait), and takes no lock itself", async () => {
    const journal = open({ waitMs: 60 });
    await journal.update(() => ({ next: { version: 1, items: [{ name: "a", value: 1 }] }, result: null }));
    const lockFile = join(dir, "things.lock");
    const handle = await acquireLock(lockFile);
    try {
      const lockBytes = readFileSync(lockFile);
      expect(await journal.peek()).toEqual({ version: 1, items: [{ name: "a", value: 1 }] });
      // A fresh journal (no cache) reads the file itself, still without the lock.
      expect(await open({ waitMs: 60 }).peek()).toEqual({ version: 1, items: [{ name: "a", value: 1 }] });
      expect(readFileSync(lockFile).equals(lockBytes)).toBe(true);
      await expect(journal.read()).rejects.toMatchObject({ detail: "locked by another drydock process" });
    } finally {
      handle.release();
    }
  });

  it("a missing file is the empty document and nothing is created (not even the directory)", async () => {
    const nested = join(dir, "not-yet", "things.json");
    const journal = openJsonJournal<Doc>({
      file: nested,
      schema: DocSchema,
      empty: { version: 1, items: [] },
      stateError: (detail, cause) => new StateError(detail, { cause }),
    });
    expect(await journal.peek()).toEqual({ version: 1, items: [] });
    expect(existsSync(join(dir, "not-yet"))).toBe(false);
  });

  it("hands out one frozen document while the file is unchanged, and sees another journal's writes at once", async () => {
    // A clock far ahead makes every file "old enough", so the unchanged-file cache is in play.
    const viewer = open({ now: () => Date.now() + 60_000 });
    const writer = open();
    let previous: unknown = null;
    for (let value = 0; value < 20; value++) {
      await writer.update(() => ({ next: { version: 1, items: [{ name: "a", value }] }, result: null }));
      const seen = await viewer.peek();
      expect(seen.items[0]?.value).toBe(value);
      expect(seen).not.toBe(previous);
      // Unchanged file: the very same object (memoizable by identity), frozen all the way down.
      expect(await viewer.peek()).toBe(seen);
      expect(Object.isFrozen(seen) && Object.isFrozen(seen.items) && Object.isFrozen(seen.items[0])).toBe(
        true,
      );
      expect(() => (seen.items as Doc["items"]).push({ name: "mutated", value: -1 })).toThrow(TypeError);
      // read and update still get private, mutable copies.
      const copy = await viewer.read();
      copy.items.push({ name: "b", value: 2 });
      expect((await viewer.peek()).items).toHaveLength(1);
      previous = seen;
    }
  });

  it("never freezes what the caller's `empty` factory returns", async () => {
    const shared = { version: 1 as const, items: [] as Doc["items"] };
    const journal = openJsonJournal<Doc>({
      file,
      schema: DocSchema,
      empty: () => shared,
      stateError: (detail, cause) => new StateError(detail, { cause }),
    });
    expect(Object.isFrozen(await journal.peek())).toBe(true);
    expect(Object.isFrozen(shared) || Object.isFrozen(shared.items)).toBe(false);
  });
});

describe("lock failures become the caller's stateError, with the LockError as cause", () => {
  it("a lock held by a live process times out as 'locked by another drydock process', nothing written", async () => {
    const handle = await acquireLock(join(dir, "things.lock"));
    try {
      const error = await open({ waitMs: 60 })
        .update(() => ({ next: { version: 1, items: [] }, result: null }))
        .then(
          () => null,
          (caught: unknown) => caught,
        );
      expect(error).toBeInstanceOf(StateError);
      expect((error as StateError).detail).toBe("locked by another drydock process");
      const cause = (error as StateError).cause;
      expect(isLockError(cause) && cause.code).toBe("LOCK_TIMEOUT");
      expect(existsSync(file)).toBe(false);
    } finally {
      handle.release();
    }
  });

  it("a corrupt lock is refused as 'lock is invalid' and neither file is touched", async () => {
    writeFileSync(file, serialize({ version: 1, items: [] }));
    writeFileSync(join(dir, "things.lock"), "garbage\n");
    const error = await open()
      .update(() => ({ next: { version: 1, items: [{ name: "z", value: 0 }] }, result: null }))
      .then(
        () => null,
        (caught: unknown) => caught,
      );
    expect((error as StateError).detail).toBe("lock is invalid");
    expect(readFileSync(join(dir, "things.lock"), "utf8")).toBe("garbage\n");
    expect(readFileSync(file, "utf8")).toBe(serialize({ version: 1, items: [] }));
  });

  it("a release that fails after a save says the change was saved; after a read it does not", async () => {
    const failOnce = new Set<string>();
    const lockFs: FileOps = {
      ...nodeFileOps,
      unlinkSync: (path) => {
        if (failOnce.delete(String(path))) throw Object.assign(new Error("EIO: injected"), { code: "EIO" });
        return nodeFileOps.unlinkSync(path);
      },
    };
    const journalOn = (name: string) =>
      openJsonJournal<Doc>({
        file: join(dir, `${name}.json`),
        schema: DocSchema,
        empty: { version: 1, items: [] },
        stateError: (detail, cause) => new StateError(detail, { cause }),
        lock: { fs: lockFs, waitMs: 50 },
      });
    const written = journalOn("written");
    failOnce.add(join(dir, "written.lock"));
    const afterSave = await written
      .update(() => ({ next: { version: 1, items: [{ name: "a", value: 1 }] }, result: null }))
      .then(
        () => null,
        (caught: unknown) => caught as StateError,
      );
    expect(afterSave?.detail).toMatch(/\(the change itself was saved\)$/);
    expect(isLockError(afterSave?.cause) && afterSave.cause.code).toBe("LOCK_IO");
    expect(JSON.parse(readFileSync(join(dir, "written.json"), "utf8"))).toEqual({
      version: 1,
      items: [{ name: "a", value: 1 }],
    });

    const onlyRead = journalOn("read");
    failOnce.add(join(dir, "read.lock"));
    const afterRead = await onlyRead.read().then(
      () => null,
      (caught: unknown) => caught as StateError,
    );
    expect(afterRead).toBeInstanceOf(StateError);
    expect(afterRead?.detail).not.toContain("saved");

    // Two calls on one journal: A saves while B waits for the lock; B saves nothing and its release fails.
    // Only A's own save counts for A, none for B.
    const shared = journalOn("shared");
    const a = shared.update(() => ({ next: { version: 1, items: [{ name: "a", value: 1 }] }, result: "A" }));
    const b = shared.update(() => ({ result: "B" }));
    await a;
    failOnce.add(join(dir, "shared.lock"));
    const bError = await b.then(
      () => null,
      (caught: unknown) => caught as StateError,
    );
    expect(bError).toBeInstanceOf(StateError);
    expect(bError?.detail).not.toContain("saved");
  });

  it("a lock taken away while fn runs is 'lock ownership changed unexpectedly', not a raw LockError; nothing written", async () => {
    const lockFile = join(dir, "things.lock");
    const thief = `${JSON.stringify({ version: 1, pid: 1, token: "0b8f7c0e-5d0e-4c59-9a57-3c0f2d0b1a11", createdAt: 1 })}\n`;
    const error = await open()
      .update((doc) => {
        // Someone replaces the lock while fn runs (a reaper that judged us dead, an operator).
        writeFileSync(lockFile, thief);
        return { next: { ...doc, items: [{ name: "x", value: 1 }] }, result: null };
      })
      .catch((caught: unknown) => caught);
    expect(isLockError(error)).toBe(false);
    expect(error).toBeInstanceOf(StateError);
    expect((error as StateError).detail).toBe("lock ownership changed unexpectedly");
    const cause = (error as StateError).cause;
    expect(isLockError(cause) && cause.code).toBe("LOCK_OWNERSHIP_LOST");
    expect(existsSync(file)).toBe(false);
    expect(readFileSync(lockFile, "utf8")).toBe(thief);
  });

  it("an aborted wait propagates as the LockError itself", async () => {
    const handle = await acquireLock(join(dir, "things.lock"));
    try {
      const controller = new AbortController();
      controller.abort();
      const journal = openJsonJournal<Doc>({
        file,
        schema: DocSchema,
        empty: { version: 1, items: [] },
        stateError: (detail) => new StateError(detail),
        lock: { signal: controller.signal },
      });
      await expect(journal.read()).rejects.toMatchObject({ code: "LOCK_ABORTED" });
    } finally {
      handle.release();
    }
  });
});

describe("directories created by a call are flushed into their parents before anything is saved", () => {
  /** Records fsyncs (by path, the document's temp as "temp") and renames; optionally fails one fsync. */
  function recording(failFsyncOf?: string): { ops: FileOps; log: string[] } {
    const log: string[] = [];
    let failed = false;
    const ops: FileOps = {
      ...nodeFileOps,
      fsyncSync: ((fd: number) => {
        const path = readlinkSync(`/proc/self/fd/${fd}`);
        log.push(`fsync ${path.endsWith(".tmp") ? "temp" : path}`);
        if (path === failFsyncOf && !failed) {
          failed = true;
          throw Object.assign(new Error("EIO: injected"), { code: "EIO" });
        }
        nodeFileOps.fsyncSync(fd);
      }) as FileOps["fsyncSync"],
      renameSync: ((from: string, to: string) => {
        log.push("rename");
        nodeFileOps.renameSync(from, to);
      }) as FileOps["renameSync"],
    };
    return { ops, log };
  }

  const openAt = (path: string, ops: FileOps, durable = true) =>
    openJsonJournal<Doc>({
      file: path,
      schema: DocSchema,
      empty: { version: 1, items: [] },
      stateError: (detail, cause) => new StateError(detail, { cause }),
      fs: ops,
      durable,
    });
  const doc: Doc = { version: 1, items: [{ name: "first", value: 1 }] };

  it("flushes the parent of each new directory, deepest first, before the first record is written", async () => {
    const real = realpathSync(dir);
    const nested = join(real, "a", "b", "things.json");
    const { ops, log } = recording();
    const journal = openAt(nested, ops);
    await journal.update(() => ({ next: doc, result: null }));
    // Every directory above the journal's, up to the root, once per journal: the two just made, and those
    // that existed (which may never have been flushed: a `mkdir -p`, a process killed before its flush).
    const above: string[] = [];
    for (let child = join(real, "a", "b"); dirname(child) !== child; child = dirname(child)) {
      if (statSync(dirname(child)).dev !== statSync(real).dev) break;
      above.push(`fsync ${dirname(child)}`);
    }
    expect(above.slice(0, 2)).toEqual([`fsync ${join(real, "a")}`, `fsync ${real}`]);
    expect(log).toEqual([...above, "fsync temp", "rename", `fsync ${join(real, "a", "b")}`]);
    // Later calls flush nothing more than the write; another journal flushes the path above once too.
    log.length = 0;
    await journal.update(() => ({ next: doc, result: null }));
    expect(log).toEqual(["fsync temp", "rename", `fsync ${join(real, "a", "b")}`]);
    log.length = 0;
    await openAt(nested, ops).update(() => ({ next: doc, result: null }));
    expect(log).toEqual([...above, "fsync temp", "rename", `fsync ${join(real, "a", "b")}`]);
    // Not durable: no fsync at all.
    log.length = 0;
    await openAt(join(real, "c", "things.json"), ops, false).update(() => ({ next: doc, result: null }));
    expect(log).toEqual(["rename"]);
  });

  it("a failed flush is 'unavailable', writes nothing, and is retried by the next call", async () => {
    const real = realpathSync(dir);
    const nested = join(real, "a", "things.json");
    const { ops, log } = recording(real);
    const journal = openAt(nested, ops);
    const error = await journal
      .update(() => ({ next: doc, result: null }))
      .catch((caught: unknown) => caught);
    expect((error as StateError).detail).toBe("unavailable");
    expect(existsSync(nested)).toBe(false);
    log.length = 0;
    await journal.update(() => ({ next: doc, result: null }));
    expect(log[0]).toBe(`fsync ${real}`);
    expect(JSON.parse(readFileSync(nested, "utf8"))).toEqual(doc);
  });
});

describe("unchanged-file cache", () => {
  function counting(): { ops: FileOps; reads: () => number } {
    let reads = 0;
    const ops: FileOps = {
      ...nodeFileOps,
      readFileSync: ((...args: Parameters<FileOps["readFileSync"]>) => {
        reads += 1;
        return (nodeFileOps.readFileSync as (...a: unknown[]) => unknown)(...args);
      }) as FileOps["readFileSync"],
    };
    return { ops, reads: () => reads };
  }

  /** Rewrites `path` from a separate process: in place (same inode) or by rename (new inode). */
  function rewriteFromAnotherProcess(path: string, text: string, how: "in-place" | "rename"): void {
    const script =
      how === "in-place"
        ? "require('fs').writeFileSync(process.argv[1], process.argv[2])"
        : "const fs=require('fs');fs.writeFileSync(process.argv[1]+'.x',process.argv[2]);fs.renameSync(process.argv[1]+'.x',process.argv[1])";
    const child = spawnSync(process.execPath, ["-e", script, path, text]);
    expect(child.status).toBe(0);
  }

  it("reuses a validated document while the file is provably unchanged", async () => {
    writeFileSync(file, serialize({ version: 1, items: [{ name: "a", value: 1 }] }));
    const { ops, reads } = counting();
    // An injected clock far ahead makes the file "old enough" to trust its timestamps at once.
    const journal = open({ fs: ops, now: () => Date.now() + 60_000 });
    await journal.read();
    await journal.read();
    await journal.update(() => ({ result: null }));
    expect(reads()).toBe(1);
  });

  it("skips the parse and the schema when the bytes equal what it last validated, even right after its own write", async () => {
    let validations = 0;
    const counted = DocSchema.transform((doc) => {
      validations += 1;
      return doc;
    });
    const journal = openJsonJournal<Doc>({
      file,
      schema: counted,
      empty: { version: 1, items: [] },
      stateError: (detail, cause) => new StateError(detail, { cause }),
    });
    await journal.update((doc) => ({ next: { ...doc, items: [{ name: "a", value: 1 }] }, result: null }));
    const afterWrite = validations; // the write validated the stored text once
    expect((await journal.read()).items).toEqual([{ name: "a", value: 1 }]);
    await journal.update((doc) => ({ result: doc.items.length }));
    expect(validations).toBe(afterWrite);
    // Different bytes, written behind its back at the same size and instant: parsed and validated again.
    writeFileSync(file, serialize({ version: 1, items: [{ name: "b", value: 2 }] }));
    expect((await journal.read()).items).toEqual([{ name: "b", value: 2 }]);
    expect(validations).toBe(afterWrite + 1);
  });

  for (const how of ["in-place", "rename"] as const) {
    it(`sees another process's same-size rewrite (${how}) even when the cache is trusted`, async () => {
      const a = serialize({ version: 1, items: [{ name: "a", value: 1 }] });
      const b = serialize({ version: 1, items: [{ name: "b", value: 2 }] });
      expect(a.length).toBe(b.length);
      writeFileSync(file, a);
      const { ops, reads } = counting();
      const journal = open({ fs: ops, now: () => Date.now() + 60_000 });
      expect((await journal.read()).items[0]?.name).toBe("a");
      rewriteFromAnotherProcess(file, b, how);
      expect((await journal.read()).items[0]?.name).toBe("b");
      expect(reads()).toBe(2);
      // And the update that follows works on the new document.
      await journal.update((doc) => ({
        next: { ...doc, items: [...doc.items, { name: "c", value: 3 }] },
        result: null,
      }));
      expect(JSON.parse(readFileSync(file, "utf8")).items.map((item: { name: string }) => item.name)).toEqual(
        ["b", "c"],
      );
    });
  }

  it("does not trust a file changed within the racy window: an immediate same-size in-place rewrite is seen", async () => {
    // A file system with one-second timestamps (ext3, HFS+; Linux's coarse clock is the same story in
    // milliseconds): two rewrites within one second keep inode, size, mtime and ctime.
    const toSecond = (ns: bigint) => (ns / 1_000_000_000n) * 1_000_000_000n;
    const coarse = (stats: import("node:fs").BigIntStats) =>
      Object.assign(stats, { mtimeNs: toSecond(stats.mtimeNs), ctimeNs: toSecond(stats.ctimeNs) });
    const ops: FileOps = {
      ...nodeFileOps,
      statSync: ((path: string, options: object) => {
        const stats = nodeFileOps.statSync(path, options as { bigint: true });
        return stats && coarse(stats);
      }) as FileOps["statSync"],
      fstatSync: ((fd: number, options: object) =>
        coarse(nodeFileOps.fstatSync(fd, options as { bigint: true }))) as FileOps["fstatSync"],
    };
    const journal = open({ fs: ops });
    for (let round = 0; round < 20; round++) {
      const a = serialize({ version: 1, items: [{ name: "a", value: round }] });
      const b = serialize({ version: 1, items: [{ name: "b", value: round }] });
      writeFileSync(file, a);
      expect((await journal.read()).items[0]?.name).toBe("a");
      writeFileSync(file, b);
      expect((await journal.read()).items[0]?.name).toBe("b");
    }
  });

  it("sees the file vanish", async () => {
    writeFileSync(file, serialize({ version: 1, items: [{ name: "a", value: 1 }] }));
    const journal = open({ now: () => Date.now() + 60_000 });
    expect((await journal.read()).items).toHaveLength(1);
    removeDir(file);
    expect(await journal.read()).toEqual({ version: 1, items: [] });
  });
});

describe("update under injected fs faults (fail call N = 1.. until success)", () => {
  it("every failure is typed, the document is the old or the new one exactly, no temp is left, the next call works", async () => {
    const oldDoc: Doc = { version: 1, items: [{ name: "old", value: 1 }] };
    const newDoc: Doc = {
      version: 1,
      items: [
        { name: "new", value: 2 },
        { name: "more", value: 3 },
      ],
    };
    let faults = 0;
    for (const code of ["EIO", "ENOSPC", "EEXIST", "EPERM", "EXDEV"]) {
      let completed = false;
      for (let n = 1; n <= 40 && !completed; n++) {
        writeFileSync(file, serialize(oldDoc), { mode: 0o600 });
        const faulty = failNthCall(nodeFileOps, { n, code });
        let failure: unknown = null;
        let result: unknown;
        try {
          result = await open({ fs: faulty.ops }).update(() => ({ next: newDoc, result: "saved" }));
        } catch (error) {
          failure = error;
        }
        const bytes = readFileSync(file, "utf8");
        if (failure) {
          faults += 1;
          expect(failure).toBeInstanceOf(StateError);
          const detail = (failure as StateError).detail;
          expect(["unavailable", "unreadable"]).toContain(detail);
          const cause = (failure as StateError).cause;
          if (
            detail === "unavailable" &&
            isJsonJournalError(cause) &&
            cause.code === "DIRECTORY_SYNC_FAILED"
          ) {
            expect(bytes).toBe(serialize(newDoc));
          } else {
            expect(bytes).toBe(serialize(oldDoc));
          }
        } else {
          expect(result).toBe("saved");
          expect(bytes).toBe(serialize(newDoc));
        }
        expect(tempsIn(dir)).toEqual([]);
        expect(existsSync(join(dir, "things.lock"))).toBe(false);
        // The next call, on a healthy fs, works and agrees with the bytes on disk.
        const next = open();
        expect(await next.read()).toEqual(JSON.parse(bytes));
        await next.update((doc) => ({
          next: { ...doc, items: [...doc.items, { name: `n${n}`, value: n }] },
          result: null,
        }));
        completed = !faulty.fired();
      }
      expect(completed).toBe(true);
    }
    expect(faults).toBeGreaterThanOrEqual(5 * 8);
  });
});
