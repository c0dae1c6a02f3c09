import { SagaError } from "../errors.js";
import { PRE_MUTATION_PHASES } from "../phases.js";
import type { Phase } from "../schema.js";
import type { SagaState, SagaStore } from "../store/index.js";

/**
 * Base phases of a restore that may have changed files and has not ended: a workspace in one of them is
 * half-restored (or restored but unsettled) until its recovery runs.
 */
const UNSETTLED_BASES: ReadonlySet<Phase> = new Set<Phase>([
  "mutation_started",
  "workspace_applied",
  "session_committed",
  "rollback_prepared",
  "rollback_started",
  "workspace_rolled_back",
  "session_rollback_committed",
]);

/** A saga of a workspace that may have left its files half-restored, or that cannot be told apart from one. */
export interface UnsettledRestore {
  operationId: string;
  /**
   * `unsettled`: stopped past `mutation_started` without settling; `busy`: could not be read just now (a
   * writer holds it); `unverifiable`: cannot be verified (CORRUPT, unreadable), so whether it changed files
   * is unknown.
   */
  kind: "unsettled" | "busy" | "unverifiable";
  /** Its base phase when known. */
  phase: Phase | null;
  /** The store's word for why it could not be read (a SagaError code or a listing status), else null. */
  reason: string | null;
}

/**
 * The first saga of this workspace (all pages; `exceptOperationId` left out) that may have left files
 * half-restored: unsettled past `mutation_started`, or unreadable, since whether it changed files is then
 * unknown. Sagas that changed nothing yet (`created` … `safety_ready`), finished ones not yet archived and
 * orphans of a killed create do not count. The rule a new restore applies when the workspace lock is gone;
 * the bot server applies it before it retires a deleted bot's workspace.
 */
export async function findUnsettledRestore(
  store: SagaStore,
  options: {
    exceptOperationId?: string;
    /**
     * Count every saga that has not ended, also one stopped before its first change (`created` …
     * `safety_ready`, which an abort settles): for a caller about to retire the workspace, not restore it.
     */
    anyActive?: boolean;
  } = {},
): Promise<UnsettledRestore | null> {
  const { exceptOperationId, anyActive = false } = options;
  let after: string | undefined;
  for (;;) {
    const page = await store.listPending(after === undefined ? {} : { after });
    const unsettled = page.items.find(
      (item) =>
        item.operationId !== exceptOperationId &&
        (anyActive || (item.basePhase !== null && UNSETTLED_BASES.has(item.basePhase))),
    );
    if (unsettled) {
      return {
        operationId: unsettled.operationId,
        kind: "unsettled",
        phase: unsettled.basePhase ?? unsettled.phase,
        reason: null,
      };
    }
    const unknown = page.diagnostics.find(
      (diagnostic) =>
        diagnostic.operationId !== exceptOperationId &&
        diagnostic.status !== "orphan_unpublished" &&
        diagnostic.status !== "terminal_unarchived",
    );
    if (unknown) {
      const busy = unknown.status === "busy" || unknown.status === "head_unsettled";
      return {
        operationId: unknown.operationId,
        kind: busy ? "busy" : "unverifiable",
        phase: null,
        reason: busy ? unknown.status : (unknown.code ?? unknown.status),
      };
    }
    if (page.nextCursor === null) return null;
    after = page.nextCursor;
  }
}

/**
 * The workspace lock is the first guard against restoring over a stopped restore: a dead restore keeps it,
 * and acquiring it answers RECOVERY_REQUIRED. This is the second, for when the lock is gone (removed by
 * hand, lost with a disk): under the lock just taken, no other saga of this workspace may stand unsettled
 * past `mutation_started`, nor be unreadable (whether it changed files is then unknown).
 */
export async function assertNoUnsettledRestore(store: SagaStore, operationId: string): Promise<void> {
  const found = await findUnsettledRestore(store, { exceptOperationId: operationId });
  if (found === null) return;
  if (found.kind === "unsettled") {
    throw new SagaError({
      code: "RECOVERY_REQUIRED",
      ownerOperationId: found.operationId,
      workspaceLockRetained: false,
      message: `Restore ${found.operationId} of this workspace stopped at ${found.phase} without settling, and its workspace lock is gone, so files of this workspace may be half-restored. Nothing was changed. Settle it first with the recovery tool (abort, complete or roll it back).`,
    });
  }
  throw new SagaError({
    code: found.kind === "busy" ? "LOCK_FAILED" : "RECOVERY_REQUIRED",
    ownerOperationId: found.operationId,
    workspaceLockRetained: false,
    message:
      found.kind === "busy"
        ? `Restore saga ${found.operationId} of this workspace could not be read just now (${found.reason}), so whether it left files half-restored is unknown. Nothing was changed; retry shortly.`
        : `Restore saga ${found.operationId} of this workspace cannot be verified (${found.reason}), so whether it left files half-restored is unknown. Nothing was changed. Inspect it with the recovery tool before restoring this workspace again.`,
  });
}

/** True when recovery may abort this saga (the workspace is provably untouched). */
export function isAbortable(saga: SagaState): boolean {
  return !saga.terminal && saga.basePhase !== null && PRE_MUTATION_PHASES.has(saga.basePhase);
}
