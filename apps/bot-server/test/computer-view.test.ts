import { keyTrustDeadline } from "@drydock/boat-create-journal";
import { DELETE_IN_FLIGHT_MS } from "@drydock/boat-lifecycle";
import { describe, expect, it } from "vitest";
import type { Bot } from "../src/bots.js";
import {
  type ComputerViewInputs,
  type CreateRow,
  computerView,
  type DeletionRow,
  indexJournals,
  journalReader,
  nextExpiry,
} from "../src/domain/computer-view.js";
import { ListingMemo } from "../src/domain/listing-memo.js";

const T0 = 1_800_000_000_000;
const create = (row: Partial<CreateRow> & { botId: string }): CreateRow =>
  ({ resolved: false, createdAt: T0, ...row }) as unknown as CreateRow;
const fence = (row: Partial<DeletionRow> & { ownerBotId: string | null }): DeletionRow =>
  ({ boxId: "box_1", name: "drydock-a", phase: "prepared", updatedAt: T0, ...row }) as unknown as DeletionRow;
const inputs = (over: Partial<ComputerViewInputs> = {}): ComputerViewInputs => ({
  now: T0,
  busy: false,
  boatName: () => "drydock-env-a",
  commandPrefix: () => "drydock --data-dir /d",
  ...over,
});

describe("computerView: the computer from the journals only", () => {
  it("no rows: none", () => {
    expect(computerView("a", indexJournals([], []), inputs())).toEqual({ status: "none" });
  });

  it("a resolved create row: ready, named by the bot's Boat name", () => {
    const journals = indexJournals([create({ botId: "a", resolved: true, boxId: "box_9" })], []);
    expect(computerView("a", journals, inputs())).toEqual({
      status: "ready",
      boxId: "box_9",
      name: "drydock-env-a",
    });
  });

  it("an unresolved row while this process works on the bot: provisioning; otherwise needs attention", () => {
    const journals = indexJournals([create({ botId: "a" })], []);
    expect(computerView("a", journals, inputs({ busy: true }))).toEqual({ status: "provisioning" });
    const idle = computerView("a", journals, inputs());
    expect(idle.status).toBe("needs_attention");
    expect(idle.problem).toContain("POST the computer again");
  });

  it("a key past boat.dev's retry window is never retried: the problem names the status command", () => {
    const journals = indexJournals([create({ botId: "a" })], []);
    const view = computerView("a", journals, inputs({ now: keyTrustDeadline(T0) }));
    expect(view.status).toBe("needs_attention");
    expect(view.problem).toContain("(run: drydock --data-dir /d status)");
  });

  it("a prepared fence in its in-flight window is deleting; past it, needs a person's Delete", () => {
    const journals = indexJournals([], [fence({ ownerBotId: "a" })]);
    expect(computerView("a", journals, inputs())).toEqual({
      status: "deleting",
      boxId: "box_1",
      name: "drydock-a",
    });
    const late = computerView("a", journals, inputs({ now: T0 + DELETE_IN_FLIGHT_MS }));
    expect(late.status).toBe("needs_attention");
    expect(late.problem).toContain('{ "confirmName": "drydock-a" }');
  });

  it("a blocked fence needs attention before anything else the journals say", () => {
    const journals = indexJournals(
      [create({ botId: "a", resolved: true, boxId: "box_1" })],
      [fence({ ownerBotId: "a", phase: "blocked" })],
    );
    expect(computerView("a", journals, inputs()).problem).toBe(
      "boat.dev could not delete this computer; check boat.dev, then retry Delete.",
    );
  });

  it("a fence without an owning bot belongs to no bot's view; the first create row of a bot counts", () => {
    const journals = indexJournals(
      [
        create({ botId: "a", resolved: true, boxId: "box_first" }),
        create({ botId: "a", boxId: "box_second" }),
      ],
      [fence({ ownerBotId: null })],
    );
    expect([...journals.deletions.keys()]).toEqual([]);
    expect(journals.creates.get("a")?.boxId).toBe("box_first");
  });
});

describe("nextExpiry", () => {
  it("the first instant a view changes by time alone: a key's deadline or a fence's window end", () => {
    const journals = indexJournals([create({ botId: "a" })], [fence({ ownerBotId: "b", updatedAt: T0 + 5 })]);
    expect(nextExpiry(journals, T0)).toBe(Math.min(keyTrustDeadline(T0), T0 + 5 + DELETE_IN_FLIGHT_MS));
    expect(nextExpiry(indexJournals([], []), T0)).toBe(Number.POSITIVE_INFINITY);
  });
});

