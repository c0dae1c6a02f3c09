import { randomBytes } from "node:crypto";
import {
  closeSync,
  existsSync,
  fsyncSync,
  linkSync,
  mkdirSync,
  openSync,
  readSync,
  statSync,
  unlinkSync,
} from "node:fs";
import { dirname, join } from "node:path";
import { isBoatCreateJournalError } from "@drydock/boat-create-journal";
import { isBoatDeleteJournalError } from "@drydock/boat-delete-journal";
import {
  busyFailure,
  corruptFailure,
  isBotRegistryError,
  osFailure,
  RETIRED_VERSION,
  retiredError,
  type StorageCrashHook,
  StorageError,
  type StorageKind,
} from "@drydock/storage";
import Database from "better-sqlite3";
import { MIGRATIONS } from "./schema.js";

export const SQLITE_FILE = "drydock.sqlite";
/** The schema version this drydock writes; a database at a higher one was written by a newer drydock. */
export const SCHEMA_VERSION = MIGRATIONS.length;

export interface SqliteHandle {
  readonly db: Database.Database;
  readonly path: string;
  /** Runs `body` in one BEGIN IMMEDIATE … COMMIT, with crash points around it; faults become StorageErrors. */
  write<T>(body: () => T): T;
  /** Runs `body` in one read transaction (a consistent snapshot); faults become StorageErrors. */
  read<T>(body: () => T): T;
  /**
   * Changes whenever anything may have committed (another connection's commits by SQLite's data_version,
   * this one's by a count of write attempts): memo key for peeks and Storage.changeToken.
   */
  version(): string;
  close(): void;
}

export interface OpenDatabaseOptions {
  dataDir: string;
  busyTimeoutMs: number;
  crash?: StorageCrashHook | undefined;
  configure?: ((db: Database.Database) => void) | undefined;
}

/**
 * Opens `<dataDir>/drydock.sqlite`. A new database is built under a temporary name (0600, WAL, schema) and
 * published with link(2), so the final name only ever holds a whole database: a missing or short file there
 * is damage, never "not created yet", and is refused — never recreated over. An existing file is checked
 * (header, `PRAGMA quick_check`) on a read-only connection before anything may write to it.
 */
export function openDatabase(options: OpenDatabaseOptions): SqliteHandle {
  const path = join(options.dataDir, SQLITE_FILE);
  try {
    mkdirSync(options.dataDir, { recursive: true, mode: 0o700 });
    if (!existsSync(path)) createDatabase(path);
  } catch (error) {
    throw toStorageError(error, path, options.busyTimeoutMs);
  }
  checkDatabase(path, options.busyTimeoutMs);
  let db: Database.Database;
  try {
    db = new Database(path, { fileMustExist: true, timeout: options.busyTimeoutMs });
    db.pragma(`busy_timeout = ${Math.max(0, Math.floor(options.busyTimeoutMs))}`);
    db.pragma("journal_mode = WAL");
    db.pragma("synchronous = FULL");
    db.pragma("foreign_keys = ON");
  } catch (error) {
    throw toStorageError(error, path, options.busyTimeoutMs);
  }
  // No crash points (and no test configuration) during open's own migration: they name the steps of a journal call.
  let crash: StorageCrashHook = () => {};
  let commits = 0;
  const dataVersion = db.prepare("PRAGMA data_version").pluck();
  const handle: SqliteHandle = {
    db,
    path,
    write(body) {
      try {
        db.exec("BEGIN IMMEDIATE");
      } catch (error) {
        throw toStorageError(error, path, options.busyTimeoutMs);
      }
      // Counted before the body runs: a write that failed at COMMIT (an I/O error may leave it committed)
      // still moves version(), so a reader that memoises on it reads again rather than trusting its copy.
      commits += 1;
      let result: ReturnType<typeof body>;
      try {
        crash("sqlite:after-begin");
        result = body();
        crash("sqlite:before-commit");
        db.exec("COMMIT");
      } catch (error) {
        if (db.inTransaction) {
          try {
            db.exec("ROLLBACK");
          } catch {
            // The rollback's own failure changes nothing: SQLite rolls back a failed transaction itself.
          }
        }
        throw toStorageError(error, path, options.busyTimeoutMs);
      }
      crash("sqlite:after-commit");
      return result;
    },
    read(body) {
      try {
        db.exec("BEGIN");
        try {
          return body();
        } finally {
          if (db.inTransaction) db.exec("COMMIT");
        }
      } catch (error) {
        throw toStorageError(error, path, options.busyTimeoutMs);
      }
    },
    version() {
      try {
        return `${dataVersion.get() as number}:${commits}`;
      } catch (error) {
        throw toStorageError(error, path, options.busyTimeoutMs);
      }
    },
    close() {
      if (db.open) db.close();
    },
  };
  try {
    handle.write(() => migrate(db, path));
  } catch (error) {
    handle.close();
    throw error;
  }
  const retired = db.prepare("SELECT to_kind, at FROM retired LIMIT 1").get() as
    | { to_kind: string; at: number }
    | undefined;
  if (retired !== undefined) {
    handle.close();
    throw retiredError(path, {
      version: RETIRED_VERSION,
      to: retired.to_kind as StorageKind,
      at: retired.at,
    });
  }
  if (options.crash) crash = options.crash;
  try {
    options.configure?.(db);
  } catch (error) {
    handle.close();
    throw error;
  }
  return handle;
}

