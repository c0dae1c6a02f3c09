import { randomUUID } from "node:crypto";
import { canonicalJson, isSagaError, PRE_MUTATION_PHASES } from "@drydock/restore-saga";
import { defaultRestorePorts } from "./defaults.js";
import { recoveryError } from "./errors.js";
import { boundedText, validateFence, validateOperationId } from "./internal/fence.js";
import { ownerMayBeAlive } from "./internal/liveness.js";
import type {
  RecoveryLease,
  RecoveryRollback,
  RecoverySagaStore,
  RecoveryWorkspaceLock,
  SagaView,
  WorkspaceOwner,
} from "./ports.js";
import type {
  ActionVerdict,
  ArchiveWarning,
  RestoreActionResult,
  RestoreFence,
  RestorePreview,
} from "./schema.js";

/**
 * Bases an abort may settle: every phase before `mutation_started`. The phase is a durable lower bound on
 * side effects (the orchestrator journals `mutation_started` before it touches a file), so from these the
 * workspace is provably untouched. Seed 004 stops at `locked` because its `prepared`/`intent_committed`
 * may stand for a durable session intent outside the workspace; drydock's restore has no such session,
 * and refusing here would leave a restore killed at `intent_committed` or `safety_ready` with no way out.
 */
const SAFE_ABORT_BASES: ReadonlySet<string> = PRE_MUTATION_PHASES;
/**
 * Bases a rollback may start from: the restore may have changed files (mutation_started, workspace_applied,
 * session_committed) or a previous rollback cycle stopped part-way. The safety checkpoint was taken before
 * the first change, so restoring it is correct from any of them, and repeating it is idempotent.
 */
const ROLLBACK_BASES = new Set([
  "mutation_started",
  "workspace_applied",
  "rollback_prepared",
  "rollback_started",
  "workspace_rolled_back",
]);
const TERMINAL = new Set(["completed", "aborted", "rolled_back"]);
const DEFAULT_ABORT_REASON = "Operator aborted the restore before any file changed";

export interface RestoreRecoveryControllerOptions {
  /** The drydock data directory (sagas under `restore-sagas`, locks under `locks`). */
  dataDir: string;
  /** The workspace whose restore sagas this controller settles. */
  workspaceRoot: string;
  store?: RecoverySagaStore;
  lock?: RecoveryWorkspaceLock;
  rollback?: RecoveryRollback;
  /**
   * Liveness probe like `process.kill(pid, 0)` (return true = alive, false or throw ESRCH = dead). Used for
   * the `created` event's initiator (a lock-free abort must prove it dead), for the preview, and passed to
   * the default workspace lock, whose takeover refuses a live owner.
   */
  isProcessAlive?: (pid: number) => boolean;
  /** Liveness of a lock owner, for the preview only; the takeover itself is judged by @drydock/file-lock. */
  isOwnerAlive?: (owner: WorkspaceOwner) => boolean;
  /** Mints rollback request ids (default: a random UUID). */
  newRequestId?: () => string;
}

export interface AbortInput extends Partial<RestoreFence> {
  reason?: string;
}

export interface RestoreRecoveryController {
  readonly workspaceRoot: string;
  preview(operationId: string): Promise<RestorePreview>;
  abort(operationId: string, input: AbortInput): Promise<RestoreActionResult>;
  release(operationId: string, fence: Partial<RestoreFence>): Promise<RestoreActionResult>;
  rollback(operationId: string, fence: Partial<RestoreFence>): Promise<RestoreActionResult>;
}

/** Diagnostics attached to the lock's retention error when a recovery failed inside the lock. */
export interface RecoveryFailureDiagnostics {
  recoveryRequired: true;
  recoveryCause: unknown;
  recoveryOperationId: string;
  recoverySagaPhase: string | null;
  recoverySagaSeq: number | null;
  recoverySagaHeadHash: string | null;
}

interface Settled {
  saga: { operationId: string; phase: string; seq: number; headHash: string };
  reconciledFromError: boolean;
  alreadyArchived?: boolean;
}

function basePhaseOf(saga: SagaView): string | null {
  return saga.basePhase;
}

function errorCodeOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : undefined;
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

