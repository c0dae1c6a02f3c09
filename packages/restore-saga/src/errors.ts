/**
 * Every way the saga store, the workspace lock, the checkpoint store and the restore orchestrator fail,
 * with the status a server should answer with. 400: the caller's input is wrong. 404: nothing there.
 * 409: the state moved, is held, or does not allow this step; re-read and decide again. 503: state on
 * disk is unusable or the disk failed; a person must look before anything retries.
 */
export const SAGA_ERROR_STATUS = {
  /** A malformed argument (operation id, path, option); nothing was touched. */
  INVALID_ARGUMENT: 400,
  /** Evidence that is not allowed for the phase (unknown key, wrong type, too large to be sane). */
  INVALID_EVIDENCE: 400,
  /** No active saga (or checkpoint) with this id. An archived saga is NOT_FOUND for `load`. */
  NOT_FOUND: 404,
  /** The operation id is already used (active, archived, or the chain already exists). */
  ALREADY_EXISTS: 409,
  /** The saga moved since the caller read it: `(expectedSeq, expectedHash)` differ from the head. */
  CONFLICT: 409,
  /** The phase machine does not allow this step from the current phase. */
  INVALID_TRANSITION: 409,
  /** A bound was reached: events per saga, evidence size, sagas per workspace. */
  LIMIT: 409,
  /** Files on disk are inconsistent, tampered with, or hostile (symlink, hard link, escape). Untouched. */
  CORRUPT: 503,
  /**
   * A state lock could not be taken or released (busy past its wait, dead-owner state, fs failure). Also
   * a file or path that could not be opened, read, listed or resolved just now for a reason of the process
   * or the system, not of the data (EMFILE, ENFILE, ENOMEM, EAGAIN, EINTR; for a workspace or data
   * directory's realpath, any errno but a wrong path): the message names the errno; retry.
   */
  LOCK_FAILED: 503,
  /** A write failed; `commitState` says whether the change may have landed. */
  WRITE_FAILED: 503,
  /** The saga belongs to another workspace (or the workspace directory was replaced). */
  WORKSPACE_MISMATCH: 409,
  /** A live process holds this workspace, or a parent or child of it, for another transaction. */
  WORKSPACE_LOCKED: 409,
  /**
   * The workspace is held for a transaction that did not finish: its owner died, or a restore failed
   * after its intent and kept the lock on purpose. Only a fenced recovery may settle it.
   */
  RECOVERY_REQUIRED: 409,
  /**
   * The workspace lock file no longer holds this process's owner; or a saga store's state lock was not
   * this process's any more when a read let go of it (what it read may be stale; a write says WRITE_FAILED).
   */
  LOCK_OWNERSHIP_LOST: 409,
} as const;

export type SagaErrorCode = keyof typeof SAGA_ERROR_STATUS;

/**
 * Whether a failed write may have landed. Callers never blind-retry on `*_unknown`: they reload and accept
 * only the exact successor they meant to write.
 */
export type CommitState =
  /** Nothing was published; the saga is exactly as before. */
  | "event_not_committed"
  /** The event may or may not be on disk. */
  | "event_commit_unknown"
  /** The event is on disk, HEAD still names its predecessor; the next load rolls HEAD forward. */
  | "event_committed_head_unsettled"
  /** The event is on disk, and whether HEAD moved is unknown; the next load settles it. */
  | "head_settlement_unknown"
  /** The archive rename did not happen. */
  | "archive_not_committed"
  /** The archive rename may have happened; retrying `archiveTerminal` answers `alreadyArchived`. */
  | "archive_commit_unknown"
  /** No purge receipt was written; the archived saga is untouched. */
  | "purge_not_committed"
  /** The receipt is written (the purge is decided); deleting the events did not finish. Retry it. */
  | "purge_commit_unknown"
  /**
   * Removing an orphan (a saga directory without a published event) did not finish; what is left is still
   * an orphan, which holds no work. `removeOrphan` (or the next `listPending`) finishes it.
   */
  | "orphan_removal_unfinished";

export interface SagaErrorDetails {
  operationId?: string;
  phase?: string | null;
  expectedSeq?: number;
  expectedHash?: string;
  actualSeq?: number | null;
  actualHash?: string | null;
  intendedSeq?: number;
  intendedHash?: string;
  /** True when a failed restore kept the workspace lock so that only a fenced recovery can settle it. */
  workspaceLockRetained?: boolean;
  /** Digest of the owner kept on disk (never the owner's token). */
  retainedOwnerDigest?: string;
  retentionReason?: string;
  /** The transaction holding (or last holding) an overlapping workspace lock. */
  ownerOperationId?: string;
  ownerPid?: number;
  ownerWorkspaceRoot?: string;
  /** A second error met while handling the first (e.g. the saga could not be journaled). */
  secondaryError?: unknown;
  /**
   * On LOCK_OWNERSHIP_LOST from a workspace lock whose work had failed too: that failure (the callback's
   * error of `withWorkspaceLock`, or the restore's own failure). The loss is reported first, because
   * another process may be changing the workspace; the failure is kept here.
   */
  callbackError?: unknown;
}

export interface SagaErrorInit extends SagaErrorDetails {
  code: SagaErrorCode;
  message: string;
  cause?: unknown;
  commitState?: CommitState;
}

const SAGA_ERROR_MARK = Symbol.for("@drydock/restore-saga/SagaError");

export class SagaError extends Error {
  readonly code: SagaErrorCode;
  readonly status: (typeof SAGA_ERROR_STATUS)[SagaErrorCode];
  /** Set on write failures only; null when the failure was not a write. */
  readonly commitState: CommitState | null;
  readonly details: Readonly<SagaErrorDetails>;

  constructor(init: SagaErrorInit) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = "SagaError";
    this.code = init.code;
    this.status = SAGA_ERROR_STATUS[init.code];
    this.commitState = init.commitState ?? null;
    const { code: _code, message: _message, cause: _cause, commitState: _state, ...details } = init;
    this.details = Object.freeze(details);
    Object.defineProperty(this, SAGA_ERROR_MARK, { value: true });
  }

  /** Works across duplicate copies of this package (a `Symbol.for` marker, not `instanceof`). */
  static isInstance(value: unknown): value is SagaError {
    return typeof value === "object" && value !== null && SAGA_ERROR_MARK in value;
  }
}

export function isSagaError(value: unknown): value is SagaError {
  return SagaError.isInstance(value);
}

export function sagaError(init: SagaErrorInit): SagaError {
  return new SagaError(init);
}

export function errnoOf(error: unknown): string | undefined {
  const code = (error as NodeJS.ErrnoException | null)?.code;
  return typeof code === "string" ? code : undefined;
}
