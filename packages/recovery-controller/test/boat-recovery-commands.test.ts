/**
 * Every command the Boat plan prints must do what it says when pasted, and every action must say plainly
 * what it could not find out:
 *   - `reconcileDeletion` reads boat.dev directly and fails with the provider's error when it cannot (it
 *     never answers "pending" for a Boat it could not see); for a prepared fence it says that no deletion
 *     is running and hands back the fenced `deletions retry` that moves it;
 *   - an adopt command is printed only where `adopt` allows it (the same rule: a key-only create inside
 *     its retry window blocks it), and the unnamed-Boat advice never walks into that refusal;
 *   - a Boat carrying a bot's deterministic name that no journal knows is attributed to that bot when the
 *     bot's id is known (the bot registry, or the id the operator names), with the digest adopt checks.
 * Everything runs against the boat.dev simulator over HTTP.
 */
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openBoatCreateJournal } from "@drydock/boat-create-journal";
import { openBoatDeleteJournal } from "@drydock/boat-delete-journal";
import {
  createBoatLifecycle,
  DELETE_IN_FLIGHT_MS,
  legacyBoatName,
  scopedBoatName,
} from "@drydock/boat-lifecycle";
import {
  type BoatClient,
  createBoatClient,
  isBoatApiError,
  isBoatTransportError,
} from "@drydock/boat-provider";
import { type BoatSimulator, startBoatSimulator } from "@drydock/boat-provider/simulator";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  CREATE_WINDOW_MS,
  createBoatRecovery,
  isRecoveryError,
  planItemNeedsAttention,
} from "../src/index.js";
import { namedBoat, readOr, rejection } from "./helpers.js";

