import { isAbsolute, join, sep } from "node:path";
import { LOCKS_DIR } from "@drydock/facts";
import {
  createSystemIdentity,
  type FileOps,
  inspectLock,
  isLockError,
  type LockOptions,
  nodeFileOps,
  type TornLock,
} from "@drydock/file-lock";
import { errnoOf, SagaError } from "../errors.js";
import { domainDigest, sha256Hex } from "../internal/canonical.js";
import { type WorkspaceLockOwner, WorkspaceLockOwnerSchema } from "../schema.js";
import type { WorkspaceLockBaseOptions, WorkspaceLockFileIdentity, WorkspaceLockState } from "./types.js";

/** Reading a workspace lock: its path, its owner, its state (also torn by a power loss), without taking it. */

export function invalid(message: string): SagaError {
  return new SagaError({ code: "INVALID_ARGUMENT", message });
}

export function canonicalRoot(fs: FileOps, workspaceRoot: string): string {
  if (typeof workspaceRoot !== "string" || !isAbsolute(workspaceRoot)) {
    throw invalid("A workspace lock needs an absolute workspaceRoot.");
  }
  let root: string;
  try {
    root = fs.realpathSync(workspaceRoot);
  } catch (error) {
    throw new SagaError({
      code: "INVALID_ARGUMENT",
      cause: error,
      message: `The workspace ${workspaceRoot} cannot be resolved (${errnoOf(error) ?? "error"}). Check that it exists.`,
    });
  }
  if (root === sep) throw invalid("The filesystem root cannot be locked as a workspace.");
  return root;
}

export function locksDirOf(dataDir: string): string {
  if (typeof dataDir !== "string" || !isAbsolute(dataDir))
    throw invalid("The workspace lock needs an absolute dataDir.");
  return join(dataDir, LOCKS_DIR);
}

/** The lock file of a (canonical) workspace root. */
export function workspaceLockPath(dataDir: string, canonicalWorkspaceRoot: string): string {
  return join(locksDirOf(dataDir), `ws-${sha256Hex(canonicalWorkspaceRoot)}.lock`);
}

export function overlaps(a: string, b: string): boolean {
  return a === b || a.startsWith(b + sep) || b.startsWith(a + sep);
}

export function corruptLock(path: string, cause?: unknown): SagaError {
  return new SagaError({
    code: "LOCK_FAILED",
    cause,
    message: `The workspace lock ${path} is unreadable or not a workspace lock, so no workspace it might cover can be locked. It was left as it is: it may guard a restore that stopped. Do not remove it; settle that restore first (\`drydock restores list\`, then \`drydock restores show <operation>\` says what happened to the lock and prints the command that settles the restore).`,
  });
}

export function parseOwner(path: string, owner: unknown): WorkspaceLockOwner {
  const parsed = WorkspaceLockOwnerSchema.safeParse(owner);
  if (!parsed.success) throw corruptLock(path);
  // The file name binds the lock to its workspace: a payload naming another root is not ours to trust.
  if (workspaceLockPath(join(path, "..", ".."), parsed.data.payload.workspaceRoot) !== path)
    throw corruptLock(path);
  return parsed.data;
}

export function readOwner(fs: FileOps, path: string): WorkspaceLockOwner | null {
  let owner: unknown;
  try {
    owner = inspectLock(path, { fs });
  } catch (error) {
    // LOCK_IO: this process could not read the file (out of descriptors or memory, interrupted), which
    // says nothing about the lock; never tell a person to remove it for that.
    if (isLockError(error) && error.code === "LOCK_IO") throw readOwnerIoError(path, error);
    throw corruptLock(path, error);
  }
  return owner === null ? null : parseOwner(path, owner);
}

export function readOwnerIoError(path: string, error: Error): SagaError {
  return new SagaError({
    code: "LOCK_FAILED",
    cause: error,
    message: `The workspace lock ${path} could not be read by this process (${error.message}), so it was not judged and nothing was changed. Retry shortly.`,
  });
}

/** The owner of a workspace's lock, or null. Read-only: creates nothing. */
export function inspectWorkspaceLock(options: WorkspaceLockBaseOptions): WorkspaceLockOwner | null {
  const fs = options.fs ?? nodeFileOps;
  const root = canonicalRoot(fs, options.workspaceRoot);
  return readOwner(fs, workspaceLockPath(options.dataDir, root));
}

/** The sha256 digest an operator echoes back to take over a torn lock (`torn:` + it, in drydock's fence). */
export function tornLockDigest(torn: TornLock): string {
  const { dev, ino, size, ctimeMs } = torn;
  return domainDigest("drydock-torn-workspace-lock-v1", { torn: true, dev, ino, size, ctimeMs });
}

