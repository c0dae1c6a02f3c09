import { isSagaError, SagaError } from "../errors.js";
import type { CrashHook } from "../internal/crash.js";
import { boundedText } from "../internal/text.js";
import type { Phase } from "../schema.js";
import type { SagaState, SagaStore } from "../store/index.js";
import { type HeldWorkspaceLock, lostWithCallbackError } from "../workspace-lock/index.js";
import { archiveQuietly, step, toSagaError } from "./common.js";
import type { RestoreResult } from "./options.js";

/** How a restore ends: released and archived when it completed, else aborted or kept for recovery. */

export async function finish(
  store: SagaStore,
  saga: SagaState,
  held: HeldWorkspaceLock,
  targetCount: number,
  crash: CrashHook,
): Promise<RestoreResult> {
  try {
    held.release();
  } catch (releaseError) {
    if (isSagaError(releaseError) && releaseError.code === "LOCK_OWNERSHIP_LOST") {
      // Not ours to release any more: someone took the lock over (or removed it) while this restore held it.
      throw new SagaError({
        code: "RECOVERY_REQUIRED",
        operationId: saga.operationId,
        phase: saga.phase,
        workspaceLockRetained: false,
        cause: releaseError,
        message: `Restore ${saga.operationId} completed (its files are written), but when it released its workspace lock the lock was no longer its own (taken over by another owner, or removed): another process may have acted on this workspace meanwhile. Check the workspace, and its restores with the recovery tool.`,
      });
    }
    // The restore is complete, but whether the lock is gone is unknown: keep the saga unarchived so the
    // recovery tool shows it as a release candidate.
    throw new SagaError({
      code: "RECOVERY_REQUIRED",
      operationId: saga.operationId,
      phase: saga.phase,
      workspaceLockRetained: true,
      cause: releaseError,
      message: `Restore ${saga.operationId} completed, but its workspace lock could not be released. Release it with the recovery tool.`,
    });
  }
  crash.point("restore.after-release");
  const warning = await archiveQuietly(store, saga);
  crash.point("restore.after-archive");
  return {
    operationId: saga.operationId,
    phase: saga.phase,
    seq: saga.seq,
    headHash: saga.headHash,
    targetCount,
    archived: warning === null,
    warning,
  };
}

const PRE_INTENT: ReadonlySet<Phase> = new Set<Phase>(["created", "locked", "prepared"]);

/** The waits between the reads of a saga that failed with LOCK_FAILED when a failure is settled (null: last). */
const SETTLE_LOAD_RETRY_MS: readonly (number | null)[] = [20, 100, 400, null];

/**
 * Decides what a failure means. The saga is reloaded (which also settles a HEAD left behind): before the
 * intent nothing can have happened, so abort and release; at or after it, or when the saga cannot even
 * be read, journal recovery_required and keep the lock. A lock that is no longer this restore's (taken
 * over or removed) is never claimed as kept: RECOVERY_REQUIRED with `workspaceLockRetained: false`, its
 * cause the LOCK_OWNERSHIP_LOST that carries the failure as `callbackError`.
 */
