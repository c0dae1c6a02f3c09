import { afterEach, describe, expect, it } from "vitest";
import { INVENTORY_LIST_PAGES, type InventoryItem, scopedBoatName } from "../src/index.js";
import { ENV_ID, type Harness, harness, rejection } from "./helpers.js";

/**
 * inventoryPage in an account past boat.dev's 10th page (issue #23): every Boat of this installation once,
 * in a stable order, each page bounded (items and list requests), a failed list page typed and retried
 * with the same cursor, a foreign cursor refused. A real simulator over HTTP, seeded cheaply.
 */

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

const lists = (t: Harness) => t.wire.filter((r) => r.method === "GET" && r.path.startsWith("/sandboxes?"));

/** 3 provisioned bots, then 3,560 foreign Boats with 25 of ours (unknown to the journals) among and after them. */
async function bigAccount(): Promise<{ t: Harness; ours: string[]; late: string }> {
  const t = await harness();
  h = t;
  const ours: string[] = [];
  for (const bot of ["bot-a", "bot-b", "bot-c"]) ours.push((await t.lifecycle.provision(bot)).boxId);
  // One seeding call, so boat.dev lists them in exactly this order (createdAt 1 ms apart).
  const names: string[] = [];
  const mine: number[] = [];
  for (let i = 0; i < 24; i += 1) {
    for (let j = 0; j < 90; j += 1) names.push(`someone-else-${i}-${j}`);
    mine.push(names.push(scopedBoatName(ENV_ID, `lost-${i}`)) - 1);
  }
  // 1,400 foreign Boats in a row: 7 list pages with none of ours, more than one inventory page reads.
  for (let j = 0; j < 1_400; j += 1) names.push(`someone-else-block-${j}`);
  // Past the old cap: 3,587 Boats before it, so it is listed on boat.dev's 18th page.
  mine.push(names.push(scopedBoatName(ENV_ID, "lost-late")) - 1);
  const seeded = t.sim.seed({ names });
  for (const index of mine) ours.push(seeded[index] as string);
  const late = seeded.at(-1) as string;
  return { t, ours, late };
}

async function everyPage(t: Harness, limit: number) {
  const pages: Array<{ items: InventoryItem[]; lists: number }> = [];
  let cursor: string | undefined;
  do {
    const before = lists(t).length;
    const page = await t.lifecycle.inventoryPage({ limit, ...(cursor === undefined ? {} : { cursor }) });
    pages.push({ items: page.computers, lists: lists(t).length - before });
    cursor = page.nextCursor ?? undefined;
  } while (cursor !== undefined && pages.length < 1_000);
  return pages;
}

describe("inventoryPage", () => {
  it("pages through 3,588 Boats: each of ours once, a stable order, bounded pages, the Boat past page 10 included", async () => {
    const { t, ours, late } = await bigAccount();
    const pages = await everyPage(t, 7);
    const ids = pages.flatMap((page) => page.items.map((item) => item.boxId));
    expect(ids.length).toBe(new Set(ids).size); // each once
    expect(new Set(ids)).toEqual(new Set(ours));
    expect(ids).toContain(late);
    for (const page of pages) {
      expect(page.items.length).toBeLessThanOrEqual(7);
      expect(page.lists).toBeLessThanOrEqual(INVENTORY_LIST_PAGES);
    }
    // Across the foreign block a page stops at its list budget, short, and the next one goes on.
    expect(
      pages.slice(0, -1).some((page) => page.lists === INVENTORY_LIST_PAGES && page.items.length < 7),
    ).toBe(true);
    // The journal's Boats first (by id), then boat.dev's list order; the same order when listed again.
    const journaled = ids.slice(0, 3);
    expect(journaled).toEqual([...journaled].sort());
    expect((await everyPage(t, 7)).flatMap((page) => page.items.map((item) => item.boxId))).toEqual(ids);
    // Unknown Boats with our names and no bot: shown, and flagged for a person.
    const lost = pages.flatMap((page) => page.items).find((item) => item.boxId === late);
    expect(lost).toMatchObject({ ownerBotId: null, available: false, naming: "scoped", remembered: false });
    // inventory(): the same Boats, no cap either.
    expect((await t.lifecycle.inventory()).map((item) => item.boxId)).toEqual([...ours].sort());
  });

  it("a list page that fails: provider_unavailable naming the progress, nothing changed; the same cursor then continues", async () => {
    const { t, ours } = await bigAccount();
    const first = await t.lifecycle.inventoryPage({ limit: 10 });
    const second = await t.lifecycle.inventoryPage({ limit: 10, cursor: first.nextCursor as string });
    const rows = JSON.stringify(t.createFile());
    await t.faults({ method: "GET", path: "^/sandboxes$", action: "fail-before", status: 503, times: 2 });
    const error = await rejection(
      t.lifecycle.inventoryPage({ limit: 10, cursor: second.nextCursor as string }),
    );
    expect(error).toMatchObject({ code: "provider_unavailable", status: 503 });
    expect(error.message).toMatch(
      /^The list of cloud computers is unavailable: .*\(boat\.dev's list: 0 pages \(0 Boats\) read so far by this page\)\. Nothing was changed; retrying the same page \(the same cursor\) continues from where it stopped/,
    );
    expect(JSON.stringify(t.createFile())).toBe(rows);
    // Once more while boat.dev still fails, then it answers: the same cursor continues, nothing is lost.
    await rejection(t.lifecycle.inventoryPage({ limit: 10, cursor: second.nextCursor as string }));
    const seen = [...first.computers, ...second.computers].map((item) => item.boxId);
    let cursor: string | null = second.nextCursor;
    while (cursor !== null) {
      const page = await t.lifecycle.inventoryPage({ limit: 10, cursor });
      seen.push(...page.computers.map((item) => item.boxId));
      cursor = page.nextCursor;
    }
    expect(seen.sort()).toEqual([...ours].sort());
  });

  it("a cursor it never answered: invalid_cursor (400), nothing read; a bad limit: invalid_argument", async () => {
    const t = await harness();
    h = t;
    for (const cursor of ["garbage", Buffer.from('{"v":1,"journal":"not-a-boat"}').toString("base64url")]) {
      expect(await rejection(t.lifecycle.inventoryPage({ cursor }))).toMatchObject({
        code: "invalid_cursor",
        status: 400,
      });
    }
    for (const limit of [0, 501, 2.5]) {
      expect(await rejection(t.lifecycle.inventoryPage({ limit }))).toMatchObject({
        code: "invalid_argument",
      });
    }
    expect(t.wire).toEqual([]);
  });
});
