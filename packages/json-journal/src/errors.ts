/**
 * json-journal's own failures. A journal's *state* failures (the document is unreadable, invalid or
 * could not be saved) are reported through the caller's `stateError`, so each journal keeps its own
 * wording and status; `JsonJournalError` covers what belongs to this package: atomic writes, sweeps and
 * misuse of the API.
 */
export const JSON_JOURNAL_ERROR_STATUS = {
  /** A bad argument (empty path, non-synchronous `fn`, bad option). Nothing was touched. */
  INVALID_ARGUMENT: 400,
  /**
   * `update`'s `fn` returned a `next` document that fails the schema or `check`. A bug in the caller:
   * nothing was written, the file still holds the previous valid document.
   */
  INVALID_NEXT_DOCUMENT: 500,
  /** An atomic write failed before its rename: the target still holds its previous bytes (or is absent). */
  WRITE_FAILED: 503,
  /**
   * The new bytes were renamed into place, but the directory could not be flushed: readers already see
   * the new content, yet a power loss could still bring back the previous one.
   */
  DIRECTORY_SYNC_FAILED: 503,
  /** While sweeping stale temporary files, a directory could not be listed or a temp not removed. */
  SWEEP_FAILED: 503,
} as const;

export type JsonJournalErrorCode = keyof typeof JSON_JOURNAL_ERROR_STATUS;
export type JsonJournalErrorStatus = (typeof JSON_JOURNAL_ERROR_STATUS)[JsonJournalErrorCode];

const MARKER = Symbol.for("@drydock/json-journal/JsonJournalError");

export class JsonJournalError extends Error {
  override readonly name = "JsonJournalError";
  readonly code: JsonJournalErrorCode;
  readonly status: JsonJournalErrorStatus;
  readonly [MARKER] = true;

  constructor(init: { code: JsonJournalErrorCode; message: string; cause?: unknown }) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.code = init.code;
    this.status = JSON_JOURNAL_ERROR_STATUS[init.code];
  }
}

/** True for a `JsonJournalError`, even one thrown by a second copy of this package. */
export function isJsonJournalError(value: unknown): value is JsonJournalError {
  return typeof value === "object" && value !== null && (value as Record<symbol, unknown>)[MARKER] === true;
}

/** The errno code of a Node fs error, if any (never throws). */
export function errnoCode(error: unknown): string | undefined {
  if (typeof error !== "object" || error === null) return undefined;
  const code = (error as { code?: unknown }).code;
  return typeof code === "string" ? code : undefined;
}
