import { join } from "node:path";
import { fsyncDirectory } from "@drydock/file-lock";
import { errnoOf, SagaError } from "../errors.js";
import { canonicalJson, prettyCanonical } from "../internal/canonical.js";
import { PublishFailure, publishNewFile } from "../internal/files.js";
import { issuesText } from "../internal/text.js";
import {
  type CreateEvidence,
  CreateEvidenceSchema,
  OPERATION_ID_PATTERN,
  type SagaEvent,
  type SagaHead,
} from "../schema.js";
import { buildEvent, checkEvidence, commitEvent, committedState } from "./commit.js";
import {
  ensureLayout,
  present,
  type StoreContext,
  stateLock,
  withNestedOpLock,
  workspaceIdentity,
} from "./context.js";
import { assertOperationId, writeFailed } from "./failures.js";
import { makeHead } from "./format.js";
import { loadLocked, replay } from "./replay.js";
import type { SagaState } from "./types.js";

/** `create`: the shard's room and the id's history checked, then the genesis HEAD and event 1 published. */

/**
 * Whether the shard has room for one more saga. Every saga is a directory in the shard or in its archive,
 * and where the file system keeps a directory's link count as 2 + its subdirectories (ext4, xfs, tmpfs),
 * the two link counts bound the sagas from above: below the limit, that answers without listing every
 * saga ever archived on every create (10,000 names by default). Near the limit, or where the link count
 * is not kept (btrfs reports 1, some FUSE and network mounts 2), the directories are listed and the names
 * counted.
 */
export function hasRoomForSaga(ctx: StoreContext): boolean {
  let bound = 0;
  for (const dir of [ctx.shardDir, ctx.archiveDir]) {
    const links = Number(present(ctx, dir)?.nlink ?? 0);
    // The shard holds .locks and .archive (ensureLayout made them): a count below 4 there is one the file
    // system does not keep (btrfs reports 1, some FUSE and network mounts a constant 2).
    if (links < (dir === ctx.shardDir ? 4 : 2)) return countSagas(ctx) < ctx.limits.maxSagasPerShard;
    bound += links - 2;
  }
  return bound < ctx.limits.maxSagasPerShard || countSagas(ctx) < ctx.limits.maxSagasPerShard;
}

export function countSagas(ctx: StoreContext): number {
  let count = 0;
  for (const dir of [ctx.shardDir, ctx.archiveDir]) {
    let names: string[];
    try {
      names = ctx.fs.readdirSync(dir);
    } catch (error) {
      throw new SagaError({
        code: "CORRUPT",
        cause: error,
        message: `The restore saga directory ${dir} could not be listed (${errnoOf(error) ?? "error"}). Nothing was written; check the disk, then retry.`,
      });
    }
    for (const name of names) if (OPERATION_ID_PATTERN.test(name)) count += 1;
  }
  return count;
}

export async function create(
  ctx: StoreContext,
  operationId: string,
  input: CreateEvidence,
): Promise<SagaState> {
  assertOperationId(operationId);
  const given = parseCreateEvidence(operationId, input);
  ensureLayout(ctx);
  return stateLock(ctx, ctx.shardLock, `the restore saga shard of ${ctx.workspaceRoot}`, () => {
    const { dir, exists } = claimId(ctx, operationId);
    // Lock order everywhere: shard lock, then the operation's lock.
    return withNestedOpLock(ctx, operationId, () => createLocked(ctx, operationId, dir, exists, given));
  });
}

/** The caller's part of the `created` evidence, or INVALID_EVIDENCE (the store adds the workspace itself). */
function parseCreateEvidence(operationId: string, input: CreateEvidence): CreateEvidence {
  const parsedInput = CreateEvidenceSchema.safeParse(input);
  if (!parsedInput.success) {
    throw new SagaError({
      code: "INVALID_EVIDENCE",
      operationId,
      phase: "created",
      cause: parsedInput.error,
      message: `The evidence for created of restore saga ${operationId} is not allowed (${issuesText(parsedInput.error.issues)}${
        typeof input === "object" &&
        input !== null &&
        ("workspaceRoot" in input || "workspaceIdentity" in input)
          ? "; the store sets workspaceRoot and workspaceIdentity itself"
          : ""
      }). Nothing was written.`,
    });
  }
  return parsedInput.data;
}

/**
 * Under the shard lock: refuses an id already archived or purged, and a new saga the shard has no room
 * for. `exists`: a directory of this id is there (an orphan to reuse, or a saga that already exists).
 */
