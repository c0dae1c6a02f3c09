import { dirname } from "node:path";
import type { RestoreResult } from "@drydock/restore-saga";
import type { Bot } from "../bots.js";
import type { ServerContext } from "../context.js";
import { FILE_WRITE_CRASH_POINT } from "../deps.js";
import { HttpProblem } from "../http-errors.js";
import { sweepStaleWorkspaceTemps, workspaceFiles } from "../workspace-files.js";
import { findRestore, restoreBotCheckpoint, type sagaView } from "./restores.js";
import { refuseReadDuringRestore, withWorkspace } from "./workspace-guards.js";
import { retireWorkspace, type UnfinishedRetirement, unfinishedRetirements } from "./workspace-retirement.js";
import {
  ensureWorkspace,
  hasWorkspaceData,
  listWorkspaceCheckpoints,
  workspaceExists,
  workspaceRoot,
} from "./workspaces.js";

/** A checkpoint as GET /v1/bots/:botId/checkpoints lists it (never the workspace's server path). */
export interface CheckpointListing {
  checkpointId: string;
  createdAt: string;
  kind?: string;
  files: number;
  bytes: number;
}

/** What POST …/restore answers. */
export interface RestoreAnswer {
  ok: true;
  operationId: string;
  phase: RestoreResult["phase"];
  warning: RestoreResult["warning"];
}

/** What GET /v1/restores/:operationId shows: the bot and the restore (a saga's view, or the store's record). */
export interface FoundRestore {
  botId: string;
  restore: ReturnType<typeof sagaView> | Record<string, unknown>;
}

/**
 * Where a bot's workspace lives, chosen once per server (`createServerContext`): the route handlers and the
 * bot lifecycle call only this. `local`: files under `<dataDir>/workspaces/<botId>`, guarded by the workspace
 * lock and the restore saga (file and sqlite). `store`: the storage's WorkspaceStore (postgres, decision
 * 0031): blobs and a versioned head in the database, each change one compare-and-set, nothing on local disk.
 * Every method is called for a bot the caller found in the registry (the store does not check it).
 */
export interface WorkspaceBackend {
  readonly kind: "local" | "store";
  writeFile(bot: Readonly<Bot>, path: string, bytes: Buffer): Promise<{ bytes: number }>;
  readFile(botId: string, path: string): Promise<Buffer>;
  deleteFile(bot: Readonly<Bot>, path: string): Promise<void>;
  /** `manifestDigest`: local checkpoints only (the store's manifest is a row of the database). */
  createCheckpoint(
    bot: Readonly<Bot>,
  ): Promise<{ checkpointId: string; files: number; bytes: number; manifestDigest?: string }>;
  listCheckpoints(botId: string): Promise<CheckpointListing[]>;
  restore(botId: string, checkpointId: string): Promise<RestoreAnswer>;
  findRestore(operationId: string): Promise<FoundRestore | null>;
  /** Whether anything of a workspace under this bot id is kept (files, checkpoints, restores). */
  hasData(botId: string): Promise<boolean>;
  /** A bot was created: its (empty) workspace is made ready. */
  created(botId: string): Promise<void>;
  /**
   * Retires the workspace of a deleted bot (`retire-deleted`: not if the id was taken again meanwhile) or of
   * the id a new bot is being created under (`create`). Everything is kept, never listed again.
   */
  retire(botId: string, intent: "retire-deleted" | "create"): Promise<void>;
  /** Deleted bots whose workspace retirement did not finish (GET /v1/recovery, finished at start). */
  unfinishedRetirements(): Promise<UnfinishedRetirement[]>;
}

/** Local files under the data directory, guarded by the workspace lock and the restore saga. */
export function localWorkspaces(ctx: ServerContext): WorkspaceBackend {
  return {
    kind: "local",
    async writeFile(bot, path, bytes) {
      const { botId } = bot;
      ensureWorkspace(ctx, botId);
      const root = workspaceRoot(ctx, botId);
      return withWorkspace(
        ctx,
        botId,
        "file-write",
        () => {
          // Temps an interrupted write left beside this one (and at the top) go now, under the lock.
          const parent = dirname(path);
          sweepStaleWorkspaceTemps(root, { dirs: parent === "." ? [""] : ["", parent] });
          return workspaceFiles(root, {
            maxFileBytes: ctx.maxFileBytes,
            // Tests only: the write's data is in its flushed temp, not renamed yet, the workspace lock held.
            ...(ctx.restoreCrash
              ? { hooks: { beforeRename: () => ctx.restoreCrash?.point(FILE_WRITE_CRASH_POINT) } }
              : {}),
          }).write(path, bytes);
        },
        bot,
      );
    },
    async readFile(botId, path) {
      await refuseReadDuringRestore(ctx, botId);
      return workspaceFiles(workspaceRoot(ctx, botId), { maxFileBytes: ctx.maxFileBytes }).read(path);
    },
    async deleteFile(bot, path) {
      const { botId } = bot;
      if (!workspaceExists(ctx, botId)) {
        throw new HttpProblem(404, "file_not_found", `No file at '${path}' in this workspace.`);
      }
      await withWorkspace(
        ctx,
        botId,
        "file-delete",
        () => workspaceFiles(workspaceRoot(ctx, botId)).remove(path),
        bot,
      );
    },
    createCheckpoint(bot) {
      const { botId } = bot;
      return ctx.exclusivity.run(botId, () => {
        ensureWorkspace(ctx, botId);
        return withWorkspace(
          ctx,
          botId,
          "checkpoint",
          () => {
            // An interrupted write's temp is not the bot's file: it goes before the capture, never into it.
            sweepStaleWorkspaceTemps(workspaceRoot(ctx, botId));
            return ctx.checkpoints.createCheckpoint(workspaceRoot(ctx, botId));
          },
          bot,
        );
      });
    },
    async listCheckpoints(botId) {
      // Built field by field: the store's rows also carry the workspace's server path, which never leaves.
      const rows = await listWorkspaceCheckpoints(ctx, botId);
      return rows.map((c) => ({
        checkpointId: c.checkpointId,
        createdAt: c.createdAt,
        ...(c.kind === undefined ? {} : { kind: c.kind }),
        files: c.files,
        bytes: c.bytes,
      }));
    },
    restore: (botId, checkpointId) => restoreBotCheckpoint(ctx, botId, checkpointId),
    findRestore: (operationId) => findRestore(ctx, operationId),
    hasData: (botId) => hasWorkspaceData(ctx, botId),
    async created(botId) {
      ctx.fs.mkdirSync(workspaceRoot(ctx, botId), { recursive: true, mode: 0o700 });
    },
    retire: (botId, intent) => retireWorkspace(ctx, botId, intent),
    unfinishedRetirements: () => unfinishedRetirements(ctx),
  };
}
