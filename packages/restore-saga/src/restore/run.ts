import { randomUUID } from "node:crypto";
import { join } from "node:path";
import { RESTORE_SAGAS_DIR } from "@drydock/facts";
import { type FileOps, nodeFileOps } from "@drydock/file-lock";
import {
  assertDataDirOutside,
  type CapturedWorkspace,
  canonicalWorkspaceRoot,
  openCheckpointStore,
  type VerifiedManifest,
} from "../checkpoints/index.js";
import { isSagaError, SagaError } from "../errors.js";
import {
  applyPlan,
  NAME_MAX_BYTES,
  overlongName,
  planFromScan,
  prepareStaging,
  type RestorePlan,
  type VerifiedBlobs,
  verifyPlanBlobs,
  verifyTree,
  writesFiles,
} from "../internal/apply.js";
import { domainDigest } from "../internal/canonical.js";
import { type CrashHook, noCrash } from "../internal/crash.js";
import { boundedText } from "../internal/text.js";
import type { Phase } from "../schema.js";
import { openSagaStore, type SagaState } from "../store/index.js";
import { acquireWorkspaceLock, type HeldWorkspaceLock } from "../workspace-lock/index.js";
import {
  archiveQuietly,
  checkLayout,
  intentDigest,
  invalid,
  stagingDirFor,
  step,
  toSagaError,
} from "./common.js";
import type { RestoreOptions, RestoreResult, RestoreRunOptions, RestoreStores } from "./options.js";
import { finish, settleFailure } from "./settle.js";
import { assertNoUnsettledRestore } from "./unsettled.js";

/**
 * The stores `restoreCheckpoint` has always used, all under `dataDir`: the sagas in
 * `<dataDir>/restore-sagas`, the checkpoints in `<dataDir>/checkpoints`, the workspace lock in
 * `<dataDir>/locks` and the staging directory in `<dataDir>/restore-staging/<shard>`. Opens nothing on disk.
 */
export function openRestoreStores(
  options: Pick<
    RestoreOptions,
    | "dataDir"
    | "workspaceRoot"
    | "crash"
    | "fs"
    | "now"
    | "lockWaitMs"
    | "isProcessAlive"
    | "identity"
    | "durable"
  >,
): RestoreStores {
  const fs = options.fs ?? nodeFileOps;
  const crash = options.crash ?? noCrash;
  const now = options.now ?? Date.now;
  const { dataDir, root } = checkLayout(fs, options);
  const durable = options.durable ?? true;
  const checkpoints = openCheckpointStore({ dataDir, fs, now, crash, durable });
  const sagas = openSagaStore({
    stateDir: join(dataDir, RESTORE_SAGAS_DIR),
    workspaceRoot: root,
    fs,
    now,
    crash,
  });
  return {
    sagas,
    checkpoints,
    workspaceLock: {
      acquire: (transactionId) =>
        acquireWorkspaceLock({
          dataDir,
          workspaceRoot: root,
          transactionId,
          fs,
          now,
          ...(options.lockWaitMs !== undefined ? { waitMs: options.lockWaitMs } : {}),
          ...(options.isProcessAlive ? { isProcessAlive: options.isProcessAlive } : {}),
          ...(options.identity ? { identity: options.identity } : {}),
        }),
    },
    staging: { dataDir, dir: stagingDirFor(dataDir, sagas) },
  };
}

/**
 * Restores `checkpointId` into the workspace as a journaled saga:
 * created → locked → prepared → intent_committed → safety_ready → mutation_started → workspace_applied
 * → completed, then releases the lock and archives the saga (an archive failure is only a warning).
 *
 * On failure before the intent: `aborted`, the lock released, the saga archived, the error rethrown.
 * On failure after it: `recovery_required` is journaled and the lock is RETAINED; the error thrown is
 * RECOVERY_REQUIRED (`workspaceLockRetained: true`, the original failure as `cause`).
 *
 * Opens its stores from `dataDir` (`openRestoreStores`), then runs `restoreCheckpointWith`.
 */
export async function restoreCheckpoint(options: RestoreOptions): Promise<RestoreResult> {
  try {
    return await restore(openRestoreStores(options), options);
  } catch (error) {
    throw toSagaError(error);
  }
}

