import { judgeOwnerLiveness } from "@drydock/file-lock";
import {
  findUnsettledRestore,
  inspectWorkspaceLock,
  isSagaError,
  WORKSPACE_EDIT_LOCK_PURPOSE,
  withWorkspaceLock,
} from "@drydock/restore-saga";
import type { Bot, BotRegistry } from "../bots.js";
import { HttpProblem } from "../http-errors.js";
import { drydockCommandPrefix } from "../recovery.js";
import {
  hasActiveSagas,
  sagaStore,
  type WorkspaceContext,
  workspaceExists,
  workspaceRoot,
} from "./workspaces.js";

/** What the guards of a workspace need: where it is, and the registry an edit re-checks its bot in. */
export type GuardContext = WorkspaceContext & { readonly bots: Pick<BotRegistry, "get"> };

/** Why a restore stands in the way, as asked: deleting, retiring, creating under the id, editing, reading. */
export type UnsettledIntent = "delete" | "retire-deleted" | "create" | "edit" | "read";

export function refuseStrayShard(ctx: WorkspaceContext, botId: string, kept: string): void {
  if (!ctx.strayShards.has(botId)) return;
  throw new HttpProblem(
    409,
    "restore_unsettled",
    `Restores of this bot's workspace were recorded where the data directory was before it was moved or copied, and have not settled: its files may be half restored, so ${kept}. Run \`${drydockCommandPrefix(ctx.dataDir)} status\` for the sagas, the path they name and what to do (settle them where they were, then restart this server).`,
    { recoveryRequired: true },
  );
}

/**
 * Refuses (409 `restore_unsettled`) while a restore of the bot's workspace stands in the way (restore-saga's
 * `findUnsettledRestore`). Before the workspace is retired (bot deleted, id taken again): any saga that has
 * not ended or cannot be read, since its recovery must come first. Before an edit: one that may have left
 * files half-restored (stopped past `mutation_started`, or unreadable). Finished sagas not yet archived and
 * orphans of a killed create never count.
 */
export async function refuseUnsettledRestores(
  ctx: WorkspaceContext,
  botId: string,
  intent: UnsettledIntent,
): Promise<void> {
  if (!workspaceExists(ctx, botId)) return;
  refuseStrayShard(ctx, botId, intent === "read" ? "nothing was read" : "nothing was changed");
  // Before the workspace goes, any restore that has not ended (one stopped before its first change is
  // settled by an abort first); before an edit or a read, one that may have left files half-restored.
  const found = await findUnsettledRestore(sagaStore(ctx, botId), {
    anyActive: intent !== "edit" && intent !== "read",
  });
  if (found === null) return;
  // Asked while deleting this bot, retiring a deleted bot's workspace, creating a bot under the id of a
  // deleted one, or editing the workspace.
  const kept = {
    delete: "so the bot was kept",
    "retire-deleted": "so the deleted bot's workspace was not retired",
    create: `so no bot was created under the id '${botId}'`,
    edit: "so nothing was changed",
    read: "so nothing was read",
  }[intent];
  if (found.kind === "unsettled") {
    // Running right now (its owner alive and not failed): nothing for a person, only a wait.
    const runner = await runningRestoreOwner(ctx, botId, found.operationId);
    if (runner !== null) {
      throw new HttpProblem(
        409,
        "restore_running",
        `Restore ${found.operationId} of this bot's workspace is running (process ${runner.pid}), ${kept}. Retry once it has finished.`,
        { recoveryRequired: false, operationId: found.operationId },
      );
    }
  }
  const show = `${drydockCommandPrefix(ctx.dataDir)} restores show ${found.operationId}`;
  const then = {
    delete: "then delete the bot",
    "retire-deleted": `then send DELETE /v1/bots/${botId} again`,
    create: "then create the bot again",
    edit: "then retry",
    read: "then retry",
  }[intent];
  const message =
    found.kind === "unsettled"
      ? `Restore ${found.operationId} of this bot's workspace has not settled (phase ${found.phase}), ${kept}: its workspace may be half restored. Settle it first (run: ${show}, then the command it prints), ${then}.`
      : found.kind === "busy"
        ? `Restore ${found.operationId} of this bot's workspace could not be read just now (${found.reason}), ${kept}. Retry in a moment.`
        : `Restore ${found.operationId} of this bot's workspace cannot be verified (${found.reason}), so whether it left files half-restored is unknown, ${kept}. Inspect it (run: ${show}; docs/OPERATORS.md says how to set an unverifiable saga aside), ${then}.`;
  throw new HttpProblem(409, "restore_unsettled", message, {
    recoveryRequired: found.kind !== "busy",
    operationId: found.operationId,
  });
}

