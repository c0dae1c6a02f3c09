import { openBoatCreateJournal } from "@drydock/boat-create-journal";
import { openBoatDeleteJournal } from "@drydock/boat-delete-journal";
import { BoatApiError, type BoatClient, createBoatClient } from "@drydock/boat-provider";
import { afterEach, describe, expect, it } from "vitest";
import { type BoatLifecycle, createBoatLifecycle, DELETE_IN_FLIGHT_MS } from "../src/index.js";
import {
  createRefused400,
  ENV_ID,
  type Harness,
  harness,
  hold,
  posts,
  rejection,
  secondProcess,
} from "./helpers.js";

/**
 * Two callers on one data dir (bot server and recovery CLI): each has its own journals and client, so the
 * in-process per-bot lock does not serialise them. The tests hold one caller at a chosen request with a
 * client wrapper, let the other run, then release it, so the race is deterministic.
 */

let open: Harness | undefined;
afterEach(async () => {
  await open?.close();
  open = undefined;
});
const use = async (options?: Parameters<typeof harness>[0]) => {
  open = await harness(options);
  return open;
};

/** A second process whose every Boat read waits at `held` (it has read the journal and revalidates). */
function secondProcessReadingAt(t: Harness, held: ReturnType<typeof hold>): BoatLifecycle {
  return secondProcess(t, (base) => ({
    ...base,
    async getSandbox(id, options) {
      await held.enter();
      return base.getSandbox(id, options);
    },
  }));
}

