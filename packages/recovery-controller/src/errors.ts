/**
 * The recovery controller's one error class. Every code is a refusal that changed nothing on disk (the
 * controller checks before it writes), except where a message says otherwise. Errors of the saga store,
 * the workspace lock, the journals and the provider pass through unchanged: they already say what happened.
 */
export const RECOVERY_ERROR_STATUS = {
  /** A malformed fence, id or option: nothing was read or written. */
  INVALID_ARGUMENT: 400,
  /** The saga is not at the exact (seq, headHash) the operator previewed: re-run the preview. */
  SAGA_CONFLICT: 409,
  /** The saga's phase does not allow this action (e.g. abort after a durable intent, release before terminal). */
  ACTION_NOT_ALLOWED: 409,
  /** The workspace lock owner is not the one previewed (changed, disappeared, or still alive). */
  OWNER_CONFLICT: 409,
  /** A journal row or provider Boat moved since the Boat recovery plan was made: re-plan. */
  STATE_CHANGED: 409,
  /** No journal row, deletion fence or Boat with this id (an addition to the contract's codes). */
  NOT_FOUND: 404,
} as const;

export type RecoveryErrorCode = keyof typeof RECOVERY_ERROR_STATUS;

const MARKER = Symbol.for("@drydock/recovery-controller/RecoveryError");

/** Facts that help the operator and the CLI; never a token, key or request body. */
export interface RecoveryErrorDetails {
  operationId?: string;
  phase?: string | null;
  basePhase?: string | null;
  expectedSeq?: number;
  expectedHash?: string;
  actualSeq?: number | null;
  actualHash?: string | null;
  expectedOwnerDigest?: string | null;
  actualOwnerDigest?: string | null;
  /** The durable initiator of a `created` saga that may still be running. */
  actorPid?: number;
  /** true when the owner (or initiator) is alive: taking over would be unsafe, not merely stale. */
  ownerAlive?: boolean;
  botId?: string;
  boxId?: string;
  expectedState?: string;
  actualState?: string;
}

export class RecoveryError extends Error {
  override readonly name = "RecoveryError";
  readonly code: RecoveryErrorCode;
  readonly status: (typeof RECOVERY_ERROR_STATUS)[RecoveryErrorCode];
  readonly details: Readonly<RecoveryErrorDetails>;

  constructor(init: {
    code: RecoveryErrorCode;
    message: string;
    details?: RecoveryErrorDetails;
    cause?: unknown;
  }) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.code = init.code;
    this.status = RECOVERY_ERROR_STATUS[init.code];
    this.details = Object.freeze({ ...(init.details ?? {}) });
    Object.defineProperty(this, MARKER, { value: true });
  }
}

/** True for a RecoveryError from any copy of this package (a registered-symbol marker, not instanceof). */
export function isRecoveryError(value: unknown): value is RecoveryError {
  return typeof value === "object" && value !== null && (value as Record<symbol, unknown>)[MARKER] === true;
}

export function recoveryError(
  code: RecoveryErrorCode,
  message: string,
  details?: RecoveryErrorDetails,
  cause?: unknown,
): RecoveryError {
  return new RecoveryError({
    code,
    message,
    ...(details === undefined ? {} : { details }),
    ...(cause === undefined ? {} : { cause }),
  });
}
