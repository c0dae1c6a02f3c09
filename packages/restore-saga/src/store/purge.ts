import { join } from "node:path";
import { fsyncDirectory } from "@drydock/file-lock";
import { SagaError } from "../errors.js";
import { prettyCanonical } from "../internal/canonical.js";
import { ensurePrivateDir, PublishFailure, readRegularFile, replaceFile } from "../internal/files.js";
import { SAGA_PURGE_RECEIPT_SCHEMA, type SagaPurgeReceipt, SagaPurgeReceiptSchema } from "../schema.js";
import { present, type StoreContext, withShardAndOpLocks } from "./context.js";
import { assertOperationId, corrupt, exactFence, fenceMismatch, writeFailed } from "./failures.js";
import { parseExact, recordableTime } from "./format.js";
import { replay } from "./replay.js";
import type { PurgeResult, SagaFence } from "./types.js";

/**
 * Purging: an archived saga's events deleted for good, its receipt (`.purged/<id>.json`) written first, so
 * the id is never used again and a retry finishes what a crash left.
 */

export async function purgeArchived(
  ctx: StoreContext,
  operationId: string,
  fence: SagaFence,
): Promise<PurgeResult> {
  assertOperationId(operationId);
  const exact = exactFence(operationId, fence, "Purging");
  return withShardAndOpLocks(ctx, operationId, () => purgeLocked(ctx, operationId, exact));
}

export function readReceipt(ctx: StoreContext, id: string): SagaPurgeReceipt | null {
  const bytes = readRegularFile(ctx.fs, ctx.receiptPath(id), {
    maxBytes: 4096,
    what: `purge receipt of ${id}`,
  });
  if (!bytes) return null;
  const parsed = SagaPurgeReceiptSchema.safeParse(parseExact(bytes, id, "its purge receipt"));
  if (!parsed.success || parsed.data.operationId !== id) {
    throw corrupt(id, "its purge receipt does not match the receipt schema");
  }
  return parsed.data;
}

/** Moves the archive (if still there) aside and deletes it; idempotent, so a retry finishes a purge. */
export function finishPurge(ctx: StoreContext, id: string): void {
  const archived = join(ctx.archiveDir, id);
  const purging = join(ctx.purgeDir, id);
  try {
    if (present(ctx, archived)) {
      ensurePrivateDir(ctx.fs, ctx.purgeDir);
      // One rename takes the saga out of the archive; what is in .purge is only ever deleted. The rename is
      // made durable before any file goes, so a power loss never leaves a half-deleted archive behind.
      ctx.fs.renameSync(archived, purging);
      ctx.crash.point("saga.after-purge-rename");
      fsyncDirectory(ctx.fs, ctx.archiveDir);
      fsyncDirectory(ctx.fs, ctx.purgeDir);
    }
    const stat = present(ctx, purging);
    if (stat) {
      if (!stat.isDirectory()) throw corrupt(id, "what is being purged is not a directory");
      for (const name of ctx.fs.readdirSync(purging)) ctx.fs.unlinkSync(join(purging, name));
      ctx.fs.rmdirSync(purging);
    }
    if (present(ctx, ctx.purgeDir)) fsyncDirectory(ctx.fs, ctx.purgeDir);
  } catch (error) {
    if (error instanceof SagaError) throw error;
    throw writeFailed(id, "purge_commit_unknown", error, null);
  }
}

export function purgeLocked(ctx: StoreContext, id: string, fence: SagaFence): PurgeResult {
  if (present(ctx, ctx.opDir(id))) {
    throw new SagaError({
      code: "INVALID_TRANSITION",
      operationId: id,
      message: `Restore saga ${id} is still active; only an archived saga can be purged. Nothing was changed.`,
    });
  }
  const matches = (actual: { seq: number; headHash: string }): boolean =>
    actual.seq === fence.expectedSeq && actual.headHash === fence.expectedHash;
  const done = (receipt: SagaPurgeReceipt, alreadyPurged: boolean): PurgeResult => ({
    purged: true,
    alreadyPurged,
    operationId: id,
    phase: receipt.phase,
    seq: receipt.seq,
    headHash: receipt.headHash,
  });
  const earlier = readReceipt(ctx, id);
  if (earlier) {
    if (!matches(earlier)) throw fenceMismatch(id, fence, earlier);
    finishPurge(ctx, id);
    return done(earlier, true);
  }
  if (!present(ctx, join(ctx.archiveDir, id))) {
    if (present(ctx, join(ctx.purgeDir, id))) throw corrupt(id, "it is being purged but has no receipt");
    throw new SagaError({
      code: "NOT_FOUND",
      operationId: id,
      message: `No archived restore saga ${id} exists.`,
    });
  }
  // Verified before anything goes: a chain that does not check out is evidence, and stays.
  const state = replay(ctx, id, join(ctx.archiveDir, id), false, true).state;
  if (!state) throw corrupt(id, "its archive holds no event");
  if (!matches(state)) throw fenceMismatch(id, fence, state);
  const clock = ctx.now();
  const receipt: SagaPurgeReceipt = {
    schema: SAGA_PURGE_RECEIPT_SCHEMA,
    version: 1,
    operationId: id,
    phase: state.phase,
    seq: state.seq,
    headHash: state.headHash,
    purgedAt: recordableTime(id, clock, clock, "purge_not_committed"),
  };
  try {
    ensurePrivateDir(ctx.fs, ctx.receiptsDir);
    // Durable before anything is deleted: from here the purge is decided, and a retry finishes it.
    replaceFile(ctx.fs, ctx.receiptsDir, `${id}.json`, Buffer.from(prettyCanonical(receipt), "utf8"));
  } catch (error) {
    const failure = error instanceof PublishFailure ? error : null;
    if (failure?.stage === "after") throw writeFailed(id, "purge_commit_unknown", failure.cause, null);
    throw writeFailed(id, "purge_not_committed", failure?.cause ?? error, null);
  }
  ctx.crash.point("saga.after-purge-receipt");
  finishPurge(ctx, id);
  ctx.verified.forget(join(ctx.archiveDir, id));
  return done(receipt, false);
}
