import { join } from "node:path";
import {
  type FileOps,
  isLockError,
  judgeOwnerLiveness,
  type LockHandle,
  type LockOptions,
  takeoverLock,
} from "@drydock/file-lock";
import { errnoOf, SagaError } from "../errors.js";
import { lockFailed, releaseWithRetry } from "../internal/state-lock.js";
import type { WorkspaceLockOwner, WorkspaceLockPayload } from "../schema.js";
import { overlaps, readOwner } from "./inspect.js";
import type { Prepared } from "./lease.js";
import { WORKSPACE_EDIT_LOCK_PURPOSE, WORKSPACE_LOCK_FILE, type WorkspaceLockBaseOptions } from "./types.js";

/** Overlap: the scan of every workspace lock under the registry lock, and what it does with dead edit locks. */

export type Judge = (owner: WorkspaceLockOwner) => "alive" | "dead";

export function makeJudge(options: Pick<WorkspaceLockBaseOptions, "isProcessAlive" | "identity">): Judge {
  const seams = {
    ...(options.isProcessAlive ? { isProcessAlive: options.isProcessAlive } : {}),
    ...(options.identity ? { identity: options.identity } : {}),
  };
  // file-lock's own verdict, so an overlapping neighbour's lock is judged as its own path would be (another
  // host or pid namespace is never dead); for a neighbour it only decides which error to give.
  return (owner) => (judgeOwnerLiveness(owner, seams) === "dead" ? "dead" : "alive");
}

export function blockedError(
  owner: WorkspaceLockOwner,
  dead: boolean,
  root: string,
  sameDirectory = false,
): SagaError {
  const details = {
    ownerOperationId: owner.payload.transactionId,
    ownerPid: owner.pid,
    ownerWorkspaceRoot: owner.payload.workspaceRoot,
  };
  const relation =
    owner.payload.workspaceRoot === root
      ? "this workspace"
      : sameDirectory
        ? "this same directory under another path"
        : "an overlapping workspace";
  if (owner.payload.purpose === WORKSPACE_EDIT_LOCK_PURPOSE) {
    // A dead one is taken over by the next attempt; this is only said when it changed while being removed.
    return new SagaError({
      code: "WORKSPACE_LOCKED",
      ...details,
      message: dead
        ? `A lock left by a stopped file write, deletion or checkpoint (${owner.payload.transactionId}) on ${relation} (${owner.payload.workspaceRoot}) changed while it was being removed. Retry.`
        : `A file write, deletion or checkpoint (${owner.payload.transactionId}, pid ${owner.pid}) is in progress on ${relation} (${owner.payload.workspaceRoot}). Wait for it to finish, then retry.`,
    });
  }
  if (dead) {
    return new SagaError({
      code: "RECOVERY_REQUIRED",
      workspaceLockRetained: false,
      ...details,
      message: `Restore ${owner.payload.transactionId} on ${relation} (${owner.payload.workspaceRoot}) stopped without finishing and still holds its lock. It is never taken over implicitly: inspect it with the recovery tool and abort, roll back or release it.`,
    });
  }
  return new SagaError({
    code: "WORKSPACE_LOCKED",
    ...details,
    message: `Restore ${owner.payload.transactionId} (pid ${owner.pid}) is running on ${relation} (${owner.payload.workspaceRoot}). Wait for it to finish, then retry.`,
  });
}

export interface DirIdentity {
  dev: bigint;
  ino: bigint;
}

/** Device and inode of a directory; null when it no longer exists (a gone root is nobody's alias). */
export function dirIdentity(fs: FileOps, path: string, root: string): DirIdentity | null {
  try {
    const { dev, ino } = fs.statSync(path, { bigint: true });
    return { dev, ino };
  } catch (error) {
    const code = errnoOf(error);
    if (code === "ENOENT" || code === "ENOTDIR") return null;
    // Fails closed, like an unreadable lock: an unknown identity could be ours.
    throw new SagaError({
      code: "LOCK_FAILED",
      cause: error,
      message: `The directory ${path} could not be inspected (${code ?? "error"}), so whether a workspace lock on it covers ${root} under another path is unknown. Nothing was changed; retry shortly, or check that directory.`,
    });
  }
}

/**
 * Scans every workspace lock except `exceptPath` for one whose root overlaps `root`: by path (equal,
 * parent or child), or by identity (the same directory under another path, e.g. a bind mount; lock file
 * names stay keyed by path, for compatibility, so this is the only place such an alias is seen).
 */
