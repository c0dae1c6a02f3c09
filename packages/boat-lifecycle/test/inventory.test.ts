import { openBoatDeleteJournal } from "@drydock/boat-delete-journal";
import { afterEach, describe, expect, it } from "vitest";
import { inventoryItemSchema, legacyBoatName, scopedBoatName } from "../src/index.js";
import { createOutside, deletes, ENV_ID, type Harness, harness, rejection } from "./helpers.js";

let h: Harness | undefined;
const use = async (options?: Parameters<typeof harness>[0]) => {
  h = await harness(options);
  return h;
};
afterEach(async () => {
  await h?.close();
  h = undefined;
});

const lists = (t: Harness) => t.wire.filter((r) => r.method === "GET" && r.path.startsWith("/sandboxes?"));
const reads = (t: Harness) => t.wire.filter((r) => r.method === "GET" && r.path.startsWith("/sandboxes/bx_"));

describe("inventory", () => {
  it("is sanitized: ids, names, states and recovery facts only; one list walk with limit=200", async () => {
    const t = await use();
    const { boxId, name } = await t.lifecycle.provision("bot-1");
    t.wire.length = 0;
    const items = await t.lifecycle.inventory();
    expect(items).toEqual([
      {
        boxId,
        name,
        ownerBotId: "bot-1",
        state: "running",
        available: true,
        naming: "scoped",
        remembered: true,
      },
    ]);
    for (const item of items) expect(inventoryItemSchema.strict().safeParse(item).success).toBe(true);
    expect(JSON.stringify(items)).not.toMatch(/idempotency|ttl|token|requestBody/i);
    expect(lists(t).map((r) => r.path)).toEqual(["/sandboxes?limit=200"]);
  });

  it("empty provider: an empty list; list 503: provider_unavailable", async () => {
    const t = await use();
    expect(await t.lifecycle.inventory()).toEqual([]);
    await t.faults({ method: "GET", path: "^/sandboxes$", action: "fail-before", status: 503 });
    expect(await rejection(t.lifecycle.inventory())).toMatchObject({
      code: "provider_unavailable",
      status: 503,
    });
  });

  it("a remembered Boat the lagging list omits stays visible (one direct read, journal not grown)", async () => {
    const t = await use({ sim: { listLagMs: 3_600_000 } });
    const { boxId } = await t.lifecycle.provision("bot-1");
    const before = JSON.stringify(t.createFile());
    t.wire.length = 0;
    const items = await t.lifecycle.inventory();
    expect(items).toEqual([
      expect.objectContaining({ boxId, ownerBotId: "bot-1", available: true, remembered: true }),
    ]);
    expect(reads(t)).toHaveLength(1);
    expect(JSON.stringify(t.createFile())).toBe(before);
  });

  it("an adopted legacy Boat stays visible when the list omits it", async () => {
    const t = await use({ sim: { listLagMs: 60_000 } });
    const boxId = await createOutside(t, legacyBoatName("bot-1"));
    t.sim.advanceClock(61_000); // now listed
    await t.lifecycle.provision("bot-1"); // adopts
    // A second, lagging view: a fresh list that omits the Boat (another listing shard, say).
    t.tamper(async (request, response) => {
      if (request.path.startsWith("/sandboxes?")) {
        return new Response(JSON.stringify({ ok: true, sandboxes: [], pageInfo: { nextCursor: null } }), {
          status: 200,
          headers: { "content-type": "application/json" },
        });
      }
      return response;
    });
    const rows = t.createFile()?.requests.length;
    const items = await t.lifecycle.inventory();
    expect(items).toEqual([
      expect.objectContaining({ boxId, naming: "legacy", ownerBotId: "bot-1", available: true }),
    ]);
    expect(t.createFile()?.requests.length).toBe(rows);
  });

  it("an omitted remembered id proven gone by a direct 404/410 is retired", async () => {
    const t = await use();
    const { boxId } = await t.lifecycle.provision("bot-1");
    const op = await t.outside.deleteSandbox(boxId);
    await t.outside.getDeletionOperation(op.id);
    await t.outside.getDeletionOperation(op.id);
    expect(await t.lifecycle.inventory()).toEqual([]);
    expect(t.createFile()?.requests).toEqual([]);
  });

  it("a remembered Boat renamed away is shown unavailable with a repair hint", async () => {
    const t = await use();
    const { boxId } = await t.lifecycle.provision("bot-1");
    await t.outside.renameSandbox(boxId, "hand-renamed");
    const [item] = await t.lifecycle.inventory();
    expect(item).toMatchObject({ boxId, available: false, name: "hand-renamed" });
    expect(item?.problem).toContain("repair it in boat.dev");
  });

  it("legacy names are attributed to known bots; foreign and ownerless names are hidden", async () => {
    const t = await use({ knownBotIds: () => ["bot-legacy"] });
    const legacy = await createOutside(t, legacyBoatName("bot-legacy"));
    await createOutside(t, legacyBoatName("unknown-bot"));
    await createOutside(t, scopedBoatName("another-installation", "bot-1"));
    await createOutside(t, "my-own-vm");
    await createOutside(t, null);
    const items = await t.lifecycle.inventory();
    expect(items).toEqual([
      expect.objectContaining({ boxId: legacy, ownerBotId: "bot-legacy", naming: "legacy", available: true }),
    ]);
  });

  it("a Boat with this installation's name that no bot claims is shown as an orphan (unavailable)", async () => {
    const t = await use();
    const orphan = await createOutside(t, scopedBoatName(ENV_ID, "gone-bot"));
    const items = await t.lifecycle.inventory();
    expect(items).toEqual([expect.objectContaining({ boxId: orphan, ownerBotId: null, available: false })]);
    expect(items[0]?.problem).toContain("no bot of this installation claims");
  });

  it("two Boats for one bot: both unavailable", async () => {
    const t = await use();
    const { boxId } = await t.lifecycle.provision("bot-1");
    const second = await createOutside(t, legacyBoatName("bot-1"));
    const items = await t.lifecycle.inventory();
    expect(items.map((i) => i.boxId).sort()).toEqual([boxId, second].sort());
    for (const item of items) {
      expect(item.available).toBe(false);
      expect(item.problem).toContain("two cloud computers claim bot bot-1");
    }
  });

  it("pending deletion + stale list: shown as removing; findBoat fenced; a second delete sends no DELETE; completion clears both journals", async () => {
    const t = await use({ sim: { deletionPolls: 12, listLagMs: 3_600_000 } });
    const { boxId, name } = await t.lifecycle.provision("bot-1");
    t.sim.advanceClock(3_600_001);
    expect(await t.lifecycle.deleteBoat({ boxId, confirmName: name, ownerBotId: "bot-1" })).toMatchObject({
      pending: true,
    });
    const [item] = await t.lifecycle.inventory();
    expect(item).toMatchObject({ boxId, state: "removing", deletion: { phase: "accepted" } });
    expect((await rejection(t.lifecycle.findBoat("bot-1"))).code).toBe("computer_deleting");
    t.wire.length = 0;
    expect(await t.lifecycle.deleteBoat({ boxId, confirmName: name, ownerBotId: "bot-1" })).toMatchObject({
      pending: true,
    });
    expect(deletes(t)).toHaveLength(0);
    for (let i = 0; i < 20 && (await t.lifecycle.inventory()).length > 0; i += 1) {}
    // The list still shows the deleted Boat (lag), yet the proven deletion hides it and clears both journals.
    expect(t.sim.stats().live).toBe(0);
    expect(await t.lifecycle.inventory()).toEqual([]);
    expect(t.createFile()?.requests).toEqual([]);
    expect(t.deleteFile()?.records).toEqual([]);
  });

  it("an ownerless fence without a create row stays visible as removing", async () => {
    const t = await use({ sim: { deletionPolls: 50 } });
    const boxId = await createOutside(t, "orphan-by-hand");
    const journal = openBoatDeleteJournal({ dataDir: t.dataDir });
    await journal.prepareBoatDeletion({ boxId, name: "orphan-by-hand", ownerBotId: null });
    await journal.markBoatDeletionAccepted(boxId, await t.outside.deleteSandbox(boxId));
    const items = await t.lifecycle.inventory();
    expect(items).toEqual([
      expect.objectContaining({
        boxId,
        ownerBotId: null,
        state: "removing",
        available: true,
        remembered: false,
      }),
    ]);
  });

  it("a malformed id in the list fails closed: inventory unavailable, provisioning never POSTs", async () => {
    const t = await use();
    t.tamper(async (request, response) => {
      if (!request.path.startsWith("/sandboxes?")) return response;
      const body = {
        ok: true,
        sandboxes: [
          {
            id: "bx_BAD!",
            name: t.lifecycle.boatNameFor("bot-1"),
            state: "running",
            createdAt: new Date().toISOString(),
            ttlSeconds: 28_800,
          },
        ],
        pageInfo: { nextCursor: null },
      };
      return new Response(JSON.stringify(body), {
        status: 200,
        headers: { "content-type": "application/json" },
      });
    });
    expect(await rejection(t.lifecycle.inventory())).toMatchObject({
      code: "provider_unavailable",
      status: 503,
    });
    expect(await rejection(t.lifecycle.provision("bot-1"))).toMatchObject({
      code: "provider_unavailable",
      status: 503,
    });
    expect(t.wire.filter((r) => r.method === "POST")).toHaveLength(0);
    expect(t.createFile()).toBeNull();
  });

  it("a list cursor handed back twice is refused: inventory unavailable rather than incomplete", async () => {
    const t = await use();
    t.tamper(async (request, response) => {
      if (!request.path.startsWith("/sandboxes?")) return response;
      return new Response(
        JSON.stringify({ ok: true, sandboxes: [], pageInfo: { nextCursor: "same-cursor" } }),
        {
          status: 200,
          headers: { "content-type": "application/json" },
        },
      );
    });
    const error = await rejection(t.lifecycle.inventory());
    expect(error).toMatchObject({ code: "provider_unavailable", status: 503 });
    expect(lists(t)).toHaveLength(2);
  });

  it("provisioning finds the bot's Boat on a later list page (no POST)", async () => {
    const t = await use();
    const boxId = await createOutside(t, legacyBoatName("bot-1"));
    t.tamper(async (request, response) => {
      if (!request.path.startsWith("/sandboxes?")) return response;
      if (!request.path.includes("cursor=")) {
        // Page 1: nothing of ours, and a cursor to page 2.
        return new Response(JSON.stringify({ ok: true, sandboxes: [], pageInfo: { nextCursor: "page-2" } }), {
          status: 200,
          headers: { "content-type": "application/json" },
        });
      }
      // Page 2: the provider's real listing.
      return fetch(`${t.sim.apiUrl}/sandboxes?limit=200`, {
        headers: { authorization: `Bearer ${t.sim.token}` },
      });
    });
    const result = await t.lifecycle.provision("bot-1");
    expect(result).toMatchObject({ boxId, createdThisAttempt: false });
    expect(lists(t).map((r) => r.path)).toEqual([
      "/sandboxes?limit=200",
      "/sandboxes?limit=200&cursor=page-2",
    ]);
    expect(t.wire.filter((r) => r.method === "POST")).toHaveLength(0);
  });

  it("deleting works while the list omits the Boat (read, DELETE — no list needed)", async () => {
    const t = await use({ sim: { listLagMs: 3_600_000 } });
    const { boxId, name } = await t.lifecycle.provision("bot-1");
    t.wire.length = 0;
    expect(await t.lifecycle.deleteBoat({ boxId, confirmName: name, ownerBotId: "bot-1" })).toEqual({
      ok: true,
    });
    expect(t.wire[0]).toMatchObject({ method: "GET", path: `/sandboxes/${boxId}` });
    expect(deletes(t)).toHaveLength(1);
  });
});
