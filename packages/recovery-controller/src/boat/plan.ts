/**
 * The Boat recovery plan: a read-only list of everything about Boats that needs a person (create rows,
 * deletion fences, Boats no journal knows), each with the one safe action and its exact command.
 */
import { scopeOfBoatName } from "@drydock/boat-lifecycle";
import { walkSandboxes } from "@drydock/boat-provider";
import { digestOf } from "../internal/digest.js";
import type { RecoveryDeletionRecord } from "../ports.js";
import {
  BOT_ID_PATTERN,
  type BoatObservation,
  type BoatPlan,
  CLOCK_SKEW_TOLERANCE_MS,
  createInFlightLeftMs,
  fenceInFlightLeftMs,
  type PlanItem,
} from "../schema.js";
import {
  expiredCreateAdvice,
  foreignNameAdvice,
  inFlightFenceAdvice,
  inWindowAdvice,
  inWindowSummary,
  pausedProvisioningAdvice,
  registryUnreadableAdvice,
  renamedFenceAdvice,
  skewedFenceAdvice,
  unclaimedAdvice,
  unnamedAdvice,
  unregisteredAdvice,
} from "./advice.js";
import {
  absenceProof,
  type BoatContext,
  type CreateRow,
  command,
  observe,
  ownsName,
  type Registration,
  type Registry,
  readRegistry,
  registrationOf,
} from "./context.js";
import { fenceDigest, ITEM_DOMAIN, providerFact, renamedTo, rowFacts, rowOf } from "./facts.js";
import { adoptRefusal } from "./rules.js";
import type { BoatPlanOptions } from "./types.js";
import { createWindowLeftMs, keyStillRetried } from "./window.js";

type ListedBoat = { id: string; name: string | null; state: string };
type UnknownBoat = { boat: ListedBoat; claimant: string | null; read: UnknownBoatRead };
/** How a listed Boat no journal knows was confirmed: read directly, not read (over the bound), or the read failed. */
type UnknownBoatRead = "confirmed" | "listed_only" | { failed: string };

/**
 * At most this many listed Boats no journal knows are read directly per plan, to leave out those boat.dev
 * has deleted but still lists (its list is eventually consistent). Such Boats are rare (a crash between a
 * create and its record, a deletion moments ago); a plan over more of them reports the rest as listed.
 */
const UNKNOWN_BOAT_READS = 50;

/** The fields every item of one create row shares, and what it observed. */
interface CreateFacts {
  row: CreateRow;
  observation: BoatObservation;
  base: Pick<PlanItem, "botId" | "boxId" | "stateDigest">;
  facts: { resolved: boolean; ageMs: number; windowLeftMs: number; provider: BoatObservation };
}

/** The plan item for one create row, from freshly observed facts (also used by the actions). */
export function createItem(
  ctx: BoatContext,
  row: CreateRow,
  observation: BoatObservation,
  at: number,
  registry: Registry,
): PlanItem | null {
  const ageMs = Math.max(0, at - row.createdAt);
  const windowLeftMs = createWindowLeftMs(row, at);
  const registered = registrationOf(registry, row.botId);
  const digest = digestOf(ITEM_DOMAIN, {
    kind: "create",
    row: rowOf(row),
    // Past the window the key can no longer be retried: that flip changes what is safe.
    expired: windowLeftMs === 0,
    provider: providerFact(observation),
    // Whether its bot exists decides whether adopting is allowed (a retire needs only the Boat gone).
    ...(registered === undefined || observation.kind === "absent" ? {} : { registered }),
  });
  const item: CreateFacts = {
    row,
    observation,
    base: { botId: row.botId, boxId: row.boxId ?? null, stateDigest: digest },
    facts: { resolved: row.resolved, ageMs, windowLeftMs, provider: observation },
  };
  if (row.boxId === undefined) return keyOnlyItem(ctx, item, at);
  if (observation.kind === "absent") return goneItem(ctx, item, observation.status);
  if (registered === false) return unregisteredItem(ctx, item);
  if (row.resolved) return null;
  return unresolvedItem(ctx, item, registry, registered);
}

