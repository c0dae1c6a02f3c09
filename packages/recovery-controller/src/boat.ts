import {
  DELETE_IN_FLIGHT_MS,
  deletionInFlightLeftMs,
  environmentScope,
  isLifecycleError,
  scopeOfBoatName,
} from "@drydock/boat-lifecycle";
import { provesAbsence } from "@drydock/boat-provider";
import { recoveryError } from "./errors.js";
import { digestOf } from "./internal/digest.js";
import {
  BOAT_ID_PATTERN,
  BOT_ID_PATTERN,
  type BoatObservation,
  type BoatPlan,
  CLOCK_SKEW_TOLERANCE_MS,
  CREATE_WINDOW_MS,
  createInFlightLeftMs,
  fenceInFlightLeftMs,
  type PlanItem,
} from "./schema.js";

/** The create-journal calls used here; an `openBoatCreateJournal(...)` result satisfies it. */
export interface RecoveryCreateJournal {
  boatCreateRecoverySnapshot(): Promise<
    readonly {
      botId: string;
      boxId?: string | undefined;
      resolved: boolean;
      createdAt: number;
      ageMs: number;
    }[]
  >;
  adoptResolvedBoat(botId: string, boxId: string): Promise<void>;
  retireDeletedBoatCreate(boxId: string): Promise<void>;
  /**
   * Optional compare-and-set forms (boat-create-journal has them): true only for the call that wrote. With
   * them a fenced adopt or retire pasted twice at once applies once, and the other exits STATE_CHANGED;
   * without them both may report success.
   */
  adoptResolvedBoatOnce?(botId: string, boxId: string, expected: CreateRowFacts | null): Promise<boolean>;
  retireDeletedBoatCreateOnce?(expected: CreateRowFacts): Promise<boolean>;
}

/** A create row's facts as a snapshot shows them (without `ageMs`). */
export interface CreateRowFacts {
  botId: string;
  boxId?: string | undefined;
  resolved: boolean;
  createdAt: number;
}

export interface RecoveryDeletionRecord {
  boxId: string;
  name: string;
  ownerBotId: string | null;
  phase: "prepared" | "accepted" | "blocked";
  requestedAt: number;
  updatedAt: number;
  operationId?: string | undefined;
  status?: "pending" | "processing" | "blocked" | "completed" | undefined;
}

/** The delete-journal calls used here; an `openBoatDeleteJournal(...)` result satisfies it. */
export interface RecoveryDeleteJournal {
  boatDeletionSnapshot(): Promise<readonly RecoveryDeletionRecord[]>;
  getBoatDeletion(boxId: string): Promise<RecoveryDeletionRecord | null>;
}

/** The lifecycle calls used here; a `createBoatLifecycle(...)` result satisfies it. */
export interface RecoveryLifecycle {
  boatNameFor(botId: string): string;
  legacyBoatNameFor(botId: string): string;
  reconcileDeletion(boxId: string): Promise<"confirmed" | "pending" | "blocked">;
  deleteBoat(input: {
    boxId: string;
    confirmName: string;
    ownerBotId: string | null;
    /** The fence exactly as read: the retry is a compare-and-set on it (boat-lifecycle's `expectedFence`). */
    expectedFence?: RecoveryDeletionRecord;
  }): Promise<{
    ok: true;
    pending?: true;
  }>;
}

/** The provider calls used here; a `createBoatClient(...)` result satisfies it. */
export interface RecoveryClient {
  getSandbox(id: string): Promise<{ id: string; name: string | null; state: string }>;
  renameSandbox(id: string, name: string): Promise<{ id: string; name: string | null; state: string }>;
  listAllSandboxes(): Promise<readonly { id: string; name: string | null; state: string }[]>;
}

export interface BoatRecoveryOptions {
  lifecycle: RecoveryLifecycle;
  createJournal: RecoveryCreateJournal;
  deleteJournal: RecoveryDeleteJournal;
  client: RecoveryClient;
  /**
   * This installation's id, which tells its Boat names from other installations'. Optional: by default the
   * scope is read from `lifecycle.boatNameFor`, whose names carry it. When given, it must be the
   * lifecycle's own (INVALID_ARGUMENT otherwise): a recovery scoped to another installation would offer
   * that installation's Boats as this one's.
   */
  environmentId?: string;
  now?: () => number;
  /** Start of every printed command, e.g. `drydock --data-dir /srv/drydock`. Default `drydock`. */
  commandPrefix?: string;
  /**
   * This installation's bot ids (the bot server's registry), to tell whose deterministic name a Boat no
   * journal knows carries: a name is a hash of the bot id, so only a known id can be matched to it. The
   * journals' bot ids are always used as well. A failure here only leaves such Boats unattributed.
   */
  knownBotIds?: () => readonly string[] | Promise<readonly string[]>;
  /**
   * The bot registry: the ids of the bots that exist now (the bot server's `bots.json`). `null` (or the
   * option left out): this installation keeps no registry (a library user without a bot server), and
   * nothing is judged by it. A throw: the registry exists but cannot be read — never taken as "not
   * registered": an adopt refuses (nothing is known of the bot) and the plan says it could not check
   * (`registryError`). With a registry, adopting a Boat for a bot that is not registered is refused, the
   * digest of an adoptable Boat covers whether its bot is registered (a preview made before the bot was
   * deleted is stale after), and a create row with a Boat id whose bot is not registered is a plan item
   * that needs a person (`create_bot_unregistered`: a billed Boat no bot uses or can delete). Its ids also
   * attribute names, as `knownBotIds` does.
   */
  registeredBotIds?: () => readonly string[] | null | Promise<readonly string[] | null>;
}

/** What the registry says, read once per plan or action. */
type Registry =
  | { kind: "none" }
  | { kind: "read"; ids: ReadonlySet<string> }
  | { kind: "unreadable"; reason: string };
/** Whether a bot is registered: undefined without a registry, "unknown" when it could not be read. */
type Registration = boolean | "unknown" | undefined;

export interface BoatPlanOptions {
  /** More bot ids to attribute names to, e.g. the bot an operator names in `creates adopt <botId> <boxId>`. */
  botIds?: readonly string[];
}

export interface BoatActionOptions {
  /** The `stateDigest` of the plan item the operator saw; omitted = re-check the rules only. */
  expectedState?: string;
}

export type BoatActionResult =
  | {
      ok: true;
      action: "adopt";
      botId: string;
      boxId: string;
      name: string;
      renamed: boolean;
      alreadyAdopted: boolean;
    }
  | { ok: true; action: "retireCreate"; botId: string; boxId: string; proof: number }
  | {
      ok: true;
      action: "reconcileDeletion";
      boxId: string;
      /**
       * `confirmed`: proven gone, fence lifted. `pending`: boat.dev is deleting it (or a DELETE may still be
       * on the wire). `blocked`: boat.dev blocked it. `not_running`: the Boat exists and drydock holds no
       * receipt of a deletion, so reconciling again will not move it (`retryDeletion` does).
       */
      outcome: "confirmed" | "pending" | "blocked" | "not_running";
      /** What was found, in one or two plain sentences. */
      message: string;
      /** The one safe next step for the fence as it stands now (the plan item's action), or null. */
      next: PlanItem["action"] | null;
    }
  | { ok: true; action: "retryDeletion"; boxId: string; pending: boolean };