export async function settleFailure(
  store: SagaStore,
  lastKnown: SagaState,
  held: HeldWorkspaceLock,
  failure: unknown,
): Promise<never> {
  const error = toSagaError(failure);
  let loadError: unknown;
  let observed: SagaState | null = null;
  // A saga that could not be read just now (LOCK_FAILED: busy, out of descriptors) is read again a few
  // times: only a saga read can be settled (aborted before its intent, recovery_required after it).
  for (const wait of SETTLE_LOAD_RETRY_MS) {
    try {
      observed = await store.load(lastKnown.operationId);
      break;
    } catch (readError) {
      loadError = readError;
      if (wait === null || !isSagaError(readError) || readError.code !== "LOCK_FAILED") break;
      await new Promise((done) => setTimeout(done, wait));
    }
  }

  if (observed && !observed.terminal && PRE_INTENT.has(observed.phase)) {
    try {
      const aborted = await step(store, observed, "aborted", {
        reason: boundedText(error.message, "The restore failed before its intent.", 2048),
        errorCode: boundedText(error.code, "WRITE_FAILED", 128),
      });
      held.release();
      await archiveQuietly(store, aborted);
      throw error;
    } catch (abortError) {
      if (abortError === error) throw error;
      // Could not settle as aborted: fall through and keep the lock for a fenced recovery.
      try {
        observed = await store.load(lastKnown.operationId);
      } catch (readError) {
        loadError = readError;
        observed = null;
      }
    }
  }

  let secondaryError: unknown;
  if (observed && !observed.terminal && observed.phase !== "recovery_required") {
    try {
      observed = await step(store, observed, "recovery_required", {
        reason: boundedText(error.message, "The restore failed after its intent.", 2048),
        errorCode: boundedText(error.code, "WRITE_FAILED", 128),
      });
    } catch (journalError) {
      secondaryError = journalError;
    }
  }
  // What every RECOVERY_REQUIRED below says of the saga as last read.
  const facts = {
    operationId: lastKnown.operationId,
    phase: observed?.phase ?? null,
    actualSeq: observed?.seq ?? null,
    actualHash: observed?.headHash ?? null,
    ...(secondaryError !== undefined
      ? { secondaryError }
      : observed === null && loadError !== undefined
        ? { secondaryError: loadError }
        : {}),
  };
  try {
    held.retainForRecovery(`${error.code}: ${error.message}`);
  } catch (retention) {
    if (retention !== held.retention) {
      // Not kept: the lock was no longer this restore's (LOCK_OWNERSHIP_LOST: taken over or removed), so
      // nothing is claimed. The loss is the cause, carrying the restore's own failure (callbackError).
      const lost =
        isSagaError(retention) && retention.code === "LOCK_OWNERSHIP_LOST"
          ? lostWithCallbackError(retention, error)
          : retention;
      throw new SagaError({
        ...facts,
        code: "RECOVERY_REQUIRED",
        cause: lost,
        workspaceLockRetained: false,
        message: `Restore ${lastKnown.operationId} failed (${error.code}: ${boundedText(error.message, "", 300)}), and its workspace lock was no longer its own when it meant to keep it (taken over by another owner, or removed): another process may be changing this workspace, so the lock was left as it is. Check the workspace, then settle the restore${observed ? ` (now ${observed.phase})` : ""} with the recovery tool.`,
      });
    }
    const kept = retention as SagaError;
    throw new SagaError({
      ...facts,
      code: "RECOVERY_REQUIRED",
      cause: error,
      workspaceLockRetained: true,
      ...(kept.details.retainedOwnerDigest ? { retainedOwnerDigest: kept.details.retainedOwnerDigest } : {}),
      ...(kept.details.retentionReason ? { retentionReason: kept.details.retentionReason } : {}),
      message: retainedMessage(lastKnown, observed, error, loadError),
    });
  }
  throw error;
}

/**
 * What a failed restore that keeps its lock says, by what is known of its saga: its phase unknown (the saga
 * could not be read), before its intent (nothing changed, but it could not be aborted), or after it.
 */
function retainedMessage(
  lastKnown: SagaState,
  observed: SagaState | null,
  error: SagaError,
  loadError: unknown,
): string {
  const id = lastKnown.operationId;
  const failed = `${error.code}: ${boundedText(error.message, "", 300)}`;
  if (observed === null) {
    const why = isSagaError(loadError)
      ? `${loadError.code}: ${loadError.message}`
      : (loadError as Error | undefined)?.message;
    return `Restore ${id} failed (${failed}), and its saga could not be read afterwards (${boundedText(why, "unknown error", 300)}), so its phase is unknown: it may have stopped before its intent (nothing changed) or after changing files (the last phase it wrote was ${lastKnown.phase}). The workspace lock is kept (failing closed); inspect the restore with the recovery tool (drydock restores show ${id}) and settle it as it offers.`;
  }
  if (observed.basePhase !== null && PRE_INTENT.has(observed.basePhase)) {
    return `Restore ${id} failed before its intent (${failed}), so nothing in the workspace was changed, but it could not be journaled as aborted. The workspace lock is kept; abort it with the recovery tool (drydock restores show ${id}).`;
  }
  return `Restore ${id} failed after its intent (${failed}). The workspace lock is kept; inspect it with the recovery tool and roll it back or release it.`;
}
