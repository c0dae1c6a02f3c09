import { randomBytes } from "node:crypto";
import * as nodeFs from "node:fs";
import { basename, dirname, join } from "node:path";
// Type only: atomic writes load no lock code (a writer that never locks stays small and starts fast).
import type { FileOps } from "@drydock/file-lock";
import { errnoCode, JsonJournalError } from "./errors.js";

export interface WriteFileAtomicOptions {
  /** Permission bits of the new file (default 0o600). The process umask can only narrow them. */
  mode?: number;
  /**
   * Flush the file before the rename and the directory after it (default true). `false` keeps the
   * all-or-nothing visibility but not durability: after a power loss the target may hold old bytes.
   */
  durable?: boolean;
  /** File-system seam (default: the real fs). */
  fs?: FileOps;
}

export interface SweepStaleTempsOptions {
  /** Only sweep temporary files of this target (a base name such as `box-create-requests.json`). */
  name?: string;
  /**
   * Liveness of a writer pid. Default: `kill(pid, 0)`. It may also throw like `kill` does (file-lock's
   * convention): only ESRCH, returned as `false` or thrown, counts as dead.
   */
  isProcessAlive?: (pid: number) => boolean;
  /**
   * A dead writer's temp is removed only once it was last modified at least this long ago (default
   * STALE_TEMP_MS, 5 minutes). The pid in a temp's name is only meaningful in the writer's pid namespace:
   * a live writer in another namespace on this host (a container) can look dead here. 0 removes at once;
   * a journal does that under its lock, where no writer of its document can be mid-write.
   */
  minAgeMs?: number;
  fs?: FileOps;
}

/** How old a dead writer's temp must be before `sweepStaleTemps` removes it (as the bot-server's sweep). */
export const STALE_TEMP_MS = 5 * 60 * 1000;

// One description of the steps, run by a synchronous or an asynchronous driver, so writeFileAtomic and
// writeFileAtomicAsync cannot drift apart. Each step is one system call.
type FsStep =
  | { op: "open"; path: string; flags: number; mode: number }
  | { op: "write"; fd: number; buffer: Uint8Array; offset: number; length: number; position: number }
  | { op: "fsync"; fd: number }
  | { op: "close"; fd: number }
  | { op: "rename"; from: string; to: string }
  | { op: "unlink"; path: string };

type Steps = Generator<FsStep, void, unknown>;

const { O_WRONLY, O_CREAT, O_EXCL, O_RDONLY, O_DIRECTORY } = nodeFs.constants;

/** The real file system (node:fs itself satisfies the FileOps seam; same calls as file-lock's nodeFileOps). */
const realFs: FileOps = nodeFs;

/**
 * `.<target base>.<writer pid>.<16 hex>.tmp`, beside the target. Hidden, so listings stay clean; the pid
 * lets `sweepStaleTemps` prove the writer is gone before removing it.
 */
