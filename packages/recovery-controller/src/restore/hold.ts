/**
 * Running an action's body while holding this operation's workspace lock (a takeover of the previewed dead
 * owner or torn file, or a fresh lock once every recorded process is proven dead), and what happens when the
 * body fails there: `recovery_required` is journaled and the lock kept, so only another fenced recovery can
 * continue.
 */
import { recoveryError } from "../errors.js";
import { boundedText } from "../internal/fence.js";
import type { RecoveryLease, SagaView, WorkspaceOwner } from "../ports.js";
import type { RestoreFence } from "../schema.js";
import { errorCodeOf, type RestoreContext, withShowCommand } from "./context.js";
import { inspectBound } from "./lock.js";
import { stoppedBlockers } from "./rules.js";
import { advanceExact, reconcileLoadErrors, type Settled } from "./saga.js";

/** Diagnostics attached to the lock's retention error when a recovery failed inside the lock. */
export interface RecoveryFailureDiagnostics {
  recoveryRequired: true;
  recoveryCause: unknown;
  recoveryOperationId: string;
  recoverySagaPhase: string | null;
  recoverySagaSeq: number | null;
  recoverySagaHeadHash: string | null;
  /**
   * The saga could not be read back after the failure (then the phase, seq and head hash above are null),
   * or, when the failure was a write, to reconcile its outcome. Absent when every read succeeded.
   */
  recoveryLoadError?: unknown;
  /** Journaling `recovery_required` for the failure failed itself. Absent when it succeeded or was not needed. */
  recoveryJournalError?: unknown;
}

/** Attaches what the operator needs to the error that reports a retained lock; never replaces it. */
export function attachDiagnostics(error: unknown, diagnostics: RecoveryFailureDiagnostics): unknown {
  if (error !== null && typeof error === "object" && !Object.isFrozen(error)) {
    for (const [key, value] of Object.entries(diagnostics)) {
      if ((error as Record<string, unknown>)[key] === undefined) {
        Object.defineProperty(error, key, { value, enumerable: true, configurable: true, writable: true });
      }
    }
  }
  return error;
}

/** Refuses (changing nothing) unless every process the saga recorded is proven dead. */
export function assertStopped(
  ctx: RestoreContext,
  saga: SagaView,
  torn: { digest: string } | null = null,
): void {
  const blockers = stoppedBlockers(saga, ctx.liveness);
  if (blockers.length === 0) return;
  const proven = blockers.some((blocker) => blocker.includes("still running"));
  const lockWords =
    torn === null ? "has no workspace lock" : "has a torn workspace lock, which names no owner";
  throw recoveryError(
    proven ? "OWNER_CONFLICT" : "ACTION_NOT_ALLOWED",
    `Restore ${saga.operationId} ${lockWords}, and ${blockers.join("; ")}; nothing was changed. ${proven ? "Wait for it to finish or stop it first, then preview again." : "No process can be proven stopped."}`,
    {
      operationId: saga.operationId,
      phase: saga.phase,
      ...(proven ? { ownerAlive: true } : {}),
      expectedOwnerDigest: torn?.digest ?? null,
      actualOwnerDigest: torn?.digest ?? null,
    },
  );
}

/**
 * Something failed while holding the taken-over lock. If the saga is terminal anyway (a lost write that
 * landed), that is success. Otherwise journal `recovery_required` and keep the lock (this process as its
 * owner, dead once it exits) so only another fenced recovery can continue.
 */
