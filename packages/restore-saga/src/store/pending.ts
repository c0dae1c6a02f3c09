import { join } from "node:path";
import { fsyncDirectory, isProcessLevelErrno } from "@drydock/file-lock";
import { errnoOf, SagaError } from "../errors.js";
import { transientFailure } from "../internal/files.js";
import { withStateLock } from "../internal/state-lock.js";
import { OPERATION_ID_PATTERN } from "../schema.js";
import { present, type StoreContext, sweepLocksOnce, withShardAndOpLocksFor } from "./context.js";
import { assertOperationId, corrupt, invalid } from "./failures.js";
import { type Replay, replay } from "./replay.js";
import type { PendingDiagnostic, PendingList, PendingSaga, RemoveOrphanResult } from "./types.js";

/** The pending listing, and the removal of orphans (directories of a create that never published). */

export async function listPending(
  ctx: StoreContext,
  listOptions: { after?: string; limit?: number } = {},
): Promise<PendingList> {
  const limit = listOptions.limit ?? 64;
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > 64)
    throw invalid("listPending's limit is 1 to 64.");
  if (listOptions.after !== undefined) assertOperationId(listOptions.after);
  let names: string[];
  try {
    names = ctx.fs.readdirSync(ctx.shardDir);
  } catch (error) {
    if (errnoOf(error) === "ENOENT")
      return { items: [], diagnostics: [], nextCursor: null, truncated: false };
    const errno = errnoOf(error);
    if (isProcessLevelErrno(errno)) {
      throw transientFailure(`The restore saga shard ${ctx.shardDir}`, "listed", errno, error);
    }
    throw corrupt("(shard)", `the shard directory cannot be listed (${errno ?? "error"})`, error);
  }
  const after = listOptions.after;
  const ids = names
    .filter((name) => OPERATION_ID_PATTERN.test(name) && (after === undefined || name > after))
    .sort();
  const page = ids.slice(0, limit);
  const items: PendingSaga[] = [];
  const diagnostics: PendingDiagnostic[] = [];
  // Short waits: a listing reports a busy saga instead of queueing behind it.
  const listLock = { ...ctx.lock, waitMs: 200 };
  const read = (id: string): Promise<Replay> =>
    withStateLock(ctx.opLock(id), `restore saga ${id}`, ctx.fs, listLock, () =>
      replay(ctx, id, ctx.opDir(id), true, false),
    );
  for (const id of page) {
    try {
      sweepLocksOnce(ctx);
      let state = await read(id);
      if (!state.state && ctx.readOnly) {
        // Reported as it is: removing it is a write, left to the next store that may write.
        diagnostics.push({ operationId: id, status: "orphan_unpublished", code: null, recoverable: true });
        continue;
      }
      if (!state.state) {
        // No published event: no restore ever ran under this directory. It is removed once no create can
        // be working on it (under the shard and operation locks); a create that published in between is
        // read again and listed as it now is.
        let outcome: "removed" | "absent" | "published" | SagaError;
        try {
          outcome = await withShardAndOpLocksFor(ctx, id, listLock, () => removeOrphanLocked(ctx, id));
        } catch (error) {
          // A directory that does not verify is reported as corrupt, below.
          if (!(error instanceof SagaError) || error.code === "CORRUPT") throw error;
          outcome = error;
        }
        if (outcome === "removed" || outcome === "absent") continue;
        if (outcome instanceof SagaError) {
          if (outcome.code === "NOT_FOUND") continue;
          // Not removable just now (another process holds the shard, a write failed): the next listing
          // retries. No event, so nothing else is at stake meanwhile.
          diagnostics.push({
            operationId: id,
            status: "orphan_unpublished",
            code: outcome.code,
            recoverable: true,
          });
          continue;
        }
        state = await read(id);
      }
      if (!state.state) {
        // Read again after a create published it, and found unpublished once more: keep it listed.
        diagnostics.push({
          operationId: id,
          status: "orphan_unpublished",
          code: null,
          recoverable: true,
        });
      } else if (state.state.terminal) {
        diagnostics.push({
          operationId: id,
          status: "terminal_unarchived",
          code: null,
          recoverable: true,
        });
      } else {
        const s = state.state;
        items.push({
          operationId: id,
          phase: s.phase,
          basePhase: s.basePhase,
          seq: s.seq,
          headHash: s.headHash,
          updatedAt: s.events.at(-1)!.timestamp,
        });
      }
    } catch (error) {
      const code = error instanceof SagaError ? error.code : null;
      // Archived (or purged) by another process since the listing: not pending any more.
      if (code === "NOT_FOUND") continue;
      diagnostics.push({
        operationId: id,
        // WRITE_FAILED here is the one repair a replay makes, rolling HEAD forward: the chain verified,
        // only the write failed (the next load retries it).
        status: code === "LOCK_FAILED" ? "busy" : code === "WRITE_FAILED" ? "head_unsettled" : "corrupt",
        code,
        recoverable: false,
      });
    }
  }
  const truncated = ids.length > page.length;
  return { items, diagnostics, nextCursor: truncated ? page.at(-1)! : null, truncated };
}

