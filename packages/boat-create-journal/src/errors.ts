import { hasMarker, JournalStateErrorBase, pausedMessage, redactParseCause } from "@drydock/json-journal";
/**
 * The create journal's one error class. `BOAT_CREATE_PAUSED` means the journal cannot be trusted or the
 * request must wait for a person (the original system's 503 "recovery state" refusals); `INVALID_ARGUMENT`
 * means the caller passed something the journal would never store, rejected before any file is opened.
 * Its shape (code, status, detail, registered marker) is json-journal's `JournalStateErrorBase`, shared
 * with the delete journal.
 */
export const JOURNAL_ERROR_STATUS = {
  /** The journal is unreadable, invalid, locked, full, out of date, or the request needs reconciliation. */
  BOAT_CREATE_PAUSED: 503,
  /** A bot id, Boat id, request body or request object that fails the file format's rules. */
  INVALID_ARGUMENT: 400,
} as const satisfies Record<string, number>;

export type JournalErrorCode = keyof typeof JOURNAL_ERROR_STATUS;
/** The create journal's error codes (the same type as `JournalErrorCode`, under a name no other package uses). */
export type BoatCreateJournalErrorCode = JournalErrorCode;

// The marker keeps the class's former name, so the guard still recognises errors from older copies.
const MARKER = Symbol.for("@drydock/boat-create-journal/JournalStateError");

export class BoatCreateJournalError extends JournalStateErrorBase<
  JournalErrorCode,
  (typeof JOURNAL_ERROR_STATUS)[JournalErrorCode]
> {
  override readonly name = "BoatCreateJournalError";
  /** The short reason, e.g. `invalid`, `unreadable`, `older than boat.dev's 24-hour retry window`. */
  declare readonly detail: string;

  constructor(options: { code: JournalErrorCode; message: string; detail: string; cause?: unknown }) {
    super(MARKER, JOURNAL_ERROR_STATUS, options);
  }
}

/** Works across duplicate copies of this package (the marker is a registered symbol). */
export function isBoatCreateJournalError(value: unknown): value is BoatCreateJournalError {
  return hasMarker(value, MARKER);
}

/**
 * @deprecated Use {@link BoatCreateJournalError}: the delete journal exports a class of this same name.
 * The very same class, kept so no caller breaks.
 */
export const JournalStateError = BoatCreateJournalError;
/** @deprecated Use {@link BoatCreateJournalError}. */
export type JournalStateError = BoatCreateJournalError;
/** @deprecated Use {@link isBoatCreateJournalError}: the delete journal exports a guard of this same name. */
export const isJournalStateError = isBoatCreateJournalError;

/**
 * The seed's refusal, word for word but for the product name. A journal this process could not read just
 * now (json-journal's TRANSIENTLY_UNREADABLE: EMFILE and the like) or written by a newer drydock
 * (NEWER_FORMAT) is not damaged: its detail says to retry or to upgrade, and nothing sends a person to
 * repair it. A JSON.parse cause is redacted (it may quote a key or a request body).
 */
export function createPaused(detail: string, cause?: unknown): BoatCreateJournalError {
  return new BoatCreateJournalError({
    code: "BOAT_CREATE_PAUSED",
    detail,
    message: pausedMessage(
      "Cloud computer creation",
      detail,
      "Check boat.dev for an unnamed Boat before repairing drydock's local state.",
    ),
    cause: redactParseCause(cause),
  });
}

export function invalidArgument(message: string): BoatCreateJournalError {
  return new BoatCreateJournalError({ code: "INVALID_ARGUMENT", detail: message, message });
}
