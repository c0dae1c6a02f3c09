import { appendFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { MAX_NESTING_DEPTH, NEWER_FORMAT, newerFormatDetail } from "@drydock/json-journal";
import { journalVerdict } from "@drydock/test-kit";
import fc from "fast-check";
import { afterAll, describe, expect, it } from "vitest";
import {
  BOAT_ID,
  BOT_ID,
  CREATE_JOURNAL_FILE,
  CREATE_JOURNAL_LOCK_FILE,
  IDEMPOTENCY_KEY,
  isJournalStateError,
  openBoatCreateJournal,
} from "../src/index.js";
import { tempDataDir } from "./helpers.js";
import { seedSerialize, seedVerdict } from "./seed-oracle.js";

/** Figures for `pnpm reliability` (scripts/reliability.mjs); a no-op unless DRYDOCK_RELIABILITY_OUT is set. */
function reliability(metric: string, value: number): void {
  const out = process.env.DRYDOCK_RELIABILITY_OUT;
  if (out) appendFileSync(out, `${JSON.stringify({ area: "journals", metric, value })}\n`);
}
/** DRYDOCK_RELIABILITY_SCALE resizes the run for `pnpm reliability` (default 1: the ordinary suite). */
const RELIABILITY_SCALE = Number(process.env.DRYDOCK_RELIABILITY_SCALE ?? "1") || 1;

/**
 * Mutation fuzzing of the journal file: valid files (as the original system writes them) are damaged in
 * many ways. Whatever the bytes, a read either succeeds or fails with JournalStateError — never another
 * exception — its verdict matches the original system's own validation, and the bytes are unchanged.
 */

const record = fc
  .record({
    botId: fc.stringMatching(BOT_ID, { size: "small" }),
    requestBody: fc.string({ minLength: 1, maxLength: 40, unit: "binary" }),
    idempotencyKey: fc.stringMatching(IDEMPOTENCY_KEY),
    createdAt: fc.oneof(
      fc.integer({ min: 1, max: 2_000_000_000_000 }),
      fc.double({ min: 0.5, max: 1e13, noNaN: true }),
    ),
    boat: fc.option(fc.tuple(fc.stringMatching(BOAT_ID), fc.boolean()), { nil: undefined }),
    extra: fc.option(fc.jsonValue({ maxDepth: 2 }), { nil: undefined, freq: 6 }),
  })
  .map(({ boat, extra, ...row }) => ({
    ...row,
    ...(boat ? { boxId: boat[0] } : {}),
    ...(boat?.[1] ? { resolved: true } : {}),
    ...(extra !== undefined ? { note: extra } : {}),
  }));

const validRows = fc.uniqueArray(record, { selector: (r) => r.botId, maxLength: 6 });

const BAD_VALUES: unknown[] = [
  null,
  0,
  -1,
  "",
  true,
  [],
  {},
  "x".repeat(1_025),
  "bad id",
  "bx_ABCDEFGH",
  "bx_0000000o",
  "\u0000",
  "00000000-0000-4000-8000-00000000000G",
  "00000000-0000-1000-8000-000000000000",
  1e21,
  false,
  "true",
];
const FIELDS = ["botId", "requestBody", "idempotencyKey", "createdAt", "boxId", "resolved", "version"];

type Mutation =
  | { kind: "none" }
  | { kind: "truncate"; at: number }
  | { kind: "flip"; at: number; xor: number }
  | { kind: "insert"; at: number; byte: number }
  | { kind: "field"; row: number; field: string; value: unknown }
  | { kind: "delete-field"; row: number; field: string }
  | { kind: "duplicate"; row: number; change: "none" | "bot" | "key" }
  | { kind: "top"; value: unknown }
  | { kind: "text"; from: string; to: string }
  | { kind: "deep"; depth: number };

const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  { weight: 2, arbitrary: fc.constant({ kind: "none" as const }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant("truncate" as const), at: fc.nat() }) },
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant("flip" as const),
      at: fc.nat(),
      xor: fc.integer({ min: 1, max: 255 }),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant("insert" as const),
      at: fc.nat(),
      byte: fc.constantFrom(0x00, 0xff, 0xc3, 0x22, 0x5c, 0x0a, 0x7b, 0x5d),
    }),
  },
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant("field" as const),
      row: fc.nat(),
      field: fc.constantFrom(...FIELDS),
      value: fc.constantFrom(...BAD_VALUES),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant("delete-field" as const),
      row: fc.nat(),
      field: fc.constantFrom(...FIELDS),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant("duplicate" as const),
      row: fc.nat(),
      change: fc.constantFrom("none" as const, "bot" as const, "key" as const),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant("top" as const),
      value: fc.constantFrom<unknown>(
        null,
        [],
        "x",
        1,
        {},
        { version: 1 },
        { version: 2, requests: [] },
        { version: 1, requests: {} },
        { version: "1", requests: [] },
      ),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant("text" as const),
      from: fc.constantFrom('"version": 1', "[", "}", ": ", '"'),
      to: fc.constantFrom('"version": 1e400', "", "{", "\u0000", '"version": 1, "version": 2', "\ufeff"),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant("deep" as const), depth: fc.constantFrom(64, 5_000) }),
  },
);

