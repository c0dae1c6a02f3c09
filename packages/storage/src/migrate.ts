import { promises as fsp, readFileSync, renameSync, unlinkSync } from "node:fs";
import { join } from "node:path";
import { isDeepStrictEqual } from "node:util";
import { LOCKS_DIR, STORAGE_BINDING_FILE } from "@drydock/facts";
import { acquireLock, isLockError, type LockHandle } from "@drydock/file-lock";
import { writeFileAtomic } from "@drydock/json-journal";
import { migrateCommand, readStorageBinding } from "./binding.js";
import type { BackendFactory, Storage, StorageExport, StorageKind } from "./contract.js";
import { isStorageError, notEmptyFailure, StorageError } from "./errors.js";
import { FILE_STORE_LIMITS, openFileStorage } from "./file/backend.js";
import { osOrUnknown } from "./file/meta.js";
import { overLimits } from "./import-check.js";
import { listClaims, migrateLockPath } from "./presence.js";

/**
 * `drydock storage migrate`: moves a data directory's state to another backend — offline, verified, and
 * leaving the old store refusing every writer (drydock's and the seeds' own code).
 *
 * 1. Offline: the exclusive lock `<dataDir>/locks/storage-migrate.lock`, then the claims (presence.ts):
 *    any live one is STORAGE_IN_USE naming its pid; dead ones are removed.
 * 2. A progress record `<dataDir>/locks/storage-migrate.json` ({from, to, phase}) is written before the target
 *    is touched, so a re-run knows what an interrupted one left: "importing" (the target is removed and the
 *    migration starts over) or "verified" (only retirement and rebinding remain).
 * 3. Export the source, import into the (empty) target, export the target, compare. Any difference: the
 *    target is removed (a new SQLite database is deleted; JSON files are left retired), the source is
 *    untouched and still bound, STORAGE_MIGRATION_FAILED.
 * 4. Retire the source (each JSON file rewritten as `{"version":"migrated",…}` under its own lock; an SQLite
 *    database gets its `retired` row), then rebind `storage.json` (temp, fsync, rename, fsync of the dir).
 *    Retiring first means no crash ever leaves both stores writable: between the two steps neither is, and
 *    the re-run finishes.
 *
 * To postgres (a database other hosts share): the target must be empty (checked, with the caller's
 * `checkTarget`, before the progress record is written, so a re-run never mistakes someone else's rows for its
 * own), and an interrupted import is never removed: importAll is one transaction, so a re-run finds the
 * target empty (imports again) or holding exactly the source's export (goes on); anything else is refused.
 * `copyWorkspaces` (the caller's: workspaces are not in the export) runs after the import on every attempt
 * and must be idempotent and verify what it wrote.
 *
 * From postgres (a several-host installation shrinking to one host): the caller's `checkSource` refuses while
 * any instance is live; the source is retired with a marker row that makes every later open of its schema
 * refuse, naming where the state went.
 *
 * Crash points (test-only `crash` hook), one per durable step: migrate:marked, migrate:imported,
 * migrate:workspaces, migrate:verified, migrate:retired, migrate:rebound. After a crash anywhere: run the same
 * command again.
 */

export const MIGRATE_CRASH_POINTS = [
  "migrate:marked",
  "migrate:imported",
  "migrate:workspaces",
  "migrate:verified",
  "migrate:retired",
  "migrate:rebound",
] as const;

export interface MigrateStorageOptions {
  dataDir: string;
  to: StorageKind;
  /** Backends that live in other packages (sqlite, postgres), as openStorage takes them. */
  backends?: Partial<Record<Exclude<StorageKind, "file">, BackendFactory>>;
  /** The postgres URL, when either side is postgres. */
  url?: string;
  /** Passed to both backends (e.g. sqlite's busyTimeoutMs). */
  backendOptions?: Record<string, unknown>;
  now?: () => number;
  /** How long to wait for another migration's lock, ms (default 2,000). */
  lockWaitMs?: number;
  /**
   * Refuses a target that must not be migrated into (e.g. postgres instances holding live leases): called on
   * the opened target before anything is written. Throw to refuse; nothing is changed.
   */
  checkTarget?: (target: Storage) => Promise<void>;
  /**
   * Refuses a source that must not be migrated away from (e.g. postgres instances holding live leases):
   * called on the opened source before anything is written, on every attempt that copies. Throw to refuse.
   */
  checkSource?: (source: Storage) => Promise<void>;
  /**
   * Moves what lives beside the journals (workspaces) into the target after its import, on every attempt
   * (idempotent), verifying what it wrote; throwing fails the migration with the source still bound.
   */
  copyWorkspaces?: (target: Storage) => Promise<void>;
  /** Test-only: called at each crash point. */
  crash?: (point: (typeof MIGRATE_CRASH_POINTS)[number]) => void;
}