/** A create row without a Boat id: its key still retried (in the window), or no longer sent (expired). */
function keyOnlyItem(ctx: BoatContext, { row, base, facts }: CreateFacts, at: number): PlanItem {
  if (keyStillRetried(row, at)) {
    const inFlightLeftMs = createInFlightLeftMs(row.createdAt, at);
    return {
      ...base,
      kind: "create_in_window",
      name: null,
      summary: inWindowSummary(row.botId, facts.ageMs, inFlightLeftMs),
      facts: { ...facts, ...(inFlightLeftMs > 0 ? { inFlightLeftMs } : {}) },
      action: { name: null, command: null, advice: inWindowAdvice(row.botId) },
    };
  }
  return {
    ...base,
    kind: "create_expired",
    name: null,
    summary: `Bot ${row.botId} has a create request whose Boat id was never recorded and whose key drydock no longer sends (within an hour of, or past, boat.dev's 24-hour retry window); creation for this bot is paused.`,
    facts,
    action: { name: null, command: null, advice: expiredCreateAdvice(ctx, row) },
  };
}

/** A create row whose Boat boat.dev proved absent: retire the record. */
function goneItem(ctx: BoatContext, { row, base, facts }: CreateFacts, status: number): PlanItem {
  const retire = command(ctx, "creates", "retire", row.botId, "--expected-state", base.stateDigest, "--yes");
  return {
    ...base,
    kind: "create_boat_gone",
    name: null,
    summary: row.resolved
      ? `Bot ${row.botId} owns Boat ${row.boxId}, which boat.dev says no longer exists (${status}).`
      : `Bot ${row.botId}'s remembered Boat ${row.boxId} does not exist at boat.dev (${status}).`,
    facts,
    action: {
      name: "retireCreate",
      command: retire,
      advice: row.resolved
        ? "Retire the ownership record; the next provision creates a new Boat."
        : "Retire the create record; boat.dev proved the Boat absent, so nothing can be orphaned.",
    },
  };
}

/**
 * A Boat recorded for a bot that does not exist (deleted after a stale adopt landed, or a journal from
 * elsewhere): billed, and no tool uses or deletes it. Never "fine" just because it is resolved.
 */
function unregisteredItem(ctx: BoatContext, { row, observation, base, facts }: CreateFacts): PlanItem {
  return {
    ...base,
    kind: "create_bot_unregistered",
    name: observation.kind === "present" ? observation.name : null,
    summary:
      observation.kind === "present"
        ? `Bot ${row.botId} is not registered (deleted, or never created here), but the create journal records Boat ${row.boxId} for it, which boat.dev still has: it is billed, and no bot uses it or can delete it.`
        : `Bot ${row.botId} is not registered (deleted, or never created here), but the create journal records Boat ${row.boxId} for it, and boat.dev could not be asked whether it still exists (it may still be billed).`,
    facts,
    action: { name: null, command: null, advice: unregisteredAdvice(ctx, row) },
  };
}

