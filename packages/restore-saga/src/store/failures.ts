import { type CommitState, errnoOf, SagaError } from "../errors.js";
import { HASH_PATTERN, OPERATION_ID_PATTERN, type Phase } from "../schema.js";
import type { SagaFence } from "./types.js";

/** The store's refusals and failures, built from plain values (no file is touched here). */

export function invalid(message: string): SagaError {
  return new SagaError({ code: "INVALID_ARGUMENT", message });
}

export function corrupt(operationId: string, why: string, cause?: unknown): SagaError {
  return new SagaError({
    code: "CORRUPT",
    operationId,
    cause,
    message: `The restore saga ${operationId} is inconsistent: ${why}. Its files were left exactly as they are; inspect them before any recovery.`,
  });
}

export function assertOperationId(operationId: unknown): asserts operationId is string {
  if (typeof operationId !== "string" || !OPERATION_ID_PATTERN.test(operationId)) {
    throw invalid("An operation id is 1-128 letters, digits, '-' or '_', starting with a letter or digit.");
  }
  // A saga's state lock is `.locks/<id>.lock`, and the shard's is `.locks/shard.lock`: the id `shard` would
  // make create wait for the lock it holds itself. The shard lock keeps its name (an older version must
  // still exclude a newer one during an upgrade), so the id is refused; in any case, for file systems that
  // ignore case. Every other name the store derives from an id cannot collide: ids hold no '.', and the
  // store's own entries (`.locks`, `.archive`, `.purge`, `.purged`) start with one.
  if (operationId.toLowerCase() === "shard") {
    throw invalid(
      `The operation id ${JSON.stringify(operationId)} is reserved (the saga store's shard lock has that name). Choose another id; nothing was changed.`,
    );
  }
}

/** The caller's fence, or CONFLICT when it is malformed: archiving and purging act only on an exact state. */
export function exactFence(operationId: string, fence: SagaFence | undefined, doing: string): SagaFence {
  const { expectedSeq, expectedHash } = fence ?? ({} as SagaFence);
  if (
    !Number.isSafeInteger(expectedSeq) ||
    typeof expectedHash !== "string" ||
    !HASH_PATTERN.test(expectedHash)
  ) {
    throw new SagaError({
      code: "CONFLICT",
      operationId,
      message: `${doing} restore saga ${operationId} needs the exact expectedSeq and expectedHash. Nothing was changed.`,
    });
  }
  return { expectedSeq, expectedHash };
}

/** How a saga's head differs from a fence, in words: the seq when it differs, else the head hash. */
export function headDifference(
  fence: SagaFence,
  actual: { seq: number; headHash: string; phase: Phase },
): string {
  return actual.seq === fence.expectedSeq
    ? `is at seq ${actual.seq} (${actual.phase}) as the caller expected, but its head hash is ${actual.headHash}, not ${fence.expectedHash}`
    : `is at seq ${actual.seq} (${actual.phase}), not the seq ${fence.expectedSeq} the caller expected`;
}

export function fenceMismatch(
  operationId: string,
  fence: SagaFence,
  actual: { seq: number; headHash: string; phase: Phase },
): SagaError {
  return new SagaError({
    code: "CONFLICT",
    operationId,
    phase: actual.phase,
    expectedSeq: fence.expectedSeq,
    expectedHash: fence.expectedHash,
    actualSeq: actual.seq,
    actualHash: actual.headHash,
    message: `Restore saga ${operationId} ${headDifference(fence, actual)}. Nothing was changed.`,
  });
}

export function writeFailed(
  operationId: string,
  commitState: CommitState,
  cause: unknown,
  intended: { seq: number; hash: string } | null,
): SagaError {
  const what: Record<CommitState, string> = {
    event_not_committed: "nothing was written; the saga is as it was",
    event_commit_unknown: "the event may or may not be on disk",
    event_committed_head_unsettled: "the event is on disk but HEAD still names its predecessor",
    head_settlement_unknown: "the event is on disk and HEAD may or may not name it",
    archive_not_committed: "the saga was not archived",
    archive_commit_unknown: "the saga may or may not be archived",
    purge_not_committed: "nothing was purged; the archived saga is as it was",
    purge_commit_unknown: "the purge is recorded but its events may not all be deleted; retry the purge",
    orphan_removal_unfinished:
      "the unpublished saga directory may be partly removed (it never held an event); retry the removal",
  };
  return new SagaError({
    code: "WRITE_FAILED",
    operationId,
    commitState,
    cause,
    ...(intended ? { intendedSeq: intended.seq, intendedHash: intended.hash } : {}),
    message: `Writing restore saga ${operationId} failed (${errnoOf(cause) ?? "error"}): ${what[commitState]}. Reload the saga and accept only the exact step you meant; never retry blindly.`,
  });
}