const BODY = { ttlSeconds: 600, noEnv: true } as const;
const BODY_TEXT = JSON.stringify({ ttlSeconds: 28_800, noEnv: true });

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
afterEach(async () => {
  await control("DELETE", "/_sim/faults");
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

async function control(method: string, path: string, body?: unknown): Promise<void> {
  const response = await fetch(`${sim.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${sim.token}`, "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  await response.arrayBuffer();
  if (response.status !== 200) throw new Error(`control failed: ${response.status}`);
}

async function closedPortUrl(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}/api/v1`;
}

interface SetupOptions {
  /** Offset added to the wall clock for the journals and the recovery (not for the lifecycle's setup). */
  clock?: { offsetMs: number };
  via?: BoatClient;
  knownBotIds?: readonly string[];
  commandPrefix?: string;
}

function setup(options: SetupOptions = {}) {
  dir = mkdtempSync(join(tmpdir(), "drydock-boat-commands-"));
  const dataDir = dir;
  const environmentId = randomUUID();
  const clock = options.clock ?? { offsetMs: 0 };
  const now = () => Date.now() + clock.offsetMs;
  const createJournal = openBoatCreateJournal({ dataDir, now });
  const deleteJournal = openBoatDeleteJournal({ dataDir, now });
  const lifecycleVia = (via: BoatClient) =>
    createBoatLifecycle({
      client: via,
      createJournal,
      deleteJournal,
      environmentId,
      sleep: async () => {},
      now,
    });
  const via = options.via ?? client;
  const recovery = createBoatRecovery({
    lifecycle: lifecycleVia(via),
    createJournal,
    deleteJournal,
    client: via,
    environmentId,
    now,
    ...(options.knownBotIds === undefined ? {} : { knownBotIds: () => options.knownBotIds ?? [] }),
    ...(options.commandPrefix === undefined ? {} : { commandPrefix: options.commandPrefix }),
  });
  return {
    dataDir,
    environmentId,
    clock,
    createJournal,
    deleteJournal,
    lifecycle: lifecycleVia(client),
    recovery,
    journals: () => ({
      creates: readOr(join(dataDir, "box-create-requests.json")),
      deletes: readOr(join(dataDir, "box-delete-requests.json")),
    }),
  };
}

describe("reconcileDeletion: one direct read that must succeed, and a plain answer", () => {
  it("passes boat.dev's failure through (503 to everything, a closed port) and writes nothing", async () => {
    const s = setup({ clock: { offsetMs: DELETE_IN_FLIGHT_MS + 1_000 } });
    const prepared = await s.lifecycle.provision("bot-prepared");
    await s.deleteJournal.prepareBoatDeletion({
      boxId: prepared.boxId,
      name: prepared.name,
      ownerBotId: "bot-prepared",
    });
    const accepted = await s.lifecycle.provision("bot-accepted");
    await s.deleteJournal.prepareBoatDeletion({
      boxId: accepted.boxId,
      name: accepted.name,
      ownerBotId: "bot-accepted",
    });
    await s.deleteJournal.markBoatDeletionAccepted(
      accepted.boxId,
      await client.deleteSandbox(accepted.boxId),
    );
    const journals = s.journals();

    await control("POST", "/_sim/faults", {
      rules: [{ action: "fail-before", status: 503, code: "service_unavailable", times: 1_000 }],
    });
    for (const boxId of [prepared.boxId, accepted.boxId]) {
      const error = await rejection(s.recovery.reconcileDeletion(boxId));
      expect(isRecoveryError(error), String(error)).toBe(false);
      expect(isBoatApiError(error) && error.status === 503, String(error)).toBe(true);
      expect(s.journals()).toEqual(journals);
    }
    await control("DELETE", "/_sim/faults");

    const down = createBoatClient({ baseUrl: await closedPortUrl(), token: sim.token });
    const offline = createBoatRecovery({
      lifecycle: createBoatLifecycle({
        client: down,
        createJournal: s.createJournal,
        deleteJournal: s.deleteJournal,
        environmentId: s.environmentId,
        sleep: async () => {},
      }),
      createJournal: s.createJournal,
      deleteJournal: s.deleteJournal,
      client: down,
      environmentId: s.environmentId,
    });
    for (const boxId of [prepared.boxId, accepted.boxId]) {
      const error = await rejection(offline.reconcileDeletion(boxId));
      expect(isBoatTransportError(error), String(error)).toBe(true);
      expect(s.journals()).toEqual(journals);
    }
  });

  it("a prepared fence whose Boat exists: says no deletion is running and returns the plan's exact retry command", async () => {
    const s = setup({ clock: { offsetMs: 0 } });
    const boat = await s.lifecycle.provision("bot-unsent");
    await s.deleteJournal.prepareBoatDeletion({
      boxId: boat.boxId,
      name: boat.name,
      ownerBotId: "bot-unsent",
    });
    const requestsBefore = sim.stats().deleteRequests;

    // Inside the in-flight window another process's DELETE may be on the wire: that is not "not running".
    s.clock.offsetMs = 5_000;
    const young = await s.recovery.reconcileDeletion(boat.boxId);
    expect(young).toMatchObject({ ok: true, outcome: "pending", next: { name: null, command: null } });
    expect((young as { next: { advice: string } }).next.advice).toMatch(/Wait 25 s/);

    s.clock.offsetMs = DELETE_IN_FLIGHT_MS + 1_000;
    const item = (await s.recovery.plan()).items.find((candidate) => candidate.boxId === boat.boxId)!;
    expect(item.action.name).toBe("retryDeletion");
    const result = await s.recovery.reconcileDeletion(boat.boxId, { expectedState: item.stateDigest });
    expect(result).toMatchObject({
      ok: true,
      action: "reconcileDeletion",
      boxId: boat.boxId,
      outcome: "not_running",
      next: { name: "retryDeletion", command: item.action.command },
    });
    expect((result as { message: string }).message).toMatch(/no deletion .*is running/i);
    expect((result as { message: string }).message).toContain("deletions retry");
    expect(sim.stats().deleteRequests).toBe(requestsBefore);

    // The command it hands back applies (the fence did not move).
    const retried = await s.recovery.retryDeletion(boat.boxId, { expectedState: item.stateDigest });
    expect(retried).toMatchObject({ ok: true, action: "retryDeletion" });
  });

  it("an accepted fence still being deleted: pending, with the reconcile command for the fence as it stands now", async () => {
    const s = setup();
    const boat = await s.lifecycle.provision("bot-working");
    await s.deleteJournal.prepareBoatDeletion({
      boxId: boat.boxId,
      name: boat.name,
      ownerBotId: "bot-working",
    });
    await s.deleteJournal.markBoatDeletionAccepted(boat.boxId, await client.deleteSandbox(boat.boxId));
    const result = (await s.recovery.reconcileDeletion(boat.boxId)) as {
      outcome: string;
      next: { name: string; command: string } | null;
    };
    expect(result.outcome).toBe("pending");
    const item = (await s.recovery.plan()).items.find((candidate) => candidate.boxId === boat.boxId)!;
    expect(result.next).toMatchObject({ name: "reconcileDeletion", command: item.action.command });
  });
});

describe("adopt commands are printed only where adopt allows them", () => {
  it("a Boat named for a bot whose key-only create is inside its window: no command, the reason and the way out; past the window the printed command adopts", async () => {
    const s = setup();
    await s.createJournal.beginBoatCreate("bot-key", BODY_TEXT);
    const boxId = await namedBoat(client, scopedBoatName(s.environmentId, "bot-key"));

    const plan = await s.recovery.plan();
    const item = plan.items.find((candidate) => candidate.boxId === boxId)!;
    expect(item).toMatchObject({
      kind: "unknown_boat",
      botId: "bot-key",
      action: { name: null, command: null },
    });
    expect(item.action.advice).toMatch(/window/);
    expect(item.action.advice).not.toMatch(/creates adopt bot-key/);
    // The same rule refuses the action itself.
    const refused = await rejection(s.recovery.adopt("bot-key", boxId, { expectedState: item.stateDigest }));
    expect((refused as { code?: string }).code).toBe("ACTION_NOT_ALLOWED");
    // The create row's own item does not send the operator to provisioning, which is paused by this Boat.
    const row = plan.items.find((candidate) => candidate.kind === "create_in_window")!;
    expect(row.action.advice).toContain(boxId);
    await expect(s.lifecycle.provision("bot-key")).rejects.toMatchObject({ code: "recovery_paused" });

    s.clock.offsetMs = CREATE_WINDOW_MS + 60_000;
    const later = (await s.recovery.plan()).items.find((candidate) => candidate.boxId === boxId)!;
    expect(later).toMatchObject({ kind: "unknown_boat", botId: "bot-key", action: { name: "adopt" } });
    expect(later.action.command).toBe(
      `drydock creates adopt bot-key ${boxId} --expected-state ${later.stateDigest} --yes`,
    );
    const adopted = await s.recovery.adopt("bot-key", boxId, { expectedState: later.stateDigest });
    expect(adopted).toMatchObject({ ok: true, action: "adopt", botId: "bot-key", boxId });
  });

  it("an unnamed Boat while a key-only create is inside its window: retry provisioning (the key settles it), never rename it first", async () => {
    const s = setup();
    const { request } = await s.createJournal.beginBoatCreate("bot-unnamed", BODY_TEXT);
    // boat.dev created the Boat under the key; the answer never reached drydock.
    const { sandbox } = await client.createSandbox(
      { ttlSeconds: 28_800, noEnv: true },
      { idempotencyKey: request.idempotencyKey },
    );

    const item = (await s.recovery.plan()).items.find((candidate) => candidate.boxId === sandbox.id)!;
    expect(item).toMatchObject({ kind: "unnamed_boat", action: { name: null, command: null } });
    expect(item.action.advice).toContain("POST /v1/bots/bot-unnamed/computer");
    expect(item.action.advice).not.toMatch(/rename it/i);

    // Past the window the advice names the bot, its name and the adopt that follows a rename.
    s.clock.offsetMs = CREATE_WINDOW_MS + 60_000;
    const later = (await s.recovery.plan()).items.find((candidate) => candidate.boxId === sandbox.id)!;
    expect(later.action.advice).toContain(scopedBoatName(s.environmentId, "bot-unnamed"));
    expect(later.action.advice).toContain("bot-unnamed");
    s.clock.offsetMs = 0;

    // Following the in-window advice settles it: the retried key returns this very Boat, named and owned.
    const provisioned = await s.lifecycle.provision("bot-unnamed");
    expect(provisioned.boxId).toBe(sandbox.id);
    expect(await s.createJournal.boatCreateRecoverySnapshot()).toEqual([
      expect.objectContaining({ botId: "bot-unnamed", boxId: sandbox.id, resolved: true }),
    ]);
  });
});

describe("a Boat with a bot's deterministic name that no journal knows", () => {
  it("is found with the contract's four options alone (the scope comes from the lifecycle); a foreign environmentId is refused", async () => {
    const s = setup();
    const boxId = await namedBoat(client, scopedBoatName(s.environmentId, "bot-four"));
    const foreign = await namedBoat(client, scopedBoatName(randomUUID(), "bot-four"));
    const four = createBoatRecovery({
      lifecycle: s.lifecycle,
      createJournal: s.createJournal,
      deleteJournal: s.deleteJournal,
      client,
    });
    const items = (await four.plan()).items;
    expect(items.find((item) => item.boxId === boxId)).toMatchObject({ kind: "unknown_boat" });
    // Another installation's Boat on the same account is not this one's to offer.
    expect(items.find((item) => item.boxId === foreign)).toBeUndefined();

    const mismatched = () =>
      createBoatRecovery({
        lifecycle: s.lifecycle,
        createJournal: s.createJournal,
        deleteJournal: s.deleteJournal,
        client,
        environmentId: randomUUID(),
      });
    expect(mismatched).toThrow(expect.objectContaining({ code: "INVALID_ARGUMENT" }));
    expect(mismatched).toThrow(/another installation's Boats/);
  });

  it("refuses at construction a missing client or journal, instead of planning every Boat as unreadable", () => {
    const s = setup();
    const full = {
      lifecycle: s.lifecycle,
      createJournal: s.createJournal,
      deleteJournal: s.deleteJournal,
      client,
    };
    for (const [missing, method] of [
      ["client", "getSandbox"],
      ["createJournal", "boatCreateRecoverySnapshot"],
      ["deleteJournal", "boatDeletionSnapshot"],
    ] as const) {
      const build = () => createBoatRecovery({ ...full, [missing]: undefined } as never);
      expect(build).toThrow(expect.objectContaining({ code: "INVALID_ARGUMENT" }));
      expect(build).toThrow(`createBoatRecovery needs ${missing} (it has no ${method} method)`);
    }
    expect(() => createBoatRecovery(full)).not.toThrow();
  });

  it("is attributed to a known bot (registry ids, or the id the operator names) with the digest adopt checks", async () => {
    const s = setup({ knownBotIds: ["bot-registered"] });
    const registered = await namedBoat(client, scopedBoatName(s.environmentId, "bot-registered"));
    const named = await namedBoat(client, scopedBoatName(s.environmentId, "bot-lost"));
    const legacy = await namedBoat(client, legacyBoatName("bot-old"));

    const plan = await s.recovery.plan();
    const item = plan.items.find((candidate) => candidate.boxId === registered)!;
    expect(item).toMatchObject({ kind: "unknown_boat", botId: "bot-registered", action: { name: "adopt" } });
    expect(item.action.command).toBe(
      `drydock creates adopt bot-registered ${registered} --expected-state ${item.stateDigest} --yes`,
    );
    // A bot the plan cannot know: no guess, but the advice says how to find it (its name's slug).
    const lost = plan.items.find((candidate) => candidate.boxId === named)!;
    expect(lost).toMatchObject({ kind: "unknown_boat", botId: null, action: { name: null, command: null } });
    expect(lost.action.advice).toContain("botlost");
    expect(lost.action.advice).toContain(`creates adopt <botId> ${named}`);
    // A legacy name proves nothing about this installation until a bot id is named.
    expect(plan.items.find((candidate) => candidate.boxId === legacy)).toBeUndefined();

    // The operator names the bot: the plan attributes the Boat, and its digest is the one adopt checks.
    const named2 = await s.recovery.plan({ botIds: ["bot-lost", "bot-old"] });
    const attributed = named2.items.find((candidate) => candidate.boxId === named)!;
    expect(attributed).toMatchObject({ botId: "bot-lost", action: { name: "adopt" } });
    expect(attributed.stateDigest).toBe(lost.stateDigest);
    const old = named2.items.find((candidate) => candidate.boxId === legacy)!;
    expect(old).toMatchObject({ kind: "unknown_boat", botId: "bot-old", action: { name: "adopt" } });

    for (const [botId, boxId, digest] of [
      ["bot-registered", registered, item.stateDigest],
      ["bot-lost", named, attributed.stateDigest],
      ["bot-old", legacy, old.stateDigest],
    ] as const) {
      const adopted = await s.recovery.adopt(botId, boxId, { expectedState: digest });
      expect(adopted).toMatchObject({ ok: true, action: "adopt", botId, boxId, alreadyAdopted: false });
    }
  });

  it("offers no adopt when the bot already owns another Boat: the advice names it", async () => {
    const s = setup({ knownBotIds: ["bot-twice"] });
    const owned = await s.lifecycle.provision("bot-twice");
    const second = await namedBoat(client, scopedBoatName(s.environmentId, "bot-twice"));
    const item = (await s.recovery.plan()).items.find((candidate) => candidate.boxId === second)!;
    expect(item).toMatchObject({
      kind: "unknown_boat",
      botId: "bot-twice",
      action: { name: null, command: null },
    });
    expect(item.action.advice).toContain(owned.boxId);
    const refused = await rejection(
      s.recovery.adopt("bot-twice", second, { expectedState: item.stateDigest }),
    );
    expect((refused as { code?: string }).code).toBe("ACTION_NOT_ALLOWED");
  });
});

describe("every command a message names starts with the command prefix", () => {
  /** A data directory that needs quoting: a pasted `drydock reconcile` would read ./.drydock instead. */
  const PREFIX = "drydock --data-dir '/srv/drydock x'";

  /** Every `drydock …` command quoted in `text` starts with PREFIX; returns how many there were. */
  function prefixed(text: string): number {
    const quoted = [...text.matchAll(/`(drydock[^`]*)`/g)].map((match) => match[1]!);
    for (const command of quoted)
      expect(command.startsWith(`${PREFIX} `), `${command} in: ${text}`).toBe(true);
    return quoted.length;
  }
  const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error));

  it("plan advice, reconcile answers and refusals name the prefix the recovery was given", async () => {
    const s = setup({ commandPrefix: PREFIX, knownBotIds: ["bot-key", "bot-fenced"] });

    // A fence prepared moments ago: the plan's advice and reconcile's next step both say to wait, then reconcile.
    const fenced = await s.lifecycle.provision("bot-fenced");
    await s.deleteJournal.prepareBoatDeletion({
      boxId: fenced.boxId,
      name: fenced.name,
      ownerBotId: "bot-fenced",
    });
    s.clock.offsetMs = 5_000;
    const waiting = (await s.recovery.plan()).items.find((item) => item.boxId === fenced.boxId)!;
    expect(waiting.action.command).toBeNull();
    expect(waiting.action.advice).toContain(`Wait 25 s, then run \`${PREFIX} reconcile\` again.`);
    const young = (await s.recovery.reconcileDeletion(fenced.boxId)) as { next: { advice: string } };
    expect(prefixed(young.next.advice)).toBe(1);
    s.clock.offsetMs = 0;

    // A Boat carrying the bot's name while its key-only create is inside the window: reconcile again, twice.
    await s.createJournal.beginBoatCreate("bot-key", BODY_TEXT);
    const named = await namedBoat(client, scopedBoatName(s.environmentId, "bot-key"));
    // An unnamed Boat while a key-only create past its window exists: rename it, then reconcile again.
    s.clock.offsetMs = -(CREATE_WINDOW_MS + 60_000);
    await s.createJournal.beginBoatCreate("bot-old", BODY_TEXT);
    s.clock.offsetMs = 0;
    const unnamed = await namedBoat(client, null);
    const plan = await s.recovery.plan();
    const keyItem = plan.items.find((item) => item.boxId === named)!;
    expect(keyItem.action.command).toBeNull();
    expect(prefixed(keyItem.action.advice)).toBe(2);
    const unnamedItem = plan.items.find((item) => item.boxId === unnamed)!;
    expect(unnamedItem.kind).toBe("unnamed_boat");
    expect(unnamedItem.action.advice).toContain(
      `then run \`${PREFIX} reconcile\` again: it offers the adopt command.`,
    );
    const expired = plan.items.find((item) => item.botId === "bot-old" && item.kind === "create_expired")!;
    expect(prefixed(expired.action.advice)).toBe(1);
    // Every other piece of advice in the plan, too.
    for (const item of plan.items) prefixed(item.action.advice);

    // Refusals: a digest that no longer matches, a bot whose deletion fence stands, a key-only row.
    const stale = messageOf(
      await rejection(s.recovery.adopt("bot-key", named, { expectedState: `sha256:${"0".repeat(64)}` })),
    );
    expect(stale).toContain(`Run \`${PREFIX} reconcile\``);
    const fencedAdopt = messageOf(await rejection(s.recovery.adopt("bot-fenced", named)));
    expect(fencedAdopt).toContain(`\`${PREFIX} deletions list\``);
    const keyOnly = messageOf(await rejection(s.recovery.retireCreate("bot-key")));
    expect(keyOnly).toContain(`\`${PREFIX} creates list\``);
    const retireFenced = messageOf(await rejection(s.recovery.retireCreate("bot-fenced")));
    expect(retireFenced).toContain(`\`${PREFIX} deletions reconcile ${fenced.boxId}\``);

    // An accepted deletion: a retry is refused with the reconcile to run instead.
    await s.deleteJournal.markBoatDeletionAccepted(fenced.boxId, await client.deleteSandbox(fenced.boxId));
    const blind = messageOf(await rejection(s.recovery.retryDeletion(fenced.boxId)));
    expect(blind).toContain(`\`${PREFIX} deletions reconcile ${fenced.boxId}\``);

    // A remembered Boat carrying a foreign name, and one boat.dev could not be asked about.
    const { request } = await s.createJournal.beginBoatCreate("bot-renamed", BODY_TEXT);
    await s.createJournal.rememberCreatedBoat(request, await namedBoat(client, "someone-elses"));
    const foreign = (await s.recovery.plan()).items.find((item) => item.botId === "bot-renamed")!;
    expect(foreign.kind).toBe("create_unresolved");
    expect(foreign.action.advice).toContain(`then run \`${PREFIX} reconcile\` again.`);
    await control("POST", "/_sim/faults", {
      rules: [{ action: "fail-before", status: 503, code: "service_unavailable", times: 1_000 }],
    });
    const unknown = (await s.recovery.plan()).items.find((item) => item.botId === "bot-renamed")!;
    expect(unknown.facts.provider.kind).toBe("unknown");
    expect(unknown.action.advice).toBe(`Retry when boat.dev is reachable (\`${PREFIX} reconcile\`).`);
  });
});

