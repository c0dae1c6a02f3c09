import { isStorageError } from "@drydock/storage";
import { describe, expect, it } from "vitest";
import { toStorageError } from "../src/database.js";

/** SQLite's result codes that cannot be provoked here (running as root, no real full disk) mapped by hand. */
describe("SQLite and OS failures as StorageErrors", () => {
  const cases: [string, string, string | undefined, RegExp][] = [
    ["SQLITE_BUSY", "STORAGE_BUSY", "SQLITE_BUSY", /was busy .* Nothing was changed\. Retry/],
    ["SQLITE_BUSY_SNAPSHOT", "STORAGE_BUSY", "SQLITE_BUSY", /Retry/],
    ["SQLITE_CORRUPT", "STORAGE_CORRUPT", undefined, /is damaged .* has not changed it/],
    ["SQLITE_NOTADB", "STORAGE_CORRUPT", undefined, /Restore it from a backup/],
    ["SQLITE_FULL", "STORAGE_UNAVAILABLE", "ENOSPC", /the disk is full \(ENOSPC\)\. Nothing was changed/],
    ["SQLITE_READONLY", "STORAGE_UNAVAILABLE", "EROFS", /read-only/],
    ["SQLITE_CANTOPEN", "STORAGE_UNAVAILABLE", "EACCES", /permission was denied/],
    ["SQLITE_PERM", "STORAGE_UNAVAILABLE", "EACCES", /permission was denied/],
    ["SQLITE_IOERR_FSYNC", "STORAGE_UNAVAILABLE", "EIO", /I\/O error/],
    ["SQLITE_NOMEM", "STORAGE_UNAVAILABLE", "ENOMEM", /out of memory/],
    [
      "SQLITE_CONSTRAINT_UNIQUE",
      "STORAGE_CONSTRAINT",
      undefined,
      /would break a journal invariant.*Nothing was changed/,
    ],
    ["EMFILE", "STORAGE_UNAVAILABLE", "EMFILE", /too many open files/],
    ["EDQUOT", "STORAGE_UNAVAILABLE", "EDQUOT", /quota/],
  ];
  for (const [code, storageCode, errno, message] of cases) {
    it(`${code} → ${storageCode}${errno ? ` (${errno})` : ""}`, () => {
      const error = toStorageError(Object.assign(new Error("x"), { code }), "/d/drydock.sqlite", 50);
      expect(isStorageError(error) && [error.code, error.errno]).toEqual([storageCode, errno]);
      expect((error as Error).message).toMatch(message);
      if (storageCode !== "STORAGE_CORRUPT") expect((error as Error).message).not.toMatch(/invalid|repair/i);
    });
  }
  it("an error without a code is passed through", () => {
    const plain = new Error("plain");
    expect(toStorageError(plain, "/d", 1)).toBe(plain);
  });
});