export interface MigrateStorageResult {
  from: StorageKind;
  to: StorageKind;
  /** "migrated"; "resumed" (an interrupted migration finished); "unchanged" (already bound to `to`). */
  outcome: "migrated" | "resumed" | "unchanged";
  counts: { creates: number; deletes: number; bots: number; meta: number };
}

interface Progress {
  version: 1;
  from: StorageKind;
  to: StorageKind;
  phase: "importing" | "verified";
  at: number;
}

/** A migration that was interrupted (killed, crashed) and not yet finished by a re-run. */
export interface PendingMigration {
  from: StorageKind;
  to: StorageKind;
  /** "importing": the target is not trusted (a re-run starts over); "verified": only retiring and rebinding remain. */
  phase: "importing" | "verified";
  /** When it started (ms since the epoch). */
  at: number;
}

/**
 * The migration an interrupted `migrateStorage` left unfinished on `dataDir` (its progress record), or null.
 * Read-only; `migrateStorage` with the same `to` finishes it. Throws STORAGE_MIGRATION_FAILED for a record
 * that does not read as one.
 */
export function pendingMigration(dataDir: string): PendingMigration | null {
  const progress = readProgress(join(dataDir, LOCKS_DIR, PROGRESS_FILE));
  if (progress === null) return null;
  return { from: progress.from, to: progress.to, phase: progress.phase, at: progress.at };
}

const PROGRESS_FILE = "storage-migrate.json";

/**
 * A store the file backend cannot hold (more than 4,096 rows in a journal, or bots), refused before a
 * migration to `file` changes anything (and by the CLI's preview): which lists are over, and where the rows
 * can go instead. Without this the import would refuse only after the migration had started.
 */
export function refuseOverFileLimits(dataDir: string, from: StorageKind, data: StorageExport): void {
  const over = overLimits(data, FILE_STORE_LIMITS);
  if (over.length === 0) return;
  const held = over.map(({ what, count }) => `${count} ${what}`).join(" and ");
  const instead =
    from === "sqlite"
      ? ""
      : `, or move it to sqlite, which has no such cap: ${migrateCommand(dataDir, "sqlite")}`;
  throw new StorageError({
    code: "STORAGE_INVALID_ARGUMENT",
    message: `The ${from} store of ${dataDir} holds ${held}, more than the file backend can (at most ${FILE_STORE_LIMITS.maxRows} rows a journal and ${FILE_STORE_LIMITS.maxBots} bots), so nothing was changed. Keep it on ${from}${instead}.`,
  });
}

function failed(message: string, cause?: unknown): StorageError {
  return new StorageError({ code: "STORAGE_MIGRATION_FAILED", message, cause });
}

