import { type BoatDeletionRecord, isBoatDeleteJournalError } from "@drydock/boat-delete-journal";
import { isLifecycleError, LIFECYCLE_MESSAGES, LifecycleError } from "../errors.js";
import type { DeletionOutcome } from "../schema.js";
import { OPERATION_ID } from "../schema.js";
import { type Context, classifyProviderError, journal } from "./context.js";
import { DELETE_IN_FLIGHT_MS, DELETE_POLL_SCHEDULE_MS } from "./retry.js";

export interface DeletionTarget {
  boxId: string;
  name: string;
  ownerBotId: string | null;
}

/** The fields of a provider operation the lifecycle relies on. */
interface OperationView {
  id: string;
  kind: string;
  targetId: string;
  status: string;
}

const STATUS_RANK: Record<string, number> = { pending: 0, processing: 1, completed: 2 };

/**
 * A receipt counts only when it is bound to this exact target (and, when polling, to the recorded
 * operation): another Boat's operation must never complete or block this fence.
 */
function isBound(op: OperationView, boxId: string, expectedId?: string): boolean {
  return (
    OPERATION_ID.test(op.id) &&
    op.kind === "sandbox" &&
    op.targetId === boxId &&
    (expectedId === undefined || op.id === expectedId) &&
    ["pending", "processing", "blocked", "completed"].includes(op.status)
  );
}

/**
 * Proof of absence arrived (a completed target-bound operation, or a direct 404/410 on the immutable
 * id). The create row goes first: if the process dies between the two writes the deletion fence still
 * stands, and the next reconcile proves absence again and finishes. The other order could leave a create
 * row without its fence, and a later provision would trust a Boat that is gone or going.
 */
export async function finishDeletion(ctx: Context, boxId: string): Promise<void> {
  await journal(() => ctx.createJournal.retireDeletedBoatCreate(boxId));
  // Crash window: the ownership row is gone but the fence stands; recovery re-proves absence and retires it.
  ctx.crash.point("delete.after-retire-create");
  await journal(() => ctx.deleteJournal.retireBoatDeletion(boxId));
  // Crash window: both records are retired; nothing is left to recover.
  ctx.crash.point("delete.after-retire-deletion");
  ctx.logger.info?.("boat deletion confirmed", { boxId });
}

/**
 * Blocks the fence. False when it is gone (the journal's "out of date"): another caller settled this
 * deletion meanwhile (it proved the Boat gone and retired the fence), which is no journal problem; the
 * caller reads the Boat directly instead of answering "paused".
 */
async function markBlocked(ctx: Context, boxId: string, op?: OperationView): Promise<boolean> {
  try {
    await journal(() => ctx.deleteJournal.markBoatDeletionBlocked(boxId, op));
  } catch (error) {
    if (isOutOfDate(error)) return false;
    throw error;
  }
  // Crash window: the fence is blocked; only an explicit retry re-prepares it and sends DELETE again.
  ctx.crash.point("delete.after-blocked");
  ctx.logger.warn?.("boat deletion blocked", { boxId, operationId: op?.id });
  return true;
}

/**
 * After polling: the direct read of the immutable id is the last proof available. Unavailable ⇒ the
 * fallback outcome stands (never proof); 404/410 ⇒ finished; a Boat renamed since the fence was written is
 * not ours to delete blindly.
 */
async function directCheck(
  ctx: Context,
  target: DeletionTarget,
  fallback: "pending" | "blocked",
): Promise<DeletionOutcome> {
  let name: string | null;
  try {
    name = (await ctx.client.getSandbox(target.boxId)).name;
  } catch (error) {
    const failure = classifyProviderError(error);
    if (failure.kind === "absent") {
      await finishDeletion(ctx, target.boxId);
      return "confirmed";
    }
    return fallback;
  }
  // An unnamed Boat is one provisioning created and failed to name; its fence holds the desired name.
  if (name !== null && name !== target.name) {
    throw new LifecycleError({
      code: "name_mismatch",
      boxId: target.boxId,
      message: LIFECYCLE_MESSAGES.nameMismatch,
    });
  }
  return fallback;
}

/**
 * boat.dev itself answered 404 `not_found` / 410 `gone` for the fence's deletion operation (retention, a
 * failed operation purged). Polling can never settle such a fence, and an accepted fence never re-sends
 * DELETE, so without this it would stay "pending" forever. The direct read decides:
 *   - the Boat is proven gone (404/410) ⇒ finished;
 *   - the read fails ⇒ unknown, the fence stays as it is ("pending");
 *   - the Boat still exists ⇒ no deletion is running for it: the fence is marked blocked (keeping the
 *     operation id), so an explicit Delete retry may re-prepare it and send DELETE again.
 * Only boat.dev's own envelope counts (`provesAbsence`): a proxy's bare 404 never gets here.
 */