describe("the memos", () => {
  it("journalReader rebuilds the index only when a journal hands out a new array", async () => {
    let creates: readonly CreateRow[] = [create({ botId: "a" })];
    const deletions: readonly DeletionRow[] = [];
    const read = journalReader(
      { peekBoatCreates: async () => creates as CreateRow[] },
      { peekBoatDeletions: async () => deletions as DeletionRow[] },
    );
    const first = await read();
    expect(await read()).toBe(first);
    creates = [create({ botId: "b" })];
    const second = await read();
    expect(second).not.toBe(first);
    expect([...second.creates.keys()]).toEqual(["b"]);
  });

  const oneBot = [{ botId: "a", name: "A", createdAt: T0 }] as unknown as readonly Readonly<Bot>[];
  const counted = () => {
    const calls = { renders: 0 };
    const view = () => {
      calls.renders += 1;
      return { status: "none" as const };
    };
    return { calls, view };
  };

  it("ListingMemo re-renders when the rows, the busy bots or the expiry change, and only then", () => {
    const journals = indexJournals([create({ botId: "a" })], []);
    const memo = new ListingMemo();
    const { calls, view } = counted();
    const body = memo.body("100:", undefined, oneBot, journals, 0, T0, view);
    expect(JSON.parse(body.toString("utf8"))).toEqual({
      ok: true,
      bots: [{ botId: "a", name: "A", createdAt: new Date(T0).toISOString(), computer: { status: "none" } }],
    });
    expect(memo.body("100:", undefined, [...oneBot], journals, 0, T0 + 1, view)).toBe(body);
    expect(calls.renders).toBe(1);
    memo.body("100:", undefined, oneBot, journals, 1, T0 + 1, view);
    expect(calls.renders).toBe(2);
    memo.body("100:", undefined, oneBot, journals, 1, keyTrustDeadline(T0), view);
    expect(calls.renders).toBe(3);
    memo.body("100:", undefined, oneBot, indexJournals([create({ botId: "a" })], []), 1, T0 + 2, view);
    expect(calls.renders).toBe(4);
    memo.body("100:", undefined, [{ ...oneBot[0] } as Readonly<Bot>], journals, 1, T0 + 2, view);
    expect(calls.renders).toBe(5);
  });

  it("ListingMemo answers `fresh` only under the token, busy version and expiry a page was rendered with", () => {
    const journals = indexJournals([create({ botId: "a" })], []);
    const memo = new ListingMemo();
    const { view } = counted();
    // No token (file, postgres): never fresh, the rows are always read.
    memo.body("100:", undefined, oneBot, journals, 0, T0, view);
    expect(memo.fresh("100:", undefined, 0, T0)).toBeUndefined();
    const body = memo.body("100:", "7:1", oneBot, journals, 0, T0, view);
    expect(memo.fresh("100:", "7:1", 0, T0 + 1)).toBe(body);
    expect(memo.fresh("100:", "8:1", 0, T0 + 1), "another token").toBeUndefined();
    expect(memo.fresh("100:", "7:1", 1, T0 + 1), "another bot busy").toBeUndefined();
    expect(memo.fresh("100:", "7:1", 0, keyTrustDeadline(T0)), "its expiry").toBeUndefined();
    expect(memo.fresh("5:", "7:1", 0, T0 + 1), "another page").toBeUndefined();
    // Re-sent after reading the same rows under a newer token: fresh under that one, not the old.
    expect(memo.body("100:", "8:1", oneBot, journals, 0, T0 + 1, view)).toBe(body);
    expect(memo.fresh("100:", "8:1", 0, T0 + 1)).toBe(body);
    expect(memo.fresh("100:", "7:1", 0, T0 + 1)).toBeUndefined();
  });

  it("ListingMemo keeps each page apart and at most its capacity of them, dropping the least recent", () => {
    const journals = indexJournals([], []);
    const memo = new ListingMemo(2);
    const { calls, view } = counted();
    const bots = (id: string) => [{ botId: id, name: id, createdAt: T0 }] as unknown as Readonly<Bot>[];
    const a = bots("a");
    const b = bots("b");
    const c = bots("c");
    const first = memo.body("1:", "t", a, journals, 0, T0, view);
    const second = memo.body("1:x", "t", b, journals, 0, T0, view, "x");
    expect(JSON.parse(memo.fresh("1:", "t", 0, T0)?.toString("utf8") ?? "null").bots[0].botId).toBe("a");
    expect(memo.fresh("1:x", "t", 0, T0)).toBe(second);
    expect(memo.body("1:", "t", a, journals, 0, T0, view)).toBe(first); // now the most recent
    memo.body("1:y", "t", c, journals, 0, T0, view, "y");
    expect(calls.renders).toBe(3);
    expect(memo.fresh("1:x", "t", 0, T0), "dropped: the least recent").toBeUndefined();
    expect(memo.fresh("1:", "t", 0, T0)).toBe(first);
    expect(memo.fresh("1:y", "t", 0, T0)).toBeDefined();
  });
});
