import { listWorkspaces } from "@drydock/recovery-controller";
import { isSagaError, type RestoreResult, restoreCheckpoint, type SagaState } from "@drydock/restore-saga";
import type { ServerContext } from "../context.js";
import { HttpProblem, toHttpError } from "../http-errors.js";
import { refuseStrayShard } from "./workspace-guards.js";
import { listWorkspaceCheckpoints, sagaStore, type WorkspaceContext, workspaceRoot } from "./workspaces.js";

/** A restore saga as the API shows it: its phase and events, never its evidence or paths. */
export function sagaView(state: SagaState) {
  return {
    operationId: state.operationId,
    phase: state.phase,
    basePhase: state.basePhase,
    seq: state.seq,
    headHash: state.headHash,
    terminal: state.terminal,
    archived: state.archived,
    events: state.events.map((e) => ({ seq: e.seq, phase: e.phase, timestamp: e.timestamp })),
  };
}

/**
 * Every failed restore answers with `details.recoveryRequired` (boolean) and, when known, the
 * `operationId` a person would act on: this restore's own saga when it failed, or the restore whose lock
 * blocks the workspace (also as `blockingOperationId`). A failure of this restore that kept the workspace
 * lock answers 503 `restore_recovery_required`; a workspace held by another restore keeps the saga's code
 * and status (409 recovery_required / workspace_locked), like every other workspace route.
 */
export function restoreFailure(error: unknown, commandPrefix: string): HttpProblem {
  if (isSagaError(error)) {
    const { operationId: own, ownerOperationId: blocking, workspaceLockRetained } = error.details;
    const recoveryRequired = workspaceLockRetained === true || error.code === "RECOVERY_REQUIRED";
    const operationId = own ?? blocking;
    const ownRetained = recoveryRequired && own !== undefined && workspaceLockRetained === true;
    const next = operationId ? ` Run: ${commandPrefix} restores show ${operationId}` : "";
    return new HttpProblem(
      ownRetained ? 503 : error.status,
      ownRetained ? "restore_recovery_required" : error.code,
      `${error.message}${recoveryRequired ? next : ""}`,
      {
        recoveryRequired,
        ...(operationId === undefined ? {} : { operationId }),
        ...(blocking !== undefined && blocking !== own ? { blockingOperationId: blocking } : {}),
      },
    );
  }
  const mapped = toHttpError(error);
  const previous = mapped.body.error.details;
  // A refusal that already says whether a person must act (restore_unsettled) keeps its word.
  const problem = new HttpProblem(mapped.status, mapped.body.error.code, mapped.body.error.message, {
    recoveryRequired: false,
    ...(typeof previous === "object" && previous !== null ? previous : {}),
  });
  // The server log still shows what really failed (an internal error's details never reach the body).
  if (!(error instanceof HttpProblem)) problem.cause = error;
  return problem;
}

/**
 * Restores one of the bot's checkpoints into its workspace (restore-saga's `restoreCheckpoint`), under the
 * bot's exclusivity; every failure becomes `restoreFailure`'s answer.
 */
export async function restoreBotCheckpoint(
  ctx: ServerContext,
  botId: string,
  checkpointId: string,
): Promise<{
  ok: true;
  operationId: string;
  phase: RestoreResult["phase"];
  warning: RestoreResult["warning"];
}> {
  let replaced = false;
  try {
    const bot = await ctx.bots.get(botId);
    if (!bot) throw new HttpProblem(404, "bot_not_found", `No bot with id '${botId}'.`);
    refuseStrayShard(ctx, botId, "nothing was restored");
    const known = await listWorkspaceCheckpoints(ctx, botId);
    if (!known.some((c) => c.checkpointId === checkpointId)) {
      throw new HttpProblem(404, "checkpoint_not_found", `This bot has no checkpoint '${checkpointId}'.`);
    }
    return await ctx.exclusivity.run(botId, async () => {
      const result = await restoreCheckpoint({
        dataDir: ctx.dataDir,
        workspaceRoot: workspaceRoot(ctx, botId),
        checkpointId,
        // Under the workspace lock, which the bot's deletion (another server's too) needs to retire its
        // workspace: the bot checked above was not deleted, and its id perhaps taken again, while the
        // checkpoint was read. Otherwise a deleted bot's files would be restored into the new bot's
        // workspace at the same path, as edits check too (withWorkspace's forBot).
        confirmWorkspace: async () => {
          const current = await ctx.bots.get(botId);
          if (current?.createdAt === bot.createdAt) return null;
          replaced = true;
          return `bot ${botId} was deleted${current ? " and created again" : ""} while the restore started`;
        },
        ...(ctx.restoreCrash ? { crash: ctx.restoreCrash } : {}),
      });
      return {
        ok: true,
        operationId: result.operationId,
        phase: result.phase,
        warning: result.warning,
      } as const;
    });
  } catch (error) {
    if (replaced && isSagaError(error) && error.code === "WORKSPACE_MISMATCH") {
      throw new HttpProblem(
        404,
        "bot_not_found",
        `No bot with id '${botId}' (it was deleted meanwhile); nothing was restored.`,
      );
    }
    throw restoreFailure(error, ctx.commandPrefix());
  }
}

/**
 * The restore with this operation id, active or archived, and the bot whose workspace it belongs to; null
 * when none has it. Every workspace directory is looked in, also a deleted bot's whose retirement has not
 * run yet (a retired one's sagas moved with it); a bot without a workspace directory has never had a
 * file, so no restore.
 */
export async function findRestore(
  ctx: Pick<WorkspaceContext, "dataDir">,
  operationId: string,
): Promise<{ botId: string; restore: ReturnType<typeof sagaView> } | null> {
  for (const { botId } of listWorkspaces(ctx.dataDir)) {
    const store = sagaStore(ctx, botId);
    for (const load of [() => store.load(operationId), () => store.loadArchived(operationId)]) {
      try {
        return { botId, restore: sagaView(await load()) };
      } catch (error) {
        if ((error as { code?: string }).code !== "NOT_FOUND") throw error;
      }
    }
  }
  return null;
}