export async function removeOrphan(ctx: StoreContext, operationId: string): Promise<RemoveOrphanResult> {
  assertOperationId(operationId);
  if (!present(ctx, ctx.shardDir)) return { operationId, removed: false };
  const outcome = await withShardAndOpLocksFor(ctx, operationId, ctx.lock, () =>
    removeOrphanLocked(ctx, operationId),
  );
  if (outcome === "published") {
    throw new SagaError({
      code: "INVALID_TRANSITION",
      operationId,
      message: `Restore saga ${operationId} has a published chain; only a directory whose create never published an event is removed. Nothing was changed.`,
    });
  }
  return { operationId, removed: outcome === "removed" };
}

/**
 * Under the shard lock and the operation's lock. A create holds both from making the saga's directory
 * until its first event and HEAD are published, so a directory found here with no published event has no
 * create working on it (its creator died, or failed and let go): it records no work, and is removed (its
 * genesis HEAD and temporaries, then the directory), durably. A published chain (or an archived or purged
 * saga of this id) is never touched: "published". A directory that does not verify as unpublished (an
 * unexpected file, a HEAD that is not this id's genesis HEAD) is CORRUPT, and left exactly as it is.
 */
export function removeOrphanLocked(ctx: StoreContext, id: string): "removed" | "absent" | "published" {
  const used =
    present(ctx, join(ctx.archiveDir, id)) ||
    present(ctx, ctx.receiptPath(id)) ||
    present(ctx, join(ctx.purgeDir, id));
  const dir = ctx.opDir(id);
  if (!present(ctx, dir)) return used ? "published" : "absent";
  // create refuses an archived or purged id before it makes a directory: this is no crash state.
  if (used) throw corrupt(id, "it has an unpublished directory, yet the id was already archived or purged");
  // Verifies what is there (an unpublished genesis HEAD, or nothing) and deletes temporaries, never
  // promoting one; an event file means a published chain.
  if (!replay(ctx, id, dir, true, false).orphan) return "published";
  ctx.verified.forget(dir);
  const failed = (error: unknown): SagaError =>
    new SagaError({
      code: "WRITE_FAILED",
      operationId: id,
      commitState: "orphan_removal_unfinished",
      cause: error,
      message: `Removing the unpublished directory of restore saga ${id} failed (${errnoOf(error) ?? "error"}). It never held an event, so no restore ran under it; what is left is still unpublished. Retry (the next listing does); check the disk if this persists.`,
    });
  try {
    for (const name of ctx.fs.readdirSync(dir)) {
      // The replay verified HEAD as this id's genesis HEAD and deleted every temporary.
      if (name !== "HEAD") throw corrupt(id, `its unpublished directory holds ${JSON.stringify(name)}`);
      ctx.fs.unlinkSync(join(dir, name));
    }
    ctx.fs.rmdirSync(dir);
  } catch (error) {
    if (error instanceof SagaError) throw error;
    throw failed(error);
  }
  try {
    fsyncDirectory(ctx.fs, ctx.shardDir);
  } catch (error) {
    throw failed(error);
  }
  return "removed";
}
