/**
 * The h-ops review's Boat findings, against the boat.dev simulator over HTTP:
 *   - F1: a Boat recorded (or adopted) for a bot the registry no longer has is billed and no tool used to
 *     report it. The adopt digest covers the claimant's registration, adopt refuses for a bot that is not
 *     registered (or when the registry cannot be read), and the plan reports such a row as needing a person.
 *   - F3: the same fenced command pasted twice at once applied once but answered success twice. Here two
 *     recoveries (each with its own lifecycle, as two processes have) are held at a barrier right after both
 *     read boat.dev, so both pass the digest check before either acts: exactly one may succeed, the other
 *     must be STATE_CHANGED.
 */
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openBoatCreateJournal } from "@drydock/boat-create-journal";
import { openBoatDeleteJournal } from "@drydock/boat-delete-journal";
import { createBoatLifecycle, DELETE_IN_FLIGHT_MS, scopedBoatName } from "@drydock/boat-lifecycle";
import { type BoatClient, createBoatClient } from "@drydock/boat-provider";
import { type BoatSimulator, startBoatSimulator } from "@drydock/boat-provider/simulator";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createBoatRecovery, isRecoveryError, planItemNeedsAttention } from "../src/index.js";
import { namedBoat, readOr, rejection } from "./helpers.js";

let sim: BoatSimulator;
let client: BoatClient;
let dir: string | undefined;

beforeAll(async () => {
  sim = await startBoatSimulator({ provisionMs: 0, deletionPolls: 3 });
  client = createBoatClient({ baseUrl: sim.apiUrl, token: sim.token });
});
afterAll(async () => {
  await sim?.close();
});
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

/** A client whose first `getSandbox` waits until `parties` callers reached it (then all go on). */
function barrierClient(barrier: { waiting: (() => void)[]; parties: number }): BoatClient {
  let first = true;
  return new Proxy(client, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (property !== "getSandbox" || typeof value !== "function") return value;
      return async (...args: unknown[]) => {
        const answer = await value.apply(target, args);
        if (first) {
          first = false;
          await new Promise<void>((resolve) => {
            barrier.waiting.push(resolve);
            if (barrier.waiting.length === barrier.parties) for (const go of barrier.waiting) go();
          });
        }
        return answer;
      };
    },
  });
}

interface Setup {
  registry?: { ids: Set<string> | null; unreadable?: string };
  clock?: { offsetMs: number };
}

function setup(options: Setup = {}) {
  dir = mkdtempSync(join(tmpdir(), "drydock-boat-races-"));
  const dataDir = dir;
  const environmentId = randomUUID();
  const clock = options.clock ?? { offsetMs: 0 };
  const now = () => Date.now() + clock.offsetMs;
  const journals = () => ({
    createJournal: openBoatCreateJournal({ dataDir, now }),
    deleteJournal: openBoatDeleteJournal({ dataDir, now }),
  });
  /** One "process": its own journals handle, lifecycle and recovery, reading boat.dev through `via`. */
  const recoveryVia = (via: BoatClient) => {
    const { createJournal, deleteJournal } = journals();
    const lifecycle = createBoatLifecycle({
      client: via,
      createJournal,
      deleteJournal,
      environmentId,
      sleep: async () => {},
      now,
    });
    return createBoatRecovery({
      lifecycle,
      createJournal,
      deleteJournal,
      client: via,
      environmentId,
      now,
      ...(options.registry === undefined
        ? {}
        : {
            registeredBotIds: () => {
              if (options.registry?.unreadable !== undefined) throw new Error(options.registry.unreadable);
              return options.registry?.ids === null ? null : [...(options.registry?.ids ?? [])];
            },
          }),
    });
  };
  const own = journals();
  const lifecycle = createBoatLifecycle({ client, ...own, environmentId, sleep: async () => {}, now });
  return {
    dataDir,
    environmentId,
    ...own,
    lifecycle,
    recovery: recoveryVia(client),
    /** Two recoveries held after their first direct read of boat.dev until both got there. */
    racing: () => {
      const barrier = { waiting: [] as (() => void)[], parties: 2 };
      return [recoveryVia(barrierClient(barrier)), recoveryVia(barrierClient(barrier))] as const;
    },
    creates: () => readOr(join(dataDir, "box-create-requests.json")),
    deletes: () => readOr(join(dataDir, "box-delete-requests.json")),
  };
}

