// @drydock/storage: the storage contract, openStorage, the file backend and (subpath ./conformance) the
// conformance suite every backend's tests run.

export { bindStorage, migrateCommand, readStorageBinding, type StorageBinding } from "./binding.js";
export { checkBotInput, checkPageInput } from "./bot-input.js";
export {
  botExists,
  byBotId,
  judgeMarks,
  MAX_DELETION_MARKS,
  markMethods,
  newBot,
  processGone,
  thisProcess,
  tooManyBots,
  withMark,
  withoutMarks,
} from "./bot-rules.js";
export {
  BOT_REGISTRY_ERROR_CODES,
  type Bot,
  type BotReadOptions,
  BotRegistryError,
  type BotRegistryErrorCode,
  type BotRegistryStore,
  BotSchema,
  type DeletionMark,
  isBotRegistryError,
  MAX_FILE_BOTS,
  type MarkVerdict,
} from "./bots.js";
export {
  type BackendFactory,
  type BackendOptions,
  type MetaStore,
  STORAGE_KINDS,
  type Storage,
  type StorageCrashHook,
  type StorageExport,
  type StorageKind,
} from "./contract.js";
export {
  asJournalError,
  busyFailure,
  corruptFailure,
  isStorageError,
  notEmptyFailure,
  osCauseOf,
  osFailure,
  STORAGE_ERROR_STATUS,
  StorageError,
  type StorageErrorCode,
} from "./errors.js";
export { FILE_STORE_LIMITS, type FileBackendOptions, openFileStorage } from "./file/backend.js";
export {
  type BotsFile,
  BotsFileSchema,
  type FileBotRegistryOptions,
  openFileBotRegistry,
} from "./file/bots.js";
export { STORE_WORKSPACES_DIR, WORKSPACE_CRASH_POINTS } from "./file/workspaces.js";
export { checkImport, type ImportLimits } from "./import-check.js";
export { assertMetaKey, META_KEY, META_VALUE, mintedValue, NOT_META_FILES } from "./meta-rules.js";
export {
  MIGRATE_CRASH_POINTS,
  type MigrateStorageOptions,
  type MigrateStorageResult,
  migrateStorage,
  type PendingMigration,
  pendingMigration,
  refuseOverFileLimits,
} from "./migrate.js";
export { type OpenStorageOptions, openStorage, parseStorageSetting, type StorageSetting } from "./open.js";
export {
  type ClaimRecord,
  claimDataDir,
  type DataDirClaim,
  listClaims,
  liveMigration,
  MIGRATE_LOCK_FILE,
  migrateLockPath,
} from "./presence.js";
export { parseRetired, RETIRED_VERSION, type RetiredMarker, retiredError } from "./retired.js";
export {
  idConflicts,
  pathClashError,
  retiredNameOf,
  type StoredCheckpoint,
  sha256Of,
  type WorkspaceHeadState,
  type WorkspacePrimitives,
  type WorkspaceTx,
  workspaceFileOf,
  workspaceIdConflict,
  workspacePathClash,
  workspaceStoreOver,
} from "./workspace-engine.js";
export {
  checkWorkspaceInput,
  isWorkspaceError,
  parseWorkspaceManifest,
  versionConflict,
  WORKSPACE_ERROR_STATUS,
  type WorkspaceCheckpoint,
  WorkspaceError,
  type WorkspaceErrorCode,
  type WorkspaceFile,
  type WorkspaceHead,
  type WorkspaceRestore,
  type WorkspaceStore,
  type WorkspaceWriteOptions,
  workspacesOf,
} from "./workspaces.js";
