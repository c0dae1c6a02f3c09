import { BoatCreateJournalError } from "@drydock/boat-create-journal";
import { BoatDeleteJournalError } from "@drydock/boat-delete-journal";
import { OS_CAUSES } from "@drydock/json-journal";

/**
 * Faults of the store itself, below the journals' rules. Each code says what happened; the message adds
 * whether anything was changed and what to do. Only STORAGE_CORRUPT means the stored bytes are invalid.
 */
export const STORAGE_ERROR_STATUS = {
  /** The database was held by another process for longer than the bounded wait. Retry. */
  STORAGE_BUSY: 503,
  /** The database file is damaged or truncated (its bytes fail the integrity check). Never recreated over. */
  STORAGE_CORRUPT: 503,
  /** The operating system refused (no space, read-only, permissions, too many open files, I/O error). */
  STORAGE_UNAVAILABLE: 503,
  /** The data directory belongs to a newer drydock (a schema this one does not know). */
  STORAGE_NEWER: 503,
  /** A value or key the store would never hold, or a backend that is not installed. */
  STORAGE_INVALID_ARGUMENT: 400,
  /** A write the store's constraints refused (a journal invariant it would break): a bug, nothing written. */
  STORAGE_CONSTRAINT: 503,
  /** The data directory is bound to another backend (see binding.ts); nothing was changed. */
  STORAGE_BACKEND_MISMATCH: 409,
  /** A call after close(). */
  STORAGE_CLOSED: 503,
  /** importAll into a store that already holds something; nothing was changed. */
  STORAGE_NOT_EMPTY: 409,
  /** migrateStorage while a live drydock process claims the data directory (see presence.ts). */
  STORAGE_IN_USE: 409,
  /** A migration whose verification failed (or could not finish); the source is untouched and still bound. */
  STORAGE_MIGRATION_FAILED: 503,
  /**
   * A fenced writer (a server's instance on postgres) no longer holds its lease by the database's clock, or was
   * declared dead or replaced: its write was refused inside the transaction, nothing written.
   */
  STORAGE_FENCED: 503,
} as const satisfies Record<string, number>;

export type StorageErrorCode = keyof typeof STORAGE_ERROR_STATUS;

/**
 * Marks `error` as this package's `kind` with a `Symbol.for` key, so `isBranded` recognises it even across two
 * copies of the package (an `instanceof` would not).
 */
export function brand(error: Error, kind: string): void {
  Object.defineProperty(error, Symbol.for(`@drydock/storage/${kind}`), { value: true });
}

export function isBranded(value: unknown, kind: string): boolean {
  return (
    typeof value === "object" &&
    value !== null &&
    (value as Record<symbol, unknown>)[Symbol.for(`@drydock/storage/${kind}`)] === true
  );
}

export class StorageError extends Error {
  override readonly name = "StorageError";
  readonly code: StorageErrorCode;
  readonly status: (typeof STORAGE_ERROR_STATUS)[StorageErrorCode];
  /** True when the same call may succeed unchanged later (busy, too many open files). */
  readonly retryable: boolean;
  /** The OS error code (ENOSPC, EROFS, …) or SQLite's (SQLITE_BUSY, …), when there is one. */
  readonly errno: string | undefined;

  constructor(options: {
    code: StorageErrorCode;
    message: string;
    retryable?: boolean;
    errno?: string | undefined;
    cause?: unknown;
  }) {
    super(options.message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = options.code;
    this.status = STORAGE_ERROR_STATUS[options.code];
    this.retryable = options.retryable ?? false;
    this.errno = options.errno;
    brand(this, "StorageError");
  }
}

export function isStorageError(value: unknown): value is StorageError {
  return isBranded(value, "StorageError");
}

/** The OS cause of `error` (its `code`), if it is one this module can explain. */
export function osCauseOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" && code in OS_CAUSES ? code : undefined;
}

/**
 * The OS cause (ENOSPC, EROFS, …) of a write that failed before it published anything, found in `error`'s
 * cause chain; undefined when there is none, or when the failure came after the rename (json-journal's
 * DIRECTORY_SYNC_FAILED: the new state is visible, so "nothing was changed" would be false).
 */
export function unpublishedOsCause(error: unknown): string | undefined {
  let errno: string | undefined;
  let cause: unknown = error;
  for (let depth = 0; depth < 8 && cause !== undefined && cause !== null; depth += 1) {
    if ((cause as { code?: unknown }).code === "DIRECTORY_SYNC_FAILED") return undefined;
    errno ??= osCauseOf(cause);
    cause = (cause as { cause?: unknown }).cause;
  }
  return errno;
}

/**
 * A StorageError for an OS-level refusal while reading or writing `where`: says what happened, that nothing
 * was changed, and what to do — never that the state is invalid (its bytes are fine).
 */
export function osFailure(errno: string, where: string, cause?: unknown): StorageError {
  const known = OS_CAUSES[errno] ?? {
    what: `the operating system refused (${errno})`,
    todo: "fix the cause, then retry",
    retryable: false,
  };
  return new StorageError({
    code: "STORAGE_UNAVAILABLE",
    errno,
    retryable: known.retryable,
    message: `drydock could not use ${where} because ${known.what} (${errno}). Nothing was changed. To continue, ${known.todo}; the stored state is intact.`,
    cause,
  });
}

export function busyFailure(where: string, waitedMs: number, cause?: unknown): StorageError {
  return new StorageError({
    code: "STORAGE_BUSY",
    errno: "SQLITE_BUSY",
    retryable: true,
    message: `${where} was busy (another drydock process held it) for longer than ${waitedMs} ms. Nothing was changed. Retry in a moment.`,
    cause,
  });
}

/** importAll into a store that holds something: refused, nothing changed. */
export function notEmptyFailure(where: string, what: string): StorageError {
  return new StorageError({
    code: "STORAGE_NOT_EMPTY",
    message: `${where} already holds ${what}, so nothing was imported into it and nothing was changed. Import only into an empty store (a new data directory, or one whose files were retired by a migration).`,
  });
}

export function corruptFailure(where: string, what: string, cause?: unknown): StorageError {
  return new StorageError({
    code: "STORAGE_CORRUPT",
    message: `${where} is damaged (${what}), so drydock will not use it and has not changed it. Restore it from a backup; drydock never recreates it over the damaged file.`,
    cause,
  });
}

/**
 * A storage fault as the journal's own error (BOAT_CREATE_PAUSED / BOAT_DELETE_PAUSED, 503), so consumers
 * that handle journal refusals (boat-lifecycle) need no change; the StorageError is its `cause` and its
 * message is kept, so a full disk never reads as "repair drydock's local state".
 */
export function asJournalError(journal: "create" | "delete", error: StorageError): Error {
  const detail =
    error.code === "STORAGE_CORRUPT" ? "invalid" : error.code === "STORAGE_BUSY" ? "busy" : "unavailable";
  const prefix =
    journal === "create" ? "Cloud computer creation is paused: " : "Cloud computer deletion is paused: ";
  const options = { detail, message: `${prefix}${error.message}`, cause: error };
  return journal === "create"
    ? new BoatCreateJournalError({ code: "BOAT_CREATE_PAUSED", ...options })
    : new BoatDeleteJournalError({ code: "BOAT_DELETE_PAUSED", ...options });
}
