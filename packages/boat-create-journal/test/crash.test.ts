import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { CREATE_JOURNAL_FILE, openBoatCreateJournal } from "../src/index.js";
import { spawnWorker, tempDataDir } from "./helpers.js";

/**
 * A process SIGKILLed in the middle of a journal write, while holding the lock: the next process reaps the
 * dead lock, sees either the whole old file or the whole new one, and never promotes the dead writer's
 * temporary file.
 */

const FIXTURE = fileURLToPath(new URL("./fixtures/crash-worker.ts", import.meta.url));
const BODY = '{"ttlSeconds":28800,"noEnv":true}';
const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

async function killedAt(point: "before-rename" | "after-rename") {
  const dir = tempDataDir();
  cleanups.push(dir.cleanup);
  await openBoatCreateJournal({ dataDir: dir.dataDir }).beginBoatCreate("other-bot", BODY);
  const worker = spawnWorker(FIXTURE, [dir.dataDir, point]);
  try {
    await worker.waitFor((line) => line === "at-point");
    worker.kill();
    // Reaped before anyone judges the lock: while a killed process's threads are still exiting, it counts as alive.
    expect((await worker.exited).signal).toBe("SIGKILL");
  } finally {
    worker.kill();
  }
  const file = join(dir.dataDir, CREATE_JOURNAL_FILE);
  const bots = () => JSON.parse(readFileSync(file, "utf8")).requests.map((r: { botId: string }) => r.botId);
  return { dir, bots };
}

describe("a writer SIGKILLed while holding the create journal", () => {
  it("before the rename: the old file stands, the lock is recovered and the next begin mints the key", async () => {
    const { dir, bots } = await killedAt("before-rename");
    expect(bots()).toEqual(["other-bot"]);
    // The dead writer's temp file is there until the next journal sweeps it.
    expect(readdirSync(dir.dataDir).some((name) => name.endsWith(".tmp"))).toBe(true);
    const attempt = await openBoatCreateJournal({ dataDir: dir.dataDir }).beginBoatCreate("bot-1", BODY);
    expect(attempt.startedNow).toBe(true);
    expect(bots()).toEqual(["other-bot", "bot-1"]);
    expect(readdirSync(dir.dataDir)).toEqual([CREATE_JOURNAL_FILE]);
  });

  it("after the rename: the new row is durable and is resumed with startedNow false", async () => {
    const { dir, bots } = await killedAt("after-rename");
    expect(bots()).toEqual(["other-bot", "bot-1"]);
    const attempt = await openBoatCreateJournal({ dataDir: dir.dataDir }).beginBoatCreate("bot-1", BODY);
    expect(attempt.startedNow).toBe(false);
    expect(bots()).toEqual(["other-bot", "bot-1"]);
    expect(readdirSync(dir.dataDir)).toEqual([CREATE_JOURNAL_FILE]);
  });
});
