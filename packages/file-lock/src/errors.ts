import type { LockOwner } from "./schema.js";

/**
 * Every way a lock operation can fail, with the HTTP-ish status a server should answer with.
 * 409: someone else holds (or held) the lock, a retry later may succeed. 503: the lock's state on disk or the
 * file system itself is unusable, a person must look before anything retries.
 */
export const LOCK_ERROR_STATUS = {
  /** Held by a live owner (or a live reaper) for longer than `waitMs`. */
  LOCK_TIMEOUT: 409,
  /** The lock or an election record is not a valid owner file; it is left exactly as it is. */
  LOCK_INVALID: 503,
  /** The lock or an election record could not be read; it is left exactly as it is. */
  LOCK_UNREADABLE: 503,
  /** `kill(pid, 0)` gave an answer that proves neither life nor death; the lock is kept. */
  LOCK_OWNER_UNVERIFIABLE: 503,
  /**
   * The owner is provably dead and `reapDeadOwners` is false: only `takeoverLock` may replace it. Also a lock torn
   * by a power loss (a file from an earlier boot whose bytes never reached the disk): its owner is unknown.
   */
  LOCK_OWNER_DEAD: 409,
  /** The lock file no longer holds this handle's owner (or no longer the owner a takeover expected). */
  LOCK_OWNERSHIP_LOST: 409,
  /** `maxReaperGenerations` reapers of one dead owner all died mid-recovery. */
  LOCK_REAPER_EXHAUSTED: 503,
  /** The file system cannot make hard links, so a lock cannot be published atomically here. */
  LOCK_UNSUPPORTED_FS: 503,
  /** Any other file system failure; nothing half-done is left behind. */
  LOCK_IO: 503,
  /** The caller's AbortSignal fired while waiting; the lock was not taken. */
  LOCK_ABORTED: 409,
} as const;

export type LockErrorCode = keyof typeof LOCK_ERROR_STATUS;

const LOCK_ERROR_MARK = Symbol.for("@drydock/file-lock/LockError");

export interface LockErrorInit {
  code: LockErrorCode;
  message: string;
  cause?: unknown;
  /** The lock file concerned. */
  path?: string;
  /** The owner found in the lock, when there was a readable one (its token is never put in `message`). */
  owner?: LockOwner;
  /** A lock torn by a power loss, reported as LOCK_OWNER_DEAD when `reapDeadOwners` is false. */
  tornLock?: TornLock;
}

/**
 * A lock file from an earlier boot that cannot be read as an owner (its bytes were lost in a power loss), as
 * LOCK_OWNER_DEAD reports it when `reapDeadOwners` is false. `takeoverLock` accepts it in place of an owner and
 * replaces only this very file: same device, inode, size and change time (any write since changes the change
 * time, and a file changed after the boot is not taken over).
 */
export interface TornLock {
  readonly torn: true;
  readonly dev: number;
  readonly ino: number;
  readonly size: number;
  readonly ctimeMs: number;
}

export class LockError extends Error {
  readonly code: LockErrorCode;
  readonly status: (typeof LOCK_ERROR_STATUS)[LockErrorCode];
  readonly path: string | undefined;
  /**
   * The owner read from the lock (set on LOCK_OWNER_DEAD, for takeoverLock, and on LOCK_TIMEOUT). It holds the
   * lock token, so it is non-enumerable: loggers that serialise an error's own fields do not print it.
   */
  declare readonly owner: LockOwner | undefined;
  /** Set on LOCK_OWNER_DEAD for a lock torn by a power loss (no owner to read): pass it to takeoverLock. */
  declare readonly tornLock: TornLock | undefined;

  constructor(init: LockErrorInit) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = "LockError";
    this.code = init.code;
    this.status = LOCK_ERROR_STATUS[init.code];
    this.path = init.path;
    if (init.tornLock !== undefined) this.tornLock = init.tornLock;
    Object.defineProperty(this, "owner", { value: init.owner, enumerable: false });
    Object.defineProperty(this, LOCK_ERROR_MARK, { value: true });
  }

  /** Works across duplicate copies of this package (a `Symbol.for` marker, not `instanceof`). */
  static isInstance(value: unknown): value is LockError {
    return typeof value === "object" && value !== null && LOCK_ERROR_MARK in value;
  }
}

export function isLockError(value: unknown): value is LockError {
  return LockError.isInstance(value);
}

/** Normalises anything thrown inside a lock operation: a stray fs error becomes `LOCK_IO`, keeping its cause. */
export function toLockError(error: unknown, path: string, doing: string): LockError {
  if (isLockError(error)) return error;
  return new LockError({
    code: "LOCK_IO",
    path,
    cause: error,
    message: `The lock ${path} could not be ${doing} because the file system failed (${errnoOf(error) ?? "unknown error"}). Nothing was left half-done; check the disk and retry.`,
  });
}

export function errnoOf(error: unknown): string | undefined {
  const code = (error as NodeJS.ErrnoException | null)?.code;
  return typeof code === "string" ? code : undefined;
}
