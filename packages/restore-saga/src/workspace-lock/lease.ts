import {
  type FileOps,
  isLockError,
  type LockHandle,
  type LockOptions,
  nodeFileOps,
  type TornLock,
} from "@drydock/file-lock";
import { errnoOf, isSagaError, SagaError } from "../errors.js";
import { ensurePrivateDir } from "../internal/files.js";
import {
  lockFailed,
  releaseSettled,
  releaseWithRetry,
  retryInBackground,
  stillHeld,
} from "../internal/state-lock.js";
import { boundedText } from "../internal/text.js";
import {
  OPERATION_ID_PATTERN,
  type WorkspaceLockOwner,
  type WorkspaceLockPayload,
  WorkspaceLockPayloadSchema,
} from "../schema.js";
import { canonicalRoot, invalid, locksDirOf, parseOwner, workspaceLockPath } from "./inspect.js";
import { type Judge, makeJudge, ownerLockOptions } from "./overlap.js";
import {
  type HeldWorkspaceLock,
  ownerDigest,
  WORKSPACE_EDIT_LOCK_PURPOSE,
  WORKSPACE_LOCK_PURPOSE,
  type WorkspaceLockBaseOptions,
  type WorkspaceLockOptions,
} from "./types.js";

/** One acquisition prepared (`Prepared`: its options, paths and identity), and the lease it hands out. */

export function clampWait(value: number | undefined): number {
  if (value === undefined) return 5_000;
  if (!Number.isFinite(value) || value < 0 || value > 60_000) throw invalid("waitMs is 0 to 60000 ms.");
  return value;
}

export interface Prepared {
  fs: FileOps;
  root: string;
  locksDir: string;
  path: string;
  payload: WorkspaceLockPayload;
  lockOptions: LockOptions;
  seams: Pick<WorkspaceLockBaseOptions, "isProcessAlive" | "identity" | "now">;
  judge: Judge;
  waitMs: number;
  retryMs: number;
}

export function prepare(options: WorkspaceLockOptions): Prepared {
  const fs = options.fs ?? nodeFileOps;
  if (typeof options.transactionId !== "string" || !OPERATION_ID_PATTERN.test(options.transactionId)) {
    throw invalid("A workspace lock needs the operation id of its transaction.");
  }
  const locksDir = locksDirOf(options.dataDir);
  const root = canonicalRoot(fs, options.workspaceRoot);
  const purpose = options.purpose ?? WORKSPACE_LOCK_PURPOSE;
  if (purpose !== WORKSPACE_LOCK_PURPOSE && purpose !== WORKSPACE_EDIT_LOCK_PURPOSE)
    throw invalid(
      `A workspace lock's purpose is ${WORKSPACE_LOCK_PURPOSE} or ${WORKSPACE_EDIT_LOCK_PURPOSE}.`,
    );
  const payload = WorkspaceLockPayloadSchema.parse({
    transactionId: options.transactionId,
    workspaceRoot: root,
    purpose,
  });
  try {
    ensurePrivateDir(fs, locksDir);
  } catch (error) {
    if (error instanceof SagaError) throw error;
    throw lockFailed(error, `the workspace lock directory ${locksDir}`);
  }
  const seams = {
    ...(options.isProcessAlive ? { isProcessAlive: options.isProcessAlive } : {}),
    ...(options.identity ? { identity: options.identity } : {}),
    ...(options.now ? { now: options.now } : {}),
  };
  return {
    fs,
    root,
    locksDir,
    path: workspaceLockPath(options.dataDir, root),
    payload,
    lockOptions: ownerLockOptions(fs, payload, seams),
    seams,
    judge: makeJudge(options),
    waitMs: clampWait(options.waitMs),
    retryMs: options.retryMs ?? 25,
  };
}

export function registryLockOptions(p: Prepared) {
  return {
    waitMs: 5_000,
    ...(p.lockOptions.isProcessAlive ? { isProcessAlive: p.lockOptions.isProcessAlive } : {}),
    ...(p.lockOptions.identity ? { identity: p.lockOptions.identity } : {}),
  };
}

