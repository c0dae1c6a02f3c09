import { bindStorage } from "./binding.js";
import type { BackendFactory, BackendOptions, Storage, StorageKind } from "./contract.js";
import { StorageError } from "./errors.js";
import { openFileStorage } from "./file/backend.js";

export interface OpenStorageOptions extends BackendOptions {
  /**
   * Which backend (default "file"): a kind, or a setting as `DRYDOCK_STORAGE` / `--storage` take it
   * ("file", "sqlite", or a `postgres://` / `postgresql://` URL, passed to the backend as `url`).
   */
  storage?: StorageKind | string;
  /**
   * Backends that live in other packages, by kind. `@drydock/storage` never imports better-sqlite3: a
   * caller that wants SQLite passes `{ sqlite: sqliteBackend }` from `@drydock/storage-sqlite`.
   */
  backends?: Partial<Record<Exclude<StorageKind, "file">, BackendFactory>>;
  /** Passed to the backend as they are (e.g. sqlite's `busyTimeoutMs`, `maxRows`). */
  backendOptions?: Record<string, unknown>;
}

/** A `DRYDOCK_STORAGE` / `--storage` value: a backend kind, and the URL for postgres. */
export interface StorageSetting {
  kind: StorageKind;
  /** For postgres: the connection URL, as given (it may hold a password: never print it unredacted). */
  url?: string;
}

/** Parses a `DRYDOCK_STORAGE` / `--storage` value; STORAGE_INVALID_ARGUMENT names what is accepted. */
export function parseStorageSetting(value: string | undefined): StorageSetting {
  if (value === undefined || value === "") return { kind: "file" };
  if (value === "file" || value === "sqlite") return { kind: value };
  if (/^postgres(ql)?:\/\//.test(value)) return { kind: "postgres", url: value };
  throw new StorageError({
    code: "STORAGE_INVALID_ARGUMENT",
    message: `unknown storage ${JSON.stringify(shown(value))} (expected file, sqlite, or a postgres:// URL)`,
  });
}

/** A refused setting as a message may show it: credentials (`//user:password@`) hidden, at most 40 characters. */
function shown(value: string): string {
  const hidden = value.replace(/\/\/[^@/]*@/, "//***@");
  return hidden.length > 40 ? `${hidden.slice(0, 40)}…` : hidden;
}

/**
 * Opens the storage of a data directory with the chosen backend, after binding the directory to it (or
 * checking its binding: STORAGE_BACKEND_MISMATCH names both backends and the migrate command).
 */
export async function openStorage(options: OpenStorageOptions): Promise<Storage> {
  if (typeof options?.dataDir !== "string" || options.dataDir.length === 0) {
    throw new StorageError({
      code: "STORAGE_INVALID_ARGUMENT",
      message: "openStorage needs a dataDir (a non-empty path)",
    });
  }
  const setting =
    options.storage === "postgres" ? { kind: "postgres" as const } : parseStorageSetting(options.storage);
  const { kind } = setting;
  const { storage: _kind, backends, backendOptions, ...common } = options;
  await bindStorage(options.dataDir, kind);
  if (kind === "file") return openFileStorage({ ...common, ...backendOptions });
  const factory = backends?.[kind];
  if (factory === undefined) {
    throw new StorageError({
      code: "STORAGE_INVALID_ARGUMENT",
      message: `storage "${kind}" needs its backend: install @drydock/storage-${kind} and pass { backends: { ${kind}: ${kind}Backend } } to openStorage`,
    });
  }
  return factory({
    ...common,
    ...(setting.url === undefined ? {} : { url: setting.url }),
    ...backendOptions,
  });
}
