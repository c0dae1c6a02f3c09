import { openBoatDeleteJournal } from "@drydock/boat-delete-journal";
import { afterEach, describe, expect, it } from "vitest";
import { DELETE_IN_FLIGHT_MS } from "../src/index.js";
import { type Harness, harness, hold, rejection, secondProcess } from "./helpers.js";

let open: Harness | undefined;
afterEach(async () => {
  await open?.close();
  open = undefined;
});
const use = async (options?: Parameters<typeof harness>[0]) => {
  open = await harness(options);
  return open;
};

describe("a prepared fence younger than DELETE_IN_FLIGHT_MS is another caller's DELETE in flight", () => {
  it("the window is the client's request timeout plus a margin", () => {
    expect(DELETE_IN_FLIGHT_MS).toBe(30_000);
  });

  it("a second process's Delete sends no DELETE while the first one's is still unanswered", async () => {
    const t = await use({ sim: { deletionPolls: 50 } });
    const { boxId, name } = await t.lifecycle.provision("race-bot");
    const g = hold();
    const a = secondProcess(t, (base) => ({
      ...base,
      async deleteSandbox(id, options) {
        await g.enter(); // A's fence is prepared and durable; its DELETE is on the wire
        return base.deleteSandbox(id, options);
      },
    }));
    const aCall = a.deleteBoat({ boxId, confirmName: name, ownerBotId: "race-bot" });
    await g.reached;
    const bResult = await secondProcess(t).deleteBoat({ boxId, confirmName: name, ownerBotId: "race-bot" });
    g.release();
    await aCall;
    expect(bResult).toEqual({ ok: true, pending: true });
    expect(t.stats().deleteRequests, "B sent a DELETE while A's was in flight").toBe(1);
  });

  it("provisioning meanwhile sends no DELETE either and says how long to wait (retryAfterMs)", async () => {
    const t = await use({ sim: { deletionPolls: 50 } });
    const { boxId, name } = await t.lifecycle.provision("race-bot");
    const g = hold();
    const a = secondProcess(t, (base) => ({
      ...base,
      async deleteSandbox(id, options) {
        await g.enter();
        return base.deleteSandbox(id, options);
      },
    }));
    const aCall = a.deleteBoat({ boxId, confirmName: name, ownerBotId: "race-bot" });
    await g.reached;
    const error = (await rejection(secondProcess(t).provision("race-bot"))) as { retryAfterMs?: number };
    g.release();
    await aCall;
    expect(error).toMatchObject({ code: "computer_deleting" });
    expect(error.retryAfterMs).toBeGreaterThan(0);
    expect(error.retryAfterMs).toBeLessThanOrEqual(DELETE_IN_FLIGHT_MS);
    expect(t.stats().deleteRequests).toBe(1);
  });

  it("A's DELETE answered but not yet journaled, its operation then blocked: B starts no second operation", async () => {
    const t = await use({ sim: { deletionPolls: 1 } });
    const { boxId, name } = await t.lifecycle.provision("race-bot");
    await t.faults({ action: "block-deletion" });
    const g = hold();
    const a = secondProcess(t, (base) => ({
      ...base,
      async deleteSandbox(id, options) {
        const op = await base.deleteSandbox(id, options);
        await g.enter(); // answered 202, receipt not yet journaled (slow disk, GC pause)
        return op;
      },
    }));
    const aCall = a.deleteBoat({ boxId, confirmName: name, ownerBotId: "race-bot" }).catch((e: unknown) => e);
    await g.reached;
    const ops = (await (
      await fetch(`${t.sim.url}/_sim/sandboxes`, { headers: { authorization: `Bearer ${t.sim.token}` } })
    ).json()) as { operations: { id: string }[] };
    const op1 = ops.operations[0]?.id as string;
    await t.outside.getDeletionOperation(op1); // boat.dev ends op1 blocked
    const bResult = await secondProcess(t).deleteBoat({ boxId, confirmName: name, ownerBotId: "race-bot" });
    g.release();
    const aResult = await aCall;
    expect(bResult).toEqual({ ok: true, pending: true });
    expect(t.stats().deletesAccepted, "a second deletion operation was started").toBe(1);
    expect(t.stats().deleteRequests).toBe(1);
    // A learns its operation is blocked, and the fence says so with A's operation id.
    expect(aResult).toMatchObject({ code: "deletion_blocked" });
    expect(t.deleteFile()?.records[0]).toMatchObject({ phase: "blocked", operationId: op1 });
  });

  it("a receipt refused as out of date right after our own DELETE is reconciled, not recovery_paused", async () => {
    const t = await use({ sim: { deletionPolls: 50 } });
    const { boxId, name } = await t.lifecycle.provision("race-bot");
    const g = hold();
    const a = secondProcess(t, (base) => ({
      ...base,
      async deleteSandbox(id, options) {
        const op = await base.deleteSandbox(id, options);
        await g.enter(); // answered, receipt not yet journaled
        return op;
      },
    }));
    const aCall = a.deleteBoat({ boxId, confirmName: name, ownerBotId: "race-bot" }).then(
      (value) => ({ value }),
      (error: unknown) => ({ error }),
    );
    await g.reached;
    // Meanwhile another caller blocked the fence (e.g. its own DELETE was refused after the window).
    await openBoatDeleteJournal({ dataDir: t.dataDir }).markBoatDeletionBlocked(boxId);
    g.release();
    const aResult = await aCall;
    expect(aResult).toEqual({ error: expect.objectContaining({ code: "deletion_blocked" }) });
    expect(t.deleteFile()?.records[0]).toMatchObject({ phase: "blocked" });
    expect(t.stats().deleteRequests).toBe(1);
  });

  it("the same refused receipt after the fence was retired (absence proven): reconciled by a direct read", async () => {
    const t = await use({ sim: { deletionPolls: 50 } });
    const { boxId, name } = await t.lifecycle.provision("race-bot");
    const g = hold();
    const a = secondProcess(t, (base) => ({
      ...base,
      async deleteSandbox(id, options) {
        const op = await base.deleteSandbox(id, options);
        await g.enter();
        return op;
      },
    }));
    const aCall = a.deleteBoat({ boxId, confirmName: name, ownerBotId: "race-bot" }).then(
      (value) => ({ value }),
      (error: unknown) => ({ error }),
    );
    await g.reached;
    await openBoatDeleteJournal({ dataDir: t.dataDir }).retireBoatDeletion(boxId);
    await t.faults({
      method: "GET",
      path: "^/sandboxes/",
      action: "fail-before",
      status: 404,
      code: "not_found",
      times: 100,
    });
    g.release();
    expect(await aCall).toEqual({ value: { ok: true } });
    expect(t.deleteFile()?.records).toEqual([]);
  });

  it("past the window an explicit retry re-sends DELETE under the prepared fence", async () => {
    const t = await use({ sim: { deletionPolls: 50 } });
    const { boxId, name } = await t.lifecycle.provision("race-bot");
    // A process died after the fence was durable, before DELETE left.
    await openBoatDeleteJournal({
      dataDir: t.dataDir,
      now: () => Date.now() + t.clock.offsetMs,
    }).prepareBoatDeletion({ boxId, name, ownerBotId: "race-bot" });
    const b = secondProcess(t);
    expect(await b.deleteBoat({ boxId, confirmName: name, ownerBotId: "race-bot" })).toEqual({
      ok: true,
      pending: true,
    });
    expect(t.stats().deleteRequests).toBe(0);
    t.clock.offsetMs += DELETE_IN_FLIGHT_MS;
    expect(await b.deleteBoat({ boxId, confirmName: name, ownerBotId: "race-bot" })).toEqual({
      ok: true,
      pending: true,
    });
    expect(t.stats().deleteRequests).toBe(1);
    expect(t.deleteFile()?.records[0]).toMatchObject({ phase: "accepted" });
  });
});
