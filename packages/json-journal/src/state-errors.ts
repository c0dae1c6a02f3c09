import { isLockError, type LockError, type LockErrorCode } from "@drydock/file-lock";
import { osCauseDetail } from "./os-causes.js";

/**
 * The one table that turns a lock failure into the detail of a journal's state error, in the seeds' words
 * ("…recovery state is locked by another drydock process"). Used by `openJsonJournal` itself and by the
 * journals built on it, so every journal says the same thing about the same lock failure.
 */
const LOCK_DETAIL: Partial<Record<LockErrorCode, string>> = {
  LOCK_INVALID: "lock is invalid",
  LOCK_UNREADABLE: "lock is unreadable",
  LOCK_OWNER_UNVERIFIABLE: "lock owner could not be verified",
  LOCK_OWNER_DEAD: "locked by a process that is no longer running",
  LOCK_OWNERSHIP_LOST: "lock ownership changed unexpectedly",
  LOCK_REAPER_EXHAUSTED: "stale lock could not be recovered after repeated interrupted attempts",
  LOCK_UNSUPPORTED_FS: "lock is unsupported on this file system",
  LOCK_ABORTED: "locked, and the caller cancelled the wait for it",
};

export function lockErrorDetail(error: LockError, label = "drydock"): string {
  if (error.code === "LOCK_TIMEOUT") return `locked by another ${label} process`;
  if (error.code === "LOCK_IO") {
    const os = osCauseDetail(error.cause);
    if (os !== undefined) return os;
  }
  return LOCK_DETAIL[error.code] ?? "lock is unavailable";
}

/**
 * For a journal's public methods: everything that escapes becomes the journal's own state error, so a
 * caller handles one class. Its own errors pass through; a lock failure (e.g. an aborted wait, which
 * `openJsonJournal` lets through as the LockError) gets the lock detail; anything else is "unavailable".
 * The original error is kept as `cause`.
 */
export function toJournalStateError<E extends Error>(
  error: unknown,
  isOwn: (value: unknown) => boolean,
  paused: (detail: string, cause?: unknown) => E,
): unknown {
  if (isOwn(error)) return error;
  if (isLockError(error)) return paused(lockErrorDetail(error), error);
  return paused(osCauseDetail(error) ?? "unavailable", error);
}
