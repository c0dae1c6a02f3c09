import { hasMarker, JournalStateErrorBase, pausedMessage, redactParseCause } from "@drydock/json-journal";
/**
 * The delete journal's one error class. `BOAT_DELETE_PAUSED` means the journal cannot be trusted or the
 * deletion must wait for a person (the original system's 503 "recovery state" refusals); `INVALID_ARGUMENT`
 * means the caller passed something the journal would never store (a bad id, name, owner or a receipt not
 * bound to this target), rejected before any file is opened. Its shape (code, status, detail, registered
 * marker) is json-journal's `JournalStateErrorBase`, shared with the create journal.
 */
export const JOURNAL_ERROR_STATUS = {
  /** The journal is unreadable, invalid, locked, full, out of date, or a receipt conflicts with it. */
  BOAT_DELETE_PAUSED: 503,
  /** An id, name, owner or provider receipt that fails the journal's rules. */
  INVALID_ARGUMENT: 400,
} as const satisfies Record<string, number>;

export type JournalErrorCode = keyof typeof JOURNAL_ERROR_STATUS;
/** The delete journal's error codes (the same type as `JournalErrorCode`, under a name no other package uses). */
export type BoatDeleteJournalErrorCode = JournalErrorCode;

// The marker keeps the class's former name, so the guard still recognises errors from older copies.
const MARKER = Symbol.for("@drydock/boat-delete-journal/JournalStateError");

export class BoatDeleteJournalError extends JournalStateErrorBase<
  JournalErrorCode,
  (typeof JOURNAL_ERROR_STATUS)[JournalErrorCode]
> {
  override readonly name = "BoatDeleteJournalError";
  /** The short reason, e.g. `invalid`, `out of date`, `conflicted with another deletion operation`. */
  declare readonly detail: string;

  constructor(options: { code: JournalErrorCode; message: string; detail: string; cause?: unknown }) {
    super(MARKER, JOURNAL_ERROR_STATUS, options);
  }
}

/** Works across duplicate copies of this package (the marker is a registered symbol). */
export function isBoatDeleteJournalError(value: unknown): value is BoatDeleteJournalError {
  return hasMarker(value, MARKER);
}

/**
 * @deprecated Use {@link BoatDeleteJournalError}: the create journal exports a class of this same name.
 * The very same class, kept so no caller breaks.
 */
export const JournalStateError = BoatDeleteJournalError;
/** @deprecated Use {@link BoatDeleteJournalError}. */
export type JournalStateError = BoatDeleteJournalError;
/** @deprecated Use {@link isBoatDeleteJournalError}: the create journal exports a guard of this same name. */
export const isJournalStateError = isBoatDeleteJournalError;

/**
 * The seed's refusal, word for word but for the product name. A journal this process could not read just
 * now (json-journal's TRANSIENTLY_UNREADABLE: EMFILE and the like) or written by a newer drydock
 * (NEWER_FORMAT) is not damaged: its detail says to retry or to upgrade, and nothing sends a person to
 * repair it. A JSON.parse cause is redacted (it may quote the file's bytes).
 */
export function deletePaused(detail: string, cause?: unknown): BoatDeleteJournalError {
  return new BoatDeleteJournalError({
    code: "BOAT_DELETE_PAUSED",
    detail,
    message: pausedMessage(
      "Cloud computer deletion",
      detail,
      "Check the Boat provider before repairing drydock's local state.",
    ),
    cause: redactParseCause(cause),
  });
}

export function invalidArgument(message: string): BoatDeleteJournalError {
  return new BoatDeleteJournalError({ code: "INVALID_ARGUMENT", detail: message, message });
}
