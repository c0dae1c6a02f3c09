import { basename, dirname, join } from "node:path";
import { type FileOps, fsyncDirectory } from "@drydock/file-lock";
import { listWorkspaces } from "@drydock/recovery-controller";
import type { CheckpointStore } from "@drydock/restore-saga";
import type { BotRegistry } from "../bots.js";
import { type GuardContext, refuseUnsettledRestores, withWorkspace } from "./workspace-guards.js";
import {
  ensureWorkspace,
  hasWorkspaceData,
  sagaStore,
  type WorkspaceContext,
  workspaceRoot,
  workspacesDir,
} from "./workspaces.js";

/** Moves a directory, kept, to `.retired/<name>.<ms>.<random>` beside it (same file system), durably. */
export function moveAside(fs: FileOps, path: string): void {
  const retiredDir = join(dirname(path), ".retired");
  fs.mkdirSync(retiredDir, { recursive: true, mode: 0o700 });
  fs.renameSync(path, join(retiredDir, `${basename(path)}.${Date.now()}.${crypto.randomUUID().slice(0, 8)}`));
  fsyncDirectory(fs, retiredDir);
  fsyncDirectory(fs, dirname(path));
}

/** Where one workspace's three parts are: its files, its saga shard and (by its path) its checkpoints. */
export interface RetiredWorkspace {
  /** The workspace directory; it must exist (the caller holds its lock, which resolves it). */
  root: string;
  /** Its restore sagas' shard directory (restore-saga's `SagaStore.shardDir`); may be absent. */
  shard: string;
  /** The directory holding every workspace (flushed once the workspace directory is gone). */
  workspacesDir: string;
}

/**
 * The moves of a retirement, made under the workspace lock by `retireWorkspace` (and by a power-loss sweep
 * through a model `fs`). The shard moves first, while the workspace directory is still the one its sagas
 * were bound to (a saga left behind a recreated directory would no longer verify); then the files, then
 * the checkpoints of the empty path. A stop anywhere leaves leftovers `hasWorkspaceData` sees, which the
 * next retirement (the id taken again, or DELETE of the missing bot) finishes.
 */
export async function retireWorkspaceParts(
  fs: FileOps,
  checkpoints: Pick<CheckpointStore, "retireCheckpoints">,
  where: RetiredWorkspace,
): Promise<void> {
  if (fs.existsSync(where.shard)) moveAside(fs, where.shard);
  if (fs.readdirSync(where.root).length > 0) {
    moveAside(fs, where.root);
    fs.mkdirSync(where.root, { mode: 0o700 });
  }
  await checkpoints.retireCheckpoints(where.root);
  fs.rmdirSync(where.root);
  fsyncDirectory(fs, where.workspacesDir);
}

/**
 * Retires a deleted bot's workspace, keeping everything: its restore sagas' shard moves to
 * `restore-sagas/.retired/`, its files to `<dataDir>/workspaces/.retired/<botId>.<ms>.<random>` (beside the
 * workspaces, so on their file system), and its checkpoints leave the listings (restore-saga's
 * `retireCheckpoints`: their manifests move to `checkpoints/retired/`). A workspace, its checkpoints and
 * its sagas are found by the path the bot id names, so without this a new bot under the same id would
 * read the old bot's files, restore its checkpoints and list its restores as its own. Under the workspace
 * lock (a live edit or a stopped restore's lock refuses), with the unsettled-restore check made under it
 * (see `retireWorkspaceParts` for the order of the moves).
 */
export async function retireWorkspace(
  ctx: GuardContext,
  botId: string,
  intent: "retire-deleted" | "create",
): Promise<void> {
  ensureWorkspace(ctx, botId);
  await withWorkspace(ctx, botId, "retire", async () => {
    // A deleted bot's workspace only: if the id was taken again meanwhile (by another server on this
    // directory, while this one waited for the lock), the workspace is that bot's now.
    if (intent === "retire-deleted" && (await ctx.bots.get(botId)) !== null) return;
    await refuseUnsettledRestores(ctx, botId, intent);
    await retireWorkspaceParts(ctx.fs, ctx.checkpoints, {
      root: workspaceRoot(ctx, botId),
      shard: sagaStore(ctx, botId).shardDir,
      workspacesDir: workspacesDir(ctx),
    });
  });
}

/** A deleted bot whose workspace retirement did not finish, with what a person does about it. */
export interface UnfinishedRetirement {
  botId: string;
  message: string;
}

/**
 * Deleted bots whose workspace directory is still where it was: their retirement did not finish (it could
 * not run then, or the server stopped in it). Each needs DELETE /v1/bots/:botId again (or the next start,
 * which finishes what it can).
 */
export async function unfinishedRetirements(
  ctx: WorkspaceContext & { readonly bots: Pick<BotRegistry, "list"> },
): Promise<UnfinishedRetirement[]> {
  const bots = new Set((await ctx.bots.list()).map((bot) => bot.botId));
  const unfinished: UnfinishedRetirement[] = [];
  for (const { botId } of listWorkspaces(ctx.dataDir)) {
    // Only what DELETE /v1/bots/:botId would retire (an empty directory is no one's data).
    if (bots.has(botId) || !(await hasWorkspaceData(ctx, botId))) continue;
    unfinished.push({
      botId,
      message: `Bot ${botId} was deleted, but retiring its workspace did not finish (its files, checkpoints or restores are partly where they were): send DELETE /v1/bots/${botId} to finish it. It is kept, never deleted.`,
    });
  }
  return unfinished;
}
