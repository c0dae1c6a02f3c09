import { join } from "node:path";
import { fsyncDirectory } from "@drydock/file-lock";
import { errnoOf, SagaError } from "../errors.js";
import { OPERATION_ID_PATTERN } from "../schema.js";
import { present, type StoreContext, withShardAndOpLocks } from "./context.js";
import { assertOperationId, corrupt, exactFence, fenceMismatch, writeFailed } from "./failures.js";
import { loadLocked, replay } from "./replay.js";
import type { ArchiveResult, SagaFence, SagaState } from "./types.js";

/** Archiving: a finished saga renamed into `.archive/` (one rename, idempotent), and read back from there. */

export async function archiveTerminal(
  ctx: StoreContext,
  operationId: string,
  fence: SagaFence,
): Promise<ArchiveResult> {
  assertOperationId(operationId);
  const exact = exactFence(operationId, fence, "Archiving");
  const { expectedSeq, expectedHash } = exact;
  return withShardAndOpLocks(ctx, operationId, () => {
    const active = ctx.opDir(operationId);
    const archived = join(ctx.archiveDir, operationId);
    const activeExists = present(ctx, active) !== null;
    const archivedExists = present(ctx, archived) !== null;
    const mismatch = (state: SagaState): SagaError => fenceMismatch(operationId, exact, state);
    if (activeExists && archivedExists) throw corrupt(operationId, "it is both active and archived");
    if (!activeExists) {
      if (!archivedExists) {
        if (present(ctx, ctx.receiptPath(operationId))) {
          throw new SagaError({
            code: "CONFLICT",
            operationId,
            message: `Restore saga ${operationId} was archived and then purged; only its receipt is left. Nothing was changed.`,
          });
        }
        throw new SagaError({
          code: "NOT_FOUND",
          operationId,
          message: `No restore saga ${operationId} exists.`,
        });
      }
      const state = replay(ctx, operationId, archived, false, true).state;
      if (!state) throw corrupt(operationId, "its archive holds no event");
      if (state.seq !== expectedSeq || state.headHash !== expectedHash || !state.terminal)
        throw mismatch(state);
      return archiveResult(state, true);
    }
    const state = loadLocked(ctx, operationId);
    if (state.seq !== expectedSeq || state.headHash !== expectedHash) throw mismatch(state);
    if (!state.terminal) {
      throw new SagaError({
        code: "INVALID_TRANSITION",
        operationId,
        phase: state.phase,
        message: `Restore saga ${operationId} is still ${state.phase}; only a finished saga can be archived.`,
      });
    }
    ctx.verified.forget(active);
    try {
      ctx.fs.renameSync(active, archived);
    } catch (error) {
      throw writeFailed(operationId, "archive_not_committed", error, null);
    }
    ctx.crash.point("saga.after-archive-rename");
    try {
      fsyncDirectory(ctx.fs, ctx.archiveDir);
      fsyncDirectory(ctx.fs, ctx.shardDir);
    } catch (error) {
      throw writeFailed(operationId, "archive_commit_unknown", error, null);
    }
    return archiveResult(state, false);
  });
}

export async function loadArchived(ctx: StoreContext, operationId: string): Promise<SagaState> {
  assertOperationId(operationId);
  const dir = join(ctx.archiveDir, operationId);
  // The receipt decides: once it exists the saga is purged, even if a crash left its archive to delete.
  if (present(ctx, ctx.receiptPath(operationId))) {
    throw new SagaError({
      code: "NOT_FOUND",
      operationId,
      message: `Restore saga ${operationId} was purged; only its receipt (${ctx.receiptPath(operationId)}) is left.`,
    });
  }
  const state = replay(ctx, operationId, dir, false, true).state;
  if (!state) throw corrupt(operationId, "its archive holds no event");
  return state;
}

export async function listArchived(ctx: StoreContext): Promise<string[]> {
  let names: string[];
  try {
    names = ctx.fs.readdirSync(ctx.archiveDir);
  } catch (error) {
    if (errnoOf(error) === "ENOENT") return [];
    throw new SagaError({
      code: "CORRUPT",
      cause: error,
      message: `The archive ${ctx.archiveDir} could not be listed (${errnoOf(error) ?? "error"}). Check the disk, then retry.`,
    });
  }
  return names
    .filter((name) => OPERATION_ID_PATTERN.test(name) && !present(ctx, ctx.receiptPath(name)))
    .sort();
}

function archiveResult(state: SagaState, alreadyArchived: boolean): ArchiveResult {
  return {
    archived: true,
    alreadyArchived,
    operationId: state.operationId,
    phase: state.phase,
    seq: state.seq,
    headHash: state.headHash,
  };
}