export async function findOverlap(p: Prepared, reaped: WorkspaceLockOwner[]): Promise<SagaError | null> {
  const { fs, locksDir, root, judge } = p;
  const exceptPath = p.path;
  let names: string[];
  try {
    names = fs.readdirSync(locksDir);
  } catch (error) {
    throw lockFailed(error, `the workspace lock registry ${locksDir}`);
  }
  let ours: DirIdentity | null | undefined;
  for (const name of names.sort()) {
    if (!WORKSPACE_LOCK_FILE.test(name)) continue;
    const path = join(locksDir, name);
    if (path === exceptPath) continue;
    const owner = readOwner(fs, path);
    if (!owner) continue;
    const other = owner.payload.workspaceRoot;
    let sameDirectory = false;
    if (!overlaps(other, root)) {
      if (ours === undefined) ours = dirIdentity(fs, root, root);
      const theirs = ours && dirIdentity(fs, other, root);
      if (!(ours && theirs && theirs.dev === ours.dev && theirs.ino === ours.ino)) continue;
      sameDirectory = true;
    }
    const dead = judge(owner) === "dead";
    if (dead && owner.payload.purpose === WORKSPACE_EDIT_LOCK_PURPOSE) {
      // A stopped edit's lock guards nothing: removed (exact owner), and the scan goes on.
      if (await removeDeadEditLock(p, path, owner)) {
        reaped.push(owner);
        continue;
      }
    }
    return blockedError(owner, dead, root, sameDirectory);
  }
  return null;
}

/** file-lock options for a lock file holding `payload` (a takeover publishes an owner carrying it). */
export function ownerLockOptions(
  fs: FileOps,
  payload: WorkspaceLockPayload,
  seams: Pick<WorkspaceLockBaseOptions, "isProcessAlive" | "identity" | "now">,
): LockOptions {
  return {
    fs,
    payload,
    reapDeadOwners: false,
    durable: true,
    label: payload.purpose === WORKSPACE_EDIT_LOCK_PURPOSE ? "workspace edit" : "workspace restore",
    ...(seams.isProcessAlive ? { isProcessAlive: seams.isProcessAlive } : {}),
    ...(seams.identity ? { identity: seams.identity } : {}),
    ...(seams.now ? { now: seams.now } : {}),
  };
}

/**
 * Takes over the exact dead workspace-edit owner `owner` of `path` (file-lock's `takeoverLock`: the same
 * payload, this process as owner, renamed over the file under the reap election, so the lock is never
 * absent), runs `whileHeld`, and releases it. Only ever called under the registry lock. false: the lock is
 * no longer exactly that dead owner (gone, replaced, or alive after all), nothing was changed.
 */
export async function removeDeadEditLock(
  p: Pick<Prepared, "fs" | "seams">,
  path: string,
  owner: WorkspaceLockOwner,
  whileHeld?: (owner: WorkspaceLockOwner) => void | Promise<void>,
): Promise<boolean> {
  const handle = await takeoverDeadEdit(path, owner, ownerLockOptions(p.fs, owner.payload, p.seams));
  if (handle === null) return false;
  let failed: { error: unknown } | null = null;
  try {
    await whileHeld?.(owner);
  } catch (error) {
    failed = { error };
  }
  try {
    releaseWithRetry(handle);
  } catch (error) {
    throw new SagaError({
      code: "LOCK_FAILED",
      cause: error,
      message: `The lock ${path}, left by a stopped workspace edit (${owner.payload.transactionId}), was taken over to be removed, but its release failed: ${(error as Error).message}`,
    });
  }
  if (failed !== null) throw failed.error;
  return true;
}

/** `takeoverLock` of an exact dead workspace-edit owner; null when the lock changed (or is alive after all). */
export async function takeoverDeadEdit(
  path: string,
  owner: WorkspaceLockOwner,
  lockOptions: LockOptions,
): Promise<LockHandle | null> {
  if (owner.payload.purpose !== WORKSPACE_EDIT_LOCK_PURPOSE) return null;
  try {
    return await takeoverLock(path, owner, { ...lockOptions, waitMs: 1_000 });
  } catch (error) {
    if (isLockError(error) && (error.code === "LOCK_OWNERSHIP_LOST" || error.code === "LOCK_TIMEOUT"))
      return null;
    throw lockFailed(error, `the lock ${path} left by a stopped workspace edit`);
  }
}
