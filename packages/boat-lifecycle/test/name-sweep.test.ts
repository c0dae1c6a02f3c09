import { openBoatCreateJournal } from "@drydock/boat-create-journal";
import { describe, expect, it, vi } from "vitest";
import { LIFECYCLE_MESSAGES, legacyBoatName, scopedBoatName } from "../src/index.js";
import { ENV_ID, type Harness, harnessPerTest, posts, rejection } from "./helpers.js";

/**
 * The deterministic-name lookup at a cost that does not grow with the account (issue #23): one complete
 * walk of boat.dev's list (the name sweep), then O(1) lookups; an incomplete walk never proves absence.
 * Accounts of thousands of Boats are seeded through the simulator's test-only `POST /_sim/sandboxes`.
 */

const use = harnessPerTest();

/** The list requests the lifecycle sent (GET /sandboxes?...), by path. */
const lists = (t: Harness) =>
  t.wire.filter((r) => r.method === "GET" && r.path.startsWith("/sandboxes?")).map((r) => r.path);

const foreign = (t: Harness, count: number, prefix = "someone-else-") =>
  t.sim.seed({ count, namePrefix: prefix });

/** `count` foreign names, for one seeding call whose list order is exactly its array's. */
const others = (count: number, prefix = "someone-else-") =>
  Array.from({ length: count }, (_, i) => `${prefix}${i}`);

describe("name sweep: provisioning in an account of thousands of Boats", () => {
  it("2,100 foreign Boats: provisioning works, and after the sweep each provision sends no list request", async () => {
    const t = await use({ nameSweep: { inlinePages: 50 } });
    foreign(t, 2_100); // 11 pages of 200: more than the old 10-page cap
    const first = await t.lifecycle.provision("bot-0");
    expect(first.createdThisAttempt).toBe(true);
    expect(lists(t)).toHaveLength(11);
    expect(lists(t)[0]).toBe("/sandboxes?limit=200");
    expect(t.lifecycle.nameSweepStatus()).toMatchObject({ complete: true, pagesRead: 11, boatsSeen: 2_100 });

    for (let i = 1; i <= 20; i += 1) await t.lifecycle.provision(`bot-${i}`);
    // The number of list requests does not grow with provisions: still the sweep's 11.
    expect(lists(t)).toHaveLength(11);
    expect(t.stats().createsCommitted).toBe(21);
    for (let i = 0; i <= 20; i += 1) expect(t.stats().perName[scopedBoatName(ENV_ID, `bot-${i}`)]).toBe(1);
    // Provisioning an already provisioned bot: the journal's id, one direct read, no list.
    t.wire.length = 0;
    expect(await t.lifecycle.provision("bot-7")).toMatchObject({ createdThisAttempt: false });
    expect(t.wire.map((r) => `${r.method} ${r.path.replace(/bx_\w+/, "bx_")}`)).toEqual([
      "GET /sandboxes/bx_",
    ]);
  });

  it.each([
    ["scoped", (botId: string) => scopedBoatName(ENV_ID, botId)],
    ["legacy", (botId: string) => legacyBoatName(botId)],
  ])(
    "a %s-named Boat unknown to the journal on page 13 is found and adopted, never a second Boat",
    async (kind, nameOf) => {
      const t = await use(); // the default inline budget: 10 pages per call
      const name = nameOf("bot-deep");
      const deep = t.sim.seed({ names: [...others(2_500), name, ...others(500, "later-")] })[2_500];
      // Ten pages are not the whole list (the bot's Boat is on page 13): no answer from them, no create.
      const first = await rejection(t.lifecycle.provision("bot-deep"));
      expect(first).toMatchObject({ code: "name_sweep_incomplete", status: 503 });
      expect(posts(t)).toHaveLength(0);
      const result = await t.lifecycle.provision("bot-deep");
      expect(result).toEqual({ boxId: deep, name, createdThisAttempt: false });
      expect(posts(t)).toHaveLength(0);
      expect(t.stats().perName[name]).toBe(1);
      expect(t.stats().perName[scopedBoatName(ENV_ID, "bot-deep")] ?? 0).toBe(kind === "scoped" ? 1 : 0);
      expect(t.createFile()?.requests).toEqual([
        expect.objectContaining({ botId: "bot-deep", boxId: deep, resolved: true }),
      ]);
      expect(lists(t)).toHaveLength(16); // 3,001 Boats: the whole list, once
      // And a restart does not forget it: the journal's row answers, no list at all.
      t.wire.length = 0;
      expect(await t.restart().provision("bot-deep")).toEqual(result);
      expect(lists(t)).toHaveLength(0);
    },
  );

  it("two Boats with the bot's name (one deep): inventory_conflict, nothing created or adopted", async () => {
    const t = await use({ nameSweep: { inlinePages: 50 } });
    const name = scopedBoatName(ENV_ID, "bot-1");
    const ids = t.sim.seed({ names: [name, ...others(2_200), legacyBoatName("bot-1")] });
    const [a, b] = [ids[0], ids[2_201]];
    const error = await rejection(t.lifecycle.provision("bot-1"));
    expect(error).toMatchObject({ code: "inventory_conflict", status: 503 });
    expect(error.message).toContain([a, b].sort().join(", "));
    expect(posts(t)).toHaveLength(0);
    expect(t.createFile()).toBeNull();
  });

  it("index entries the direct read disproves are dropped: a renamed or deleted Boat is not adopted", async () => {
    const t = await use({ nameSweep: { inlinePages: 50 } });
    const [renamed, deleted] = t.sim.seed({
      names: [scopedBoatName(ENV_ID, "bot-r"), scopedBoatName(ENV_ID, "bot-d")],
    });
    await t.lifecycle.provision("bot-0"); // completes the sweep: both are indexed
    expect(t.lifecycle.nameSweepStatus()).toMatchObject({ complete: true, indexed: 3 }); // the two listed + bot-0's, named by this lifecycle
    await t.outside.renameSandbox(renamed as string, "renamed-by-someone");
    const op = await t.outside.deleteSandbox(deleted as string);
    await t.outside.getDeletionOperation(op.id);
    expect((await t.outside.getDeletionOperation(op.id)).status).toBe("completed");

    const r = await t.lifecycle.provision("bot-r");
    const d = await t.lifecycle.provision("bot-d");
    expect(r.boxId).not.toBe(renamed);
    expect(d.boxId).not.toBe(deleted);
    expect([r.createdThisAttempt, d.createdThisAttempt]).toEqual([true, true]);
    // Neither stale entry is kept: the index holds the three Boats this lifecycle named, nothing else.
    expect(t.lifecycle.nameSweepStatus().indexed).toBe(3);
    expect(lists(t)).toHaveLength(1);
  });

  it("a Boat this lifecycle named stays findable by name when its journal row is lost while the process runs", async () => {
    const t = await use();
    const first = await t.lifecycle.provision("bot-1"); // the sweep completes before this Boat exists
    // A restored backup (or a row retired by hand) while the process runs: the journal forgets the Boat.
    await openBoatCreateJournal({ dataDir: t.dataDir }).retireDeletedBoatCreate(first.boxId);
    expect(t.createFile()?.requests).toEqual([]);
    const again = await t.lifecycle.provision("bot-1");
    expect(again).toEqual({ ...first, createdThisAttempt: false });
    expect(t.stats()).toMatchObject({ createsCommitted: 1, live: 1 });
    expect(lists(t)).toHaveLength(1);
  });
});