/** Deletes a Boat at boat.dev and polls the operation until boat.dev answers 404 for it. */
async function deleteAtBoatDev(boxId: string): Promise<void> {
  const op = await client.deleteSandbox(boxId);
  for (let i = 0; i < 20; i += 1) {
    try {
      await client.getSandbox(boxId);
    } catch {
      return;
    }
    await client.getDeletionOperation(op.id, { targetId: boxId }).catch(() => undefined);
  }
  throw new Error(`Boat ${boxId} did not go`);
}

/** Exactly one fulfilled, the other STATE_CHANGED. */
function expectOneWinner(results: PromiseSettledResult<unknown>[]): unknown {
  const won = results.filter((r) => r.status === "fulfilled");
  const lost = results.filter((r): r is PromiseRejectedResult => r.status === "rejected");
  expect(won.length, JSON.stringify(results.map((r) => r.status))).toBe(1);
  expect(lost.length).toBe(1);
  const error = lost[0]?.reason;
  expect(isRecoveryError(error) && error.code === "STATE_CHANGED", String(error)).toBe(true);
  return error;
}

describe("F1: a Boat for a bot that is not registered", () => {
  it("an adopt previewed while the bot existed and pasted after it was deleted exits STATE_CHANGED; nothing recorded", async () => {
    const registry = { ids: new Set(["ada", "gus"]) };
    const s = setup({ registry });
    const boxId = await namedBoat(client, scopedBoatName(s.environmentId, "gus"));
    const item = (await s.recovery.plan()).items.find((i) => i.boxId === boxId);
    expect(item?.action.name).toBe("adopt");
    const before = s.creates();

    registry.ids.delete("gus"); // DELETE /v1/bots/gus answered 200 meanwhile

    const stale = await rejection(s.recovery.adopt("gus", boxId, { expectedState: item!.stateDigest }));
    expect(isRecoveryError(stale) && stale.code === "STATE_CHANGED", String(stale)).toBe(true);
    expect((stale as Error).message).toMatch(/Bot gus is not registered now/);
    expect(s.creates()).toBe(before);

    // Previewed now: no adopt command, and the way out in words; the action refuses without a digest too.
    const now = (await s.recovery.plan({ botIds: ["gus"] })).items.find((i) => i.boxId === boxId);
    expect(now?.action.command).toBeNull();
    expect(now?.action.advice).toMatch(/not registered.*create it again.*delete Boat/s);
    const refused = await rejection(s.recovery.adopt("gus", boxId));
    expect(isRecoveryError(refused) && refused.code === "ACTION_NOT_ALLOWED", String(refused)).toBe(true);
    expect((refused as Error).message).toMatch(/Bot gus is not registered/);
    expect(s.creates()).toBe(before);
  });

  it("a recorded Boat whose bot is not registered needs a person; once boat.dev says it is gone, retire applies", async () => {
    const registry = { ids: new Set(["gus"]) };
    const s = setup({ registry });
    const boat = await s.lifecycle.provision("gus");
    expect((await s.recovery.plan()).items).toEqual([]);

    registry.ids.delete("gus");
    const [item] = (await s.recovery.plan()).items;
    expect(item).toMatchObject({ kind: "create_bot_unregistered", botId: "gus", boxId: boat.boxId });
    expect(item?.summary).toMatch(/billed/);
    expect(item?.action.command).toBeNull();
    expect(item?.action.advice).toMatch(/creates retire gus/);
    expect(planItemNeedsAttention(item!)).toBe(true);

    await deleteAtBoatDev(boat.boxId);
    const gone = (await s.recovery.plan()).items.find((i) => i.boxId === boat.boxId);
    expect(gone).toMatchObject({ kind: "create_boat_gone" });
    expect(gone?.action.name).toBe("retireCreate");
    await s.recovery.retireCreate("gus", { expectedState: gone!.stateDigest });
    expect((await s.recovery.plan()).items).toEqual([]);
  });

  it("a registry that cannot be read is never 'not registered': adopt refuses, the plan says it could not check", async () => {
    const s = setup({ registry: { ids: new Set(), unreadable: "bots.json is not valid JSON" } });
    const boxId = await namedBoat(client, scopedBoatName(s.environmentId, "gus"));
    const plan = await s.recovery.plan({ botIds: ["gus"] });
    expect(plan.registryError).toBe("bots.json is not valid JSON");
    const item = plan.items.find((i) => i.boxId === boxId);
    expect(item?.action.command).toBeNull();
    expect(item?.action.advice).toMatch(/bot registry could not be read/);
    const refused = await rejection(s.recovery.adopt("gus", boxId));
    expect(isRecoveryError(refused) && refused.code === "ACTION_NOT_ALLOWED", String(refused)).toBe(true);
    expect(s.creates()).toBeNull();
  });

  it("no registry at all (null) keeps today's behaviour: the Boat is adoptable", async () => {
    const s = setup({ registry: { ids: null } });
    const boxId = await namedBoat(client, scopedBoatName(s.environmentId, "gus"));
    const item = (await s.recovery.plan({ botIds: ["gus"] })).items.find((i) => i.boxId === boxId);
    expect(item?.action.name).toBe("adopt");
    expect(await s.recovery.adopt("gus", boxId, { expectedState: item!.stateDigest })).toMatchObject({
      ok: true,
      alreadyAdopted: false,
    });
  });
});

