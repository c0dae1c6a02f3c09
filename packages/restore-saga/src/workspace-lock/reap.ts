import { join } from "node:path";
import { type FileOps, type LockOptions, nodeFileOps } from "@drydock/file-lock";
import { errnoOf, isSagaError } from "../errors.js";
import { lockFailed, withStateLock } from "../internal/state-lock.js";
import type { WorkspaceLockOwner } from "../schema.js";
import { locksDirOf, readOwner } from "./inspect.js";
import { makeJudge, removeDeadEditLock } from "./overlap.js";
import { WORKSPACE_EDIT_LOCK_PURPOSE, WORKSPACE_LOCK_FILE } from "./types.js";

/** Reaping every dead edit lock at once. */

export interface ReapDeadEditLocksOptions {
  /** Locks live in `<dataDir>/locks`; a data directory without them has nothing to reap (nothing is created). */
  dataDir: string;
  fs?: FileOps;
  isProcessAlive?: (pid: number) => boolean;
  identity?: LockOptions["identity"];
  now?: () => number;
  /**
   * Runs while each stopped edit's lock is held by this process (taken over, not yet released), e.g. to
   * sweep the temps that edit left in its workspace (which may no longer exist). If it throws, the lock is
   * still released and the error propagates.
   */
  whileHeld?: (owner: WorkspaceLockOwner) => void | Promise<void>;
}

export interface ReapDeadEditLocksResult {
  /** The dead workspace-edit owners whose locks were removed. */
  readonly removed: readonly WorkspaceLockOwner[];
}

/**
 * Removes every workspace lock a stopped workspace edit left (a dead `workspace-edit` owner, judged by
 * file-lock: never a live or unverifiable one), each through the exact owner's takeover and a release,
 * under the registry lock. Restores' locks, live locks and unreadable lock files are left exactly as they
 * are. For a server's startup, so such a lock does not linger until the workspace's next acquisition.
 */
export async function reapDeadEditLocks(options: ReapDeadEditLocksOptions): Promise<ReapDeadEditLocksResult> {
  const fs = options.fs ?? nodeFileOps;
  const locksDir = locksDirOf(options.dataDir);
  const seams = {
    ...(options.isProcessAlive ? { isProcessAlive: options.isProcessAlive } : {}),
    ...(options.identity ? { identity: options.identity } : {}),
    ...(options.now ? { now: options.now } : {}),
  };
  const judge = makeJudge(seams);
  const isEditLock = (name: string): boolean => {
    if (!WORKSPACE_LOCK_FILE.test(name)) return false;
    try {
      return readOwner(fs, join(locksDir, name))?.payload.purpose === WORKSPACE_EDIT_LOCK_PURPOSE;
    } catch {
      return false;
    }
  };
  let names: string[];
  try {
    names = fs.readdirSync(locksDir);
  } catch (error) {
    if (errnoOf(error) === "ENOENT") return { removed: [] };
    throw lockFailed(error, `the workspace lock registry ${locksDir}`);
  }
  // Nothing to do without an edit lock on disk: the registry lock is not even taken.
  if (!names.some(isEditLock)) return { removed: [] };
  const removed: WorkspaceLockOwner[] = [];
  const registry = {
    waitMs: 5_000,
    ...(seams.isProcessAlive ? { isProcessAlive: seams.isProcessAlive } : {}),
    ...(seams.identity ? { identity: seams.identity } : {}),
  };
  try {
    await withStateLock(
      join(locksDir, "registry.lock"),
      "the workspace lock registry",
      fs,
      registry,
      async () => {
        for (const name of fs.readdirSync(locksDir).sort()) {
          if (!WORKSPACE_LOCK_FILE.test(name)) continue;
          const path = join(locksDir, name);
          let owner: WorkspaceLockOwner | null;
          try {
            owner = readOwner(fs, path);
          } catch {
            // Unreadable: not judged here (it may guard a restore); the recovery tools report it.
            continue;
          }
          if (owner === null || owner.payload.purpose !== WORKSPACE_EDIT_LOCK_PURPOSE) continue;
          if (judge(owner) !== "dead") continue;
          if (await removeDeadEditLock({ fs, seams }, path, owner, options.whileHeld)) removed.push(owner);
        }
      },
    );
  } catch (error) {
    // The registry was taken from this process at its release: what was removed is removed (a removal can
    // only make another process's overlap scan less restrictive), so that is no failure of this call.
    if (!(isSagaError(error) && error.code === "LOCK_OWNERSHIP_LOST")) throw error;
  }
  return { removed };
}