/** `restoreCheckpoint` with the stores it works with given, not opened: the seam of other storage backends. */
export async function restoreCheckpointWith(
  stores: RestoreStores,
  options: RestoreRunOptions,
): Promise<RestoreResult> {
  try {
    return await restore(stores, options);
  } catch (error) {
    throw toSagaError(error);
  }
}

/** One restore under way: what every step reads, and the saga as last written (what a failure settles). */
interface Run {
  readonly stores: RestoreStores;
  readonly fs: FileOps;
  readonly crash: CrashHook;
  readonly durable: boolean;
  readonly root: string;
  readonly operationId: string;
  readonly checkpointId: string;
  readonly target: VerifiedManifest;
  saga: SagaState;
  /** Changes the plan makes to the workspace (0 until it is planned). */
  targetCount: number;
}

/** The plan of a restore, from the one scan that also stored its safety checkpoint's blobs. */
interface Planned {
  plan: RestorePlan;
  verified: VerifiedBlobs;
  captured: CapturedWorkspace;
}

async function advanceRun(run: Run, phase: Phase, evidence: Record<string, unknown>): Promise<void> {
  run.saga = await step(run.stores.sagas, run.saga, phase, evidence);
}

async function restore(stores: RestoreStores, options: RestoreRunOptions): Promise<RestoreResult> {
  const fs = options.fs ?? nodeFileOps;
  const crash = options.crash ?? noCrash;
  const root = canonicalWorkspaceRoot(fs, options.workspaceRoot);
  if (stores.sagas.workspaceRoot !== root) {
    throw invalid(`The saga store given is the one of ${stores.sagas.workspaceRoot}, not of ${root}.`);
  }
  assertDataDirOutside(fs, stores.staging.dataDir, root);
  const operationId = options.operationId ?? `restore-${randomUUID()}`;
  const target = stores.checkpoints.readVerifiedManifest(options.checkpointId);
  if (target.manifest.workspaceRoot !== root) {
    throw invalid(
      `Checkpoint ${options.checkpointId} belongs to another workspace (${target.manifest.workspaceRoot}).`,
    );
  }

  const created = await stores.sagas.create(operationId, {
    kind: "checkpoint-restore",
    checkpointId: options.checkpointId,
    checkpointManifestDigest: target.manifestDigest,
    actorPid: process.pid,
  });
  const run: Run = {
    stores,
    fs,
    crash,
    durable: options.durable ?? true,
    root,
    operationId,
    checkpointId: options.checkpointId,
    target,
    saga: created,
    targetCount: 0,
  };
  crash.point("restore.after-created");

  const held = await takeLock(run);
  crash.point("restore.after-lock-acquired");

  try {
    await lockSaga(run, held, options.confirmWorkspace);
    const planned = await planAndPrepare(run);
    held.assertOwned();
    await advanceRun(run, "intent_committed", {
      intentCommitDigest: intentDigest({
        operationId,
        checkpointId: run.checkpointId,
        checkpointManifestDigest: target.manifestDigest,
        planDigest: planned.plan.planDigest,
      }),
      authority: "operation",
    });
    crash.point("restore.after-intent-committed");

    const poststateDigest = await applyTarget(run, held, planned);
    crash.point("restore.after-workspace-applied");

    held.assertOwned();
    await advanceRun(run, "completed", {
      resultDigest: domainDigest("drydock-restore-result-v1", {
        operationId,
        checkpointId: run.checkpointId,
        poststateDigest,
      }),
    });
    crash.point("restore.after-completed");
  } catch (error) {
    return settleFailure(stores.sagas, run.saga, held, error);
  }

  return finish(stores.sagas, run.saga, held, run.targetCount, crash);
}

/** The workspace lock for this restore; if it cannot be taken, the saga is aborted (nothing happened yet). */
async function takeLock(run: Run): Promise<HeldWorkspaceLock> {
  const store = run.stores.sagas;
  try {
    return await run.stores.workspaceLock.acquire(run.operationId);
  } catch (lockError) {
    // Nothing happened yet: created → aborted, archived. If even that fails, the saga stays `created`
    // with this process as its actor; once this process is gone, a lock-free abort settles it.
    try {
      const aborted = await step(store, run.saga, "aborted", {
        reason: boundedText((lockError as Error)?.message, "The workspace lock could not be taken.", 2048),
        errorCode: boundedText(isSagaError(lockError) ? lockError.code : null, "LOCK_FAILED", 128),
      });
      await archiveQuietly(store, aborted);
    } catch {
      // The lock error is the one the caller must see.
    }
    throw toSagaError(lockError);
  }
}