async function operationUnknown(
  ctx: Context,
  target: DeletionTarget,
  operationId: string,
): Promise<DeletionOutcome> {
  let name: string | null;
  try {
    name = (await ctx.client.getSandbox(target.boxId)).name;
  } catch (error) {
    if (classifyProviderError(error).kind === "absent") {
      await finishDeletion(ctx, target.boxId);
      return "confirmed";
    }
    return "pending"; // the Boat could not be read: unknown, the fence stays as it is
  }
  if (name !== null && name !== target.name) {
    throw new LifecycleError({
      code: "name_mismatch",
      boxId: target.boxId,
      message: LIFECYCLE_MESSAGES.nameMismatch,
    });
  }
  // Block only the very fence whose operation boat.dev forgot: a fence another process re-prepared (or
  // bound to another operation) meanwhile is not ours to block.
  const current = await journal(() => ctx.deleteJournal.getBoatDeletion(target.boxId));
  if (current === null) return directCheck(ctx, target, "pending");
  if (current.phase !== "accepted" || current.operationId !== operationId) {
    return current.phase === "blocked" ? "blocked" : "pending";
  }
  const blockedNow = await markBlocked(ctx, target.boxId, {
    id: operationId,
    kind: "sandbox",
    targetId: target.boxId,
    status: "blocked",
  });
  if (!blockedNow) return directCheck(ctx, target, "pending");
  ctx.logger.warn?.(LIFECYCLE_MESSAGES.deletionOperationUnknown(target.boxId, operationId), {
    boxId: target.boxId,
    operationId,
  });
  return "blocked";
}

/** Journals an accepted receipt only when it moves the status forward (the journal ignores stale ones too). */
async function markAccepted(ctx: Context, boxId: string, op: OperationView): Promise<void> {
  await journal(() => ctx.deleteJournal.markBoatDeletionAccepted(boxId, op));
}

/**
 * A later status of a journaled receipt. Each write is a durable step with its own crash point: a
 * completed status is journaled before the records are retired, so a crash between the two leaves an
 * accepted fence whose operation recovery polls again (never a second DELETE). False when the fence changed
 * meanwhile (the journal's "out of date": another caller, maybe another process following the same
 * operation, blocked or retired it): no journal problem, the caller reads the fence or the Boat again.
 */
async function markStatus(ctx: Context, boxId: string, op: OperationView): Promise<boolean> {
  try {
    await markAccepted(ctx, boxId, op);
  } catch (error) {
    if (isOutOfDate(error)) return false;
    throw error;
  }
  ctx.crash.point(
    op.status === "completed" ? "delete.after-receipt-completed" : "delete.after-receipt-progress",
  );
  return true;
}

/** Polls a journaled operation on the fixed schedule until it completes, blocks or stops answering. */
async function followOperation(
  ctx: Context,
  target: DeletionTarget,
  first: OperationView,
): Promise<DeletionOutcome> {
  let status = first.status;
  for (const delay of DELETE_POLL_SCHEDULE_MS) {
    await ctx.sleep(delay);
    let polled: OperationView;
    try {
      polled = await ctx.client.getDeletionOperation(first.id, { targetId: target.boxId });
    } catch (error) {
      // boat.dev itself no longer knows the operation: the Boat is gone or the fence must be released.
      if (classifyProviderError(error).kind === "absent") return operationUnknown(ctx, target, first.id);
      break; // any other failed poll is never proof either way; the direct read decides
    }
    if (!isBound(polled, target.boxId, first.id)) break;
    if (polled.status === "blocked") {
      const blockedNow = await markBlocked(ctx, target.boxId, polled);
      return directCheck(ctx, target, blockedNow ? "blocked" : "pending");
    }
    if (polled.status === "completed") {
      if (!(await markStatus(ctx, target.boxId, polled))) return receiptRefused(ctx, target, polled);
      await finishDeletion(ctx, target.boxId);
      return "confirmed";
    }
    if ((STATUS_RANK[polled.status] ?? 0) > (STATUS_RANK[status] ?? 0)) {
      if (!(await markStatus(ctx, target.boxId, polled))) return receiptRefused(ctx, target, polled);
      status = polled.status;
    }
  }
  return directCheck(ctx, target, "pending");
}

