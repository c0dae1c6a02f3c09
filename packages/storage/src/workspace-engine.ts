import { createHash, randomBytes } from "node:crypto";
import {
  checkWorkspaceInput as check,
  versionConflict,
  type WorkspaceCheckpoint,
  WorkspaceError,
  type WorkspaceFile,
  type WorkspaceRestore,
  type WorkspaceStore,
} from "./workspaces.js";

/**
 * The workspace rules over a backend's primitives, for the backends whose transactions are synchronous
 * bodies (sqlite's BEGIN IMMEDIATE, the file backend's per-bot lock): what a write, delete, checkpoint,
 * restore and retire mean, the refusals and their order, written once. A backend supplies the reads and
 * writes of one transaction (`WorkspaceTx`); postgres keeps its own SQL (its transactions are async).
 */

export interface WorkspaceHeadState {
  version: number;
  files: WorkspaceFile[];
}

/** A recorded checkpoint with its manifest; `owner` is the bot id, or a retired name after retireWorkspace. */
export interface StoredCheckpoint {
  checkpointId: string;
  owner: string;
  version: number;
  files: WorkspaceFile[];
  createdAt: number;
}

/** The reads and writes of one transaction on one bot's workspace (reads see the transaction's own writes). */
export interface WorkspaceTx {
  /** The transaction's clock, ms. */
  readonly now: number;
  /** The bot's head (version 0, no files when never written); STORAGE_CORRUPT when it cannot be read. */
  head(): WorkspaceHeadState;
  /** A checkpoint by id, of any bot (undefined: the id is free). */
  checkpoint(checkpointId: string): StoredCheckpoint | undefined;
  /** A restore by operation id, of any bot (its `botId` is its owner, a retired name after a retire). */
  restore(operationId: string): WorkspaceRestore | undefined;
  /** Whether the bot owns any checkpoint. */
  ownsCheckpoints(): boolean;
  hasBlob(sha256: string): boolean;
  putBlob(sha256: string, bytes: Buffer): void;
  /** Replaces the head: `files` at `version` (the engine has checked it is the read version + 1). */
  setHead(version: number, files: WorkspaceFile[]): void;
  addCheckpoint(checkpoint: StoredCheckpoint): void;
  addRestore(restore: WorkspaceRestore): void;
  /** Every checkpoint and restore of the bot now belongs to `retiredAs`. */
  retire(retiredAs: string): void;
}

/** A backend's side: one read snapshot, one write transaction per bot, and the blob reader. */
export interface WorkspacePrimitives {
  /** Called first by every method (a closed storage refuses). */
  live(): void;
  maxFileBytes: number;
  /** The place named in STORAGE_CORRUPT messages. */
  where: string;
  read<R>(botId: string, body: (tx: WorkspaceTx) => R): Promise<R>;
  write<R>(botId: string, body: (tx: WorkspaceTx) => R): Promise<R>;
  /** The stored bytes of a blob, undefined when it is missing (the engine checks the digest). */
  blob(tx: WorkspaceTx, sha256: string): Buffer | undefined;
  /** The bot's checkpoints (owner = botId), any order. */
  listCheckpoints(botId: string): Promise<StoredCheckpoint[]>;
  /** A restore by operation id, of any bot. */
  getRestore(operationId: string): Promise<WorkspaceRestore | undefined>;
  corrupt(what: string): Error;
}

export const sha256Of = (bytes: Uint8Array): string => createHash("sha256").update(bytes).digest("hex");

/** Files are at leaves: `a` and `a/b` cannot both be files (a local workspace could not hold them either). */
export function workspacePathClash(files: readonly WorkspaceFile[], path: string): string | undefined {
  return files.find((f) => path.startsWith(`${f.path}/`) || f.path.startsWith(`${path}/`))?.path;
}

/** The refusal of a file on a file's path (or a file where files are under it). */
export function pathClashError(path: string, clash: string): WorkspaceError {
  return new WorkspaceError(
    "WORKSPACE_INVALID_ARGUMENT",
    `'${path}' cannot be a file: '${clash}' is ${clash.length < path.length ? "a file on its path" : "a file under it"}. Nothing was changed.`,
  );
}

export function workspaceIdConflict(what: string): WorkspaceError {
  return new WorkspaceError(
    "WORKSPACE_ID_CONFLICT",
    `${what}. Nothing was changed. Use a fresh id for a new one; retry with the same id only what was asked with it.`,
  );
}

