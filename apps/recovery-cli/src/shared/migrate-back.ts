import {
  chmodSync,
  closeSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readdirSync,
  renameSync,
  writeSync,
} from "node:fs";
import { dirname, join } from "node:path";
import { CHECKPOINTS_DIR, WORKSPACES_DIR } from "@drydock/facts";
import { openCheckpointStore } from "@drydock/restore-saga";
import type { Storage, StorageExport, WorkspaceFile } from "@drydock/storage";
import { pgWorkspacesOf } from "@drydock/storage-postgres";
import { CliError } from "../errors.js";
import { type LocalWorkspace, scanTree, summarize, type WorkspacesToMove } from "./migrate-workspaces.js";

/**
 * `storage migrate --to file|sqlite` from postgres, the workspaces: each registered bot's head in the
 * database becomes the local tree `<dataDir>/workspaces/<botId>` (files with their modes, each fsynced) and
 * each of its checkpoints a restore-saga checkpoint under its original id and createdAt (`importCheckpoint`,
 * every blob verified). Bots whose workspace is empty (no files, no checkpoints) are skipped; deleted bots'
 * retired workspaces stay in the retired schema.
 */

/** Every registered bot's workspace in the postgres source, blobs included (refused when any is damaged). */
export async function pgWorkspacesToMove(source: Storage, data: StorageExport): Promise<WorkspacesToMove> {
  const store = pgWorkspacesOf(source);
  if (store === null) throw new CliError("CLI_FAILED", "the source storage has no postgres workspaces");
  const bots: LocalWorkspace[] = [];
  for (const { botId } of data.bots) {
    const found = await store.exportWorkspace(botId, { blobs: true });
    if (found.badBlobs.length > 0) {
      throw new CliError(
        "ACTION_NOT_ELIGIBLE",
        `The workspace of bot ${botId} in postgres names ${found.badBlobs.length} blob(s) that are missing or damaged, so it cannot move and nothing was changed. Repair or restore the database, then run the migration again.`,
      );
    }
    if (found.files.length === 0 && found.checkpoints.length === 0) continue;
    bots.push({ botId, files: found.files, checkpoints: found.checkpoints, blobs: found.blobs ?? new Map() });
  }
  return summarize(bots, 0);
}

/** The local side must be empty: no bot workspace, no checkpoint manifest (nothing is ever overwritten). */
export function refuseLocalWorkspaces(dataDir: string): void {
  const list = (dir: string) => {
    try {
      return readdirSync(dir).filter((name) => !name.startsWith("."));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return [];
      throw error;
    }
  };
  const held = [
    ...list(join(dataDir, WORKSPACES_DIR)).map((name) => join(dataDir, WORKSPACES_DIR, name)),
    ...list(join(dataDir, CHECKPOINTS_DIR, "manifests")).map((n) =>
      join(dataDir, CHECKPOINTS_DIR, "manifests", n),
    ),
  ];
  if (held.length > 0) {
    throw new CliError(
      "ACTION_NOT_ELIGIBLE",
      `The data directory already holds local workspaces or checkpoints (${held.slice(0, 5).join(", ")}${held.length > 5 ? ", …" : ""}), so the postgres workspaces are not written over them and nothing was changed. Move them out of the data directory, then run the migration again.`,
    );
  }
}

/** One file: temp, write, fsync, exact mode, rename, fsync of its directory. */
function writeDurable(path: string, bytes: Uint8Array, mode: number): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o755 });
  const temp = `${path}.migrate-${process.pid}.tmp`;
  const fd = openSync(temp, "w", 0o600);
  try {
    let off = 0;
    while (off < bytes.length) off += writeSync(fd, bytes, off, bytes.length - off);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  chmodSync(temp, mode);
  renameSync(temp, path);
  const dir = openSync(dirname(path), "r");
  try {
    fsyncSync(dir);
  } finally {
    closeSync(dir);
  }
}

/**
 * Writes every workspace as local files and checkpoints (idempotent: a re-run after a kill writes the same
 * bytes again and finds the same checkpoints), then reads each back: the tree's manifest must equal the
 * head's, each checkpoint's the store's.
 */
export async function writeWorkspacesBack(dataDir: string, move: WorkspacesToMove): Promise<void> {
  const checkpoints = openCheckpointStore({ dataDir });
  for (const bot of move.bots) {
    const root = join(dataDir, WORKSPACES_DIR, bot.botId);
    mkdirSync(root, { recursive: true, mode: 0o755 });
    for (const file of bot.files) {
      writeDurable(join(root, ...file.path.split("/")), bot.blobs.get(file.sha256) as Uint8Array, file.mode);
    }
    for (const c of bot.checkpoints) {
      await checkpoints.importCheckpoint({
        checkpointId: c.checkpointId,
        workspaceRoot: root,
        createdAt: c.createdAt,
        files: c.files,
        blobs: bot.blobs,
      });
    }
  }
  const files = (list: readonly { path: string; size: number; mode: number; sha256: string }[]) =>
    JSON.stringify(list.map((f) => [f.path, f.size, f.mode, f.sha256]));
  const checkpointsOf = (list: { checkpointId: string; createdAt: number; files: WorkspaceFile[] }[]) =>
    JSON.stringify(
      list
        .map((c) => [c.checkpointId, c.createdAt, files(c.files)])
        .sort((x, y) => (String(x[0]) < String(y[0]) ? -1 : 1)),
    );
  for (const bot of move.bots) {
    const root = join(dataDir, WORKSPACES_DIR, bot.botId);
    const treeSame = files(scanTree(root, new Map())) === files(bot.files);
    const stored = (await checkpoints.listCheckpoints(root)).map((summary) => ({
      checkpointId: summary.checkpointId,
      createdAt: Date.parse(summary.createdAt),
      files: checkpoints
        .readVerifiedManifest(summary.checkpointId)
        .manifest.entries.filter((e): e is WorkspaceFile => e.type === "file"),
    }));
    if (!treeSame || checkpointsOf(stored) !== checkpointsOf(bot.checkpoints)) {
      throw new CliError(
        "CLI_FAILED",
        `The workspace of bot ${bot.botId} was not verified in ${root} (${!treeSame ? "its files differ from the postgres head" : "its checkpoints differ from the postgres ones"}). The data directory is still bound to postgres, which is unchanged. Report this as a bug in drydock.`,
      );
    }
  }
}