/**
 * boat.dev answered the DELETE with something that is not a receipt bound to this Boat. The Boat may be
 * going or not: only a direct 404/410 proves anything, otherwise the fence stays (prepared, so an
 * explicit retry sends DELETE again — which boat.dev answers with the running operation, if any).
 */
async function invalidReceipt(ctx: Context, target: DeletionTarget): Promise<never | DeletionOutcome> {
  try {
    await ctx.client.getSandbox(target.boxId);
  } catch (error) {
    if (classifyProviderError(error).kind === "absent") {
      await finishDeletion(ctx, target.boxId);
      return "confirmed";
    }
  }
  throw new LifecycleError({
    code: "invalid_receipt",
    boxId: target.boxId,
    message: LIFECYCLE_MESSAGES.invalidReceipt(target.boxId),
  });
}

/**
 * Milliseconds left before a prepared fence stops counting as another caller's DELETE in flight (0 once
 * it is older than DELETE_IN_FLIGHT_MS). A fence stamped in the future (clock stepped back) counts as in
 * flight for the whole window from now: being wrong that way only delays an explicit retry.
 */
export function deletionInFlightLeftMs(
  record: Pick<BoatDeletionRecord, "phase" | "updatedAt">,
  now: number,
): number {
  if (record.phase !== "prepared") return 0;
  const age = now - record.updatedAt;
  if (age < 0) return DELETE_IN_FLIGHT_MS;
  return Math.max(0, DELETE_IN_FLIGHT_MS - age);
}

/** The journal refused a receipt because the fence changed (blocked or retired) since it was prepared. */
function isOutOfDate(error: unknown): boolean {
  return (
    isLifecycleError(error) &&
    error.code === "recovery_paused" &&
    isBoatDeleteJournalError(error.cause) &&
    error.cause.detail === "out of date"
  );
}

/**
 * Our DELETE was answered, but its receipt can no longer be journaled: meanwhile another caller blocked
 * the fence (its own DELETE refused, or the operation found unknown) or retired it (absence proven). That
 * is not a journal problem: the fence as it stands now decides, read again and reconciled (one poll, a
 * direct read). Nothing is sent again.
 */
async function receiptRefused(
  ctx: Context,
  target: DeletionTarget,
  op: OperationView,
): Promise<DeletionOutcome> {
  ctx.logger.warn?.("boat deletion receipt arrived after the fence changed; reconciling it", {
    boxId: target.boxId,
    operationId: op.id,
  });
  const current = await journal(() => ctx.deleteJournal.getBoatDeletion(target.boxId));
  if (current === null) return directCheck(ctx, target, "pending");
  return reconcileRecord(ctx, current);
}

/** Same fence: same target, written by the same prepare (a re-prepared or another process's differs). */
function samePrepare(a: BoatDeletionRecord, b: BoatDeletionRecord): boolean {
  return a.boxId === b.boxId && a.phase === b.phase && a.requestedAt === b.requestedAt;
}

/** Exactly the fence a caller read: every field the delete journal compares (its `restampBoatDeletion` rule). */
export function sameFence(a: BoatDeletionRecord, b: BoatDeletionRecord): boolean {
  return (
    a.boxId === b.boxId &&
    a.name === b.name &&
    a.ownerBotId === b.ownerBotId &&
    a.phase === b.phase &&
    a.requestedAt === b.requestedAt &&
    a.updatedAt === b.updatedAt &&
    a.operationId === b.operationId &&
    a.status === b.status
  );
}

/**
 * Deletes one Boat behind a durable fence (the original's flow). The caller's earlier reads of the journal
 * are not trusted for the decision to send DELETE: another process (bot server and recovery CLI on one
 * data dir) may have fenced the Boat since. The decision is taken on the fence the prepare returns, in the
 * same journal transaction that says whether this call wrote it (`prepareBoatDeletionOnce`):
 *   - an accepted fence (someone's DELETE already has a receipt): its operation is followed, never a
 *     second DELETE;
 *   - a fence this call just prepared (none or a blocked one stood before): DELETE is sent;
 *   - a prepared fence that already stood: DELETE is re-sent only when the caller read exactly that fence
 *     and passes it as `retryOf` (the explicit retry: Delete again, or provisioning after a crash), only
 *     once the fence is older than DELETE_IN_FLIGHT_MS, and only after the fence was durably re-stamped
 *     (`restampBoatDeletion`, a compare-and-set: one retry of many wins); a prepared fence the caller did
 *     not know, or a younger one, is another caller's DELETE in flight, so this call only reads the Boat
 *     and reports the deletion as pending.
 * With `exact` (the caller's `expectedFence`: `retryOf` is exactly that fence), every one of those "not
 * this call's DELETE" answers throws what `exact` makes instead, having sent nothing: a prepared fence is
 * not prepared again but re-stamped directly (the compare-and-set), so a fence settled and retired
 * meanwhile is never replaced by a new one.
 */
