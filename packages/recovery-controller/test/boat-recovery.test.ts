import { randomUUID } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openBoatCreateJournal } from "@drydock/boat-create-journal";
import { openBoatDeleteJournal } from "@drydock/boat-delete-journal";
import { createBoatLifecycle, DELETE_IN_FLIGHT_MS, scopedBoatName } from "@drydock/boat-lifecycle";
import { type BoatClient, createBoatClient } from "@drydock/boat-provider";
import { type BoatSimulator, startBoatSimulator } from "@drydock/boat-provider/simulator";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  CREATE_IN_FLIGHT_MS,
  createBoatRecovery,
  isRecoveryError,
  planItemNeedsAttention,
  planItemWaitMs,
} from "../src/index.js";

let sim: BoatSimulator;
let client: BoatClient;
let dir: string;

beforeAll(async () => {
  sim = await startBoatSimulator({ provisionMs: 0, deletionPolls: 1 });
  client = createBoatClient({ baseUrl: sim.apiUrl, token: sim.token });
});
afterAll(async () => {
  await sim?.close();
});
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function setup(clock: { now: () => number } = { now: () => Date.now() }) {
  dir = mkdtempSync(join(tmpdir(), "drydock-boat-recovery-"));
  const environmentId = randomUUID();
  const now = () => clock.now();
  const createJournal = openBoatCreateJournal({ dataDir: dir, now });
  const deleteJournal = openBoatDeleteJournal({ dataDir: dir, now });
  const lifecycle = createBoatLifecycle({
    client,
    createJournal,
    deleteJournal,
    environmentId,
    sleep: async () => {},
    now,
  });
  const recovery = createBoatRecovery({
    lifecycle,
    createJournal,
    deleteJournal,
    client,
    environmentId,
    now,
  });
  return { environmentId, createJournal, deleteJournal, lifecycle, recovery };
}

async function rejection(promise: Promise<unknown>): Promise<{ code?: string; message: string }> {
  try {
    await promise;
  } catch (error) {
    expect(isRecoveryError(error)).toBe(true);
    return error as { code?: string; message: string };
  }
  throw new Error("expected a rejection");
}

