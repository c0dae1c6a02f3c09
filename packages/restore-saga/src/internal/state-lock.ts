import {
  acquireLock,
  collectLockGarbageIn,
  type FileOps,
  isLockError,
  LockError,
  type LockHandle,
  type LockOptions,
} from "@drydock/file-lock";
import { type CommitState, errnoOf, SagaError } from "../errors.js";

/** Options a caller may tune for the store's short state locks (liveness and identity seams, wait). */
export type StateLockOptions = Pick<
  LockOptions,
  "waitMs" | "retryMs" | "isProcessAlive" | "identity" | "reapDeadOwners" | "reuseOwnerFile"
>;

/** For failures to TAKE a lock only: once a callback has run under it, see `lockLost` and `keepStuck`. */
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
      : code === "LOCK_OWNER_DEAD"
        ? "a process that died holds it, and a read-only reader never takes a lock over (the next drydock process that writes does)"
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
 * A release that changed nothing and saw no sign of anyone else: LOCK_IO (the unlink failed, or this
 * process could not read the file for a reason of its own) or LOCK_UNREADABLE (reading the file failed,
 * e.g. EIO). file-lock leaves the handle held, so the lock is still this process's and a retry may work.
 */
export function stillHeld(error: unknown): boolean {
  return isLockError(error) && (error.code === "LOCK_IO" || error.code === "LOCK_UNREADABLE");
}

/**
 * Releases, retrying once only where a retry can help (`stillHeld`). Every other failure is final and
 * thrown at once: LOCK_OWNERSHIP_LOST (the file no longer holds our owner; file-lock has marked the handle
 * released, so a retry would return quietly and hide that someone else held the lock while we worked),
 * LOCK_INVALID (something other than the lock rewrote its file; it is left as it is).
 */
export function releaseWithRetry(handle: LockHandle): void {
  try {
    handle.release();
  } catch (error) {
    if (!stillHeld(error)) throw error;
    handle.release();
  }
}

/** Why a release found the lock no longer ours, in a few words (file-lock's own message is on `cause`). */
function lostReason(error: unknown): string {
  if (isLockError(error) && error.code === "LOCK_OWNERSHIP_LOST")
    return "another owner holds it now, or it is gone";
  const path = isLockError(error) && error.path ? ` ${error.path}` : "";
  return `something other than the lock changed its file${path}, which was left as it is: inspect it`;
}

/**
 * The release after a callback ran found the lock no longer ours (another owner, gone, or its file
 * changed by something else): another process may have worked under "our" lock at the same time. A read
 * may be stale; the store turns this into WRITE_FAILED for a call that writes (`lostDuringWrite`).
 */
export function lockLost(error: unknown, what: string): SagaError {
  return new SagaError({
    code: "LOCK_OWNERSHIP_LOST",
    cause: error,
    message: `This process lost its lock on ${what} while it held it (${lostReason(error)}). What this call read under it may be stale: read it again before deciding anything.`,
  });
}

/** A write made under a lock that turned out to be lost: whether it stands, and what else changed, is unknown. */
export function lostDuringWrite(lost: SagaError, commitState: CommitState): SagaError {
  return new SagaError({
    code: "WRITE_FAILED",
    commitState,
    cause: lost,
    message: `This call wrote while its state lock was no longer its own (${lostReason(lost.cause)}), so another writer may have acted at the same time. Whether its change stands is unknown: reload the saga before deciding anything, and never retry blindly.`,
  });
}

/**
 * One queue per lock path inside this process, entered before file-lock's acquire. file-lock is not
 * re-entrant: a second acquire by this process waits like any other contender's, and a synchronous wait on
 * a lock another task of this very process holds freezes the event loop, so that task never gets to
 * release it (a load and an archive of one saga stalled 5 s, then blamed "another process"). Tasks of one
 * process therefore wait for each other here, asynchronously and in order, and file-lock only ever
 * arbitrates between processes.
 */
const gates = new Map<string, Array<() => void>>();

function enterGate(path: string, waitMs: number): Promise<boolean> {
  const waiters = gates.get(path);
  if (waiters === undefined) {
    gates.set(path, []);
    return Promise.resolve(true);
  }
  return new Promise((resolve) => {
    const admit = (): void => {
      clearTimeout(timer);
      resolve(true);
    };
    const timer = setTimeout(() => {
      waiters.splice(waiters.indexOf(admit), 1);
      resolve(false);
    }, waitMs);
    waiters.push(admit);
  });
}

function leaveGate(path: string): void {
  const next = gates.get(path)?.shift();
  if (next) next();
  else gates.delete(path);
}

/**
 * Locks of this process whose release failed twice but left them held (`stillHeld`) after their callback
 * had run: still ours (no one else can take a live process's lock, and nothing showed that anyone did), so
 * the work stands and its result is returned. The hold is released by the next call of this process on
 * the same lock, before it acquires, and meanwhile retried in the background with backoff (about a minute
 * in all); otherwise it ends when the process exits. Releasing later is safe: release is fenced by the
 * token, so it never removes a lock that is not ours.
 */
