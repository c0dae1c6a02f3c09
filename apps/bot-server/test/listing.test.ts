import { KEY_RETENTION_MS, KEY_SAFETY_MARGIN_MS, openBoatCreateJournal } from "@drydock/boat-create-journal";
import { openBoatDeleteJournal } from "@drydock/boat-delete-journal";
import { CREATE_REQUEST_BODY } from "@drydock/boat-lifecycle";
import { openStorage, type Storage } from "@drydock/storage";
import { sqliteBackend } from "@drydock/storage-sqlite";
import { afterAll, describe, expect, it, vi } from "vitest";
import { openBotRegistry } from "../src/bots.js";
import type { RunningServer } from "../src/server.js";
import { api, inProcessServer } from "./helpers.js";

// GET /v1/bots keeps each page it rendered while nothing in it changed: on file, while bots.json and both
// journals hand out the same rows; on sqlite, while the storage's change token (SQLite's data_version and
// the server's own commits) stands still, without reading a row. These tests change each input behind the
// server's back, the way another process (the drydock CLI, a second server) would: every instance below is
// a fresh one with caches (and, on sqlite, a database connection) of its own, sharing nothing with the
// server's but the data directory. Each change must show in the very next GET.

type Listed = { botId: string; name: string; computer: { status: string; boxId?: string; problem?: string } };

/**
 * Another instance of the registry and the journals on the server's data directory, as another process has
 * (on sqlite a Storage of its own: its own connection), with its own clock when `now` is given.
 */
interface Elsewhere {
  bots: Pick<Storage["bots"], "create" | "remove">;
  creates: Pick<
    Storage["createJournal"],
    "beginBoatCreate" | "discardBoatCreate" | "rememberCreatedBoat" | "retireDeletedBoatCreate"
  >;
  deletions: Pick<
    Storage["deleteJournal"],
    "prepareBoatDeletion" | "markBoatDeletionBlocked" | "retireBoatDeletion"
  >;
}