describe("boat recovery", () => {
  it("lists a Boat with this installation's name that no journal knows, and not another installation's", async () => {
    const { environmentId, recovery } = setup();
    const ours = (
      await client.createSandbox({ ttlSeconds: 600, noEnv: true }, { idempotencyKey: randomUUID() })
    ).sandbox;
    await client.renameSandbox(ours.id, scopedBoatName(environmentId, "stray-bot"));
    const theirs = (
      await client.createSandbox({ ttlSeconds: 600, noEnv: true }, { idempotencyKey: randomUUID() })
    ).sandbox;
    await client.renameSandbox(theirs.id, scopedBoatName(randomUUID(), "stray-bot"));

    const plan = await recovery.plan();

    const boxes = plan.items.map((item) => item.boxId);
    expect(boxes).toContain(ours.id);
    expect(boxes).not.toContain(theirs.id);
    const item = plan.items.find((candidate) => candidate.boxId === ours.id)!;
    expect(item).toMatchObject({ kind: "unknown_boat", action: { name: null, command: null } });
    expect(plan.providerListed).toBe(true);
  });

  it("retires a create record only after boat.dev answers 404/410 for its Boat, against the planned state", async () => {
    const { createJournal, lifecycle, recovery } = setup();
    const boat = await lifecycle.provision("bot-gone");
    const refused = await rejection(recovery.retireCreate("bot-gone"));
    expect(refused.code).toBe("ACTION_NOT_ALLOWED");
    expect(await createJournal.boatCreateRecoverySnapshot()).toHaveLength(1);

    // The Boat disappears behind drydock's back (deleted in boat.dev directly).
    const operation = await client.deleteSandbox(boat.boxId);
    // The simulator advances a deletion when it is polled; poll until it completes (bounded).
    let status = operation.status;
    for (let poll = 0; poll < 5 && status !== "completed"; poll += 1) {
      status = (await client.getDeletionOperation(operation.id)).status;
    }
    expect(status).toBe("completed");
    const plan = await recovery.plan();
    const item = plan.items.find((candidate) => candidate.boxId === boat.boxId)!;
    expect(item.kind).toBe("create_boat_gone");
    expect(item.action).toMatchObject({ name: "retireCreate" });
    expect(item.action.command).toContain(`--expected-state ${item.stateDigest}`);

    const stale = await rejection(
      recovery.retireCreate("bot-gone", { expectedState: `sha256:${"0".repeat(64)}` }),
    );
    expect(stale.code).toBe("STATE_CHANGED");
    expect(await createJournal.boatCreateRecoverySnapshot()).toHaveLength(1);

    const result = await recovery.retireCreate("bot-gone", { expectedState: item.stateDigest });
    expect(result).toMatchObject({ ok: true, action: "retireCreate", boxId: boat.boxId });
    expect(await createJournal.boatCreateRecoverySnapshot()).toEqual([]);
  });

  it("never re-sends DELETE for an accepted fence: retry is refused, reconcile finishes it", async () => {
    const { deleteJournal, lifecycle, recovery } = setup();
    const boat = await lifecycle.provision("bot-del");
    const fence = await deleteJournal.prepareBoatDeletion({
      boxId: boat.boxId,
      name: boat.name,
      ownerBotId: "bot-del",
    });
    const operation = await client.deleteSandbox(boat.boxId);
    await deleteJournal.markBoatDeletionAccepted(boat.boxId, operation);
    const journalBytes = readFileSync(join(dir, "box-delete-requests.json"), "utf8");
    const requestsBefore = (await sim.stats()).deleteRequests;

    const refused = await rejection(recovery.retryDeletion(boat.boxId));
    expect(refused.code).toBe("ACTION_NOT_ALLOWED");
    expect((await sim.stats()).deleteRequests).toBe(requestsBefore);
    expect(readFileSync(join(dir, "box-delete-requests.json"), "utf8")).toBe(journalBytes);
    expect(fence.phase).toBe("prepared");

    const plan = await recovery.plan();
    const item = plan.items.find((candidate) => candidate.boxId === boat.boxId)!;
    expect(item).toMatchObject({ kind: "deletion_fence", action: { name: "reconcileDeletion" } });
    let outcome = "pending";
    for (let attempt = 0; attempt < 5 && outcome !== "confirmed"; attempt += 1) {
      const result = await recovery.reconcileDeletion(boat.boxId);
      outcome = (result as { outcome: string }).outcome;
    }
    expect(outcome).toBe("confirmed");
    expect(await deleteJournal.boatDeletionSnapshot()).toEqual([]);
    expect((await sim.stats()).deleteRequests).toBe(requestsBefore);
  });

  it("refuses to retry a fence prepared inside the in-flight window (its DELETE may be on the wire); retries after it", async () => {
    let offsetMs = 0;
    const { deleteJournal, lifecycle, recovery } = setup({ now: () => Date.now() + offsetMs });
    const boat = await lifecycle.provision("bot-fresh");
    // Another process prepared the fence and may be sending its DELETE right now.
    await deleteJournal.prepareBoatDeletion({ boxId: boat.boxId, name: boat.name, ownerBotId: "bot-fresh" });
    const journalBytes = readFileSync(join(dir, "box-delete-requests.json"), "utf8");
    const requestsBefore = (await sim.stats()).deleteRequests;
    offsetMs = 5_000;
    // The plan does not offer a command that would only refuse: it names the wait instead.
    const waiting = (await recovery.plan()).items.find((item) => item.boxId === boat.boxId);
    expect(waiting).toMatchObject({
      kind: "deletion_fence",
      facts: { fencePhase: "prepared", provider: { kind: "present" } },
      action: { name: null, command: null },
    });
    expect(waiting?.facts.inFlightLeftMs).toBeGreaterThan(24_000);
    expect(waiting?.facts.inFlightLeftMs).toBeLessThanOrEqual(25_000);
    expect(waiting?.action.advice).toMatch(
      /may still be on the wire.*Wait 25 s, then run `drydock reconcile` again/,
    );
    // Work in progress, as an accepted deletion is: nobody settles it, the wait is all there is to do.
    expect(planItemNeedsAttention(waiting!)).toBe(false);
    expect(planItemWaitMs(waiting!)).toBe(waiting?.facts.inFlightLeftMs);
    const refused = await rejection(recovery.retryDeletion(boat.boxId));
    expect(refused.code).toBe("ACTION_NOT_ALLOWED");
    expect(refused.message).toMatch(/may still be on the wire.*Retry in 25 s/);
    expect((await sim.stats()).deleteRequests).toBe(requestsBefore);
    expect(readFileSync(join(dir, "box-delete-requests.json"), "utf8")).toBe(journalBytes);
    offsetMs = DELETE_IN_FLIGHT_MS + 1_000;
    const offered = (await recovery.plan()).items.find((item) => item.boxId === boat.boxId);
    expect(offered).toMatchObject({ action: { name: "retryDeletion" } });
    expect(offered?.facts).not.toHaveProperty("inFlightLeftMs");
    expect(planItemNeedsAttention(offered!)).toBe(true);
    expect(planItemWaitMs(offered!)).toBe(0);
    const retried = await recovery.retryDeletion(boat.boxId);
    expect(retried).toMatchObject({ ok: true, action: "retryDeletion", boxId: boat.boxId });
    expect((await sim.stats()).deleteRequests).toBe(requestsBefore + 1);
  });

  it("a create row without an answer is work in progress only while a provisioning call may still run", async () => {
    let offsetMs = 0;
    const { createJournal, recovery } = setup({ now: () => Date.now() + offsetMs });
    await createJournal.beginBoatCreate("bot-pending", JSON.stringify({ ttlSeconds: 28_800, noEnv: true }));
    offsetMs = 10_000;
    const fresh = (await recovery.plan()).items.find((item) => item.botId === "bot-pending");
    expect(fresh).toMatchObject({ kind: "create_in_window", action: { command: null } });
    expect(fresh?.summary).toMatch(/started 10 s ago.*may still be running/);
    expect(fresh?.facts.inFlightLeftMs).toBeLessThanOrEqual(CREATE_IN_FLIGHT_MS - 10_000);
    expect(fresh?.facts.inFlightLeftMs).toBeGreaterThan(CREATE_IN_FLIGHT_MS - 11_000);
    expect(planItemNeedsAttention(fresh!)).toBe(false);
    expect(planItemWaitMs(fresh!)).toBe(fresh?.facts.inFlightLeftMs);
    // Past it, nothing retries the key by itself (the server does not): a person retries provisioning.
    offsetMs = CREATE_IN_FLIGHT_MS + 1_000;
    const stale = (await recovery.plan()).items.find((item) => item.botId === "bot-pending");
    expect(stale).toMatchObject({ kind: "create_in_window" });
    expect(stale?.facts).not.toHaveProperty("inFlightLeftMs");
    expect(stale?.summary).toMatch(/nothing retries it by itself/);
    expect(stale?.action.advice).toContain("POST /v1/bots/bot-pending/computer");
    expect(planItemNeedsAttention(stale!)).toBe(true);
    expect(planItemWaitMs(stale!)).toBe(0);
    // A row stamped well ahead of this clock is no call in flight either.
    offsetMs = -60_000;
    const skewed = (await recovery.plan()).items.find((item) => item.botId === "bot-pending");
    expect(skewed?.facts).not.toHaveProperty("inFlightLeftMs");
    expect(planItemNeedsAttention(skewed!)).toBe(true);
  });

  it("a fence stamped ahead of this clock (clock skew) needs a person: no wait is counted, no retry offered", async () => {
    let offsetMs = 0;
    const { deleteJournal, lifecycle, recovery } = setup({ now: () => Date.now() + offsetMs });
    const boat = await lifecycle.provision("bot-skewed");
    // Written by a process whose clock runs ten minutes ahead of this one.
    offsetMs = 600_000;
    await deleteJournal.prepareBoatDeletion({ boxId: boat.boxId, name: boat.name, ownerBotId: "bot-skewed" });
    offsetMs = 0;
    const item = (await recovery.plan()).items.find((candidate) => candidate.boxId === boat.boxId);
    expect(item).toMatchObject({ kind: "deletion_fence", action: { name: null, command: null } });
    expect(item?.facts).not.toHaveProperty("inFlightLeftMs");
    expect(item?.facts.stampedAheadMs).toBeGreaterThan(590_000);
    expect(item?.action.advice).toMatch(/ahead of this machine's clock.*Check the clocks/);
    expect(planItemWaitMs(item!)).toBe(0);
    expect(planItemNeedsAttention(item!)).toBe(true);
    // The lifecycle still refuses a blind re-send meanwhile.
    expect((await rejection(recovery.retryDeletion(boat.boxId))).code).toBe("ACTION_NOT_ALLOWED");
  });

  it("adopts only a Boat carrying the bot's deterministic name or its remembered id", async () => {
    const { environmentId, createJournal, recovery } = setup();
    const stranger = (
      await client.createSandbox({ ttlSeconds: 600, noEnv: true }, { idempotencyKey: randomUUID() })
    ).sandbox;
    await client.renameSandbox(stranger.id, "someone-elses-boat");
    const refused = await rejection(recovery.adopt("bot-a", stranger.id));
    expect(refused.code).toBe("ACTION_NOT_ALLOWED");
    expect(await createJournal.boatCreateRecoverySnapshot()).toEqual([]);

    await client.renameSandbox(stranger.id, scopedBoatName(environmentId, "bot-a"));
    const adopted = await recovery.adopt("bot-a", stranger.id);
    expect(adopted).toMatchObject({ ok: true, action: "adopt", renamed: false, alreadyAdopted: false });
    expect(await createJournal.boatCreateRecoverySnapshot()).toEqual([
      expect.objectContaining({ botId: "bot-a", boxId: stranger.id, resolved: true }),
    ]);
    const bad = await rejection(recovery.adopt("bot a", stranger.id));
    expect(bad.code).toBe("INVALID_ARGUMENT");
  });
});
