import { DELETE_IN_FLIGHT_MS } from "@drydock/boat-lifecycle";
import { describe, expect, it } from "vitest";
import { type BotDeletionContext, removeBotAfterItsBoat } from "../src/domain/bot-deletion.js";
import type { HttpProblem } from "../src/http-errors.js";

const T0 = 1_800_000_000_000;

interface World {
  creates?: { botId: string; resolved: boolean; boxId?: string }[];
  fences?: { boxId: string; name: string; phase: string; updatedAt: number; ownerBotId: string | null }[];
  reconcile?: "confirmed" | "pending" | "blocked";
  boat?: { boxId: string; name?: string } | null;
  deletePending?: boolean;
  now?: number;
}

/** A bot-deletion context over plain values, recording what it was asked to do. */
function fakeContext(world: World) {
  const calls: string[] = [];
  const ctx = {
    createJournal: {
      boatCreateRecoverySnapshot: async () => world.creates ?? [],
      retireDeletedBoatCreate: async (boxId: string) => {
        calls.push(`retire-row ${boxId}`);
      },
    },
    deleteJournal: {
      boatDeletionSnapshot: async () => world.fences ?? [],
      hasPendingBoatDeletionForBot: async (botId: string) =>
        (world.fences ?? []).some((f) => f.ownerBotId === botId),
    },
    lifecycle: {
      reconcileDeletion: async (boxId: string) => {
        calls.push(`reconcile ${boxId}`);
        return world.reconcile ?? "confirmed";
      },
      deleteBoat: async (input: { boxId: string; confirmName: string }) => {
        calls.push(`delete ${input.boxId} as ${input.confirmName}`);
        return world.deletePending ? { ok: true, pending: true } : { ok: true };
      },
      findBoat: async () => world.boat ?? null,
      boatNameFor: (botId: string) => `drydock-env-${botId}`,
    },
    bots: {
      remove: async (botId: string) => {
        calls.push(`remove ${botId}`);
      },
    },
    now: () => world.now ?? T0,
  } as unknown as BotDeletionContext;
  return { ctx, calls };
}

async function refusal(promise: Promise<unknown>): Promise<HttpProblem> {
  return promise.then(
    () => {
      throw new Error("expected a refusal");
    },
    (error: unknown) => error as HttpProblem,
  );
}

describe("removeBotAfterItsBoat: a bot goes only after its Boat is provably gone", () => {
  it("a create not yet reconciled keeps the bot (create_unresolved), nothing sent", async () => {
    const { ctx, calls } = fakeContext({ creates: [{ botId: "a", resolved: false }] });
    const error = await refusal(removeBotAfterItsBoat(ctx, "a", undefined));
    expect([error.status, error.code]).toEqual([409, "create_unresolved"]);
    expect(calls).toEqual([]);
  });

  it("no Boat on boat.dev: the remembered create rows are retired, then the bot removed", async () => {
    const { ctx, calls } = fakeContext({
      creates: [{ botId: "a", resolved: true, boxId: "box_1" }],
      boat: null,
    });
    await removeBotAfterItsBoat(ctx, "a", undefined);
    expect(calls).toEqual(["retire-row box_1", "remove a"]);
  });

  it("a live unnamed Boat without confirmation: confirmation_required naming the bot's Boat name, bot kept", async () => {
    const { ctx, calls } = fakeContext({ boat: { boxId: "box_2" } });
    const error = await refusal(removeBotAfterItsBoat(ctx, "a", undefined));
    expect([error.status, error.code]).toEqual([409, "confirmation_required"]);
    expect(error.details).toEqual({ boxId: "box_2", name: "drydock-env-a" });
    expect(calls).toEqual([]);
  });

  it("a live Boat confirmed: deleted first; a deletion still finishing keeps the bot (deletion_pending)", async () => {
    const done = fakeContext({ boat: { boxId: "box_3", name: "mine" } });
    await removeBotAfterItsBoat(done.ctx, "a", "mine");
    expect(done.calls).toEqual(["delete box_3 as mine", "remove a"]);

    const pending = fakeContext({ boat: { boxId: "box_3", name: "mine" }, deletePending: true });
    const error = await refusal(removeBotAfterItsBoat(pending.ctx, "a", "mine"));
    expect(error.code).toBe("deletion_pending");
    expect(pending.calls).toEqual(["delete box_3 as mine"]);
  });

  it("a blocked fence keeps the bot (deletion_blocked) and names the Delete that finishes it", async () => {
    const { ctx, calls } = fakeContext({
      fences: [{ boxId: "box_4", name: "old", phase: "blocked", updatedAt: T0, ownerBotId: "a" }],
      reconcile: "blocked",
    });
    const error = await refusal(removeBotAfterItsBoat(ctx, "a", undefined));
    expect(error.code).toBe("deletion_blocked");
    expect(error.details).toEqual({ boxId: "box_4", name: "old" });
    expect(calls).toEqual(["reconcile box_4"]);
  });

  it("an unconfirmed fence (past its in-flight window) is sent again only on the person's confirmation", async () => {
    const fences = [{ boxId: "box_5", name: "old", phase: "prepared", updatedAt: T0, ownerBotId: "a" }];
    const late = T0 + DELETE_IN_FLIGHT_MS;
    const asked = fakeContext({ fences, reconcile: "pending", now: late });
    expect((await refusal(removeBotAfterItsBoat(asked.ctx, "a", undefined))).code).toBe(
      "confirmation_required",
    );
    expect(asked.calls).toEqual(["reconcile box_5"]);

    const confirmed = fakeContext({ fences, reconcile: "pending", now: late, boat: null });
    await removeBotAfterItsBoat(confirmed.ctx, "a", "old");
    expect(confirmed.calls).toEqual(["reconcile box_5", "delete box_5 as old", "remove a"]);

    // Within the window the DELETE may still be on the wire: pending, never re-sent.
    const early = fakeContext({ fences, reconcile: "pending", now: T0 });
    expect((await refusal(removeBotAfterItsBoat(early.ctx, "a", "old"))).code).toBe("deletion_pending");
    expect(early.calls).toEqual(["reconcile box_5"]);
  });
});
