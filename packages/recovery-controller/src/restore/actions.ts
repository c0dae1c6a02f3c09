/**
 * The four fenced restore actions. Each re-reads the saga and the lock exactly as previewed (the fence), asks
 * the rules again, and acts only then; a refusal changes nothing. Abort, complete and rollback run under
 * the workspace lock (`underLock`) and archive after the lock is released.
 */
import { recoveryError } from "../errors.js";
import { boundedText, validateFence, validateOperationId } from "../internal/fence.js";
import type { RestoreActionResult, RestoreFence } from "../schema.js";
import { errorCodeOf, type RestoreContext, withShowCommand } from "./context.js";
import { attachDiagnostics, underLock } from "./hold.js";
import { inspectBound, ownerOf } from "./lock.js";
import {
  assertAbortable,
  assertCompletable,
  assertRollbackable,
  initiatorBlocker,
  tornReleaseBlocker,
} from "./rules.js";
import { advanceExact, archive, loadExact, readTerminal, result, startRecovery } from "./saga.js";

const DEFAULT_ABORT_REASON = "Operator aborted the restore before any file changed";

export interface AbortInput extends Partial<RestoreFence> {
  reason?: string;
}

export async function abort(
  ctx: RestoreContext,
  operationIdInput: string,
  input: AbortInput,
): Promise<RestoreActionResult> {
  const operationId = validateOperationId(operationIdInput);
  const fence = validateFence(input, ctx.prefix);
  const reason = boundedText(input?.reason, DEFAULT_ABORT_REASON, 2048);
  const previewed = await loadExact(ctx, operationId, fence);
  assertAbortable(previewed);

  if (fence.expectedOwnerDigest === null && previewed.phase === "created") {
    // Lock-free path: the initiator wrote `created` and may be about to publish the lock. Only its proven
    // death makes "no owner" final: a dead process can never publish a lock later. A saga created before
    // this boot has a dead initiator whatever its pid names now.
    const initiator = initiatorBlocker(previewed, ctx.liveness);
    if (initiator !== null && initiator.actorPid === null) {
      throw recoveryError(
        "ACTION_NOT_ALLOWED",
        `Restore ${operationId} records no initiator pid, so a lock-free abort cannot prove it stopped.`,
        { operationId, phase: previewed.phase },
      );
    }
    if (initiator !== null && initiator.actorPid !== null) {
      throw recoveryError(
        "OWNER_CONFLICT",
        `Restore ${operationId} was started by process ${initiator.actorPid}, which is still running; wait for it to finish or stop it first.`,
        { operationId, actorPid: initiator.actorPid, ownerAlive: true },
      );
    }
    // Re-read absence right before the CAS; competing recoveries are serialised by the saga CAS itself.
    await inspectBound(ctx, operationId, null, previewed);
    const aborted = await advanceExact(ctx, previewed, "aborted", {
      recoveryAction: "abort-before-lock",
      reason,
    });
    return result("abort", { saga: aborted, reconciledFromError: false }, await archive(ctx, aborted));
  }

  const settled = await underLock(
    ctx,
    previewed,
    fence,
    "RESTORE_RECOVERY_ABORT_FAILED",
    `Restore ${operationId} has no workspace lock owner to take over; only a restore still in \`created\` can be aborted without one.`,
    async (lease) => {
      lease.assertOwned();
      let saga = await loadExact(ctx, operationId, fence);
      assertAbortable(saga);
      saga = await startRecovery(ctx, saga, lease, "abort-pre-intent", {
        reason: "The restore was interrupted before its durable intent",
        errorCode: "RESTORE_RECOVERY_ABORT_REQUESTED",
      });
      lease.assertOwned();
      saga = await advanceExact(ctx, saga, "aborted", { recoveryAction: "abort-pre-intent", reason });
      lease.assertOwned();
      return saga;
    },
  );
  // Archive only after the lock is released: the archive rename must never race a lock holder.
  return result("abort", settled, await archive(ctx, settled.saga));
}

