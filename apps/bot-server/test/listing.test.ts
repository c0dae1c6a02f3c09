import { openBoatCreateJournal } from "@drydock/boat-create-journal";
import { openBoatDeleteJournal } from "@drydock/boat-delete-journal";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openBotRegistry } from "../src/bots.js";
import { loadConfig } from "../src/config.js";
import { type RunningServer, startServer } from "../src/server.js";
import { api, tempDir } from "./helpers.js";

// GET /v1/bots reads bots.json and both journals without their locks and keeps its last rendered body
// while nothing in it changed. These tests change each input behind the server's back, the way another
// process (the drydock CLI, a second server) would: every `open…` below is a fresh instance with caches of
// its own, sharing nothing with the server's but the files. Each change must show in the very next GET.

let server: RunningServer;
const tmp = tempDir("listing");

beforeAll(async () => {
  server = await startServer(loadConfig({ DRYDOCK_DATA_DIR: tmp.dir, PORT: "0", LOG_LEVEL: "silent" }), {
    print: () => {},
  });
  await server.startup;
});

afterAll(async () => {
  await server?.close();
  tmp.cleanup();
});

type Listed = { botId: string; name: string; computer: { status: string; boxId?: string; problem?: string } };

describe("GET /v1/bots follows every change, whoever makes it", () => {
  it("bots, create rows and deletion fences written by another instance show in the next listing", async () => {
    const call = api(server.url, server.token);
    const list = async (): Promise<Record<string, Listed["computer"]>> => {
      const res = await call("GET", "/v1/bots");
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toBe("application/json; charset=utf-8");
      const bots = res.json.bots as Listed[];
      // The listing and the per-bot route render the same view.
      for (const bot of bots) {
        const one = await call("GET", `/v1/bots/${bot.botId}`);
        expect(one.json.bot).toEqual(bot);
      }
      return Object.fromEntries(bots.map((b) => [b.botId, b.computer]));
    };

    expect((await call("POST", "/v1/bots", { name: "Ada", botId: "ada" })).status).toBe(201);
    expect(await list()).toEqual({ ada: { status: "none" } });
    // Polled twice unchanged: the same answer.
    expect(await list()).toEqual({ ada: { status: "none" } });

    // A bot added by another registry instance.
    await openBotRegistry(tmp.dir).create({ botId: "bea", name: "Bea" });
    expect(await list()).toEqual({ ada: { status: "none" }, bea: { status: "none" } });

    // A computer provisioned through the server.
    const created = await call("POST", "/v1/bots/ada/computer");
    expect(created.status).toBe(201);
    const { boxId, name } = created.json.computer as { boxId: string; name: string };
    expect((await list()).ada).toEqual({ status: "ready", boxId, name });

    // An interrupted create of another bot, journaled by another instance.
    const creates = openBoatCreateJournal({ dataDir: tmp.dir });
    const { request } = await creates.beginBoatCreate("bea", JSON.stringify({ name: "x" }));
    expect((await list()).bea).toMatchObject({ status: "needs_attention" });

    // A deletion fence for ada's Boat, then boat.dev refusing it, then the fence retired: each shows.
    const deletions = openBoatDeleteJournal({ dataDir: tmp.dir });
    await deletions.prepareBoatDeletion({ boxId, name, ownerBotId: "ada" });
    expect((await list()).ada).toEqual({ status: "deleting", boxId, name });
    await deletions.markBoatDeletionBlocked(boxId);
    expect((await list()).ada).toMatchObject({ status: "needs_attention", boxId, name });
    await deletions.retireBoatDeletion(boxId);
    expect((await list()).ada).toEqual({ status: "ready", boxId, name });

    // The interrupted create discarded by the other instance, and a bot removed by it.
    await creates.discardBoatCreate(request);
    expect((await list()).bea).toEqual({ status: "none" });
    await openBotRegistry(tmp.dir).remove("bea");
    expect(Object.keys(await list())).toEqual(["ada"]);
  });
});
