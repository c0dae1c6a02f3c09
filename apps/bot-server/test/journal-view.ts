/**
 * Synchronous views of what a running (or dead) server's storage holds, on either backend, for checks that
 * must read the journals at the very moment a provider request leaves (chaos-suite.ts's recording proxy):
 * the file backend's JSON files, or the SQLite database read through its own read-only connection (WAL: a
 * reader never blocks the server's writer). `inUse()` says which backend the data directory really holds,
 * so a run that asked for one and got another fails.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import {
  CREATE_JOURNAL_FILE,
  DELETE_JOURNAL_FILE,
  ENVIRONMENT_ID_FILE,
  STORAGE_BINDING_FILE,
} from "@drydock/facts";
import { SQLITE_FILE } from "@drydock/storage-sqlite";
import Database from "better-sqlite3";
import type { TestStorage } from "./helpers.js";

export interface CreateRowView {
  botId: string;
  idempotencyKey: string;
}
export interface FenceView {
  boxId: string;
  phase: string;
  ownerBotId: string | null;
}

export interface JournalView {
  creates(): CreateRowView[];
  fences(): FenceView[];
  environmentId(): string | null;
  /** storage.json's binding, and which backend's files exist. */
  inUse(): { binding: string | null; sqliteFile: boolean; journalFiles: boolean };
  close(): void;
}

/** A JSON file's value, or null when it does not exist. */
export function readJson(path: string): unknown {
  try {
    return JSON.parse(readFileSync(path, "utf8"));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw error;
  }
}

export function journalView(dataDir: string, storage: TestStorage): JournalView {
  let db: Database.Database | null = null;
  /** The server creates the database at its first start; until then there is nothing to read. */
  const sqlite = (): Database.Database | null => {
    if (db === null && existsSync(join(dataDir, SQLITE_FILE))) {
      db = new Database(join(dataDir, SQLITE_FILE), { readonly: true, fileMustExist: true });
    }
    return db;
  };
  const rowsOf = <T>(table: "create_rows" | "delete_rows"): T[] =>
    ((sqlite()?.prepare(`SELECT row_json FROM ${table} ORDER BY seq`).pluck().all() ?? []) as string[]).map(
      (json) => JSON.parse(json) as T,
    );
  return {
    creates: () =>
      storage === "file"
        ? (((readJson(join(dataDir, CREATE_JOURNAL_FILE)) as { requests?: CreateRowView[] } | null)
            ?.requests ?? []) as CreateRowView[])
        : rowsOf<CreateRowView>("create_rows"),
    fences: () =>
      storage === "file"
        ? (((readJson(join(dataDir, DELETE_JOURNAL_FILE)) as { records?: FenceView[] } | null)?.records ??
            []) as FenceView[])
        : rowsOf<FenceView>("delete_rows"),
    environmentId: () => {
      if (storage === "file") {
        const path = join(dataDir, ENVIRONMENT_ID_FILE);
        return existsSync(path) ? readFileSync(path, "utf8").trim() : null;
      }
      const value = sqlite()
        ?.prepare("SELECT value FROM meta WHERE key = ?")
        .pluck()
        .get(ENVIRONMENT_ID_FILE);
      return typeof value === "string" ? value : null;
    },
    inUse: () => {
      const binding = readJson(join(dataDir, STORAGE_BINDING_FILE)) as { kind?: string } | null;
      return {
        binding: binding?.kind ?? null,
        sqliteFile: existsSync(join(dataDir, SQLITE_FILE)),
        journalFiles:
          existsSync(join(dataDir, CREATE_JOURNAL_FILE)) || existsSync(join(dataDir, DELETE_JOURNAL_FILE)),
      };
    },
    close: () => {
      db?.close();
      db = null;
    },
  };
}