const stuck = new Map<string, LockHandle>();

/**
 * Runs `attempt` again in the background until it says it is done: after 50 ms, then four times longer each
 * time, for about a minute in all. The timers never keep a process alive (its exit frees its locks anyway).
 * For a lock release that failed but left the lock held (`stillHeld`): a live process's lock would otherwise
 * block everyone else until it exits.
 */
export function retryInBackground(attempt: () => boolean): void {
  let delay = 50;
  const run = (): void => {
    if (attempt()) return;
    delay *= 4;
    if (delay <= 60_000) setTimeout(run, delay).unref();
  };
  setTimeout(run, delay).unref();
}

/**
 * One more release of a lock whose release failed: true once it is settled (released, or found no longer
 * ours: file-lock has then given the handle up), false while it is still held (retry later).
 */
export function releaseSettled(handle: LockHandle): boolean {
  try {
    handle.release();
  } catch (error) {
    if (stillHeld(error)) return false;
  }
  return true;
}

function keepStuck(path: string, handle: LockHandle): void {
  stuck.set(path, handle);
  retryInBackground(() => {
    if (stuck.get(path) !== handle) return true;
    // A call queued or running on this path releases it itself before it acquires.
    if (gates.has(path) || !releaseSettled(handle)) return false;
    stuck.delete(path);
    return true;
  });
}

/** Inside the gate: gives up a hold an earlier call could not release, or says why this call cannot go on. */
function releaseStuck(path: string, what: string): void {
  const handle = stuck.get(path);
  if (handle === undefined) return;
  try {
    handle.release();
  } catch (error) {
    if (stillHeld(error)) {
      throw new SagaError({
        code: "LOCK_FAILED",
        cause: error,
        message: `The lock on ${what} is still held by this process: releasing it after an earlier call had finished failed, and failed again now (${errnoOf((error as Error).cause) ?? "I/O error"}). That earlier call's outcome stands; this call changed nothing. Retry shortly; if this persists, restart this process (its exit frees the lock).`,
      });
    }
    // Gone, someone else's or rewritten: not ours to release any more; the acquire judges the file anew.
  }
  stuck.delete(path);
}

/**
 * The store takes one of these per call, for a few file operations each: an acquire that links a kept owner
 * file instead of creating one is most of what the lock costs (file-lock's `reuseOwnerFile`).
 */
function stateLockOptions(fs: FileOps, options: StateLockOptions | undefined): LockOptions {
  return { waitMs: 5_000, reuseOwnerFile: true, ...options, fs, label: "restore saga" };
}

/**
 * Runs `fn` under a short cross-process lock. The store's callbacks are synchronous, so no other task of
 * this process interleaves between their reads and the writes that depend on them; calls of this process
 * on the same path queue in order (the gate above), so a nested lock is simply awaited. Dead holders are
 * reaped (these locks guard only the store's own files).
 *
 * Once `fn` has returned, a failed release never reads "could not lock, nothing was changed": a lock
 * still held (`stillHeld`) is ours, so the result is returned and the hold released later (`keepStuck`);
 * a lock that was no longer ours, or whose file something else rewrote, is `lockLost`.
 */
export async function withStateLock<T>(
  path: string,
  what: string,
  fs: FileOps,
  options: StateLockOptions | undefined,
  fn: () => T | Promise<T>,
): Promise<T> {
  const lockOptions = stateLockOptions(fs, options);
  const waitMs = lockOptions.waitMs ?? 5_000;
  const start = performance.now();
  if (!(await enterGate(path, waitMs))) {
    const message = `Could not lock ${what}: other calls of this process kept it busy. Nothing was changed; retry shortly.`;
    throw new SagaError({
      code: "LOCK_FAILED",
      // The same cause as a wait on another process's hold (file-lock's LOCK_TIMEOUT), so a caller can tell
      // "busy: in progress" from a lock that could not be taken for a reason of its own (an unreadable file).
      cause: new LockError({ code: "LOCK_TIMEOUT", path, message }),
      message,
    });
  }
  try {
    releaseStuck(path, what);
    let handle: LockHandle;
    try {
      const left = Math.max(0, waitMs - (performance.now() - start));
      handle = await acquireLock(path, { ...lockOptions, waitMs: left });
    } catch (error) {
      throw lockFailed(error, what);
    }
    let result: T;
    try {
      result = await fn();
    } catch (error) {
      try {
        releaseWithRetry(handle);
      } catch (releaseError) {
        // fn's failure is the one the caller must see.
        if (stillHeld(releaseError)) keepStuck(path, handle);
      }
      throw error;
    }
    try {
      releaseWithRetry(handle);
    } catch (releaseError) {
      if (!stillHeld(releaseError)) throw lockLost(releaseError, what);
      keepStuck(path, handle);
    }
    return result;
  } finally {
    leaveGate(path);
  }
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