/** A Boat id remembered for the bot but never recorded as owned: adopt it, or say why not. */
function unresolvedItem(
  ctx: BoatContext,
  { row, observation, base, facts }: CreateFacts,
  registry: Registry,
  registered: Registration,
): PlanItem {
  if (observation.kind !== "present") {
    return {
      ...base,
      kind: "create_unresolved",
      name: null,
      summary: `Bot ${row.botId}'s remembered Boat ${row.boxId} is not resolved and boat.dev could not be asked about it.`,
      facts,
      action: {
        name: null,
        command: null,
        advice: `Retry when boat.dev is reachable (\`${command(ctx, "reconcile")}\`).`,
      },
    };
  }
  const { name } = observation;
  if (name !== null && !ownsName(ctx, row.botId, name)) {
    return {
      ...base,
      kind: "create_unresolved",
      name,
      summary: `Bot ${row.botId}'s remembered Boat ${row.boxId} carries a name that is not the bot's (${name}).`,
      facts,
      action: { name: null, command: null, advice: foreignNameAdvice(ctx, row.botId) },
    };
  }
  const adopt = command(
    ctx,
    "creates",
    "adopt",
    row.botId,
    row.boxId!,
    "--expected-state",
    base.stateDigest,
    "--yes",
  );
  return {
    ...base,
    kind: "create_unresolved",
    name,
    summary: `Bot ${row.botId}'s Boat ${row.boxId} exists but was never recorded as owned${name === null ? " (it is still unnamed)" : ""}.`,
    facts,
    // Whether the bot still exists could not be checked: nothing is offered for adoption.
    action:
      registered === "unknown"
        ? { name: null, command: null, advice: registryUnreadableAdvice(ctx, registry) }
        : {
            name: "adopt",
            command: adopt,
            advice:
              name === null
                ? `Adopt it: drydock names it ${ctx.lifecycle.boatNameFor(row.botId)} and records it as the bot's Boat.`
                : "Adopt it: record it as the bot's Boat.",
          },
  };
}

export function fenceItem(
  ctx: BoatContext,
  record: RecoveryDeletionRecord,
  observation: BoatObservation,
  at: number,
): PlanItem {
  const digest = fenceDigest(record, observation);
  const renamed = renamedTo(record, observation);
  const retry = command(ctx, "deletions", "retry", record.boxId, "--expected-state", digest, "--yes");
  const reconcile = command(ctx, "deletions", "reconcile", record.boxId, "--expected-state", digest, "--yes");
  // The same window retryDeletion refuses inside: offering a command that would only refuse is no plan.
  // A fence stamped ahead of this clock (clocks disagree, or this one stepped back) stays "in flight" until
  // the clock catches up: no wait to count down, so a person is asked to look at the clocks instead.
  const aheadMs = record.phase === "prepared" ? record.updatedAt - at : 0;
  const skewed = aheadMs > CLOCK_SKEW_TOLERANCE_MS;
  const inFlightLeftMs = fenceInFlightLeftMs(record, at);
  let action: PlanItem["action"];
  if (observation.kind === "absent" || record.phase === "accepted") {
    action = {
      name: "reconcileDeletion",
      command: reconcile,
      advice:
        observation.kind === "absent"
          ? "boat.dev says the Boat is gone: reconcile to finish the deletion and lift the fence."
          : "boat.dev accepted the deletion: reconcile polls it once and finishes the fence when it completes (never a second DELETE).",
    };
  } else if (observation.kind === "present" && skewed) {
    action = {
      name: null,
      command: null,
      advice: skewedFenceAdvice(ctx, record, aheadMs),
    };
  } else if (observation.kind === "present" && inFlightLeftMs > 0) {
    action = {
      name: null,
      command: null,
      advice: inFlightFenceAdvice(ctx, inFlightLeftMs),
    };
  } else if (observation.kind === "present" && renamed !== undefined) {
    // A retry would only be refused (the fence's name is the confirmation; boat-lifecycle's name_mismatch):
    // no command until a person puts the name back or deletes the Boat.
    action = {
      name: null,
      command: null,
      advice: renamedFenceAdvice(ctx, record, renamed),
    };
  } else if (observation.kind === "present") {
    action = {
      name: "retryDeletion",
      command: retry,
      advice:
        record.phase === "blocked"
          ? "boat.dev blocked the deletion: fix the cause in boat.dev, then retry it."
          : "The DELETE was never confirmed: retry it (the fence stays until boat.dev proves the Boat gone).",
    };
  } else {
    action = {
      name: null,
      command: null,
      advice: "boat.dev could not be asked; retry when it is reachable.",
    };
  }
  return {
    kind: "deletion_fence",
    botId: record.ownerBotId,
    boxId: record.boxId,
    name: record.name,
    summary: `Boat ${record.boxId} (${record.name}) is fenced for deletion: ${record.phase}${record.status ? `/${record.status}` : ""}${renamed === undefined ? "" : `; boat.dev now shows it named ${renamed ?? "nothing"}`}.`,
    facts: {
      fencePhase: record.phase,
      ...(record.status ? { fenceStatus: record.status } : {}),
      ...(inFlightLeftMs > 0 ? { inFlightLeftMs } : {}),
      ...(skewed ? { stampedAheadMs: aheadMs } : {}),
      provider: observation,
    },
    action,
    stateDigest: digest,
  };
}

