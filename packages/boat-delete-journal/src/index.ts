// @drydock/boat-delete-journal: deletion fences and target-bound provider operation receipts for Boats.

// Errors (`JournalStateError` and `isJournalStateError` are deprecated aliases of the first two)
export {
  BoatDeleteJournalError,
  type BoatDeleteJournalErrorCode,
  isBoatDeleteJournalError,
  isJournalStateError,
  JOURNAL_ERROR_STATUS,
  type JournalErrorCode,
  JournalStateError,
} from "./errors.js";
// Journal
export {
  type BoatDeleteJournal,
  DELETE_JOURNAL_FILE,
  DELETE_JOURNAL_LOCK_FILE,
  type OpenBoatDeleteJournalOptions,
  openBoatDeleteJournal,
} from "./journal.js";

// File format, receipts, limits, ids and the lifecycle's refusal codes
export {
  BOAT_DELETING,
  BOAT_DELETION_FINISHED,
  type BoatDeleteJournalFile,
  BoatDeleteJournalFileSchema,
  type BoatDeletionIdentity,
  BoatDeletionIdentitySchema,
  type BoatDeletionOperationReceipt,
  BoatDeletionOperationReceiptSchema,
  type BoatDeletionPhase,
  BoatDeletionPhaseSchema,
  type BoatDeletionRecord,
  BoatDeletionRecordFieldsSchema,
  BoatDeletionRecordSchema,
  type BoatDeletionStatus,
  BoatDeletionStatusSchema,
  BoatNameSchema,
  MAX_NAME_LENGTH,
  MAX_RECORDS,
  OPERATION_ID,
} from "./schema.js";