describe("name sweep: an incomplete listing never proves absence", () => {
  it("inline bound: 5,000 Boats, 3 pages per call — 503 name_sweep_incomplete until the sweep ends, then a Boat; no page read twice", async () => {
    const t = await use({ nameSweep: { inlinePages: 3 } });
    foreign(t, 5_000); // 25 pages
    const refusals: Array<{ code: string; status: number; message: string; retryAfterMs?: number }> = [];
    for (;;) {
      try {
        const result = await t.lifecycle.provision("bot-1");
        expect(result.createdThisAttempt).toBe(true);
        break;
      } catch (error) {
        refusals.push(error as (typeof refusals)[number]);
        // Nothing is created while the sweep is incomplete.
        expect(posts(t)).toHaveLength(0);
        expect(t.createFile()).toBeNull();
        if (refusals.length > 20) throw new Error("provisioning never succeeded");
      }
    }
    expect(refusals).toHaveLength(8); // pages 3, 6, …, 24 read; the 9th call reads page 25 and creates
    expect(refusals[0]).toMatchObject({ code: "name_sweep_incomplete", status: 503, retryAfterMs: 1_000 });
    expect(refusals[0]?.message).toBe(
      LIFECYCLE_MESSAGES.nameSweepIncomplete("3 pages (600 Boats) read so far"),
    );
    expect(refusals[0]?.message).toMatch(/^nothing was created/);
    expect(refusals[0]?.message).toContain("A retry continues from where it stopped");
    expect(refusals[7]?.message).toContain("24 pages (4800 Boats) read so far");
    const paths = lists(t);
    expect(paths).toHaveLength(25);
    expect(new Set(paths).size).toBe(25);
    expect(paths.filter((p) => !p.includes("cursor="))).toEqual(["/sandboxes?limit=200"]);
    expect(t.stats()).toMatchObject({ createsCommitted: 1, live: 5_001 });
  });

  it("inlinePages 0 without the background walk: each lookup still reads one page, so retries get there", async () => {
    const t = await use({ nameSweep: { inlinePages: 0 } });
    foreign(t, 401); // 3 pages
    expect(await rejection(t.lifecycle.provision("bot-1"))).toMatchObject({ code: "name_sweep_incomplete" });
    expect(await rejection(t.lifecycle.provision("bot-1"))).toMatchObject({ code: "name_sweep_incomplete" });
    expect(posts(t)).toHaveLength(0);
    expect((await t.lifecycle.provision("bot-1")).createdThisAttempt).toBe(true);
    expect(lists(t)).toHaveLength(3);
  });

  it("findBoat is bounded the same way and never answers 'no Boat' from a partial list", async () => {
    const t = await use({ nameSweep: { inlinePages: 2 } });
    const mine = t.sim.seed({ names: [...others(1_000), scopedBoatName(ENV_ID, "bot-1")] })[1_000];
    expect(await rejection(t.lifecycle.findBoat("bot-1"))).toMatchObject({ code: "name_sweep_incomplete" });
    expect(await rejection(t.lifecycle.findBoat("bot-1"))).toMatchObject({ code: "name_sweep_incomplete" });
    expect(await t.lifecycle.findBoat("bot-1")).toMatchObject({ boxId: mine });
  });

  it.each([
    [
      "fail-before 503",
      { action: "fail-before", status: 503 } as const,
      { code: "provider_unavailable", status: 503 },
    ],
    ["429 with Retry-After", { action: "rate-limit", retryAfterS: 7 } as const, { retryAfterMs: 7_000 }],
    [
      "a dropped connection",
      { action: "drop-before" } as const,
      { code: "provider_unavailable", status: 503 },
    ],
  ])(
    "a list fault mid-sweep (%s): typed 503 that says a retry continues; the retry reads on from the saved cursor",
    async (_name, fault, expected) => {
      const t = await use({ nameSweep: { inlinePages: 3 } });
      foreign(t, 1_500); // 8 pages
      expect(await rejection(t.lifecycle.provision("bot-1"))).toMatchObject({
        code: "name_sweep_incomplete",
      });
      expect(lists(t)).toHaveLength(3);
      await t.faults({ method: "GET", path: "^/sandboxes$", ...fault });
      const error = await rejection(t.lifecycle.provision("bot-1"));
      expect(error).toMatchObject({ code: "provider_unavailable", status: 503, ...expected });
      expect(error.message).toContain(LIFECYCLE_MESSAGES.listUnavailable);
      expect(error.message).toContain(
        "3 pages (600 Boats) read so far; a retry continues from where it stopped",
      );
      expect(posts(t)).toHaveLength(0);
      expect(t.createFile()).toBeNull();
      const failed = lists(t)[3];
      expect(failed).toContain("cursor=");

      // The retries continue from the failed page: it is asked again, and nothing before it.
      expect(await rejection(t.lifecycle.provision("bot-1"))).toMatchObject({
        code: "name_sweep_incomplete",
      });
      expect(lists(t)[4]).toBe(failed);
      const result = await t.lifecycle.provision("bot-1");
      expect(result.createdThisAttempt).toBe(true);
      const paths = lists(t);
      expect(paths).toHaveLength(9); // 8 pages + the one failed request
      expect(new Set(paths).size).toBe(8);
      expect(paths.filter((p) => !p.includes("cursor="))).toHaveLength(1);
      expect(t.stats()).toMatchObject({ createsCommitted: 1 });
    },
  );

  it("a saved cursor boat.dev refuses (400 invalid_cursor): typed 503, and the retry reads the list again from its start", async () => {
    const t = await use({ nameSweep: { inlinePages: 2 } });
    const mine = t.sim.seed({ names: [...others(700), legacyBoatName("bot-1")] })[700]; // 4 pages
    expect(await rejection(t.lifecycle.provision("bot-1"))).toMatchObject({ code: "name_sweep_incomplete" });
    let refused = false;
    t.tamper(async (request, response) => {
      if (refused || !request.path.includes("cursor=")) return response;
      refused = true;
      // boat.dev's own refusal of a cursor (the simulator's answer to one it never handed out).
      return fetch(`${t.sim.apiUrl}/sandboxes?limit=200&cursor=not-a-cursor-it-gave`, {
        headers: { authorization: `Bearer ${t.sim.token}` },
      });
    });
    const error = await rejection(t.lifecycle.provision("bot-1"));
    expect(error).toMatchObject({ code: "provider_unavailable", status: 503 });
    expect(error.message).toContain(
      "0 pages (0 Boats) read so far; boat.dev refused the saved position in its list, so a retry reads it again from the start",
    );
    expect(posts(t)).toHaveLength(0);
    expect(t.lifecycle.nameSweepStatus()).toMatchObject({ complete: false, pagesRead: 0 });
    expect(await rejection(t.lifecycle.provision("bot-1"))).toMatchObject({ code: "name_sweep_incomplete" });
    expect((await t.lifecycle.provision("bot-1")).boxId).toBe(mine);
    const paths = lists(t);
    expect(paths.filter((p) => !p.includes("cursor="))).toHaveLength(2); // the first walk, and the restart
    expect(t.stats().createsCommitted).toBe(0);
  });

  it("a malformed page fails closed and is read again: nothing adopted or created from it", async () => {
    const t = await use({ nameSweep: { inlinePages: 50 } });
    foreign(t, 450);
    let broken = true;
    t.tamper(async (request, response) => {
      if (!broken || !request.path.includes("cursor=")) return response;
      broken = false;
      return new Response(
        JSON.stringify({ ok: true, sandboxes: [{ id: "bx_BAD!" }], pageInfo: { nextCursor: null } }),
        {
          status: 200,
          headers: { "content-type": "application/json" },
        },
      );
    });
    expect(await rejection(t.lifecycle.provision("bot-1"))).toMatchObject({ code: "provider_unavailable" });
    expect(t.lifecycle.nameSweepStatus()).toMatchObject({ complete: false, pagesRead: 1 });
    expect(posts(t)).toHaveLength(0);
    expect((await t.lifecycle.provision("bot-1")).createdThisAttempt).toBe(true);
    expect(lists(t)).toHaveLength(4); // page 1, page 2 (malformed), page 2 again, page 3
  });
});

