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
  ListingMemo,
  nextExpiry,
} from "../src/domain/computer-view.js";

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

  it("ListingMemo re-renders when the busy bots change or the expiry comes, and only then", () => {
    const bots = [{ botId: "a", name: "A", createdAt: T0 }] as unknown as readonly Readonly<Bot>[];
    const journals = indexJournals([create({ botId: "a" })], []);
    const memo = new ListingMemo();
    let renders = 0;
    const view = () => {
      renders += 1;
      return { status: "none" as const };
    };
    const body = memo.body(bots, journals, 0, T0, view);
    expect(JSON.parse(body)).toEqual({
      ok: true,
      bots: [{ botId: "a", name: "A", createdAt: new Date(T0).toISOString(), computer: { status: "none" } }],
    });
    expect(memo.body(bots, journals, 0, T0 + 1, view)).toBe(body);
    expect(renders).toBe(1);
    memo.body(bots, journals, 1, T0 + 1, view);
    expect(renders).toBe(2);
    memo.body(bots, journals, 1, keyTrustDeadline(T0), view);
    expect(renders).toBe(3);
  });
});