/** The id refusals every backend answers (nothing changed). */
export const idConflicts = {
  checkpointOfAnotherBot: (checkpointId: string) =>
    workspaceIdConflict(`the checkpoint id '${checkpointId}' belongs to another bot`),
  restoreRecorded: (operationId: string, checkpointId: string, botId: string) =>
    workspaceIdConflict(
      `the restore operation id '${operationId}' already restored checkpoint '${checkpointId}' of bot '${botId}'`,
    ),
  justTaken: (what: "checkpoint id" | "restore operation id", id: string) =>
    workspaceIdConflict(`the ${what} '${id}' was just taken`),
};

/** A file's bytes checked against the size limit: the bytes as a Buffer and the manifest entry. */
export function workspaceFileOf(
  path: string,
  bytes: unknown,
  maxFileBytes: number,
): { data: Buffer; file: WorkspaceFile } {
  if (!(bytes instanceof Uint8Array)) {
    throw new WorkspaceError(
      "WORKSPACE_INVALID_ARGUMENT",
      "a file's bytes are a Uint8Array. Nothing was changed.",
    );
  }
  if (bytes.byteLength > maxFileBytes) {
    throw new WorkspaceError(
      "WORKSPACE_FILE_TOO_LARGE",
      `The file is ${bytes.byteLength} bytes; this server accepts at most ${maxFileBytes}. Nothing was changed.`,
    );
  }
  const data = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  return { data, file: { type: "file", path, size: data.length, mode: 0o600, sha256: sha256Of(data) } };
}

/** A retired workspace's name: a bot id never holds '.', so no live bot (and no checkpoint id) can name it. */
export const retiredNameOf = (botId: string, now: number): string =>
  `${botId}.retired-${now}-${randomBytes(4).toString("hex")}`;

const summary = (c: StoredCheckpoint): WorkspaceCheckpoint => ({
  checkpointId: c.checkpointId,
  botId: c.owner,
  version: c.version,
  files: c.files.length,
  bytes: c.files.reduce((n, f) => n + f.size, 0),
  createdAt: c.createdAt,
});

const byPath = (a: WorkspaceFile, b: WorkspaceFile) => (a.path < b.path ? -1 : 1);