describe("name sweep: the background walk", () => {
  it("recoverAtStartup starts it; a failed page is retried with backoff from its cursor; then provisions list nothing", async () => {
    const t = await use({ nameSweep: { pageIntervalMs: 5, retryBaseMs: 700 } });
    const mine = t.sim.seed({ names: [...others(1_000), legacyBoatName("bot-1")] })[1_000]; // 6 pages
    await t.faults({ method: "GET", path: "^/sandboxes$", action: "fail-before", status: 503, times: 2 });
    await t.lifecycle.recoverAtStartup();
    await vi.waitFor(
      () => expect(t.lifecycle.nameSweepStatus()).toMatchObject({ complete: true, running: false }),
      {
        timeout: 20_000,
      },
    );
    // The two failures were waited out with a doubling backoff (instant in tests, recorded).
    expect(t.sleeps).toEqual(expect.arrayContaining([700, 1_400]));
    const paths = lists(t);
    expect(paths).toHaveLength(8); // 6 pages (1,001 Boats) + 2 failed requests for the first one
    expect(new Set(paths).size).toBe(6);
    t.wire.length = 0;
    expect(await t.lifecycle.provision("bot-1")).toMatchObject({ boxId: mine, createdThisAttempt: false });
    expect(await t.lifecycle.provision("bot-2")).toMatchObject({ createdThisAttempt: true });
    expect(lists(t)).toHaveLength(0);
  });

  it("close() stops it; the cursor stays, and a lookup continues inline from there", async () => {
    const t = await use({ nameSweep: { inlinePages: 50, background: true } });
    t.sim.seed({ names: [...others(600), scopedBoatName(ENV_ID, "bot-1")] }); // 4 pages
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let seen = 0;
    t.tamper(async (request, response) => {
      if (request.path.startsWith("/sandboxes?")) {
        seen += 1;
        if (seen === 2) await gate; // hold the background's second page
      }
      return response;
    });
    await t.lifecycle.recoverAtStartup();
    await vi.waitFor(() => expect(seen).toBe(2), { timeout: 20_000 });
    t.lifecycle.close();
    release();
    await vi.waitFor(() => expect(t.lifecycle.nameSweepStatus().running).toBe(false), { timeout: 20_000 });
    const { pagesRead } = t.lifecycle.nameSweepStatus();
    expect(pagesRead).toBeGreaterThanOrEqual(1);
    expect(pagesRead).toBeLessThanOrEqual(2);
    const before = lists(t).length;
    expect(await t.lifecycle.provision("bot-1")).toMatchObject({ createdThisAttempt: false });
    // Inline: only the pages not read yet (4 in all, of which `pagesRead` were read before).
    expect(lists(t).length - before).toBe(4 - pagesRead);
  });
});
