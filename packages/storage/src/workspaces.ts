import { BOT_ID, CHECKPOINT_ID, MAX_PATH_BYTES, RESTORE_OPERATION_ID } from "@drydock/facts";
import { type ManifestEntry, ManifestEntrySchema } from "@drydock/restore-saga";
import type { Storage } from "./contract.js";
import { brand, isBranded } from "./errors.js";

/**
 * Workspaces held by the store itself (issue 24, shape 1 in STORAGE.md "Beyond one host"): each file's bytes
 * are a content-addressed blob, a bot's workspace is a versioned head manifest, and every change (a write, a
 * delete, a restore) is ONE transaction that compares-and-sets the head's version. Nothing authoritative is on
 * a host's disk, so any server reaches any bot's files, a restore cannot be half-applied (one CAS replaces the
 * manifest), and a writer holding a stale version changes nothing. Every backend has it (`Storage.workspaces`,
 * checked by the conformance suite); the bot server uses it on postgres only (`workspacesOf`), and on `file`
 * and `sqlite` keeps the workspace on local files under the restore saga.
 */

/** A file of a workspace: restore-saga's checkpoint manifest entry (path, mode, size, hex sha256). */
export type WorkspaceFile = Extract<ManifestEntry, { type: "file" }>;

/** A bot's workspace as it stands: version 0 and no files for a bot whose workspace was never written. */
export interface WorkspaceHead {
  botId: string;
  /** Bumped by exactly one on every write, delete and restore; the compare-and-set's key. */
  version: number;
  /** Sorted by path (code unit order), as restore-saga's manifests are. */
  files: WorkspaceFile[];
}

export interface WorkspaceCheckpoint {
  checkpointId: string;
  botId: string;
  /** The head version whose manifest the checkpoint holds. */
  version: number;
  files: number;
  bytes: number;
  /** ms since the epoch, the database's clock. */
  createdAt: number;
}

/** A restore: recorded in the same transaction that applied it, so it is never seen half done. */
export interface WorkspaceRestore {
  operationId: string;
  botId: string;
  checkpointId: string;
  fromVersion: number;
  toVersion: number;
  state: "completed";
  startedAt: number;
  completedAt: number;
}

export interface WorkspaceWriteOptions {
  /**
   * The head version the caller last saw: the change applies only if the head is still at it, otherwise
   * WORKSPACE_VERSION_CONFLICT and nothing is changed. Omitted: applied on whatever version is current (still
   * one compare-and-set inside the transaction).
   */
  expectedVersion?: number;
}

/**
 * A backend's workspaces. Reads are one consistent snapshot; each change is one transaction. Refusals by rule
 * are `WorkspaceError`s; storage faults are `StorageError`s (a blob whose bytes fail their sha256 is
 * STORAGE_CORRUPT, never served).
 */
export interface WorkspaceStore {
  head(botId: string): Promise<WorkspaceHead>;
  /** WORKSPACE_FILE_NOT_FOUND when the head has no file at `path`. */
  readFile(botId: string, path: string): Promise<{ file: WorkspaceFile; bytes: Uint8Array; version: number }>;
  /** Stores the blob and points the head's `path` at it (mode 0600), version + 1, in one transaction. */
  writeFile(
    botId: string,
    path: string,
    bytes: Uint8Array,
    options?: WorkspaceWriteOptions,
  ): Promise<{ file: WorkspaceFile; version: number }>;
  /** WORKSPACE_FILE_NOT_FOUND when there is none (nothing changed). */
  deleteFile(botId: string, path: string, options?: WorkspaceWriteOptions): Promise<{ version: number }>;
  /**
   * Records the head's manifest under `checkpointId` (the head is not changed). Idempotent: the same id for
   * the same bot answers the recorded checkpoint; for another bot, WORKSPACE_ID_CONFLICT.
   */
  checkpoint(
    botId: string,
    checkpointId: string,
    options?: WorkspaceWriteOptions,
  ): Promise<WorkspaceCheckpoint>;
  getCheckpoint(botId: string, checkpointId: string): Promise<WorkspaceCheckpoint | null>;
  /** Oldest first. */
  listCheckpoints(botId: string): Promise<WorkspaceCheckpoint[]>;
  /**
   * One transaction: the head's manifest becomes the checkpoint's, version + 1, and the restore is recorded
   * as completed under `operationId`. A retry with the same operation id answers the recorded restore and
   * applies nothing again; the same id for another bot or checkpoint is WORKSPACE_ID_CONFLICT.
   */
  restore(
    botId: string,
    checkpointId: string,
    operationId: string,
    options?: WorkspaceWriteOptions,
  ): Promise<WorkspaceRestore>;
  /** A retired workspace's restores are not found (null), as on local files. */
  getRestore(operationId: string): Promise<WorkspaceRestore | null>;
  /**
   * Retires the bot's workspace (its bot was deleted), in one transaction: its files (as a checkpoint named
   * `retiredAs`, `<botId>.retired-<ms>-<hex>`, which no bot id or checkpoint id can name), checkpoints and
   * restores are kept but never listed, read or restored again, and the head moves on by one, empty: a bot
   * created later under the id starts empty, and a writer holding the deleted bot's version fails its
   * compare-and-set. `retiredAs` is null when there was nothing to retire (nothing changed).
   */
  retireWorkspace(botId: string): Promise<{ retiredAs: string | null }>;
}