export async function requestDeletion(
  ctx: Context,
  target: DeletionTarget,
  retryOf?: BoatDeletionRecord,
  exact?: () => Error,
): Promise<DeletionOutcome> {
  // One journal transaction decides whether this call wrote the fence: no other process can slip one in.
  const { record, prepared: preparedNow } =
    exact !== undefined && retryOf?.phase === "prepared"
      ? { record: retryOf, prepared: false }
      : await journal(() => ctx.deleteJournal.prepareBoatDeletionOnce(target));
  // Crash window: the fence is durable but DELETE may not have left. Recovery never sends DELETE on its
  // own; provisioning for the bot (or an explicit retry) re-sends it, which boat.dev answers idempotently.
  ctx.crash.point("delete.after-prepare");

  if (exact !== undefined && record.phase === "accepted") throw exact();
  if (record.phase === "accepted") {
    ctx.logger.info?.("boat deletion already accepted; following its operation", {
      boxId: target.boxId,
      operationId: record.operationId,
    });
    return followJournaled(ctx, target, record);
  }
  // A fence that already stood is re-sent only when it is exactly the one the caller read and retries,
  // and only once it is older than the in-flight window: a younger one may be another caller's DELETE
  // still on the wire, and a second DELETE now would be blind.
  const explicitRetry =
    !preparedNow &&
    retryOf !== undefined &&
    samePrepare(record, retryOf) &&
    deletionInFlightLeftMs(record, ctx.now()) === 0;
  if (!preparedNow && !explicitRetry) {
    if (exact !== undefined) throw exact();
    ctx.logger.info?.("boat deletion already in flight elsewhere; DELETE not re-sent", {
      boxId: target.boxId,
      retryAfterMs: deletionInFlightLeftMs(record, ctx.now()),
    });
    return reconcileRecord(ctx, record);
  }

  if (explicitRetry) {
    // The retry re-stamps the fence before its DELETE leaves (compare-and-set on exactly the fence read
    // above): the in-flight window then runs again from this DELETE, whose outcome may end up unknown, so
    // no caller (this process or another) re-sends blind right after it. Of two retries racing on one old
    // fence exactly one re-stamps; the other finds the fence changed and sends nothing.
    const { record: current, restamped } = await journal(() =>
      ctx.deleteJournal.restampBoatDeletion(target.boxId, record),
    );
    if (!restamped) {
      ctx.logger.info?.("boat deletion fence changed before the retry; DELETE not re-sent", {
        boxId: target.boxId,
      });
      if (exact !== undefined) throw exact();
      if (current === null) return directCheck(ctx, target, "pending");
      return reconcileRecord(ctx, current);
    }
    // Crash window: the fence is freshly stamped, DELETE may not have left. The next caller waits out the
    // window (the DELETE may be on the wire), then retries; boat.dev answers it idempotently.
    ctx.crash.point("delete.after-restamp");
  }

  // The caller's gate (a lapsed instance lease): what it throws leaves the fence prepared, nothing sent.
  ctx.beforeSideEffect({ kind: "delete", boxId: target.boxId });
  let op: OperationView;
  try {
    op = await ctx.client.deleteSandbox(target.boxId);
  } catch (error) {
    const failure = classifyProviderError(error);
    if (failure.kind === "absent") {
      await finishDeletion(ctx, target.boxId);
      return "confirmed";
    }
    if (failure.kind === "transport") {
      if (!failure.committed) {
        // Proven not sent. The caller's gate may itself have refused at the write (bot-server checks its
        // lease again as the request goes onto the socket): asked again, it answers in its own words.
        ctx.beforeSideEffect({ kind: "delete", boxId: target.boxId });
        throw new LifecycleError({
          code: "provider_unavailable",
          status: 503,
          boxId: target.boxId,
          message: `boat.dev could not be reached, so the delete was not sent. The computer was kept fenced; retry Delete to reconcile it`,
        });
      }
      throw new LifecycleError({
        code: "deletion_unconfirmed",
        boxId: target.boxId,
        message: LIFECYCLE_MESSAGES.deleteUnconfirmed,
        cause: error,
      });
    }
    if (failure.kind === "api" && failure.code === "invalid_response") {
      return invalidReceipt(ctx, target);
    }
    // The provider's own status and words. A 5xx, 408 or 429 may follow a committed delete or a busy
    // provider: the fence stays prepared (ambiguous). Any other 4xx is a refusal: blocked until retried.
    if (failure.status >= 500 || failure.status === 429 || failure.status === 408) {
      throw new LifecycleError({
        code: failure.status >= 500 ? "provider_unavailable" : "provider_refused",
        status: failure.status >= 500 ? 502 : failure.status,
        boxId: target.boxId,
        ...(failure.retryAfterMs === undefined ? {} : { retryAfterMs: failure.retryAfterMs }),
        message: `boat delete failed: ${failure.message}. The computer was kept fenced; retry Delete to reconcile it`,
      });
    }
    // A fence already gone was settled by another caller meanwhile: the Boat itself says how it stands.
    if (!(await markBlocked(ctx, target.boxId))) return directCheck(ctx, target, "pending");
    throw new LifecycleError({
      code: "provider_refused",
      status: failure.status,
      boxId: target.boxId,
      message: `boat delete failed: ${failure.message}`,
    });
  }
  // Crash window: boat.dev accepted the DELETE but its receipt is not journaled; the fence is prepared,
  // so a later retry sends DELETE again and boat.dev answers with the same running operation.
  ctx.crash.point("delete.after-delete-response");

  if (!isBound(op, target.boxId)) return invalidReceipt(ctx, target);
  if (op.status === "blocked") {
    const blockedNow = await markBlocked(ctx, target.boxId, op);
    return directCheck(ctx, target, blockedNow ? "blocked" : "pending");
  }
  try {
    await markAccepted(ctx, target.boxId, op);
  } catch (error) {
    if (isOutOfDate(error)) return receiptRefused(ctx, target, op);
    throw error;
  }
  // Crash window: the receipt is journaled. From here on a second DELETE would be blind: recovery only
  // polls this operation and reads the Boat.
  ctx.crash.point("delete.after-accepted");
  ctx.logger.info?.("boat deletion accepted", { boxId: target.boxId, operationId: op.id });
  if (op.status === "completed") {
    await finishDeletion(ctx, target.boxId);
    return "confirmed";
  }
  return followOperation(ctx, target, op);
}