describe("no blind second DELETE across processes", () => {
  it("B read 'no fence', A's DELETE was accepted meanwhile: B follows A's operation and sends no DELETE", async () => {
    const t = await use({ sim: { deletionPolls: 50 } });
    const { boxId, name } = await t.lifecycle.provision("race-bot");
    const readHeld = hold();
    // B has read the journal (no fence) and is revalidating the name when it is held.
    const b = secondProcessReadingAt(t, readHeld);
    const bCall = b.deleteBoat({ boxId, confirmName: name, ownerBotId: "race-bot" });
    await readHeld.reached;

    expect(await t.lifecycle.deleteBoat({ boxId, confirmName: name, ownerBotId: "race-bot" })).toEqual({
      ok: true,
      pending: true,
    });
    const fenceAfterA = t.deleteFile()?.records[0];
    expect(fenceAfterA).toMatchObject({ boxId, phase: "accepted" });

    readHeld.release();
    expect(await bCall).toEqual({ ok: true, pending: true });
    expect(t.stats()).toMatchObject({ deleteRequests: 1, deletesAccepted: 1 });
    // B polled A's operation and journaled nothing else: the same fence, the same operation.
    expect(t.deleteFile()?.records).toEqual([
      expect.objectContaining({ boxId, phase: "accepted", operationId: fenceAfterA?.operationId }),
    ]);
  });

  it("B read 'no fence', A prepared and is still sending DELETE: B does not send a second one", async () => {
    const t = await use({ sim: { deletionPolls: 50 } });
    const { boxId, name } = await t.lifecycle.provision("race-bot");
    const readHeld = hold();
    const b = secondProcessReadingAt(t, readHeld);
    const deleteHeld = hold();
    const a = secondProcess(t, (base) => ({
      ...base,
      async deleteSandbox(id, options) {
        await deleteHeld.enter(); // A's fence is prepared; its DELETE has not left yet
        return base.deleteSandbox(id, options);
      },
    }));
    const bCall = b.deleteBoat({ boxId, confirmName: name, ownerBotId: "race-bot" });
    await readHeld.reached;
    const aCall = a.deleteBoat({ boxId, confirmName: name, ownerBotId: "race-bot" });
    await deleteHeld.reached;
    expect(t.deleteFile()?.records).toEqual([expect.objectContaining({ boxId, phase: "prepared" })]);

    readHeld.release();
    expect(await bCall).toEqual({ ok: true, pending: true });
    expect(t.stats().deleteRequests).toBe(0);

    deleteHeld.release();
    expect(await aCall).toEqual({ ok: true, pending: true });
    expect(t.stats()).toMatchObject({ deleteRequests: 1, deletesAccepted: 1 });
    expect(t.deleteFile()?.records).toEqual([expect.objectContaining({ boxId, phase: "accepted" })]);
  });

  it("A prepares in the very instant before B's own prepare: B learns it from that prepare and sends nothing", async () => {
    const t = await use({ sim: { deletionPolls: 50 } });
    const { boxId, name } = await t.lifecycle.provision("race-bot");
    const target = { boxId, name, ownerBotId: "race-bot" };
    const other = openBoatDeleteJournal({ dataDir: t.dataDir });
    const real = openBoatDeleteJournal({ dataDir: t.dataDir });
    // B's journal lets the other process write its fence just before each of B's prepares: whatever B read
    // before that moment is stale, and only the prepare's own answer can tell.
    const racing: typeof real = {
      ...real,
      async prepareBoatDeletion(identity) {
        await other.prepareBoatDeletion(target);
        return real.prepareBoatDeletion(identity);
      },
      async prepareBoatDeletionOnce(identity) {
        await other.prepareBoatDeletion(target);
        return real.prepareBoatDeletionOnce(identity);
      },
    };
    const b = createBoatLifecycle({
      client: createBoatClient({ baseUrl: t.sim.apiUrl, token: t.sim.token }),
      createJournal: openBoatCreateJournal({ dataDir: t.dataDir }),
      deleteJournal: racing,
      environmentId: ENV_ID,
      sleep: async () => {},
    });
    expect(await b.deleteBoat({ boxId, confirmName: name, ownerBotId: "race-bot" })).toEqual({
      ok: true,
      pending: true,
    });
    expect(t.stats().deleteRequests).toBe(0);
    expect(t.deleteFile()?.records).toEqual([expect.objectContaining({ boxId, phase: "prepared" })]);
  });

  it("an explicit retry of a prepared fence this caller read still re-sends DELETE (Delete again)", async () => {
    const t = await use();
    const { boxId, name } = await t.lifecycle.provision("retry-bot");
    await t.faults({ method: "DELETE", path: "^/sandboxes/", action: "drop-before" });
    const first = await rejection(
      t.lifecycle.deleteBoat({ boxId, confirmName: name, ownerBotId: "retry-bot" }),
    );
    expect(first.code).toBe("deletion_unconfirmed");
    expect(t.deleteFile()?.records).toEqual([expect.objectContaining({ boxId, phase: "prepared" })]);
    t.clock.offsetMs += DELETE_IN_FLIGHT_MS; // past the in-flight window: the explicit retry may re-send DELETE
    const again = await t.lifecycle.deleteBoat({ boxId, confirmName: name, ownerBotId: "retry-bot" });
    expect(again.ok).toBe(true);
    expect(t.wire.filter((r) => r.method === "DELETE")).toHaveLength(2);
    expect(t.stats()).toMatchObject({ deletesAccepted: 1 });
  });
});

