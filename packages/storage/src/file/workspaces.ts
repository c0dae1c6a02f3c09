import { constants } from "node:fs";
import { join } from "node:path";
import { type FileOps, fsyncDirectory, isLockError, makeDirectories, withLock } from "@drydock/file-lock";
import type { StorageCrashHook } from "../contract.js";
import {
  busyFailure,
  corruptFailure,
  isStorageError,
  osCauseOf,
  osFailure,
  StorageError,
} from "../errors.js";
import {
  idConflicts,
  type StoredCheckpoint,
  type WorkspaceTx,
  workspaceStoreOver,
} from "../workspace-engine.js";
import {
  isWorkspaceError,
  parseWorkspaceManifest,
  type WorkspaceFile,
  type WorkspaceRestore,
  type WorkspaceStore,
} from "../workspaces.js";

/**
 * Workspaces on the file backend, under `<dataDir>/store-workspaces/` (never the server's own
 * `<dataDir>/workspaces/`, which holds local workspace files under the restore saga):
 *   blobs/<sha256>        a file's bytes, content-addressed (temp, fsync, rename, fsync dir; sha256 checked on read)
 *   heads/<botId>.json    the bot's version, manifest, checkpoints and restores, replaced whole by one rename
 *   locks/<botId>.lock    file-lock's lock, held for each change of that bot
 *   ids/cp-<id>, op-<id>  which bot holds a checkpoint id / restore operation id (created exclusively)
 * A change is one rename of the head file, so a restore is never half applied and a crash before the rename
 * leaves the old head whole. A head that cannot be read is STORAGE_CORRUPT and never written over.
 */
export const STORE_WORKSPACES_DIR = "store-workspaces";

/** Crash points of a workspace change, around the rename that publishes the new head. */
export const WORKSPACE_CRASH_POINTS = [
  "file:workspace-before-rename",
  "file:workspace-after-rename",
] as const;

interface HeadDoc {
  format: 1;
  version: number;
  files: WorkspaceFile[];
  /** Checkpoints of the bot, and of its retired workspaces (owner = the retired name). */
  checkpoints: StoredCheckpoint[];
  restores: WorkspaceRestore[];
}

const EMPTY: HeadDoc = { format: 1, version: 0, files: [], checkpoints: [], restores: [] };

export interface FileWorkspaceOptions {
  fs: FileOps;
  now: () => number;
  live: () => void;
  maxFileBytes: number;
  lockWaitMs?: number;
  crash?: StorageCrashHook;
}

const isNonNegInt = (v: unknown): v is number => typeof v === "number" && Number.isSafeInteger(v) && v >= 0;

function parseHead(text: string): HeadDoc | null {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return null;
  }
  const doc = raw as Partial<HeadDoc> | null;
  if (typeof doc !== "object" || doc === null || doc.format !== 1 || !isNonNegInt(doc.version)) return null;
  const files = parseWorkspaceManifest(doc.files);
  if (files === null || !Array.isArray(doc.checkpoints) || !Array.isArray(doc.restores)) return null;
  const checkpoints: StoredCheckpoint[] = [];
  for (const c of doc.checkpoints) {
    const cFiles = parseWorkspaceManifest(c?.files);
    if (cFiles === null || typeof c.checkpointId !== "string" || typeof c.owner !== "string") return null;
    if (!isNonNegInt(c.version) || !isNonNegInt(c.createdAt)) return null;
    checkpoints.push({ ...c, files: cFiles });
  }
  for (const r of doc.restores) {
    if (
      typeof r?.operationId !== "string" ||
      typeof r.botId !== "string" ||
      typeof r.checkpointId !== "string"
    )
      return null;
    if (!isNonNegInt(r.fromVersion) || !isNonNegInt(r.toVersion) || r.state !== "completed") return null;
  }
  return { format: 1, version: doc.version, files, checkpoints, restores: doc.restores };
}

