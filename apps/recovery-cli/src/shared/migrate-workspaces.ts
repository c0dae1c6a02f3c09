import { createHash } from "node:crypto";
import { lstatSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { WORKSPACES_DIR } from "@drydock/facts";
import {
  allPending,
  listLocks,
  listWorkspaces,
  sagaStateDir,
  strayRestoreShards,
} from "@drydock/recovery-controller";
import { openCheckpointStore, openSagaStore } from "@drydock/restore-saga";
import type { Storage, WorkspaceFile } from "@drydock/storage";
import { instancesOf, pgWorkspacesOf, type WorkspaceImport } from "@drydock/storage-postgres";
import { CliError } from "../errors.js";

/**
 * `storage migrate --to postgres`, the workspaces: on file/sqlite a bot's files are the local tree
 * `<dataDir>/workspaces/<botId>` and its checkpoints restore-saga's store; on postgres they are the store's
 * heads, checkpoints and blobs. Each live bot's current files become its head and each checkpoint (its blobs
 * verified against the manifest's digests as they are read) a store checkpoint under the same id and
 * createdAt. Retired workspaces (`workspaces/.retired`, deleted bots) are not moved. The local tree is left in
 * place; a server on postgres never reads it.
 */

export interface LocalWorkspace extends WorkspaceImport {
  botId: string;
}

export interface WorkspacesToMove {
  bots: LocalWorkspace[];
  /** Deleted bots' retired workspaces, left behind. */
  retired: number;
  counts: { workspaces: number; files: number; checkpoints: number; bytes: number };
  /** Every manifest moved, for the preview's fence. */
  digest: string;
}

const byPath = (a: WorkspaceFile, b: WorkspaceFile) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0);
const sha256Of = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

/** The local tree's regular files (directories are implied by paths; anything else is refused). */
export function scanTree(root: string, blobs: Map<string, Uint8Array>): WorkspaceFile[] {
  const files: WorkspaceFile[] = [];
  const walk = (dir: string, prefix: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = prefix === "" ? entry.name : `${prefix}/${entry.name}`;
      const full = join(dir, entry.name);
      if (entry.isDirectory()) walk(full, path);
      else if (entry.isFile()) {
        const bytes = readFileSync(full);
        const sha256 = sha256Of(bytes);
        blobs.set(sha256, bytes);
        files.push({ type: "file", path, size: bytes.length, mode: lstatSync(full).mode & 0o777, sha256 });
      } else {
        throw new CliError(
          "ACTION_NOT_ELIGIBLE",
          `${full} is neither a file nor a directory, and a postgres workspace holds files only. Nothing was changed. Move it out of the workspace, then run the migration again.`,
        );
      }
    }
  };
  walk(root, "");
  return files.sort(byPath);
}

/**
 * Refuses (nothing changed) while any restore saga is unsettled or any workspace is locked, then reads every
 * live bot's workspace and checkpoints (each blob verified against its digest).
 */
export async function workspacesToMove(dataDir: string, commandPrefix: string): Promise<WorkspacesToMove> {
  const stray = strayRestoreShards(dataDir);
  const workspaces = listWorkspaces(dataDir);
  const unsettled: string[] = (stray ?? []).map((gap) => JSON.stringify(gap));
  for (const { botId, root } of workspaces) {
    const pending = await allPending(openSagaStore({ stateDir: sagaStateDir(dataDir), workspaceRoot: root }));
    if (pending.items.length > 0 || pending.diagnostics.length > 0 || pending.truncated) {
      unsettled.push(`bot ${botId}`);
    }
  }
  if (unsettled.length > 0) {
    throw new CliError(
      "ACTION_NOT_ELIGIBLE",
      `Restores are not settled (${unsettled.join(", ")}), so the workspaces cannot move to postgres and nothing was changed. Settle each with the fenced action \`${commandPrefix} restores list\` names, then run the migration again.`,
    );
  }
  const locked = listLocks(dataDir, { commandPrefix }).filter(
    (row) =>
      row.kind === "workspace" &&
      row.present &&
      (row.alive !== false || row.purpose === "checkpoint-restore"),
  );
  if (locked.length > 0) {
    throw new CliError(
      "ACTION_NOT_ELIGIBLE",
      `Workspaces are locked (${locked.map((row) => `${row.path}${row.pid === null ? "" : ` pid ${row.pid}`}`).join(", ")}), so they cannot move to postgres and nothing was changed. Stop the process holding each, settle any restore with \`${commandPrefix} restores list\`, then run the migration again.`,
    );
  }
  const checkpoints = openCheckpointStore({ dataDir });
  const bots: LocalWorkspace[] = [];
  for (const { botId, root } of workspaces) {
    const blobs = new Map<string, Uint8Array>();
    const files = scanTree(root, blobs);
    const moved: LocalWorkspace["checkpoints"] = [];
    for (const summary of await checkpoints.listCheckpoints(root)) {
      const { manifest } = checkpoints.readVerifiedManifest(summary.checkpointId);
      const entries: WorkspaceFile[] = [];
      for (const entry of manifest.entries) {
        if (entry.type !== "file") continue;
        blobs.set(entry.sha256, checkpoints.readBlob(entry));
        entries.push(entry);
      }
      moved.push({
        checkpointId: summary.checkpointId,
        createdAt: Date.parse(summary.createdAt),
        files: entries.sort(byPath),
      });
    }
    // The store lists a bot's checkpoints by (createdAt, id): the order they are compared in.
    moved.sort(
      (a, b) =>
        a.createdAt - b.createdAt ||
        (a.checkpointId < b.checkpointId ? -1 : a.checkpointId > b.checkpointId ? 1 : 0),
    );
    bots.push({ botId, files, checkpoints: moved, blobs });
  }
  let retired = 0;
  try {
    retired = readdirSync(join(dataDir, WORKSPACES_DIR, ".retired")).length;
  } catch {
    retired = 0;
  }
  return summarize(bots, retired);
}