export async function migrateStorage(options: MigrateStorageOptions): Promise<MigrateStorageResult> {
  const { dataDir, to } = options;
  const now = options.now ?? Date.now;
  const crash = options.crash ?? (() => {});
  const lock = await takeMigrateLock(dataDir, options.lockWaitMs ?? 2_000);
  try {
    await refuseLiveClaims(dataDir);
    const progressPath = join(dataDir, LOCKS_DIR, PROGRESS_FILE);
    let progress = readProgress(progressPath);
    const binding = await readStorageBinding(dataDir);
    const open = (kind: StorageKind) => openKind(kind, options);
    if (binding === null) {
      // Nothing stored yet: binding the directory is the whole migration.
      await writeBinding(dataDir, to);
      return { from: to, to, outcome: "unchanged", counts: { creates: 0, deletes: 0, bots: 0, meta: 0 } };
    }
    const from = binding.kind;
    if (from === to) {
      if (progress === null || progress.to !== to)
        return { from, to, outcome: "unchanged", counts: await countsOf(open, to) };
      // Rebound, then interrupted: only the source's retirement may be unfinished.
      await retireSource(open, progress.from, to, progress.at);
      unlinkSync(progressPath);
      return { from: progress.from, to, outcome: "resumed", counts: await countsOf(open, to) };
    }
    if (progress !== null && progress.to === from) {
      // An earlier migration to `from` was rebound (only then is the directory bound to its target), then
      // killed before dropping its record: its target is the live store and must never be removed as an
      // untrusted one. Finish retiring its source, drop the record, and go on from the live store.
      await retireSource(open, progress.from, from, progress.at);
      unlinkSync(progressPath);
      progress = null;
    }
    if (progress !== null && progress.from === from && progress.to === to && progress.phase === "verified") {
      await finish(dataDir, open, progress, progressPath, crash);
      return { from, to, outcome: "resumed", counts: await countsOf(open, to) };
    }
    if (progress !== null && progress.from === from && progress.to === to && to === "postgres") {
      // Importing into a shared database, interrupted: resumed in place, never removed (see above).
      return await migrateFresh({ dataDir, from, to, open, now, crash, progressPath, options, resume: true });
    }
    if (progress !== null) {
      // An earlier attempt stopped while importing (or aimed elsewhere): its target is not trusted.
      await removeTarget(dataDir, open, progress.to, progress.from, now());
      unlinkSync(progressPath);
    }
    return await migrateFresh({ dataDir, from, to, open, now, crash, progressPath, options, resume: false });
  } finally {
    lock.release();
  }
}

async function migrateFresh(input: {
  dataDir: string;
  from: StorageKind;
  to: StorageKind;
  open: (kind: StorageKind) => Promise<Storage>;
  now: () => number;
  crash: NonNullable<MigrateStorageOptions["crash"]>;
  progressPath: string;
  options: MigrateStorageOptions;
  /** A postgres import interrupted earlier: the target holds nothing or exactly the source's export. */
  resume: boolean;
}): Promise<MigrateStorageResult> {
  const { dataDir, from, to, open, now, crash, progressPath, options, resume } = input;
  const source = await open(from);
  let exported: StorageExport;
  try {
    await options.checkSource?.(source);
    exported = await source.exportAll();
  } finally {
    await source.close();
  }
  if (to === "file") refuseOverFileLimits(dataDir, from, exported);
  const progress: Progress = resume
    ? (readProgress(progressPath) as Progress)
    : { version: 1, from, to, phase: "importing", at: now() };
  if (!resume) {
    await prepareTarget(dataDir, open, to, options);
    writeProgress(progressPath, progress);
    crash("migrate:marked");
  }
  let imported: StorageExport;
  const target = await open(to);
  try {
    if (resume) await options.checkTarget?.(target);
    const found = resume ? await target.exportAll() : null;
    if (found === null || isEmptyExport(found)) {
      await target.importAll(exported);
    } else if (!isDeepStrictEqual(found, exported)) {
      throw failed(
        `an interrupted migration of ${dataDir} to ${to} finds the target holding rows that are not the ${from} store's (${describeDifference(exported, found)}), so nothing more was changed. The ${from} store is untouched and still in use. Empty the target by hand (it was empty when the migration started), then run ${migrateCommand(dataDir, to)} again`,
      );
    }
    crash("migrate:imported");
    await options.copyWorkspaces?.(target);
    crash("migrate:workspaces");
    imported = await target.exportAll();
  } catch (error) {
    await target.close();
    if (to === "postgres") {
      // Never removed (a shared database); the record stays, so a re-run resumes after the cause is fixed.
      if (isStorageError(error) && error.code === "STORAGE_NOT_EMPTY") unlinkSync(progressPath);
      throw error;
    }
    if (isStorageError(error) && error.code === "STORAGE_NOT_EMPTY") {
      // importAll checks before it writes: nothing of ours is in the target.
      unlinkSync(progressPath);
    } else {
      await removeTarget(dataDir, open, to, from, now());
      unlinkSync(progressPath);
    }
    throw error;
  }
  await target.close();
  if (!isDeepStrictEqual(imported, exported)) {
    if (to === "postgres") {
      throw failed(
        `The migration of ${dataDir} from ${from} to postgres was not verified: the database did not export what the ${from} store holds (${describeDifference(exported, imported)}). The ${from} store is untouched and still in use; the database was left as it is. Report this as a bug in drydock.`,
      );
    }
    await removeTarget(dataDir, open, to, from, now());
    unlinkSync(progressPath);
    throw failed(
      `The migration of ${dataDir} from ${from} to ${to} was not verified: the ${to} store did not export what the ${from} store holds (${describeDifference(exported, imported)}). The ${to} store was removed; the ${from} store is untouched and still in use. Report this as a bug in drydock.`,
    );
  }
  writeProgress(progressPath, { ...progress, phase: "verified" });
  crash("migrate:verified");
  await finish(dataDir, open, { ...progress, phase: "verified" }, progressPath, crash);
  return { from, to, outcome: resume ? "resumed" : "migrated", counts: countsIn(exported) };
}