/** Whether restore `operationId`'s saga says it failed (recovery_required); false when unreadable or absent. */
async function sagaFailed(ctx: WorkspaceContext, botId: string, operationId: string): Promise<boolean> {
  try {
    return (await sagaStore(ctx, botId).load(operationId)).phase === "recovery_required";
  } catch {
    return false;
  }
}

/**
 * Whether the restore whose lock `owner` holds the workspace runs right now: its owner alive and its saga
 * (if readable yet) not failed. A failed restore's live owner keeps the lock for recovery: a person's.
 */
async function restoreRuns(
  ctx: WorkspaceContext,
  botId: string,
  owner: NonNullable<ReturnType<typeof inspectWorkspaceLock>>,
): Promise<boolean> {
  return judgeOwnerLiveness(owner) !== "dead" && !(await sagaFailed(ctx, botId, owner.payload.transactionId));
}

/** The process running restore `operationId` right now (see `restoreRuns`), or null (also when unreadable). */
async function runningRestoreOwner(
  ctx: WorkspaceContext,
  botId: string,
  operationId: string,
): Promise<{ pid: number } | null> {
  let owner: ReturnType<typeof inspectWorkspaceLock>;
  try {
    owner = inspectWorkspaceLock({ dataDir: ctx.dataDir, workspaceRoot: workspaceRoot(ctx, botId) });
  } catch {
    return null;
  }
  if (owner === null) return startingRestore(ctx, botId, operationId);
  if (owner.payload.transactionId !== operationId) return null;
  return (await restoreRuns(ctx, botId, owner)) ? { pid: owner.pid } : null;
}

/**
 * A restore that has recorded `created` and not yet taken the workspace lock (it reads its checkpoint and
 * creates its saga first) is starting, not stopped, while the process that created it lives: a wait, as
 * the recovery controller's initiator check says. Once that process is gone the saga is a person's (an
 * abort settles it).
 */
async function startingRestore(
  ctx: WorkspaceContext,
  botId: string,
  operationId: string,
): Promise<{ pid: number } | null> {
  try {
    const saga = await sagaStore(ctx, botId).load(operationId);
    const actorPid = saga.events[0]?.evidence.actorPid;
    if (saga.phase !== "created" || typeof actorPid !== "number") return null;
    return judgeOwnerLiveness({ pid: actorPid }) === "alive" ? { pid: actorPid } : null;
  } catch {
    return null;
  }
}

/**
 * Reads take no lock, so while a restore holds the workspace (running, or stopped and kept for recovery)
 * a read would serve a mix of restored and unrestored files as if nothing were wrong: refused instead,
 * 409 `restore_running` (a wait) or `restore_unsettled` (a person settles it), naming the restore. An edit's
 * lock is no reason (its write is one atomic rename). A lock that cannot be read is refused too.
 */
export async function refuseReadDuringRestore(ctx: WorkspaceContext, botId: string): Promise<void> {
  if (!workspaceExists(ctx, botId)) return;
  refuseStrayShard(ctx, botId, "nothing was read");
  let owner: ReturnType<typeof inspectWorkspaceLock>;
  try {
    owner = inspectWorkspaceLock({ dataDir: ctx.dataDir, workspaceRoot: workspaceRoot(ctx, botId) });
  } catch (error) {
    throw new HttpProblem(
      409,
      "restore_unsettled",
      `This bot's workspace lock cannot be read (${ctx.scrubPaths(error instanceof Error ? error.message : String(error))}), so whether a restore left files half-restored is unknown; nothing was read. Run: ${drydockCommandPrefix(ctx.dataDir)} locks list.`,
      { recoveryRequired: true },
    );
  }
  if (owner === null) {
    // No restore holds the workspace, but one may have stopped half-way and lost its lock (removed by
    // hand): the saga is the evidence, as for an edit. Checked only when the saga store holds a saga that
    // is not archived (one directory listing; nearly always none).
    if (hasActiveSagas(ctx, botId)) await refuseUnsettledRestores(ctx, botId, "read");
    return;
  }
  if (owner.payload.purpose === WORKSPACE_EDIT_LOCK_PURPOSE) return;
  const operationId = owner.payload.transactionId;
  if (await restoreRuns(ctx, botId, owner)) {
    throw new HttpProblem(
      409,
      "restore_running",
      `Restore ${operationId} of this bot's workspace is running (process ${owner.pid}): its files are a mix of before and after until it ends, so nothing was read. Retry once it has finished.`,
      { recoveryRequired: false, operationId },
    );
  }
  throw new HttpProblem(
    409,
    "restore_unsettled",
    `Restore ${operationId} of this bot's workspace stopped before it settled and keeps its lock: its files may be half restored, so nothing was read. Settle it first (run: ${drydockCommandPrefix(ctx.dataDir)} restores show ${operationId}, then the command it prints), then retry.`,
    { recoveryRequired: true, operationId },
  );
}

