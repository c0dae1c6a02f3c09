// @drydock/storage-sqlite: drydock's embedded SQLite storage backend — the only package that loads
// better-sqlite3. Pass `sqliteBackend` to @drydock/storage's openStorage, or call openSqliteStorage directly.
import { randomUUID } from "node:crypto";
import type { BoatCreateRequest } from "@drydock/boat-create-journal";
import type { BoatDeletionRecord } from "@drydock/boat-delete-journal";
import { DEFAULT_MAX_FILE_BYTES } from "@drydock/facts";
import {
  assertMetaKey,
  type BackendFactory,
  type BackendOptions,
  type Bot,
  corruptFailure,
  META_VALUE,
  mintedValue,
  NOT_META_FILES,
  type Storage,
  StorageError,
} from "@drydock/storage";
import { sqliteBotRegistry } from "./bots.js";
import { sqliteCreateJournal } from "./create-journal.js";
import { openDatabase } from "./database.js";
import { sqliteDeleteJournal } from "./delete-journal.js";
import { importInto } from "./import.js";
import { sqliteWorkspaces } from "./workspaces.js";

export { SCHEMA_VERSION, SQLITE_FILE } from "./database.js";

/** Rows per journal at most, by default: far above any real installation, and configurable. */
export const DEFAULT_MAX_ROWS = 1_000_000;
/** Bots at most, by default: far above any real installation (the file backend's cap is 4,096), and configurable. */
export const DEFAULT_MAX_BOTS = 1_000_000;
/** How long a call waits for another process's write transaction before it fails STORAGE_BUSY (retryable). */
export const DEFAULT_BUSY_TIMEOUT_MS = 5_000;

export interface SqliteStorageOptions extends BackendOptions {
  /** Bounded wait for a busy database (SQLite's busy_timeout), ms. */
  busyTimeoutMs?: number;
  /** Rows per journal at most (the file backend's is 4,096). */
  maxRows?: number;
  /** Bots in the registry at most (default 1,000,000; the file backend's is 4,096). */
  maxBots?: number;
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
  const maxBots = options.maxBots ?? DEFAULT_MAX_BOTS;
  const maxFileBytes = options.maxFileBytes ?? DEFAULT_MAX_FILE_BYTES;
  for (const [name, value] of [
    ["maxRows", maxRows],
    ["maxBots", maxBots],
    ["maxFileBytes", maxFileBytes],
  ] as const) {
    if (!Number.isSafeInteger(value) || value < 1) {
      throw new StorageError({
        code: "STORAGE_INVALID_ARGUMENT",
        message: `${name} must be a positive integer`,
      });
    }
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
    bots: sqliteBotRegistry(handle, { now: common.now, maxBots, live }),
    workspaces: sqliteWorkspaces(handle, { now: common.now, live, maxFileBytes }),
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
          // A store migrated from files before the server token and the provider binding were kept out of
          // meta may hold copies of them: they are the data directory's files, never part of the export.
          if (!NOT_META_FILES.has(row.key)) meta[row.key] = row.value;
        }
        const bots = (db.prepare("SELECT row_json FROM bots ORDER BY bot_id").pluck().all() as string[]).map(
          (json) => JSON.parse(json) as Bot,
        );
        return { creates, deletes, meta, bots };
      });
    },
    async importAll(data) {
      live();
      importInto(handle, data, { maxRows, maxBots });
    },
    async retire(to, at) {
      live();
      handle.write(() => {
        if (db.prepare("SELECT 1 FROM retired").get() === undefined) {
          db.prepare("INSERT INTO retired (to_kind, at) VALUES (?, ?)").run(to, at);
        }
      });
    },
    // SQLite's data_version (another connection's commits) and this connection's commit count: every write
    // of the registry, the journals and meta goes through `handle.write`, on this one connection.
    changeToken() {
      live();
      return handle.version();
    },
    async close() {
      closed = true;
      handle.close();
    },
  };
}

/** For `openStorage({ storage: "sqlite", backends: { sqlite: sqliteBackend } })`. */
export const sqliteBackend: BackendFactory = (options) => openSqliteStorage(options as SqliteStorageOptions);