export const WORKSPACE_ERROR_STATUS = {
  /** The head is not at the version the caller expected: another change came first. Nothing changed. */
  WORKSPACE_VERSION_CONFLICT: 409,
  WORKSPACE_FILE_NOT_FOUND: 404,
  WORKSPACE_CHECKPOINT_NOT_FOUND: 404,
  /** A checkpoint id or restore operation id already names something else. Nothing changed. */
  WORKSPACE_ID_CONFLICT: 409,
  WORKSPACE_FILE_TOO_LARGE: 413,
  /** A bot id, path, checkpoint id, operation id or version the store would never hold. */
  WORKSPACE_INVALID_ARGUMENT: 400,
} as const satisfies Record<string, number>;

export type WorkspaceErrorCode = keyof typeof WORKSPACE_ERROR_STATUS;

export class WorkspaceError extends Error {
  override readonly name = "WorkspaceError";
  /**
   * @param currentVersion set on WORKSPACE_VERSION_CONFLICT: the version the head is at.
   */
  constructor(
    readonly code: WorkspaceErrorCode,
    message: string,
    readonly currentVersion?: number,
  ) {
    super(message);
    brand(this, "WorkspaceError");
  }
  get status(): (typeof WORKSPACE_ERROR_STATUS)[WorkspaceErrorCode] {
    return WORKSPACE_ERROR_STATUS[this.code];
  }
}

export function isWorkspaceError(value: unknown): value is WorkspaceError {
  return isBranded(value, "WorkspaceError");
}

/** A refused input as text for a message: never throws (an object whose toString is broken is not a string). */
const shown = (value: unknown): string => (typeof value === "string" ? value : `a ${typeof value}`);

const invalid = (message: string) =>
  new WorkspaceError("WORKSPACE_INVALID_ARGUMENT", `${message}. Nothing was changed.`);

/** The inputs every backend checks first (fail closed: nothing is read or written for a refused input). */
export const checkWorkspaceInput = {
  botId(botId: unknown): string {
    if (typeof botId !== "string" || !BOT_ID.test(botId)) throw invalid(`'${shown(botId)}' is not a bot id`);
    return botId;
  },
  path(path: unknown): string {
    if (typeof path !== "string" || Buffer.byteLength(path, "utf8") > MAX_PATH_BYTES) {
      throw invalid(`a workspace file path is a string of at most ${MAX_PATH_BYTES} bytes (UTF-8)`);
    }
    const entry = { type: "file", path, size: 0, mode: 0o600, sha256: "0".repeat(64) };
    if (!ManifestEntrySchema.safeParse(entry).success) {
      throw invalid(
        `'${path}' is not a normalised relative path (no leading '/', no '\\', NUL, empty, '.' or '..' segment)`,
      );
    }
    return path;
  },
  checkpointId(checkpointId: unknown): string {
    if (typeof checkpointId !== "string" || !CHECKPOINT_ID.test(checkpointId)) {
      throw invalid(`'${shown(checkpointId)}' is not a checkpoint id`);
    }
    return checkpointId;
  },
  operationId(operationId: unknown): string {
    if (typeof operationId !== "string" || !RESTORE_OPERATION_ID.test(operationId)) {
      throw invalid(`'${shown(operationId)}' is not a restore operation id`);
    }
    return operationId;
  },
  expectedVersion(options: WorkspaceWriteOptions | undefined): number | undefined {
    const expected = options?.expectedVersion;
    if (expected !== undefined && (!Number.isSafeInteger(expected) || expected < 0)) {
      throw invalid("expectedVersion must be a non-negative integer");
    }
    return expected;
  },
};

/** A stored manifest (a head's or a checkpoint's), checked entry by entry; null when it breaks the format. */
export function parseWorkspaceManifest(value: unknown): WorkspaceFile[] | null {
  if (!Array.isArray(value)) return null;
  const files: WorkspaceFile[] = [];
  let previous: string | undefined;
  for (const raw of value) {
    const parsed = ManifestEntrySchema.safeParse(raw);
    if (!parsed.success || parsed.data.type !== "file") return null;
    if (previous !== undefined && !(previous < parsed.data.path)) return null;
    previous = parsed.data.path;
    files.push(parsed.data);
  }
  return files;
}

/** The message of a refused compare-and-set. */
export function versionConflict(botId: string, expected: number, current: number): WorkspaceError {
  return new WorkspaceError(
    "WORKSPACE_VERSION_CONFLICT",
    `the workspace of bot '${botId}' is at version ${current}, not the version ${expected} this change expected: another write, delete or restore came first. Nothing was changed. Read the workspace again and retry on its current version.`,
    current,
  );
}

/**
 * The workspace store the bot server serves workspaces from: the store's on postgres, null on file and
 * sqlite, where the server keeps local files under the restore saga (STORAGE.md; their store-held
 * `Storage.workspaces` exists, conforms, and is not what the server uses).
 */
export function workspacesOf(storage: Pick<Storage, "kind" | "workspaces">): WorkspaceStore | null {
  return storage.kind === "postgres" ? storage.workspaces : null;
}