describe("a resumed create key is never discarded on a refusal", () => {
  it("lost answers, restart, then a 400: the key is kept and only one Boat is ever billed", async () => {
    const t = await use();
    await t.faults({ method: "POST", path: "^/sandboxes$", action: "drop-after", times: 2 });
    const first = await rejection(t.lifecycle.provision("bot-1"));
    expect(first.code).toBe("provider_unavailable");
    const [row] = t.createFile()?.requests ?? [];
    expect(row).toMatchObject({ botId: "bot-1" });
    expect(t.stats().createsCommitted).toBe(1);

    t.restart();
    await t.faults(createRefused400);
    const refused = await rejection(t.lifecycle.provision("bot-1"));
    expect(refused).toMatchObject({ code: "provider_refused", status: 400 });
    expect(refused.message).toContain("its request was kept");
    expect(refused.message).toContain("cannot create a second computer");
    // The very same key is still journaled.
    expect(t.createFile()?.requests).toEqual([row]);

    const third = await t.lifecycle.provision("bot-1");
    expect(third.createdThisAttempt).toBe(false);
    expect(t.stats()).toMatchObject({ createsCommitted: 1, live: 1, unnamed: 0 });
    const keys = new Set(posts(t).map((post) => post.idempotencyKey));
    expect([...keys]).toEqual([row?.idempotencyKey]);
  });
  // A key minted by the very call that was refused is still discarded: provision.test.ts, "a definitive 4xx
  // discards the key".

  it("A's refused POST never erases the row B remembered under A's key: one Boat, ever", async () => {
    // The listing lags (eventually consistent), so only the journal knows B's Boat for a while.
    const t = await use({ sim: { listLagMs: 10_000 } });
    const postHeld = hold();
    // Process A: it has minted and journaled the key; its POST is held until B has finished.
    const a = secondProcess(t, (base) => ({
      ...base,
      async createSandbox(body, options) {
        await postHeld.enter();
        return base.createSandbox(body, options);
      },
    }));
    const aCall = rejection(a.provision("bot-1"));
    await postHeld.reached;
    // Process B resumes A's key, creates, names and resolves the Boat.
    const b = await t.lifecycle.provision("bot-1");
    expect(b.createdThisAttempt).toBe(false);
    const rows = t.createFile()?.requests;
    expect(rows).toEqual([expect.objectContaining({ boxId: b.boxId, resolved: true })]);
    // Now A's POST is refused with a definitive 400 (a gateway, or a refusal before the key lookup).
    await t.faults(createRefused400);
    postHeld.release();
    const refused = await aCall;
    expect(refused).toMatchObject({ code: "provider_refused", status: 400 });
    expect(refused.message).toContain("its request was kept");
    expect(t.createFile()?.requests).toEqual(rows);
    // Any later provision (the listing still lagging) finds B's Boat: no second one.
    await t.clearFaults();
    expect(await t.restart().provision("bot-1")).toEqual({ ...b, createdThisAttempt: false });
    expect(t.stats()).toMatchObject({ createsCommitted: 1, live: 1 });
  });
});

