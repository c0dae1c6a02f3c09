import { randomUUID } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { acquireLockSync, inspectLock, isLockError, nodeFileOps } from "../src/index.js";
import { deadPid, leftovers, seedOwnerText, tempDir } from "./helpers.js";

let dir: { dir: string; remove(): void };
let dead: number;
beforeAll(async () => {
  dir = tempDir();
  dead = await deadPid();
});
afterAll(() => dir.remove());

/** One random corruption of a file: flip, truncate, insert or overwrite bytes. */
const mutation = fc.oneof(
  fc.record({ kind: fc.constant("flip" as const), at: fc.nat(), bit: fc.integer({ min: 0, max: 7 }) }),
  fc.record({ kind: fc.constant("truncate" as const), at: fc.nat() }),
  fc.record({
    kind: fc.constant("insert" as const),
    at: fc.nat(),
    bytes: fc.uint8Array({ minLength: 1, maxLength: 8 }),
  }),
  fc.record({ kind: fc.constant("overwrite" as const), at: fc.nat(), text: fc.string({ maxLength: 12 }) }),
);

type Mutation = typeof mutation extends fc.Arbitrary<infer T> ? T : never;

function mutate(bytes: Buffer, m: Mutation): Buffer {
  const at = m.at % (bytes.length + 1);
  switch (m.kind) {
    case "flip": {
      const copy = Buffer.from(bytes);
      const index = Math.min(at, copy.length - 1);
      copy[index] = (copy[index] ?? 0) ^ (1 << m.bit);
      return copy;
    }
    case "truncate":
      return bytes.subarray(0, at);
    case "insert":
      return Buffer.concat([bytes.subarray(0, at), Buffer.from(m.bytes), bytes.subarray(at)]);
    case "overwrite": {
      const text = Buffer.from(m.text);
      return Buffer.concat([
        bytes.subarray(0, at),
        text,
        bytes.subarray(Math.min(bytes.length, at + text.length)),
      ]);
    }
  }
}

describe("hostile owner files (fast-check)", () => {
  it("a randomly corrupted lock is either recovered as a dead owner or refused with its bytes untouched", () => {
    const lock = join(dir.dir, "fuzz.lock");
    fc.assert(
      fc.property(fc.array(mutation, { minLength: 1, maxLength: 3 }), (mutations) => {
        let bytes: Buffer = Buffer.from(seedOwnerText(dead, randomUUID()));
        for (const m of mutations) bytes = mutate(bytes, m);
        writeFileSync(lock, bytes);
        try {
          const handle = acquireLockSync(lock, { waitMs: 10 });
          handle.release();
        } catch (error) {
          if (!isLockError(error)) throw error;
          expect(["LOCK_INVALID", "LOCK_TIMEOUT", "LOCK_OWNER_UNVERIFIABLE"]).toContain(error.code);
          expect(readFileSync(lock).equals(bytes)).toBe(true);
          nodeFileOps.unlinkSync(lock);
        }
        expect(leftovers(dir.dir)).toEqual([]);
      }),
      { numRuns: 300 },
    );
  });

  it("any JSON object payload round-trips through the owner file exactly", () => {
    const lock = join(dir.dir, "payload.lock");
    fc.assert(
      fc.property(fc.dictionary(fc.string({ maxLength: 8 }), fc.json({ maxDepth: 2 })), (entries) => {
        const payload = Object.fromEntries(Object.entries(entries).map(([k, v]) => [k, JSON.parse(v)]));
        const handle = acquireLockSync(lock, { payload });
        try {
          expect(inspectLock(lock)).toEqual(handle.owner);
          expect(handle.owner.payload).toEqual(payload);
        } finally {
          handle.release();
        }
      }),
      { numRuns: 100 },
    );
  });
});
