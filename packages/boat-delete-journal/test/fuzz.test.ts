import { appendFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { MAX_NESTING_DEPTH, NEWER_FORMAT, newerFormatDetail } from "@drydock/json-journal";
import { journalVerdict } from "@drydock/test-kit";
import fc from "fast-check";
import { afterAll, describe, expect, it } from "vitest";
import {
  DELETE_JOURNAL_FILE,
  DELETE_JOURNAL_LOCK_FILE,
  isJournalStateError,
  OPERATION_ID,
  openBoatDeleteJournal,
} from "../src/index.js";
import { BOAT_ID, BOT_ID } from "../src/schema.js";
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

const timestamps = fc
  .tuple(fc.integer({ min: 1, max: 2_000_000_000_000 }), fc.nat(1_000_000))
  .map(([requestedAt, delta]) => ({ requestedAt, updatedAt: requestedAt + delta }));

const phaseFields = fc.oneof(
  fc.constant({ phase: "prepared" }),
  fc
    .tuple(fc.stringMatching(OPERATION_ID), fc.constantFrom("pending", "processing", "completed"))
    .map(([operationId, status]) => ({ phase: "accepted", operationId, status })),
  fc
    .option(fc.stringMatching(OPERATION_ID), { nil: undefined })
    .map((operationId) => ({ phase: "blocked", ...(operationId ? { operationId } : {}), status: "blocked" })),
);

const record = fc
  .record({
    boxId: fc.stringMatching(BOAT_ID),
    name: fc.string({ minLength: 1, maxLength: 30, unit: "binary" }).filter((n) => !/[\r\n\0]/.test(n)),
    ownerBotId: fc.option(fc.stringMatching(BOT_ID, { size: "small" }), { nil: null }),
    times: timestamps,
    phase: phaseFields,
    extra: fc.option(fc.jsonValue({ maxDepth: 2 }), { nil: undefined, freq: 6 }),
  })
  .map(({ boxId, name, ownerBotId, times, phase, extra }) => {
    const { phase: p, ...rest } = phase;
    return {
      boxId,
      name,
      ownerBotId,
      phase: p,
      ...times,
      ...rest,
      ...(extra !== undefined ? { note: extra } : {}),
    };
  });

const validRecords = fc.uniqueArray(record, { selector: (r) => r.boxId, maxLength: 6 }).map((records) => {
  // Operation ids are unique across records in a valid file.
  const seen = new Set<string>();
  return records.filter((r) => {
    const id = (r as { operationId?: string }).operationId;
    if (id === undefined) return true;
    if (seen.has(id)) return false;
    seen.add(id);
    return true;
  });
});

const BAD_VALUES: unknown[] = [
  null,
  0,
  -1,
  1.5,
  2 ** 53, // not a safe integer
  "",
  true,
  [],
  {},
  "x".repeat(101),
  "line\nbreak",
  "nul\u0000",
  "bx_ABCDEFGH",
  "bot id",
  `bdop_${"A".repeat(32)}`,
  "op_1",
  "done",
  "accepted",
  "blocked",
  "prepared",
  "pending",
];
const FIELDS = [
  "boxId",
  "name",
  "ownerBotId",
  "phase",
  "requestedAt",
  "updatedAt",
  "operationId",
  "status",
  "version",
];

type Mutation =
  | { kind: "none" }
  | { kind: "truncate"; at: number }
  | { kind: "flip"; at: number; xor: number }
  | { kind: "insert"; at: number; byte: number }
  | { kind: "field"; row: number; field: string; value: unknown }
  | { kind: "delete-field"; row: number; field: string }
  | { kind: "duplicate"; row: number; change: "none" | "box" }
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
    weight: 7,
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
      change: fc.constantFrom("none" as const, "box" as const),
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
        { version: 2, records: [] },
        { version: 1, records: {} },
        { version: 1, requests: [] },
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

const raw = (value: unknown) => `${JSON.stringify(value, null, 2)}\n`;

function applyMutation(records: Record<string, unknown>[], m: Mutation): Buffer {
  const text = seedSerialize(records);
  const bytes = Buffer.from(text, "utf8");
  const pick = (i: number) => records[i % Math.max(records.length, 1)];
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
      if (m.field === "version") return Buffer.from(raw({ version: m.value, records }));
      const row = pick(m.row);
      if (row) row[m.field] = m.value;
      return Buffer.from(seedSerialize(records));
    }
    case "delete-field": {
      const row = pick(m.row);
      if (row) delete row[m.field];
      return Buffer.from(seedSerialize(records));
    }
    case "duplicate": {
      const row = pick(m.row);
      if (row) records.push(m.change === "box" ? { ...row, boxId: "bx_zzzzzzzz" } : { ...row });
      return Buffer.from(seedSerialize(records));
    }
    case "top":
      return Buffer.from(raw(m.value));
    case "text":
      return Buffer.from(text.replace(m.from, m.to));
    case "deep": {
      const nested = `${"[".repeat(m.depth)}${"]".repeat(m.depth)}`;
      return Buffer.from(text.replace('"version": 1', `"deep": ${nested}, "version": 1`));
    }
  }
}

