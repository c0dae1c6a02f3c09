import { MAX_RETRY_AFTER_MS } from "./internal/retry.js";

/**
 * Every failure of a lifecycle call, with the HTTP status the bot server answers with. The default status
 * of each code lives in this one table, so a code without a status does not compile. A few codes carry
 * the provider's own status instead of the default (`provider_refused` passes boat.dev's 4xx through,
 * `provider_unavailable` is 502 when boat.dev answered with a 5xx and 503 when no answer arrived).
 */
export const LIFECYCLE_ERROR_STATUS = {
  /** A bad argument (bot id, Boat id, confirmation name). Nothing was sent, nothing was written. */
  invalid_argument: 400,
  /** The bot's Boat is being deleted; provisioning waits until the deletion is proven finished. */
  computer_deleting: 409,
  /**
   * The bot's previous Boat was just proven deleted. One click never deletes and silently recreates:
   * the caller must retry deliberately to create a new Boat.
   */
  previous_deletion_finished: 409,
  /** Another lifecycle call for the same bot is running in this process. */
  bot_busy: 409,
  /** A journal refused: its recovery state is unreadable, invalid, locked, full or needs a person. */
  recovery_paused: 503,
  /** boat.dev did not answer (lost response, timeout, 5xx): the outcome is unknown and was kept. */
  provider_unavailable: 503,
  /**
   * boat.dev's list is still being read once (the name sweep) to make sure no Boat already carries the
   * bot's name, and it is longer than one call reads: nothing was created; a retry continues the reading.
   */
  name_sweep_incomplete: 503,
  /** boat.dev refused the request with a 4xx; the status is boat.dev's own. */
  provider_refused: 400,
  /** boat.dev is still working on the same idempotent create; retry in a moment with the same key. */
  create_in_progress: 409,
  /** A deletion operation was accepted but is blocked at boat.dev; the fence stays until a retry. */
  deletion_blocked: 409,
  /** `confirmName` no longer equals the Boat's current name. */
  confirmation_mismatch: 409,
  /** boat.dev may or may not have accepted a DELETE; the fence was kept for reconciliation. */
  deletion_unconfirmed: 503,
  /** boat.dev answered a DELETE with a receipt that is not bound to the Boat; the fence was kept. */
  invalid_receipt: 503,
  /** A remembered Boat carries a name that is neither its deterministic name nor unnamed. */
  name_mismatch: 503,
  /** Two Boats claim one bot, or a listed id is malformed: a person must repair it in boat.dev. */
  inventory_conflict: 503,
  /** An inventory cursor that is not one the inventory answered, or one boat.dev no longer accepts. */
  invalid_cursor: 400,
  /** The Boat (or deletion record) does not exist, or is not one of this installation's. */
  not_found: 404,
  /** Provisioning created a Boat, failed afterwards, and its cleanup is not yet proven. */
  cleanup_unconfirmed: 503,
  /** The caller's AbortSignal fired; anything already sent stays journaled. */
  cancelled: 409,
  /**
   * The caller's `stillWanted` check answered no once the key was journaled, before anything was sent to
   * boat.dev (the bot is being deleted, say): nothing was created, and a key minted by this call was
   * discarded.
   */
  provision_withdrawn: 409,
} as const;

export type LifecycleErrorCode = keyof typeof LIFECYCLE_ERROR_STATUS;

const MARKER = Symbol.for("@drydock/boat-lifecycle/LifecycleError");

export interface LifecycleErrorInit {
  code: LifecycleErrorCode;
  message: string;
  /** Overrides the table's status where the provider's own status is the truth (see the table). */
  status?: number;
  /** The Boat concerned, when one is known (never a key, body or token). */
  boxId?: string;
  /** How long boat.dev asked to wait before a retry (its Retry-After), when it said so. */
  retryAfterMs?: number;
  cause?: unknown;
}

export class LifecycleError extends Error {
  override readonly name = "LifecycleError";
  readonly code: LifecycleErrorCode;
  readonly status: number;
  readonly boxId: string | undefined;
  /** boat.dev's Retry-After (ms) for this failure: retrying earlier is pointless (the bot server sends it on). */
  readonly retryAfterMs: number | undefined;
  readonly [MARKER] = true;

  constructor(init: LifecycleErrorInit) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.code = init.code;
    this.status = init.status ?? LIFECYCLE_ERROR_STATUS[init.code];
    this.boxId = init.boxId;
    this.retryAfterMs = init.retryAfterMs;
  }
}

/** True for a `LifecycleError`, even one thrown by a second copy of this package. */
export function isLifecycleError(value: unknown): value is LifecycleError {
  return typeof value === "object" && value !== null && (value as Record<symbol, unknown>)[MARKER] === true;
}

