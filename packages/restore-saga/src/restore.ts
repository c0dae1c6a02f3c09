import { randomUUID } from "node:crypto";
import { basename, isAbsolute, join, resolve } from "node:path";
import { type FileOps, type LockOptions, nodeFileOps } from "@drydock/file-lock";
import {
  assertDataDirOutside,
  type CheckpointStore,
  canonicalWorkspaceRoot,
  openCheckpointStore,
} from "./checkpoints.js";
import { errnoOf, isSagaError, SagaError } from "./errors.js";
import {
  applyPlan,
  NAME_MAX_BYTES,
  overlongName,
  planFromScan,
  prepareStaging,
  type RestorePlan,
  removeLeftTemps,
  restrictPlan,
  sweepStaging,
  touchedPaths,
  type VerifiedBlobs,
  verifyPaths,
  verifyPlanBlobs,
  verifyTree,
  writesFiles,
} from "./internal/apply.js";
import { domainDigest } from "./internal/canonical.js";
import { type CrashHook, noCrash } from "./internal/crash.js";
import { boundedText } from "./internal/text.js";
import { type ScannedEntry, scanTree } from "./internal/tree.js";
import { PRE_MUTATION_PHASES, ROLLBACK_BASE_PHASES } from "./phases.js";
import type { ManifestEntry, Phase } from "./schema.js";
import { openSagaStore, type SagaFence, type SagaState, type SagaStore } from "./store/index.js";
import {
  acquireWorkspaceLock,
  type HeldWorkspaceLock,
  lostWithCallbackError,
  type WorkspaceLease,
} from "./workspace-lock.js";

/**
 * Every named crash point of a restore, in the order a successful restore passes them. Points marked
 * "repeats" fire once per event / per change; a crash sweep names the k-th occurrence as `name#k`.
 */
export const RESTORE_CRASH_POINTS = [
  /** repeats: after the genesis HEAD of a new saga (only in create). */
  "saga.after-genesis-head",
  /** repeats: an event is on disk, HEAD still names its predecessor (rolled forward by the next load). */
  "saga.after-event-published",
  /** repeats: event and HEAD are both settled. */
  "saga.after-head-published",
  /** `created` is durable; no lock is held yet. Recovery: lock-free abort once the actor is dead. */
  "restore.after-created",
  /** The workspace lock is on disk; `locked` is not journaled yet. */
  "restore.after-lock-acquired",
  "restore.after-locked",
  "restore.after-prepared",
  /** The intent is durable: from here a failure needs recovery, never a silent abort. */
  "restore.after-intent-committed",
  /** Safety checkpoint: blobs stored, manifest not yet written. */
  "checkpoint.after-blobs",
  /** Safety checkpoint manifest written, `safety_ready` not yet journaled. */
  "checkpoint.after-manifest",
  "restore.after-safety-checkpoint",
  "restore.after-safety-ready",
  /** Files may change from here: recovery rolls back through the safety checkpoint. */
  "restore.after-mutation-started",
  /** repeats: one workspace change is in place. */
  "restore.after-entry-applied",
  "restore.after-workspace-applied",
  /** `completed` is durable; the lock is still held. Recovery: release. */
  "restore.after-completed",
  /** The lock is released; the saga is not archived yet. */
  "restore.after-release",
  /** After the archive rename of the saga directory. */
  "saga.after-archive-rename",
  "restore.after-archive",
  /** repeats (rollback only): one change of the rollback is in place. */
  "rollback.after-entry-applied",
] as const;

export type RestoreCrashPoint = (typeof RESTORE_CRASH_POINTS)[number];

export interface RestoreOptions {
  dataDir: string;
  workspaceRoot: string;
  checkpointId: string;
  /** Defaults to `restore-<uuid>`. */
  operationId?: string;
  /** Tests only: called at every point of RESTORE_CRASH_POINTS. */
  crash?: CrashHook;
  fs?: FileOps;
  now?: () => number;
  /** How long to wait for a running restore of this (or an overlapping) workspace, ms (default 5000). */
  lockWaitMs?: number;
  isProcessAlive?: (pid: number) => boolean;
  identity?: LockOptions["identity"];
  /**
   * Called once the workspace lock is held, before the restore records `locked`: the caller's last check
   * that this is still the workspace it means. The checkpoint is read, and the saga bound to the path,
   * before the lock can be taken, so a caller whose workspaces belong to something that can be deleted and
   * created again under the same path (a bot server's bot) checks here, under the lock that its deletion
   * also needs, that it was not. A reason (a string) refuses the restore before its intent, nothing changed:
   * the saga is aborted and archived, the lock released, and WORKSPACE_MISMATCH is thrown with that reason.
   */
  confirmWorkspace?: () => string | null | Promise<string | null>;
  /**
   * Flush checkpoint blobs and restored files (default true). `false` keeps every change atomic for a
   * crashed PROCESS (rename is atomic, the page cache survives a SIGKILL) but not durable across a power
   * loss: tests only. Saga events are always flushed.
   */
  durable?: boolean;
}