/**
 * The item for a listed Boat no journal knows. `claimant` is the bot whose deterministic name it carries
 * (when that bot's id is known), null otherwise. The digest covers the Boat's existence and name and the
 * claimant's create row: adopt computes the same from what it re-reads.
 */
export function unknownBoatItem(
  ctx: BoatContext,
  boat: { id: string; name: string | null; state: string },
  kind: "unknown_boat" | "unnamed_boat",
  claimant: string | null,
  rows: readonly CreateRow[],
  fences: readonly RecoveryDeletionRecord[],
  at: number,
  registry: Registry,
  pausedBy: ReadonlyMap<string, string> = new Map(),
): PlanItem {
  const observation: BoatObservation = { kind: "present", name: boat.name, state: boat.state };
  const claimRow = claimant === null ? undefined : rows.find((row) => row.botId === claimant);
  const registered = claimant === null ? undefined : registrationOf(registry, claimant);
  const digest = digestOf(ITEM_DOMAIN, {
    kind,
    boxId: boat.id,
    row: rowFacts(claimRow),
    provider: providerFact(observation),
    // Adopting it for a bot deleted since the preview would bill a Boat no tool reports: stale then.
    ...(registered === undefined ? {} : { registered }),
  });
  let action: PlanItem["action"];
  if (kind === "unnamed_boat") {
    action = {
      name: null,
      command: null,
      advice: unnamedAdvice(
        ctx,
        rows.filter((row) => row.boxId === undefined),
        at,
        pausedBy,
      ),
    };
  } else if (claimant !== null) {
    const refusal = adoptRefusal(ctx, claimant, boat.id, boat.name, rows, fences, at, registry);
    action =
      refusal === null
        ? {
            name: "adopt",
            command: command(ctx, "creates", "adopt", claimant, boat.id, "--expected-state", digest, "--yes"),
            advice: `Its name is bot ${claimant}'s deterministic name: adopt it as that bot's Boat.`,
          }
        : { name: null, command: null, advice: refusal.message };
  } else {
    action = { name: null, command: null, advice: unclaimedAdvice(ctx, boat.id, boat.name) };
  }
  return {
    kind,
    botId: claimant,
    boxId: boat.id,
    name: boat.name,
    summary:
      kind === "unknown_boat"
        ? `Boat ${boat.id} carries this installation's name ${boat.name} but no journal knows it.`
        : `Boat ${boat.id} is unnamed while a create request without a recorded Boat id exists; it may be that request's Boat.`,
    facts: { provider: observation },
    action,
    stateDigest: digest,
  };
}

/** Deterministic (scoped and legacy) names of every bot id known here → the ids carrying each. */
export async function namesOfKnownBots(
  ctx: BoatContext,
  rows: readonly CreateRow[],
  fences: readonly RecoveryDeletionRecord[],
  extra: readonly string[],
  registry: Registry,
): Promise<Map<string, string[]>> {
  const ids = new Set<string>([...rows.map((row) => row.botId), ...extra]);
  if (registry.kind === "read") for (const id of registry.ids) ids.add(id);
  for (const record of fences) if (record.ownerBotId !== null) ids.add(record.ownerBotId);
  if (ctx.knownBotIds !== undefined) {
    try {
      for (const id of await ctx.knownBotIds()) ids.add(id);
    } catch {
      // Attribution is a convenience: without the registry, such Boats are listed unattributed.
    }
  }
  const byName = new Map<string, string[]>();
  for (const id of ids) {
    if (typeof id !== "string" || !BOT_ID_PATTERN.test(id)) continue;
    for (const name of new Set([ctx.lifecycle.boatNameFor(id), ctx.lifecycle.legacyBoatNameFor(id)])) {
      byName.set(name, [...(byName.get(name) ?? []), id]);
    }
  }
  return byName;
}