for (const storage of ["file", "sqlite"] as const) {
  describe(`GET /v1/bots follows every change, whoever makes it (${storage})`, () => {
    let server: RunningServer;
    const opened: Storage[] = [];
    const tmp = inProcessServer(
      `listing-${storage}`,
      (started) => {
        server = started;
      },
      { DRYDOCK_STORAGE: storage },
    );
    afterAll(async () => {
      for (const s of opened) await s.close();
    });
    const elsewhere = async (now?: () => number): Promise<Elsewhere> => {
      if (storage === "file") {
        return {
          bots: openBotRegistry(tmp.dir),
          creates: openBoatCreateJournal({ dataDir: tmp.dir, ...(now ? { now } : {}) }),
          deletions: openBoatDeleteJournal({ dataDir: tmp.dir }),
        };
      }
      const other = await openStorage({
        dataDir: tmp.dir,
        storage: "sqlite",
        backends: { sqlite: sqliteBackend },
        ...(now ? { now } : {}),
      });
      opened.push(other);
      return { bots: other.bots, creates: other.createJournal, deletions: other.deleteJournal };
    };

    it("the server runs on the backend this suite is named for", () => {
      expect(server.storage.kind).toBe(storage);
    });

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
      await (await elsewhere()).bots.create({ botId: "bea", name: "Bea" });
      expect(await list()).toEqual({ ada: { status: "none" }, bea: { status: "none" } });

      // A computer provisioned through the server.
      const created = await call("POST", "/v1/bots/ada/computer");
      expect(created.status).toBe(201);
      const { boxId, name } = created.json.computer as { boxId: string; name: string };
      expect((await list()).ada).toEqual({ status: "ready", boxId, name });

      // An interrupted create of another bot, journaled by another instance.
      const { creates } = await elsewhere();
      const { request } = await creates.beginBoatCreate("bea", JSON.stringify({ name: "x" }));
      expect((await list()).bea).toMatchObject({ status: "needs_attention" });

      // A deletion fence for ada's Boat, then boat.dev refusing it, then the fence retired: each shows.
      const { deletions } = await elsewhere();
      await deletions.prepareBoatDeletion({ boxId, name, ownerBotId: "ada" });
      expect((await list()).ada).toEqual({ status: "deleting", boxId, name });
      await deletions.markBoatDeletionBlocked(boxId);
      expect((await list()).ada).toMatchObject({ status: "needs_attention", boxId, name });
      await deletions.retireBoatDeletion(boxId);
      expect((await list()).ada).toEqual({ status: "ready", boxId, name });

      // The interrupted create discarded by the other instance, and a bot removed by it.
      await creates.discardBoatCreate(request);
      expect((await list()).bea).toEqual({ status: "none" });
      await (await elsewhere()).bots.remove("bea");
      expect(Object.keys(await list())).toEqual(["ada"]);
    });

    it("a name outside ASCII is sent as UTF-8 with its byte length, first rendered and then from the memo", async () => {
      const call = api(server.url, server.token);
      const name = "Zoë 🚢 Ünal";
      expect((await call("POST", "/v1/bots", { name, botId: "zoe" })).status).toBe(201);
      for (const round of ["rendered", "memo"]) {
        const res = await fetch(`${server.url}/v1/bots?limit=500`, {
          headers: { authorization: `Bearer ${server.token}` },
        });
        const bytes = Buffer.from(await res.arrayBuffer());
        expect(res.headers.get("content-type"), round).toBe("application/json; charset=utf-8");
        expect(Number(res.headers.get("content-length")), round).toBe(bytes.length);
        const listed = (JSON.parse(bytes.toString("utf8")) as { bots: Listed[] }).bots;
        expect(listed.find((b) => b.botId === "zoe")?.name, round).toBe(name);
      }
      await (await elsewhere()).bots.remove("zoe");
    });

    it("an interrupted create turns 'no longer retried' at its key's deadline, even while the listing is unchanged", async () => {
      const call = api(server.url, server.token);
      const problemOf = async (botId: string): Promise<string> => {
        const bots = (await call("GET", "/v1/bots")).json.bots as Listed[];
        return bots.find((b) => b.botId === botId)?.computer.problem ?? "";
      };
      await (await elsewhere()).bots.create({ botId: "cyd", name: "Cyd" });
      // Journaled by an instance whose clock says the create started one second before its key's deadline
      // (boat.dev's 24 hours less the 1-hour safety margin).
      const startedAt = Date.now() - (KEY_RETENTION_MS - KEY_SAFETY_MARGIN_MS) + 1_000;
      const old = (await elsewhere(() => startedAt)).creates;
      const { request } = await old.beginBoatCreate("cyd", "{}");
      expect(await problemOf("cyd")).toMatch(/interrupted/);
      expect(await problemOf("cyd")).toMatch(/interrupted/);
      try {
        // Two seconds later nothing on disk has changed, but the answer has.
        vi.setSystemTime(Date.now() + 2_000);
        expect(await problemOf("cyd")).toMatch(/24-hour retry window, so drydock will not retry it/);
      } finally {
        vi.useRealTimers();
      }
      // Leave no row that expires during the next test.
      await old.discardBoatCreate(request);
    });

    it("a create row with a remembered Boat id is never 'not retried', however old: it needs no key", async () => {
      const call = api(server.url, server.token);
      await (await elsewhere()).bots.create({ botId: "dee", name: "Dee" });
      const startedAt = Date.now() - KEY_RETENTION_MS - 1_000;
      const old = (await elsewhere(() => startedAt)).creates;
      const { request } = await old.beginBoatCreate("dee", "{}");
      await old.rememberCreatedBoat(request, "bx_abcdefgh");
      const bots = (await call("GET", "/v1/bots")).json.bots as Listed[];
      const problem = bots.find((b) => b.botId === "dee")?.computer.problem ?? "";
      expect(problem).toMatch(/interrupted/);
      expect(problem).not.toMatch(/will not retry it/);
      await old.retireDeletedBoatCreate("bx_abcdefgh");
    });

    it("a provision in flight shows as provisioning even when no file changes, then ready", async () => {
      const call = api(server.url, server.token);
      const sim = server.simulator;
      if (!sim) throw new Error("the test server runs the embedded simulator");
      const statusOf = async (botId: string) =>
        ((await call("GET", "/v1/bots")).json.bots as Listed[]).find((b) => b.botId === botId)?.computer
          .status;
      await call("POST", "/v1/bots", { name: "Dee", botId: "dee" });
      // An interrupted create, journaled by another instance with the very body the server sends: the
      // server's provision reuses its key without writing, so the only change while it runs is in-process.
      await (await elsewhere()).creates.beginBoatCreate("dee", JSON.stringify(CREATE_REQUEST_BODY));
      expect(await statusOf("dee")).toBe("needs_attention");
      // boat.dev answers the create after 1.5 s: long enough to look at the listing meanwhile.
      const rules = [{ action: "delay", method: "POST", path: "/sandboxes$", ms: 1_500, times: 1 }];
      const armed = await fetch(`${sim.url}/_sim/faults`, {
        method: "POST",
        headers: { authorization: `Bearer ${sim.token}`, "content-type": "application/json" },
        body: JSON.stringify({ rules }),
      });
      expect(armed.status).toBe(200);
      const provision = call("POST", "/v1/bots/dee/computer");
      let seen: string | undefined;
      const deadline = Date.now() + 10_000;
      while (seen !== "provisioning" && Date.now() < deadline) {
        seen = await statusOf("dee");
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect(seen).toBe("provisioning");
      expect([200, 201]).toContain((await provision).status);
      expect(await statusOf("dee")).toBe("ready");
    });
  });
}