export function openFileWorkspaces(dataDir: string, options: FileWorkspaceOptions): WorkspaceStore {
  const { fs } = options;
  const root = join(dataDir, STORE_WORKSPACES_DIR);
  const dirs = {
    blobs: join(root, "blobs"),
    heads: join(root, "heads"),
    locks: join(root, "locks"),
    ids: join(root, "ids"),
  };
  const headPath = (botId: string) => join(dirs.heads, `${botId}.json`);
  let ready = false;

  /** The directories exist and their names are durable (once per storage). */
  function prepare(): void {
    if (ready) return;
    for (const dir of Object.values(dirs)) {
      for (const parent of makeDirectories(fs, dir)) fsyncDirectory(fs, parent);
    }
    ready = true;
  }

  const readText = (path: string): string | undefined => {
    try {
      return fs.readFileSync(path, "utf8") as string;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
      throw error;
    }
  };

  function loadHead(botId: string): HeadDoc {
    const path = headPath(botId);
    const text = readText(path);
    if (text === undefined) return EMPTY;
    const doc = parseHead(text);
    if (doc === null)
      throw corruptFailure(path, `the workspace head of bot ${botId} is not a valid head file`);
    return doc;
  }

  /** Writes `bytes` to `path` durably: a temp file, fsync, one rename, fsync of the directory. */
  function publish(path: string, dir: string, bytes: string | Buffer, renamed?: () => void): void {
    const temp = `${path}.tmp-${process.pid}`;
    const fd = fs.openSync(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC, 0o600);
    try {
      const data = typeof bytes === "string" ? Buffer.from(bytes, "utf8") : bytes;
      let written = 0;
      while (written < data.length) written += fs.writeSync(fd, data, written, data.length - written);
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    if (renamed !== undefined) options.crash?.("file:workspace-before-rename");
    fs.renameSync(temp, path);
    renamed?.();
    if (renamed !== undefined) options.crash?.("file:workspace-after-rename");
    fsyncDirectory(fs, dir);
  }

  /** Claims an id for `botId` (exclusive create); an id already claimed by this bot is fine. */
  function claim(name: string, botId: string): string | undefined {
    const path = join(dirs.ids, name);
    try {
      const fd = fs.openSync(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600);
      try {
        fs.writeSync(fd, botId);
        fs.fsyncSync(fd);
      } finally {
        fs.closeSync(fd);
      }
      fsyncDirectory(fs, dirs.ids);
      return undefined;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      const owner = readText(path);
      return owner === botId ? undefined : (owner ?? "another bot");
    }
  }

  /** The record `find` picks in the head of the bot that claimed `name`; `other` when that bot has none. */
  function claimed<T>(
    name: string,
    botId: string,
    find: (doc: HeadDoc) => T | undefined,
    other: (owner: string) => T,
  ) {
    const owner = readText(join(dirs.ids, name));
    if (owner === undefined || owner === botId) return undefined;
    // A claim whose record is missing (a writer stopped between the claim and its head's rename) stays the
    // other bot's: fail closed, the id is not handed to a second bot.
    return find(loadHead(owner)) ?? other(owner);
  }

  function txOf(botId: string, doc: HeadDoc, now: number) {
    let next: HeadDoc = doc;
    let changed = false;
    const edit = (patch: Partial<HeadDoc>) => {
      next = { ...next, ...patch };
      changed = true;
    };
    const findCheckpoint = (id: string) => (d: HeadDoc) => d.checkpoints.find((c) => c.checkpointId === id);
    const findRestore = (id: string) => (d: HeadDoc) => d.restores.find((r) => r.operationId === id);
    const tx: WorkspaceTx = {
      now,
      head: () => ({ version: next.version, files: next.files }),
      checkpoint: (id) =>
        findCheckpoint(id)(next) ??
        claimed(`cp-${id}`, botId, findCheckpoint(id), (owner) => ({
          checkpointId: id,
          owner,
          version: 0,
          files: [],
          createdAt: 0,
        })),
      restore: (id) =>
        findRestore(id)(next) ??
        claimed(`op-${id}`, botId, findRestore(id), (owner) => ({
          operationId: id,
          botId: owner,
          checkpointId: "(an interrupted restore)",
          fromVersion: 0,
          toVersion: 0,
          state: "completed" as const,
          startedAt: 0,
          completedAt: 0,
        })),
      ownsCheckpoints: () => next.checkpoints.some((c) => c.owner === botId),
      hasBlob: (sha) => fs.existsSync(join(dirs.blobs, sha)),
      putBlob: (sha, bytes) => publish(join(dirs.blobs, sha), dirs.blobs, bytes),
      setHead: (version, files) => edit({ version, files }),
      addCheckpoint: (c) => {
        if (c.owner === botId) {
          const other = claim(`cp-${c.checkpointId}`, botId);
          if (other !== undefined) throw idConflicts.justTaken("checkpoint id", c.checkpointId);
        }
        edit({ checkpoints: [...next.checkpoints, c] });
      },
      addRestore: (r) => {
        const other = claim(`op-${r.operationId}`, botId);
        if (other !== undefined) throw idConflicts.justTaken("restore operation id", r.operationId);
        edit({ restores: [...next.restores, r] });
      },
      retire: (retiredAs) =>
        edit({
          checkpoints: next.checkpoints.map((c) => (c.owner === botId ? { ...c, owner: retiredAs } : c)),
          restores: next.restores.map((r) => (r.botId === botId ? { ...r, botId: retiredAs } : r)),
        }),
    };
    return { tx, result: () => (changed ? next : null) };
  }

  /** fs failures as StorageErrors; a failure after the head's rename says the change is visible. */
  function mapped<R>(where: string, body: () => R, published?: () => boolean): R {
    try {
      return body();
    } catch (error) {
      if (isWorkspaceError(error) || isStorageError(error)) throw error;
      const errno = osCauseOf(error);
      if (published?.() === true) {
        throw new StorageError({
          code: "STORAGE_UNAVAILABLE",
          message: `the change to ${where} was written, but its directory could not be flushed (${errno ?? String(error)}); it is visible now and may not survive a power loss. Check the disk, then read the workspace again.`,
          cause: error,
        });
      }
      if (errno !== undefined) throw osFailure(errno, where, error);
      throw error;
    }
  }

  return workspaceStoreOver({
    live: options.live,
    maxFileBytes: options.maxFileBytes,
    where: root,
    corrupt: (what) => corruptFailure(root, what),
    async read(botId, body) {
      return mapped(headPath(botId), () => body(txOf(botId, loadHead(botId), options.now()).tx));
    },
    async write(botId, body) {
      mapped(root, prepare);
      const lockFile = join(dirs.locks, `${botId}.lock`);
      const lockOptions = { fs, ...(options.lockWaitMs === undefined ? {} : { waitMs: options.lockWaitMs }) };
      try {
        return await withLock(
          lockFile,
          () => {
            let published = false;
            return mapped(
              headPath(botId),
              () => {
                const { tx, result } = txOf(botId, loadHead(botId), options.now());
                const answer = body(tx);
                const next = result();
                if (next !== null) {
                  publish(headPath(botId), dirs.heads, `${JSON.stringify(next)}\n`, () => {
                    published = true;
                  });
                }
                return answer;
              },
              () => published,
            );
          },
          lockOptions,
        );
      } catch (error) {
        if (isLockError(error)) {
          const errno = osCauseOf(error.cause);
          throw errno !== undefined
            ? osFailure(errno, lockFile, error)
            : busyFailure(lockFile, options.lockWaitMs ?? 2_000, error);
        }
        throw error;
      }
    },
    blob: (_tx, sha) => {
      const path = join(dirs.blobs, sha);
      try {
        return fs.readFileSync(path) as Buffer;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
        throw error;
      }
    },
    async listCheckpoints(botId) {
      return mapped(headPath(botId), () => loadHead(botId).checkpoints);
    },
    async getRestore(operationId) {
      return mapped(root, () => {
        const owner = readText(join(dirs.ids, `op-${operationId}`));
        if (owner === undefined) return undefined;
        return loadHead(owner).restores.find((r) => r.operationId === operationId);
      });
    },
  });
}
