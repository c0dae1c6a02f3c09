import { LockError } from "@drydock/file-lock";

/**
 * Everything that escapes the journal becomes this package's error, so a caller handles one class: lock
 * failures get the seeds' wording ("locked by another drydock process", "lock is invalid", ...), write
 * failures are "unavailable". The original error is kept as `cause`.
 */
const LOCK_DETAIL: Record<string, string> = {
  LOCK_TIMEOUT: "locked by another drydock process",
  LOCK_INVALID: "lock is invalid",
  LOCK_UNREADABLE: "lock is unreadable",
  LOCK_OWNER_UNVERIFIABLE: "lock owner could not be verified",
  LOCK_OWNER_DEAD: "locked by a process that is no longer running",
  LOCK_OWNERSHIP_LOST: "lock ownership changed unexpectedly",
  LOCK_REAPER_EXHAUSTED: "stale lock could not be recovered after repeated interrupted attempts",
  LOCK_UNSUPPORTED_FS: "lock is unsupported by this file system",
  LOCK_IO: "lock is unavailable",
  LOCK_ABORTED: "lock wait was cancelled",
};

export function toStateError<E extends Error>(
  error: unknown,
  isOwn: (value: unknown) => boolean,
  paused: (detail: string, cause?: unknown) => E,
): unknown {
  if (isOwn(error)) return error;
  if (LockError.isInstance(error)) return paused(LOCK_DETAIL[error.code] ?? "lock is unavailable", error);
  return paused("unavailable", error);
}