function applyMutation(rows: Record<string, unknown>[], m: Mutation): Buffer {
  const text = seedSerialize(rows);
  const bytes = Buffer.from(text, "utf8");
  const pick = (i: number) => rows[i % Math.max(rows.length, 1)];
  switch (m.kind) {
    case "none":
      return bytes;
    case "truncate":
      return bytes.subarray(0, m.at % bytes.length);
    case "flip": {
      const copy = Buffer.from(bytes);
      const at = m.at % copy.length;
      copy[at] = copy[at]! ^ m.xor;
      return copy;
    }
    case "insert": {
      const at = m.at % (bytes.length + 1);
      return Buffer.concat([bytes.subarray(0, at), Buffer.from([m.byte]), bytes.subarray(at)]);
    }
    case "field": {
      if (m.field === "version") return Buffer.from(seedSerializeRaw({ version: m.value, requests: rows }));
      const row = pick(m.row);
      if (row) row[m.field] = m.value;
      return Buffer.from(seedSerialize(rows));
    }
    case "delete-field": {
      const row = pick(m.row);
      if (row) delete row[m.field];
      return Buffer.from(seedSerialize(rows));
    }
    case "duplicate": {
      const row = pick(m.row);
      if (row) {
        const copy = { ...row };
        if (m.change === "bot") copy.botId = `${String(row.botId).slice(0, 100)}-dup`;
        if (m.change === "key") copy.requestBody = `${String(row.requestBody)}+`;
        rows.push(copy);
      }
      return Buffer.from(seedSerialize(rows));
    }
    case "top":
      return Buffer.from(seedSerializeRaw(m.value));
    case "text":
      return Buffer.from(text.replace(m.from, m.to));
    case "deep": {
      const nested = `${"[".repeat(m.depth)}${"]".repeat(m.depth)}`;
      return Buffer.from(text.replace('"version": 1', `"deep": ${nested}, "version": 1`));
    }
  }
}

function seedSerializeRaw(value: unknown): string {
  return `${JSON.stringify(value, null, 2)}\n`;
}

/** The original system's verdict, with the rules drydock adds (test-kit's journalVerdict). */
function expectedVerdict(bytes: Buffer): string {
  return journalVerdict(bytes, seedVerdict, {
    maxDepth: MAX_NESTING_DEPTH,
    knownVersion: 1,
    newer: (version) => newerFormatDetail(version, 1),
  });
}

const dir = tempDataDir();
mkdirSync(dir.dataDir, { mode: 0o700 });
afterAll(() => dir.cleanup());

function manyRows(count: number): Record<string, unknown>[] {
  return Array.from({ length: count }, (_, i) => ({
    botId: `b${i}`,
    requestBody: "x",
    idempotencyKey: `00000000-0000-4000-8000-${i.toString(16).padStart(12, "0")}`,
    createdAt: 1,
  }));
}