describe("a fenced Boat renamed in boat.dev", () => {
  it("gets no retry command (it could only refuse): the advice says what boat.dev shows and the way out, the digest moves with the name, and the old retry is a moved state", async () => {
    const s = setup({ clock: { offsetMs: 0 } });
    const boat = await s.lifecycle.provision("bot-fence-renamed");
    await s.deleteJournal.prepareBoatDeletion({
      boxId: boat.boxId,
      name: boat.name,
      ownerBotId: "bot-fence-renamed",
    });
    s.clock.offsetMs = DELETE_IN_FLIGHT_MS + 1_000; // past the in-flight window: a retry is what is left
    const before = (await s.recovery.plan()).items.find((item) => item.boxId === boat.boxId)!;
    expect(before.action.name).toBe("retryDeletion");

    await client.renameSandbox(boat.boxId, "renamed-by-hand");
    const requests = sim.stats().deleteRequests;
    const journals = s.journals();
    const item = (await s.recovery.plan()).items.find((candidate) => candidate.boxId === boat.boxId)!;
    expect(item).toMatchObject({ kind: "deletion_fence", action: { name: null, command: null } });
    expect(item.action.advice).toContain(
      `boat.dev shows Boat ${boat.boxId} named renamed-by-hand, not the fenced ${boat.name}`,
    );
    expect(item.action.advice).toMatch(
      /Rename it back .* or delete it there; then run `drydock reconcile` again/,
    );
    expect(item.stateDigest).not.toBe(before.stateDigest);
    expect(planItemNeedsAttention(item)).toBe(true);

    // The retry printed before the rename is stale: exit-4 class, nothing sent, nothing written.
    const stale = await rejection(
      s.recovery.retryDeletion(boat.boxId, { expectedState: before.stateDigest }),
    );
    expect((stale as { code?: string }).code).toBe("STATE_CHANGED");
    // Reconciling says the same as the plan, and names no command that would only refuse.
    const reconciled = await s.recovery.reconcileDeletion(boat.boxId, { expectedState: item.stateDigest });
    expect(reconciled).toMatchObject({ outcome: "not_running", next: { name: null, command: null } });
    expect((reconciled as { message: string }).message).toContain("named renamed-by-hand");
    expect(sim.stats().deleteRequests).toBe(requests);
    expect(s.journals()).toEqual(journals);

    // Renamed back: the fence's own facts again, and the retry applies.
    await client.renameSandbox(boat.boxId, boat.name);
    const back = (await s.recovery.plan()).items.find((candidate) => candidate.boxId === boat.boxId)!;
    expect(back).toMatchObject({ action: { name: "retryDeletion" }, stateDigest: before.stateDigest });
    const retried = await s.recovery.retryDeletion(boat.boxId, { expectedState: back.stateDigest });
    expect(retried).toMatchObject({ ok: true, action: "retryDeletion" });
  });
});

