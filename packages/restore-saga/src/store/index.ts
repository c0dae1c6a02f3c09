import { type CommitState, errnoOf, SagaError } from "../errors.js";
import { lostDuringWrite } from "../internal/state-lock.js";
import { archiveTerminal, listArchived, loadArchived } from "./archive.js";
import { advance } from "./commit.js";
import { makeContext } from "./context.js";
import { create } from "./create.js";
import { invalid } from "./failures.js";
import { listPending, removeOrphan } from "./pending.js";
import { purgeArchived } from "./purge.js";
import { load } from "./replay.js";
import type { SagaStore, SagaStoreOptions } from "./types.js";

export { EVENT_HASH_DOMAIN, eventHash, HEAD_ANCHOR_DOMAIN } from "./format.js";
export {
  type AdvanceInput,
  type ArchiveResult,
  DEFAULT_SAGA_LIMITS,
  type PendingDiagnostic,
  type PendingDiagnosticStatus,
  type PendingList,
  type PendingSaga,
  type PurgeResult,
  type RemoveOrphanResult,
  type SagaFence,
  type SagaLimits,
  type SagaState,
  type SagaStore,
  type SagaStoreOptions,
} from "./types.js";

/**
 * The saga store of one workspace: a hash-chained journal per restore, one directory per saga. This only
 * wires: the context (options, layout, memo) is built once, and each call is a module's function of it
 * (replay.ts, commit.ts, create.ts, archive.ts, purge.ts, pending.ts), behind the `guard` boundary.
 */
export function openSagaStore(options: SagaStoreOptions): SagaStore {
  const ctx = makeContext(options);
  // A read-only store refuses every write before it touches anything.
  const write = <T>(what: string, work: () => Promise<T>): Promise<T> =>
    ctx.readOnly
      ? Promise.reject(
          invalid(
            `This saga store was opened read-only, so it cannot ${what}. Nothing was changed; open it without readOnly to write.`,
          ),
        )
      : work();
  return Object.freeze({
    workspaceRoot: ctx.workspaceRoot,
    shardDir: ctx.shardDir,
    create: (id, evidence) =>
      write("create a saga", () => guard(create(ctx, id, evidence), "event_commit_unknown")),
    load: (id) => guard(load(ctx, id), null),
    advance: (id, input) =>
      write("advance a saga", () => guard(advance(ctx, id, input), "event_commit_unknown")),
    archiveTerminal: (id, fence) =>
      write("archive a saga", () => guard(archiveTerminal(ctx, id, fence), "archive_commit_unknown")),
    loadArchived: (id) => guard(loadArchived(ctx, id), null),
    listPending: (listOptions) => guard(listPending(ctx, listOptions), null),
    listArchived: () => guard(listArchived(ctx), null),
    purgeArchived: (id, fence) =>
      write("purge a saga", () => guard(purgeArchived(ctx, id, fence), "purge_commit_unknown")),
    removeOrphan: (id) =>
      write("remove a directory", () => guard(removeOrphan(ctx, id), "orphan_removal_unfinished")),
  } satisfies SagaStore);
}

/**
 * The boundary: every failure leaves the store as a SagaError. Each file operation inside is wrapped where
 * it happens; this only catches what slipped through, and says the least it can promise. `lostLock` is
 * what a call that writes reports when its state lock turned out to be someone else's by the time it let
 * go (the only LOCK_OWNERSHIP_LOST inside the store): its write may collide with theirs. Null: a read.
 */
async function guard<T>(work: Promise<T>, lostLock: CommitState | null): Promise<T> {
  const writes = lostLock !== null;
  try {
    return await work;
  } catch (error) {
    if (error instanceof SagaError && error.code === "LOCK_OWNERSHIP_LOST" && writes) {
      throw lostDuringWrite(error, lostLock);
    }
    if (error instanceof SagaError) throw error;
    throw new SagaError({
      code: writes ? "WRITE_FAILED" : "CORRUPT",
      cause: error,
      ...(writes ? { commitState: "event_commit_unknown" as const } : {}),
      message: `The restore saga store failed unexpectedly (${errnoOf(error) ?? (error as Error)?.name ?? "error"}). Reload the saga before deciding anything.`,
    });
  }
}
