import { PROVIDER_BINDING_FILE, SERVER_TOKEN_FILE } from "@drydock/facts";
import { StorageError } from "./errors.js";

/** Meta keys name files in the file backend, so no dots, slashes or upper case: `environment-id`, … */
export const META_KEY = /^[a-z][a-z0-9-]{0,62}$/;
/** Meta values: 1-4,096 printable ASCII characters without spaces (ids, tokens, short JSON-free strings). */
export const META_VALUE = /^[\x21-\x7e]{1,4096}$/;

/**
 * Files of the data directory whose names are shaped like meta keys but are not the storage's, on any backend:
 * the server's bearer token (a secret that stays in its 0600 file: a migration never copies it into another
 * store) and the provider binding (host-local, read from its file whatever the backend, a line a person may
 * have typed). The file backend's export skips them; no backend takes them as keys.
 */
export const NOT_META_FILES: ReadonlySet<string> = new Set([SERVER_TOKEN_FILE, PROVIDER_BINDING_FILE]);

export function assertMetaKey(key: unknown): asserts key is string {
  if (typeof key !== "string" || !META_KEY.test(key)) {
    throw new StorageError({
      code: "STORAGE_INVALID_ARGUMENT",
      message: `invalid meta key (expected ${META_KEY.source})`,
    });
  }
  if (NOT_META_FILES.has(key)) {
    throw new StorageError({
      code: "STORAGE_INVALID_ARGUMENT",
      message: `${key} is a file of the data directory, not a meta key of the storage`,
    });
  }
}

export function mintedValue(key: string, mint: () => string): string {
  const value = mint();
  if (typeof value !== "string" || !META_VALUE.test(value)) {
    throw new StorageError({
      code: "STORAGE_INVALID_ARGUMENT",
      message: `the value minted for meta key ${key} is not 1-4096 printable characters without spaces`,
    });
  }
  return value;
}