export function makeLease(
  p: Prepared,
  handle: LockHandle,
  priorOwner: WorkspaceLockOwner | null,
  priorTornLock: TornLock | null = null,
  reapedEditLocks: readonly WorkspaceLockOwner[] = [],
): HeldWorkspaceLock {
  const holder =
    p.payload.purpose === WORKSPACE_EDIT_LOCK_PURPOSE
      ? `workspace edit ${p.payload.transactionId}`
      : `restore ${p.payload.transactionId}`;
  const owner = parseOwner(p.path, handle.owner);
  const digest = ownerDigest(owner);
  let retention: SagaError | null = null;
  let released = false;
  const lease: HeldWorkspaceLock = {
    workspaceRoot: p.root,
    owner,
    ownerDigest: digest,
    priorOwner,
    priorTornLock,
    reapedEditLocks: Object.freeze([...reapedEditLocks]),
    recoveryOfOperationId: priorOwner
      ? priorOwner.payload.transactionId
      : priorTornLock
        ? p.payload.transactionId
        : null,
    get retention() {
      return retention;
    },
    assertOwned() {
      try {
        handle.assertOwned();
      } catch (error) {
        // A lock file that could not be read just now (I/O, unreadable) is no proof of a loss: the work stops
        // all the same, and whoever settles it says whether the lock was kept. Another owner, no file, or a
        // file rewritten into something that is no owner record (LOCK_INVALID: our own is always published
        // whole) is a loss.
        if (isLockError(error) && (error.code === "LOCK_IO" || error.code === "LOCK_UNREADABLE")) {
          throw new SagaError({
            code: "LOCK_FAILED",
            cause: error,
            ownerOperationId: p.payload.transactionId,
            message: `The lock on workspace ${p.root} could not be checked (${error.code}), so the work under it stopped. Check the data directory's disk.`,
          });
        }
        throw new SagaError({
          code: "LOCK_OWNERSHIP_LOST",
          cause: error,
          ownerOperationId: p.payload.transactionId,
          message: `The lock on workspace ${p.root} no longer belongs to ${holder}. Stop: another process may be changing the workspace. Inspect it with the recovery tool.`,
        });
      }
    },
    retainForRecovery(reason: string): never {
      if (p.payload.purpose !== WORKSPACE_LOCK_PURPOSE) {
        // Its dead lock would be taken over by the next acquisition: there is nothing to retain it for.
        throw new SagaError({
          code: "INVALID_ARGUMENT",
          message: `Only a restore's workspace lock can be retained for recovery, not ${holder}'s; it is released.`,
        });
      }
      // A lock that is no longer ours is never claimed as retained (LOCK_OWNERSHIP_LOST): the file on disk
      // is another owner's, or gone, and another process may be changing the workspace. A lock that could
      // not be checked (I/O, unreadable) is retained all the same: fail closed, as release() keeps a lock
      // it cannot read.
      try {
        lease.assertOwned();
      } catch (error) {
        if (isSagaError(error) && error.code === "LOCK_OWNERSHIP_LOST") throw error;
      }
      if (retention) throw retention;
      const text = boundedText(reason, "", 512);
      retention = new SagaError({
        code: "RECOVERY_REQUIRED",
        workspaceLockRetained: true,
        retainedOwnerDigest: digest,
        retentionReason: text || "the transaction's outcome is unknown",
        ownerOperationId: p.payload.transactionId,
        message: `Restore ${p.payload.transactionId} on ${p.root} did not finish (${text || "outcome unknown"}). The workspace lock is kept so nothing else touches the workspace; settle it with the fenced recovery that is eligible for it (abort, release, complete or rollback).`,
      });
      throw retention;
    },
    release() {
      if (released) return;
      try {
        releaseWithRetry(handle);
      } catch (error) {
        // file-lock has given the handle up: the lock on disk is another owner's (or gone) and stays so.
        if (isLockError(error) && error.code === "LOCK_OWNERSHIP_LOST") released = true;
        // Still ours (the unlink or the read before it failed): retried in the background, so a workspace
        // is not blocked until this process exits by one bad moment of its disk. Never a retained lock.
        else if (stillHeld(error)) {
          retryInBackground(() => {
            if (released || retention !== null) return true;
            if (!releaseSettled(handle)) return false;
            released = true;
            return true;
          });
          throw releaseFailed(p, error, true);
        }
        throw releaseFailed(p, error);
      }
      released = true;
    },
  };
  return lease;
}

/** A lease's release failed. Never "could not lock, nothing was changed": the restore ran under it. */
export function releaseFailed(p: Prepared, error: unknown, retrying = false): SagaError {
  const tx = p.payload.transactionId;
  if (isLockError(error) && error.code === "LOCK_OWNERSHIP_LOST") {
    return new SagaError({
      code: "LOCK_OWNERSHIP_LOST",
      cause: error,
      ownerOperationId: tx,
      message: `The lock on workspace ${p.root} was no longer restore ${tx}'s when it released it: it had been taken by another owner or removed, and was left as it is. What the restore did may have overlapped with another process: inspect the workspace with the recovery tool.`,
    });
  }
  // file-lock's own words say whether the lock is still held (LOCK_IO, LOCK_UNREADABLE: call release()
  // again, or exit) or was rewritten by something else (LOCK_INVALID: left as it is, inspect it).
  return new SagaError({
    code: "LOCK_FAILED",
    cause: error,
    ownerOperationId: tx,
    message: `The lock of restore ${tx} on workspace ${p.root} was not released: ${(error as Error).message}${
      retrying
        ? " This process retries releasing it in the background for about a minute; if that fails too, the lock is freed when the process exits."
        : ""
    }`,
  });
}

/**
 * The registry lock was no longer ours when acquireWorkspaceLock let go of it: another process may have
 * passed its own overlap scan meanwhile, so the workspace lock just taken (if any) is given up again.
 */
export function registryLost(p: Prepared, error: SagaError, lease: HeldWorkspaceLock | undefined): SagaError {
  let outcome = " Nothing was changed.";
  if (lease) {
    try {
      lease.release();
      outcome = " The workspace lock it had just taken was released again; nothing was changed.";
    } catch (releaseError) {
      const why = errnoOf((releaseError as Error).cause) ?? (releaseError as SagaError).code;
      outcome = stillHeld((releaseError as Error).cause)
        ? ` Giving up the workspace lock it had just taken failed too (${why}): this process retries that in the background for about a minute, and holds the lock until then (at the latest, until it exits).`
        : ` Giving up the workspace lock it had just taken failed too (${why}): this process holds it until it exits.`;
    }
  }
  return new SagaError({
    code: "LOCK_FAILED",
    cause: error,
    message: `The workspace lock registry in ${p.locksDir} was taken from this process while it checked ${p.root} for overlapping restores, so that check cannot be trusted.${outcome} Retry shortly, and inspect ${p.locksDir} if this persists.`,
  });
}
