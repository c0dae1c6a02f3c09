import { isNotDamaged } from "@drydock/json-journal";
/**
 * The create journal's one error class. `BOAT_CREATE_PAUSED` means the journal cannot be trusted or the
 * request must wait for a person (the original system's 503 "recovery state" refusals); `INVALID_ARGUMENT`
 * means the caller passed something the journal would never store, rejected before any file is opened.
 */
export const JOURNAL_ERROR_STATUS = {
  /** The journal is unreadable, invalid, locked, full, out of date, or the request needs reconciliation. */
  BOAT_CREATE_PAUSED: 503,
  /** A bot id, Boat id, request body or request object that fails the file format's rules. */
  INVALID_ARGUMENT: 400,
} as const satisfies Record<string, number>;

export type JournalErrorCode = keyof typeof JOURNAL_ERROR_STATUS;

const MARKER = Symbol.for("@drydock/boat-create-journal/JournalStateError");

export class JournalStateError extends Error {
  override readonly name = "JournalStateError";
  readonly code: JournalErrorCode;
  readonly status: (typeof JOURNAL_ERROR_STATUS)[JournalErrorCode];
  /** The short reason, e.g. `invalid`, `unreadable`, `older than boat.dev's 24-hour retry window`. */
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
export function createPaused(detail: string, cause?: unknown): JournalStateError {
  return new JournalStateError({
    code: "BOAT_CREATE_PAUSED",
    detail,
    message: isNotDamaged(detail)
      ? `Cloud computer creation is paused because its recovery state is ${detail}.`
      : `Cloud computer creation is paused because its recovery state is ${detail}. ` +
        "Check boat.dev for an unnamed Boat before repairing drydock's local state.",
    cause: redactCause(cause),
  });
}

export function invalidArgument(message: string): JournalStateError {
  return new JournalStateError({ code: "INVALID_ARGUMENT", detail: message, message });
}

/**
 * V8's JSON.parse messages quote a slice of the text, which may be part of an idempotency key or a request
 * body; such a cause is replaced by one that says the same without the bytes.
 */
function redactCause(cause: unknown): unknown {
  if (cause instanceof SyntaxError) return new SyntaxError("the journal file is not valid JSON");
  return cause;
}
