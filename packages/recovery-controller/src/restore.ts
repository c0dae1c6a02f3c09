import { randomUUID } from "node:crypto";
import { statSync } from "node:fs";
import { resolve } from "node:path";
import { createSystemIdentity, isLockError, type LockIdentity } from "@drydock/file-lock";
import {
  canonicalJson,
  domainDigest,
  isSagaError,
  PRE_MUTATION_PHASES,
  SagaError,
} from "@drydock/restore-saga";
import { defaultRestorePorts } from "./defaults.js";
import { recoveryError } from "./errors.js";
import { drydockCommandPrefix, shellQuote } from "./internal/command.js";
import { boundedText, validateFence, validateOperationId } from "./internal/fence.js";
import { type OwnerClaim, ownerMayBeAlive } from "./internal/liveness.js";
import { foreignLockHolder } from "./internal/lock-holder.js";
import type {
  RecoveryLease,
  RecoveryRollback,
  RecoverySagaStore,
  RecoveryWorkspaceLock,
  SagaView,
  TornWorkspaceLock,
  WorkspaceOwner,
} from "./ports.js";
import type {
  ActionVerdict,
  ArchiveWarning,
  RestoreActionName,
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
/**
 * Bases a `complete` may finish from: the restore applied every change and recorded the workspace as it
 * read it back (`workspace_applied` carries the poststate digest). What is left is only the `completed`
 * event, which restore-saga's `resume-already-completed` recovery writes.
 */
const COMPLETE_BASES = new Set(["workspace_applied", "session_committed"]);
const TERMINAL = new Set(["completed", "aborted", "rolled_back"]);
/** Why `release` never takes over a torn lock: it names no restore, and it may guard an unsettled one. */
function tornReleaseBlocker(prefix: string): string {
  return `the workspace lock file is torn by a power loss and names no restore, so release does not take it over: settle any unsettled restore of this workspace first (\`${prefix} restores list\`); if there is none, move the file away`;
}
const DEFAULT_ABORT_REASON = "Operator aborted the restore before any file changed";
/**
 * The order in which the preview recommends an action: the first eligible one. Abort, release and complete
 * exclude each other by phase; only complete and rollback can both be eligible (a restore stopped after
 * `workspace_applied`), and then completing keeps the result the user asked for.
 */
const RECOMMENDATION_ORDER: readonly RestoreActionName[] = ["abort", "release", "complete", "rollback"];

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
  /**
   * The machine as @drydock/file-lock sees it (boot id, boot time, process start times); default: the real
   * one. Its boot time decides that a `created` saga written before this boot has a dead initiator, and that
   * an unreadable lock file last changed before it was torn by a power loss.
   */
  identity?: LockIdentity;
  /** Mints rollback request ids (default: a random UUID). */
  newRequestId?: () => string;
  /**
   * Start of every command a message tells a person to run; default `drydockCommandPrefix(dataDir)` (the
   * absolute data directory), so a pasted line reads this installation, whatever DRYDOCK_DATA_DIR it has.
   */
  commandPrefix?: string;
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
  /**
   * Finishes a restore whose file work is done (base `workspace_applied`/`session_committed`): journals
   * recovery_required → recovery_started {resume-already-completed} → completed under the lock, releases
   * it, then archives. The workspace is not touched.
   */
  complete(operationId: string, fence: Partial<RestoreFence>): Promise<RestoreActionResult>;
}

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

/**
 * The error of a saga read made to reconcile a failed advance, keyed by the advance's error: kept for the
 * diagnostics of a failure inside the lock (seed 004's `checkpointRestoreRecoveryLoadError`).
 */
const reconcileLoadErrors = new WeakMap<object, unknown>();

/** The workspace lock as the controller acts on it: nothing, an owner, or a file torn by a power loss. */
type LockRead =
  | { kind: "absent" }
  | { kind: "owner"; owner: WorkspaceOwner }
  | { kind: "torn"; torn: TornWorkspaceLock; digest: string; path: string | null };

