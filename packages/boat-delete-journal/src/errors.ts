import { isNotDamaged } from "@drydock/json-journal";
/**
 * The delete journal's one error class. `BOAT_DELETE_PAUSED` means the journal cannot be trusted or the
 * deletion must wait for a person (the original system's 503 "recovery state" refusals); `INVALID_ARGUMENT`
 * means the caller passed something the journal would never store (a bad id, name, owner or a receipt not
 * bound to this target), rejected before any file is opened.
 */
export const JOURNAL_ERROR_STATUS = {
  /** The journal is unreadable, invalid, locked, full, out of date, or a receipt conflicts with it. */
  BOAT_DELETE_PAUSED: 503,
  /** An id, name, owner or provider receipt that fails the journal's rules. */
  INVALID_ARGUMENT: 400,
} as const satisfies Record<string, number>;

export type JournalErrorCode = keyof typeof JOURNAL_ERROR_STATUS;

const MARKER = Symbol.for("@drydock/boat-delete-journal/JournalStateError");

export class JournalStateError extends Error {
  override readonly name = "JournalStateError";
  readonly code: JournalErrorCode;
  readonly status: (typeof JOURNAL_ERROR_STATUS)[JournalErrorCode];
  /** The short reason, e.g. `invalid`, `out of date`, `conflicted with another deletion operation`. */
  readonly detail: string;

  constructor(options: { code: JournalErrorCode; message: string; detail: string; cause?: unknown }) {
    super(options.message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = options.code;
    this.status = JOURNAL_ERROR_STATUS[options.code];
    this.detail = options.detail;
    Object.defineProperty(this, MARKER, { value: true });
  }
}

/** Works across duplicate copies of this package (the marker is a registered symbol). */
export function isJournalStateError(value: unknown): value is JournalStateError {
  return typeof value === "object" && value !== null && (value as Record<symbol, unknown>)[MARKER] === true;
}

/**
 * The seed's refusal, word for word but for the product name. A journal this process could not read just
 * now (json-journal's TRANSIENTLY_UNREADABLE: EMFILE and the like) or written by a newer drydock
 * (NEWER_FORMAT) is not damaged: its detail says to retry or to upgrade, and nothing sends a person to
 * repair it.
 */
export function deletePaused(detail: string, cause?: unknown): JournalStateError {
  return new JournalStateError({
    code: "BOAT_DELETE_PAUSED",
    detail,
    message: isNotDamaged(detail)
      ? `Cloud computer deletion is paused because its recovery state is ${detail}.`
      : `Cloud computer deletion is paused because its recovery state is ${detail}. ` +
        "Check the Boat provider before repairing drydock's local state.",
    cause: cause instanceof SyntaxError ? new SyntaxError("the journal file is not valid JSON") : cause,
  });
}

export function invalidArgument(message: string): JournalStateError {
  return new JournalStateError({ code: "INVALID_ARGUMENT", detail: message, message });
}
