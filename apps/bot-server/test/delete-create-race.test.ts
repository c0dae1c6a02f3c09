/**
 * A bot deleted by one server while another creates its computer (two servers on one data directory, a real
 * provider: the documented way to run more than one). Whatever the interleaving, a Boat is never created for
 * a bot that is gone: DELETE /v1/bots/:botId marks the bot before it reads the create journal, and the create
 * asks, once its key is journaled and before it sends anything, whether the bot is still wanted. So either the
 * deletion sees the create's key (and keeps the bot), or the create sees the mark (and sends nothing).
 *
 * Each interleaving is forced at one point of the create, through the lifecycle the routes call.
 */

import { spawn, spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { openBoatCreateJournal } from "@drydock/boat-create-journal";
import type { BoatLifecycle, ProvisionOptions } from "@drydock/boat-lifecycle";
import { createBoatClient } from "@drydock/boat-provider";
import { type BoatSimulator, startBoatSimulator } from "@drydock/boat-provider/simulator";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { openBotRegistry } from "../src/bots.js";
import { loadConfig } from "../src/config.js";
import { type RunningServer, startServer } from "../src/server.js";
import { type Api, api, tempDir } from "./helpers.js";

let sim: BoatSimulator;
const tmp = tempDir("delete-create-race");
let creator: RunningServer;
let deleter: RunningServer;
let viaCreator: Api;
let viaDeleter: Api;
/** Runs inside the creator's provision, at the point each test chooses. */
let interleave: {
  beforeProvision?: () => Promise<void>;
  beforeStillWanted?: () => Promise<void>;
  /** Inside the deleter's DELETE /v1/bots, after its mark and its read of the create journal. */
  duringDeletersFind?: () => Promise<void>;
} = {};

beforeAll(async () => {
  sim = await startBoatSimulator({ port: 0 });
  const config = () =>
    loadConfig({
      DRYDOCK_DATA_DIR: tmp.dir,
      PORT: "0",
      LOG_LEVEL: "silent",
      BOAT_API_URL: sim.apiUrl,
      BOAT_API_TOKEN: sim.token,
      DRYDOCK_TOKEN: "t".repeat(40),
    });
  deleter = await startServer(config(), {
    print: () => {},
    wrapLifecycle: (lifecycle): BoatLifecycle => ({
      ...lifecycle,
      async findBoat(botId: string) {
        await interleave.duringDeletersFind?.();
        return lifecycle.findBoat(botId);
      },
    }),
  });
  creator = await startServer(config(), {
    print: () => {},
    wrapLifecycle: (lifecycle): BoatLifecycle => ({
      ...lifecycle,
      async provision(botId: string, options: ProvisionOptions = {}) {
        await interleave.beforeProvision?.();
        const { stillWanted } = options;
        return lifecycle.provision(botId, {
          ...options,
          async stillWanted() {
            await interleave.beforeStillWanted?.();
            return stillWanted === undefined ? true : stillWanted();
          },
        });
      },
    }),
  });
  await Promise.all([creator.startup, deleter.startup]);
  viaCreator = api(creator.url, creator.token);
  viaDeleter = api(deleter.url, deleter.token);
});

afterEach(() => {
  interleave = {};
});

afterAll(async () => {
  await creator?.close();
  await deleter?.close();
  await sim?.close();
  tmp.cleanup();
});

async function newBot(botId: string): Promise<void> {
  expect((await viaCreator("POST", "/v1/bots", { name: botId, botId })).status).toBe(201);
}

/** Live Boats of boat.dev, and create rows of the journal, that belong to `botId` (via the listing). */
async function boatsOf(botId: string): Promise<unknown[]> {
  const computers = (await viaDeleter("GET", "/v1/computers")).json.computers as { ownerBotId: string }[];
  return computers.filter((c) => c.ownerBotId === botId);
}

describe("DELETE /v1/bots/:botId racing POST /v1/bots/:botId/computer on another server", () => {
  it("the bot deleted before the create journals its key: the create sends nothing and answers 404", async () => {
    await newBot("race-gone");
    const createsBefore = sim.stats().createsCommitted;
    let deleted: Awaited<ReturnType<Api>> | undefined;
    interleave.beforeProvision = async () => {
      deleted = await viaDeleter("DELETE", "/v1/bots/race-gone");
    };
    const created = await viaCreator("POST", "/v1/bots/race-gone/computer");
    expect(deleted?.status, JSON.stringify(deleted?.json)).toBe(200);
    expect(created.status, JSON.stringify(created.json)).toBe(404);
    expect(created.json.error.code).toBe("bot_not_found");
    // Nothing billed, nothing journaled, nothing for anyone to find.
    expect(sim.stats().createsCommitted).toBe(createsBefore);
    expect(await boatsOf("race-gone")).toEqual([]);
    const recovery = (await viaDeleter("GET", "/v1/recovery")).json;
    expect(recovery.open).toBe(0);
  });

  it("the deletion under way when the create asks: the create sends nothing (409 bot_deleting); the deletion finishes", async () => {
    await newBot("race-marked");
    const other = sleeper();
    const createsBefore = sim.stats().createsCommitted;
    // A deletion that has marked the bot and not yet read the create journal (the mark is what it writes
    // first); it goes on once the create has answered.
    interleave.beforeStillWanted = async () => {
      // (From the test, not a server: a mark of another process that still runs, as the server sees it.)
      await writeMark("race-marked", other.pid as number);
    };
    const created = await viaCreator("POST", "/v1/bots/race-marked/computer");
    expect(created.status, JSON.stringify(created.json)).toBe(409);
    expect(created.json.error.code).toBe("bot_deleting");
    expect(created.json.error.message).toContain("nothing was sent to boat.dev");
    expect(sim.stats().createsCommitted).toBe(createsBefore);
    // The key it journaled was its own and never sent: it is gone, so the deletion finds nothing open.
    other.kill("SIGKILL");
    const deleted = await viaDeleter("DELETE", "/v1/bots/race-marked");
    expect(deleted.status, JSON.stringify(deleted.json)).toBe(200);
    expect(await boatsOf("race-marked")).toEqual([]);
  });

  it("the create's key journaled first: the deletion sees it and keeps the bot (unmarked); the create completes", async () => {
    await newBot("race-kept");
    let deleted: Awaited<ReturnType<Api>> | undefined;
    interleave.beforeStillWanted = async () => {
      deleted = await viaDeleter("DELETE", "/v1/bots/race-kept");
    };
    const created = await viaCreator("POST", "/v1/bots/race-kept/computer");
    expect(deleted?.status, JSON.stringify(deleted?.json)).toBe(409);
    expect(deleted?.json.error.code).toBe("create_unresolved");
    expect(created.status, JSON.stringify(created.json)).toBe(201);
    const bot = await openBotRegistry(tmp.dir).get("race-kept");
    expect(bot).not.toBeNull();
    expect(bot?.deletions).toBeUndefined();
    expect(await boatsOf("race-kept")).toHaveLength(1);
    // Deleting it now deletes its Boat first, with the name.
    const name = created.json.computer.name as string;
    const gone = await viaDeleter("DELETE", "/v1/bots/race-kept", { confirmName: name });
    expect(gone.status, JSON.stringify(gone.json)).toBe(200);
    expect(await boatsOf("race-kept")).toEqual([]);
  });

  it("a Boat already gone when its bot is deleted takes its create row along: a new bot under the id has no computer", async () => {
    // Its Boat deleted in boat.dev behind drydock's back: a deletion reads boat.dev (and a test steps in).
    await botWithGoneBoat("race-row");
    const deleted = await viaDeleter("DELETE", "/v1/bots/race-row");
    expect(deleted.status, JSON.stringify(deleted.json)).toBe(200);
    await newBot("race-row");
    const view = await viaCreator("GET", "/v1/bots/race-row/computer");
    expect(view.json.computer.status).toBe("none");
  });

  it("a mark left by a server killed in its DELETE is no deletion under way: a create clears it and goes on", async () => {
    await newBot("race-stale");
    // What a DELETE killed after marking leaves: the mark, naming a process that no longer runs.
    const dead = spawnSync(process.execPath, ["-e", ""]).pid as number;
    const file = join(tmp.dir, "bots.json");
    const doc = JSON.parse(readFileSync(file, "utf8"));
    for (const bot of doc.bots)
      if (bot.botId === "race-stale")
        Object.assign(bot, { deletingSince: Date.now(), deletingBy: { pid: dead } });
    writeFileSync(file, `${JSON.stringify(doc, null, 2)}\n`);
    const created = await viaCreator("POST", "/v1/bots/race-stale/computer");
    expect(created.status, JSON.stringify(created.json)).toBe(201);
    const bot = await openBotRegistry(tmp.dir).get("race-stale");
    expect(bot?.deletions).toBeUndefined();
    // A live marker's mark still refuses.
    await newBot("race-live");
    const other = sleeper();
    try {
      await writeMark("race-live", other.pid as number);
      const refused = await viaCreator("POST", "/v1/bots/race-live/computer");
      expect(refused.status).toBe(409);
      expect(refused.json.error.code).toBe("bot_deleting");
      expect(refused.json.error.message).toContain(`by process ${other.pid}, which still runs`);
    } finally {
      other.kill("SIGKILL");
    }
  });

  it("a DELETE that keeps the bot removes only its own mark: another server's DELETE under way keeps refusing creates", async () => {
    await newBot("race-two");
    const other = sleeper();
    try {
      const mark = await writeMark("race-two", other.pid as number);
      // This server's DELETE keeps the bot (a create it cannot settle is open).
      const { request } = await openBoatCreateJournal({ dataDir: tmp.dir }).beginBoatCreate("race-two", "{}");
      const kept = await viaDeleter("DELETE", "/v1/bots/race-two");
      expect(kept.status, JSON.stringify(kept.json)).toBe(409);
      expect(kept.json.error.code).toBe("create_unresolved");
      expect((await openBotRegistry(tmp.dir).get("race-two"))?.deletions).toEqual([mark]);
      await openBoatCreateJournal({ dataDir: tmp.dir }).discardBoatCreate(request);
      const refused = await viaCreator("POST", "/v1/bots/race-two/computer");
      expect(refused.status).toBe(409);
      expect(refused.json.error.code).toBe("bot_deleting");
    } finally {
      other.kill("SIGKILL");
    }
  });

  it("a DELETE holds its own mark while it runs: another DELETE's mark going away lets no create through", async () => {
    // Its Boat deleted in boat.dev behind drydock's back: a deletion reads boat.dev (and a test steps in).
    await botWithGoneBoat("race-multi");
    const other = sleeper();
    try {
      // Another server's DELETE of the bot was under way first.
      const otherMark = await writeMark("race-multi", other.pid as number);
      const createsBefore = sim.stats().createsCommitted;
      let during: Awaited<ReturnType<Api>> | undefined;
      interleave.duringDeletersFind = async () => {
        interleave.duringDeletersFind = undefined;
        // That other DELETE fails and removes its mark; a create arrives meanwhile.
        await openBotRegistry(tmp.dir).unmarkDeleting("race-multi", otherMark);
        during = await viaCreator("POST", "/v1/bots/race-multi/computer");
      };
      const deleted = await viaDeleter("DELETE", "/v1/bots/race-multi");
      expect(deleted.status, JSON.stringify(deleted.json)).toBe(200);
      expect(during?.status, JSON.stringify(during?.json)).toBe(409);
      expect(during?.json.error.code).toBe("bot_deleting");
      // No Boat was created for the bot that is now gone.
      expect(sim.stats().createsCommitted).toBe(createsBefore);
      expect(await boatsOf("race-multi")).toEqual([]);
      expect((await viaDeleter("GET", "/v1/recovery")).json.open).toBe(0);
    } finally {
      other.kill("SIGKILL");
    }
  });

  it("a create sent to the very server whose DELETE is running never drops that DELETE's mark", async () => {
    // Its Boat deleted in boat.dev behind drydock's back: a deletion reads boat.dev (and a test steps in).
    await botWithGoneBoat("race-self");
    const createsBefore = sim.stats().createsCommitted;
    let sameServer: Awaited<ReturnType<Api>> | undefined;
    let otherServer: Awaited<ReturnType<Api>> | undefined;
    interleave.duringDeletersFind = async () => {
      interleave.duringDeletersFind = undefined;
      // The same server: busy with the bot (409); its running DELETE's mark must stay.
      sameServer = await viaDeleter("POST", "/v1/bots/race-self/computer");
      // So another server's create is still refused.
      otherServer = await viaCreator("POST", "/v1/bots/race-self/computer");
    };
    const deleted = await viaDeleter("DELETE", "/v1/bots/race-self");
    expect(deleted.status, JSON.stringify(deleted.json)).toBe(200);
    expect(sameServer?.status).toBe(409);
    expect(sameServer?.json.error.code).toBe("bot_busy");
    expect(otherServer?.status, JSON.stringify(otherServer?.json)).toBe(409);
    expect(otherServer?.json.error.code).toBe("bot_deleting");
    expect(sim.stats().createsCommitted).toBe(createsBefore);
    expect(await boatsOf("race-self")).toEqual([]);
  });
});

/** A bot with a computer, whose Boat was then deleted in boat.dev behind drydock's back (its row stays). */
async function botWithGoneBoat(botId: string): Promise<void> {
  await newBot(botId);
  const created = await viaCreator("POST", `/v1/bots/${botId}/computer`);
  expect(created.status).toBe(201);
  const boxId = created.json.computer.boxId as string;
  const boatDev = createBoatClient({ baseUrl: sim.apiUrl, token: sim.token });
  let operation = await boatDev.deleteSandbox(boxId);
  while (operation.status !== "completed")
    operation = await boatDev.getDeletionOperation(operation.id, { targetId: boxId });
}

/** A process that runs (sleeps) until killed: the "other server" a mark can name. */
function sleeper() {
  return spawn(process.execPath, ["-e", "setTimeout(() => {}, 60_000)"], { stdio: "ignore" });
}

/** Adds to the bot a deletion mark naming `pid`, as another server's DELETE writes it; returns the mark. */
async function writeMark(botId: string, pid: number) {
  const file = join(tmp.dir, "bots.json");
  const doc = JSON.parse(readFileSync(file, "utf8"));
  const mark = { id: randomUUID(), instance: randomUUID(), since: Date.now(), by: { pid } };
  for (const bot of doc.bots) if (bot.botId === botId) bot.deletions = [...(bot.deletions ?? []), mark];
  writeFileSync(file, `${JSON.stringify(doc, null, 2)}\n`);
  return mark;
}
