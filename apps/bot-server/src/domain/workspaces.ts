import { join } from "node:path";
import { RESTORE_SAGAS_DIR, WORKSPACES_DIR } from "@drydock/facts";
import { type FileOps, nodeFileOps } from "@drydock/file-lock";
import { strayRestoreShards } from "@drydock/recovery-controller";
import {
  type CheckpointStore,
  openCheckpointStore,
  openSagaStore,
  type SagaStore,
} from "@drydock/restore-saga";

/**
 * Where a bot's workspace, its checkpoints and its restore sagas are: all found by the path its bot id
 * names under the data directory. Shared by the routes and the domain modules (workspace guards,
 * retirement, restores), and built once per server.
 */
export interface WorkspaceContext {
  readonly dataDir: string;
  /** The file-system seam (file-lock's FileOps): the real one in the server, a model in a sweep. */
  readonly fs: FileOps;
  readonly checkpoints: CheckpointStore;
  /**
   * Bots whose saga shards a move or copy of the data directory left behind (found at the start: a data
   * directory is moved only while nothing runs on it): they are refused their workspace (reads, edits,
   * checkpoints, restores, deletion) until a person settles those restores where they were, as the message
   * says, and restarts the server.
   */
  readonly strayShards: ReadonlySet<string>;
  /** A workspace's saga shard is named after its path, which a bot id fixes: found once per bot. */
  readonly shardDirs: Map<string, string>;
  /** A message with the data directory elided (answers never name server paths). */
  scrubPaths(message: string): string;
}

export function openWorkspaceContext(
  dataDir: string,
  scrubPaths: (message: string) => string,
  fs: FileOps = nodeFileOps,
): WorkspaceContext {
  const strayShards = new Set<string>();
  for (const gap of strayRestoreShards(dataDir) ?? []) {
    if (gap.botId !== "(unknown)") strayShards.add(gap.botId);
  }
  return {
    dataDir,
    fs,
    checkpoints: openCheckpointStore({ dataDir, fs }),
    strayShards,
    shardDirs: new Map(),
    scrubPaths,
  };
}

export const workspacesDir = (ctx: Pick<WorkspaceContext, "dataDir">): string =>
  join(ctx.dataDir, WORKSPACES_DIR);

export const workspaceRoot = (ctx: Pick<WorkspaceContext, "dataDir">, botId: string): string =>
  join(ctx.dataDir, WORKSPACES_DIR, botId);

export const sagaStore = (ctx: Pick<WorkspaceContext, "dataDir">, botId: string): SagaStore =>
  openSagaStore({ stateDir: join(ctx.dataDir, RESTORE_SAGAS_DIR), workspaceRoot: workspaceRoot(ctx, botId) });

/**
 * A bot's workspace is (re)created only by what writes it (file writes, checkpoints, restores), before
 * its lock is taken (the lock resolves the directory); reads never create it.
 */
export function ensureWorkspace(ctx: Pick<WorkspaceContext, "dataDir" | "fs">, botId: string): void {
  ctx.fs.mkdirSync(workspacesDir(ctx), { recursive: true, mode: 0o700 });
  try {
    ctx.fs.mkdirSync(workspaceRoot(ctx, botId), { mode: 0o700 });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
  }
}

export const workspaceExists = (ctx: Pick<WorkspaceContext, "dataDir" | "fs">, botId: string): boolean =>
  ctx.fs.existsSync(workspaceRoot(ctx, botId));

/**
 * Whether anything of a workspace at this bot id's path exists: an entry in it, a checkpoint of it, or its
 * restore sagas.
 */
export async function hasWorkspaceData(ctx: WorkspaceContext, botId: string): Promise<boolean> {
  if (!ctx.fs.existsSync(workspacesDir(ctx))) return false;
  const root = workspaceRoot(ctx, botId);
  if (workspaceExists(ctx, botId) && ctx.fs.readdirSync(root).length > 0) return true;
  // Checkpoints are found by the workspace's real path, which exists only while its directory does.
  const created = !workspaceExists(ctx, botId);
  ensureWorkspace(ctx, botId);
  try {
    return (
      ctx.fs.existsSync(sagaStore(ctx, botId).shardDir) || (await ctx.checkpoints.hasCheckpointsOf(root))
    );
  } finally {
    if (created) ctx.fs.rmdirSync(root);
  }
}

/** A missing workspace has no checkpoints (the store would refuse to resolve it, naming its path). */
export const listWorkspaceCheckpoints = async (ctx: WorkspaceContext, botId: string) =>
  workspaceExists(ctx, botId) ? ctx.checkpoints.listCheckpoints(workspaceRoot(ctx, botId)) : [];

/** Whether the bot's saga shard holds a saga that is not archived (any entry not starting with "."). */
export function hasActiveSagas(ctx: WorkspaceContext, botId: string): boolean {
  let shard = ctx.shardDirs.get(botId);
  if (shard === undefined) {
    shard = sagaStore(ctx, botId).shardDir;
    ctx.shardDirs.set(botId, shard);
  }
  try {
    return ctx.fs.readdirSync(shard).some((name) => !name.startsWith("."));
  } catch (error) {
    // No shard: no saga. Anything else: let the full check read it and say what is wrong.
    return (error as NodeJS.ErrnoException).code !== "ENOENT";
  }
}