/** Retire the source, rebind to the target, drop the progress record. Each step idempotent. */
async function finish(
  dataDir: string,
  open: (kind: StorageKind) => Promise<Storage>,
  progress: Progress,
  progressPath: string,
  crash: NonNullable<MigrateStorageOptions["crash"]>,
): Promise<void> {
  await retireSource(open, progress.from, progress.to, progress.at);
  crash("migrate:retired");
  await writeBinding(dataDir, progress.to);
  crash("migrate:rebound");
  unlinkSync(progressPath);
}

async function retireSource(
  open: (kind: StorageKind) => Promise<Storage>,
  from: StorageKind,
  to: StorageKind,
  at: number,
): Promise<void> {
  let source: Storage;
  try {
    source = await open(from);
  } catch (error) {
    // A retired database refuses to open: it is retired already.
    if (isStorageError(error) && error.code === "STORAGE_BACKEND_MISMATCH") return;
    throw error;
  }
  try {
    if (source.retire === undefined) {
      throw failed(`the ${from} backend cannot be retired, so nothing was migrated away from it`);
    }
    await source.retire(to, at);
  } finally {
    await source.close();
  }
}

/**
 * Before the progress record: an SQLite target retired by an earlier migration is moved aside (kept); a
 * postgres target must be empty and pass the caller's `checkTarget` (STORAGE_NOT_EMPTY, nothing written).
 */
async function prepareTarget(
  dataDir: string,
  open: (kind: StorageKind) => Promise<Storage>,
  to: StorageKind,
  options: MigrateStorageOptions,
) {
  if (to === "postgres") {
    const target = await open(to);
    try {
      if (!isEmptyExport(await target.exportAll())) {
        throw notEmptyFailure(
          (target as { where?: string }).where ?? "the postgres store",
          "rows (journals, bots or meta), so it is not migrated into",
        );
      }
      await options.checkTarget?.(target);
    } finally {
      await target.close();
    }
    return;
  }
  if (to !== "sqlite") return;
  try {
    await (await open(to)).close();
  } catch (error) {
    if (!(isStorageError(error) && error.code === "STORAGE_BACKEND_MISMATCH")) throw error;
    const path = join(dataDir, SQLITE_FILE);
    const aside = `${path}.retired-${Date.now()}`;
    for (const suffix of ["-wal", "-shm", ""]) {
      try {
        renameSync(`${path}${suffix}`, `${aside}${suffix}`);
      } catch (renameError) {
        if ((renameError as NodeJS.ErrnoException).code !== "ENOENT") throw osOrUnknown(renameError, path);
      }
    }
  }
}

const SQLITE_FILE = "drydock.sqlite";

/** Removes a target this migration wrote: a new SQLite database is deleted; JSON files are left retired. */
async function removeTarget(
  dataDir: string,
  open: (kind: StorageKind) => Promise<Storage>,
  target: StorageKind,
  source: StorageKind,
  at: number,
): Promise<void> {
  if (target === "sqlite") {
    for (const suffix of ["", "-wal", "-shm"]) {
      try {
        unlinkSync(join(dataDir, `${SQLITE_FILE}${suffix}`));
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw osOrUnknown(error, dataDir);
      }
    }
    return;
  }
  if (target === "file") {
    // Never deleted: a seed process finding no file would start a new one. Retired, they refuse every writer.
    const files = await open("file");
    try {
      await files.retire?.(source, at);
    } finally {
      await files.close();
    }
    return;
  }
  throw failed(
    `an interrupted migration left a partial ${target} store; empty it by hand, then run ${migrateCommand(dataDir, target)} again`,
  );
}

