// @drydock/storage: the storage contract, openStorage, the file backend and (subpath ./conformance) the
// conformance suite every backend's tests run.

export {
  type BackendFactory,
  type BackendOptions,
  type BlobStore,
  type BotRegistryStore,
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
export { type OpenStorageOptions, openStorage } from "./open.js";
