import { randomUUID } from "node:crypto";
import { join } from "node:path";
import { RESTORE_SAGAS_DIR } from "@drydock/facts";
import { type FileOps, nodeFileOps } from "@drydock/file-lock";
import {
  assertDataDirOutside,
  type CheckpointStore,
  canonicalWorkspaceRoot,
  openCheckpointStore,
} from "../checkpoints/index.js";
import { SagaError } from "../errors.js";
import {
  applyPlan,
  planFromScan,
  type RestorePlan,
  removeLeftTemps,
  restrictPlan,
  sweepStaging,
  touchedPaths,
  verifyPaths,
  verifyPlanBlobs,
} from "../internal/apply.js";
import { noCrash } from "../internal/crash.js";
import { type ScannedEntry, scanTree } from "../internal/tree.js";
import { ROLLBACK_BASE_PHASES } from "../phases.js";
import type { ManifestEntry } from "../schema.js";
import { openSagaStore, type SagaState, type SagaStore } from "../store/index.js";
import { checkLayout, intentDigest, invalid, step, toSagaError } from "./common.js";
import type { RestoreStores, RollbackOptions, RollbackRunOptions } from "./options.js";
import { openRestoreStores } from "./run.js";

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
    return await rollback(openRestoreStores(options), options);
  } catch (error) {
    throw toSagaError(error, "rollback");
  }
}

/** `rollbackFromSafetyCheckpoint` with its stores given, not opened from `dataDir` (see `RestoreStores`). */
export async function rollbackFromSafetyCheckpointWith(
  stores: Pick<RestoreStores, "sagas" | "checkpoints" | "staging">,
  options: RollbackRunOptions,
): Promise<SagaState> {
  try {
    return await rollback(stores, options);
  } catch (error) {
    throw toSagaError(error, "rollback");
  }
}

async function rollback(
  stores: Pick<RestoreStores, "sagas" | "checkpoints" | "staging">,
  options: RollbackRunOptions,
): Promise<SagaState> {
  const fs = options.fs ?? nodeFileOps;
  const crash = options.crash ?? noCrash;
  const root = canonicalWorkspaceRoot(fs, options.workspaceRoot);
  if (stores.sagas.workspaceRoot !== root) {
    throw invalid(`The saga store given is the one of ${stores.sagas.workspaceRoot}, not of ${root}.`);
  }
  assertDataDirOutside(fs, stores.staging.dataDir, root);
  const lease = options.lease;
  if (lease.owner.payload.transactionId !== options.operationId || lease.workspaceRoot !== root) {
    throw invalid("The lease must be this operation's lock on this workspace.");
  }
  const { sagas: store, checkpoints } = stores;
  const durable = options.durable ?? true;

  lease.assertOwned();
  let saga = await loadRollbackCandidate(store, options);
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
  sweepStaging(fs, stores.staging.dir);

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
        stagingDir: stores.staging.dir,
        dataDir: stores.staging.dataDir,
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

/** The saga to roll back, read now: exactly at the caller's fence, and stopped after `mutation_started`. */
async function loadRollbackCandidate(
  store: SagaStore,
  options: Pick<RollbackRunOptions, "operationId" | "fence">,
): Promise<SagaState> {
  const saga = await store.load(options.operationId);
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
  return saga;
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
  /** Read the saga through a read-only store (SagaStoreOptions.readOnly): planning then changes no file. */
  readOnly?: boolean;
}): Promise<string[]> {
  const fs = options.fs ?? nodeFileOps;
  try {
    const { dataDir, root } = checkLayout(fs, options);
    const store = openSagaStore({
      stateDir: join(dataDir, RESTORE_SAGAS_DIR),
      workspaceRoot: root,
      fs,
      ...(options.readOnly ? { readOnly: true } : {}),
    });
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