/**
 * File writes, deletions and checkpoints hold the workspace lock for their short duration, like a restore
 * does for its whole run: a write can never land in the middle of a restore (which would make the result
 * neither the checkpoint nor the state before it), nor in a workspace whose failed restore retained the
 * lock for a fenced recovery (a rollback would silently discard it). Those answer 409 with the saga's
 * message (workspace_locked: wait; recovery_required: see drydock restores show). Their lock's purpose is
 * `workspace-edit`: each of them is atomic per file (a write renames a flushed temp over its target, a
 * deletion is one unlink, a checkpoint's blobs are unreferenced until its manifest's atomic rename), so a
 * process killed under it leaves nothing to recover but temps, and its dead lock is taken over by the
 * next acquisition (and removed at startup, `reapStoppedEdits` in server.ts) instead of refusing every
 * later edit and restore of the workspace as a "restore that stopped".
 */
export function withWorkspace<T>(
  ctx: GuardContext,
  botId: string,
  kind: string,
  fn: () => T | Promise<T>,
  forBot?: Readonly<Bot>,
): Promise<T> {
  // A restore's lock in the way (running, or kept for recovery) is named as a restore's refusal is:
  // `details.recoveryRequired` and the `operationId` to act on, with the command when a person must.
  return withWorkspaceLock(
    {
      dataDir: ctx.dataDir,
      workspaceRoot: workspaceRoot(ctx, botId),
      transactionId: `${kind}-${crypto.randomUUID()}`,
      purpose: "workspace-edit",
      waitMs: 2_000,
    },
    async () => {
      // An edit for `forBot` checked the bot before it waited for the lock: if that bot was deleted
      // meanwhile (its workspace retired, the id perhaps taken by a new bot), it must not land here.
      if (forBot) {
        const current = await ctx.bots.get(botId);
        if (current?.createdAt !== forBot.createdAt) {
          throw new HttpProblem(
            404,
            "bot_not_found",
            `No bot with id '${botId}' (it was deleted meanwhile).`,
          );
        }
      }
      // A restore that stopped half-way normally keeps this lock, which refuses the edit. If that lock is
      // gone (removed by hand, lost with a disk), the saga is the evidence: an edit now would be mixed
      // into a half-restored workspace, and its rollback would have to refuse or lose it.
      if (kind !== "retire") await refuseUnsettledRestores(ctx, botId, "edit");
      return fn();
    },
  ).catch(async (error: unknown) => {
    const operationId = isSagaError(error) ? error.details.ownerOperationId : undefined;
    if (!isSagaError(error) || operationId === undefined) throw error;
    // Its lock's owner may be alive yet have failed: it keeps the lock for recovery (recovery_required).
    // (An edit's lock has no saga: the lock's own verdict stands.)
    const recoveryRequired =
      error.code === "RECOVERY_REQUIRED" || (await sagaFailed(ctx, botId, operationId));
    const show = `${drydockCommandPrefix(ctx.dataDir)} restores show ${operationId}`;
    throw new HttpProblem(
      error.status,
      error.code,
      recoveryRequired
        ? `${error.message} Restore ${operationId} failed and keeps the workspace for its recovery; settle it first (run: ${show}, then the command it prints).`
        : error.message,
      { recoveryRequired, operationId },
    );
  });
}