describe("provisioning behind a fence whose deletion retry fails", () => {
  const prepareFence = async (t: Harness) => {
    const { boxId, name } = await t.lifecycle.provision("fenced-bot");
    await t.faults({ method: "DELETE", path: "^/sandboxes/", action: "drop-before" });
    await rejection(t.lifecycle.deleteBoat({ boxId, confirmName: name, ownerBotId: "fenced-bot" }));
    expect(t.deleteFile()?.records).toEqual([expect.objectContaining({ boxId, phase: "prepared" })]);
    t.clock.offsetMs += DELETE_IN_FLIGHT_MS; // past the in-flight window: the explicit retry may re-send DELETE
    return boxId;
  };

  it("a refusal that arrives after another caller finished the deletion is no 'paused' journal: the Boat is read, and it is gone", async () => {
    const t = await use({ sim: { deletionPolls: 0 } });
    const { boxId, name } = await t.lifecycle.provision("twice-bot");
    const sendHeld = hold();
    // B's DELETE is held on the wire, then refused (409), after A (here the test itself) finished it all.
    const b = secondProcess(t, (base) => ({
      ...base,
      async deleteSandbox() {
        await sendHeld.enter();
        throw new BoatApiError({ status: 409, code: "sandbox_busy", message: "busy" });
      },
    }));
    const bCall = b.deleteBoat({ boxId, confirmName: name, ownerBotId: "twice-bot" });
    await sendHeld.reached;
    await t.client.deleteSandbox(boxId);
    await openBoatCreateJournal({ dataDir: t.dataDir }).retireDeletedBoatCreate(boxId);
    await openBoatDeleteJournal({ dataDir: t.dataDir }).retireBoatDeletion(boxId);
    sendHeld.release();
    expect(await bCall).toEqual({ ok: true });
    expect(t.deleteFile()?.records ?? []).toEqual([]);
  });

  it("a completed status that arrives after another caller retired the fence is no 'paused' journal: confirmed", async () => {
    const t = await use({ sim: { deletionPolls: 2 } });
    const { boxId, name } = await t.lifecycle.provision("follow-bot");
    const pollHeld = hold();
    // B's DELETE is accepted; its first poll of the operation is held on the wire while A (the test, as
    // another process following the same operation) sees it complete and retires the fence and the row.
    let polls = 0;
    const b = secondProcess(t, (base) => ({
      ...base,
      async getDeletionOperation(opId, options) {
        polls += 1;
        if (polls === 1) await pollHeld.enter();
        return base.getDeletionOperation(opId, options);
      },
    }));
    const bCall = b.deleteBoat({ boxId, confirmName: name, ownerBotId: "follow-bot" });
    await pollHeld.reached;
    const fence = (await openBoatDeleteJournal({ dataDir: t.dataDir }).getBoatDeletion(boxId))!;
    expect(fence.phase).toBe("accepted");
    let op = await t.client.getDeletionOperation(fence.operationId!, { targetId: boxId });
    while (op.status !== "completed") op = await t.client.getDeletionOperation(op.id, { targetId: boxId });
    await openBoatCreateJournal({ dataDir: t.dataDir }).retireDeletedBoatCreate(boxId);
    await openBoatDeleteJournal({ dataDir: t.dataDir }).retireBoatDeletion(boxId);
    pollHeld.release();
    // B's poll now answers completed, and its receipt finds no fence: the Boat is read, and it is gone.
    expect(await bCall).toEqual({ ok: true });
    expect(t.deleteFile()?.records ?? []).toEqual([]);
    expect(t.stats()).toMatchObject({ live: 0, deleteRequests: 1 });
  });

  it("resendDeletions: false sends no DELETE for a prepared fence past its window: computer_deleting, fence kept", async () => {
    const t = await use();
    const boxId = await prepareFence(t);
    const before = t.stats();
    const error = await rejection(t.lifecycle.provision("fenced-bot", { resendDeletions: false }));
    expect(error.code).toBe("computer_deleting");
    expect(t.stats().deleteRequests).toBe(before.deleteRequests);
    expect(t.stats().live).toBe(before.live);
    expect(t.deleteFile()?.records).toEqual([expect.objectContaining({ boxId, phase: "prepared" })]);
    // The default still finishes it (the lifecycle's own retry of a prior deletion).
    await t.clearFaults();
    expect((await rejection(t.lifecycle.provision("fenced-bot"))).code).toBe("previous_deletion_finished");
    expect(t.stats().deleteRequests).toBe(before.deleteRequests + 1);
  });

  it("a refused DELETE is told as the refusal of the named fence, not as 'being deleted'", async () => {
    const t = await use();
    const boxId = await prepareFence(t);
    await t.faults({
      method: "DELETE",
      path: "^/sandboxes/",
      action: "fail-before",
      status: 422,
      code: "invalid_request",
    });
    const error = await rejection(t.lifecycle.provision("fenced-bot"));
    expect(error).toMatchObject({ code: "provider_refused", status: 422 });
    expect(error.message).toContain(boxId);
    expect(error.message).toContain("still fenced for deletion");
    expect((error as unknown as { boxId: string }).boxId).toBe(boxId);
    expect(t.deleteFile()?.records).toEqual([expect.objectContaining({ boxId, phase: "blocked" })]);
    expect(t.stats()).toMatchObject({ createRequests: 1, live: 1 });
  });

  it("an unconfirmed DELETE is told as unconfirmed", async () => {
    const t = await use();
    const boxId = await prepareFence(t);
    await t.faults({ method: "DELETE", path: "^/sandboxes/", action: "drop-after" });
    const error = await rejection(t.lifecycle.provision("fenced-bot"));
    expect(error.code).toBe("deletion_unconfirmed");
    expect(error.message).toContain(boxId);
    expect(t.stats().createRequests).toBe(1);
  });

  it("a programming error is not disguised as a deletion in progress", async () => {
    const t = await use();
    await prepareFence(t);
    const broken = secondProcess(t, (base) => ({
      ...base,
      async deleteSandbox() {
        throw new TypeError("boom: not a provider failure");
      },
    }));
    await expect(broken.provision("fenced-bot")).rejects.toThrow(TypeError);
  });
});