/** Follows the operation of a fence that already holds a receipt, exactly as after our own DELETE. */
async function followJournaled(
  ctx: Context,
  target: DeletionTarget,
  record: BoatDeletionRecord,
): Promise<DeletionOutcome> {
  if (record.operationId === undefined || record.status === undefined || record.status === "blocked") {
    return reconcileRecord(ctx, record);
  }
  return followOperation(ctx, target, {
    id: record.operationId,
    kind: "sandbox",
    targetId: record.boxId,
    status: record.status,
  });
}

/**
 * One reconcile of a journaled fence, without sending DELETE: one poll of its operation (if any), then the
 * direct read. A prepared fence can only be confirmed by a direct 404/410.
 */
export async function reconcileRecord(ctx: Context, record: BoatDeletionRecord): Promise<DeletionOutcome> {
  const target: DeletionTarget = { boxId: record.boxId, name: record.name, ownerBotId: record.ownerBotId };
  let blocked = record.phase === "blocked";
  if (record.operationId !== undefined) {
    let polled: OperationView | undefined;
    try {
      polled = await ctx.client.getDeletionOperation(record.operationId, { targetId: record.boxId });
    } catch (error) {
      // boat.dev's own 404/410 on an accepted fence's operation: nothing will ever settle it by polling.
      if (classifyProviderError(error).kind === "absent" && record.phase === "accepted") {
        return operationUnknown(ctx, target, record.operationId);
      }
      // Otherwise (unavailable, a proxy's envelope-less 404): not proof, the direct read decides.
    }
    if (polled !== undefined && isBound(polled, record.boxId, record.operationId)) {
      if (polled.status === "completed") {
        // A fence changed meanwhile (another caller settled it): the direct read decides.
        if (record.phase === "accepted" && !(await markStatus(ctx, record.boxId, polled)))
          return directCheck(ctx, target, "pending");
        await finishDeletion(ctx, record.boxId);
        return "confirmed";
      }
      if (polled.status === "blocked") {
        blocked = record.phase === "blocked" || (await markBlocked(ctx, record.boxId, polled));
      } else if (
        record.phase === "accepted" &&
        (STATUS_RANK[polled.status] ?? 0) > (STATUS_RANK[record.status ?? "pending"] ?? 0)
      ) {
        // False: the fence changed meanwhile; the direct read below decides either way.
        await markStatus(ctx, record.boxId, polled);
      }
    }
  }
  return directCheck(ctx, target, blocked ? "blocked" : "pending");
}
