// beforeSideEffect: the caller's gate right before each create POST and each DELETE. A gate that throws
// sends nothing (the simulator's stats and the wire prove it), leaves the journals safe to resume (the same
// key, the same fence), and what it threw reaches the caller unchanged.
import { afterEach, describe, expect, it } from "vitest";
import type { SideEffect } from "../src/index.js";
import { deletes, type Harness, harness, posts } from "./helpers.js";

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

class LeaseLost extends Error {}

describe("beforeSideEffect", () => {
  it("a closed gate before the create POST: nothing reaches boat.dev, the key stays, the next provision replays it (one Boat)", async () => {
    h = await harness();
    const seen: SideEffect[] = [];
    let open = false;
    const gated = h.restart({
      beforeSideEffect: (effect) => {
        seen.push(effect);
        if (!open) throw new LeaseLost("lease lost");
      },
    });
    await expect(gated.provision("bot-1")).rejects.toBeInstanceOf(LeaseLost);
    expect(seen).toEqual([{ kind: "create", botId: "bot-1" }]);
    expect(posts(h)).toHaveLength(0);
    expect(h.stats().createRequests).toBe(0);
    const key = h.createFile()?.requests[0]?.idempotencyKey;
    expect(typeof key).toBe("string");
    open = true;
    const boat = await gated.provision("bot-1");
    expect(posts(h)).toEqual([expect.objectContaining({ idempotencyKey: key })]);
    expect(h.stats()).toMatchObject({ live: 1 });
    expect((await h.lifecycle.findBoat("bot-1"))?.boxId).toBe(boat.boxId);
  });

  it("a closed gate before the DELETE: nothing is deleted, the fence stays prepared", async () => {
    h = await harness();
    const { boxId, name } = await h.lifecycle.provision("bot-1");
    const gated = h.restart({
      beforeSideEffect: (effect) => {
        if (effect.kind === "delete") throw new LeaseLost(`not deleting ${effect.boxId}`);
      },
    });
    await expect(gated.deleteBoat({ boxId, confirmName: name, ownerBotId: "bot-1" })).rejects.toThrow(
      `not deleting ${boxId}`,
    );
    expect(deletes(h)).toHaveLength(0);
    expect(h.stats()).toMatchObject({ live: 1, deleteRequests: 0 });
    expect(h.deleteFile()?.records).toEqual([expect.objectContaining({ boxId, phase: "prepared" })]);
  });

  it("a DELETE proven not sent while the gate closed meanwhile (refused at the write): the gate's own refusal, the fence prepared", async () => {
    h = await harness();
    const { boxId, name } = await h.lifecycle.provision("bot-1");
    let asked = 0;
    const gated = h.restart({
      beforeSideEffect: () => {
        asked += 1;
        // Open when the lifecycle asks before the DELETE, closed by the time it went to the socket.
        if (asked > 1) throw new LeaseLost("the lease passed before the DELETE was written");
      },
    });
    h.unreachable((request) => request.method === "DELETE");
    await expect(gated.deleteBoat({ boxId, confirmName: name, ownerBotId: "bot-1" })).rejects.toThrow(
      "the lease passed before the DELETE was written",
    );
    expect(asked).toBe(2);
    expect(h.stats()).toMatchObject({ live: 1, deleteRequests: 0 });
    expect(h.deleteFile()?.records).toEqual([expect.objectContaining({ boxId, phase: "prepared" })]);
  });
});