export async function retainFailure(
  ctx: RestoreContext,
  error: unknown,
  lease: RecoveryLease,
  operationId: string,
  defaultCode: string,
): Promise<SagaView> {
  let observed: SagaView | null = null;
  // Secondary failures are kept for the diagnostics, never allowed to replace the error reported.
  let loadError: unknown =
    error !== null && typeof error === "object" ? reconcileLoadErrors.get(error) : undefined;
  try {
    observed = await ctx.store.load(operationId);
  } catch (reloadError) {
    observed = null;
    loadError = reloadError;
  }
  if (observed?.terminal) return observed;
  let journalError: unknown;
  if (observed !== null && observed.phase !== "recovery_required") {
    try {
      observed = await advanceExact(ctx, observed, "recovery_required", {
        reason: boundedText(
          error instanceof Error ? error.message : undefined,
          "Restore recovery failed and needs another attempt",
          2048,
        ),
        errorCode: boundedText(errorCodeOf(error), defaultCode, 128),
      });
    } catch (failedJournal) {
      // The retained lock and the saga's current phase still tell the next recovery where to start.
      journalError = failedJournal;
      if (loadError === undefined && failedJournal !== null && typeof failedJournal === "object")
        loadError = reconcileLoadErrors.get(failedJournal);
    }
  }
  const diagnostics: RecoveryFailureDiagnostics = {
    recoveryRequired: true,
    recoveryCause: error,
    recoveryOperationId: operationId,
    recoverySagaPhase: observed?.phase ?? null,
    recoverySagaSeq: observed?.seq ?? null,
    recoverySagaHeadHash: observed?.headHash ?? null,
    ...(loadError === undefined ? {} : { recoveryLoadError: loadError }),
    ...(journalError === undefined ? {} : { recoveryJournalError: journalError }),
  };
  try {
    lease.retainForRecovery(
      boundedText(
        `${errorCodeOf(error) ?? defaultCode}: ${error instanceof Error ? error.message : "outcome unknown"}`,
        "Restore recovery outcome is unknown",
        512,
      ),
    );
  } catch (retention) {
    throw attachDiagnostics(withShowCommand(ctx, retention, operationId), diagnostics);
  }
  // retainForRecovery always throws; reaching here means the lock port broke its contract.
  throw attachDiagnostics(error, diagnostics);
}

async function guarded(
  ctx: RestoreContext,
  hold: (fn: (lease: RecoveryLease) => Promise<Settled>) => Promise<Settled>,
  operationId: string,
  defaultCode: string,
  body: (lease: RecoveryLease) => Promise<SagaView>,
): Promise<Settled> {
  return hold(async (lease) => {
    try {
      const saga = await body(lease);
      return { saga, reconciledFromError: false };
    } catch (error) {
      const saga = await retainFailure(ctx, error, lease, operationId, defaultCode);
      return { saga, reconciledFromError: true };
    }
  });
}

function takeover(
  ctx: RestoreContext,
  operationId: string,
  owner: WorkspaceOwner,
  defaultCode: string,
  body: (lease: RecoveryLease) => Promise<SagaView>,
): Promise<Settled> {
  return guarded(ctx, (fn) => ctx.lock.withRecovery(operationId, owner, fn), operationId, defaultCode, body);
}

/**
 * Runs `body` holding this operation's workspace lock: a takeover of the exact previewed dead owner, or of
 * the exact previewed torn lock file (`torn:sha256:…`, once every process the saga recorded is proven
 * dead), or, when the previewed fence says "no owner" (`null`) and none is on disk, a fresh lock taken only once every
 * process the saga recorded is proven dead (the acquisition refuses any lock on this or an overlapping
 * workspace). `refusal` words the answer when the lock port cannot take a fresh lock.
 */
export async function underLock(
  ctx: RestoreContext,
  previewed: SagaView,
  fence: RestoreFence,
  defaultCode: string,
  refusal: string,
  body: (lease: RecoveryLease) => Promise<SagaView>,
): Promise<Settled> {
  const { operationId } = previewed;
  const { lock } = ctx;
  const read = await inspectBound(ctx, operationId, fence.expectedOwnerDigest, previewed);
  if (read.kind === "owner") return takeover(ctx, operationId, read.owner, defaultCode, body);
  if (read.kind === "torn") {
    // A torn lock names no owner: as for a missing one, every process the saga recorded must be gone.
    // restore-saga checks the very file again under the registry lock (CONFLICT if it changed).
    assertStopped(ctx, previewed, read);
    const withTorn = lock.withTornRecovery!.bind(lock);
    return guarded(ctx, (fn) => withTorn(operationId, read.torn, fn), operationId, defaultCode, body);
  }
  const withFresh = lock.withFresh?.bind(lock);
  if (withFresh === undefined) {
    throw recoveryError("OWNER_CONFLICT", refusal, {
      operationId,
      expectedOwnerDigest: null,
      actualOwnerDigest: null,
    });
  }
  assertStopped(ctx, previewed);
  return guarded(ctx, (fn) => withFresh(operationId, fn), operationId, defaultCode, body);
}