const TEMP_NAME = /^\.(.+)\.([1-9][0-9]{0,9})\.([0-9a-f]{16})\.tmp$/;
/** The seeds' temp name `<target base>.<pid>.<uuid>.tmp`: left behind by them, swept the same way. */
const SEED_TEMP_NAME =
  /^(.+)\.([1-9][0-9]{0,9})\.([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.tmp$/;

export function tempNameFor(target: string, pid: number, random: string): string {
  return `.${target}.${pid}.${random}.tmp`;
}

/** `{ target, pid }` when `name` is a temporary file of writeFileAtomic (or of the seeds), else null. */
export function parseTempName(name: string): { target: string; pid: number } | null {
  const match = TEMP_NAME.exec(name) ?? SEED_TEMP_NAME.exec(name);
  if (!match) return null;
  return { target: match[1]!, pid: Number(match[2]) };
}

function* atomicWriteSteps(target: string, bytes: Uint8Array, mode: number, durable: boolean): Steps {
  const dir = dirname(target);
  const temp = join(dir, tempNameFor(basename(target), process.pid, randomBytes(8).toString("hex")));
  let fd: number | undefined;
  let tempCreated = false;
  try {
    // O_EXCL: never write through a file (or symlink) someone else put at this name. The temp is created
    // with the final mode, so the secret bytes are never readable through wider permissions.
    fd = (yield { op: "open", path: temp, flags: O_WRONLY | O_CREAT | O_EXCL, mode }) as number;
    tempCreated = true;
    let offset = 0;
    while (offset < bytes.length) {
      const length = bytes.length - offset;
      const written = (yield { op: "write", fd, buffer: bytes, offset, length, position: offset }) as number;
      // A write that makes no progress would loop forever; treat it as the I/O error it is.
      if (!(written > 0)) throw Object.assign(new Error("write made no progress"), { code: "EIO" });
      offset += written;
    }
    // Without this fsync, a power loss after the rename can leave the *new name* pointing at an inode
    // whose data never reached the disk: an empty or zero-filled journal (typicode/lowdb#549, ALICE).
    if (durable) yield { op: "fsync", fd };
    const closing = fd;
    fd = undefined;
    // close can report a deferred write error (NFS); the temp is then not trustworthy, so it fails too.
    yield { op: "close", fd: closing };
    yield { op: "rename", from: temp, to: target };
    tempCreated = false;
  } catch (error) {
    if (fd !== undefined) {
      try {
        yield { op: "close", fd };
      } catch {
        // Best effort: the write already failed; the original error is the one to report.
      }
    }
    if (tempCreated) {
      try {
        yield { op: "unlink", path: temp };
      } catch {
        // Best effort: a temp left here is swept later by sweepStaleTemps once this pid is gone.
      }
    }
    throw new JsonJournalError({
      code: "WRITE_FAILED",
      message:
        `Could not write ${target} (${errnoCode(error) ?? "error"}): its previous contents were kept. ` +
        "Check free space and permissions on that directory, then retry.",
      cause: error,
    });
  }
  if (!durable) return;
  // The rename is only a change to the directory. Until the directory itself is flushed, a power loss can
  // forget the new entry and bring back the old file, or (for a file created here) no file at all: a
  // journal that said "recorded" before a provider call would then have lost the record it promised
  // (SQLite's unixSync() tells the same story for its rollback journal).
  let dirFd: number | undefined;
  try {
    dirFd = (yield { op: "open", path: dir, flags: O_RDONLY | O_DIRECTORY, mode: 0 }) as number;
    yield { op: "fsync", fd: dirFd };
  } catch (error) {
    throw new JsonJournalError({
      code: "DIRECTORY_SYNC_FAILED",
      message:
        `Wrote ${target} but could not flush its directory (${errnoCode(error) ?? "error"}): the new ` +
        "contents are visible but may not survive a power loss. Check the disk, then retry the operation.",
      cause: error,
    });
  } finally {
    if (dirFd !== undefined) {
      try {
        yield { op: "close", fd: dirFd };
      } catch {
        // The fsync already succeeded (or its error is being reported); a failed close changes nothing.
      }
    }
  }
}

function performSync(fs: FileOps, step: FsStep): unknown {
  switch (step.op) {
    case "open":
      return fs.openSync(step.path, step.flags, step.mode);
    case "write":
      return fs.writeSync(step.fd, step.buffer, step.offset, step.length, step.position);
    case "fsync":
      return fs.fsyncSync(step.fd);
    case "close":
      return fs.closeSync(step.fd);
    case "rename":
      return fs.renameSync(step.from, step.to);
    case "unlink":
      return fs.unlinkSync(step.path);
  }
}

function callback<T>(run: (done: (error: Error | null, value?: T) => void) => void): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    run((error, value) => (error ? reject(error) : resolve(value as T)));
  });
}

/** The real fs through libuv's thread pool, so a slow fsync never blocks the event loop. */
function performAsync(step: FsStep): Promise<unknown> {
  switch (step.op) {
    case "open":
      return callback<number>((done) => nodeFs.open(step.path, step.flags, step.mode, done));
    case "write":
      return callback<number>((done) =>
        nodeFs.write(step.fd, step.buffer, step.offset, step.length, step.position, (error, written) =>
          done(error, written),
        ),
      );
    case "fsync":
      return callback<void>((done) => nodeFs.fsync(step.fd, done));
    case "close":
      return callback<void>((done) => nodeFs.close(step.fd, done));
    case "rename":
      return callback<void>((done) => nodeFs.rename(step.from, step.to, done));
    case "unlink":
      return callback<void>((done) => nodeFs.unlink(step.path, done));
  }
}

function runSync(steps: Steps, perform: (step: FsStep) => unknown): void {
  let next = steps.next();
  while (!next.done) {
    let outcome: { ok: true; value: unknown } | { ok: false; error: unknown };
    try {
      outcome = { ok: true, value: perform(next.value) };
    } catch (error) {
      outcome = { ok: false, error };
    }
    next = outcome.ok ? steps.next(outcome.value) : steps.throw(outcome.error);
  }
}

async function runAsync(steps: Steps, perform: (step: FsStep) => Promise<unknown>): Promise<void> {
  let next = steps.next();
  while (!next.done) {
    let outcome: { ok: true; value: unknown } | { ok: false; error: unknown };
    try {
      outcome = { ok: true, value: await perform(next.value) };
    } catch (error) {
      outcome = { ok: false, error };
    }
    next = outcome.ok ? steps.next(outcome.value) : steps.throw(outcome.error);
  }
}

function prepare(
  path: unknown,
  data: unknown,
  options: WriteFileAtomicOptions | undefined,
): { bytes: Uint8Array; mode: number; durable: boolean } {
  if (typeof path !== "string" || path === "" || path.includes("\0") || basename(path) === "") {
    throw invalidArgument("writeFileAtomic needs a file path (a non-empty string without NUL bytes).");
  }
  let bytes: Uint8Array;
  if (typeof data === "string") bytes = Buffer.from(data, "utf8");
  else if (data instanceof Uint8Array) bytes = data;
  else throw invalidArgument("writeFileAtomic writes a string or a Uint8Array.");
  const mode = options?.mode ?? 0o600;
  if (!Number.isInteger(mode) || mode < 0 || mode > 0o7777) {
    throw invalidArgument("writeFileAtomic's mode must be permission bits between 0 and 0o7777.");
  }
  return { bytes, mode, durable: options?.durable ?? true };
}

