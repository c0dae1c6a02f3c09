// @drydock/storage-sqlite: drydock's embedded SQLite storage backend — the only package that loads
// better-sqlite3. Pass `sqliteBackend` to @drydock/storage's openStorage, or call openSqliteStorage directly.
import { randomUUID } from "node:crypto";
import type { BoatCreateRequest } from "@drydock/boat-create-journal";
import type { BoatDeletionRecord } from "@drydock/boat-delete-journal";
import {
  assertMetaKey,
  type BackendFactory,
  type BackendOptions,
  corruptFailure,
  META_VALUE,
  mintedValue,
  type Storage,
  StorageError,
} from "@drydock/storage";
import { sqliteCreateJournal } from "./create-journal.js";
import { openDatabase } from "./database.js";
import { sqliteDeleteJournal } from "./delete-journal.js";

export { SCHEMA_VERSION, SQLITE_FILE } from "./database.js";

/** Rows per journal at most, by default: far above any real installation, and configurable. */
export const DEFAULT_MAX_ROWS = 1_000_000;
/** How long a call waits for another process's write transaction before it fails STORAGE_BUSY (retryable). */
export const DEFAULT_BUSY_TIMEOUT_MS = 5_000;

export interface SqliteStorageOptions extends BackendOptions {
  /** Bounded wait for a busy database (SQLite's busy_timeout), ms. */
  busyTimeoutMs?: number;
  /** Rows per journal at most (the file backend's is 4,096). */
  maxRows?: number;
  /**
   * Test seam: runs on the connection after it is opened and migrated (e.g. `PRAGMA max_page_count` to make
   * writes fail as on a full disk, `PRAGMA query_only` as on a read-only file system).
   */
  configure?: (db: import("better-sqlite3").Database) => void;
}

/** Opens (creating on first use) `<dataDir>/drydock.sqlite`. Throws a StorageError when it is damaged or busy. */
export async function openSqliteStorage(options: SqliteStorageOptions): Promise<Storage> {
  const busyTimeoutMs = options.busyTimeoutMs ?? DEFAULT_BUSY_TIMEOUT_MS;
  const maxRows = options.maxRows ?? DEFAULT_MAX_ROWS;
  if (!Number.isSafeInteger(maxRows) || maxRows < 1) {
    throw new StorageError({
      code: "STORAGE_INVALID_ARGUMENT",
      message: "maxRows must be a positive integer",
    });
  }
  const handle = openDatabase({
    dataDir: options.dataDir,
    busyTimeoutMs,
    crash: options.crash,
    configure: options.configure,
  });
  let closed = false;
  const live = () => {
    if (closed)
      throw new StorageError({ code: "STORAGE_CLOSED", message: "this storage was closed; open it again" });
  };
  const common = { now: options.now ?? Date.now, maxRows, live };
  const { db } = handle;
  const getMeta = db.prepare("SELECT value FROM meta WHERE key = ?").pluck();
  const putMeta = db.prepare("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING");
  const readMeta = (key: string): string | null => {
    const value = getMeta.get(key) as string | undefined;
    if (value === undefined) return null;
    if (!META_VALUE.test(value)) throw corruptFailure(handle.path, `meta ${key} is not a valid value`);
    return value;
  };
  return {
    kind: "sqlite",
    dataDir: options.dataDir,
    createJournal: sqliteCreateJournal(handle, { ...common, newKey: options.newKey ?? randomUUID }),
    deleteJournal: sqliteDeleteJournal(handle, common),
    meta: {
      async get(key) {
        live();
        assertMetaKey(key);
        return handle.read(() => readMeta(key));
      },
      async getOrCreate(key, mint) {
        live();
        assertMetaKey(key);
        const existing = handle.read(() => readMeta(key));
        if (existing !== null) return existing;
        const value = mintedValue(key, mint);
        // First writer wins: the insert does nothing when another process stored the key meanwhile.
        return handle.write(() => {
          putMeta.run(key, value);
          return readMeta(key) as string;
        });
      },
    },
    async exportAll() {
      live();
      return handle.read(() => {
        const creates = (
          db.prepare("SELECT row_json FROM create_rows ORDER BY seq").pluck().all() as string[]
        ).map((json) => JSON.parse(json) as BoatCreateRequest);
        const deletes = (
          db.prepare("SELECT row_json FROM delete_rows ORDER BY seq").pluck().all() as string[]
        ).map((json) => JSON.parse(json) as BoatDeletionRecord);
        const meta: Record<string, string> = {};
        for (const row of db.prepare("SELECT key, value FROM meta ORDER BY key").all() as {
          key: string;
          value: string;
        }[]) {
          meta[row.key] = row.value;
        }
        return { creates, deletes, meta };
      });
    },
    async close() {
      closed = true;
      handle.close();
    },
  };
}

/** For `openStorage({ storage: "sqlite", backends: { sqlite: sqliteBackend } })`. */
export const sqliteBackend: BackendFactory = (options) => openSqliteStorage(options as SqliteStorageOptions);
