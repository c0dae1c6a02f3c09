import { KEY_RETENTION_MS, KEY_SAFETY_MARGIN_MS } from "@drydock/boat-create-journal";
import { deletionInFlightLeftMs } from "@drydock/boat-lifecycle";
import {
  BOAT_DELETION_PHASES,
  BOAT_DELETION_STATUSES,
  BOAT_ID,
  BOT_ID,
  RESTORE_OPERATION_ID,
} from "@drydock/facts";
import { z } from "zod";

/** `sha256:` + 64 lower-case hex: saga hashes and owner digests. */
export const DIGEST_PATTERN = /^sha256:[0-9a-f]{64}$/;
export const OPERATION_ID_PATTERN = RESTORE_OPERATION_ID;

export const DigestSchema = z.string().regex(DIGEST_PATTERN);
/** `torn:sha256:` + 64 hex: the owner fence of a workspace lock file torn by a power loss (no owner to digest). */
export const TORN_DIGEST_PATTERN = /^torn:sha256:[0-9a-f]{64}$/;
export const TornDigestSchema = z.string().regex(TORN_DIGEST_PATTERN);
export const OperationIdSchema = z.string().regex(OPERATION_ID_PATTERN);

/**
 * The exact state an operator previewed. `expectedOwnerDigest: null` is an explicit claim that no workspace
 * lock owner exists; `undefined` is refused, so "I forgot the owner" can never read as "there is none".
 * `torn:sha256:…` names a lock file torn by a power loss (its device, inode, size and ctime): no owner, but
 * that very file.
 */
export const RestoreFenceSchema = z.strictObject({
  expectedSeq: z.int().min(1).max(Number.MAX_SAFE_INTEGER),
  expectedHash: DigestSchema,
  expectedOwnerDigest: z.union([DigestSchema, TornDigestSchema]).nullable(),
});
export type RestoreFence = z.infer<typeof RestoreFenceSchema>;

export const ActionVerdictSchema = z.object({
  eligible: z.boolean(),
  /** Why the action is refused now; empty when eligible. */
  blockers: z.array(z.string()),
});
export type ActionVerdict = z.infer<typeof ActionVerdictSchema>;

/**
 * The fenced restore actions. `complete` finishes a restore whose file work is done (base `workspace_applied`
 * or `session_committed`): recovery_required → recovery_started {resume-already-completed} → completed.
 */
export const RestoreActionNameSchema = z.enum(["abort", "release", "complete", "rollback"]);
export type RestoreActionName = z.infer<typeof RestoreActionNameSchema>;

/** What `preview(id)` returns: everything the operator needs, and nothing secret (no lock token). */
export const RestorePreviewSchema = z.object({
  saga: z.object({
    operationId: OperationIdSchema,
    phase: z.string(),
    /** The last phase that is not `recovery_required`/`recovery_started`. */
    basePhase: z.string().nullable(),
    seq: z.int(),
    headHash: DigestSchema,
    terminal: z.boolean(),
    /** true when the saga is no longer active but its archive replays at this head. */
    archived: z.boolean(),
    events: z.array(z.object({ seq: z.int(), phase: z.string(), timestamp: z.string().optional() })),
  }),
  owner: z
    .object({
      digest: DigestSchema,
      pid: z.int(),
      /** Liveness of the owner's pid as this process sees it (alive means: do not take over). */
      alive: z.boolean(),
      transactionId: z.string(),
    })
    .nullable(),
  /**
   * The workspace lock file when it is torn by a power loss (no owner to read, last changed before this
   * boot): the actions take over that very file (fence `torn:sha256:…`). Null (or absent) otherwise.
   */
  tornLock: z
    .object({
      digest: TornDigestSchema,
      path: z.string().nullable(),
      size: z.int(),
      /** When the file was last changed (its ctime), ISO 8601. */
      changedAt: z.string(),
    })
    .nullable()
    .optional(),
  fence: RestoreFenceSchema,
  actions: z.object({
    abort: ActionVerdictSchema,
    release: ActionVerdictSchema,
    complete: ActionVerdictSchema,
    rollback: ActionVerdictSchema,
  }),
  /**
   * The one action to take, or null when none is eligible: the first eligible of abort, release, complete,
   * rollback. Only `complete` and `rollback` can both be eligible (a restore stopped after
   * `workspace_applied`): completing keeps the result the user asked for, and the rollback stays available.
   */
  recommended: RestoreActionNameSchema.nullable(),
});
export type RestorePreview = z.infer<typeof RestorePreviewSchema>;

