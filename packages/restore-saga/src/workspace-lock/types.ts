import type { FileOps, LockOptions, TornLock } from "@drydock/file-lock";
import type { SagaError } from "../errors.js";
import { plainDigest } from "../internal/canonical.js";
import type { WorkspaceLockOwner, WorkspaceLockPurpose } from "../schema.js";

/**
 * Workspace lock: one @drydock/file-lock file per workspace, `<dataDir>/locks/ws-<sha256(root)>.lock`,
 * owned with `reapDeadOwners: false` (a dead restore's lock is evidence, not garbage) and carrying the
 * payload `{ transactionId, workspaceRoot, purpose }`. Published with `durable: true`: the owner is flushed
 * before link(2) and the directory after, by acquire and by takeover alike, so a lock that a failed restore
 * retains (retainForRecovery writes nothing: it keeps the file acquire or takeover published) is still there
 * after a power loss. Two fsyncs per restore; the registry lock stays a plain short lock.
 *
 * Overlap (a lock on /a refuses /a/b and the reverse) is decided by a scan of every workspace lock in the
 * directory, made while holding `<dataDir>/locks/registry.lock`. Paths are compared, and so are the device
 * and inode of each locked root with ours: the same directory reached through a bind mount has another
 * path (and so another lock file) but the same identity. A bind mount BELOW a locked root is not seen.
 * Every acquisition and takeover scans and publishes under that registry lock, so two overlapping workspaces can never both pass the scan. Release
 * does not need it: removing a lock can only make a later scan less restrictive. A registry lock left by a
 * dead process is reaped (it guards nothing once its holder is gone).
 *
 * Purpose. A restore's lock (`checkpoint-restore`, the default) is never taken over implicitly: dead, it
 * guards a half-restored workspace. A `workspace-edit` lock (a file write, deletion or checkpoint: each
 * atomic per file, leaving at most unreferenced blobs and temps behind) guards nothing once its holder is
 * dead, so every acquisition and takeover that meets one dead (file-lock's verdict: pid, start time, boot
 * id, pid namespace; never a live or unverifiable owner), on this workspace or an overlapping one, takes
 * it over under the registry lock with file-lock's exact-owner `takeoverLock` (the file is renamed over,
 * never unlinked blindly): an acquisition of this workspace keeps it as its own lock, one of an
 * overlapping workspace releases it again. `reapDeadEditLocks` does the same for every such lock at once.
 */

export const WORKSPACE_LOCK_PURPOSE = "checkpoint-restore";
/** The purpose of a file write's, deletion's or checkpoint's lock: taken over by the next acquisition once dead. */
export const WORKSPACE_EDIT_LOCK_PURPOSE = "workspace-edit";
export const WORKSPACE_LOCK_FILE = /^ws-[0-9a-f]{64}\.lock$/;

/** The owner digest the saga records and an operator echoes back: `"sha256:" + hex(sha256(canonical owner))`. */
export function ownerDigest(owner: WorkspaceLockOwner): string {
  return plainDigest(owner);
}

export interface WorkspaceLockBaseOptions {
  /** Locks live in `<dataDir>/locks`. */
  dataDir: string;
  /** Canonicalised with realpath; the filesystem root is refused. */
  workspaceRoot: string;
  fs?: FileOps;
  /** Liveness probe, like `process.kill(pid, 0)` (return = alive, throw ESRCH = dead). */
  isProcessAlive?: (pid: number) => boolean;
  identity?: LockOptions["identity"];
  now?: () => number;
}

export interface WorkspaceLockOptions extends WorkspaceLockBaseOptions {
  /** The saga this lock belongs to (for a workspace edit: an id naming the edit). */
  transactionId: string;
  /**
   * What the lock guards (default `checkpoint-restore`). `workspace-edit`: a short edit that leaves nothing
   * to recover if its process dies (its dead lock is taken over by the next acquisition). Takeovers
   * (`takeoverWorkspaceLock`) are for restores only.
   */
  purpose?: WorkspaceLockPurpose;
  /** How long to wait for a live overlapping owner to finish, ms (default 5000, max 60000). */
  waitMs?: number;
  /** Pause between attempts, ms (default 25). */
  retryMs?: number;
}