export interface ArchiveWarning {
  code: string;
  message: string;
  commitState: string | null;
}

export interface RestoreResult {
  operationId: string;
  phase: Phase;
  seq: number;
  headHash: string;
  /** Changes made to the workspace. */
  targetCount: number;
  archived: boolean;
  /** Set when the saga could not be archived (the restore itself succeeded). */
  warning: ArchiveWarning | null;
}

function invalid(message: string): SagaError {
  return new SagaError({ code: "INVALID_ARGUMENT", message });
}

function toSagaError(error: unknown, what: "restore" | "rollback" = "restore"): SagaError {
  if (isSagaError(error)) return error;
  const path = (error as NodeJS.ErrnoException | null)?.path;
  return new SagaError({
    code: "WRITE_FAILED",
    cause: error,
    message: `The ${what} failed on an unexpected error (${errnoOf(error) ?? (error as Error)?.name ?? "error"}${
      typeof path === "string" ? ` on ${path}` : ""
    }).`,
  });
}

async function step(
  store: SagaStore,
  saga: SagaState,
  phase: Phase,
  evidence: Record<string, unknown>,
): Promise<SagaState> {
  return store.advance(saga.operationId, {
    expectedSeq: saga.seq,
    expectedHash: saga.headHash,
    phase,
    evidence,
  });
}

async function archiveQuietly(store: SagaStore, saga: SagaState): Promise<ArchiveWarning | null> {
  try {
    await store.archiveTerminal(saga.operationId, { expectedSeq: saga.seq, expectedHash: saga.headHash });
    return null;
  } catch (error) {
    return {
      code: boundedText(isSagaError(error) ? error.code : null, "ARCHIVE_PENDING", 128),
      message: boundedText((error as Error)?.message, "The restore saga could not be archived yet.", 512),
      commitState: isSagaError(error) ? error.commitState : null,
    };
  }
}

function checkLayout(
  fs: FileOps,
  options: { dataDir: string; workspaceRoot: string },
): { dataDir: string; root: string } {
  if (typeof options.dataDir !== "string" || !isAbsolute(options.dataDir)) {
    throw invalid("A restore needs an absolute dataDir.");
  }
  const root = canonicalWorkspaceRoot(fs, options.workspaceRoot);
  assertDataDirOutside(fs, options.dataDir, root);
  return { dataDir: resolve(options.dataDir), root };
}

/**
 * Where a restore of this workspace stages its files: one directory per workspace (named like its saga
 * shard), so the apply, which holds that workspace's lock, may sweep what a dead apply left there.
 */
function stagingDirFor(dataDir: string, store: SagaStore): string {
  return join(dataDir, "restore-staging", basename(store.shardDir));
}

/**
 * Restores `checkpointId` into the workspace as a journaled saga:
 * created → locked → prepared → intent_committed → safety_ready → mutation_started → workspace_applied
 * → completed, then releases the lock and archives the saga (an archive failure is only a warning).
 *
 * On failure before the intent: `aborted`, the lock released, the saga archived, the error rethrown.
 * On failure after it: `recovery_required` is journaled and the lock is RETAINED; the error thrown is
 * RECOVERY_REQUIRED (`workspaceLockRetained: true`, the original failure as `cause`).
 */
export async function restoreCheckpoint(options: RestoreOptions): Promise<RestoreResult> {
  try {
    return await restore(options);
  } catch (error) {
    throw toSagaError(error);
  }
}

