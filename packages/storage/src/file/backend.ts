import { join } from "node:path";
import {
  type BoatCreateJournal,
  type BoatCreateJournalFile,
  BoatCreateJournalFileSchema,
  CREATE_JOURNAL_FILE,
  CREATE_JOURNAL_LOCK_FILE,
  isBoatCreateJournalError,
  MAX_REQUESTS,
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
  MAX_RECORDS,
  openBoatDeleteJournal,
} from "@drydock/boat-delete-journal";
import { checkDeleteJournal, deletePaused } from "@drydock/boat-delete-journal/logic";
import { BOTS_FILE, DEFAULT_MAX_FILE_BYTES } from "@drydock/facts";
import { type FileOps, nodeFileOps } from "@drydock/file-lock";
import { openJsonJournal, toJournalStateError, trustedFileIdentity } from "@drydock/json-journal";
import { byBotId } from "../bot-rules.js";
import { MAX_FILE_BOTS } from "../bots.js";
import type { BackendOptions, Storage, StorageCrashHook } from "../contract.js";
import {
  asJournalError,
  isStorageError,
  notEmptyFailure,
  osFailure,
  StorageError,
  unpublishedOsCause,
} from "../errors.js";
import { checkImport, type ImportLimits } from "../import-check.js";
import { readRetired, retiredError } from "../retired.js";
import { openBotsDocument, openFileBotRegistry } from "./bots.js";
import { documentSpecs, documentState, retiredText, writeDocumentLocked } from "./documents.js";
import { createOnce, openFileMeta, osOrUnknown } from "./meta.js";
import { openFileWorkspaces } from "./workspaces.js";

export interface FileBackendOptions extends BackendOptions {
  /** File system seam for the journals and their locks (default the real one). */
  fs?: FileOps;
  /** Lock wait of each journal call, ms (file-lock's default when unset). */
  lockWaitMs?: number;
  /**
   * For `migrateStorage` only: open even when the files were retired by a migration, to import into them
   * (a retired document counts as empty) or to finish retiring them. Every other caller is refused.
   */
  acceptRetired?: boolean;
}

/** The file formats' own caps: each journal and the bot registry hold at most 4,096 rows. */
export const FILE_STORE_LIMITS: ImportLimits = {
  maxRows: Math.min(MAX_REQUESTS, MAX_RECORDS),
  maxBots: MAX_FILE_BOTS,
};

/**
 * The `file` backend: today's files, locks and formats, unchanged — an adapter over
 * `openBoatCreateJournal` / `openBoatDeleteJournal`, so every byte it writes is theirs (and the seeds').
 * Only two things are added: crash points around the publishing rename, and OS-level failures (no space,
 * read-only, permissions, …) re-worded to say what happened, that nothing was changed and what to do.
 */
export async function openFileStorage(options: FileBackendOptions): Promise<Storage> {
  const { dataDir } = options;
  const specs = documentSpecs(dataDir);
  // A data directory migrated away: its files say where the state went; refuse before anything reads them.
  for (const spec of options.acceptRetired === true ? [] : specs) {
    const marker = readRetired(spec.file);
    if (marker !== null) throw retiredError(spec.file, marker);
  }
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
  const registryOptions = {
    fs,
    ...(options.now ? { now: options.now } : {}),
    ...(options.lockWaitMs === undefined ? {} : { lockWaitMs: options.lockWaitMs }),
  };
  const bots = openFileBotRegistry(dataDir, registryOptions);
  const botsDoc = openBotsDocument(dataDir, registryOptions);
  const writeOptions = {
    fs: baseFs,
    ...(options.lockWaitMs === undefined ? {} : { lockWaitMs: options.lockWaitMs }),
  };
  let closed = false;
  const live = () => {
    if (closed) throw closedError();
  };
  const workspaces = openFileWorkspaces(dataDir, {
    fs: baseFs,
    now: options.now ?? Date.now,
    live,
    maxFileBytes: options.maxFileBytes ?? DEFAULT_MAX_FILE_BYTES,
    ...(options.lockWaitMs === undefined ? {} : { lockWaitMs: options.lockWaitMs }),
    ...(options.crash === undefined ? {} : { crash: options.crash }),
  });
  const guard = <T extends object>(journal: "create" | "delete", target: T): T =>
    wrapMethods(
      target,
      () => {
        if (closed) throw closedError();
      },
      (error) => reword(journal, dataDir, error),
    );
  // Storage.changeToken: each document's identity as the peeks trust it. While a document changed within
  // the racy window (2 s) nothing can be proven, and the token is one never handed out before.
  const documents = [CREATE_JOURNAL_FILE, DELETE_JOURNAL_FILE, BOTS_FILE].map((name) => join(dataDir, name));
  let unproven = 0;
  return {
    kind: "file",
    dataDir,
    changeToken() {
      live();
      // The wall clock, never options.now: the window is measured against the kernel's ctimes.
      const now = Date.now();
      const identities: string[] = [];
      for (const file of documents) {
        const identity = trustedFileIdentity(file, now);
        if (identity === null) return `changing:${++unproven}`;
        identities.push(identity);
      }
      return identities.join("|");
    },
    createJournal: guard<BoatCreateJournal>("create", createJournal),
    deleteJournal: guard<BoatDeleteJournal>("delete", deleteJournal),
    meta: wrapMethods(meta, live, (error) => error),
    bots: { ...wrapMethods(bots, live, (error) => error), liveMarks: bots.liveMarks },
    workspaces,
    async exportAll() {
      live();
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
      const registry = await botsDoc.read();
      return {
        creates: creates.requests.map((row) => ({ ...row })),
        deletes: deletes.records.map((row) => ({ ...row })),
        meta: await meta.all(),
        bots: [...registry.bots].sort(byBotId),
      };
    },
    async importAll(data) {
      live();
      const checked = checkImport(data, FILE_STORE_LIMITS);
      const existing = await meta.all();
      const emptyState = (state: ReturnType<typeof documentState>) =>
        state.kind === "absent" || state.kind === "retired" || (state.kind === "live" && state.rows === 0);
      for (const spec of specs) {
        if (!emptyState(documentState(spec))) throw notEmptyFailure(spec.file, `a ${spec.name} with rows`);
      }
      for (const [key, value] of Object.entries(existing)) {
        if (checked.meta[key] !== value) throw notEmptyFailure(dataDir, `the singleton ${key}`);
      }
      for (const spec of specs) {
        await writeDocumentLocked(
          spec,
          (state) => {
            if (!emptyState(state)) throw notEmptyFailure(spec.file, `a ${spec.name} with rows`);
            return `${JSON.stringify(spec.build(checked), null, 2)}\n`;
          },
          writeOptions,
        );
      }
      for (const [key, value] of Object.entries(checked.meta)) {
        if (existing[key] === value) continue;
        try {
          await createOnce(join(dataDir, key), value);
        } catch (error) {
          throw osOrUnknown(error, join(dataDir, key));
        }
      }
    },
    async retire(to, at) {
      live();
      // Every document, present or not: a seed process finding no file would start a new, empty one.
      for (const spec of specs) {
        await writeDocumentLocked(
          spec,
          (state) => (state.kind === "retired" ? null : retiredText(spec, to, at)),
          writeOptions,
        );
      }
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
  const errno = unpublishedOsCause(error);
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
