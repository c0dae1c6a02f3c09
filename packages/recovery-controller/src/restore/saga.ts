/**
 * The controller's saga reads and writes: exact loads against a fence, the compare-and-set advance that
 * reconciles a write which may have landed, archiving, and the result an action answers.
 */
import { canonicalJson, isSagaError, type Phase } from "@drydock/restore-saga";
import { recoveryError } from "../errors.js";
import { boundedText } from "../internal/fence.js";
import type { RecoveryLease, SagaView } from "../ports.js";
import type { ArchiveWarning, RestoreActionName, RestoreActionResult, RestoreFence } from "../schema.js";
import { errorCodeOf, type RestoreContext } from "./context.js";
import { assertTerminal, TERMINAL } from "./rules.js";

/** A saga an action settled, and whether it was reconciled from an error (a lost write that landed). */
export interface Settled {
  saga: { operationId: string; phase: string; seq: number; headHash: string };
  reconciledFromError: boolean;
  alreadyArchived?: boolean;
}

/** What archiving a settled saga did: filed, filed before, or a warning (the saga is settled anyway). */
export interface Filed {
  archived: boolean;
  alreadyArchived: boolean;
  warning: ArchiveWarning | null;
}

/**
 * The error of a saga read made to reconcile a failed advance, keyed by the advance's error: kept for the
 * diagnostics of a failure inside the lock (seed 004's `checkpointRestoreRecoveryLoadError`).
 */
export const reconcileLoadErrors = new WeakMap<object, unknown>();

/**
 * The active saga exactly at the fence. A saga archived (or archived and purged) since the preview is a
 * moved state (SAGA_CONFLICT, naming what it is now), not "not found": another paste of the same command,
 * or another action, settled it meanwhile. Only an id with no saga, archive or receipt stays NOT_FOUND.
 */
export async function loadExact(
  ctx: RestoreContext,
  operationId: string,
  fence: RestoreFence,
): Promise<SagaView> {
  try {
    return await loadExactActive(ctx, operationId, fence);
  } catch (error) {
    if (!(isSagaError(error) && error.code === "NOT_FOUND")) throw error;
    throw await settledSince(ctx, operationId, fence, error);
  }
}

/** Why an action found no active saga: archived or purged since the preview (SAGA_CONFLICT), else `notFound`. */
async function settledSince(
  ctx: RestoreContext,
  operationId: string,
  fence: RestoreFence,
  notFound: unknown,
): Promise<unknown> {
  const { prefix } = ctx;
  const details = { operationId, expectedSeq: fence.expectedSeq, expectedHash: fence.expectedHash };
  let archived: Awaited<ReturnType<typeof ctx.store.loadArchived>>;
  try {
    archived = await ctx.store.loadArchived(operationId);
  } catch (error) {
    if (isSagaError(error) && error.code === "NOT_FOUND" && /purged/.test(error.message)) {
      return recoveryError(
        "SAGA_CONFLICT",
        `Restore ${operationId} was settled, archived and purged since it was previewed (only its receipt is left); nothing was changed. Run \`${prefix} restores list\` to see what is still open.`,
        details,
      );
    }
    return notFound;
  }
  return recoveryError(
    "SAGA_CONFLICT",
    `Restore ${operationId} was settled and archived since it was previewed (now ${archived.phase}, seq ${archived.seq}: by another paste of this command, or another action); nothing was changed. Run \`${prefix} restores show ${operationId}\` to see it.`,
    { ...details, actualSeq: archived.seq, actualHash: archived.headHash, phase: archived.phase },
  );
}

export async function loadExactActive(
  ctx: RestoreContext,
  operationId: string,
  fence: RestoreFence,
): Promise<SagaView> {
  const saga = await ctx.store.load(operationId);
  if (
    saga.operationId !== operationId ||
    saga.seq !== fence.expectedSeq ||
    saga.headHash !== fence.expectedHash
  ) {
    throw recoveryError(
      "SAGA_CONFLICT",
      `Restore ${operationId} changed since it was previewed (now seq ${saga.seq}); nothing was changed. Run \`${ctx.prefix} restores show ${operationId}\` again.`,
      {
        operationId,
        expectedSeq: fence.expectedSeq,
        expectedHash: fence.expectedHash,
        actualSeq: saga.seq,
        actualHash: saga.headHash,
      },
    );
  }
  return saga;
}