/** The counts and the fence digest of the workspaces a migration moves (either way). */
export function summarize(bots: LocalWorkspace[], retired: number): WorkspacesToMove {
  const size = (files: WorkspaceFile[]) => files.reduce((sum, f) => sum + f.size, 0);
  return {
    bots,
    retired,
    counts: {
      workspaces: bots.length,
      files: bots.reduce((n, b) => n + b.files.length, 0),
      checkpoints: bots.reduce((n, b) => n + b.checkpoints.length, 0),
      bytes: bots.reduce(
        (n, b) => n + size(b.files) + b.checkpoints.reduce((m, c) => m + size(c.files), 0),
        0,
      ),
    },
    digest: sha256Of(
      Buffer.from(
        JSON.stringify(
          bots.map((b) => [
            b.botId,
            b.files,
            b.checkpoints.map((c) => [c.checkpointId, c.createdAt, c.files]),
          ]),
        ),
      ),
    ),
  };
}

/** The check of either side in postgres: no server instance of this installation is live in the database. */
export async function refuseLiveInstances(target: Storage, commandPrefix: string): Promise<void> {
  const registry = instancesOf(target);
  if (registry === null) return;
  const live = (await registry.list()).instances.filter((i) => i.state === "live");
  if (live.length > 0) {
    throw new CliError(
      "ACTION_NOT_ELIGIBLE",
      `The postgres store has live bot-server instances (${live.map((i) => `${i.id} on ${i.host} pid ${i.pid}`).join(", ")}), so nothing was migrated and nothing was changed. Stop them (or, once a lease has passed, \`${commandPrefix} instances declare-dead\`), then run the migration again.`,
    );
  }
}

/** Writes every workspace into the target (idempotent), then reads each back and compares. */
export async function copyWorkspaces(target: Storage, move: WorkspacesToMove): Promise<void> {
  const store = pgWorkspacesOf(target);
  if (store === null) throw new CliError("CLI_FAILED", "the target storage has no postgres workspaces");
  for (const bot of move.bots) await store.importWorkspace(bot.botId, bot);
  for (const bot of move.bots) {
    const stored = await store.exportWorkspace(bot.botId);
    const want = JSON.stringify({
      files: bot.files,
      checkpoints: bot.checkpoints.map((c) => ({
        checkpointId: c.checkpointId,
        createdAt: c.createdAt,
        files: c.files,
      })),
    });
    const got = JSON.stringify({ files: stored.files, checkpoints: stored.checkpoints });
    if (want !== got || stored.badBlobs.length > 0) {
      throw new CliError(
        "CLI_FAILED",
        `The workspace of bot ${bot.botId} was not verified in postgres (${stored.badBlobs.length > 0 ? `${stored.badBlobs.length} blob(s) missing or damaged` : "its head or checkpoint manifests differ from the local ones"}). The data directory is still bound to its old backend and nothing there was changed. Report this as a bug in drydock.`,
      );
    }
  }
}