describe("several hosts on one store: a minted key another process resumed is never discarded", () => {
  /**
   * A mints the key and is held at its POST; B (another host) resumes the same key and is held at its POST;
   * A's POST is refused definitively (400, nothing created under the key); then B's goes out. Returns A's
   * refusal, what B's call settled to, and the journal after both.
   */
  async function race(t: Harness, shared: boolean) {
    const aHeld = hold();
    const bHeld = hold();
    const heldAt = (held: ReturnType<typeof hold>) => (base: BoatClient) => ({
      ...base,
      async createSandbox(...args: Parameters<BoatClient["createSandbox"]>) {
        await held.enter();
        return base.createSandbox(...args);
      },
    });
    const a = secondProcess(t, heldAt(aHeld), { keysSharedAcrossProcesses: shared });
    const b = secondProcess(t, heldAt(bHeld), { keysSharedAcrossProcesses: shared });
    const aCall = rejection(a.provision("bot-1"));
    await aHeld.reached;
    const bCall = b.provision("bot-1").then(
      (value) => ({ ok: true as const, value }),
      (error: unknown) => ({ ok: false as const, error }),
    );
    await bHeld.reached;
    await t.faults({ ...createRefused400, times: 1 });
    aHeld.release();
    const refused = await aCall;
    await t.clearFaults();
    bHeld.release();
    return { refused, b: await bCall, rows: t.createFile()?.requests ?? [] };
  }

  it("shared: A's refusal keeps the key, B's POST creates the one Boat and the journal holds it", async () => {
    const t = await use();
    const { refused, b, rows } = await race(t, true);
    expect(refused).toMatchObject({ code: "provider_refused", status: 400 });
    expect(refused.message).toContain("another server sharing this storage may be sending the same request");
    expect(b.ok).toBe(true);
    const boxId = b.ok ? b.value.boxId : "";
    expect(rows).toEqual([expect.objectContaining({ botId: "bot-1", boxId, resolved: true })]);
    expect(t.stats()).toMatchObject({ createsCommitted: 1, live: 1 });
  });

  it("the hazard it closes: without the option A discards the key and B's Boat is held by no journal", async () => {
    const t = await use();
    const { refused, b, rows } = await race(t, false);
    expect(refused).toMatchObject({ code: "provider_refused", status: 400 });
    expect(b.ok).toBe(false);
    expect(rows).toEqual([]);
    expect(t.stats()).toMatchObject({ createsCommitted: 1, live: 1 });
  });

  it("shared: a provision withdrawn after minting its key keeps it, and says why", async () => {
    const t = await use();
    const a = secondProcess(t, undefined, { keysSharedAcrossProcesses: true });
    const withdrawn = await rejection(a.provision("bot-1", { stillWanted: () => false }));
    expect(withdrawn.code).toBe("provision_withdrawn");
    expect(withdrawn.message).toContain("Its request was kept");
    expect(t.createFile()?.requests).toEqual([expect.objectContaining({ botId: "bot-1" })]);
    expect(t.stats()).toMatchObject({ createsCommitted: 0, live: 0 });
  });
});