/**
 * CAS by (seq, headHash). Event publication and HEAD replacement are separate renames, so a failed write
 * may have landed: reload and accept only the exact successor we meant (seq + 1, same phase, chained to
 * our head, same evidence). Never a blind retry.
 */
export async function advanceExact(
  ctx: RestoreContext,
  saga: SagaView,
  phase: Phase,
  evidence: Record<string, unknown>,
): Promise<SagaView> {
  try {
    return await ctx.store.advance(saga.operationId, {
      expectedSeq: saga.seq,
      expectedHash: saga.headHash,
      phase,
      evidence,
    });
  } catch (error) {
    let observed: SagaView | null = null;
    try {
      observed = await ctx.store.load(saga.operationId);
    } catch (loadError) {
      observed = null;
      if (error !== null && typeof error === "object") reconcileLoadErrors.set(error, loadError);
    }
    const latest = observed?.events.at(-1);
    if (
      observed !== null &&
      observed.seq === saga.seq + 1 &&
      observed.phase === phase &&
      latest?.prevHash === saga.headHash &&
      canonicalJson(latest.evidence) === canonicalJson(evidence)
    ) {
      return observed;
    }
    throw error;
  }
}

/**
 * Journals the start of a recovery attempt under `lease`: `recovery_required` first unless the saga is
 * already there (the transition table allows `recovery_started` only after it), then `recovery_started`
 * naming the lease's owner and the action.
 */
export async function startRecovery(
  ctx: RestoreContext,
  saga: SagaView,
  lease: RecoveryLease,
  recoveryAction: "abort-pre-intent" | "resume-already-completed",
  why: { reason: string; errorCode: string },
): Promise<SagaView> {
  let current = saga;
  if (current.phase !== "recovery_required")
    current = await advanceExact(ctx, current, "recovery_required", why);
  lease.assertOwned();
  return advanceExact(ctx, current, "recovery_started", {
    workspaceLockOwner: lease.owner,
    lockOwnerDigest: ctx.lock.ownerDigest(lease.owner),
    recoveryAction,
  });
}

function archiveWarning(error: unknown): ArchiveWarning {
  const commitState = (error as { commitState?: unknown } | null)?.commitState;
  return {
    code: boundedText(errorCodeOf(error), "RESTORE_SAGA_ARCHIVE_PENDING", 128),
    message: boundedText(
      error instanceof Error ? error.message : undefined,
      "The restore saga is settled but its archive is pending",
      512,
    ),
    commitState: typeof commitState === "string" ? boundedText(commitState, "unknown", 128) : null,
  };
}

export async function archive(
  ctx: RestoreContext,
  saga: { operationId: string; seq: number; headHash: string },
): Promise<Filed> {
  try {
    const result = await ctx.store.archiveTerminal(saga.operationId, {
      expectedSeq: saga.seq,
      expectedHash: saga.headHash,
    });
    return { archived: true, alreadyArchived: result.alreadyArchived === true, warning: null };
  } catch (error) {
    // The saga is settled; only its filing failed. Never turn a finished recovery into a false failure.
    return { archived: false, alreadyArchived: false, warning: archiveWarning(error) };
  }
}

/** The exact terminal saga, active or already archived (archiveTerminal doubles as an exact read). */
export async function readTerminal(
  ctx: RestoreContext,
  operationId: string,
  fence: RestoreFence,
): Promise<{
  saga: { operationId: string; phase: string; seq: number; headHash: string };
  alreadyArchived: boolean;
}> {
  try {
    // Archived already is this function's own case (below), not a moved state.
    const saga = await loadExactActive(ctx, operationId, fence);
    assertTerminal(saga);
    return { saga, alreadyArchived: false };
  } catch (error) {
    if (!(isSagaError(error) && error.code === "NOT_FOUND")) throw error;
    const archived = await ctx.store.archiveTerminal(operationId, {
      expectedSeq: fence.expectedSeq,
      expectedHash: fence.expectedHash,
    });
    const saga = { operationId, phase: archived.phase, seq: archived.seq, headHash: archived.headHash };
    assertTerminal({ ...saga, terminal: TERMINAL.has(archived.phase) });
    return { saga, alreadyArchived: archived.alreadyArchived === true };
  }
}

export function result(action: RestoreActionName, settled: Settled, filed: Filed): RestoreActionResult {
  return {
    ok: true,
    action,
    operationId: settled.saga.operationId,
    phase: settled.saga.phase,
    seq: settled.saga.seq,
    headHash: settled.saga.headHash,
    reconciledFromError: settled.reconciledFromError,
    ...filed,
  };
}