/** The original system's verdict, with the rules drydock adds (test-kit's journalVerdict). */
function expectedVerdict(bytes: Buffer): string {
  return journalVerdict(bytes, seedVerdict, {
    maxDepth: MAX_NESTING_DEPTH,
    knownVersion: 1,
    newer: (version) => newerFormatDetail(version, 1),
  });
}

function manyRecords(count: number): Record<string, unknown>[] {
  const letters = "23456789abcdefghjkmnpqrstuvwxyz";
  return Array.from({ length: count }, (_, i) => ({
    boxId: `bx_${[0, 1, 2].map((d) => letters[Math.floor(i / 31 ** d) % 31]).join("")}aaaaa`,
    name: "n",
    ownerBotId: null,
    phase: "prepared",
    requestedAt: 1,
    updatedAt: 1,
  }));
}

const dir = tempDataDir();
mkdirSync(dir.dataDir, { mode: 0o700 });
afterAll(() => dir.cleanup());

describe("mutated delete journal files", () => {
  it("accepts exactly MAX_RECORDS fences and refuses one more, without rewriting either file", async () => {
    const file = join(dir.dataDir, DELETE_JOURNAL_FILE);
    const journal = openBoatDeleteJournal({ dataDir: dir.dataDir });
    const full = seedSerialize(manyRecords(4_096));
    writeFileSync(file, full);
    expect(await journal.boatDeletionSnapshot()).toHaveLength(4_096);
    await expect(
      journal.prepareBoatDeletion({ boxId: "bx_zzzzzzzz", name: "one more", ownerBotId: null }),
    ).rejects.toMatchObject({ detail: "full" });
    expect(readFileSync(file, "utf8")).toBe(full);
    const oversize = seedSerialize(manyRecords(4_097));
    writeFileSync(file, oversize);
    expect(seedVerdict(oversize)).toBe("invalid");
    await expect(journal.boatDeletionSnapshot()).rejects.toMatchObject({ detail: "invalid" });
    expect(readFileSync(file, "utf8")).toBe(oversize);
  });

  it("are read as valid or refused with JournalStateError, agreeing with the original validation, bytes unchanged", async () => {
    const file = join(dir.dataDir, DELETE_JOURNAL_FILE);
    const journal = openBoatDeleteJournal({ dataDir: dir.dataDir });
    const verdicts = { ok: 0, unreadable: 0, invalid: 0, newer: 0 };
    await fc.assert(
      fc.asyncProperty(validRecords, mutation, fc.nat(24), async (records, m, probe) => {
        const bytes = applyMutation(records as Record<string, unknown>[], m);
        writeFileSync(file, bytes);
        // Bytes that are not UTF-8 are refused outright (the original would read them as U+FFFD and
        // rewrite them that way), and so is a member name repeated within one object (the original keeps
        // the last copy and would write the file back without the others), and so is a document nested
        // deeper than MAX_NESTING_DEPTH; a version above 1 is "in a newer format", where the original says
        // invalid; everything else must get the original system's verdict.
        const expected = expectedVerdict(bytes);
        let outcome: string;
        try {
          await journal.boatDeletionSnapshot();
          outcome = "ok";
        } catch (error) {
          if (!isJournalStateError(error) || error.code !== "BOAT_DELETE_PAUSED") throw error;
          outcome = error.detail;
        }
        expect(outcome).toBe(expected);
        expect(readFileSync(file).equals(bytes)).toBe(true);
        verdicts[(outcome.startsWith(NEWER_FORMAT) ? "newer" : outcome) as keyof typeof verdicts] += 1;

        const fresh = { boxId: "bx_yyyyyyyy", name: "fuzz", ownerBotId: null };
        if (outcome !== "ok" && probe === 0) {
          // A write is refused the same way, and still changes nothing.
          await expect(journal.prepareBoatDeletion(fresh)).rejects.toMatchObject({ detail: outcome });
          expect(readFileSync(file).equals(bytes)).toBe(true);
        } else if (outcome === "ok" && probe === 0) {
          // A file the original accepts can be continued, and what drydock writes it still accepts.
          await journal.prepareBoatDeletion(fresh);
          const written = readFileSync(file, "utf8");
          expect(seedVerdict(written)).toBe("ok");
          expect(JSON.parse(written).records.length).toBe(
            JSON.parse(bytes.toString("utf8")).records.length + 1,
          );
        }
        expect(existsSync(join(dir.dataDir, DELETE_JOURNAL_LOCK_FILE))).toBe(false);
      }),
      { numRuns: Math.max(1_000, Math.round(5_000 * RELIABILITY_SCALE)) },
    );
    reliability(
      "delete journal: fuzzed files read (valid / unreadable / invalid / newer version)",
      verdicts.ok + verdicts.unreadable + verdicts.invalid + verdicts.newer,
    );
    reliability(
      "delete journal: fuzzed files refused with bytes unchanged",
      verdicts.unreadable + verdicts.invalid + verdicts.newer,
    );
    // The run covered all three verdicts, not only one kind of file.
    expect(verdicts.ok).toBeGreaterThan(100);
    expect(verdicts.unreadable).toBeGreaterThan(100);
    expect(verdicts.invalid).toBeGreaterThan(100);
  }, 180_000);
});
