import {
  acquireLock,
  acquireLockSync,
  collectLockGarbageIn,
  type FileOps,
  isLockError,
  type LockHandle,
  type LockOptions,
} from "@drydock/file-lock";
import { SagaError } from "../errors.js";

/** Options a caller may tune for the store's short state locks (liveness and identity seams, wait). */
export type StateLockOptions = Pick<LockOptions, "waitMs" | "retryMs" | "isProcessAlive" | "identity">;

export function lockFailed(error: unknown, what: string): SagaError {
  const code = isLockError(error) ? error.code : undefined;
  // LOCK_IO says exactly what happened (e.g. taken but not flushed, and left held by this process when
  // giving it up failed too): "nothing was changed, retry" could be false, so its own words are passed on.
  if (code === "LOCK_IO") {
    return new SagaError({
      code: "LOCK_FAILED",
      cause: error,
      message: `Could not lock ${what}: ${(error as Error).message}`,
    });
  }
  const why =
    code === "LOCK_TIMEOUT"
      ? "another process kept it busy"
      : code === "LOCK_INVALID" || code === "LOCK_UNREADABLE"
        ? "its lock file is unreadable or invalid"
        : "the lock could not be taken";
  return new SagaError({
    code: "LOCK_FAILED",
    cause: error,
    message: `Could not lock ${what}: ${why}. Nothing was changed; retry shortly, or inspect the lock file if this persists.`,
  });
}

/**
 * Releases with one retry. A release that fails leaves the lock owned by this live process, so every
 * later caller would wait for it until this process exits; the fault model is transient, so retry once.
 */
export function releaseWithRetry(handle: LockHandle): void {
  try {
    handle.release();
  } catch {
    handle.release();
  }
}

/**
 * The store takes one of these per call, for a few file operations each: an acquire that links a kept owner
 * file instead of creating one is most of what the lock costs (file-lock's `reuseOwnerFile`).
 */
function stateLockOptions(fs: FileOps, options: StateLockOptions | undefined): LockOptions {
  return { waitMs: 5_000, ...options, fs, label: "restore saga", reuseOwnerFile: true };
}

/**
 * Runs `fn` under a short cross-process lock. The store's callbacks are synchronous, so no other task of
 * this process interleaves between their reads and the writes that depend on them. Dead holders are reaped (these locks guard only the store's own files).
 */
export async function withStateLock<T>(
  path: string,
  what: string,
  fs: FileOps,
  options: StateLockOptions | undefined,
  fn: () => T | Promise<T>,
): Promise<T> {
  let handle: LockHandle;
  try {
    handle = await acquireLock(path, stateLockOptions(fs, options));
  } catch (error) {
    throw lockFailed(error, what);
  }
  let result: T;
  try {
    result = await fn();
  } catch (error) {
    try {
      releaseWithRetry(handle);
    } catch {
      // fn's failure is the one the caller must see; a stuck lock surfaces as LOCK_FAILED next time.
    }
    throw error;
  }
  try {
    releaseWithRetry(handle);
  } catch (error) {
    throw lockFailed(error, what);
  }
  return result;
}

/** The synchronous twin, for a lock nested inside another short lock (held for a few file operations). */
export function withNestedLock<T>(
  path: string,
  what: string,
  fs: FileOps,
  options: StateLockOptions | undefined,
  fn: () => T,
): T {
  let handle: LockHandle;
  try {
    handle = acquireLockSync(path, stateLockOptions(fs, options));
  } catch (error) {
    throw lockFailed(error, what);
  }
  let result: T;
  try {
    result = fn();
  } catch (error) {
    try {
      releaseWithRetry(handle);
    } catch {
      // fn's failure is the one the caller must see.
    }
    throw error;
  }
  try {
    releaseWithRetry(handle);
  } catch (error) {
    throw lockFailed(error, what);
  }
  return result;
}

/**
 * Removes what dead processes left in a state-lock directory: the owner files they kept for their next
 * acquire (`reuseOwnerFile` keeps up to 16 per process, and a SIGKILLed process cannot remove its own),
 * candidates of a crash mid-acquire, and election records whose lock moved on. file-lock judges every file,
 * so a live process's are kept. Hygiene only: a failure here is ignored (the next store retries).
 */
export function sweepDeadLockFiles(dir: string, fs: FileOps, options: StateLockOptions | undefined): void {
  try {
    collectLockGarbageIn(dir, {
      fs,
      ...(options?.isProcessAlive ? { isProcessAlive: options.isProcessAlive } : {}),
      ...(options?.identity ? { identity: options.identity } : {}),
    });
  } catch {
    // Hygiene only.
  }
}