describe("mutated create journal files", () => {
  it("accepts exactly MAX_REQUESTS rows and refuses one more, without rewriting either file", async () => {
    const file = join(dir.dataDir, CREATE_JOURNAL_FILE);
    const journal = openBoatCreateJournal({ dataDir: dir.dataDir });
    const full = seedSerialize(manyRows(4_096));
    writeFileSync(file, full);
    expect(await journal.boatCreateRecoverySnapshot()).toHaveLength(4_096);
    await expect(journal.beginBoatCreate("one-more", "body")).rejects.toMatchObject({ detail: "full" });
    expect(readFileSync(file, "utf8")).toBe(full);
    const oversize = seedSerialize(manyRows(4_097));
    writeFileSync(file, oversize);
    expect(seedVerdict(oversize)).toBe("invalid");
    await expect(journal.boatCreateRecoverySnapshot()).rejects.toMatchObject({ detail: "invalid" });
    expect(readFileSync(file, "utf8")).toBe(oversize);
  });

  it("are read as valid or refused with JournalStateError, agreeing with the original validation, bytes unchanged", async () => {
    const file = join(dir.dataDir, CREATE_JOURNAL_FILE);
    const journal = openBoatCreateJournal({ dataDir: dir.dataDir });
    const verdicts = { ok: 0, unreadable: 0, invalid: 0, newer: 0 };
    await fc.assert(
      fc.asyncProperty(validRows, mutation, fc.nat(24), async (rows, m, probe) => {
        const bytes = applyMutation(rows as Record<string, unknown>[], m);
        writeFileSync(file, bytes);
        // Bytes that are not UTF-8 are refused outright (the original would read them as U+FFFD and
        // rewrite them that way), and so is a member name repeated within one object (the original keeps
        // the last copy and would write the file back without the others), and so is a document nested
        // deeper than MAX_NESTING_DEPTH; a version above 1 is "in a newer format", where the original says
        // invalid; everything else must get the original system's verdict.
        const expected = expectedVerdict(bytes);
        let outcome: string;
        try {
          const snapshot = await journal.boatCreateRecoverySnapshot();
          outcome = "ok";
          expect(JSON.stringify(snapshot)).not.toMatch(/idempotencyKey|requestBody/);
        } catch (error) {
          if (!isJournalStateError(error) || error.code !== "BOAT_CREATE_PAUSED") throw error;
          outcome = error.detail;
        }
        expect(outcome).toBe(expected);
        expect(readFileSync(file).equals(bytes)).toBe(true);
        verdicts[(outcome.startsWith(NEWER_FORMAT) ? "newer" : outcome) as keyof typeof verdicts] += 1;

        if (outcome !== "ok" && probe === 0) {
          // A write is refused the same way, and still changes nothing.
          await expect(journal.beginBoatCreate("fuzz-bot", "body")).rejects.toMatchObject({
            detail: outcome,
          });
          expect(readFileSync(file).equals(bytes)).toBe(true);
        } else if (outcome === "ok" && probe === 0) {
          // A file the original accepts can be continued, and what drydock writes it still accepts.
          try {
            await journal.beginBoatCreate("fuzz-new-bot", "body");
            const written = readFileSync(file, "utf8");
            expect(seedVerdict(written)).toBe("ok");
            expect(JSON.parse(written).requests.length).toBe(
              JSON.parse(bytes.toString("utf8")).requests.length + 1,
            );
          } catch (error) {
            if (!isJournalStateError(error)) throw error;
            expect(error.detail).toBe("full");
          }
        }
        expect(existsSync(join(dir.dataDir, CREATE_JOURNAL_LOCK_FILE))).toBe(false);
      }),
      { numRuns: Math.max(1_000, Math.round(5_000 * RELIABILITY_SCALE)) },
    );
    reliability(
      "create journal: fuzzed files read (valid / unreadable / invalid / newer version)",
      verdicts.ok + verdicts.unreadable + verdicts.invalid + verdicts.newer,
    );
    reliability(
      "create journal: fuzzed files refused with bytes unchanged",
      verdicts.unreadable + verdicts.invalid + verdicts.newer,
    );
    // The run covered all three verdicts, not only one kind of file.
    expect(verdicts.ok).toBeGreaterThan(100);
    expect(verdicts.unreadable).toBeGreaterThan(100);
    expect(verdicts.invalid).toBeGreaterThan(100);
  }, 180_000);
});
