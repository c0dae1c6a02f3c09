import { readFileSync } from "node:fs";
import { join } from "node:path";
import {
  BoatCreateJournalFileSchema,
  CREATE_JOURNAL_FILE,
  CREATE_JOURNAL_LOCK_FILE,
} from "@drydock/boat-create-journal";
import { checkCreateJournal } from "@drydock/boat-create-journal/logic";
import {
  BoatDeleteJournalFileSchema,
  DELETE_JOURNAL_FILE,
  DELETE_JOURNAL_LOCK_FILE,
} from "@drydock/boat-delete-journal";
import { checkDeleteJournal } from "@drydock/boat-delete-journal/logic";
import { BOTS_FILE } from "@drydock/facts";
import { type FileOps, withLock } from "@drydock/file-lock";
import { defaultLockFile, writeFileAtomic } from "@drydock/json-journal";
import type { StorageExport, StorageKind } from "../contract.js";
import { parseRetired, RETIRED_VERSION } from "../retired.js";
import { BotsFileSchema } from "./bots.js";
import { osOrUnknown } from "./meta.js";

/**
 * The file backend's three whole-file documents, as import and retirement see them: each written in one
 * durable step (temp, fsync, rename, fsync of the directory) under its own lock — the lock the journals and
 * the seeds' code take — so no writer mid-update can interleave.
 */
export interface DocumentSpec {
  name: string;
  file: string;
  lockFile: string;
  /** The document holding `data`'s rows; checked with the journal's own schema and invariants. */
  build(data: StorageExport): unknown;
  valid(doc: unknown): boolean;
  /** How many rows a version-1 document holds. */
  rows(doc: unknown): number;
}

export function documentSpecs(dataDir: string): DocumentSpec[] {
  return [
    {
      name: "create journal",
      file: join(dataDir, CREATE_JOURNAL_FILE),
      lockFile: join(dataDir, CREATE_JOURNAL_LOCK_FILE),
      build: (data) => ({ version: 1, requests: data.creates }),
      valid: (doc) => {
        const parsed = BoatCreateJournalFileSchema.safeParse(doc);
        return parsed.success && checkCreateJournal(parsed.data) === null;
      },
      rows: (doc) => ((doc as { requests?: unknown[] }).requests ?? []).length,
    },
    {
      name: "delete journal",
      file: join(dataDir, DELETE_JOURNAL_FILE),
      lockFile: join(dataDir, DELETE_JOURNAL_LOCK_FILE),
      build: (data) => ({ version: 1, records: data.deletes }),
      valid: (doc) => {
        const parsed = BoatDeleteJournalFileSchema.safeParse(doc);
        return parsed.success && checkDeleteJournal(parsed.data) === null;
      },
      rows: (doc) => ((doc as { records?: unknown[] }).records ?? []).length,
    },
    {
      name: "bot registry",
      file: join(dataDir, BOTS_FILE),
      lockFile: defaultLockFile(join(dataDir, BOTS_FILE)),
      build: (data) => ({ version: 1, bots: data.bots }),
      valid: (doc) => {
        const parsed = BotsFileSchema.safeParse(doc);
        return (
          parsed.success && new Set(parsed.data.bots.map((b) => b.botId)).size === parsed.data.bots.length
        );
      },
      rows: (doc) => ((doc as { bots?: unknown[] }).bots ?? []).length,
    },
  ];
}

/** What is at a document's path: nothing, a retired marker, or a document (with its row count, -1 if unknown). */
export type DocumentState =
  | { kind: "absent" }
  | { kind: "retired"; to: StorageKind }
  | { kind: "live"; rows: number };

export function documentState(spec: DocumentSpec): DocumentState {
  let text: string;
  try {
    text = readFileSync(spec.file, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return { kind: "absent" };
    throw osOrUnknown(error, spec.file);
  }
  const retired = parseRetired(text);
  if (retired !== null) return { kind: "retired", to: retired.to };
  try {
    const doc = JSON.parse(text) as { version?: unknown };
    return { kind: "live", rows: doc?.version === 1 ? spec.rows(doc) : -1 };
  } catch {
    return { kind: "live", rows: -1 };
  }
}

export interface LockedWriteOptions {
  fs?: FileOps;
  lockWaitMs?: number;
}

/**
 * Under the document's lock: `decide(state)` says what to write (or null: nothing), written atomically and
 * durably. The state is read again under the lock, so a writer that got in first is seen.
 */
export async function writeDocumentLocked(
  spec: DocumentSpec,
  decide: (state: DocumentState) => string | null,
  options: LockedWriteOptions = {},
): Promise<void> {
  try {
    await withLock(
      spec.lockFile,
      () => {
        const text = decide(documentState(spec));
        if (text !== null)
          writeFileAtomic(spec.file, text, { mode: 0o600, ...(options.fs ? { fs: options.fs } : {}) });
      },
      {
        label: "drydock",
        ...(options.fs ? { fs: options.fs } : {}),
        ...(options.lockWaitMs === undefined ? {} : { waitMs: options.lockWaitMs }),
      },
    );
  } catch (error) {
    throw osOrUnknown(error, spec.file);
  }
}

/** The retired document's text: the marker and, under `was`, the state the file held (kept for a person). */
export function retiredText(spec: DocumentSpec, to: StorageKind, at: number): string {
  let was: unknown = null;
  try {
    was = JSON.parse(readFileSync(spec.file, "utf8"));
  } catch {
    was = null;
  }
  return `${JSON.stringify({ version: RETIRED_VERSION, to, at, was }, null, 2)}\n`;
}
