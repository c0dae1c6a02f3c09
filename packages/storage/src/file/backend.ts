import { join } from "node:path";
import {
  type BoatCreateJournal,
  type BoatCreateJournalFile,
  BoatCreateJournalFileSchema,
  CREATE_JOURNAL_FILE,
  CREATE_JOURNAL_LOCK_FILE,
  isBoatCreateJournalError,
  openBoatCreateJournal,
} from "@drydock/boat-create-journal";
import { checkCreateJournal, createPaused } from "@drydock/boat-create-journal/logic";
import {
  type BoatDeleteJournal,
  type BoatDeleteJournalFile,
  BoatDeleteJournalFileSchema,
  DELETE_JOURNAL_FILE,
  DELETE_JOURNAL_LOCK_FILE,
  isBoatDeleteJournalError,
  openBoatDeleteJournal,
} from "@drydock/boat-delete-journal";
import { checkDeleteJournal, deletePaused } from "@drydock/boat-delete-journal/logic";
import { type FileOps, nodeFileOps } from "@drydock/file-lock";
import { openJsonJournal, toJournalStateError } from "@drydock/json-journal";
import type { BackendOptions, Storage, StorageCrashHook } from "../contract.js";
import { asJournalError, isStorageError, osCauseOf, osFailure, StorageError } from "../errors.js";
import { openFileMeta } from "./meta.js";

export interface FileBackendOptions extends BackendOptions {
  /** File system seam for the journals and their locks (default the real one). */
  fs?: FileOps;
  /** Lock wait of each journal call, ms (file-lock's default when unset). */
  lockWaitMs?: number;
}

/**
 * The `file` backend: today's files, locks and formats, unchanged — an adapter over
 * `openBoatCreateJournal` / `openBoatDeleteJournal`, so every byte it writes is theirs (and the seeds').
 * Only two things are added: crash points around the publishing rename, and OS-level failures (no space,
 * read-only, permissions, …) re-worded to say what happened, that nothing was changed and what to do.
 */
export async function openFileStorage(options: FileBackendOptions): Promise<Storage> {
  const { dataDir } = options;
  const baseFs = options.fs ?? nodeFileOps;
  // Crash points are in the documents' writes only; the locks keep the plain seam (the lock is held when
  // the process stops, as in the journals' own crash tests).
  const fs = withCrashPoints(baseFs, options.crash);
  const lock = { fs: baseFs, ...(options.lockWaitMs === undefined ? {} : { waitMs: options.lockWaitMs }) };
  const common = {
    dataDir,
    fs,
    lock,
    ...(options.now ? { now: options.now } : {}),
  };
  const createJournal = openBoatCreateJournal({
    ...common,
    ...(options.newKey ? { newKey: options.newKey } : {}),
  });
  const deleteJournal = openBoatDeleteJournal(common);
  const meta = openFileMeta(dataDir);
  // Readers of the whole documents, for exportAll: the same schema, invariants and lock as the journals.
  const createDoc = openJsonJournal<BoatCreateJournalFile>({
    file: join(dataDir, CREATE_JOURNAL_FILE),
    lockFile: join(dataDir, CREATE_JOURNAL_LOCK_FILE),
    schema: BoatCreateJournalFileSchema,
    empty: () => ({ version: 1, requests: [] }),
    check: checkCreateJournal,
    stateError: createPaused,
    lock: { label: "drydock", ...lock },
    fs,
  });
  const deleteDoc = openJsonJournal<BoatDeleteJournalFile>({
    file: join(dataDir, DELETE_JOURNAL_FILE),
    lockFile: join(dataDir, DELETE_JOURNAL_LOCK_FILE),
    schema: BoatDeleteJournalFileSchema,
    empty: () => ({ version: 1, records: [] }),
    check: checkDeleteJournal,
    stateError: deletePaused,
    lock: { label: "drydock", ...lock },
    fs,
  });
  let closed = false;
  const guard = <T extends object>(journal: "create" | "delete", target: T): T =>
    wrapMethods(
      target,
      () => {
        if (closed) throw closedError();
      },
      (error) => reword(journal, dataDir, error),
    );
  return {
    kind: "file",
    dataDir,
    createJournal: guard<BoatCreateJournal>("create", createJournal),
    deleteJournal: guard<BoatDeleteJournal>("delete", deleteJournal),
    meta: wrapMethods(
      meta,
      () => {
        if (closed) throw closedError();
      },
      (error) => error,
    ),
    async exportAll() {
      if (closed) throw closedError();
      let creates: BoatCreateJournalFile;
      let deletes: BoatDeleteJournalFile;
      try {
        creates = await createDoc.read();
      } catch (error) {
        throw reword("create", dataDir, toJournalStateError(error, isBoatCreateJournalError, createPaused));
      }
      try {
        deletes = await deleteDoc.read();
      } catch (error) {
        throw reword("delete", dataDir, toJournalStateError(error, isBoatDeleteJournalError, deletePaused));
      }
      return {
        creates: creates.requests.map((row) => ({ ...row })),
        deletes: deletes.records.map((row) => ({ ...row })),
        meta: await meta.all(),
      };
    },
    async close() {
      closed = true;
    },
  };
}

function closedError(): StorageError {
  return new StorageError({ code: "STORAGE_CLOSED", message: "this storage was closed; open it again" });
}

/** Each method of `target`, checked before and with its rejection mapped; `this` stays the original. */
function wrapMethods<T extends object>(target: T, before: () => void, map: (error: unknown) => unknown): T {
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(target)) {
    if (typeof value !== "function") continue;
    out[name] = async (...args: unknown[]) => {
      before();
      try {
        return await (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
      } catch (error) {
        throw map(error);
      }
    };
  }
  return out as T;
}

/**
 * A journal refusal whose root is an OS refusal (ENOSPC, EROFS, EACCES, EMFILE, …) before anything was
 * published: re-worded to say so. A failure after the rename (json-journal's DIRECTORY_SYNC_FAILED) is left
 * as the journal words it, because then the new state is already visible and "nothing was changed" is false.
 */
function reword(journal: "create" | "delete", dataDir: string, error: unknown): unknown {
  if (!(isBoatCreateJournalError(error) || isBoatDeleteJournalError(error))) return error;
  if (error.code === "INVALID_ARGUMENT") return error;
  let errno: string | undefined;
  let cause: unknown = error;
  for (let depth = 0; depth < 8 && cause !== undefined && cause !== null; depth += 1) {
    if ((cause as { code?: unknown }).code === "DIRECTORY_SYNC_FAILED") return error;
    errno ??= osCauseOf(cause);
    cause = (cause as { cause?: unknown }).cause;
  }
  if (errno === undefined || isStorageError(error.cause)) return error;
  const file = journal === "create" ? CREATE_JOURNAL_FILE : DELETE_JOURNAL_FILE;
  return asJournalError(journal, osFailure(errno, `${join(dataDir, file)} (or its lock)`, error));
}

/** Calls the crash hook right before and right after each publishing rename, while the journal lock is held. */
function withCrashPoints(fs: FileOps, crash: StorageCrashHook | undefined): FileOps {
  if (crash === undefined) return fs;
  return {
    ...fs,
    renameSync: ((from: string, to: string) => {
      crash("file:before-commit");
      fs.renameSync(from, to);
      crash("file:after-commit");
    }) as FileOps["renameSync"],
  };
}
