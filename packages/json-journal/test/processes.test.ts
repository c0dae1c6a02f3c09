import type { ChildProcess } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { openJsonJournal, sweepStaleTemps } from "../src/index.js";
import { openCounter } from "./fixtures/counter.js";
import { documentFor } from "./fixtures/write-loop-doc.js";
import {
  exited,
  killGroup,
  makeTempDir,
  removeDir,
  sleep,
  spawnFixture,
  tempsIn,
  waitForLine,
} from "./helpers.js";

let dir: string;
const children: ChildProcess[] = [];
beforeEach(() => {
  dir = makeTempDir();
});
afterEach(() => {
  for (const child of children.splice(0)) killGroup(child);
  removeDir(dir);
});

// Hang guard only (no timing is asserted): on a busy shared machine, process start-up alone can take
// seconds, so these tests get room far beyond their usual run time.
const HANG_GUARD_MS = 240_000;

describe("real processes", () => {
  it(
    "4 processes × 200 increments through update end at exactly 800",
    async () => {
      const file = join(dir, "counter.json");
      const go = join(dir, "go");
      const workers = Array.from({ length: 4 }, () => spawnFixture("counter-worker.ts", [file, go, "200"]));
      children.push(...workers);
      await Promise.all(workers.map((worker) => waitForLine(worker, "ready")));
      // All four are loaded and waiting: start them together so they truly race for the lock.
      writeFileSync(go, "");
      const outcomes = await Promise.all(workers.map(exited));
      expect(outcomes).toEqual(workers.map(() => ({ code: 0, signal: null })));
      const final = await openCounter(file).read();
      expect(final.count).toBe(800);
      expect(final.writers.sort()).toEqual(workers.map((worker) => worker.pid).sort());
      expect(tempsIn(dir)).toEqual([]);
    },
    HANG_GUARD_MS,
  );

  it(
    "SIGKILL at random moments mid-write: the target is always a complete written version; temps are swept, never promoted",
    async () => {
      const file = join(dir, "big.json");
      const kills = 20;
      // Each life starts a million versions above the previous one, so versions only ever grow.
      const spawnLife = (life: number) => {
        const go = join(dir, `go-${life}`);
        const child = spawnFixture("write-loop.ts", [file, String(life * 1_000_000), go]);
        children.push(child);
        const ready = waitForLine(child, "ready");
        // A life that is never awaited (the test failed earlier) must not add an unhandled rejection.
        ready.catch(() => undefined);
        return { child, go, ready };
      };
      let lastSeen = -1;
      let sweptTemps = 0;
      let next = spawnLife(0);
      for (let life = 0; life < kills; life++) {
        const { child, go, ready } = next;
        await ready;
        writeFileSync(go, "");
        // The next life loads (tsx start-up) while this one writes; it waits for its own go file.
        if (life + 1 < kills) next = spawnLife(life + 1);
        await sleep(5 + Math.floor(Math.random() * 150));
        killGroup(child);
        expect(await exited(child)).toMatchObject({ signal: "SIGKILL" });

        let text: string;
        try {
          text = readFileSync(file, "utf8");
        } catch {
          // Killed before its first rename ever landed: only possible while nothing was ever written.
          expect(lastSeen).toBe(-1);
          continue;
        }
        const doc = JSON.parse(text) as { seq: number };
        expect(text).toBe(documentFor(doc.seq));
        // Never older than what an earlier round saw: no resurrected or promoted version.
        expect(doc.seq).toBeGreaterThanOrEqual(lastSeen);
        lastSeen = doc.seq;

        const leftovers = tempsIn(dir);
        // minAgeMs 0: the writer was just killed (and reaped), its temps are seconds old.
        const { removed } = sweepStaleTemps(dir, { minAgeMs: 0 });
        expect(removed.length).toBe(leftovers.length);
        sweptTemps += removed.length;
        expect(tempsIn(dir)).toEqual([]);
        expect(readFileSync(file, "utf8")).toBe(text);
      }
      // Kills did land while a temp was in flight, so sweeping (not promoting) was exercised.
      expect(sweptTemps).toBeGreaterThan(0);
      expect(lastSeen).toBeGreaterThanOrEqual(0);
    },
    HANG_GUARD_MS,
  );

  it(
    "peek while another process rewrites a 1 MiB document nonstop: every answer is one whole version, never older than the last",
    async () => {
      const file = join(dir, "big.json");
      const go = join(dir, "go");
      const writer = spawnFixture("write-loop.ts", [file, "0", go]);
      children.push(writer);
      await waitForLine(writer, "ready");
      writeFileSync(go, "");
      const viewer = openJsonJournal({
        file,
        schema: z.object({ seq: z.number().int().nonnegative(), pad: z.string() }).strict(),
        empty: { seq: -1, pad: "" },
        stateError: (detail, cause) => new Error(`big.json is ${detail}`, { cause }),
      });
      let last = -1;
      const seen = new Set<number>();
      const deadline = Date.now() + 3_000;
      while (Date.now() < deadline || seen.size < 20) {
        // Any torn or half-written file would fail the schema or JSON.parse and throw here.
        const doc = await viewer.peek();
        expect(doc.seq).toBeGreaterThanOrEqual(last);
        if (doc.seq >= 0) expect(`${JSON.stringify(doc, null, 2)}\n`).toBe(documentFor(doc.seq));
        last = doc.seq;
        seen.add(doc.seq);
        if (Date.now() > deadline + 60_000) break;
      }
      killGroup(writer);
      // The writer really was rewriting underneath: many distinct versions were observed.
      expect(seen.size).toBeGreaterThanOrEqual(20);
    },
    HANG_GUARD_MS,
  );
});