/** Builds a complete database under a temporary name, then publishes it; a racing creator's file wins. */
function createDatabase(path: string): void {
  const tmp = `${path}.${process.pid}.${randomBytes(6).toString("hex")}.tmp`;
  closeSync(openSync(tmp, "wx", 0o600));
  try {
    const db = new Database(tmp, { fileMustExist: true });
    try {
      db.pragma("journal_mode = WAL");
      db.pragma("synchronous = FULL");
      db.exec("BEGIN IMMEDIATE");
      migrate(db, tmp);
      db.exec("COMMIT");
      // Folds the WAL into the file, so the published name alone holds the whole database.
      db.pragma("wal_checkpoint(TRUNCATE)");
    } finally {
      db.close();
    }
    const fd = openSync(tmp, "r+");
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    try {
      linkSync(tmp, path);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    }
  } finally {
    for (const leftover of [tmp, `${tmp}-wal`, `${tmp}-shm`]) {
      try {
        unlinkSync(leftover);
      } catch {
        // Not there.
      }
    }
  }
  const dir = openSync(dirname(path), "r");
  try {
    fsyncSync(dir);
  } finally {
    closeSync(dir);
  }
}

/**
 * Refuses a database whose bytes are damaged, on a read-only connection (which never writes or checkpoints
 * into the file): shorter than its header says, not a database, or failing `PRAGMA quick_check`.
 */
function checkDatabase(path: string, busyTimeoutMs: number): void {
  let size: number;
  const header = Buffer.alloc(100);
  try {
    size = statSync(path).size;
    const fd = openSync(path, "r");
    try {
      readSync(fd, header, 0, 100, 0);
    } finally {
      closeSync(fd);
    }
  } catch (error) {
    throw toStorageError(error, path, busyTimeoutMs);
  }
  if (size < 100 || header.toString("latin1", 0, 16) !== "SQLite format 3\0") {
    throw corruptFailure(path, size < 100 ? `truncated to ${size} bytes` : "not an SQLite database");
  }
  const rawPageSize = header.readUInt16BE(16);
  const pageSize = rawPageSize === 1 ? 65_536 : rawPageSize;
  const pages = header.readUInt32BE(28);
  // Without a WAL beside it, the file holds every page its header counts (a checkpoint writes them first).
  const wal = `${path}-wal`;
  const walSize = existsSync(wal) ? statSync(wal).size : 0;
  if (walSize === 0 && pages > 0 && size < pages * pageSize) {
    throw corruptFailure(path, `truncated: ${size} bytes, its header counts ${pages * pageSize}`);
  }
  let db: Database.Database | undefined;
  try {
    db = new Database(path, { fileMustExist: true, readonly: true, timeout: busyTimeoutMs });
    const verdict = db.pragma("quick_check", { simple: false }) as { quick_check: string }[];
    const first = verdict[0]?.quick_check;
    if (first !== "ok") throw corruptFailure(path, `integrity check: ${first ?? "no answer"}`);
  } catch (error) {
    throw toStorageError(error, path, busyTimeoutMs);
  } finally {
    db?.close();
  }
}

/** Applies every migration above the stored version, inside the caller's transaction. */
function migrate(db: Database.Database, path: string): void {
  db.exec("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)");
  const row = db.prepare("SELECT version FROM schema_version").get() as { version: number } | undefined;
  const current = row?.version ?? 0;
  if (current > SCHEMA_VERSION) {
    throw new StorageError({
      code: "STORAGE_NEWER",
      message: `${path} is at schema version ${current}, written by a newer drydock (this one knows ${SCHEMA_VERSION}). Nothing was changed. Upgrade this drydock; leave the file as it is.`,
    });
  }
  for (let version = current; version < SCHEMA_VERSION; version += 1) db.exec(MIGRATIONS[version] as string);
  if (row === undefined) db.prepare("INSERT INTO schema_version (version) VALUES (?)").run(SCHEMA_VERSION);
  else if (current !== SCHEMA_VERSION)
    db.prepare("UPDATE schema_version SET version = ?").run(SCHEMA_VERSION);
}

/** SQLite's and the OS's failures as StorageErrors: busy (retryable), damaged bytes, OS refusals. */
export function toStorageError(error: unknown, path: string, busyTimeoutMs: number): unknown {
  if (error instanceof StorageError || isBotRegistryError(error)) return error;
  // A journal's own refusal (thrown by a pure step inside the transaction) is an answer, not a fault.
  if (isBoatCreateJournalError(error) || isBoatDeleteJournalError(error)) return error;
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code !== "string") return error;
  if (code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED"))
    return busyFailure(path, busyTimeoutMs, error);
  if (code.startsWith("SQLITE_CORRUPT") || code === "SQLITE_NOTADB") return corruptFailure(path, code, error);
  if (
    code === "SQLITE_FULL" ||
    (code === "SQLITE_IOERR_WRITE" && /full/i.test(String((error as Error).message)))
  ) {
    return osFailure("ENOSPC", path, error);
  }
  if (code.startsWith("SQLITE_READONLY")) return osFailure("EROFS", path, error);
  if (code === "SQLITE_PERM" || code === "SQLITE_AUTH") return osFailure("EACCES", path, error);
  if (code.startsWith("SQLITE_CANTOPEN")) return osFailure("EACCES", path, error);
  if (code.startsWith("SQLITE_IOERR")) return osFailure("EIO", path, error);
  if (code === "SQLITE_NOMEM") return osFailure("ENOMEM", path, error);
  if (code.startsWith("SQLITE_CONSTRAINT")) {
    return new StorageError({
      code: "STORAGE_CONSTRAINT",
      message: `${path} refused a write that would break a journal invariant (${code}). Nothing was changed. This is a bug in drydock: report it with this message.`,
      cause: error,
    });
  }
  if (/^E[A-Z]+$/.test(code)) return osFailure(code, path, error);
  return error;
}
