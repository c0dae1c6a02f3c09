import { openBoatCreateJournal } from "@drydock/boat-create-journal";
import { type BoatDeleteJournal, openBoatDeleteJournal } from "@drydock/boat-delete-journal";
import { createBoatClient } from "@drydock/boat-provider";
import { afterEach, describe, expect, it } from "vitest";
import { createBoatLifecycle, DELETE_IN_FLIGHT_MS } from "../src/index.js";
import { ENV_ID, type Harness, harness, rejection, secondProcess } from "./helpers.js";

let open: Harness | undefined;
afterEach(async () => {
  await open?.close();
  open = undefined;
});
const use = async (options?: Parameters<typeof harness>[0]) => {
  open = await harness(options);
  return open;
};

const BOT = "restamp-bot";

/** Provisions, then leaves a prepared fence older than the in-flight window (its DELETE answered 503). */
async function oldPreparedFence(t: Harness): Promise<{ boxId: string; name: string }> {
  const { boxId, name } = await t.lifecycle.provision(BOT);
  await t.faults({
    method: "DELETE",
    path: "^/sandboxes/",
    action: "fail-before",
    status: 503,
    code: "unavailable",
  });
  expect(
    await rejection(t.lifecycle.deleteBoat({ boxId, confirmName: name, ownerBotId: BOT })),
  ).toMatchObject({
    code: "provider_unavailable",
  });
  await t.clearFaults();
  expect(t.deleteFile()?.records).toEqual([expect.objectContaining({ boxId, phase: "prepared" })]);
  expect(t.stats().deleteRequests).toBe(1);
  t.clock.offsetMs += DELETE_IN_FLIGHT_MS + 1_000;
  return { boxId, name };
}