export function workspaceStoreOver(p: WorkspacePrimitives): WorkspaceStore {
  /** One transaction on the bot's workspace, its head checked against the caller's expected version. */
  function change<R>(
    botId: string,
    options: { expectedVersion?: number } | undefined,
    body: (tx: WorkspaceTx, head: WorkspaceHeadState) => R,
    replay?: (tx: WorkspaceTx) => R | undefined,
  ): Promise<R> {
    p.live();
    check.botId(botId);
    const expected = check.expectedVersion(options);
    return p.write(botId, (tx) => {
      const recorded = replay?.(tx);
      if (recorded !== undefined) return recorded;
      const head = tx.head();
      if (expected !== undefined && expected !== head.version)
        throw versionConflict(botId, expected, head.version);
      return body(tx, head);
    });
  }
  const bump = (tx: WorkspaceTx, head: WorkspaceHeadState, files: WorkspaceFile[]) => {
    tx.setHead(head.version + 1, files);
    return head.version + 1;
  };

  return {
    async head(botId) {
      p.live();
      check.botId(botId);
      return { botId, ...(await p.read(botId, (tx) => tx.head())) };
    },

    async readFile(botId, path) {
      p.live();
      check.botId(botId);
      check.path(path);
      return p.read(botId, (tx) => {
        const head = tx.head();
        const file = head.files.find((f) => f.path === path);
        if (file === undefined) {
          throw new WorkspaceError("WORKSPACE_FILE_NOT_FOUND", `No file at '${path}' in this workspace.`);
        }
        const bytes = p.blob(tx, file.sha256);
        if (bytes === undefined)
          throw p.corrupt(`the blob ${file.sha256} of '${path}' (bot ${botId}) is missing`);
        if (bytes.length !== file.size || sha256Of(bytes) !== file.sha256) {
          throw p.corrupt(`the blob ${file.sha256} of '${path}' (bot ${botId}) does not hash to its name`);
        }
        return { file, bytes, version: head.version };
      });
    },

    async writeFile(botId, path, bytes, options) {
      check.path(path);
      const { data, file } = workspaceFileOf(path, bytes, p.maxFileBytes);
      return change(botId, options, (tx, head) => {
        const clash = workspacePathClash(head.files, path);
        if (clash !== undefined) throw pathClashError(path, clash);
        if (!tx.hasBlob(file.sha256)) tx.putBlob(file.sha256, data);
        const files = [...head.files.filter((f) => f.path !== path), file].sort(byPath);
        return { file, version: bump(tx, head, files) };
      });
    },

    async deleteFile(botId, path, options) {
      check.path(path);
      return change(botId, options, (tx, head) => {
        const files = head.files.filter((f) => f.path !== path);
        if (files.length === head.files.length) {
          throw new WorkspaceError(
            "WORKSPACE_FILE_NOT_FOUND",
            `No file at '${path}' in this workspace. Nothing was changed.`,
          );
        }
        return { version: bump(tx, head, files) };
      });
    },

    async checkpoint(botId, checkpointId, options) {
      check.checkpointId(checkpointId);
      const recorded = (tx: WorkspaceTx) => {
        const existing = tx.checkpoint(checkpointId);
        if (existing === undefined) return undefined;
        if (existing.owner !== botId) throw idConflicts.checkpointOfAnotherBot(checkpointId);
        return summary(existing);
      };
      return change(
        botId,
        options,
        (tx, head) => {
          const stored = {
            checkpointId,
            owner: botId,
            version: head.version,
            files: head.files,
            createdAt: tx.now,
          };
          tx.addCheckpoint(stored);
          return summary(stored);
        },
        recorded,
      );
    },

    async getCheckpoint(botId, checkpointId) {
      p.live();
      check.botId(botId);
      check.checkpointId(checkpointId);
      const found = await p.read(botId, (tx) => tx.checkpoint(checkpointId));
      return found === undefined || found.owner !== botId ? null : summary(found);
    },

    async listCheckpoints(botId) {
      p.live();
      check.botId(botId);
      const all = await p.listCheckpoints(botId);
      return all
        .filter((c) => c.owner === botId)
        .sort((a, b) => a.createdAt - b.createdAt || (a.checkpointId < b.checkpointId ? -1 : 1))
        .map(summary);
    },

    async restore(botId, checkpointId, operationId, options) {
      check.checkpointId(checkpointId);
      check.operationId(operationId);
      const recorded = (tx: WorkspaceTx) => {
        const done = tx.restore(operationId);
        if (done === undefined) return undefined;
        if (done.botId !== botId || done.checkpointId !== checkpointId) {
          throw idConflicts.restoreRecorded(operationId, done.checkpointId, done.botId);
        }
        return done;
      };
      return change(
        botId,
        options,
        (tx, head) => {
          const checkpoint = tx.checkpoint(checkpointId);
          if (checkpoint === undefined || checkpoint.owner !== botId) {
            throw new WorkspaceError(
              "WORKSPACE_CHECKPOINT_NOT_FOUND",
              `No checkpoint '${checkpointId}' of this workspace. Nothing was changed.`,
            );
          }
          if (!checkpoint.files.every((f) => tx.hasBlob(f.sha256))) {
            throw p.corrupt(`blobs of checkpoint ${checkpointId} are missing, so it cannot be restored`);
          }
          const toVersion = bump(tx, head, checkpoint.files);
          const restore: WorkspaceRestore = {
            operationId,
            botId,
            checkpointId,
            fromVersion: head.version,
            toVersion,
            state: "completed",
            startedAt: tx.now,
            completedAt: tx.now,
          };
          tx.addRestore(restore);
          return restore;
        },
        recorded,
      );
    },

    async getRestore(operationId) {
      p.live();
      check.operationId(operationId);
      const found = await p.getRestore(operationId);
      return found === undefined || found.botId.includes(".retired-") ? null : found;
    },

    async retireWorkspace(botId) {
      // As on postgres: the head stays and moves on by one, empty; the files are kept as a checkpoint of the
      // retired name, with the bot's checkpoints and restores.
      return change(botId, undefined, (tx, head) => {
        if (head.files.length === 0 && !tx.ownsCheckpoints()) return { retiredAs: null };
        const retiredAs = retiredNameOf(botId, tx.now);
        tx.retire(retiredAs);
        tx.addCheckpoint({
          checkpointId: retiredAs,
          owner: retiredAs,
          version: head.version,
          files: head.files,
          createdAt: tx.now,
        });
        if (head.version > 0) bump(tx, head, []);
        return { retiredAs };
      });
    },
  };
}