export async function plan(ctx: BoatContext, planOptions: BoatPlanOptions = {}): Promise<BoatPlan> {
  const at = ctx.now();
  const rows = await ctx.createJournal.boatCreateRecoverySnapshot();
  const fences = await ctx.deleteJournal.boatDeletionSnapshot();
  const registry = await readRegistry(ctx);
  const { items, unreadBoats } = await journaledItems(ctx, rows, fences, at, registry);
  const { unknown, providerError } = await unknownBoats(ctx, rows, fences, planOptions, registry);
  /** Bots whose still-retried key cannot settle: a Boat named for them pauses their provisioning. */
  const pausedBy = new Map<string, string>();
  for (const { boat, claimant } of unknown) {
    const claimRow = rows.find((row) => row.botId === claimant);
    if (claimant !== null && keyStillRetried(claimRow, at)) pausedBy.set(claimant, boat.id);
  }
  for (const { boat, claimant, read } of unknown) {
    const item =
      boat.name !== null
        ? unknownBoatItem(ctx, boat, "unknown_boat", claimant, rows, fences, at, registry)
        : unknownBoatItem(ctx, boat, "unnamed_boat", null, rows, fences, at, registry, pausedBy);
    if (read === "listed_only") {
      item.summary += ` (As boat.dev's list shows it: not read directly, this plan reads at most ${UNKNOWN_BOAT_READS} such Boats; it may be gone already.)`;
    } else if (read !== "confirmed") {
      item.summary += ` (boat.dev lists it, but reading it directly failed: ${read.failed}; it may be gone already.)`;
    }
    items.push(item);
  }
  for (const item of items) {
    const boxId =
      item.kind === "create_in_window" && item.botId !== null ? pausedBy.get(item.botId) : undefined;
    if (boxId === undefined) continue;
    // Retrying provisioning is what settles a key inside its window, except while a Boat carries the
    // bot's name: provisioning then refuses (a retry could bill a second Boat). Say so, not "retry".
    item.action = { name: null, command: null, advice: pausedProvisioningAdvice(item.botId!, boxId) };
  }
  return {
    items,
    providerListed: providerError === null,
    providerError,
    unreadBoats,
    ...(registry.kind === "unreadable" ? { registryError: registry.reason } : {}),
  };
}

/** The items of every deletion fence and create row, each from a fresh direct read of its Boat. */
async function journaledItems(
  ctx: BoatContext,
  rows: readonly CreateRow[],
  fences: readonly RecoveryDeletionRecord[],
  at: number,
  registry: Registry,
): Promise<{ items: PlanItem[]; unreadBoats: BoatPlan["unreadBoats"] }> {
  const fencedIds = new Set(fences.map((record) => record.boxId));
  const items: PlanItem[] = [];
  // A journaled Boat whose read failed: a resolved create row then makes no item at all, so without this
  // the report would read as if boat.dev had been checked.
  const unreadBoats: BoatPlan["unreadBoats"] = [];
  const observed = async (boxId: string, botId: string | null): Promise<BoatObservation> => {
    const observation = await observe(ctx, boxId);
    if (observation.kind === "unknown")
      unreadBoats.push({ boxId, botId, reason: observation.reason.replace(/[.\s]+$/, "") });
    return observation;
  };
  for (const record of fences)
    items.push(fenceItem(ctx, record, await observed(record.boxId, record.ownerBotId), at));
  for (const row of rows) {
    if (row.boxId !== undefined && fencedIds.has(row.boxId)) continue; // the fence item covers it
    const observation =
      row.boxId === undefined ? ({ kind: "not_checked" } as const) : await observed(row.boxId, row.botId);
    const item = createItem(ctx, row, observation, at, registry);
    if (item) items.push(item);
  }
  return { items, unreadBoats };
}