describe("a DELETE re-sent under an old prepared fence re-stamps it first (no blind second DELETE)", () => {
  it("after a retry whose DELETE outcome is unknown, an immediate retry sends nothing; past the window, exactly one", async () => {
    const t = await use({ sim: { deletionPolls: 50 } });
    const { boxId, name } = await oldPreparedFence(t);
    const before = t.deleteFile()?.records[0] as { updatedAt: number; requestedAt: number };

    // The retry's DELETE reaches boat.dev, which commits it; the answer is lost.
    await t.faults({ method: "DELETE", path: "^/sandboxes/", action: "drop-after" });
    const unknown = await rejection(t.lifecycle.deleteBoat({ boxId, confirmName: name, ownerBotId: BOT }));
    expect(unknown).toMatchObject({ code: "deletion_unconfirmed", status: 503 });
    await t.clearFaults();
    expect(t.stats().deleteRequests).toBe(2);
    // The fence was re-stamped before that DELETE left: the window runs again from then.
    const restamped = t.deleteFile()?.records[0] as { updatedAt: number; requestedAt: number; phase: string };
    expect(restamped.phase).toBe("prepared");
    expect(restamped.requestedAt).toBe(before.requestedAt);
    expect(restamped.updatedAt).toBeGreaterThan(before.updatedAt);

    // Delete again at once, here and from another process: "in progress", nothing sent.
    expect(await t.lifecycle.deleteBoat({ boxId, confirmName: name, ownerBotId: BOT })).toEqual({
      ok: true,
      pending: true,
    });
    expect(await secondProcess(t).deleteBoat({ boxId, confirmName: name, ownerBotId: BOT })).toEqual({
      ok: true,
      pending: true,
    });
    // Provisioning for the bot sends nothing either, and says how long to wait.
    const fenced = (await rejection(t.lifecycle.provision(BOT))) as { code: string; retryAfterMs?: number };
    expect(fenced.code).toBe("computer_deleting");
    expect(fenced.retryAfterMs).toBeGreaterThan(0);
    expect(t.stats().deleteRequests, "a DELETE was sent right after one whose outcome is unknown").toBe(2);

    // Just before the window ends: still nothing.
    t.clock.offsetMs += DELETE_IN_FLIGHT_MS - 2_000;
    expect(await t.lifecycle.deleteBoat({ boxId, confirmName: name, ownerBotId: BOT })).toEqual({
      ok: true,
      pending: true,
    });
    expect(t.stats().deleteRequests).toBe(2);

    // Past it: the explicit retry sends exactly one DELETE, answered with the operation already running.
    t.clock.offsetMs += 3_000;
    expect(await t.lifecycle.deleteBoat({ boxId, confirmName: name, ownerBotId: BOT })).toEqual({
      ok: true,
      pending: true,
    });
    expect(t.stats()).toMatchObject({ deleteRequests: 3, deletesAccepted: 1 });
    expect(t.deleteFile()?.records[0]).toMatchObject({ phase: "accepted" });
  });

  it("two processes retrying the same old fence at once: exactly one re-stamps and sends DELETE", async () => {
    const t = await use({ sim: { deletionPolls: 50 } });
    const { boxId, name } = await oldPreparedFence(t);
    const now = () => Date.now() + t.clock.offsetMs;
    // Both processes read the old fence (their prepare hands it back) before either goes on.
    let arrived = 0;
    let releaseAll: () => void = () => {};
    const bothRead = new Promise<void>((resolve) => {
      releaseAll = resolve;
    });
    const lifecycleWithBarrier = () => {
      const real = openBoatDeleteJournal({ dataDir: t.dataDir, now });
      const deleteJournal: BoatDeleteJournal = {
        ...real,
        async prepareBoatDeletionOnce(identity) {
          const result = await real.prepareBoatDeletionOnce(identity);
          arrived += 1;
          if (arrived === 2) releaseAll();
          await bothRead;
          return result;
        },
      };
      return createBoatLifecycle({
        client: createBoatClient({ baseUrl: t.sim.apiUrl, token: t.sim.token }),
        createJournal: openBoatCreateJournal({ dataDir: t.dataDir, now }),
        deleteJournal,
        environmentId: ENV_ID,
        now,
        sleep: async () => {},
      });
    };
    const input = { boxId, confirmName: name, ownerBotId: BOT };
    const results = await Promise.all([
      lifecycleWithBarrier().deleteBoat(input),
      lifecycleWithBarrier().deleteBoat(input),
    ]);
    expect(arrived).toBe(2);
    expect(results).toEqual([
      { ok: true, pending: true },
      { ok: true, pending: true },
    ]);
    expect(t.stats().deleteRequests, "both racing retries sent DELETE").toBe(2);
    expect(t.stats().deletesAccepted).toBe(1);
  });

  it("two processes retrying at once without any gate: one DELETE", async () => {
    const t = await use({ sim: { deletionPolls: 50 } });
    const { boxId, name } = await oldPreparedFence(t);
    const input = { boxId, confirmName: name, ownerBotId: BOT };
    const results = await Promise.all([
      secondProcess(t).deleteBoat(input),
      secondProcess(t).deleteBoat(input),
      secondProcess(t).deleteBoat(input),
    ]);
    for (const result of results) expect(result).toEqual({ ok: true, pending: true });
    expect(t.stats().deleteRequests).toBe(2);
  });

  it("the re-stamp is refused when the fence changed since it was read: nothing is sent", async () => {
    const t = await use({ sim: { deletionPolls: 50 } });
    const { boxId, name } = await oldPreparedFence(t);
    const now = () => Date.now() + t.clock.offsetMs;
    const real = openBoatDeleteJournal({ dataDir: t.dataDir, now });
    const other = openBoatDeleteJournal({ dataDir: t.dataDir, now });
    // Between this caller's prepare and its re-stamp, another process re-stamps (and sends) first.
    const deleteJournal: BoatDeleteJournal = {
      ...real,
      async prepareBoatDeletionOnce(identity) {
        const result = await real.prepareBoatDeletionOnce(identity);
        expect((await other.restampBoatDeletion(boxId, result.record)).restamped).toBe(true);
        return result;
      },
    };
    const b = createBoatLifecycle({
      client: createBoatClient({ baseUrl: t.sim.apiUrl, token: t.sim.token }),
      createJournal: openBoatCreateJournal({ dataDir: t.dataDir, now }),
      deleteJournal,
      environmentId: ENV_ID,
      now,
      sleep: async () => {},
    });
    expect(await b.deleteBoat({ boxId, confirmName: name, ownerBotId: BOT })).toEqual({
      ok: true,
      pending: true,
    });
    expect(t.stats().deleteRequests).toBe(1);
    expect(t.deleteFile()?.records).toEqual([expect.objectContaining({ boxId, phase: "prepared" })]);
  });
});
