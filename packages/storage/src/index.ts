// @drydock/storage: the storage contract, openStorage, the file backend and (subpath ./conformance) the
// conformance suite every backend's tests run.

export { bindStorage, migrateCommand, readStorageBinding, type StorageBinding } from "./binding.js";
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
} from "./bots.js";
export {
  type BackendFactory,
  type BackendOptions,
  type BlobStore,
  type CheckpointStore,
  type MetaStore,
  type SagaStore,
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
  osCauseOf,
  osFailure,
  STORAGE_ERROR_STATUS,
  StorageError,
  type StorageErrorCode,
} from "./errors.js";
export { type FileBackendOptions, openFileStorage } from "./file/backend.js";
export { assertMetaKey, META_KEY, META_VALUE, mintedValue } from "./meta-rules.js";
export { type OpenStorageOptions, openStorage, parseStorageSetting, type StorageSetting } from "./open.js";