const ABSENT: LockRead = { kind: "absent" };

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
 * A phase is a durable lower bound on side effects: `mutation_started` may have changed files, so abort
 * refuses it and everything after (abort reaches up to `safety_ready`: see SAFE_ABORT_BASES); only rollback
 * (which restores the safety checkpoint) settles a restore that may have written part of its changes, and
 * complete finishes one that wrote all of them (`workspace_applied`).
 *
 * A saga whose retained lock is gone (removed by hand) is settled under a fresh lock for the same operation
 * (`expectedOwnerDigest: null`, "no owner"), and only once every process the saga recorded is proven dead;
 * the fresh acquisition refuses if any lock holds this or an overlapping workspace.
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
  const prefix = options.commandPrefix ?? drydockCommandPrefix(resolve(options.dataDir));
  /** A recovery that failed and kept the lock names the command that shows what is eligible now. */
  const withShowCommand = (error: unknown, operationId: string): unknown => {
    if (error instanceof Error && !Object.isFrozen(error))
      error.message = `${error.message} Run \`${prefix} restores show ${operationId}\` for it and its exact command.`;
    return error;
  };
  // The real store, lock and rollback helper unless a test (or the CLI) passes its own.
  const defaults =
    options.store && options.lock && options.rollback
      ? null
      : defaultRestorePorts({
          dataDir: options.dataDir,
          workspaceRoot,
          ...(options.isProcessAlive ? { isProcessAlive: options.isProcessAlive } : {}),
          ...(options.identity ? { identity: options.identity } : {}),
        });
  const store = options.store ?? defaults!.store;
  const lock = refusalsAsOwnerConflict(options.lock ?? defaults!.lock);
  const rollbackPort = options.rollback ?? defaults!.rollback;
  const seams = {
    ...(options.isProcessAlive ? { isProcessAlive: options.isProcessAlive } : {}),
    ...(options.identity ? { identity: options.identity } : {}),
  };
  const isProcessAlive = (pid: number) => ownerMayBeAlive({ pid }, seams);
  const isClaimAlive = (claim: OwnerClaim) => ownerMayBeAlive(claim, seams);
  const isOwnerAlive = options.isOwnerAlive ?? ((owner: WorkspaceOwner) => isClaimAlive(owner));
  const newRequestId = options.newRequestId ?? (() => `rb-${randomUUID()}`);
  let systemIdentity: LockIdentity | undefined;
  /** When this machine booted (wall-clock ms), as file-lock reads it; undefined where unknown. */
  const bootTimeMs = (): number | undefined => {
    if (options.identity) return options.identity.bootTimeMs();
    systemIdentity ??= createSystemIdentity();
    return systemIdentity.bootTimeMs();
  };

  /**
   * The active saga exactly at the fence. A saga archived (or archived and purged) since the preview is a
   * moved state (SAGA_CONFLICT, naming what it is now), not "not found": another paste of the same command,
   * or another action, settled it meanwhile. Only an id with no saga, archive or receipt stays NOT_FOUND.
   */
  async function loadExact(operationId: string, fence: RestoreFence): Promise<SagaView> {
    try {
      return await loadExactActive(operationId, fence);
    } catch (error) {
      if (!(isSagaError(error) && error.code === "NOT_FOUND")) throw error;
      throw await settledSince(operationId, fence, error);
    }
  }

  /** Why an action found no active saga: archived or purged since the preview (SAGA_CONFLICT), else `notFound`. */
  async function settledSince(operationId: string, fence: RestoreFence, notFound: unknown): Promise<unknown> {
    const details = { operationId, expectedSeq: fence.expectedSeq, expectedHash: fence.expectedHash };
    let archived: Awaited<ReturnType<typeof store.loadArchived>>;
    try {
      archived = await store.loadArchived(operationId);
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

  async function loadExactActive(operationId: string, fence: RestoreFence): Promise<SagaView> {
    const saga = await store.load(operationId);
    if (
      saga.operationId !== operationId ||
      saga.seq !== fence.expectedSeq ||
      saga.headHash !== fence.expectedHash
    ) {
      throw recoveryError(
        "SAGA_CONFLICT",
        `Restore ${operationId} changed since it was previewed (now seq ${saga.seq}); nothing was changed. Run \`${prefix} restores show ${operationId}\` again.`,
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
      if (base !== null && COMPLETE_BASES.has(base)) {
        const changed = saga.events.some((event) => event.phase === "mutation_started");
        return [
          `the restore reached ${base}: ${changed ? "files changed" : "nothing needed changing"} and every change is applied; complete it${changed ? " (or roll it back)" : ""}`,
        ];
      }
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
      return [`the restore is at ${base}, before any file changed; there is nothing to roll back`];
    }
    if (safetyOf(saga) === null) {
      return COMPLETE_BASES.has(base) && !saga.events.some((event) => event.phase === "mutation_started")
        ? [
            "the restore changed nothing (its plan had no changes, so it took no safety checkpoint); complete it",
          ]
        : ["the saga records no safety checkpoint to roll back to"];
    }
    return [];
  }

  function completeBlockers(saga: SagaView): string[] {
    const base = basePhaseOf(saga);
    if (saga.terminal) return [`the restore already ended (${saga.phase})`];
    if (base === null || !COMPLETE_BASES.has(base)) {
      const instead =
        base !== null && SAFE_ABORT_BASES.has(base)
          ? "abort it instead"
          : base !== null && ROLLBACK_BASES.has(base)
            ? "roll it back instead"
            : "inspect it";
      return [`the restore is at ${base}, before it had applied all of its changes; ${instead}`];
    }
    if (completionEvidence(saga) === null) {
      return ["the saga records no applied workspace state to complete from"];
    }
    return [];
  }

  function assertCompletable(saga: SagaView): { sessionCommitDigest: string; resultDigest: string } {
    const blockers = completeBlockers(saga);
    const evidence = completionEvidence(saga);
    if (blockers.length > 0 || evidence === null) {
      throw recoveryError(
        "ACTION_NOT_ALLOWED",
        `Restore ${saga.operationId} cannot be completed: ${blockers[0] ?? "no applied workspace state"}.`,
        { operationId: saga.operationId, phase: saga.phase, basePhase: basePhaseOf(saga) },
      );
    }
    return evidence;
  }

  /**
   * The evidence of `completed {resume-already-completed}`: the result digest exactly as the orchestrator
   * computes it (operation, target checkpoint, the poststate `workspace_applied` read back), and the commit
   * the completion rests on: `session_committed`'s digest when there is one, else the hash of the
   * `workspace_applied` event itself (drydock's restore has no session; that event is what proves the work).
   */
  function completionEvidence(saga: SagaView): { sessionCommitDigest: string; resultDigest: string } | null {
    const applied = saga.events.findLast((event) => event.phase === "workspace_applied");
    const session = saga.events.findLast((event) => event.phase === "session_committed");
    const checkpointId = saga.events[0]?.evidence.checkpointId;
    const poststateDigest = applied?.evidence.poststateDigest;
    if (applied === undefined || typeof checkpointId !== "string" || typeof poststateDigest !== "string") {
      return null;
    }
    const sessionDigest = session?.evidence.sessionCommitDigest;
    return {
      sessionCommitDigest: typeof sessionDigest === "string" ? sessionDigest : applied.hash,
      resultDigest: domainDigest("drydock-restore-result-v1", {
        operationId: saga.operationId,
        checkpointId,
        poststateDigest,
      }),
    };
  }

  /** Whether the saga's `created` event was written before this machine booted (its writer is gone). */
  function createdBeforeBoot(saga: SagaView): boolean {
    const boot = bootTimeMs();
    const at = Date.parse(saga.events[0]?.timestamp ?? "");
    return boot !== undefined && Number.isFinite(at) && at < boot;
  }

  /**
   * Why the initiator recorded in `created` may still run, or null when it is proven gone. `actorPid` is only
   * a pid, which another process may own after a reboot: a saga created before this boot has a dead
   * initiator whatever that pid names now (file-lock's boot-time rule, applied to the event's timestamp).
   */
  function initiatorBlocker(saga: SagaView): { blocker: string; actorPid: number | null } | null {
    const actorPid = saga.events[0]?.evidence.actorPid;
    if (typeof actorPid !== "number" || !Number.isSafeInteger(actorPid) || actorPid <= 0) {
      return { blocker: "the saga records no initiator pid", actorPid: null };
    }
    if (createdBeforeBoot(saga)) return null;
    return isProcessAlive(actorPid)
      ? { blocker: `the initiator (pid ${actorPid}) is still running`, actorPid }
      : null;
  }

  /**
   * Before acting on a saga whose lock is gone: every process it recorded must be proven dead, since no
   * lock tells any more who may still write. The lock owners of its `locked` and `recovery_started` events
   * (pid, host, boot id, start time: judged exactly as file-lock judges an owner), or, before any lock was
   * recorded, the initiator of `created`.
   */
  function stoppedBlockers(saga: SagaView): string[] {
    const blockers = new Set<string>();
    let owners = 0;
    for (const event of saga.events) {
      if (event.phase !== "locked" && event.phase !== "recovery_started") continue;
      const claim = event.evidence.workspaceLockOwner as OwnerClaim | undefined;
      if (typeof claim?.pid !== "number") continue;
      owners += 1;
      if (isClaimAlive(claim)) {
        blockers.add(
          `process ${claim.pid}, which ${event.phase === "locked" ? "ran the restore" : "ran a recovery of it"}, is still running`,
        );
      }
    }
    if (owners === 0) {
      const initiator = initiatorBlocker(saga);
      if (initiator !== null) blockers.add(initiator.blocker);
    }
    return [...blockers];
  }

  function assertStopped(saga: SagaView, torn: { digest: string } | null = null): void {
    const blockers = stoppedBlockers(saga);
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

  /** Where the workspace lock is, for messages; null when the port cannot say. */
  function lockPath(): string | null {
    try {
      return lock.path?.() ?? null;
    } catch {
      return null;
    }
  }

  /** Whether the lock port can read a torn lock and take it over (the default port can). */
  const tornTakeover =
    lock.inspectState !== undefined && lock.tornDigest !== undefined && lock.withTornRecovery !== undefined;

  /**
   * The workspace lock file exists but holds no owner this controller may act on: `unreadableLockError` for
   * the error of `inspect`, `unreadableStateError` for an `unreadable` state that is not torn. It is left
   * exactly as it is; this says what happened and what a person can do. A LOCK_IO (this process could not
   * read it) is not this.
   */
  function unreadableLockError(error: unknown, saga: SagaView | null, operationId: string): unknown {
    if (!isSagaError(error) || error.code !== "LOCK_FAILED") return error;
    const cause = (error as { cause?: unknown }).cause;
    if (isLockError(cause) && cause.code === "LOCK_IO") return error;
    const what = isLockError(cause)
      ? cause.code === "LOCK_UNREADABLE"
        ? "it could not be read"
        : "it is not a valid lock owner file"
      : "it is not a workspace lock of this workspace";
    const path = lockPath();
    let ctimeMs: number | null = null;
    if (path !== null) {
      try {
        ctimeMs = statSync(path).ctimeMs;
      } catch {
        // Gone or unreadable since: the words below still hold.
      }
    }
    return describeUnreadable(
      { what, path, ctimeMs, written: !isLockError(cause), cause: error },
      saga,
      operationId,
    );
  }

  function unreadableStateError(
    state: { path: string; reason: string; identity: { ctimeMs: number } | null },
    saga: SagaView | null,
    operationId: string,
  ): SagaError {
    const written = state.reason.includes("not a workspace lock");
    return describeUnreadable(
      {
        what: state.reason,
        path: state.path,
        ctimeMs: state.identity?.ctimeMs ?? null,
        written,
        cause: undefined,
      },
      saga,
      operationId,
    );
  }

  function describeUnreadable(
    file: { what: string; path: string | null; ctimeMs: number | null; written: boolean; cause: unknown },
    saga: SagaView | null,
    operationId: string,
  ): SagaError {
    const { path } = file;
    const boot = bootTimeMs();
    const beforeBoot = file.ctimeMs !== null && boot !== undefined && file.ctimeMs < boot;
    let changed = "";
    if (file.ctimeMs !== null && boot !== undefined) {
      changed = beforeBoot
        ? " It was last changed before this machine booted, so whoever wrote it is no longer running."
        : " It was last changed after this machine booted, so a process of this boot may have written it.";
    } else if (boot === undefined) {
      changed = " This machine's boot time is unknown, so whether a power loss tore it cannot be told.";
    }
    // Why it is not taken over, in the one case the controller could otherwise take it over.
    let why: string;
    if (!tornTakeover) why = " drydock cannot take over a lock whose owner it cannot read here.";
    else if (file.written)
      why =
        " It holds a complete lock file, written on purpose, so it is not a lock torn by a power loss and is never taken over.";
    else if (beforeBoot)
      why =
        " It is not a lock torn by a power loss either (drydock could not identify the file), so it is not taken over.";
    else
      why = ` drydock takes over an unreadable lock only when it was last changed before this machine booted (torn by a power loss); this one is not, so it is left to a person.`;
    const where = path ?? "of this workspace";
    const unsettled = saga !== null && !saga.terminal;
    const advice = unsettled
      ? ` Restore ${operationId} (${saga.phase}) is not settled and this lock may guard it: do not delete the lock.${why} To settle the restore: stop every drydock server and CLI using this data directory (so no restore can start), move the file aside and keep it${path === null ? "" : ` (mv ${shellQuote(path)} ${shellQuote(`${path}.unreadable`)})`}, then run \`${prefix} restores show ${operationId}\` again and paste the command it prints (--expected-owner-digest none): it takes a fresh lock only if nothing holds this or an overlapping workspace, and only once every process the restore recorded is proven dead.`
      : ` Restore ${operationId} ${saga === null ? "could not be read" : `has ended (${saga.phase})`}, so this lock does not guard it; if \`${prefix} restores list\` shows no unsettled restore of this workspace and none is running, move the file away.`;
    return new SagaError({
      code: "LOCK_FAILED",
      ...(file.cause === undefined ? {} : { cause: file.cause }),
      operationId,
      message: `The workspace lock ${where} is unreadable (${file.what}); it was left exactly as it is.${changed}${advice}`,
    });
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
  async function startRecovery(
    saga: SagaView,
    lease: RecoveryLease,
    recoveryAction: "abort-pre-intent" | "resume-already-completed",
    why: { reason: string; errorCode: string },
  ): Promise<SagaView> {
    let current = saga;
    if (current.phase !== "recovery_required")
      current = await advanceExact(current, "recovery_required", why);
    lease.assertOwned();
    return advanceExact(current, "recovery_started", {
      workspaceLockOwner: lease.owner,
      lockOwnerDigest: lock.ownerDigest(lease.owner),
      recoveryAction,
    });
  }

  /** The workspace lock if it is this operation's (or torn, or absent); another restore's lock is a conflict. */
  async function ownerOf(operationId: string, saga: SagaView | null): Promise<LockRead> {
    const read = await inspectLock(operationId, saga);
    if (read.kind === "owner" && read.owner.payload.transactionId !== operationId) {
      throw recoveryError(
        "OWNER_CONFLICT",
        `The workspace is locked by ${foreignLockHolder(read.owner, isOwnerAlive(read.owner), prefix)}.`,
        { operationId, ownerAlive: isOwnerAlive(read.owner) },
      );
    }
    return read;
  }

  /**
   * The lock file, read-only: nothing, an owner, or (with a port that can take it over) a file torn by a
   * power loss. Any other unreadable file is an error that says what happened and what a person can do.
   */
  async function inspectLock(operationId: string, saga: SagaView | null): Promise<LockRead> {
    if (tornTakeover) {
      let state: Awaited<ReturnType<NonNullable<RecoveryWorkspaceLock["inspectState"]>>>;
      try {
        state = await lock.inspectState!(operationId);
      } catch (error) {
        throw unreadableLockError(error, saga, operationId);
      }
      if (state.kind === "absent") return ABSENT;
      if (state.kind === "owner") return { kind: "owner", owner: state.owner };
      if (state.torn === null) throw unreadableStateError(state, saga, operationId);
      return {
        kind: "torn",
        torn: state.torn,
        digest: `torn:${lock.tornDigest!(state.torn)}`,
        path: state.path,
      };
    }
    try {
      const owner = await lock.inspect(operationId);
      return owner === null ? ABSENT : { kind: "owner", owner };
    } catch (error) {
      throw unreadableLockError(error, saga, operationId);
    }
  }

  function digestOf(read: LockRead): string | null {
    return read.kind === "owner" ? lock.ownerDigest(read.owner) : read.kind === "torn" ? read.digest : null;
  }

  /** The lock, only if it is exactly what the operator previewed (`expectedOwnerDigest`). */
  async function inspectBound(
    operationId: string,
    expectedOwnerDigest: string | null,
    saga: SagaView | null = null,
  ): Promise<LockRead> {
    const read = await ownerOf(operationId, saga);
    const actual = digestOf(read);
    if (actual === expectedOwnerDigest) return read;
    const what =
      read.kind === "absent"
        ? "disappeared"
        : read.kind === "torn"
          ? expectedOwnerDigest?.startsWith("torn:")
            ? "was replaced by another unreadable file"
            : "is now an unreadable file (torn by a power loss)"
          : "changed owner";
    throw recoveryError(
      "OWNER_CONFLICT",
      `The workspace lock of restore ${operationId} ${what} since it was previewed; nothing was changed. Preview again.`,
      { operationId, expectedOwnerDigest, actualOwnerDigest: actual },
    );
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
    // Secondary failures are kept for the diagnostics, never allowed to replace the error reported.
    let loadError: unknown =
      error !== null && typeof error === "object" ? reconcileLoadErrors.get(error) : undefined;
    try {
      observed = await store.load(operationId);
    } catch (reloadError) {
      observed = null;
      loadError = reloadError;
    }
    if (observed?.terminal) return observed;
    let journalError: unknown;
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
      throw attachDiagnostics(withShowCommand(retention, operationId), diagnostics);
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
    return guarded((fn) => lock.withRecovery(operationId, owner, fn), operationId, defaultCode, body);
  }

  /**
   * Runs `body` holding this operation's workspace lock: a takeover of the exact previewed dead owner, or of
   * the exact previewed torn lock file (`torn:sha256:…`, once every process the saga recorded is proven
   * dead), or, when the previewed fence says "no owner" (`null`) and none is on disk, a fresh lock taken only once every
   * process the saga recorded is proven dead (the acquisition refuses any lock on this or an overlapping
   * workspace). `refusal` words the answer when the lock port cannot take a fresh lock.
   */
  async function underLock(
    previewed: SagaView,
    fence: RestoreFence,
    defaultCode: string,
    refusal: string,
    body: (lease: RecoveryLease) => Promise<SagaView>,
  ): Promise<Settled> {
    const { operationId } = previewed;
    const read = await inspectBound(operationId, fence.expectedOwnerDigest, previewed);
    if (read.kind === "owner") return takeover(operationId, read.owner, defaultCode, body);
    if (read.kind === "torn") {
      // A torn lock names no owner: as for a missing one, every process the saga recorded must be gone.
      // restore-saga checks the very file again under the registry lock (CONFLICT if it changed).
      assertStopped(previewed, read);
      const withTorn = lock.withTornRecovery!.bind(lock);
      return guarded((fn) => withTorn(operationId, read.torn, fn), operationId, defaultCode, body);
    }
    const withFresh = lock.withFresh?.bind(lock);
    if (withFresh === undefined) {
      throw recoveryError("OWNER_CONFLICT", refusal, {
        operationId,
        expectedOwnerDigest: null,
        actualOwnerDigest: null,
      });
    }
    assertStopped(previewed);
    return guarded((fn) => withFresh(operationId, fn), operationId, defaultCode, body);
  }

  async function guarded(
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
        const saga = await retainFailure(error, lease, operationId, defaultCode);
        return { saga, reconciledFromError: true };
      }
    });
  }

  function result(
    action: RestoreActionName,
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
    const fence = validateFence(input, prefix);
    const reason = boundedText(input?.reason, DEFAULT_ABORT_REASON, 2048);
    const previewed = await loadExact(operationId, fence);
    assertAbortable(previewed);

    if (fence.expectedOwnerDigest === null && previewed.phase === "created") {
      // Lock-free path: the initiator wrote `created` and may be about to publish the lock. Only its proven
      // death makes "no owner" final: a dead process can never publish a lock later. A saga created before
      // this boot has a dead initiator whatever its pid names now.
      const initiator = initiatorBlocker(previewed);
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
      await inspectBound(operationId, null, previewed);
      const aborted = await advanceExact(previewed, "aborted", {
        recoveryAction: "abort-before-lock",
        reason,
      });
      return result("abort", { saga: aborted, reconciledFromError: false }, await archive(aborted));
    }

    const settled = await underLock(
      previewed,
      fence,
      "RESTORE_RECOVERY_ABORT_FAILED",
      `Restore ${operationId} has no workspace lock owner to take over; only a restore still in \`created\` can be aborted without one.`,
      async (lease) => {
        lease.assertOwned();
        let saga = await loadExact(operationId, fence);
        assertAbortable(saga);
        saga = await startRecovery(saga, lease, "abort-pre-intent", {
          reason: "The restore was interrupted before its durable intent",
          errorCode: "RESTORE_RECOVERY_ABORT_REQUESTED",
        });
        lease.assertOwned();
        saga = await advanceExact(saga, "aborted", { recoveryAction: "abort-pre-intent", reason });
        lease.assertOwned();
        return saga;
      },
    );
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
      // Archived already is this function's own case (below), not a moved state.
      const saga = await loadExactActive(operationId, fence);
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
    const fence = validateFence(fenceInput, prefix);
    const previewed = await readTerminal(operationId, fence);
    const view = { ...previewed.saga, basePhase: null, terminal: true, events: [] };
    if (previewed.alreadyArchived && fence.expectedOwnerDigest !== null) {
      // A release retried with its own fence (after a lost answer, say): the saga is archived at exactly
      // the fenced seq and hash and its lock is gone, so the earlier call did it all. Not "nothing changed".
      const now = await ownerOf(operationId, view);
      if (now.kind === "absent") {
        return result(
          "release",
          { saga: previewed.saga, reconciledFromError: false },
          { archived: true, alreadyArchived: true, warning: null },
        );
      }
    }
    const read = await inspectBound(operationId, fence.expectedOwnerDigest, view);
    if (read.kind === "torn") {
      throw recoveryError("ACTION_NOT_ALLOWED", `${tornReleaseBlocker(prefix)}. Nothing was changed.`, {
        operationId,
        phase: previewed.saga.phase,
      });
    }
    const owner = read.kind === "owner" ? read.owner : null;
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
          throw attachDiagnostics(withShowCommand(retention, operationId), {
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
    const fence = validateFence(fenceInput, prefix);
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
    // A retained lock someone removed by hand is replaced by a fresh one for this operation (underLock).
    const settled = await underLock(
      previewed,
      fence,
      "RESTORE_RECOVERY_ROLLBACK_FAILED",
      `Restore ${operationId} has no retained workspace lock, so a rollback cannot take it over; inspect the workspace before acting.`,
      async (lease) => {
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
      },
    );
    return result("rollback", settled, await archive(settled.saga));
  }

  async function complete(
    operationIdInput: string,
    fenceInput: Partial<RestoreFence>,
  ): Promise<RestoreActionResult> {
    const operationId = validateOperationId(operationIdInput);
    const fence = validateFence(fenceInput, prefix);
    const previewed = await loadExact(operationId, fence);
    assertCompletable(previewed);
    const settled = await underLock(
      previewed,
      fence,
      "RESTORE_RECOVERY_COMPLETE_FAILED",
      `Restore ${operationId} has no workspace lock owner to take over; inspect the workspace before acting.`,
      async (lease) => {
        lease.assertOwned();
        let saga = await loadExact(operationId, fence);
        const evidence = assertCompletable(saga);
        saga = await startRecovery(saga, lease, "resume-already-completed", {
          reason: "The restore stopped after applying every change, before it journaled completed",
          errorCode: "RESTORE_RECOVERY_COMPLETE_REQUESTED",
        });
        lease.assertOwned();
        saga = await advanceExact(saga, "completed", {
          recoveryAction: "resume-already-completed",
          ...evidence,
        });
        lease.assertOwned();
        return saga;
      },
    );
    // As abort and rollback: the lock is released before the archive rename.
    return result("complete", settled, await archive(settled.saga));
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
    const read = await inspectLock(operationId, saga);
    const raw = read.kind === "owner" ? read.owner : null;
    const torn = read.kind === "torn" ? read : null;
    // Another restore's lock on this workspace: nothing here may be settled until that one is.
    const foreign = raw !== null && raw.payload.transactionId !== operationId ? raw : null;
    const owner = foreign === null ? raw : null;
    const ownerDigest = owner === null ? null : lock.ownerDigest(owner);
    const alive = owner === null ? false : isOwnerAlive(owner);
    const ownerBlocker = foreign
      ? [`the workspace is locked by ${foreignLockHolder(foreign, isOwnerAlive(foreign), prefix)}`]
      : alive && owner
        ? [`the workspace lock owner (pid ${owner.pid}) is still running`]
        : [];

    /** What the lock says about acting now: nothing held → a fresh lock, once the saga's processes stopped. */
    const lockBlockers = (): string[] => {
      if (foreign || owner !== null) return ownerBlocker;
      // A torn lock is taken over as it is; it names no owner, so the saga's processes must be gone.
      if (torn !== null) return stoppedBlockers(saga);
      if (lock.withFresh === undefined) return ["no workspace lock owner to take over"];
      return stoppedBlockers(saga);
    };
    const abortVerdict = ((): ActionVerdict => {
      if (archived) return { eligible: false, blockers: ["the restore is archived"] };
      const blockers = abortBlockers(saga);
      if (blockers.length === 0) {
        if (!foreign && owner === null && torn === null && saga.phase === "created") {
          const initiator = initiatorBlocker(saga);
          if (initiator !== null) blockers.push(initiator.blocker);
        } else blockers.push(...lockBlockers());
      }
      return { eligible: blockers.length === 0, blockers };
    })();
    const releaseVerdict = ((): ActionVerdict => {
      const blockers: string[] = [];
      if (!saga.terminal) blockers.push(`the restore has not ended (${saga.phase})`);
      else if (foreign) blockers.push(...ownerBlocker);
      else if (torn !== null) blockers.push(tornReleaseBlocker(prefix));
      else if (archived && owner === null) blockers.push("already archived and unlocked: nothing to release");
      else blockers.push(...ownerBlocker);
      return { eligible: blockers.length === 0, blockers };
    })();
    const rollbackVerdict = await (async (): Promise<ActionVerdict> => {
      if (archived) return { eligible: false, blockers: ["the restore is archived"] };
      const blockers = rollbackBlockers(saga);
      if (blockers.length === 0) blockers.push(...lockBlockers());
      // What only the workspace can tell (something written since that the rollback would delete).
      if (blockers.length === 0) blockers.push(...((await rollbackPort.blockers?.(operationId)) ?? []));
      return { eligible: blockers.length === 0, blockers };
    })();
    const completeVerdict = ((): ActionVerdict => {
      if (archived) return { eligible: false, blockers: ["the restore is archived"] };
      const blockers = completeBlockers(saga);
      if (blockers.length === 0) blockers.push(...lockBlockers());
      return { eligible: blockers.length === 0, blockers };
    })();
    const actions = {
      abort: abortVerdict,
      release: releaseVerdict,
      complete: completeVerdict,
      rollback: rollbackVerdict,
    };

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
      tornLock:
        torn === null
          ? null
          : {
              digest: torn.digest,
              path: torn.path,
              size: torn.torn.size,
              changedAt: new Date(torn.torn.ctimeMs).toISOString(),
            },
      fence: {
        expectedSeq: saga.seq,
        expectedHash: saga.headHash,
        expectedOwnerDigest: ownerDigest ?? torn?.digest ?? null,
      },
      actions,
      recommended: RECOMMENDATION_ORDER.find((action) => actions[action].eligible) ?? null,
    };
  }

  return { workspaceRoot, preview, abort, release, rollback, complete };
}

/**
 * A takeover refused because the lock's owner still runs comes from restore-saga as WORKSPACE_LOCKED; the
 * controller's callers are told OWNER_CONFLICT with `ownerAlive: true`, as for every other live owner
 * (its words kept). Only a refusal of the takeover itself: an error from inside `fn` passes as it is.
 */
function refusalsAsOwnerConflict(port: RecoveryWorkspaceLock): RecoveryWorkspaceLock {
  return {
    ...port,
    async withRecovery(operationId, expectedOwner, fn) {
      let entered = false;
      try {
        return await port.withRecovery(operationId, expectedOwner, (lease) => {
          entered = true;
          return fn(lease);
        });
      } catch (error) {
        if (entered || !isSagaError(error) || error.code !== "WORKSPACE_LOCKED") throw error;
        throw recoveryError("OWNER_CONFLICT", error.message, { operationId, ownerAlive: true });
      }
    },
  };
}
