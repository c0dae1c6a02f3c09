import type { BackendFactory, BackendOptions, Storage, StorageKind } from "./contract.js";
import { STORAGE_KINDS } from "./contract.js";
import { StorageError } from "./errors.js";
import { openFileStorage } from "./file/backend.js";

export interface OpenStorageOptions extends BackendOptions {
  /** Which backend (default "file"). */
  storage?: StorageKind;
  /**
   * Backends that live in other packages, by kind. `@drydock/storage` never imports better-sqlite3: a
   * caller that wants SQLite passes `{ sqlite: sqliteBackend }` from `@drydock/storage-sqlite`.
   */
  backends?: Partial<Record<Exclude<StorageKind, "file">, BackendFactory>>;
  /** Passed to the backend as they are (e.g. sqlite's `busyTimeoutMs`, `maxRows`). */
  backendOptions?: Record<string, unknown>;
}

/** Opens the storage of a data directory with the chosen backend. */
export async function openStorage(options: OpenStorageOptions): Promise<Storage> {
  if (typeof options?.dataDir !== "string" || options.dataDir.length === 0) {
    throw new StorageError({
      code: "STORAGE_INVALID_ARGUMENT",
      message: "openStorage needs a dataDir (a non-empty path)",
    });
  }
  const kind = options.storage ?? "file";
  if (!(STORAGE_KINDS as readonly string[]).includes(kind)) {
    throw new StorageError({
      code: "STORAGE_INVALID_ARGUMENT",
      message: `unknown storage "${String(kind)}" (expected one of: ${STORAGE_KINDS.join(", ")})`,
    });
  }
  const { storage: _kind, backends, backendOptions, ...common } = options;
  if (kind === "file") return openFileStorage({ ...common, ...backendOptions });
  const factory = backends?.[kind];
  if (factory === undefined) {
    throw new StorageError({
      code: "STORAGE_INVALID_ARGUMENT",
      message: `storage "${kind}" needs its backend: install @drydock/storage-${kind} and pass { backends: { ${kind}: ${kind}Backend } } to openStorage`,
    });
  }
  return factory({ ...common, ...backendOptions });
}
