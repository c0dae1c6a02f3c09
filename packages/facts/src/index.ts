// @drydock/facts — the facts every drydock layer shares, each defined once. A leaf: imports nothing.

// Data-directory names
export {
  BOTS_FILE,
  CHECKPOINTS_DIR,
  CREATE_JOURNAL_FILE,
  CREATE_JOURNAL_LOCK_FILE,
  DELETE_JOURNAL_FILE,
  DELETE_JOURNAL_LOCK_FILE,
  EMBEDDED_PROVIDER_FILE,
  EMBEDDED_PROVIDER_LOCK_FILE,
  ENVIRONMENT_ID_FILE,
  LOCKS_DIR,
  PROVIDER_BINDING_FILE,
  RESTORE_SAGAS_DIR,
  RESTORE_STAGING_DIR,
  SERVER_TOKEN_FILE,
  STORAGE_BINDING_FILE,
  WORKSPACES_DIR,
} from "./data-dir.js";
// Id patterns
export {
  BOAT_DELETION_OPERATION_ID,
  BOAT_ID,
  BOT_ID,
  CHECKPOINT_ID,
  RESTORE_OPERATION_ID,
  UUID_V4,
} from "./ids.js";

// Workspace file limits
export { DEFAULT_MAX_FILE_BYTES, MAX_PATH_BYTES } from "./limits.js";

// Phase and status sets
export {
  BOAT_DELETION_PHASES,
  BOAT_DELETION_STATUSES,
  type BoatDeletionPhaseName,
  type BoatDeletionStatusName,
} from "./phases.js";
