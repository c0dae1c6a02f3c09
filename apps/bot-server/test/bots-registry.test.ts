import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { openBotRegistry } from "../src/bots.js";
import { HttpProblem } from "../src/http-errors.js";
import { tempDir } from "./helpers.js";

/**
 * Two servers on one data directory is how drydock runs more than one, so a rolling upgrade has an older
 * and a newer server rewriting the same bots.json. What the newer one recorded (a member beside `bots`, on a
 * bot, on a deletion mark) must survive the older one's rewrites. (A member whose meaning the older server
 * must honour, not merely keep, needs a new `version`, which the older server refuses: see ARCHITECTURE.)
 */
describe("bots.json written by a newer server", () => {
  const cleanups: (() => void)[] = [];
  afterEach(() => {
    for (const cleanup of cleanups.splice(0)) cleanup();
  });

  it("keeps the members it does not know, at every level, through each kind of rewrite", async () => {
    const tmp = tempDir("bots-newer");
    cleanups.push(tmp.cleanup);
    const file = join(tmp.dir, "bots.json");
    const mark = {
      id: "m-1",
      instance: "other-server",
      since: 1_767_000_000_000,
      by: { pid: 2_147_483_000, host: "elsewhere", zone: "eu-1" },
      reason: "newer",
    };
    const newer = {
      version: 1,
      bots: [{ botId: "ada", name: "Ada", createdAt: 1_767_000_000_000, tier: "gold", deletions: [mark] }],
      quota: { bots: 10 },
    };
    writeFileSync(file, `${JSON.stringify(newer, null, 2)}\n`, { mode: 0o600 });
    const registry = openBotRegistry(tmp.dir, () => 1_767_000_001_000);
    const read = () => JSON.parse(readFileSync(file, "utf8"));

    await registry.create({ botId: "bea", name: "Bea" });
    expect(read().quota).toEqual({ bots: 10 });
    expect(read().bots[0]).toEqual(newer.bots[0]);

    const own = await registry.markDeleting("ada");
    expect(own).not.toBeNull();
    expect(read().bots[0]).toMatchObject({ tier: "gold", deletions: [mark, { id: own?.id }] });

    await registry.unmarkDeleting("ada", own!);
    expect(read().bots[0]).toEqual(newer.bots[0]);

    await registry.remove("bea");
    expect(read()).toEqual(newer);
    expect(Object.keys(read())).toEqual(["version", "bots", "quota"]);
  });

  it("refuses a bots.json in a newer version saying to upgrade (not to repair it), and leaves it as it is", async () => {
    const tmp = tempDir("bots-newer-version");
    cleanups.push(tmp.cleanup);
    const file = join(tmp.dir, "bots.json");
    const newer = `${JSON.stringify({ version: 2, bots: [], shards: 4 }, null, 2)}\n`;
    writeFileSync(file, newer, { mode: 0o600 });
    const registry = openBotRegistry(tmp.dir);
    for (const call of [() => registry.list(), () => registry.create({ botId: "cy", name: "Cy" })]) {
      const error = await call().then(
        () => null,
        (thrown: unknown) => thrown as HttpProblem,
      );
      expect(error).toBeInstanceOf(HttpProblem);
      expect(error?.status).toBe(503);
      expect(error?.code).toBe("bots_paused");
      expect(error?.message).toBe(
        `Bots cannot be changed: the bot registry ${file} is in a newer format (version 2; this drydock reads version 1): upgrade this process, and leave the file as it is.`,
      );
    }
    expect(readFileSync(file, "utf8")).toBe(newer);
    // A damaged registry still says to repair it, naming the file.
    writeFileSync(file, "{ not json");
    const damaged = await registry.list().then(
      () => null,
      (thrown: unknown) => thrown as HttpProblem,
    );
    expect(damaged?.message).toBe(
      `The bot registry ${file} is unreadable, so bots cannot be changed. Repair or restore it before retrying; drydock never overwrites a file it could not read.`,
    );
  });
});