describe("a fenced command re-sent after it applied is a moved state (STATE_CHANGED), never a silent success", () => {
  it("adopt and retire re-sent with their own digest refuse, and change nothing; adopt without a digest still answers alreadyAdopted", async () => {
    const s = setup({ knownBotIds: ["bot-twice-sent"] });
    const boxId = await namedBoat(client, scopedBoatName(s.environmentId, "bot-twice-sent"));
    const item = (await s.recovery.plan()).items.find((candidate) => candidate.boxId === boxId)!;
    expect(item.action.name).toBe("adopt");
    await s.recovery.adopt("bot-twice-sent", boxId, { expectedState: item.stateDigest });
    const journals = s.journals();

    const again = await rejection(
      s.recovery.adopt("bot-twice-sent", boxId, { expectedState: item.stateDigest }),
    );
    expect((again as { code?: string }).code).toBe("STATE_CHANGED");
    expect((again as Error).message).toContain(`Boat ${boxId} is already bot bot-twice-sent's`);
    const malformed = await rejection(s.recovery.adopt("bot-twice-sent", boxId, { expectedState: "nope" }));
    expect((malformed as { code?: string }).code).toBe("INVALID_ARGUMENT");
    expect(await s.recovery.adopt("bot-twice-sent", boxId)).toMatchObject({ alreadyAdopted: true });
    expect(s.journals()).toEqual(journals);

    // retire: the record it retired is gone, which a fenced command reports as moved (as a lifted fence is).
    const gone = await s.lifecycle.provision("bot-retired-twice");
    const operation = await client.deleteSandbox(gone.boxId);
    for (let poll = 0; poll < 5; poll += 1) {
      if ((await client.getDeletionOperation(operation.id)).status === "completed") break;
    }
    const retire = (await s.recovery.plan()).items.find(
      (candidate) => candidate.botId === "bot-retired-twice",
    )!;
    expect(retire.action.name).toBe("retireCreate");
    await s.recovery.retireCreate("bot-retired-twice", { expectedState: retire.stateDigest });
    const twice = await rejection(
      s.recovery.retireCreate("bot-retired-twice", { expectedState: retire.stateDigest }),
    );
    expect((twice as { code?: string }).code).toBe("STATE_CHANGED");
    expect((twice as Error).message).toMatch(/no record for bot bot-retired-twice now/);
    // Without a fence it is still plainly not found.
    const plain = await rejection(s.recovery.retireCreate("bot-retired-twice"));
    expect((plain as { code?: string }).code).toBe("NOT_FOUND");
  });
});

