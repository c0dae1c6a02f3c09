/**
 * The read-only preview of a restore: the saga (active or archived), its lock, the fence an action must
 * name, and for each action whether the rules allow it now and why not.
 */
import { isSagaError } from "@drydock/restore-saga";
import { validateOperationId } from "../internal/fence.js";
import { foreignLockHolder } from "../internal/lock-holder.js";
import type { SagaView } from "../ports.js";
import type { ActionVerdict, RestorePreview } from "../schema.js";
import type { RestoreContext } from "./context.js";
import { inspectLock, type LockRead } from "./lock.js";
import {
  abortVerdict,
  completeVerdict,
  type EligibilityInput,
  type LockFacts,
  recommendedAction,
  releaseVerdict,
  rollbackVerdict,
} from "./rules.js";

/** The active saga, or the archived one when no active saga exists. */
async function loadAny(
  ctx: RestoreContext,
  operationId: string,
): Promise<{ saga: SagaView; archived: boolean }> {
  try {
    return { saga: await ctx.store.load(operationId), archived: false };
  } catch (error) {
    if (!(isSagaError(error) && error.code === "NOT_FOUND")) throw error;
    return { saga: await ctx.store.loadArchived(operationId), archived: true };
  }
}

export async function preview(ctx: RestoreContext, operationIdInput: string): Promise<RestorePreview> {
  const operationId = validateOperationId(operationIdInput);
  const { saga, archived } = await loadAny(ctx, operationId);
  const read = await inspectLock(ctx, operationId, saga);
  const raw = read.kind === "owner" ? read.owner : null;
  const torn = read.kind === "torn" ? read : null;
  // Another restore's lock on this workspace: nothing here may be settled until that one is.
  const foreign = raw !== null && raw.payload.transactionId !== operationId ? raw : null;
  const owner = foreign === null ? raw : null;
  const ownerDigest = owner === null ? null : ctx.lock.ownerDigest(owner);
  const alive = owner === null ? false : ctx.isOwnerAlive(owner);
  const lock: LockFacts = {
    foreign: foreign === null ? null : foreignLockHolder(foreign, ctx.isOwnerAlive(foreign), ctx.prefix),
    owner: owner === null ? null : { pid: owner.pid, alive },
    torn: torn !== null,
    canTakeFresh: ctx.lock.withFresh !== undefined,
  };
  const actions = await verdicts(ctx, operationId, { saga, archived, lock });
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
    tornLock: tornView(torn),
    fence: {
      expectedSeq: saga.seq,
      expectedHash: saga.headHash,
      expectedOwnerDigest: ownerDigest ?? torn?.digest ?? null,
    },
    actions,
    recommended: recommendedAction(actions),
  };
}

/** Each action's verdict: the rules, then (for a rollback they allow) what only the workspace can tell. */
async function verdicts(
  ctx: RestoreContext,
  operationId: string,
  input: EligibilityInput,
): Promise<RestorePreview["actions"]> {
  const rollback: ActionVerdict = rollbackVerdict(input, ctx.liveness);
  // What only the workspace can tell (something written since that the rollback would delete).
  if (rollback.blockers.length === 0) {
    rollback.blockers.push(...((await ctx.rollback.blockers?.(operationId)) ?? []));
    rollback.eligible = rollback.blockers.length === 0;
  }
  return {
    abort: abortVerdict(input, ctx.liveness),
    release: releaseVerdict(input, ctx.prefix),
    complete: completeVerdict(input, ctx.liveness),
    rollback,
  };
}

function tornView(torn: Extract<LockRead, { kind: "torn" }> | null): RestorePreview["tornLock"] {
  return torn === null
    ? null
    : {
        digest: torn.digest,
        path: torn.path,
        size: torn.torn.size,
        changedAt: new Date(torn.torn.ctimeMs).toISOString(),
      };
}