async function openKind(kind: StorageKind, options: MigrateStorageOptions): Promise<Storage> {
  const common = { dataDir: options.dataDir, ...(options.now ? { now: options.now } : {}) };
  if (kind === "file") return openFileStorage({ ...common, ...options.backendOptions, acceptRetired: true });
  const factory = options.backends?.[kind];
  if (factory === undefined) {
    throw new StorageError({
      code: "STORAGE_INVALID_ARGUMENT",
      message: `migrating to or from ${kind} needs its backend: pass { backends: { ${kind}: ${kind}Backend } } from @drydock/storage-${kind}. Nothing was changed.`,
    });
  }
  return factory({
    ...common,
    ...(options.url === undefined ? {} : { url: options.url }),
    ...options.backendOptions,
  });
}

async function takeMigrateLock(dataDir: string, waitMs: number): Promise<LockHandle> {
  try {
    await fsp.mkdir(join(dataDir, LOCKS_DIR), { recursive: true, mode: 0o700 });
    return await acquireLock(migrateLockPath(dataDir), { label: "drydock storage migrate", waitMs });
  } catch (error) {
    if (isLockError(error) && error.code === "LOCK_TIMEOUT") {
      throw new StorageError({
        code: "STORAGE_IN_USE",
        message: `Another \`drydock storage migrate\` is running on ${dataDir}. Nothing was changed. Wait for it to finish.`,
        cause: error,
      });
    }
    throw osOrUnknown(error, migrateLockPath(dataDir));
  }
}

async function refuseLiveClaims(dataDir: string): Promise<void> {
  const claims = await listClaims(dataDir);
  const live = claims.filter((c) => c.liveness !== "dead");
  if (live.length > 0) {
    const who = live.map((c) =>
      c.claim ? `${c.claim.role} pid ${c.claim.pid}` : `unreadable claim ${c.path}`,
    );
    throw new StorageError({
      code: "STORAGE_IN_USE",
      message: `${dataDir} is in use by ${who.join(", ")}, so nothing was migrated and nothing was changed. Stop every drydock process using it (server and CLI), then run the migration again.`,
    });
  }
  for (const dead of claims) {
    try {
      unlinkSync(dead.path);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw osOrUnknown(error, dead.path);
    }
  }
}

function readProgress(path: string): Progress | null {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw osOrUnknown(error, path);
  }
  const value = JSON.parse(text) as Progress;
  if (value?.version !== 1 || (value.phase !== "importing" && value.phase !== "verified")) {
    throw failed(`${path} is not a migration's progress record; move it away, then run the migration again`);
  }
  return value;
}

function writeProgress(path: string, progress: Progress): void {
  try {
    writeFileAtomic(path, `${JSON.stringify(progress)}\n`, { mode: 0o600 });
  } catch (error) {
    throw osOrUnknown(error, path);
  }
}

/** storage.json replaced atomically and durably (temp, fsync, rename, fsync of the directory). */
async function writeBinding(dataDir: string, kind: StorageKind): Promise<void> {
  const path = join(dataDir, STORAGE_BINDING_FILE);
  try {
    await fsp.mkdir(dataDir, { recursive: true, mode: 0o700 });
    writeFileAtomic(path, `${JSON.stringify({ version: 1, kind })}\n`, { mode: 0o600 });
  } catch (error) {
    throw osOrUnknown(error, path);
  }
}

function isEmptyExport(data: StorageExport): boolean {
  return data.creates.length + data.deletes.length + data.bots.length + Object.keys(data.meta).length === 0;
}

function countsIn(data: StorageExport): MigrateStorageResult["counts"] {
  return {
    creates: data.creates.length,
    deletes: data.deletes.length,
    bots: data.bots.length,
    meta: Object.keys(data.meta).length,
  };
}

async function countsOf(open: (kind: StorageKind) => Promise<Storage>, kind: StorageKind) {
  const storage = await open(kind);
  try {
    return countsIn(await storage.exportAll());
  } finally {
    await storage.close();
  }
}

function describeDifference(a: StorageExport, b: StorageExport): string {
  const parts = (["creates", "deletes", "bots"] as const)
    .filter((k) => !isDeepStrictEqual(a[k], b[k]))
    .map((k) => `${k}: ${a[k].length} vs ${b[k].length} rows`);
  if (!isDeepStrictEqual(a.meta, b.meta)) parts.push("meta differs");
  return parts.join("; ") || "they differ";
}