describe("a listed Boat no journal knows is read directly before it is reported", () => {
  it("leaves out a Boat boat.dev deleted but still lists; keeps one whose read fails, and says so", async () => {
    const lagged = await startBoatSimulator({ provisionMs: 0, deletionPolls: 1, listLagMs: 60_000 });
    try {
      const via = createBoatClient({ baseUrl: lagged.apiUrl, token: lagged.token });
      const s = setup({ via, knownBotIds: ["bot-deleted", "bot-alive", "bot-unread"] });
      const make = async (botId: string) => {
        const { sandbox } = await via.createSandbox(BODY, { idempotencyKey: randomUUID() });
        await via.renameSandbox(sandbox.id, scopedBoatName(s.environmentId, botId));
        return sandbox.id;
      };
      const deleted = await make("bot-deleted");
      const alive = await make("bot-alive");
      const unread = await make("bot-unread");
      lagged.advanceClock(61_000); // all three listed now
      const operation = await via.deleteSandbox(deleted);
      for (let poll = 0; poll < 5; poll += 1) {
        if ((await via.getDeletionOperation(operation.id)).status === "completed") break;
      }
      await expect(via.getSandbox(deleted)).rejects.toMatchObject({ status: expect.any(Number) });
      expect((await via.listAllSandboxes()).map((boat) => boat.id)).toContain(deleted);

      const faultResponse = await fetch(`${lagged.url}/_sim/faults`, {
        method: "POST",
        headers: { authorization: `Bearer ${lagged.token}`, "content-type": "application/json" },
        body: JSON.stringify({
          rules: [
            {
              method: "GET",
              path: `^/sandboxes/${unread}$`,
              action: "fail-before",
              status: 503,
              code: "service_unavailable",
              times: 1,
            },
          ],
        }),
      });
      expect(faultResponse.status).toBe(200);

      const items = (await s.recovery.plan()).items;
      expect(items.find((item) => item.boxId === deleted)).toBeUndefined();
      expect(items.find((item) => item.boxId === alive)).toMatchObject({
        kind: "unknown_boat",
        botId: "bot-alive",
        action: { name: "adopt" },
      });
      const kept = items.find((item) => item.boxId === unread)!;
      expect(kept).toMatchObject({ kind: "unknown_boat", botId: "bot-unread" });
      expect(kept.summary).toMatch(/boat\.dev lists it, but reading it directly failed: .*503|service/);
    } finally {
      await lagged.close();
    }
  });
});
