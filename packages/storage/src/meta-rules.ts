import { StorageError } from "./errors.js";

/** Meta keys name files in the file backend, so no dots, slashes or upper case: `environment-id`, … */
export const META_KEY = /^[a-z][a-z0-9-]{0,62}$/;
/** Meta values: 1-4,096 printable ASCII characters without spaces (ids, tokens, short JSON-free strings). */
export const META_VALUE = /^[\x21-\x7e]{1,4096}$/;

export function assertMetaKey(key: unknown): asserts key is string {
  if (typeof key !== "string" || !META_KEY.test(key)) {
    throw new StorageError({
      code: "STORAGE_INVALID_ARGUMENT",
      message: `invalid meta key (expected ${META_KEY.source})`,
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
