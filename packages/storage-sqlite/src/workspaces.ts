import {
  corruptFailure,
  parseWorkspaceManifest,
  type StoredCheckpoint,
  type WorkspaceRestore,
  type WorkspaceStore,
  type WorkspaceTx,
  workspaceStoreOver,
} from "@drydock/storage";
import type { SqliteHandle } from "./database.js";

/**
 * Workspaces in the same database as everything else (migration 3): `ws_blobs` by sha256, one `ws_heads` row
 * per bot, `ws_checkpoints`, `ws_restores`. Every change is one BEGIN IMMEDIATE transaction (the handle's
 * `write`), so the head's compare-and-set, the blob and the records commit together or not at all; the rules
 * are @drydock/storage's `workspaceStoreOver`, the same as the file backend's and postgres's.
 */

interface CheckpointRow {
  checkpoint_id: string;
  bot_id: string;
  version: number;
  manifest: string;
  created_at: number;
}
interface RestoreRow {
  operation_id: string;
  bot_id: string;
  checkpoint_id: string;
  from_version: number;
  to_version: number;
  started_at: number;
  completed_at: number;
}

const restoreOf = (r: RestoreRow): WorkspaceRestore => ({
  operationId: r.operation_id,
  botId: r.bot_id,
  checkpointId: r.checkpoint_id,
  fromVersion: r.from_version,
  toVersion: r.to_version,
  state: "completed",
  startedAt: r.started_at,
  completedAt: r.completed_at,
});

export function sqliteWorkspaces(
  handle: SqliteHandle,
  options: { now: () => number; live: () => void; maxFileBytes: number },
): WorkspaceStore {
  const { db } = handle;
  const corrupt = (what: string) => corruptFailure(handle.path, what);
  const q = {
    head: db.prepare("SELECT version, manifest FROM ws_heads WHERE bot_id = ?"),
    insertHead: db.prepare("INSERT INTO ws_heads (bot_id, version, manifest) VALUES (?, ?, ?)"),
    updateHead: db.prepare("UPDATE ws_heads SET version = ?, manifest = ? WHERE bot_id = ? AND version = ?"),
    checkpoint: db.prepare("SELECT * FROM ws_checkpoints WHERE checkpoint_id = ?"),
    checkpointsOf: db.prepare("SELECT * FROM ws_checkpoints WHERE bot_id = ?"),
    owns: db.prepare("SELECT 1 FROM ws_checkpoints WHERE bot_id = ? LIMIT 1").pluck(),
    addCheckpoint: db.prepare(
      "INSERT INTO ws_checkpoints (checkpoint_id, bot_id, version, manifest, created_at) VALUES (?, ?, ?, ?, ?)",
    ),
    restore: db.prepare("SELECT * FROM ws_restores WHERE operation_id = ?"),
    addRestore: db.prepare(
      "INSERT INTO ws_restores (operation_id, bot_id, checkpoint_id, from_version, to_version, started_at, completed_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
    ),
    hasBlob: db.prepare("SELECT 1 FROM ws_blobs WHERE sha256 = ?").pluck(),
    blob: db.prepare("SELECT bytes FROM ws_blobs WHERE sha256 = ?").pluck(),
    putBlob: db.prepare(
      "INSERT INTO ws_blobs (sha256, size, bytes) VALUES (?, ?, ?) ON CONFLICT (sha256) DO NOTHING",
    ),
    retireCheckpoints: db.prepare("UPDATE ws_checkpoints SET bot_id = ? WHERE bot_id = ?"),
    retireRestores: db.prepare("UPDATE ws_restores SET bot_id = ? WHERE bot_id = ?"),
  };

  const manifest = (text: string, what: string) => {
    let files: ReturnType<typeof parseWorkspaceManifest> = null;
    try {
      files = parseWorkspaceManifest(JSON.parse(text));
    } catch {
      files = null;
    }
    if (files === null) throw corrupt(`${what} breaks its format`);
    return files;
  };
  const checkpointOf = (r: CheckpointRow): StoredCheckpoint => ({
    checkpointId: r.checkpoint_id,
    owner: r.bot_id,
    version: r.version,
    files: manifest(r.manifest, `the manifest of checkpoint ${r.checkpoint_id}`),
    createdAt: r.created_at,
  });

  const txOf = (botId: string): WorkspaceTx => ({
    now: options.now(),
    head() {
      const row = q.head.get(botId) as { version: number; manifest: string } | undefined;
      if (row === undefined) return { version: 0, files: [] };
      return {
        version: row.version,
        files: manifest(row.manifest, `the head manifest of bot ${botId}'s workspace`),
      };
    },
    checkpoint(id) {
      const row = q.checkpoint.get(id) as CheckpointRow | undefined;
      return row === undefined ? undefined : checkpointOf(row);
    },
    restore(id) {
      const row = q.restore.get(id) as RestoreRow | undefined;
      return row === undefined ? undefined : restoreOf(row);
    },
    ownsCheckpoints: () => q.owns.get(botId) !== undefined,
    hasBlob: (sha) => q.hasBlob.get(sha) !== undefined,
    putBlob: (sha, bytes) => void q.putBlob.run(sha, bytes.length, bytes),
    setHead(version, files) {
      const text = JSON.stringify(files);
      const changed =
        version === 1
          ? q.insertHead.run(botId, 1, text).changes
          : q.updateHead.run(version, text, botId, version - 1).changes;
      // The engine read the head in this same transaction: a miss means the database moved under it.
      if (changed !== 1) throw corrupt(`the head of bot ${botId}'s workspace changed inside its transaction`);
    },
    addCheckpoint: (c) =>
      void q.addCheckpoint.run(c.checkpointId, c.owner, c.version, JSON.stringify(c.files), c.createdAt),
    addRestore: (r) =>
      void q.addRestore.run(
        r.operationId,
        r.botId,
        r.checkpointId,
        r.fromVersion,
        r.toVersion,
        r.startedAt,
        r.completedAt,
      ),
    retire(retiredAs) {
      q.retireCheckpoints.run(retiredAs, botId);
      q.retireRestores.run(retiredAs, botId);
    },
  });

  return workspaceStoreOver({
    live: options.live,
    maxFileBytes: options.maxFileBytes,
    where: handle.path,
    corrupt,
    read: async (botId, body) => handle.read(() => body(txOf(botId))),
    write: async (botId, body) => handle.write(() => body(txOf(botId))),
    blob: (_tx, sha) => {
      const bytes = q.blob.get(sha) as Buffer | undefined;
      return bytes === undefined ? undefined : Buffer.from(bytes);
    },
    listCheckpoints: async (botId) =>
      handle.read(() => (q.checkpointsOf.all(botId) as CheckpointRow[]).map(checkpointOf)),
    getRestore: async (operationId) =>
      handle.read(() => {
        const row = q.restore.get(operationId) as RestoreRow | undefined;
        return row === undefined ? undefined : restoreOf(row);
      }),
  });
}