export const ArchiveWarningSchema = z.object({
  code: z.string().max(128),
  message: z.string().max(512),
  commitState: z.string().nullable(),
});
export type ArchiveWarning = z.infer<typeof ArchiveWarningSchema>;

export const RestoreActionResultSchema = z.object({
  ok: z.literal(true),
  action: RestoreActionNameSchema,
  operationId: OperationIdSchema,
  phase: z.string(),
  seq: z.int(),
  headHash: DigestSchema,
  /** true when a failure inside the lock turned out to have settled the saga anyway. */
  reconciledFromError: z.boolean(),
  archived: z.boolean(),
  alreadyArchived: z.boolean(),
  /** A failed archive never fails the action: the saga is settled, only its filing is pending. */
  warning: ArchiveWarningSchema.nullable(),
});
export type RestoreActionResult = z.infer<typeof RestoreActionResultSchema>;

// ---------------------------------------------------------------------------------------------------------
// Boat recovery plan

export const BOAT_ID_PATTERN = BOAT_ID;
export const BOT_ID_PATTERN = BOT_ID;
/**
 * How long drydock retries a create key: boat.dev's 24-hour idempotency window less the create journal's
 * 1-hour safety margin (clock skew, waits inside a call). Past it the key is never sent again.
 */
export const CREATE_WINDOW_MS = KEY_RETENTION_MS - KEY_SAFETY_MARGIN_MS;
/**
 * How long a create row without a Boat id counts as a provisioning call still running: the longest one
 * attempt takes (up to four POSTs of 10 s each while boat.dev answers "in progress", their 2.5 s of backoff,
 * one retry of an ambiguous answer after a Retry-After of up to 30 s, the listing and the rename) with room
 * to spare. Past it nothing is working on the row: it needs a person (retry provisioning, which reuses the
 * key), although the key stays usable until CREATE_WINDOW_MS.
 */
export const CREATE_IN_FLIGHT_MS = 120_000;

/** How far ahead of the reading clock a stamp may be before it is clock skew (a person's), not a wait. */
export const CLOCK_SKEW_TOLERANCE_MS = 5_000;

/**
 * Time left before a create row started at `createdAt` stops counting as a provisioning call in flight (0
 * after). A row stamped more than CLOCK_SKEW_TOLERANCE_MS ahead of `now` is not in flight: it would stay so
 * until the clock caught up. The plan and `drydock status` without boat.dev use this one rule.
 */
export function createInFlightLeftMs(createdAt: number, now: number): number {
  if (createdAt - now > CLOCK_SKEW_TOLERANCE_MS) return 0;
  return Math.max(0, CREATE_IN_FLIGHT_MS - Math.max(0, now - createdAt));
}

/**
 * boat-lifecycle's in-flight window of a prepared deletion fence, with the same skew rule: a fence stamped
 * more than CLOCK_SKEW_TOLERANCE_MS ahead of `now` is no wait (the plan asks a person to check the clocks).
 */
export function fenceInFlightLeftMs(
  record: { phase: "prepared" | "accepted" | "blocked"; updatedAt: number },
  now: number,
): number {
  if (record.phase === "prepared" && record.updatedAt - now > CLOCK_SKEW_TOLERANCE_MS) return 0;
  return deletionInFlightLeftMs(record, now);
}

export const BoatActionNameSchema = z.enum(["adopt", "reconcileDeletion", "retryDeletion", "retireCreate"]);
export type BoatActionName = z.infer<typeof BoatActionNameSchema>;