export function isTornLockShape(value: unknown): value is TornLock {
  if (typeof value !== "object" || value === null) return false;
  const torn = value as Record<string, unknown>;
  const natural = (n: unknown) => typeof n === "number" && Number.isSafeInteger(n) && n >= 0;
  return (
    torn.torn === true &&
    natural(torn.dev) &&
    natural(torn.ino) &&
    natural(torn.size) &&
    typeof torn.ctimeMs === "number" &&
    Number.isFinite(torn.ctimeMs)
  );
}

export function sameFile(a: WorkspaceLockFileIdentity | null, b: WorkspaceLockFileIdentity | null): boolean {
  return (
    a !== null &&
    b !== null &&
    a.dev === b.dev &&
    a.ino === b.ino &&
    a.size === b.size &&
    a.ctimeMs === b.ctimeMs
  );
}

export function lockFileIdentity(fs: FileOps, path: string): WorkspaceLockFileIdentity | null {
  try {
    const { dev, ino, size, ctimeMs } = fs.lstatSync(path);
    return { dev, ino, size, ctimeMs };
  } catch {
    // Gone, or not even stat-able: no identity, so never torn (file-lock would not call it torn either).
    return null;
  }
}

/** This machine's boot time as file-lock's boot-time rule reads it; undefined where unknown. */
export function bootTimeOf(identity: LockOptions["identity"] | undefined): number | undefined {
  return (identity ?? createSystemIdentity()).bootTimeMs();
}

/**
 * The lock file's state. The file is stat'ed before and after its bytes are judged, so the identity is the
 * one of the bytes read (file-lock reads them through one descriptor; a file replaced in between is read
 * again). Torn, exactly as file-lock decides it: its bytes are no lock owner (file-lock's LOCK_INVALID or
 * LOCK_UNREADABLE) and its ctime is older than this boot. A valid file-lock owner that is not a workspace
 * lock of this workspace is unreadable but never torn: a complete file was written there.
 */
export function readState(
  fs: FileOps,
  path: string,
  bootTimeMs: () => number | undefined,
): WorkspaceLockState {
  for (let attempt = 0; ; attempt += 1) {
    const before = lockFileIdentity(fs, path);
    let owner: unknown;
    try {
      owner = inspectLock(path, { fs });
    } catch (error) {
      if (isLockError(error) && error.code === "LOCK_IO") throw readOwnerIoError(path, error);
      const after = lockFileIdentity(fs, path);
      if (after === null && before === null) {
        // Could not be stat'ed either time: unreadable, identity unknown, never torn.
        return { kind: "unreadable", path, reason: reasonOf(error), torn: null, identity: null };
      }
      if (!sameFile(before, after)) {
        if (attempt < 3) continue;
        throw new SagaError({
          code: "LOCK_FAILED",
          cause: error,
          message: `The workspace lock ${path} kept changing while it was read, so it was not judged and nothing was changed. Retry shortly; if this persists, find what rewrites it.`,
        });
      }
      const identity = after as WorkspaceLockFileIdentity;
      const boot = bootTimeMs();
      const torn =
        boot !== undefined && identity.ctimeMs < boot ? { torn: true as const, ...identity } : null;
      return { kind: "unreadable", path, reason: reasonOf(error), torn, identity };
    }
    if (owner === null) return { kind: "absent" };
    try {
      return { kind: "owner", owner: parseOwner(path, owner) };
    } catch {
      return {
        kind: "unreadable",
        path,
        reason: "it holds a lock owner that is not a workspace lock of this workspace",
        torn: null,
        identity: lockFileIdentity(fs, path),
      };
    }
  }
}

export function reasonOf(error: unknown): string {
  if (isLockError(error)) {
    const why = /(?:lock owner file|could not be read) \(([^)]*)\)/.exec(error.message)?.[1];
    const what =
      error.code === "LOCK_UNREADABLE" ? "it could not be read" : "it is not a valid lock owner file";
    return why ? `${what}: ${why}` : what;
  }
  return error instanceof Error ? error.message : String(error);
}

/**
 * Like `inspectWorkspaceLock`, but an unreadable lock file is a result, never an error: `unreadable`, with
 * why, the file's identity, and `torn` when it may be taken over (`takeoverWorkspaceLock` with
 * `expectedTorn`). Read-only: creates nothing. Throws only when this process could not judge the file
 * (LOCK_FAILED: out of descriptors or memory, or the file kept changing) or the workspace is invalid.
 */
export function inspectWorkspaceLockState(options: WorkspaceLockBaseOptions): WorkspaceLockState {
  const fs = options.fs ?? nodeFileOps;
  const root = canonicalRoot(fs, options.workspaceRoot);
  return readState(fs, workspaceLockPath(options.dataDir, root), () => bootTimeOf(options.identity));
}