/**
 * The listed Boats no journal knows that become plan items (this installation's name, or unnamed beside
 * a key-only row), each with the bot whose deterministic name it carries when exactly one known bot does.
 */
async function unknownBoats(
  ctx: BoatContext,
  rows: readonly CreateRow[],
  fences: readonly RecoveryDeletionRecord[],
  planOptions: BoatPlanOptions,
  registry: Registry,
): Promise<{ unknown: UnknownBoat[]; providerError: string | null }> {
  const fencedIds = fences.map((record) => record.boxId);
  const known = new Set<string>([...fencedIds, ...rows.flatMap((row) => (row.boxId ? [row.boxId] : []))]);
  const keyOnly = rows.filter((row) => row.boxId === undefined);
  const byName = await namesOfKnownBots(ctx, rows, fences, planOptions.botIds ?? [], registry);
  const claimantOf = (name: string | null): string | null => {
    const owners = name === null ? [] : (byName.get(name) ?? []);
    return owners.length === 1 ? (owners[0] ?? null) : null;
  };
  /** Whether a Boat no journal knows becomes a plan item: this installation's name, or unnamed beside a key-only row. */
  const planned = (name: string | null): boolean =>
    name !== null ? claimantOf(name) !== null || scopeOfBoatName(name) === ctx.ownScope : keyOnly.length > 0;
  // boat.dev's whole list, with no page cap (boat-provider's walk): only the Boats that become plan items
  // are kept, so memory is O(this installation's unknown Boats) whatever the account's size.
  const listed: ListedBoat[] = [];
  const seen = new Set<string>();
  let providerError: string | null = null;
  const walk = walkSandboxes(ctx.client);
  while (!walk.complete) {
    let page: Awaited<ReturnType<typeof walk.next>>;
    try {
      page = await walk.next();
    } catch (error) {
      // Quoted inside other sentences (status, the server's report): without its own final full stop.
      const cause = (error instanceof Error ? error.message : String(error)).replace(/[.\s]+$/, "");
      providerError = `${cause} (boat.dev's list failed after ${walk.progress()}; a retry reads it again from its start)`;
      break;
    }
    for (const boat of page) {
      // A Boat may show up on two pages of an eventually consistent listing; the first sighting counts.
      if (known.has(boat.id) || seen.has(boat.id) || !planned(boat.name)) continue;
      seen.add(boat.id);
      listed.push({ id: boat.id, name: boat.name, state: boat.state });
    }
  }
  // boat.dev's list is eventually consistent: a Boat deleted moments ago may still be listed. Before one
  // no journal knows is reported (and a person told to delete it), a direct GET confirms it: boat.dev's
  // own 404/410 leaves it out, a failed read keeps it and says so. Such Boats are rare; at most
  // UNKNOWN_BOAT_READS are read per plan, the rest are reported as listed (and say so).
  let reads = 0;
  const unknown: UnknownBoat[] = [];
  for (const listedBoat of listed) {
    let boat: ListedBoat = listedBoat;
    let read: UnknownBoatRead = "confirmed";
    if (reads >= UNKNOWN_BOAT_READS) {
      read = "listed_only";
    } else {
      reads += 1;
      try {
        const fresh = await ctx.client.getSandbox(listedBoat.id);
        boat = { id: listedBoat.id, name: fresh.name, state: fresh.state };
      } catch (error) {
        if (absenceProof(error) !== null) continue; // deleted: the list has not caught up yet
        read = { failed: (error instanceof Error ? error.message : String(error)).replace(/[.\s]+$/, "") };
      }
      // Renamed since it was listed: judged by the name boat.dev shows now, as adopt will.
      if (!planned(boat.name)) continue;
    }
    unknown.push({ boat, claimant: claimantOf(boat.name), read });
  }
  return { unknown, providerError };
}