function claimId(ctx: StoreContext, operationId: string): { dir: string; exists: boolean } {
  if (present(ctx, join(ctx.archiveDir, operationId))) {
    throw new SagaError({
      code: "ALREADY_EXISTS",
      operationId,
      message: `Restore saga ${operationId} was already used and archived; choose a new operation id.`,
    });
  }
  if (present(ctx, ctx.receiptPath(operationId)) || present(ctx, join(ctx.purgeDir, operationId))) {
    throw new SagaError({
      code: "ALREADY_EXISTS",
      operationId,
      message: `Restore saga ${operationId} was already used and purged; choose a new operation id.`,
    });
  }
  const dir = ctx.opDir(operationId);
  const exists = present(ctx, dir) !== null;
  if (!exists && !hasRoomForSaga(ctx)) {
    throw new SagaError({
      code: "LIMIT",
      operationId,
      message: `The workspace ${ctx.workspaceRoot} already has ${ctx.limits.maxSagasPerShard} restore sagas (active and archived). Purge old archives first.`,
    });
  }
  return { dir, exists };
}

/** Under the shard lock and the operation's lock: event 1 built, the directory made, then published. */
function createLocked(
  ctx: StoreContext,
  operationId: string,
  dir: string,
  exists: boolean,
  given: CreateEvidence,
): SagaState {
  const evidence = checkEvidence(ctx, operationId, "created", {
    ...given,
    workspaceRoot: ctx.workspaceRoot,
    workspaceIdentity: workspaceIdentity(ctx),
  });
  if (exists) {
    // A create that died before publishing event 1 leaves an event-free directory: reuse it.
    const previous = replay(ctx, operationId, dir, true, false);
    if (!previous.orphan) {
      throw new SagaError({
        code: "ALREADY_EXISTS",
        operationId,
        message: `Restore saga ${operationId} already exists; load it instead of creating it again.`,
      });
    }
  }
  // Built (and its clock checked) before the saga's directory is made: a refusal leaves nothing.
  const { event, bytes } = buildEvent(ctx, null, operationId, "created", evidence);
  let head: { head: SagaHead; bytes: Buffer };
  try {
    if (!exists) ctx.fs.mkdirSync(dir, { mode: 0o700 });
    // The saga's directory name must be durable before any event in it is acknowledged: a power
    // loss would otherwise forget the whole saga after create and advance returned. Also when an
    // earlier create made the directory and died before this flush.
    fsyncDirectory(ctx.fs, ctx.shardDir);
  } catch (error) {
    throw writeFailed(operationId, "event_not_committed", error, null);
  }
  try {
    if (!present(ctx, join(dir, "HEAD"))) {
      // Genesis HEAD first, so "events but no HEAD" is never a legitimate crash state.
      try {
        publishNewFile(
          ctx.fs,
          dir,
          "HEAD",
          Buffer.from(prettyCanonical(makeHead(operationId, null)), "utf8"),
        );
      } catch (error) {
        const failure = error instanceof PublishFailure ? error : null;
        throw writeFailed(
          operationId,
          failure?.stage === "after" ? "event_commit_unknown" : "event_not_committed",
          failure?.cause ?? error,
          { seq: 1, hash: event.hash },
        );
      }
      ctx.crash.point("saga.after-genesis-head");
    }
    head = commitEvent(ctx, operationId, dir, event, bytes);
  } catch (error) {
    const observed = reconcileCreate(ctx, operationId, error, event);
    if (observed) return observed;
    throw error;
  }
  // Event 1 and HEAD are published: the state is the event just written, as advance returns it. A
  // re-read here could fail (EIO, a replaced workspace) and report a committed create as a failure
  // that "changed nothing", while a retry would then answer ALREADY_EXISTS.
  ctx.verified.remember(dir, { events: [{ event, bytes }], head });
  return committedState(
    {
      operationId,
      workspaceRoot: ctx.workspaceRoot,
      workspaceIdentity: evidence.workspaceIdentity as string,
    },
    [],
    event,
  );
}

export function reconcileCreate(
  ctx: StoreContext,
  id: string,
  error: unknown,
  event: SagaEvent,
): SagaState | null {
  if (
    !(error instanceof SagaError) ||
    error.code !== "WRITE_FAILED" ||
    error.commitState === "event_not_committed"
  ) {
    return null;
  }
  try {
    const observed = loadLocked(ctx, id);
    const first = observed.events[0];
    if (observed.seq === 1 && first && canonicalJson(first.evidence) === canonicalJson(event.evidence)) {
      return observed;
    }
  } catch {
    // The original failure is the one to report.
  }
  return null;
}