/** Attaches what the operator needs to the error that reports a retained lock; never replaces it. */
function attachDiagnostics(error: unknown, diagnostics: RecoveryFailureDiagnostics): unknown {
  if (error !== null && typeof error === "object" && !Object.isFrozen(error)) {
    for (const [key, value] of Object.entries(diagnostics)) {
      if ((error as Record<string, unknown>)[key] === undefined) {
        Object.defineProperty(error, key, { value, enumerable: true, configurable: true, writable: true });
      }
    }
  }
  return error;
}

/**
 * Settles interrupted checkpoint restores, and only against the exact state an operator previewed.
 *
 * Lock order: a saga store call takes short internal locks and returns; the controller never holds one
 * while taking the workspace lock. Inside a workspace lock every store call follows workspace → saga order,
 * as the orchestrator's do, so the two can never deadlock.
 *
 * A phase is a durable lower bound on side effects: `prepared`/`intent_committed` may already have a
 * durable intent, and `mutation_started` may have changed files, so abort refuses them; only rollback
 * (which restores the safety checkpoint) settles a restore that may have written.
 */
export function createRestoreRecoveryController(
  options: RestoreRecoveryControllerOptions,
): RestoreRecoveryController {
  if (!options || typeof options !== "object") {
    throw recoveryError("INVALID_ARGUMENT", "Restore recovery options must be an object");
  }
  if (typeof options.dataDir !== "string" || options.dataDir.length === 0) {
    throw recoveryError("INVALID_ARGUMENT", "Restore recovery needs the drydock dataDir");
  }
  if (typeof options.workspaceRoot !== "string" || options.workspaceRoot.length === 0) {
    throw recoveryError("INVALID_ARGUMENT", "Restore recovery needs a workspaceRoot");
  }
  const { workspaceRoot } = options;
  // The real store, lock and rollback helper unless a test (or the CLI) passes its own.
  const defaults =
    options.store && options.lock && options.rollback
      ? null
      : defaultRestorePorts({
          dataDir: options.dataDir,
          workspaceRoot,
          ...(options.isProcessAlive ? { isProcessAlive: options.isProcessAlive } : {}),
        });
  const store = options.store ?? defaults!.store;
  const lock = options.lock ?? defaults!.lock;
  const rollbackPort = options.rollback ?? defaults!.rollback;
  const probe = options.isProcessAlive;
  const isProcessAlive = (pid: number) => ownerMayBeAlive({ pid }, probe ? { isProcessAlive: probe } : {});
  const isOwnerAlive =
    options.isOwnerAlive ??
    ((owner: WorkspaceOwner) => ownerMayBeAlive(owner, probe ? { isProcessAlive: probe } : {}));
  const newRequestId = options.newRequestId ?? (() => `rb-${randomUUID()}`);

  async function loadExact(operationId: string, fence: RestoreFence): Promise<SagaView> {
    const saga = await store.load(operationId);
    if (
      saga.operationId !== operationId ||
      saga.seq !== fence.expectedSeq ||
      saga.headHash !== fence.expectedHash
    ) {
      throw recoveryError(
        "SAGA_CONFLICT",
        `Restore ${operationId} changed since it was previewed (now seq ${saga.seq}); nothing was changed. Run \`drydock restores show ${operationId}\` again.`,
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

  function abortBlockers(saga: SagaView): string[] {
    const base = basePhaseOf(saga);
    if (saga.terminal) return [`the restore already ended (${saga.phase})`];
    if (base === null || !SAFE_ABORT_BASES.has(base)) {
      return [`the restore reached ${base}: files may have changed; roll it back instead`];
    }
    return [];
  }

  function assertAbortable(saga: SagaView): void {
    const blockers = abortBlockers(saga);
    if (blockers.length > 0) {
      throw recoveryError(
        "ACTION_NOT_ALLOWED",
        `Restore ${saga.operationId} can only be aborted before its first file change (up to safety_ready): ${blockers[0]}.`,
        { operationId: saga.operationId, phase: saga.phase, basePhase: basePhaseOf(saga) },
      );
    }
  }

  function assertTerminal(saga: {
    operationId: string;
    phase: string;
    terminal: boolean;
    basePhase?: string | null;
  }): void {
    if (!saga.terminal || !TERMINAL.has(saga.phase)) {
      throw recoveryError(
        "ACTION_NOT_ALLOWED",
        `Only a finished restore (completed, aborted or rolled_back) can be released; ${saga.operationId} is ${saga.phase}.`,
        { operationId: saga.operationId, phase: saga.phase, basePhase: saga.basePhase ?? null },
      );
    }
  }

  function safetyOf(saga: SagaView): { safetyCheckpointId: string; safetyManifestDigest: string } | null {
    const event = saga.events.find((candidate) => candidate.phase === "safety_ready");
    const id = event?.evidence.safetyCheckpointId;
    const digest = event?.evidence.safetyManifestDigest;
    return typeof id === "string" && typeof digest === "string"
      ? { safetyCheckpointId: id, safetyManifestDigest: digest }
      : null;
  }

  function rollbackBlockers(saga: SagaView): string[] {
    const base = basePhaseOf(saga);
    if (saga.terminal) return [`the restore already ended (${saga.phase})`];
    if (base === null || !ROLLBACK_BASES.has(base)) {
      return [`the restore stopped at ${base}, before any file changed; there is nothing to roll back`];
    }
    if (safetyOf(saga) === null) return ["the saga records no safety checkpoint to roll back to"];
    return [];
  }

  function assertRollbackable(saga: SagaView): { safetyCheckpointId: string; safetyManifestDigest: string } {
    const blockers = rollbackBlockers(saga);
    const safety = safetyOf(saga);
    if (blockers.length > 0 || safety === null) {
      throw recoveryError(
        "ACTION_NOT_ALLOWED",
        `Restore ${saga.operationId} cannot be rolled back: ${blockers[0] ?? "no safety checkpoint"}.`,
        { operationId: saga.operationId, phase: saga.phase, basePhase: basePhaseOf(saga) },
      );
    }
    return safety;
  }

  /**
   * CAS by (seq, headHash). Event publication and HEAD replacement are separate renames, so a failed write
   * may have landed: reload and accept only the exact successor we meant (seq + 1, same phase, chained to
   * our head, same evidence). Never a blind retry.
   */
  async function advanceExact(
    saga: SagaView,
    phase: string,
    evidence: Record<string, unknown>,
  ): Promise<SagaView> {
    try {
      return await store.advance(saga.operationId, {
        expectedSeq: saga.seq,
        expectedHash: saga.headHash,
        phase,
        evidence,
      });
    } catch (error) {
      let observed: SagaView | null = null;
      try {
        observed = await store.load(saga.operationId);
      } catch {
        observed = null;
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

  /** The workspace lock's owner if it belongs to this operation; another restore's lock is a conflict. */
  async function ownerOf(operationId: string): Promise<WorkspaceOwner | null> {
    const owner = await lock.inspect(operationId);
    if (owner !== null && owner.payload.transactionId !== operationId) {
      throw recoveryError(
        "OWNER_CONFLICT",
        `The workspace is locked by another restore (${owner.payload.transactionId}); settle that one first.`,
        { operationId, ownerAlive: isOwnerAlive(owner) },
      );
    }
    return owner;
  }

  async function inspectBound(
    operationId: string,
    expectedOwnerDigest: string | null,
  ): Promise<WorkspaceOwner | null> {
    const owner = await ownerOf(operationId);
    if (owner === null) {
      if (expectedOwnerDigest !== null) {
        throw recoveryError(
          "OWNER_CONFLICT",
          `The workspace lock of restore ${operationId} disappeared since it was previewed; nothing was changed. Preview again.`,
          { operationId, expectedOwnerDigest, actualOwnerDigest: null },
        );
      }
      return null;
    }
    const actual = lock.ownerDigest(owner);
    if (actual !== expectedOwnerDigest) {
      throw recoveryError(
        "OWNER_CONFLICT",
        `The workspace lock of restore ${operationId} changed owner since it was previewed; nothing was changed. Preview again.`,
        { operationId, expectedOwnerDigest, actualOwnerDigest: actual },
      );
    }
    return owner;
  }

  async function archive(saga: {
    operationId: string;
    seq: number;
    headHash: string;
  }): Promise<{ archived: boolean; alreadyArchived: boolean; warning: ArchiveWarning | null }> {
    try {
      const result = await store.archiveTerminal(saga.operationId, {
        expectedSeq: saga.seq,
        expectedHash: saga.headHash,
      });
      return { archived: true, alreadyArchived: result.alreadyArchived === true, warning: null };
    } catch (error) {
      // The saga is settled; only its filing failed. Never turn a finished recovery into a false failure.
      return { archived: false, alreadyArchived: false, warning: archiveWarning(error) };
    }
  }

  /**
   * Something failed while holding the taken-over lock. If the saga is terminal anyway (a lost write that
   * landed), that is success. Otherwise journal `recovery_required` and keep the lock (this process as its
   * owner, dead once it exits) so only another fenced recovery can continue.
   */
  async function retainFailure(
    error: unknown,
    lease: RecoveryLease,
    operationId: string,
    defaultCode: string,
  ): Promise<SagaView> {
    let observed: SagaView | null = null;
    try {
      observed = await store.load(operationId);
    } catch {
      observed = null;
    }
    if (observed?.terminal) return observed;
    if (observed !== null && observed.phase !== "recovery_required") {
      try {
        observed = await advanceExact(observed, "recovery_required", {
          reason: boundedText(
            error instanceof Error ? error.message : undefined,
            "Restore recovery failed and needs another attempt",
            2048,
          ),
          errorCode: boundedText(errorCodeOf(error), defaultCode, 128),
        });
      } catch {
        // The retained lock and the saga's current phase still tell the next recovery where to start.
      }
    }
    const diagnostics: RecoveryFailureDiagnostics = {
      recoveryRequired: true,
      recoveryCause: error,
      recoveryOperationId: operationId,
      recoverySagaPhase: observed?.phase ?? null,
      recoverySagaSeq: observed?.seq ?? null,
      recoverySagaHeadHash: observed?.headHash ?? null,
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
      throw attachDiagnostics(retention, diagnostics);
    }
    // retainForRecovery always throws; reaching here means the lock port broke its contract.
    throw attachDiagnostics(error, diagnostics);
  }

  async function takeover(
    operationId: string,
    owner: WorkspaceOwner,
    defaultCode: string,
    body: (lease: RecoveryLease) => Promise<SagaView>,
  ): Promise<Settled> {
    return lock.withRecovery(operationId, owner, async (lease) => {
      try {
        const saga = await body(lease);
        return { saga, reconciledFromError: false };
      } catch (error) {
        const saga = await retainFailure(error, lease, operationId, defaultCode);
        return { saga, reconciledFromError: true };
      }
    });
  }

  function result(
    action: "abort" | "release" | "rollback",
    settled: Settled,
    filed: { archived: boolean; alreadyArchived: boolean; warning: ArchiveWarning | null },
  ): RestoreActionResult {
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

  async function abort(operationIdInput: string, input: AbortInput): Promise<RestoreActionResult> {
    const operationId = validateOperationId(operationIdInput);
    const fence = validateFence(input);
    const reason = boundedText(input?.reason, DEFAULT_ABORT_REASON, 2048);
    const previewed = await loadExact(operationId, fence);
    assertAbortable(previewed);

    if (fence.expectedOwnerDigest === null && previewed.phase === "created") {
      // Lock-free path: the initiator wrote `created` and may be about to publish the lock. Only its proven
      // death makes "no owner" final: a dead process can never publish a lock later.
      const actorPid = previewed.events[0]?.evidence.actorPid;
      if (typeof actorPid !== "number" || !Number.isSafeInteger(actorPid) || actorPid <= 0) {
        throw recoveryError(
          "ACTION_NOT_ALLOWED",
          `Restore ${operationId} records no initiator pid, so a lock-free abort cannot prove it stopped.`,
          { operationId, phase: previewed.phase },
        );
      }
      if (isProcessAlive(actorPid)) {
        throw recoveryError(
          "OWNER_CONFLICT",
          `Restore ${operationId} was started by process ${actorPid}, which is still running; wait for it to finish or stop it first.`,
          { operationId, actorPid, ownerAlive: true },
        );
      }
      // Re-read absence right before the CAS; competing recoveries are serialised by the saga CAS itself.
      await inspectBound(operationId, null);
      const aborted = await advanceExact(previewed, "aborted", {
        recoveryAction: "abort-before-lock",
        reason,
      });
      return result("abort", { saga: aborted, reconciledFromError: false }, await archive(aborted));
    }

    const owner = await inspectBound(operationId, fence.expectedOwnerDigest);
    if (owner === null) {
      throw recoveryError(
        "OWNER_CONFLICT",
        `Restore ${operationId} has no workspace lock owner to take over; only a restore still in \`created\` can be aborted without one.`,
        { operationId, expectedOwnerDigest: null, actualOwnerDigest: null },
      );
    }
    const settled = await takeover(operationId, owner, "RESTORE_RECOVERY_ABORT_FAILED", async (lease) => {
      lease.assertOwned();
      let saga = await loadExact(operationId, fence);
      assertAbortable(saga);
      if (saga.phase !== "recovery_required") {
        saga = await advanceExact(saga, "recovery_required", {
          reason: "The restore was interrupted before its durable intent",
          errorCode: "RESTORE_RECOVERY_ABORT_REQUESTED",
        });
      }
      lease.assertOwned();
      saga = await advanceExact(saga, "recovery_started", {
        workspaceLockOwner: lease.owner,
        lockOwnerDigest: lock.ownerDigest(lease.owner),
        recoveryAction: "abort-pre-intent",
      });
      lease.assertOwned();
      saga = await advanceExact(saga, "aborted", { recoveryAction: "abort-pre-intent", reason });
      lease.assertOwned();
      return saga;
    });
    // Archive only after the lock is released: the archive rename must never race a lock holder.
    return result("abort", settled, await archive(settled.saga));
  }

  /** The exact terminal saga, active or already archived (archiveTerminal doubles as an exact read). */
  async function readTerminal(
    operationId: string,
    fence: RestoreFence,
  ): Promise<{
    saga: { operationId: string; phase: string; seq: number; headHash: string };
    alreadyArchived: boolean;
  }> {
    try {
      const saga = await loadExact(operationId, fence);
      assertTerminal(saga);
      return { saga, alreadyArchived: false };
    } catch (error) {
      if (!(isSagaError(error) && error.code === "NOT_FOUND")) throw error;
      const archived = await store.archiveTerminal(operationId, {
        expectedSeq: fence.expectedSeq,
        expectedHash: fence.expectedHash,
      });
      const saga = { operationId, phase: archived.phase, seq: archived.seq, headHash: archived.headHash };
      assertTerminal({ ...saga, terminal: TERMINAL.has(archived.phase) });
      return { saga, alreadyArchived: archived.alreadyArchived === true };
    }
  }

  async function release(
    operationIdInput: string,
    fenceInput: Partial<RestoreFence>,
  ): Promise<RestoreActionResult> {
    const operationId = validateOperationId(operationIdInput);
    const fence = validateFence(fenceInput);
    const previewed = await readTerminal(operationId, fence);
    const owner = await inspectBound(operationId, fence.expectedOwnerDigest);
    if (owner === null) {
      const filed = previewed.alreadyArchived
        ? { archived: true, alreadyArchived: true, warning: null }
        : await archive(previewed.saga);
      return result("release", { saga: previewed.saga, reconciledFromError: false }, filed);
    }
    let alreadyArchived = false;
    const settled = await lock.withRecovery(operationId, owner, async (lease) => {
      try {
        lease.assertOwned();
        const retained = await readTerminal(operationId, fence);
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
          throw attachDiagnostics(retention, {
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
      : await archive(settled.saga);
    return result("release", settled, filed);
  }

  async function rollback(
    operationIdInput: string,
    fenceInput: Partial<RestoreFence>,
  ): Promise<RestoreActionResult> {
    const operationId = validateOperationId(operationIdInput);
    const fence = validateFence(fenceInput);
    const previewed = await loadExact(operationId, fence);
    assertRollbackable(previewed);
    // Refused before the lock is taken over, so a refusal changes nothing (not even the saga's phase).
    const workspaceBlockers = (await rollbackPort.blockers?.(operationId)) ?? [];
    if (workspaceBlockers.length > 0) {
      throw recoveryError(
        "ACTION_NOT_ALLOWED",
        `Restore ${operationId} cannot be rolled back now: ${workspaceBlockers.join("; ")}. Nothing was changed.`,
        { operationId, phase: previewed.phase, basePhase: basePhaseOf(previewed) },
      );
    }
    const owner = await inspectBound(operationId, fence.expectedOwnerDigest);
    if (owner === null) {
      // Files change only under the lock, and a failed restore keeps it: a missing owner here means the
      // state is not what the saga says. Refuse rather than roll back a workspace nobody holds.
      throw recoveryError(
        "OWNER_CONFLICT",
        `Restore ${operationId} has no retained workspace lock, so a rollback cannot take it over; inspect the workspace before acting.`,
        { operationId, expectedOwnerDigest: null, actualOwnerDigest: null },
      );
    }
    const settled = await takeover(operationId, owner, "RESTORE_RECOVERY_ROLLBACK_FAILED", async (lease) => {
      lease.assertOwned();
      const saga = await loadExact(operationId, fence);
      assertRollbackable(saga);
      // The helper re-checks the fence, the base phase and the safety checkpoint's digest itself, journals
      // every step, and makes the workspace equal the safety checkpoint exactly (added files removed).
      const rolledBack = await rollbackPort.run({
        operationId,
        fence: { expectedSeq: saga.seq, expectedHash: saga.headHash },
        lease,
        recoveryRequestId: newRequestId(),
      });
      lease.assertOwned();
      return rolledBack;
    });
    return result("rollback", settled, await archive(settled.saga));
  }

  async function preview(operationIdInput: string): Promise<RestorePreview> {
    const operationId = validateOperationId(operationIdInput);
    let saga: SagaView;
    let archived = false;
    try {
      saga = await store.load(operationId);
    } catch (error) {
      if (!(isSagaError(error) && error.code === "NOT_FOUND")) throw error;
      saga = await store.loadArchived(operationId);
      archived = true;
    }
    const raw = await lock.inspect(operationId);
    // Another restore's lock on this workspace: nothing here may be settled until that one is.
    const foreign = raw !== null && raw.payload.transactionId !== operationId ? raw : null;
    const owner = foreign === null ? raw : null;
    const ownerDigest = owner === null ? null : lock.ownerDigest(owner);
    const alive = owner === null ? false : isOwnerAlive(owner);
    const ownerBlocker = foreign
      ? [`the workspace is locked by another restore (${foreign.payload.transactionId})`]
      : alive && owner
        ? [`the workspace lock owner (pid ${owner.pid}) is still running`]
        : [];

    const abortVerdict = ((): ActionVerdict => {
      if (archived) return { eligible: false, blockers: ["the restore is archived"] };
      const blockers = abortBlockers(saga);
      if (blockers.length === 0) {
        if (foreign) blockers.push(...ownerBlocker);
        else if (owner === null) {
          if (saga.phase !== "created") blockers.push("no workspace lock owner to take over");
          else {
            const actorPid = saga.events[0]?.evidence.actorPid;
            if (typeof actorPid !== "number") blockers.push("the saga records no initiator pid");
            else if (isProcessAlive(actorPid))
              blockers.push(`the initiator (pid ${actorPid}) is still running`);
          }
        } else blockers.push(...ownerBlocker);
      }
      return { eligible: blockers.length === 0, blockers };
    })();
    const releaseVerdict = ((): ActionVerdict => {
      const blockers: string[] = [];
      if (!saga.terminal) blockers.push(`the restore has not ended (${saga.phase})`);
      else if (foreign) blockers.push(...ownerBlocker);
      else if (archived && owner === null) blockers.push("already archived and unlocked: nothing to release");
      else blockers.push(...ownerBlocker);
      return { eligible: blockers.length === 0, blockers };
    })();
    const rollbackVerdict = await (async (): Promise<ActionVerdict> => {
      if (archived) return { eligible: false, blockers: ["the restore is archived"] };
      const blockers = rollbackBlockers(saga);
      if (blockers.length === 0) {
        if (foreign) blockers.push(...ownerBlocker);
        else if (owner === null) blockers.push("no retained workspace lock to take over");
        else blockers.push(...ownerBlocker);
      }
      // What only the workspace can tell (something written since that the rollback would delete).
      if (blockers.length === 0) blockers.push(...((await rollbackPort.blockers?.(operationId)) ?? []));
      return { eligible: blockers.length === 0, blockers };
    })();

    return {
      saga: {
        operationId,
        phase: saga.phase,
        basePhase: saga.basePhase,
        seq: saga.seq,
        headHash: saga.headHash,
        terminal: saga.terminal,
        archived,
        events: saga.events.map((event) => ({
          seq: event.seq,
          phase: event.phase,
          timestamp: event.timestamp,
        })),
      },
      owner:
        owner === null
          ? null
          : { digest: ownerDigest!, pid: owner.pid, alive, transactionId: owner.payload.transactionId },
      fence: { expectedSeq: saga.seq, expectedHash: saga.headHash, expectedOwnerDigest: ownerDigest },
      actions: { abort: abortVerdict, release: releaseVerdict, rollback: rollbackVerdict },
    };
  }

  return { workspaceRoot, preview, abort, release, rollback };
}