export async function release(
  ctx: RestoreContext,
  operationIdInput: string,
  fenceInput: Partial<RestoreFence>,
): Promise<RestoreActionResult> {
  const operationId = validateOperationId(operationIdInput);
  const fence = validateFence(fenceInput, ctx.prefix);
  const previewed = await readTerminal(ctx, operationId, fence);
  const view = { ...previewed.saga, basePhase: null, terminal: true, events: [] };
  if (previewed.alreadyArchived && fence.expectedOwnerDigest !== null) {
    // A release retried with its own fence (after a lost answer, say): the saga is archived at exactly
    // the fenced seq and hash and its lock is gone, so the earlier call did it all. Not "nothing changed".
    const now = await ownerOf(ctx, operationId, view);
    if (now.kind === "absent") {
      return result(
        "release",
        { saga: previewed.saga, reconciledFromError: false },
        { archived: true, alreadyArchived: true, warning: null },
      );
    }
  }
  const read = await inspectBound(ctx, operationId, fence.expectedOwnerDigest, view);
  if (read.kind === "torn") {
    throw recoveryError("ACTION_NOT_ALLOWED", `${tornReleaseBlocker(ctx.prefix)}. Nothing was changed.`, {
      operationId,
      phase: previewed.saga.phase,
    });
  }
  const owner = read.kind === "owner" ? read.owner : null;
  if (owner === null) {
    const filed = previewed.alreadyArchived
      ? { archived: true, alreadyArchived: true, warning: null }
      : await archive(ctx, previewed.saga);
    return result("release", { saga: previewed.saga, reconciledFromError: false }, filed);
  }
  let alreadyArchived = false;
  const settled = await ctx.lock.withRecovery(operationId, owner, async (lease) => {
    try {
      lease.assertOwned();
      const retained = await readTerminal(ctx, operationId, fence);
      lease.assertOwned();
      alreadyArchived = retained.alreadyArchived;
      return { saga: retained.saga, reconciledFromError: false };
    } catch (error) {
      try {
        lease.retainForRecovery(
          boundedText(
            `${errorCodeOf(error) ?? "RESTORE_RELEASE_VERIFY_FAILED"}: ${error instanceof Error ? error.message : "terminal state unknown"}`,
            "Restore release could not verify the terminal saga",
            512,
          ),
        );
      } catch (retention) {
        throw attachDiagnostics(withShowCommand(ctx, retention, operationId), {
          recoveryRequired: true,
          recoveryCause: error,
          recoveryOperationId: operationId,
          recoverySagaPhase: null,
          recoverySagaSeq: null,
          recoverySagaHeadHash: null,
        });
      }
      throw error;
    }
  });
  const filed = alreadyArchived
    ? { archived: true, alreadyArchived: true, warning: null }
    : await archive(ctx, settled.saga);
  return result("release", settled, filed);
}

export async function rollback(
  ctx: RestoreContext,
  operationIdInput: string,
  fenceInput: Partial<RestoreFence>,
): Promise<RestoreActionResult> {
  const operationId = validateOperationId(operationIdInput);
  const fence = validateFence(fenceInput, ctx.prefix);
  const previewed = await loadExact(ctx, operationId, fence);
  assertRollbackable(previewed);
  // Refused before the lock is taken over, so a refusal changes nothing (not even the saga's phase).
  const workspaceBlockers = (await ctx.rollback.blockers?.(operationId)) ?? [];
  if (workspaceBlockers.length > 0) {
    throw recoveryError(
      "ACTION_NOT_ALLOWED",
      `Restore ${operationId} cannot be rolled back now: ${workspaceBlockers.join("; ")}. Nothing was changed.`,
      { operationId, phase: previewed.phase, basePhase: previewed.basePhase },
    );
  }
  // A retained lock someone removed by hand is replaced by a fresh one for this operation (underLock).
  const settled = await underLock(
    ctx,
    previewed,
    fence,
    "RESTORE_RECOVERY_ROLLBACK_FAILED",
    `Restore ${operationId} has no retained workspace lock, so a rollback cannot take it over; inspect the workspace before acting.`,
    async (lease) => {
      lease.assertOwned();
      const saga = await loadExact(ctx, operationId, fence);
      assertRollbackable(saga);
      // The helper re-checks the fence, the base phase and the safety checkpoint's digest itself, journals
      // every step, and makes the workspace equal the safety checkpoint exactly (added files removed).
      const rolledBack = await ctx.rollback.run({
        operationId,
        fence: { expectedSeq: saga.seq, expectedHash: saga.headHash },
        lease,
        recoveryRequestId: ctx.newRequestId(),
      });
      lease.assertOwned();
      return rolledBack;
    },
  );
  return result("rollback", settled, await archive(ctx, settled.saga));
}

export async function complete(
  ctx: RestoreContext,
  operationIdInput: string,
  fenceInput: Partial<RestoreFence>,
): Promise<RestoreActionResult> {
  const operationId = validateOperationId(operationIdInput);
  const fence = validateFence(fenceInput, ctx.prefix);
  const previewed = await loadExact(ctx, operationId, fence);
  assertCompletable(previewed);
  const settled = await underLock(
    ctx,
    previewed,
    fence,
    "RESTORE_RECOVERY_COMPLETE_FAILED",
    `Restore ${operationId} has no workspace lock owner to take over; inspect the workspace before acting.`,
    async (lease) => {
      lease.assertOwned();
      let saga = await loadExact(ctx, operationId, fence);
      const evidence = assertCompletable(saga);
      saga = await startRecovery(ctx, saga, lease, "resume-already-completed", {
        reason: "The restore stopped after applying every change, before it journaled completed",
        errorCode: "RESTORE_RECOVERY_COMPLETE_REQUESTED",
      });
      lease.assertOwned();
      saga = await advanceExact(ctx, saga, "completed", {
        recoveryAction: "resume-already-completed",
        ...evidence,
      });
      lease.assertOwned();
      return saga;
    },
  );
  // As abort and rollback: the lock is released before the archive rename.
  return result("complete", settled, await archive(ctx, settled.saga));
}