export interface BoatRecovery {
  plan(options?: BoatPlanOptions): Promise<BoatPlan>;
  adopt(botId: string, boxId: string, options?: BoatActionOptions): Promise<BoatActionResult>;
  retireCreate(botId: string, options?: BoatActionOptions): Promise<BoatActionResult>;
  reconcileDeletion(boxId: string, options?: BoatActionOptions): Promise<BoatActionResult>;
  retryDeletion(boxId: string, options?: BoatActionOptions): Promise<BoatActionResult>;
}

type CreateRow = Awaited<ReturnType<RecoveryCreateJournal["boatCreateRecoverySnapshot"]>>[number];
type ListedBoat = { id: string; name: string | null; state: string };
/** How a listed Boat no journal knows was confirmed: read directly, not read (over the bound), or the read failed. */
type UnknownBoatRead = "confirmed" | "listed_only" | { failed: string };

/**
 * At most this many listed Boats no journal knows are read directly per plan, to leave out those boat.dev
 * has deleted but still lists (its list is eventually consistent). Such Boats are rare (a crash between a
 * create and its record, a deletion moments ago); a plan over more of them reports the rest as listed.
 */
const UNKNOWN_BOAT_READS = 50;

const ITEM_DOMAIN = "drydock-recovery-plan-item-v1";
const DIGEST = /^sha256:[0-9a-f]{64}$/;

/**
 * The status of a direct read that proves the Boat does not exist, else null: only boat.dev's own 404
 * `not_found` / 410 `gone` (`provesAbsence`, the rule boat-lifecycle applies too). A proxy's 404 page, a
 * 5xx, a 429 or a transport failure proves nothing.
 */
function absenceProof(error: unknown): 404 | 410 | null {
  return provesAbsence(error) ? (error as { status: 404 | 410 }).status : null;
}

/** Time left in boat.dev's 24-hour window less drydock's 1-hour margin (CREATE_WINDOW_MS); 0 past it. */
function createWindowLeftMs(row: CreateRow, at: number): number {
  return Math.max(0, CREATE_WINDOW_MS - Math.max(0, at - row.createdAt));
}

/**
 * The one window rule of the plan and the actions: a create row without a Boat id whose key drydock still
 * retries. While it holds, that key is the only way to find a Boat it may have created, so nothing may
 * adopt another Boat for the bot (the row would be replaced and the key dropped).
 */
function keyStillRetried(row: CreateRow | undefined, at: number): boolean {
  return row !== undefined && row.boxId === undefined && createWindowLeftMs(row, at) > 0;
}