export const PlanItemKindSchema = z.enum([
  /** A create key without a Boat id, inside the 24 h window: the server's retry with the same key settles it. */
  "create_in_window",
  /** A create key without a Boat id, past the window: only a person can look for an unnamed Boat. */
  "create_expired",
  /** A Boat id remembered for a bot but not resolved (not yet renamed and recorded as owned). */
  "create_unresolved",
  /** A journal row whose Boat boat.dev says (directly, 404/410) does not exist. */
  "create_boat_gone",
  /**
   * A create row with a Boat id whose bot the registry does not have (deleted, or never created here): the
   * Boat is billed and no bot uses or can delete it. Needs a person; once boat.dev says the Boat is gone the
   * row is `create_boat_gone` (retire it).
   */
  "create_bot_unregistered",
  /** A deletion fence: the Boat may still exist; nothing may reuse or forget it. */
  "deletion_fence",
  /** A Boat carrying this installation's name that no journal knows. */
  "unknown_boat",
  /** An unnamed Boat while a create key without a Boat id exists: it may be that key's Boat. */
  "unnamed_boat",
]);
export type PlanItemKind = z.infer<typeof PlanItemKindSchema>;

/** What boat.dev said about one Boat id, read directly (GET), not from the eventually consistent list. */
export const BoatObservationSchema = z.discriminatedUnion("kind", [
  z.object({ kind: z.literal("present"), name: z.string().nullable(), state: z.string() }),
  z.object({ kind: z.literal("absent"), status: z.int() }),
  z.object({ kind: z.literal("unknown"), reason: z.string() }),
  z.object({ kind: z.literal("not_checked") }),
]);
export type BoatObservation = z.infer<typeof BoatObservationSchema>;

export const PlanItemSchema = z.object({
  kind: PlanItemKindSchema,
  botId: z.string().nullable(),
  boxId: z.string().nullable(),
  /** Name boat.dev reports (or the fence recorded); null when unnamed or unknown. */
  name: z.string().nullable(),
  /** One plain sentence: what this is and why it needs a person. */
  summary: z.string(),
  facts: z.object({
    resolved: z.boolean().optional(),
    ageMs: z.number().optional(),
    /** Time left in the 24 h window; 0 once past it. */
    windowLeftMs: z.number().optional(),
    fencePhase: z.enum(BOAT_DELETION_PHASES).optional(),
    fenceStatus: z.enum(BOAT_DELETION_STATUSES).optional(),
    /**
     * A prepared fence younger than the in-flight window: time until a retry may send DELETE again. A create
     * row younger than CREATE_IN_FLIGHT_MS: time until it stops counting as a provisioning call running.
     */
    inFlightLeftMs: z.number().optional(),
    /**
     * A prepared fence stamped this far (ms, over 5 s) ahead of this clock: clock skew, which needs a person
     * (the fence stays in flight until the clock catches up), not a wait.
     */
    stampedAheadMs: z.number().optional(),
    provider: BoatObservationSchema,
  }),
  /** The one safe next step: an action this package can perform, or null when only waiting or a person can. */
  action: z.object({
    name: BoatActionNameSchema.nullable(),
    /** The exact command to paste (with --expected-state and --yes), or null. */
    command: z.string().nullable(),
    /** Plain language: what the step does, or what to do by hand. */
    advice: z.string(),
  }),
  /** Digest of the facts the action depends on; the action refuses (STATE_CHANGED) if they moved. */
  stateDigest: z.string(),
});
export type PlanItem = z.infer<typeof PlanItemSchema>;

export const BoatPlanSchema = z.object({
  items: z.array(PlanItemSchema),
  /** false when boat.dev could not be listed: unknown Boats were not looked for. */
  providerListed: z.boolean(),
  /** Why boat.dev could not be listed, without a final full stop (it is quoted inside other sentences). */
  providerError: z.string().nullable(),
  /**
   * Set when the bot registry (`registeredBotIds`) could not be read: whether recorded Boats' bots still
   * exist was not checked, and nothing is offered for adoption. Absent when it was read or there is none.
   */
  registryError: z.string().optional(),
  /**
   * Boats the journals know whose direct read at boat.dev failed (neither the Boat nor boat.dev's proof of its
   * absence came back): what the plan says of them is unverified, so a report that lists any is incomplete.
   * `reason` has no final full stop.
   */
  unreadBoats: z.array(z.object({ boxId: z.string(), botId: z.string().nullable(), reason: z.string() })),
});
export type BoatPlan = z.infer<typeof BoatPlanSchema>;