function invalidArgument(message: string): JsonJournalError {
  return new JsonJournalError({ code: "INVALID_ARGUMENT", message });
}

/**
 * Replaces `path` with `data` all at once: readers (and a crash at any moment) see the previous bytes or
 * the new bytes, never a mix, never an empty file. Temp file beside the target (same file system, so the
 * rename is atomic), created exclusively with `mode`, written fully, fsynced, renamed over the target,
 * then the directory is fsynced. On failure the temp is removed (best effort) and a `JsonJournalError`
 * is thrown: `WRITE_FAILED` (target untouched) or `DIRECTORY_SYNC_FAILED` (new bytes visible, durability
 * unconfirmed).
 */
export function writeFileAtomic(
  path: string,
  data: string | Uint8Array,
  options?: WriteFileAtomicOptions,
): void {
  const { bytes, mode, durable } = prepare(path, data, options);
  const fs = options?.fs ?? realFs;
  runSync(atomicWriteSteps(path, bytes, mode, durable), (step) => performSync(fs, step));
}

/**
 * `writeFileAtomic` without blocking the event loop: the same steps, run on libuv's thread pool (or,
 * when an `fs` seam is injected, through it one step at a time).
 */
export async function writeFileAtomicAsync(
  path: string,
  data: string | Uint8Array,
  options?: WriteFileAtomicOptions,
): Promise<void> {
  const { bytes, mode, durable } = prepare(path, data, options);
  const fs = options?.fs;
  const steps = atomicWriteSteps(path, bytes, mode, durable);
  if (fs) await runAsync(steps, async (step) => performSync(fs, step));
  else await runAsync(steps, performAsync);
}

/** Dead only on proof: ESRCH. EPERM means the pid exists (another user); anything else is not a proof. */
export function defaultIsProcessAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return errnoCode(error) !== "ESRCH";
  }
}

/**
 * Removes temporary files of writeFileAtomic (and of the seeds' writer) whose writer process is dead and
 * that were last modified at least `minAgeMs` ago (default 5 minutes, see SweepStaleTempsOptions).
 * A temp is never promoted: it may be a prefix of what its writer meant, and the rename that would have
 * made it the target never happened, so the target already holds the last complete version. Temps of
 * live pids (including this process) are left alone: they may be mid-write.
 */
export function sweepStaleTemps(dir: string, options?: SweepStaleTempsOptions): { removed: string[] } {
  if (typeof dir !== "string" || dir === "" || dir.includes("\0")) {
    throw invalidArgument("sweepStaleTemps needs a directory path.");
  }
  const fs = options?.fs ?? realFs;
  const minAgeMs = options?.minAgeMs ?? STALE_TEMP_MS;
  if (typeof minAgeMs !== "number" || !(minAgeMs >= 0)) {
    throw invalidArgument("sweepStaleTemps' minAgeMs must be a number of milliseconds, 0 or more.");
  }
  const probe = options?.isProcessAlive ?? defaultIsProcessAlive;
  const isProcessAlive = (pid: number): boolean => {
    try {
      return probe(pid);
    } catch (error) {
      return errnoCode(error) !== "ESRCH";
    }
  };
  let names: string[];
  try {
    names = fs.readdirSync(dir);
  } catch (error) {
    if (errnoCode(error) === "ENOENT") return { removed: [] };
    throw new JsonJournalError({
      code: "SWEEP_FAILED",
      message: `Could not list ${dir} to remove stale temporary files (${errnoCode(error) ?? "error"}). Check its permissions.`,
      cause: error,
    });
  }
  const removed: string[] = [];
  for (const name of names) {
    const temp = parseTempName(name);
    if (!temp || (options?.name !== undefined && temp.target !== options.name)) continue;
    if (temp.pid === process.pid || isProcessAlive(temp.pid)) continue;
    const path = join(dir, name);
    try {
      if (minAgeMs > 0) {
        // Unknown age (e.g. the temp just vanished) is no proof of staleness: leave it.
        const stats = fs.lstatSync(path, { throwIfNoEntry: false });
        if (!stats || Date.now() - stats.mtimeMs < minAgeMs) continue;
      }
      fs.unlinkSync(path);
      removed.push(path);
    } catch (error) {
      // Another sweeper got there first: the goal (the temp is gone) holds.
      if (errnoCode(error) === "ENOENT") continue;
      throw new JsonJournalError({
        code: "SWEEP_FAILED",
        message: `Could not remove the stale temporary file ${path} (${errnoCode(error) ?? "error"}). Check its permissions.`,
        cause: error,
      });
    }
  }
  return { removed };
}