/** A Retry-After as a person reads it, rounded up: "45 seconds", "20 minutes", "3 hours". */
export function describeWait(ms: number): string {
  const seconds = Math.max(1, Math.ceil(ms / 1_000));
  const [amount, unit] =
    seconds <= 90
      ? [seconds, "second"]
      : seconds <= 90 * 60
        ? [Math.ceil(seconds / 60), "minute"]
        : [Math.ceil(seconds / 3_600), "hour"];
  return `${amount} ${unit}${amount === 1 ? "" : "s"}`;
}

/**
 * "retry in a moment", or, when boat.dev asked for longer than a moment (more than the in-call cap,
 * MAX_RETRY_AFTER_MS), that wait.
 */
export function retryIn(retryAfterMs: number | undefined): string {
  return retryAfterMs === undefined || retryAfterMs <= MAX_RETRY_AFTER_MS
    ? "retry in a moment"
    : `retry in ${describeWait(retryAfterMs)} (boat.dev asked to wait that long)`;
}

/** The original modules' wording, in one place so tests and docs can quote it. */
export const LIFECYCLE_MESSAGES = {
  computerDeleting:
    "this cloud computer is being deleted — wait for it to finish, or retry Delete if it needs attention",
  previousDeletionFinished: "the previous cloud computer deletion finished — retry to create a new computer",
  botBusy: "this bot's cloud computer is busy with another request — wait for it to finish, then retry",
  provisionWithdrawn:
    "the cloud computer was not created: the caller withdrew the request before it was sent to boat.dev, and nothing was created",
  provisionWithdrawnKept:
    "the cloud computer was not created: the caller withdrew the request before it was sent to boat.dev. Its request was kept, because another server sharing this storage may be sending the same request: a computer setup of this bot reuses it (never a second computer), and deleting the bot waits until it is settled",
  confirmationMismatch: "cloud computer confirmation no longer matches — refresh and try again",
  fenceChanged: (boxId: string) =>
    `the deletion of ${boxId} changed since its fence was read (another caller retried, settled or re-prepared it); nothing was sent — refresh and try again`,
  deleteUnconfirmed:
    "Could not confirm whether boat.dev accepted the delete. The computer was kept fenced; retry Delete to reconcile it",
  createUnconfirmed:
    "Could not confirm whether boat.dev created the cloud computer. Its request was kept, so retrying reuses it and cannot create a second computer",
  createRefusedKept: (why: string) =>
    `boat.dev refused to create the cloud computer: ${why}. An earlier attempt with the same request may already have created it, so its request was kept: retrying reuses it and cannot create a second computer. If boat.dev keeps refusing, check boat.dev for an unnamed computer before repairing drydock's local state`,
  createRefusedShared: (why: string) =>
    `boat.dev refused to create the cloud computer: ${why}. Its request was kept, because another server sharing this storage may be sending the same request and a request dropped here could then create a computer nobody knows: retrying reuses it and cannot create a second computer. If boat.dev keeps refusing, fix the cause it names, or settle the request with drydock (creates list, then the retire action it offers)`,
  createInProgress:
    "boat.dev is still creating this bot's cloud computer — wait a moment, then retry (the same request is reused)",
  createKeyNearExpiry:
    "Cloud computer creation is paused because this bot's unfinished create request is too close to the end of boat.dev's 24-hour retry window: boat.dev may forget it before a retry arrives, and a forgotten request would create a second computer. The request was kept and no new one was made. Check boat.dev for an unnamed Boat (made when `drydock creates list` says the request started) before repairing drydock's local state",
  nameMismatch:
    "A cloud computer being deleted no longer has its remembered name — repair it in boat.dev before continuing",
  listUnavailable:
    "boat.dev's list of cloud computers is unavailable, so nothing was created — retry in a moment",
  nameSweepIncomplete: (progress: string) =>
    `nothing was created: drydock is still reading boat.dev's list of cloud computers, once, to make sure no computer already carries this bot's name (${progress}, and the list goes on). A retry continues from where it stopped — retry in a moment`,
  priorDeletionFailed: (boxId: string) =>
    `nothing was created: this bot's previous cloud computer ${boxId} is still fenced for deletion and retrying its deletion failed`,
  invalidReceipt: (boxId: string) =>
    `boat.dev returned an invalid deletion receipt for ${boxId}; its deletion fence was kept`,
  deletionBlocked: (boxId: string) =>
    `boat.dev accepted deletion of ${boxId}, but the deletion operation is blocked — check boat.dev and retry`,
  deletionOperationUnknown: (boxId: string, operationId: string) =>
    `boat.dev no longer knows deletion operation ${operationId} while cloud computer ${boxId} still exists, so that deletion will never finish. Its deletion fence was marked blocked: an explicit Delete retry is now allowed`,
  cleanupPending: (original: string, boxId: string) =>
    `${original}. boat.dev accepted deletion of the new computer, but it is still pending; its recovery record was kept, along with its deletion fence. Check box ${boxId} in boat.dev.`,
  cleanupFailed: (original: string, why: string, boxId: string) =>
    `${original}. The new computer's deletion was not confirmed: ${why}. Check box ${boxId} in boat.dev.`,
} as const;