/** Takes over the exact dead owner `expectedOwner`. */
export interface WorkspaceOwnerRecoveryLockOptions extends WorkspaceLockOptions {
  /** The exact owner on disk, as `inspectWorkspaceLock` returned it; it must be dead. */
  expectedOwner: WorkspaceLockOwner;
  expectedTorn?: undefined;
}

/** Takes over the exact lock file torn by a power loss that `inspectWorkspaceLockState` reported. */
export interface WorkspaceTornRecoveryLockOptions extends WorkspaceLockOptions {
  expectedOwner?: undefined;
  /**
   * The `torn` of an `unreadable` inspection (file-lock's `TornLock`): the very file, still unreadable and
   * last changed before this machine booted. The caller vouches that the lock is `transactionId`'s: a torn
   * file names no transaction.
   */
  expectedTorn: TornLock;
}

export type WorkspaceRecoveryLockOptions =
  | WorkspaceOwnerRecoveryLockOptions
  | WorkspaceTornRecoveryLockOptions;

/** Device, inode, size and ctime of a lock file, as fstat/lstat report them. */
export interface WorkspaceLockFileIdentity {
  readonly dev: number;
  readonly ino: number;
  readonly size: number;
  readonly ctimeMs: number;
}

/**
 * What a workspace's lock file holds, read-only. `unreadable`: a file is there but holds no owner of this
 * workspace (`reason` says why). `torn` is set when file-lock would report it as torn by a power loss (its
 * bytes are no lock owner and it was last changed before this machine booted): only then can it be taken
 * over (`expectedTorn`). `identity` is null when the file could not even be stat'ed.
 */
export type WorkspaceLockState =
  | { readonly kind: "absent" }
  | { readonly kind: "owner"; readonly owner: WorkspaceLockOwner }
  | {
      readonly kind: "unreadable";
      readonly path: string;
      readonly reason: string;
      readonly torn: TornLock | null;
      readonly identity: WorkspaceLockFileIdentity | null;
    };

export interface WorkspaceLease {
  readonly workspaceRoot: string;
  /** The owner this process published (its token is the proof of ownership: never log it). */
  readonly owner: WorkspaceLockOwner;
  readonly ownerDigest: string;
  /** The dead owner a takeover replaced; null for a fresh lock (and for a torn lock's takeover). */
  readonly priorOwner: WorkspaceLockOwner | null;
  /** The torn lock file a takeover replaced (`expectedTorn`); null or absent otherwise. */
  readonly priorTornLock?: TornLock | null;
  /** The transaction a takeover recovers; null for a fresh lock. */
  readonly recoveryOfOperationId: string | null;
  /** Throws LOCK_OWNERSHIP_LOST unless the lock file still holds exactly this owner. */
  assertOwned(): void;
  /**
   * Always throws a RECOVERY_REQUIRED error. If the callback of `withWorkspaceLock` lets THAT error
   * object propagate, the lock is kept on disk so only a fenced takeover can settle the transaction;
   * catching or replacing it releases the lock as usual. It first checks that the lock file still holds
   * this owner: a lock taken over or removed is never claimed as retained (LOCK_OWNERSHIP_LOST instead).
   */
  retainForRecovery(reason: string): never;
}

export interface HeldWorkspaceLock extends WorkspaceLease {
  /**
   * Locks of stopped workspace edits (dead `workspace-edit` owners, of this or an overlapping workspace)
   * this acquisition took over and removed, or kept as its own; empty for most.
   */
  readonly reapedEditLocks: readonly WorkspaceLockOwner[];
  /** The error `retainForRecovery` threw, if it was called. */
  readonly retention: SagaError | null;
  /** Removes the lock if it still holds this owner (one retry on a transient failure). */
  release(): void;
}
