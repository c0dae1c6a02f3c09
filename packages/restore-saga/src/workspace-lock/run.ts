import { isSagaError, SagaError } from "../errors.js";
import { boundedText } from "../internal/text.js";
import { acquireWorkspaceLock, takeoverWorkspaceLock } from "./acquire.js";
import type {
  HeldWorkspaceLock,
  WorkspaceLease,
  WorkspaceLockOptions,
  WorkspaceRecoveryLockOptions,
} from "./types.js";

/** Running a callback under a held lock, and what a lock lost meanwhile says. */

export async function runHeld<T>(
  held: HeldWorkspaceLock,
  fn: (lease: WorkspaceLease) => T | Promise<T>,
): Promise<T> {
  let result: T;
  try {
    result = await fn(held);
  } catch (error) {
    // Kept only when the callback let the retention error itself through: a caught, replaced or
    // swallowed retention releases the lock, so a lock is never kept by accident.
    if (held.retention !== null && error === held.retention) throw error;
    try {
      held.release();
    } catch (releaseError) {
      // A lost lock outweighs the callback's failure: another process may be changing the workspace. The
      // loss is reported, carrying that failure (details.callbackError). Any other release failure (the
      // lock is still held, or unknown) leaves the callback's failure as the one the caller sees.
      if (isSagaError(releaseError) && releaseError.code === "LOCK_OWNERSHIP_LOST")
        throw lostWithCallbackError(releaseError, error);
    }
    throw error;
  }
  held.release();
  return result;
}

/** What a failure reads as in a message: its code (or name) and the start of its message. */
export function failureSummary(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  const label =
    typeof code === "string"
      ? code
      : error instanceof Error
        ? error.name
        : typeof error === "string"
          ? ""
          : "error";
  const message = boundedText(error instanceof Error ? error.message : error, "", 300);
  return [label, message].filter(Boolean).join(": ") || "unknown failure";
}

/**
 * The workspace lock turned out lost (`lost`, from `release()`) after the work under it failed with
 * `callbackError`. The loss is the error (its cause stays file-lock's, as on success) and carries the
 * failure, so a caller learns both: that the work failed, and that the lock was not theirs any more.
 */
export function lostWithCallbackError(lost: SagaError, callbackError: unknown): SagaError {
  return new SagaError({
    ...lost.details,
    code: "LOCK_OWNERSHIP_LOST",
    ...(lost.cause === undefined ? {} : { cause: lost.cause }),
    callbackError,
    message: `${lost.message} The work done under the lock had failed as well (${failureSummary(callbackError)}); see details.callbackError.`,
  });
}

/**
 * Runs `fn` holding the workspace lock; releases it afterwards unless `fn` let a retention propagate. A lock
 * found lost at that release is LOCK_OWNERSHIP_LOST, whether `fn` succeeded or failed (its error is then
 * `details.callbackError`).
 */
export async function withWorkspaceLock<T>(
  options: WorkspaceLockOptions,
  fn: (lease: WorkspaceLease) => T | Promise<T>,
): Promise<T> {
  return runHeld(await acquireWorkspaceLock(options), fn);
}

/** `withWorkspaceLock` through a takeover of the exact dead owner `expectedOwner`, or of the torn lock `expectedTorn`. */
export async function withWorkspaceRecoveryLock<T>(
  options: WorkspaceRecoveryLockOptions,
  fn: (lease: WorkspaceLease) => T | Promise<T>,
): Promise<T> {
  return runHeld(await takeoverWorkspaceLock(options), fn);
}