async function restore(options: RestoreOptions): Promise<RestoreResult> {
  const fs = options.fs ?? nodeFileOps;
  const crash = options.crash ?? noCrash;
  const now = options.now ?? Date.now;
  const { dataDir, root } = checkLayout(fs, options);
  const operationId = options.operationId ?? `restore-${randomUUID()}`;
  const durable = options.durable ?? true;
  const checkpoints = openCheckpointStore({ dataDir, fs, now, crash, durable });
  const target = checkpoints.readVerifiedManifest(options.checkpointId);
  if (target.manifest.workspaceRoot !== root) {
    throw invalid(
      `Checkpoint ${options.checkpointId} belongs to another workspace (${target.manifest.workspaceRoot}).`,
    );
  }
  const store = openSagaStore({
    stateDir: join(dataDir, "restore-sagas"),
    workspaceRoot: root,
    fs,
    now,
    crash,
  });

  let saga = await store.create(operationId, {
    kind: "checkpoint-restore",
    checkpointId: options.checkpointId,
    checkpointManifestDigest: target.manifestDigest,
    actorPid: process.pid,
  });
  crash.point("restore.after-created");

  let held: HeldWorkspaceLock;
  try {
    held = await acquireWorkspaceLock({
      dataDir,
      workspaceRoot: root,
      transactionId: operationId,
      fs,
      now,
      ...(options.lockWaitMs !== undefined ? { waitMs: options.lockWaitMs } : {}),
      ...(options.isProcessAlive ? { isProcessAlive: options.isProcessAlive } : {}),
      ...(options.identity ? { identity: options.identity } : {}),
    });
  } catch (lockError) {
    // Nothing happened yet: created → aborted, archived. If even that fails, the saga stays `created`
    // with this process as its actor; once this process is gone, a lock-free abort settles it.
    try {
      const aborted = await step(store, saga, "aborted", {
        reason: boundedText((lockError as Error)?.message, "The workspace lock could not be taken.", 2048),
        errorCode: boundedText(isSagaError(lockError) ? lockError.code : null, "LOCK_FAILED", 128),
      });
      await archiveQuietly(store, aborted);
    } catch {
      // The lock error is the one the caller must see.
    }
    throw toSagaError(lockError);
  }
  crash.point("restore.after-lock-acquired");

  let targetCount = 0;
  try {
    await assertNoUnsettledRestore(store, operationId);
    const refusal = options.confirmWorkspace ? await options.confirmWorkspace() : null;
    if (typeof refusal === "string") {
      throw new SagaError({
        code: "WORKSPACE_MISMATCH",
        operationId,
        message: `Restore ${operationId} was refused before it changed anything: ${refusal}`,
      });
    }
    held.assertOwned();
    saga = await step(store, saga, "locked", {
      workspaceLockOwner: held.owner,
      lockOwnerDigest: held.ownerDigest,
    });
    crash.point("restore.after-locked");

    // One scan of the workspace serves the plan and the safety checkpoint: it stores (and flushes) the
    // blobs of everything there now, and its manifest is written only if the restore goes on to change
    // the workspace. The pre-state the intent commits to is therefore exactly what the safety checkpoint
    // holds, with no second scan and no window between the two.
    let planned: { plan: RestorePlan; verified: VerifiedBlobs } | null = null;
    const targetEntries = new Map(target.manifest.entries.map((entry) => [entry.path, entry]));
    const captured = await checkpoints.captureWorkspace(root, {
      // A file the plan will change is one the rollback may need from the safety checkpoint: its stored
      // blob is compared with the bytes just read (and repaired) rather than trusted by name and size.
      verifyReused: (entry) => {
        const wanted = targetEntries.get(entry.path);
        return !(wanted?.type === "file" && wanted.sha256 === entry.sha256 && wanted.mode === entry.mode);
      },
      // While the safety blobs flush: plan from the scan and check every blob the plan will write.
      whileFlushing: (entries) => {
        const plan = planFromScan(entries, target.manifest.entries);
        planned = { plan, verified: verifyPlanBlobs(checkpoints, plan) };
      },
    });
    // captureWorkspace runs whileFlushing before it returns, so the plan exists.
    if (planned === null) throw new Error("captureWorkspace returned without planning");
    const { plan, verified } = planned as { plan: RestorePlan; verified: VerifiedBlobs };
    const overlong = overlongName(plan);
    if (overlong !== null) {
      throw new SagaError({
        code: "INVALID_ARGUMENT",
        operationId,
        message: `Checkpoint ${options.checkpointId} holds ${JSON.stringify(boundedText(overlong, "", 600))}, a name longer than ${NAME_MAX_BYTES} bytes, which no file system here can hold (it was checkpointed elsewhere). Nothing was restored or changed; restore another checkpoint.`,
      });
    }
    targetCount = plan.ops.length;
    // The staging directory (in the data directory) is made ready now, while a failure changes nothing
    // and aborts: a file in its way found after `mutation_started` left a restore that had changed nothing
    // needing recovery.
    if (writesFiles(plan)) prepareStaging(fs, stagingDirFor(dataDir, store), dataDir);
    saga = await step(store, saga, "prepared", { prestateDigest: plan.prestateDigest, targetCount });
    crash.point("restore.after-prepared");

    held.assertOwned();
    saga = await step(store, saga, "intent_committed", {
      intentCommitDigest: intentDigest({
        operationId,
        checkpointId: options.checkpointId,
        checkpointManifestDigest: target.manifestDigest,
        planDigest: plan.planDigest,
      }),
      authority: "operation",
    });
    crash.point("restore.after-intent-committed");

    let poststateDigest: string;
    if (targetCount === 0) {
      poststateDigest = verifyTree(fs, root, target.treeDigest);
      saga = await step(store, saga, "workspace_applied", { appliedCount: 0, poststateDigest });
    } else {
      const safety = checkpoints.commitCheckpoint(captured, { kind: "safety" });
      crash.point("restore.after-safety-checkpoint");
      // Read back what was stored: the manifest on disk must describe the planned pre-state.
      if (checkpoints.readVerifiedManifest(safety.checkpointId).treeDigest !== plan.prestateDigest) {
        throw new SagaError({
          code: "CORRUPT",
          operationId,
          message: `The safety checkpoint ${safety.checkpointId} does not describe the workspace as it was planned. Nothing was restored; check the data directory's disk.`,
        });
      }
      saga = await step(store, saga, "safety_ready", {
        safetyCheckpointId: safety.checkpointId,
        safetyManifestDigest: safety.manifestDigest,
        coverage: "full",
      });
      crash.point("restore.after-safety-ready");

      held.assertOwned();
      saga = await step(store, saga, "mutation_started", { targetCount, coverage: "full" });
      crash.point("restore.after-mutation-started");

      let applyPoststate: string | undefined;
      const applied = await applyPlan(
        {
          fs,
          root,
          stagingDir: stagingDirFor(dataDir, store),
          dataDir,
          checkpoints,
          durable,
          verified,
          beforeEach: () => held.assertOwned(),
          onApplied: () => crash.point("restore.after-entry-applied"),
          whileFlushing: () => {
            applyPoststate = verifyTree(fs, root, target.treeDigest);
          },
        },
        plan,
      );
      // applyPlan runs whileFlushing before it returns, so the re-scan has happened.
      if (applyPoststate === undefined) throw new Error("applyPlan returned without re-scanning");
      poststateDigest = applyPoststate;
      saga = await step(store, saga, "workspace_applied", { appliedCount: applied, poststateDigest });
    }
    crash.point("restore.after-workspace-applied");

    held.assertOwned();
    saga = await step(store, saga, "completed", {
      resultDigest: domainDigest("drydock-restore-result-v1", {
        operationId,
        checkpointId: options.checkpointId,
        poststateDigest,
      }),
    });
    crash.point("restore.after-completed");
  } catch (error) {
    return settleFailure(store, saga, held, error);
  }

  return finish(store, saga, held, targetCount, crash);
}

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
async function assertNoUnsettledRestore(store: SagaStore, operationId: string): Promise<void> {
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

async function finish(
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
async function settleFailure(
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

export interface RollbackOptions {
  dataDir: string;
  workspaceRoot: string;
  operationId: string;
  /** The exact saga head the caller decided on. */
  fence: SagaFence;
  /** A lease on the workspace for THIS operation (normally from a takeover of its dead owner). */
  lease: WorkspaceLease;
  /** Names this rollback cycle in its events (default a new uuid-based id). */
  recoveryRequestId?: string;
  crash?: CrashHook;
  fs?: FileOps;
  now?: () => number;
  /** See RestoreOptions.durable. */
  durable?: boolean;
}

/** What `intent_committed` commits to: this operation, its target checkpoint and the exact plan. */
function intentDigest(intent: {
  operationId: string;
  checkpointId: string;
  checkpointManifestDigest: string;
  planDigest: string;
}): string {
  return domainDigest("drydock-restore-intent-v1", intent);
}

/**
 * Rolls a restore that stopped after `mutation_started` back to its safety checkpoint, for exactly the
 * paths that restore's plan touched (files it added are removed, files it changed or removed come back):
 * recovery_required (if needed) → recovery_started → rollback_prepared → rollback_started →
 * workspace_rolled_back → rolled_back. Everything else in the workspace is left as it is, including what
 * was written after the restore stopped; only something written inside a directory the restore created
 * (which the rollback would have to delete) makes it refuse, with `CONFLICT` and nothing changed. The
 * touched paths are recomputed from the safety checkpoint and the target checkpoint and must give the very
 * plan the saga's intent committed to (`CORRUPT` otherwise). The caller holds the lease and, afterwards,
 * releases it and archives the saga. A failure leaves the saga where it stopped (a later rollback starts a
 * new cycle from recovery_required).
 */
export async function rollbackFromSafetyCheckpoint(options: RollbackOptions): Promise<SagaState> {
  try {
    return await rollback(options);
  } catch (error) {
    throw toSagaError(error, "rollback");
  }
}

async function rollback(options: RollbackOptions): Promise<SagaState> {
  const fs = options.fs ?? nodeFileOps;
  const crash = options.crash ?? noCrash;
  const now = options.now ?? Date.now;
  const { dataDir, root } = checkLayout(fs, options);
  const lease = options.lease;
  if (lease.owner.payload.transactionId !== options.operationId || lease.workspaceRoot !== root) {
    throw invalid("The lease must be this operation's lock on this workspace.");
  }
  const store = openSagaStore({
    stateDir: join(dataDir, "restore-sagas"),
    workspaceRoot: root,
    fs,
    now,
    crash,
  });
  const durable = options.durable ?? true;
  const checkpoints = openCheckpointStore({ dataDir, fs, now, crash, durable });

  lease.assertOwned();
  let saga = await store.load(options.operationId);
  if (saga.seq !== options.fence.expectedSeq || saga.headHash !== options.fence.expectedHash) {
    throw new SagaError({
      code: "CONFLICT",
      operationId: saga.operationId,
      expectedSeq: options.fence.expectedSeq,
      expectedHash: options.fence.expectedHash,
      actualSeq: saga.seq,
      actualHash: saga.headHash,
      message: `Restore saga ${saga.operationId} moved on since it was inspected (now seq ${saga.seq}, ${saga.phase}). Nothing was changed; inspect it again.`,
    });
  }
  if (saga.terminal || !saga.basePhase || !ROLLBACK_BASE_PHASES.has(saga.basePhase)) {
    throw new SagaError({
      code: "INVALID_TRANSITION",
      operationId: saga.operationId,
      phase: saga.phase,
      message: `Restore saga ${saga.operationId} is ${saga.phase} (base ${saga.basePhase}); only a restore stopped after mutation_started can be rolled back.`,
    });
  }
  const planned = planRollback(fs, root, saga, checkpoints, { removeTemps: true });
  const { plan, touched, safety, safetyCheckpointId, safetyManifestDigest, originalTargetCount } = planned;
  const blockers = blockerMessages(saga.operationId, planned);
  if (blockers.length > 0) {
    throw new SagaError({
      code: "CONFLICT",
      operationId: saga.operationId,
      message: `Nothing was changed: ${blockers.join("; and ")}.`,
    });
  }

  const recoveryRequestId = options.recoveryRequestId ?? `rollback-${randomUUID()}`;
  // What the interrupted apply staged is never promoted; remove it whether or not anything needs rolling back.
  sweepStaging(fs, stagingDirFor(dataDir, store));

  if (saga.phase !== "recovery_required") {
    saga = await step(store, saga, "recovery_required", {
      reason: "A rollback through the safety checkpoint was requested.",
      errorCode: "ROLLBACK_REQUESTED",
    });
  }
  lease.assertOwned();
  saga = await step(store, saga, "recovery_started", {
    workspaceLockOwner: lease.owner,
    lockOwnerDigest: lease.ownerDigest,
    recoveryAction: "rollback-partial-mutation",
    recoveryRequestId,
  });

  const verified = verifyPlanBlobs(checkpoints, plan);
  const binding = {
    recoveryRequestId,
    safetyCheckpointId,
    safetyManifestDigest,
    rollbackPlanIdentity: plan.planDigest,
    originalMutationTargetCount: originalTargetCount,
    targetCount: plan.ops.length,
  };
  saga = await step(store, saga, "rollback_prepared", binding);
  let rolledBackCount = 0;
  if (plan.ops.length > 0) {
    lease.assertOwned();
    saga = await step(store, saga, "rollback_started", binding);
    rolledBackCount = await applyPlan(
      {
        fs,
        root,
        stagingDir: stagingDirFor(dataDir, store),
        dataDir,
        checkpoints,
        durable,
        verified,
        beforeEach: () => lease.assertOwned(),
        onApplied: () => crash.point("rollback.after-entry-applied"),
      },
      plan,
    );
  }
  const poststateDigest = verifyPaths(fs, root, safety.manifest.entries, touched);
  saga = await step(store, saga, "workspace_rolled_back", {
    recoveryRequestId,
    rolledBackCount,
    poststateDigest,
  });
  lease.assertOwned();
  return step(store, saga, "rolled_back", {
    recoveryRequestId,
    recoveryAction: "rollback-partial-mutation",
    rollbackPlanIdentity: plan.planDigest,
    poststateDigest,
  });
}

/**
 * Read-only: why a rollback of `operationId` could not run now, in words for a person (empty when it
 * could). Checks what only the workspace can tell: the restore's touched paths (proven against its intent)
 * against what was written since it stopped. The phase, fence and lock are the recovery controller's to
 * check. Anything that cannot be read is itself a reason.
 */
export async function rollbackBlockers(options: {
  dataDir: string;
  workspaceRoot: string;
  operationId: string;
  fs?: FileOps;
}): Promise<string[]> {
  const fs = options.fs ?? nodeFileOps;
  try {
    const { dataDir, root } = checkLayout(fs, options);
    const store = openSagaStore({ stateDir: join(dataDir, "restore-sagas"), workspaceRoot: root, fs });
    const saga = await store.load(options.operationId);
    if (saga.terminal || !saga.basePhase || !ROLLBACK_BASE_PHASES.has(saga.basePhase)) return [];
    const checkpoints = openCheckpointStore({ dataDir, fs });
    return blockerMessages(
      saga.operationId,
      planRollback(fs, root, saga, checkpoints, { removeTemps: false }),
    );
  } catch (error) {
    return [`the rollback could not be planned: ${error instanceof Error ? error.message : String(error)}`];
  }
}

/**
 * The rollback of `saga` as it would run now: the restore's plan recomputed from the safety checkpoint
 * (the workspace as it was scanned) and the target, proven to be the plan its intent committed to, and the
 * part of "make the workspace equal the safety checkpoint" that touches only those paths. `outside` lists
 * what that part would have to delete or replace although the restore never touched it. Temps an apply
 * left beside the touched paths are no part of the workspace: they are left out of the plan, and removed
 * first with `removeTemps` (the rollback itself; a preview changes nothing).
 */
function planRollback(
  fs: FileOps,
  root: string,
  saga: SagaState,
  checkpoints: CheckpointStore,
  options: { removeTemps: boolean },
) {
  const safetyEvent = saga.events.findLast((event) => event.phase === "safety_ready");
  const mutationEvent = saga.events.findLast((event) => event.phase === "mutation_started");
  if (!safetyEvent || !mutationEvent) {
    throw new SagaError({
      code: "CORRUPT",
      operationId: saga.operationId,
      message: `Restore saga ${saga.operationId} has no safety checkpoint to roll back to.`,
    });
  }
  const safetyCheckpointId = safetyEvent.evidence.safetyCheckpointId as string;
  const safetyManifestDigest = safetyEvent.evidence.safetyManifestDigest as string;
  const safety = checkpoints.readVerifiedManifest(safetyCheckpointId);
  if (safety.manifestDigest !== safetyManifestDigest) {
    throw new SagaError({
      code: "CORRUPT",
      operationId: saga.operationId,
      message: `The safety checkpoint ${safetyCheckpointId} of restore ${saga.operationId} changed after it was recorded; refusing to roll back from it.`,
    });
  }
  // The paths the interrupted restore may have changed: its plan, recomputed from the safety checkpoint
  // (the workspace as it was scanned) and the target, and proven to be the plan its intent committed to.
  const created = saga.events[0]!;
  const checkpointId = created.evidence.checkpointId as string;
  const checkpointManifestDigest = created.evidence.checkpointManifestDigest as string;
  const intentEvent = saga.events.findLast((event) => event.phase === "intent_committed");
  const target = checkpoints.readVerifiedManifest(checkpointId);
  const committed = (plan: RestorePlan): boolean =>
    intentEvent?.evidence.intentCommitDigest ===
    intentDigest({
      operationId: saga.operationId,
      checkpointId,
      checkpointManifestDigest,
      planDigest: plan.planDigest,
    });
  // A restore an older version stopped planned with the modes as recorded, setuid/setgid included: its
  // plan is proven from those (the rollback itself still never sets those bits).
  const candidates = [planFromScan(safety.manifest.entries, target.manifest.entries)];
  if (safety.recordedEntries || target.recordedEntries) {
    candidates.push(
      planFromScan(
        safety.recordedEntries ?? safety.manifest.entries,
        target.recordedEntries ?? target.manifest.entries,
      ),
    );
  }
  const original = candidates.find(committed);
  if (target.manifestDigest !== checkpointManifestDigest || original === undefined) {
    throw new SagaError({
      code: "CORRUPT",
      operationId: saga.operationId,
      message: `The checkpoints of restore ${saga.operationId} no longer give the plan its intent committed to, so which files it touched cannot be told; refusing to roll back. Nothing was changed; inspect checkpoint ${checkpointId} and safety checkpoint ${safetyCheckpointId}.`,
    });
  }
  const touched = touchedPaths(original);
  // A file the safety checkpoint holds was there before the restore: never one of its temps.
  const held = new Set(safety.manifest.entries.map((entry) => entry.path));
  const current = removeLeftTemps(fs, root, scanTree(fs, root, { strict: false }), touched, {
    ...options,
    held,
  });
  const { plan, outside } = restrictPlan(planFromScan(current, safety.manifest.entries), current, touched);
  return {
    plan,
    touched,
    safety,
    safetyCheckpointId,
    safetyManifestDigest,
    originalTargetCount: mutationEvent.evidence.targetCount as number,
    outside,
    overwritten: writtenSince(current, touched, safety.manifest.entries, target.manifest.entries),
  };
}

/**
 * Touched paths that now hold something the restore could not have left there: neither what the safety
 * checkpoint holds (before the restore) nor what the target holds (after it). The restore publishes each
 * file whole (a rename), so anything else was written since it stopped, by someone else; a rollback would
 * replace it with the old content and lose it. Directories are not compared (their modes pass through
 * owner rwx while a restore runs).
 */
function writtenSince(
  current: readonly ScannedEntry[],
  touched: ReadonlySet<string>,
  before: readonly ManifestEntry[],
  after: readonly ManifestEntry[],
): string[] {
  const beforeByPath = new Map(before.map((entry) => [entry.path, entry]));
  const afterByPath = new Map(after.map((entry) => [entry.path, entry]));
  const same = (now: ScannedEntry, then: ManifestEntry | undefined): boolean =>
    then !== undefined &&
    then.type === now.type &&
    (now.type !== "file" || (then.type === "file" && then.sha256 === now.sha256));
  return current
    .filter(
      (entry) =>
        entry.type !== "dir" &&
        touched.has(entry.path) &&
        !same(entry, beforeByPath.get(entry.path)) &&
        !same(entry, afterByPath.get(entry.path)),
    )
    .map((entry) => entry.path)
    .sort();
}

function someOf(paths: readonly string[]): string {
  return `${paths.slice(0, 3).join(", ")}${paths.length > 3 ? ` and ${paths.length - 3} more` : ""}`;
}

/** What a rollback would delete or overwrite although its restore did not write it, as a person reads it. */
function blockerMessages(
  operationId: string,
  found: { outside: readonly string[]; overwritten: readonly string[] },
): string[] {
  const messages: string[] = [];
  if (found.outside.length > 0) {
    messages.push(
      `rolling back restore ${operationId} would delete ${someOf(found.outside)}, written since the restore stopped where the rollback must remove or create a directory; move them away, then retry the rollback`,
    );
  }
  if (found.overwritten.length > 0) {
    messages.push(
      `rolling back restore ${operationId} would overwrite ${someOf(found.overwritten)}, which hold neither what was there before the restore nor what it wrote (written since the restore stopped); move them away (the rollback then puts back what was there before the restore), then retry the rollback`,
    );
  }
  return messages;
}

/** True when recovery may abort this saga (the workspace is provably untouched). */
export function isAbortable(saga: SagaState): boolean {
  return !saga.terminal && saga.basePhase !== null && PRE_MUTATION_PHASES.has(saga.basePhase);
}
