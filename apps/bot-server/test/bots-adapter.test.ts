import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { type Bot, MAX_FILE_BOTS, openFileStorage } from "@drydock/storage";
import { afterEach, describe, expect, it } from "vitest";
import { openBotRegistry } from "../src/bots.js";
import { HttpProblem } from "../src/http-errors.js";
import { tempDir } from "./helpers.js";

/** The registry lives in @drydock/storage; the server's adapter answers in the words and codes it always has. */
describe("the bot registry's HTTP answers", () => {
  const cleanups: (() => void)[] = [];
  afterEach(() => {
    for (const cleanup of cleanups.splice(0)) cleanup();
  });
  const problemOf = (promise: Promise<unknown>) =>
    promise.then(
      () => null,
      (e: unknown) => e as HttpProblem,
    );

  it("409 bot_exists, too_many_bots (at 4,096) and bot_busy (past 64 marks), with today's messages", async () => {
    const tmp = tempDir("bots-adapter");
    cleanups.push(tmp.cleanup);
    const registry = openBotRegistry(tmp.dir);
    await registry.create({ botId: "ada", name: "Ada" });
    const exists = await problemOf(registry.create({ botId: "ada", name: "Ada again" }));
    expect(exists).toBeInstanceOf(HttpProblem);
    expect(exists).toMatchObject({
      status: 409,
      code: "bot_exists",
      message: "A bot with id 'ada' already exists.",
    });

    for (let i = 0; i < 64; i += 1) await openBotRegistry(tmp.dir).markDeleting("ada");
    const busy = await problemOf(openBotRegistry(tmp.dir).markDeleting("ada"));
    expect(busy).toMatchObject({
      status: 409,
      code: "bot_busy",
      message: "Too many deletions of this bot are under way.",
    });

    const full = tempDir("bots-adapter-full");
    cleanups.push(full.cleanup);
    const storage = await openFileStorage({ dataDir: full.dir });
    const bots: Bot[] = Array.from({ length: MAX_FILE_BOTS }, (_, i) => ({
      botId: `b${i}`,
      name: "B",
      createdAt: 1,
    }));
    await storage.importAll({ creates: [], deletes: [], meta: {}, bots });
    const tooMany = await problemOf(openBotRegistry(full.dir).create({ botId: "one-more", name: "One" }));
    expect(tooMany).toMatchObject({
      status: 409,
      code: "too_many_bots",
      message: "This installation already has 4096 bots; delete one first.",
    });
  });

  it("503 bots_paused for damaged bytes, in today's words", async () => {
    const tmp = tempDir("bots-adapter-bad");
    cleanups.push(tmp.cleanup);
    writeFileSync(join(tmp.dir, "bots.json"), "{ not json");
    const problem = await problemOf(openBotRegistry(tmp.dir).create({ botId: "ada", name: "Ada" }));
    expect(problem).toMatchObject({
      status: 503,
      code: "bots_paused",
      message: `The bot registry ${join(tmp.dir, "bots.json")} is unreadable, so bots cannot be changed. Repair or restore it before retrying; drydock never overwrites a file it could not read.`,
    });
  });
});
