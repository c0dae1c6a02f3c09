// @drydock/json-journal — atomic durable file writes, and a locked, schema-checked JSON document.

// Atomic writes
export type { SweepStaleTempsOptions, WriteFileAtomicOptions } from "./atomic.js";
export { STALE_TEMP_MS, sweepStaleTemps, writeFileAtomic, writeFileAtomicAsync } from "./atomic.js";

// Errors
export {
  isJsonJournalError,
  JSON_JOURNAL_ERROR_STATUS,
  JsonJournalError,
  type JsonJournalErrorCode,
  type JsonJournalErrorStatus,
} from "./errors.js";
// Journal
export {
  type DeepReadonly,
  defaultLockFile,
  isNotDamaged,
  type JsonJournal,
  type JsonJournalOptions,
  MAX_NESTING_DEPTH,
  NEWER_FORMAT,
  newerFormatDetail,
  openJsonJournal,
  TRANSIENTLY_UNREADABLE,
  trustedFileIdentity,
} from "./journal.js";
// OS-level refusals: what each means and what to do (one table, also @drydock/storage's)
export { OS_CAUSES, type OsCause, osCauseDetail } from "./os-causes.js";
// The shell the Boat journals share: their error class's shape, their refusal's wording, open/read/update
export {
  hasMarker,
  type JournalShell,
  type JournalShellOptions,
  JournalStateErrorBase,
  type JournalStateErrorInit,
  openJournalShell,
  pausedMessage,
  redactParseCause,
} from "./shell.js";
// Lock failures as journal state errors (shared by the journals built on this package)
export { lockErrorDetail, toJournalStateError } from "./state-errors.js";
