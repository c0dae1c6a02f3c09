import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { CREATE_JOURNAL_FILE, openBoatCreateJournal } from "../src/index.js";
import { spawnWorker, tempDataDir, type Worker } from "./helpers.js";

const FIXTURE = fileURLToPath(new URL("./fixtures/begin-worker.ts", import.meta.url));
const BODY = '{"ttlSeconds":28800,"noEnv":true}';
const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

async function race(count: number, botFor: (i: number) => string) {
  const dir = tempDataDir();
  cleanups.push(dir.cleanup);
  const goFile = join(dir.root, "go");
  // A journal that already holds another bot's row, so workers start from primed, non-empty state.
  await openBoatCreateJournal({ dataDir: dir.dataDir }).beginBoatCreate("other-bot", BODY);
  const workers: Worker[] = [];
  try {
    for (let i = 0; i < count; i += 1)
      workers.push(spawnWorker(FIXTURE, [dir.dataDir, goFile, botFor(i), BODY]));
    await Promise.all(workers.map((w) => w.waitFor((line) => line === "ready")));
    writeFileSync(goFile, "go");
    const exits = await Promise.all(workers.map((w) => w.exited));
    for (const exit of exits) expect(exit).toEqual({ code: 0, signal: null, stderr: "" });
    const results = workers.map((w) => JSON.parse(w.lines.at(-1)!) as { startedNow: boolean; key: string });
    const file = JSON.parse(readFileSync(join(dir.dataDir, CREATE_JOURNAL_FILE), "utf8"));
    return { results, file };
  } finally {
    for (const w of workers) w.kill();
  }
}

describe("two processes racing beginBoatCreate", () => {
  it("for the same bot and body: exactly one mints the key, both hold it, the file has one row", async () => {
    const { results, file } = await race(2, () => "bot-1");
    expect(results.map((r) => r.startedNow).sort()).toEqual([false, true]);
    expect(results[0]!.key).toBe(results[1]!.key);
    const rows = file.requests.filter((r: { botId: string }) => r.botId === "bot-1");
    expect(rows).toHaveLength(1);
    expect(rows[0].idempotencyKey).toBe(results[0]!.key);
    expect(file.requests).toHaveLength(2);
  });

  it("for different bots: both mint their own key and both rows are kept", async () => {
    const { results, file } = await race(2, (i) => `bot-${i}`);
    expect(results.map((r) => r.startedNow)).toEqual([true, true]);
    expect(results[0]!.key).not.toBe(results[1]!.key);
    expect(file.requests.map((r: { botId: string }) => r.botId).sort()).toEqual([
      "bot-0",
      "bot-1",
      "other-bot",
    ]);
  });
});