/** "3 h 12 min", "45 s": a wait as a person reads it. */
function humanWait(ms: number): string {
  const seconds = Math.max(1, Math.ceil(ms / 1_000));
  if (seconds < 120) return `${seconds} s`;
  const minutes = Math.ceil(seconds / 60);
  if (minutes < 120) return `${minutes} min`;
  return `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}

/** The bot-id part of this installation's deterministic name (`ogb-<scope>-<slug>-<hash>`), else null. */
function nameSlug(name: string): string | null {
  return /^ogb-[0-9a-f]{12}-([a-z0-9]{1,8})-[0-9a-f]{6}$/.exec(name)?.[1] ?? null;
}

function rowFacts(row: CreateRow | undefined): unknown {
  return row === undefined ? null : rowOf(row);
}

/** The facts of a snapshot row a digest covers and a compare-and-set compares (without `ageMs`). */
function rowOf(row: CreateRow): CreateRowFacts {
  return { botId: row.botId, boxId: row.boxId, resolved: row.resolved, createdAt: row.createdAt };
}

/** The scope of this installation's Boat names: the lifecycle's own, which `environmentId` must match. */
function installationScope(lifecycle: RecoveryLifecycle, environmentId: unknown): string {
  let scope: string | null;
  try {
    scope = scopeOfBoatName(lifecycle.boatNameFor("scope"));
  } catch {
    scope = null;
  }
  if (scope === null) {
    throw recoveryError(
      "INVALID_ARGUMENT",
      "createBoatRecovery needs this installation's lifecycle (createBoatLifecycle): its Boat names tell this installation's Boats from others', and the lifecycle given names none.",
    );
  }
  if (environmentId === undefined) return scope;
  if (typeof environmentId !== "string" || environmentId.length === 0) {
    throw recoveryError("INVALID_ARGUMENT", "environmentId, when given, must be a non-empty string.");
  }
  if (environmentScope(environmentId) !== scope) {
    throw recoveryError(
      "INVALID_ARGUMENT",
      "environmentId is not the one the lifecycle names Boats with: the recovery would treat another installation's Boats as this one's. Pass the lifecycle's environmentId, or leave it out.",
    );
  }
  return scope;
}

/**
 * Boat recovery: a read-only plan of everything that needs a person, and four actions that each re-read
 * the exact facts they depend on (journal rows, fence, a direct GET of the Boat) and refuse when those
 * moved since the plan (STATE_CHANGED) or when the rules no longer allow the action.
 *
 * Proof of absence is only ever boat.dev's own direct 404/410 for the Boat's own id (`absenceProof`): the
 * provider's list is eventually consistent, so a Boat missing from it proves nothing.
 */
export function createBoatRecovery(options: BoatRecoveryOptions): BoatRecovery {
  const { lifecycle, createJournal, deleteJournal, client } = options;
  // Checked here, not at first use: a missing client would otherwise read as "boat.dev could not be read"
  // for every Boat, an unknown truth the plan asks a person about, instead of the caller's bug it is.
  for (const [name, given, method] of [
    ["client", client, "getSandbox"],
    ["createJournal", createJournal, "boatCreateRecoverySnapshot"],
    ["deleteJournal", deleteJournal, "boatDeletionSnapshot"],
  ] as const) {
    if (typeof (given as unknown as Record<string, unknown> | undefined)?.[method] !== "function") {
      throw recoveryError(
        "INVALID_ARGUMENT",
        `createBoatRecovery needs ${name} (it has no ${method} method); pass the one the bot server uses.`,
      );
    }
  }
  const ownScope = installationScope(lifecycle, options.environmentId);
  const now = options.now ?? Date.now;
  const prefix = options.commandPrefix ?? "drydock";

  /** The bot registry as it stands now; a failed read is "unreadable", never an empty registry. */
  async function readRegistry(): Promise<Registry> {
    if (options.registeredBotIds === undefined) return { kind: "none" };
    try {
      const ids = await options.registeredBotIds();
      if (ids === null) return { kind: "none" };
      if (!Array.isArray(ids))
        return { kind: "unreadable", reason: "the registry answered no list of bot ids" };
      return { kind: "read", ids: new Set(ids) };
    } catch (error) {
      return {
        kind: "unreadable",
        reason: (error instanceof Error ? error.message : String(error)).replace(/[.\s]+$/, ""),
      };
    }
  }

  function registrationOf(registry: Registry, botId: string): Registration {
    if (registry.kind === "none") return undefined;
    if (registry.kind === "unreadable") return "unknown";
    return registry.ids.has(botId);
  }

  async function observe(boxId: string): Promise<BoatObservation> {
    try {
      const boat = await client.getSandbox(boxId);
      return { kind: "present", name: boat.name, state: boat.state };
    } catch (error) {
      const proof = absenceProof(error);
      if (proof !== null) return { kind: "absent", status: proof };
      return { kind: "unknown", reason: error instanceof Error ? error.message : String(error) };
    }
  }

  function ownsName(botId: string, name: string | null): boolean {
    return (
      name !== null && (name === lifecycle.boatNameFor(botId) || name === lifecycle.legacyBoatNameFor(botId))
    );
  }

  function command(...parts: string[]): string {
    return [prefix, ...parts].join(" ");
  }

  function providerFact(observation: BoatObservation): unknown {
    // The digest covers what an action depends on: existence and name, not the ever-changing run state.
    if (observation.kind === "present") return { exists: true, name: observation.name };
    if (observation.kind === "absent") return { exists: false };
    return { exists: "unknown" };
  }

  function fenceFacts(record: RecoveryDeletionRecord): unknown {
    return {
      boxId: record.boxId,
      name: record.name,
      ownerBotId: record.ownerBotId,
      phase: record.phase,
      status: record.status,
      operationId: record.operationId,
      updatedAt: record.updatedAt,
    };
  }

  /** The plan item for one create row, from freshly observed facts (also used by the actions). */
  function createItem(
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
    const base = { botId: row.botId, boxId: row.boxId ?? null, stateDigest: digest };
    const name = observation.kind === "present" ? observation.name : null;
    const facts = { resolved: row.resolved, ageMs, windowLeftMs, provider: observation };

    if (row.boxId === undefined) {
      if (keyStillRetried(row, at)) {
        const inFlightLeftMs = createInFlightLeftMs(row.createdAt, at);
        return {
          ...base,
          kind: "create_in_window",
          name: null,
          summary:
            inFlightLeftMs > 0
              ? `Bot ${row.botId} has a create request started ${Math.round(ageMs / 1000)} s ago whose answer is not recorded yet: a provisioning call may still be running.`
              : `Bot ${row.botId} has a create request whose answer was never recorded; boat.dev may still own a Boat for its key, and nothing retries it by itself (unless a provisioning call for this bot is running right now, retry provisioning).`,
          facts: { ...facts, ...(inFlightLeftMs > 0 ? { inFlightLeftMs } : {}) },
          action: {
            name: null,
            command: null,
            advice: `Retry provisioning through the server (POST /v1/bots/${row.botId}/computer) within the window: it reuses the same key and cannot create a second Boat.`,
          },
        };
      }
      return {
        ...base,
        kind: "create_expired",
        name: null,
        summary: `Bot ${row.botId} has a create request whose Boat id was never recorded and whose key drydock no longer sends (within an hour of, or past, boat.dev's 24-hour retry window); creation for this bot is paused.`,
        facts,
        action: {
          name: null,
          command: null,
          advice: `Look in boat.dev for an unnamed Boat created around ${new Date(row.createdAt).toISOString()}. If you find it, rename it to ${lifecycle.boatNameFor(row.botId)} and run \`${command("creates", "adopt", row.botId, "<boxId>")}\`.`,
        },
      };
    }

    if (observation.kind === "absent" && !row.resolved) {
      return {
        ...base,
        kind: "create_boat_gone",
        name: null,
        summary: `Bot ${row.botId}'s remembered Boat ${row.boxId} does not exist at boat.dev (${observation.status}).`,
        facts,
        action: {
          name: "retireCreate",
          command: command("creates", "retire", row.botId, "--expected-state", digest, "--yes"),
          advice: "Retire the create record; boat.dev proved the Boat absent, so nothing can be orphaned.",
        },
      };
    }
    if (observation.kind === "absent") {
      return {
        ...base,
        kind: "create_boat_gone",
        name: null,
        summary: `Bot ${row.botId} owns Boat ${row.boxId}, which boat.dev says no longer exists (${observation.status}).`,
        facts,
        action: {
          name: "retireCreate",
          command: command("creates", "retire", row.botId, "--expected-state", digest, "--yes"),
          advice: "Retire the ownership record; the next provision creates a new Boat.",
        },
      };
    }
    if (registered === false) {
      // A Boat recorded for a bot that does not exist (deleted after a stale adopt landed, or a journal
      // from elsewhere): billed, and no tool uses or deletes it. Never "fine" just because it is resolved.
      return {
        ...base,
        kind: "create_bot_unregistered",
        name,
        summary:
          observation.kind === "present"
            ? `Bot ${row.botId} is not registered (deleted, or never created here), but the create journal records Boat ${row.boxId} for it, which boat.dev still has: it is billed, and no bot uses it or can delete it.`
            : `Bot ${row.botId} is not registered (deleted, or never created here), but the create journal records Boat ${row.boxId} for it, and boat.dev could not be asked whether it still exists (it may still be billed).`,
        facts,
        action: {
          name: null,
          command: null,
          advice: `If bot ${row.botId} is still wanted, create it again under the same id (POST /v1/bots with botId "${row.botId}"): the Boat is then its computer again${row.resolved ? "" : ` (run \`${command("reconcile")}\` for the adopt command)`}. Otherwise delete Boat ${row.boxId} in boat.dev (check first that nothing on it is needed), then run \`${command("reconcile")}\`: once boat.dev says the Boat is gone it prints the \`${command("creates", "retire", row.botId)}\` command that retires this record.`,
        },
      };
    }
    if (row.resolved) return null;

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
          advice: `Retry when boat.dev is reachable (\`${command("reconcile")}\`).`,
        },
      };
    }
    if (name === null || ownsName(row.botId, name)) {
      return {
        ...base,
        kind: "create_unresolved",
        name,
        summary: `Bot ${row.botId}'s Boat ${row.boxId} exists but was never recorded as owned${name === null ? " (it is still unnamed)" : ""}.`,
        facts,
        // Whether the bot still exists could not be checked: nothing is offered for adoption.
        action:
          registered === "unknown"
            ? { name: null, command: null, advice: registryUnreadableAdvice(registry) }
            : {
                name: "adopt",
                command: command(
                  "creates",
                  "adopt",
                  row.botId,
                  row.boxId,
                  "--expected-state",
                  digest,
                  "--yes",
                ),
                advice:
                  name === null
                    ? `Adopt it: drydock names it ${lifecycle.boatNameFor(row.botId)} and records it as the bot's Boat.`
                    : "Adopt it: record it as the bot's Boat.",
              },
      };
    }
    return {
      ...base,
      kind: "create_unresolved",
      name,
      summary: `Bot ${row.botId}'s remembered Boat ${row.boxId} carries a name that is not the bot's (${name}).`,
      facts,
      action: {
        name: null,
        command: null,
        advice: `Check the Boat in boat.dev: rename it to ${lifecycle.boatNameFor(row.botId)} if it is this bot's, then run \`${command("reconcile")}\` again.`,
      },
    };
  }

  /**
   * The name boat.dev shows for a fenced Boat when it is not the fence's recorded name (renamed since the
   * fence was written), else undefined. Only a Boat read directly and present can be renamed.
   */
  function renamedTo(
    record: RecoveryDeletionRecord,
    observation: BoatObservation,
  ): string | null | undefined {
    return observation.kind === "present" && observation.name !== record.name ? observation.name : undefined;
  }

  /**
   * The digest of a fence's plan item: the fence's facts and, for a Boat boat.dev shows renamed, the name it
   * shows (so a digest printed before a rename never applies after it). Existence is left out on purpose: an
   * accepted deletion that completes between the plan and its reconcile still reconciles.
   */
  function fenceDigest(record: RecoveryDeletionRecord, observation: BoatObservation): string {
    const renamed = renamedTo(record, observation);
    return digestOf(ITEM_DOMAIN, {
      kind: "deletion",
      fence: fenceFacts(record),
      ...(renamed === undefined ? {} : { observedName: renamed }),
    });
  }

  function fenceItem(record: RecoveryDeletionRecord, observation: BoatObservation, at: number): PlanItem {
    const digest = fenceDigest(record, observation);
    const renamed = renamedTo(record, observation);
    const retry = command("deletions", "retry", record.boxId, "--expected-state", digest, "--yes");
    const reconcile = command("deletions", "reconcile", record.boxId, "--expected-state", digest, "--yes");
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
        advice: `The deletion fence was stamped ${Math.ceil(aheadMs / 1000)} s ahead of this machine's clock, so its DELETE counts as still on the wire until this clock reaches ${new Date(record.updatedAt + DELETE_IN_FLIGHT_MS).toISOString()} (a retry before then is refused: it could be blind). Check the clocks of the machines that use this data directory; once they agree, run \`${command("reconcile")}\` again.`,
      };
    } else if (observation.kind === "present" && inFlightLeftMs > 0) {
      action = {
        name: null,
        command: null,
        advice: `The deletion was prepared ${Math.round((DELETE_IN_FLIGHT_MS - inFlightLeftMs) / 1000)} s ago and its DELETE may still be on the wire (a retry now would be blind, and is refused). Wait ${Math.ceil(inFlightLeftMs / 1000)} s, then run \`${command("reconcile")}\` again.`,
      };
    } else if (observation.kind === "present" && renamed !== undefined) {
      // A retry would only be refused (the fence's name is the confirmation; boat-lifecycle's name_mismatch):
      // no command until a person puts the name back or deletes the Boat.
      action = {
        name: null,
        command: null,
        advice: `boat.dev shows Boat ${record.boxId} named ${renamed === null ? "nothing (unnamed)" : renamed}, not the fenced ${record.name}, so drydock will not send its DELETE (it would delete something nobody confirmed). Rename it back to ${record.name} in boat.dev, or delete it there; then run \`${command("reconcile")}\` again: it prints the command that finishes the fence (\`deletions retry\` once the name is back, \`deletions reconcile\` once boat.dev says the Boat is gone).`,
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
   * Why `adopt(botId, boxId)` would refuse, from the same facts it re-reads; null when it would not. The plan
   * prints an adopt command only where this is null, so a printed command never merely refuses. `early`
   * refusals hold whether or not the Boat exists (adopt checks them before its existence).
   */
  function adoptRefusal(
    botId: string,
    boxId: string,
    name: string | null,
    rows: readonly CreateRow[],
    fences: readonly RecoveryDeletionRecord[],
    at: number,
    registry: Registry,
  ): { early: boolean; message: string } | null {
    const other = rows.find((candidate) => candidate.boxId === boxId && candidate.botId !== botId);
    if (other) {
      return {
        early: true,
        message: `Boat ${boxId} is remembered for bot ${other.botId}; it cannot be adopted by ${botId}.`,
      };
    }
    if (fences.some((record) => record.boxId === boxId || record.ownerBotId === botId)) {
      return {
        early: true,
        message: `A deletion fence stands for Boat ${boxId} or bot ${botId}; settle it first (\`${command("deletions", "list")}\`).`,
      };
    }
    const row = rows.find((candidate) => candidate.botId === botId);
    if (row?.boxId === boxId && row.resolved) return null; // already this bot's Boat: nothing to refuse
    if (row?.boxId !== undefined && row.boxId !== boxId) {
      return {
        early: false,
        message: `Bot ${botId} already has Boat ${row.boxId} recorded; adopting ${boxId} would orphan it. Settle that one first.`,
      };
    }
    // A key still retried blocks adopting an unnamed Boat or one with the bot's name (a foreign name is
    // refused for its name, below).
    if (row !== undefined && keyStillRetried(row, at) && (name === null || ownsName(botId, name))) {
      return { early: false, message: keyWindowRefusal(row, boxId, name, at) };
    }
    // An unnamed Boat is only this bot's when the journal remembers its id for this bot: boat.dev answered
    // that bot's create with it. Anything else could be another bot's or another installation's.
    if (!ownsName(botId, name) && !(name === null && row?.boxId === boxId)) {
      return {
        early: false,
        message: `Boat ${boxId} is named ${name === null ? "nothing" : name}, not bot ${botId}'s name ${lifecycle.boatNameFor(botId)}; only a Boat with the bot's deterministic name (or its remembered, unnamed Boat) can be adopted.`,
      };
    }
    const registered = registrationOf(registry, botId);
    if (registered === false) {
      return {
        early: false,
        message: `Bot ${botId} is not registered (deleted, or never created here): adopting Boat ${boxId} would record a billed Boat for a bot that no tool uses or deletes. If the bot is still wanted, create it again under the same id (POST /v1/bots with botId "${botId}"), then run \`${command("reconcile")}\` for the adopt command; if not, delete Boat ${boxId} in boat.dev.`,
      };
    }
    if (registered === "unknown") return { early: false, message: registryUnreadableAdvice(registry) };
    return null;
  }

  /** Why nothing is adopted while the bot registry cannot be read. */
  function registryUnreadableAdvice(registry: Registry): string {
    const reason = registry.kind === "unreadable" ? ` (${registry.reason})` : "";
    return `The bot registry could not be read${reason}, so whether this bot still exists is unknown; nothing is adopted for a bot that may be deleted. Make the registry readable (\`bots.json\` in the data directory), then run \`${command("reconcile")}\` again.`;
  }

  /** The refusal (and the way out) for a Boat the bot's still-retried create key blocks from adoption. */
  function keyWindowRefusal(row: CreateRow, boxId: string, name: string | null, at: number): string {
    const left = createWindowLeftMs(row, at);
    const started = new Date(row.createdAt).toISOString();
    const until = new Date(at + left).toISOString();
    const head = `Bot ${row.botId} has a create request (started ${started}) whose key drydock still retries for ${humanWait(left)}, until ${until} (boat.dev's 24-hour window less a 1-hour margin); adopting Boat ${boxId} now would drop that key, the only way to find a Boat created under it.`;
    if (name === null) {
      return `${head} Retry provisioning through the server instead (POST /v1/bots/${row.botId}/computer): it reuses the key, and if this Boat is the one the request created, boat.dev answers with it and drydock names and records it.`;
    }
    return `${head} Provisioning is paused as well while Boat ${boxId} carries the bot's name (a retry could bill a second Boat). Check boat.dev for an unnamed Boat created around ${started}: if there is one, two Boats exist for this bot; keep the one that holds its data, delete the other in boat.dev, then run \`${command("reconcile")}\` again. If there is none, run \`${command("reconcile")}\` again after ${until}: it then offers the adopt command for Boat ${boxId}.`;
  }

  /** What to do about an unnamed Boat while create requests without a Boat id exist. */
  function unnamedAdvice(
    keyOnly: readonly CreateRow[],
    at: number,
    pausedBy: ReadonlyMap<string, string>,
  ): string {
    const parts = keyOnly.map((row) => {
      const started = new Date(row.createdAt).toISOString();
      const named = pausedBy.get(row.botId);
      if (named !== undefined && keyStillRetried(row, at)) {
        return `If it is the Boat of bot ${row.botId}'s create request (started ${started}), two Boats exist for that bot, and provisioning it is paused while Boat ${named} carries its name: see the line for Boat ${named}.`;
      }
      return keyStillRetried(row, at)
        ? `If it is the Boat of bot ${row.botId}'s create request (started ${started}), retry provisioning through the server (POST /v1/bots/${row.botId}/computer): it reuses the request's key, boat.dev answers with the Boat that key created, and drydock names and records it. Leave its name as it is meanwhile: a Boat carrying the bot's name pauses provisioning.`
        : `If it is the Boat of bot ${row.botId}'s create request (started ${started}; its key is no longer sent), rename it to ${lifecycle.boatNameFor(row.botId)} in boat.dev, then run \`${command("reconcile")}\` again: it offers the adopt command.`;
    });
    return `${parts.join(" ")} Otherwise leave it.`;
  }

  /**
   * The item for a listed Boat no journal knows. `claimant` is the bot whose deterministic name it carries
   * (when that bot's id is known), null otherwise. The digest covers the Boat's existence and name and the
   * claimant's create row: adopt computes the same from what it re-reads.
   */
  function unknownBoatItem(
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
          rows.filter((row) => row.boxId === undefined),
          at,
          pausedBy,
        ),
      };
    } else if (claimant !== null) {
      const refusal = adoptRefusal(claimant, boat.id, boat.name, rows, fences, at, registry);
      action =
        refusal === null
          ? {
              name: "adopt",
              command: command("creates", "adopt", claimant, boat.id, "--expected-state", digest, "--yes"),
              advice: `Its name is bot ${claimant}'s deterministic name: adopt it as that bot's Boat.`,
            }
          : { name: null, command: null, advice: refusal.message };
    } else {
      const slug = boat.name === null ? null : nameSlug(boat.name);
      action = {
        name: null,
        command: null,
        advice: `Its name is this installation's deterministic name for a bot${slug === null ? "" : ` whose id begins with "${slug}" (lower-cased, letters and digits only)`} that no journal or known bot matches. Run \`${command("creates", "adopt", "<botId>", boat.id)}\` with that bot's id: the preview checks the name and prints the command to paste. If no bot needs it, delete it in boat.dev.`,
      };
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
  async function namesOfKnownBots(
    rows: readonly CreateRow[],
    fences: readonly RecoveryDeletionRecord[],
    extra: readonly string[],
    registry: Registry,
  ): Promise<Map<string, string[]>> {
    const ids = new Set<string>([...rows.map((row) => row.botId), ...extra]);
    if (registry.kind === "read") for (const id of registry.ids) ids.add(id);
    for (const record of fences) if (record.ownerBotId !== null) ids.add(record.ownerBotId);
    if (options.knownBotIds !== undefined) {
      try {
        for (const id of await options.knownBotIds()) ids.add(id);
      } catch {
        // Attribution is a convenience: without the registry, such Boats are listed unattributed.
      }
    }
    const byName = new Map<string, string[]>();
    for (const id of ids) {
      if (typeof id !== "string" || !BOT_ID_PATTERN.test(id)) continue;
      for (const name of new Set([lifecycle.boatNameFor(id), lifecycle.legacyBoatNameFor(id)])) {
        byName.set(name, [...(byName.get(name) ?? []), id]);
      }
    }
    return byName;
  }

  async function plan(planOptions: BoatPlanOptions = {}): Promise<BoatPlan> {
    const at = now();
    const rows = await createJournal.boatCreateRecoverySnapshot();
    const fences = await deleteJournal.boatDeletionSnapshot();
    const registry = await readRegistry();
    const fencedIds = new Set(fences.map((record) => record.boxId));
    const items: PlanItem[] = [];
    // A journaled Boat whose read failed: a resolved create row then makes no item at all, so without this
    // the report would read as if boat.dev had been checked.
    const unreadBoats: BoatPlan["unreadBoats"] = [];
    const observed = async (boxId: string, botId: string | null): Promise<BoatObservation> => {
      const observation = await observe(boxId);
      if (observation.kind === "unknown")
        unreadBoats.push({ boxId, botId, reason: observation.reason.replace(/[.\s]+$/, "") });
      return observation;
    };
    for (const record of fences)
      items.push(fenceItem(record, await observed(record.boxId, record.ownerBotId), at));
    for (const row of rows) {
      if (row.boxId !== undefined && fencedIds.has(row.boxId)) continue; // the fence item covers it
      const observation =
        row.boxId === undefined ? ({ kind: "not_checked" } as const) : await observed(row.boxId, row.botId);
      const item = createItem(row, observation, at, registry);
      if (item) items.push(item);
    }

    let listed: readonly { id: string; name: string | null; state: string }[] = [];
    let providerError: string | null = null;
    try {
      listed = await client.listAllSandboxes();
    } catch (error) {
      // Quoted inside other sentences (status, the server's report): without its own final full stop.
      providerError = (error instanceof Error ? error.message : String(error)).replace(/[.\s]+$/, "");
    }
    const known = new Set<string>([...fencedIds, ...rows.flatMap((row) => (row.boxId ? [row.boxId] : []))]);
    const keyOnly = rows.filter((row) => row.boxId === undefined);
    const byName = await namesOfKnownBots(rows, fences, planOptions.botIds ?? [], registry);
    const claimantOf = (name: string | null): string | null => {
      const owners = name === null ? [] : (byName.get(name) ?? []);
      return owners.length === 1 ? (owners[0] ?? null) : null;
    };
    /** Whether a Boat no journal knows becomes a plan item: this installation's name, or unnamed beside a key-only row. */
    const planned = (name: string | null): boolean =>
      name !== null ? claimantOf(name) !== null || scopeOfBoatName(name) === ownScope : keyOnly.length > 0;
    // boat.dev's list is eventually consistent: a Boat deleted moments ago may still be listed. Before one
    // no journal knows is reported (and a person told to delete it), a direct GET confirms it: boat.dev's
    // own 404/410 leaves it out, a failed read keeps it and says so. Such Boats are rare; at most
    // UNKNOWN_BOAT_READS are read per plan, the rest are reported as listed (and say so).
    let reads = 0;
    const unknown: { boat: ListedBoat; claimant: string | null; read: UnknownBoatRead }[] = [];
    for (const listedBoat of listed) {
      if (known.has(listedBoat.id) || !planned(listedBoat.name)) continue;
      let boat: ListedBoat = listedBoat;
      let read: UnknownBoatRead = "confirmed";
      if (reads >= UNKNOWN_BOAT_READS) {
        read = "listed_only";
      } else {
        reads += 1;
        try {
          const fresh = await client.getSandbox(listedBoat.id);
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
    /** Bots whose still-retried key cannot settle: a Boat named for them pauses their provisioning. */
    const pausedBy = new Map<string, string>();
    for (const { boat, claimant } of unknown) {
      const claimRow = rows.find((row) => row.botId === claimant);
      if (claimant !== null && keyStillRetried(claimRow, at)) pausedBy.set(claimant, boat.id);
    }
    for (const { boat, claimant, read } of unknown) {
      const item =
        boat.name !== null
          ? unknownBoatItem(boat, "unknown_boat", claimant, rows, fences, at, registry)
          : unknownBoatItem(boat, "unnamed_boat", null, rows, fences, at, registry, pausedBy);
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
      item.action = {
        name: null,
        command: null,
        advice: `Provisioning bot ${item.botId} is paused while boat.dev has Boat ${boxId} carrying its name and this request is open, so retrying it would be refused. See the line for Boat ${boxId}.`,
      };
    }
    return {
      items,
      providerListed: providerError === null,
      providerError,
      unreadBoats,
      ...(registry.kind === "unreadable" ? { registryError: registry.reason } : {}),
    };
  }

  function assertBotId(botId: unknown): asserts botId is string {
    if (typeof botId !== "string" || !BOT_ID_PATTERN.test(botId)) {
      throw recoveryError("INVALID_ARGUMENT", "The bot id must be 1-120 letters, digits, '_' or '-'.");
    }
  }
  function assertBoxId(boxId: unknown): asserts boxId is string {
    if (typeof boxId !== "string" || !BOAT_ID_PATTERN.test(boxId)) {
      throw recoveryError("INVALID_ARGUMENT", "The Boat id must be bx_ followed by 8 characters.");
    }
  }
  /**
   * Refuses with STATE_CHANGED unless `expected` (when given) is `actual`. `actual` null: no plan item offers
   * the action for the state as it is now (it was applied already, or its record is gone), so no digest can
   * match; `moved` says what the state is instead.
   */
  function checkExpected(
    expected: string | undefined,
    actual: string | null,
    details: Record<string, string>,
    moved?: string,
  ): void {
    if (expected === undefined) return;
    if (!DIGEST.test(expected)) {
      throw recoveryError(
        "INVALID_ARGUMENT",
        "--expected-state must be the sha256:… digest printed by the preview.",
      );
    }
    if (expected !== actual) {
      throw recoveryError(
        "STATE_CHANGED",
        moved ??
          `The journal or boat.dev changed since the plan was made; nothing was changed. Run \`${command("reconcile")}\` (or the command's preview) again.`,
        { ...details, expectedState: expected, ...(actual === null ? {} : { actualState: actual }) },
      );
    }
  }
  /** A provider failure that is not proof either way is passed through (the CLI maps it to exit 6). */
  async function observeOrThrow(boxId: string): Promise<BoatObservation> {
    try {
      const boat = await client.getSandbox(boxId);
      return { kind: "present", name: boat.name, state: boat.state };
    } catch (error) {
      const proof = absenceProof(error);
      if (proof !== null) return { kind: "absent", status: proof };
      throw error;
    }
  }

  async function adopt(
    botId: string,
    boxId: string,
    opts: BoatActionOptions = {},
  ): Promise<BoatActionResult> {
    assertBotId(botId);
    assertBoxId(boxId);
    const rows = await createJournal.boatCreateRecoverySnapshot();
    const fences = await deleteJournal.boatDeletionSnapshot();
    const registry = await readRegistry();
    const observation = await observeOrThrow(boxId);
    const at = now();
    const row = rows.find((candidate) => candidate.botId === botId);
    const ids = { botId, boxId };

    // The digest the plan showed for this pair: the create row's item, or the unknown-Boat item (whose
    // claimant is this bot exactly when the Boat carries its deterministic name, as the plan attributes it).
    const item =
      row !== undefined && row.boxId === boxId
        ? createItem(row, observation, at, registry)
        : observation.kind === "present"
          ? unknownBoatItem(
              { id: boxId, name: observation.name, state: observation.state },
              observation.name !== null ? "unknown_boat" : "unnamed_boat",
              observation.name !== null && ownsName(botId, observation.name) ? botId : null,
              rows,
              fences,
              at,
              registry,
            )
          : null;
    if (item) {
      checkExpected(
        opts.expectedState,
        item.stateDigest,
        ids,
        registrationOf(registry, botId) === false
          ? `Bot ${botId} is not registered now (deleted since the plan was made, or never created here); nothing was changed. Create the bot again first if it is still wanted (then \`${command("reconcile")}\` prints the adopt), or delete Boat ${boxId} in boat.dev.`
          : undefined,
      );
    } else if (opts.expectedState !== undefined && row?.resolved === true && row.boxId === boxId) {
      // Already this bot's Boat: no plan item offers adopt for it, so no digest can match. A fenced command
      // re-sent after it applied (or after another adopted the Boat) is a moved state, never a silent 0.
      checkExpected(
        opts.expectedState,
        null,
        ids,
        `Boat ${boxId} is already bot ${botId}'s (adopted after the plan was made, by this command or another); nothing was changed. Run \`${command("reconcile")}\` to see what is still open.`,
      );
    }

    // The same rules the plan applies before it prints an adopt command (adoptRefusal).
    const name = observation.kind === "present" ? observation.name : null;
    const refusal = adoptRefusal(botId, boxId, name, rows, fences, at, registry);
    if (refusal?.early) throw recoveryError("ACTION_NOT_ALLOWED", refusal.message, ids);
    if (observation.kind === "absent") {
      checkExpected(
        opts.expectedState,
        null,
        ids,
        `boat.dev has no Boat ${boxId} now (${observation.status}: deleted since the plan, or there never was one); nothing was changed. Run \`${command("reconcile")}\` to see what is still open.`,
      );
      throw recoveryError(
        "NOT_FOUND",
        `boat.dev has no Boat ${boxId} (${observation.status}); nothing to adopt.`,
        ids,
      );
    }
    if (observation.kind !== "present")
      throw new Error("unreachable: observeOrThrow returns present or absent");
    if (row?.resolved && row.boxId === boxId) {
      return {
        ok: true,
        action: "adopt",
        botId,
        boxId,
        name: observation.name ?? "",
        renamed: false,
        alreadyAdopted: true,
      };
    }
    if (refusal) throw recoveryError("ACTION_NOT_ALLOWED", refusal.message, ids);
    let current = observation.name;
    let renamed = false;
    if (!ownsName(botId, current)) {
      // Only the remembered, unnamed Boat gets here (adoptRefusal): name it as provisioning would have.
      const after = await client.renameSandbox(boxId, lifecycle.boatNameFor(botId));
      current = after.name;
      renamed = true;
    }
    if (createJournal.adoptResolvedBoatOnce !== undefined) {
      // Compare-and-set on the row this action read (and its digest covered): of two identical pastes at
      // once exactly one records the Boat; the other changed nothing and says what it found.
      if (!(await createJournal.adoptResolvedBoatOnce(botId, boxId, row === undefined ? null : rowOf(row)))) {
        const recorded = (await createJournal.boatCreateRecoverySnapshot()).find((c) => c.botId === botId);
        throw recoveryError(
          "STATE_CHANGED",
          recorded?.resolved === true && recorded.boxId === boxId
            ? `Boat ${boxId} is already bot ${botId}'s (adopted while this command ran, by another); nothing was changed. Run \`${command("reconcile")}\` to see what is still open.`
            : `Bot ${botId}'s create record changed while this command ran (${recorded === undefined ? "it has none now" : `it now records ${recorded.boxId ?? "no Boat id"}${recorded.resolved ? ", resolved" : ""}`}); nothing was recorded. Run \`${command("reconcile")}\` again.`,
          { ...ids, ...(opts.expectedState === undefined ? {} : { expectedState: opts.expectedState }) },
        );
      }
    } else {
      await createJournal.adoptResolvedBoat(botId, boxId);
    }
    return { ok: true, action: "adopt", botId, boxId, name: current ?? "", renamed, alreadyAdopted: false };
  }

  async function retireCreate(botId: string, opts: BoatActionOptions = {}): Promise<BoatActionResult> {
    assertBotId(botId);
    const rows = await createJournal.boatCreateRecoverySnapshot();
    const row = rows.find((candidate) => candidate.botId === botId);
    if (!row) {
      // A fenced command names a record the plan showed: gone now is a moved state (retired already, by this
      // command or another), as for a deletion fence lifted since (exit 4, not "not found").
      checkExpected(
        opts.expectedState,
        null,
        { botId },
        `The create journal has no record for bot ${botId} now (retired since the plan, or there never was one); nothing was changed. Run \`${command("reconcile")}\` to see what is still open.`,
      );
      throw recoveryError("NOT_FOUND", `The create journal has no record for bot ${botId}.`, { botId });
    }
    const boxId = row.boxId;
    const registry = await readRegistry();
    if (boxId === undefined) {
      checkExpected(
        opts.expectedState,
        createItem(row, { kind: "not_checked" }, now(), registry)!.stateDigest,
        { botId },
      );
      throw recoveryError(
        "ACTION_NOT_ALLOWED",
        `Bot ${botId}'s create request has no recorded Boat id, so boat.dev cannot prove that no Boat exists for it. Look for an unnamed Boat in boat.dev (see \`${command("creates", "list")}\`).`,
        { botId },
      );
    }
    const fence = await deleteJournal.getBoatDeletion(boxId);
    const observation = await observeOrThrow(boxId);
    const item = createItem(row, observation, now(), registry);
    if (item) checkExpected(opts.expectedState, item.stateDigest, { botId, boxId });
    if (fence) {
      throw recoveryError(
        "ACTION_NOT_ALLOWED",
        `Boat ${boxId} has a deletion fence; the deletion retires the create record itself (\`${command("deletions", "reconcile", boxId)}\`).`,
        { botId, boxId },
      );
    }
    if (observation.kind !== "absent") {
      throw recoveryError(
        "ACTION_NOT_ALLOWED",
        `Boat ${boxId} still exists at boat.dev; retiring its record would orphan it. Adopt it or delete it instead.`,
        { botId, boxId },
      );
    }
    if (createJournal.retireDeletedBoatCreateOnce !== undefined) {
      // Compare-and-set on the row this action read: of two identical pastes at once exactly one retires
      // it; the other changed nothing (STATE_CHANGED), never a second success for one retirement.
      if (!(await createJournal.retireDeletedBoatCreateOnce(rowOf(row)))) {
        throw recoveryError(
          "STATE_CHANGED",
          `The create journal's record for bot ${botId} changed while this command ran (retired by another command, or replaced); nothing was changed. Run \`${command("reconcile")}\` to see what is still open.`,
          {
            botId,
            boxId,
            ...(opts.expectedState === undefined ? {} : { expectedState: opts.expectedState }),
          },
        );
      }
    } else {
      await createJournal.retireDeletedBoatCreate(boxId);
    }
    return { ok: true, action: "retireCreate", botId, boxId, proof: observation.status };
  }

  /** The fence for `boxId`, or the refusal when none stands (STATE_CHANGED when a fenced command named it). */
  async function fenceRecord(boxId: string, opts: BoatActionOptions): Promise<RecoveryDeletionRecord> {
    assertBoxId(boxId);
    const record = await deleteJournal.getBoatDeletion(boxId);
    if (!record) {
      if (opts.expectedState !== undefined) {
        throw recoveryError(
          "STATE_CHANGED",
          `No deletion fence stands for Boat ${boxId} (settled since the plan, or there never was one); nothing was changed.`,
          {
            boxId,
          },
        );
      }
      throw recoveryError("NOT_FOUND", `No deletion fence stands for Boat ${boxId}.`, { boxId });
    }
    return record;
  }

  /**
   * One reconcile of a fence: a direct read of the Boat that must succeed (a provider failure passes through
   * unchanged, journals untouched: a Boat drydock could not see is never reported "pending"), then the
   * lifecycle's poll of the fence's operation and its own direct read, which finish the fence on proof.
   * What is left is said plainly, with the next step for the fence as it stands now (the plan's action).
   */
  async function reconcileDeletion(boxId: string, opts: BoatActionOptions = {}): Promise<BoatActionResult> {
    const fence = await fenceRecord(boxId, opts);
    const observation = await observeOrThrow(boxId);
    checkExpected(opts.expectedState, fenceDigest(fence, observation), { boxId });
    const base = { ok: true, action: "reconcileDeletion", boxId } as const;
    let outcome: "confirmed" | "pending" | "blocked";
    try {
      outcome = await lifecycle.reconcileDeletion(boxId);
    } catch (error) {
      // The lifecycle refuses a Boat renamed since its fence (it reads, writes nothing, and throws): the
      // rename is what this read saw too, so say it, with the plan's way out, instead of a bare refusal.
      const renamed = renamedTo(fence, observation);
      if (renamed === undefined || !isLifecycleError(error) || error.code !== "name_mismatch") throw error;
      const record = (await deleteJournal.getBoatDeletion(boxId)) ?? fence;
      return {
        ...base,
        outcome:
          record.phase === "accepted" ? "pending" : record.phase === "blocked" ? "blocked" : "not_running",
        message: `boat.dev shows Boat ${boxId} named ${renamed ?? "nothing"}, not ${record.name} as its fence recorded, so drydock neither finishes nor re-sends its deletion${record.phase === "accepted" ? " (boat.dev accepted it and has not finished it)" : ""}; nothing was changed.`,
        next: fenceItem(record, observation, now()).action,
      };
    }
    if (outcome === "confirmed") {
      return {
        ...base,
        outcome,
        message: `boat.dev proved Boat ${boxId} deleted; its deletion fence is lifted.`,
        next: null,
      };
    }
    const record = await deleteJournal.getBoatDeletion(boxId);
    if (record === null) {
      // Another process finished the deletion between the poll and this read.
      return {
        ...base,
        outcome: "confirmed",
        message: `The deletion fence for ${boxId} is gone: the deletion was finished meanwhile.`,
        next: null,
      };
    }
    const next = fenceItem(record, observation, now()).action;
    if (record.phase === "blocked") {
      return {
        ...base,
        outcome: "blocked",
        message: `boat.dev blocked the deletion of ${boxId}; its fence stays until a retry is accepted.`,
        next,
      };
    }
    if (observation.kind !== "present") {
      // Our read proved it gone, but the lifecycle's own reads did not get that far: the fence stays.
      return {
        ...base,
        outcome: "pending",
        message: `boat.dev answered that Boat ${boxId} is gone, but the fence could not be lifted in this run; reconcile it again.`,
        next,
      };
    }
    if (record.phase === "accepted") {
      return {
        ...base,
        outcome: "pending",
        message: `boat.dev accepted the deletion of ${boxId} and has not finished it (${record.status ?? "pending"}); its fence stays until boat.dev proves the Boat gone.`,
        next,
      };
    }
    const renamed = renamedTo(record, observation);
    if (next.name === null && renamed !== undefined && fenceInFlightLeftMs(record, now()) === 0) {
      return {
        ...base,
        outcome: "not_running",
        message: `No deletion of ${boxId} is running that drydock knows of, and none will be sent: boat.dev shows the Boat named ${renamed ?? "nothing"}, not ${record.name} as its fence recorded.`,
        next,
      };
    }
    if (next.name === null) {
      // Prepared moments ago: its DELETE (another process's, perhaps) may still be on the wire.
      return {
        ...base,
        outcome: "pending",
        message: `The deletion of ${boxId} was prepared moments ago and its DELETE may still be on the wire; nothing was sent.`,
        next,
      };
    }
    return {
      ...base,
      outcome: "not_running",
      message: `No deletion of ${boxId} is running that drydock knows of: the Boat still exists and boat.dev never confirmed a DELETE for it (the fence is prepared, without a receipt), so reconciling again will not move it. \`deletions retry\` does: it sends DELETE again, which boat.dev answers with the running operation if an earlier one did arrive.`,
      next,
    };
  }

  async function retryDeletion(boxId: string, opts: BoatActionOptions = {}): Promise<BoatActionResult> {
    const record = await fenceRecord(boxId, opts);
    if (opts.expectedState !== undefined) {
      // The digest covers the name boat.dev shows: a command printed before a rename is stale after it.
      checkExpected(opts.expectedState, fenceDigest(record, await observeOrThrow(boxId)), { boxId });
    }
    if (record.phase === "accepted") {
      throw recoveryError(
        "ACTION_NOT_ALLOWED",
        `boat.dev accepted the deletion of ${boxId} (${record.status ?? "pending"}); a second DELETE would be blind. Reconcile it instead: \`${command("deletions", "reconcile", boxId)}\`.`,
        { boxId },
      );
    }
    // A fence prepared moments ago may have its DELETE still on the wire (another process's): a retry now
    // would be blind, and the lifecycle would send nothing anyway. Said plainly, with the wait.
    const inFlightMs = deletionInFlightLeftMs(record, now());
    if (inFlightMs > 0) {
      throw recoveryError(
        "ACTION_NOT_ALLOWED",
        `The deletion of ${boxId} was prepared ${Math.round((DELETE_IN_FLIGHT_MS - inFlightMs) / 1000)} s ago, so its DELETE may still be on the wire; a second one now would be blind. Nothing was sent. Retry in ${Math.ceil(inFlightMs / 1000)} s.`,
        { boxId },
      );
    }
    // The fence's recorded name is the confirmation: the lifecycle re-reads the Boat and refuses if it was
    // renamed since (the person would be deleting something they did not see).
    let result: { ok: true; pending?: true };
    try {
      result = await lifecycle.deleteBoat({
        boxId,
        confirmName: record.name,
        ownerBotId: record.ownerBotId,
        // A fenced retry is a compare-and-set on exactly the fence its digest covered: another retry (or
        // anything else) that moved it first makes this one send nothing and say so (STATE_CHANGED).
        ...(opts.expectedState === undefined ? {} : { expectedFence: record }),
      });
    } catch (error) {
      if (
        opts.expectedState === undefined ||
        !isLifecycleError(error) ||
        error.code !== "confirmation_mismatch"
      ) {
        throw error;
      }
      const current = await deleteJournal.getBoatDeletion(boxId);
      throw recoveryError(
        "STATE_CHANGED",
        `The deletion of ${boxId} changed while this command ran (another \`deletions retry\` or a Delete re-sent or settled it, or the Boat was renamed): ${current === null ? "no deletion fence stands now" : `its fence is ${current.phase}${current.status ? `/${current.status}` : ""} now`}; this command sent nothing. Run \`${command("reconcile")}\` to see what is still open.`,
        { boxId, expectedState: opts.expectedState },
      );
    }
    return { ok: true, action: "retryDeletion", boxId, pending: result.pending === true };
  }

  return { plan, adopt, retireCreate, reconcileDeletion, retryDeletion };
}
