import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { DELETE_JOURNAL_FILE, openBoatDeleteJournal } from "../src/index.js";
import { spawnWorker, tempDataDir } from "./helpers.js";

/**
 * A process SIGKILLed in the middle of a journal write, while holding the lock: the next process reaps the
 * dead lock, sees either the whole old file or the whole new one, and never promotes the dead writer's
 * temporary file.
 */

const FIXTURE = fileURLToPath(new URL("./fixtures/crash-worker.ts", import.meta.url));
const TARGET = { boxId: "bx_aaaaaaaa", name: "ogb-a", ownerBotId: "bot-1" };
const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

async function killedAt(point: "before-rename" | "after-rename") {
  const dir = tempDataDir();
  cleanups.push(dir.cleanup);
  await openBoatDeleteJournal({ dataDir: dir.dataDir }).prepareBoatDeletion({
    boxId: "bx_pppppppp",
    name: "earlier",
    ownerBotId: null,
  });
  const worker = spawnWorker(FIXTURE, [dir.dataDir, point]);
  try {
    await worker.waitFor((line) => line === "at-point");
    worker.kill();
    // Reaped before anyone judges the lock: while a killed process's threads are still exiting, it counts as alive.
    expect((await worker.exited).signal).toBe("SIGKILL");
  } finally {
    worker.kill();
  }
  const file = join(dir.dataDir, DELETE_JOURNAL_FILE);
  const boxes = () => JSON.parse(readFileSync(file, "utf8")).records.map((r: { boxId: string }) => r.boxId);
  return { dir, boxes };
}

describe("a writer SIGKILLed while holding the delete journal", () => {
  it("before the rename: no fence was written, the lock is recovered and the fence can be prepared", async () => {
    const { dir, boxes } = await killedAt("before-rename");
    expect(boxes()).toEqual(["bx_pppppppp"]);
    const journal = openBoatDeleteJournal({ dataDir: dir.dataDir });
    expect((await journal.prepareBoatDeletion(TARGET)).phase).toBe("prepared");
    expect(boxes()).toEqual(["bx_pppppppp", "bx_aaaaaaaa"]);
    expect(readdirSync(dir.dataDir)).toEqual([DELETE_JOURNAL_FILE]);
  });

  it("after the rename: the fence is durable and a second prepare returns it unchanged", async () => {
    const { dir, boxes } = await killedAt("after-rename");
    expect(boxes()).toEqual(["bx_pppppppp", "bx_aaaaaaaa"]);
    const journal = openBoatDeleteJournal({ dataDir: dir.dataDir });
    const before = await journal.getBoatDeletion("bx_aaaaaaaa");
    expect(await journal.prepareBoatDeletion(TARGET)).toEqual(before);
    expect(readdirSync(dir.dataDir)).toEqual([DELETE_JOURNAL_FILE]);
  });
});
