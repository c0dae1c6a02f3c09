import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { type BoatDeletionRecord, DELETE_JOURNAL_FILE, openBoatDeleteJournal } from "../src/index.js";
import { spawnWorker, tempDataDir, type Worker } from "./helpers.js";

const FIXTURE = fileURLToPath(new URL("./fixtures/prepare-worker.ts", import.meta.url));
const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

async function race(boxes: string[]) {
  const dir = tempDataDir();
  cleanups.push(dir.cleanup);
  const goFile = join(dir.root, "go");
  await openBoatDeleteJournal({ dataDir: dir.dataDir }).prepareBoatDeletion({
    boxId: "bx_pppppppp",
    name: "primed",
    ownerBotId: null,
  });
  const workers: Worker[] = [];
  try {
    for (const box of boxes) workers.push(spawnWorker(FIXTURE, [dir.dataDir, goFile, box, `name-${box}`]));
    await Promise.all(workers.map((w) => w.waitFor((line) => line === "ready")));
    writeFileSync(goFile, "go");
    const exits = await Promise.all(workers.map((w) => w.exited));
    for (const exit of exits) expect(exit).toEqual({ code: 0, signal: null, stderr: "" });
    const results = workers.map((w) => JSON.parse(w.lines.at(-1)!) as BoatDeletionRecord);
    const file = JSON.parse(readFileSync(join(dir.dataDir, DELETE_JOURNAL_FILE), "utf8"));
    return { results, records: file.records as BoatDeletionRecord[] };
  } finally {
    for (const w of workers) w.kill();
  }
}

describe("two processes preparing deletions at once", () => {
  it("for different Boats: both fences are kept, next to the earlier one", async () => {
    const { results, records } = await race(["bx_aaaaaaaa", "bx_bbbbbbbb"]);
    expect(results.map((r) => r.phase)).toEqual(["prepared", "prepared"]);
    expect(records.map((r) => r.boxId).sort()).toEqual(["bx_aaaaaaaa", "bx_bbbbbbbb", "bx_pppppppp"]);
  });

  it("for the same Boat: one fence, and both processes get that same record", async () => {
    const { results, records } = await race(["bx_aaaaaaaa", "bx_aaaaaaaa"]);
    expect(results[0]).toEqual(results[1]);
    expect(records.filter((r) => r.boxId === "bx_aaaaaaaa")).toEqual([results[0]]);
  });
});