/** Under the lock: no other restore left this workspace unsettled, the caller confirms it, `locked`. */
async function lockSaga(
  run: Run,
  held: HeldWorkspaceLock,
  confirmWorkspace: RestoreRunOptions["confirmWorkspace"],
): Promise<void> {
  await assertNoUnsettledRestore(run.stores.sagas, run.operationId);
  const refusal = confirmWorkspace ? await confirmWorkspace() : null;
  if (typeof refusal === "string") {
    throw new SagaError({
      code: "WORKSPACE_MISMATCH",
      operationId: run.operationId,
      message: `Restore ${run.operationId} was refused before it changed anything: ${refusal}`,
    });
  }
  held.assertOwned();
  await advanceRun(run, "locked", {
    workspaceLockOwner: held.owner,
    lockOwnerDigest: held.ownerDigest,
  });
  run.crash.point("restore.after-locked");
}

/** One scan: the safety blobs stored, the plan made and checked, the staging directory ready, `prepared`. */
async function planAndPrepare(run: Run): Promise<Planned> {
  const { fs, root, target, stores } = run;
  const checkpoints = stores.checkpoints;
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
      operationId: run.operationId,
      message: `Checkpoint ${run.checkpointId} holds ${JSON.stringify(boundedText(overlong, "", 600))}, a name longer than ${NAME_MAX_BYTES} bytes, which no file system here can hold (it was checkpointed elsewhere). Nothing was restored or changed; restore another checkpoint.`,
    });
  }
  run.targetCount = plan.ops.length;
  // The staging directory (in the data directory) is made ready now, while a failure changes nothing
  // and aborts: a file in its way found after `mutation_started` left a restore that had changed nothing
  // needing recovery.
  if (writesFiles(plan)) prepareStaging(fs, stores.staging.dir, stores.staging.dataDir);
  await advanceRun(run, "prepared", { prestateDigest: plan.prestateDigest, targetCount: run.targetCount });
  run.crash.point("restore.after-prepared");
  return { plan, verified, captured };
}

/**
 * After the intent: the safety checkpoint committed (only when something changes), the plan applied and
 * the workspace verified, `workspace_applied`. Returns the digest of the workspace as it now is.
 */
async function applyTarget(run: Run, held: HeldWorkspaceLock, planned: Planned): Promise<string> {
  const { fs, root, target, crash, stores } = run;
  const { plan, verified, captured } = planned;
  const checkpoints = stores.checkpoints;
  if (run.targetCount === 0) {
    const poststateDigest = verifyTree(fs, root, target.treeDigest);
    await advanceRun(run, "workspace_applied", { appliedCount: 0, poststateDigest });
    return poststateDigest;
  }
  const safety = checkpoints.commitCheckpoint(captured, { kind: "safety" });
  crash.point("restore.after-safety-checkpoint");
  // Read back what was stored: the manifest on disk must describe the planned pre-state.
  if (checkpoints.readVerifiedManifest(safety.checkpointId).treeDigest !== plan.prestateDigest) {
    throw new SagaError({
      code: "CORRUPT",
      operationId: run.operationId,
      message: `The safety checkpoint ${safety.checkpointId} does not describe the workspace as it was planned. Nothing was restored; check the data directory's disk.`,
    });
  }
  await advanceRun(run, "safety_ready", {
    safetyCheckpointId: safety.checkpointId,
    safetyManifestDigest: safety.manifestDigest,
    coverage: "full",
  });
  crash.point("restore.after-safety-ready");

  held.assertOwned();
  await advanceRun(run, "mutation_started", { targetCount: run.targetCount, coverage: "full" });
  crash.point("restore.after-mutation-started");

  let applyPoststate: string | undefined;
  const applied = await applyPlan(
    {
      fs,
      root,
      stagingDir: stores.staging.dir,
      dataDir: stores.staging.dataDir,
      checkpoints,
      durable: run.durable,
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
  await advanceRun(run, "workspace_applied", { appliedCount: applied, poststateDigest: applyPoststate });
  return applyPoststate;
}
