// @drydock/boat-create-journal: the idempotency-key journal for boat.dev creates — at most one Boat per bot.

/** The start of a paused journal's `detail` when it could not be read just now (EMFILE and the like): retry. */
export { NEWER_FORMAT, TRANSIENTLY_UNREADABLE } from "@drydock/json-journal";
// Errors (`JournalStateError` and `isJournalStateError` are deprecated aliases of the first two)
export {
  BoatCreateJournalError,
  type BoatCreateJournalErrorCode,
  isBoatCreateJournalError,
  isJournalStateError,
  JOURNAL_ERROR_STATUS,
  type JournalErrorCode,
  JournalStateError,
} from "./errors.js";
export type { BoatCreateRowFacts } from "./internal/logic.js";
// Journal
export {
  type BoatCreateJournal,
  CREATE_JOURNAL_FILE,
  CREATE_JOURNAL_LOCK_FILE,
  type OpenBoatCreateJournalOptions,
  openBoatCreateJournal,
} from "./journal.js";

// File format, limits and ids
export {
  BOAT_ID,
  BOT_ID,
  type BoatCreateAttempt,
  type BoatCreateJournalFile,
  BoatCreateJournalFileSchema,
  type BoatCreateRecoveryEntry,
  BoatCreateRecoveryEntrySchema,
  type BoatCreateRequest,
  BoatCreateRequestFieldsSchema,
  BoatCreateRequestSchema,
  type BoatCreateView,
  BoatIdSchema,
  BotIdSchema,
  IDEMPOTENCY_KEY,
  KEY_RETENTION_MS,
  KEY_SAFETY_MARGIN_MS,
  keyTrustDeadline,
  MAX_REQUEST_BODY_LENGTH,
  MAX_REQUESTS,
  RequestBodySchema,
} from "./schema.js";