describe("F3: one fenced Boat command pasted twice at once applies once and answers 0 once", () => {
  it("deletions retry: one re-sends DELETE, the other STATE_CHANGED", async () => {
    const clock = { offsetMs: 0 };
    const s = setup({ clock });
    const boat = await s.lifecycle.provision("bot-r");
    await s.deleteJournal.prepareBoatDeletion({ boxId: boat.boxId, name: boat.name, ownerBotId: "bot-r" });
    clock.offsetMs = DELETE_IN_FLIGHT_MS + 1_000; // its DELETE is no longer on the wire
    const item = (await s.recovery.plan()).items.find((i) => i.boxId === boat.boxId);
    expect(item?.action.name).toBe("retryDeletion");
    const [a, b] = s.racing();
    const deletesBefore = sim.stats().deleteRequests;
    const results = await Promise.allSettled([
      a.retryDeletion(boat.boxId, { expectedState: item!.stateDigest }),
      b.retryDeletion(boat.boxId, { expectedState: item!.stateDigest }),
    ]);
    const error = expectOneWinner(results);
    expect((error as Error).message).toMatch(/changed while this command ran|changed since the plan/);
    // One DELETE reached boat.dev: the loser sent none.
    expect(sim.stats().deleteRequests).toBe(deletesBefore + 1);
  });

  it("creates retire: one retires the record, the other STATE_CHANGED", async () => {
    const s = setup();
    const boat = await s.lifecycle.provision("bot-t");
    await deleteAtBoatDev(boat.boxId);
    const item = (await s.recovery.plan()).items.find((candidate) => candidate.boxId === boat.boxId);
    expect(item?.action.name).toBe("retireCreate");
    const [a, b] = s.racing();
    const results = await Promise.allSettled([
      a.retireCreate("bot-t", { expectedState: item!.stateDigest }),
      b.retireCreate("bot-t", { expectedState: item!.stateDigest }),
    ]);
    expectOneWinner(results);
  });

  it("creates adopt: one records the Boat, the other STATE_CHANGED", async () => {
    const s = setup();
    const boxId = await namedBoat(client, scopedBoatName(s.environmentId, "bot-a"));
    const item = (await s.recovery.plan({ botIds: ["bot-a"] })).items.find((i) => i.boxId === boxId);
    expect(item?.action.name).toBe("adopt");
    const [a, b] = s.racing();
    const results = await Promise.allSettled([
      a.adopt("bot-a", boxId, { expectedState: item!.stateDigest }),
      b.adopt("bot-a", boxId, { expectedState: item!.stateDigest }),
    ]);
    const error = expectOneWinner(results);
    expect((error as Error).message).toMatch(/already bot bot-a's/);
  });
});
