import { createHash, randomBytes } from "node:crypto";
import { constants } from "node:fs";
import { join } from "node:path";
import {
  type FileOps,
  fsyncAsync,
  fsyncDirectory,
  isProcessLevelErrno,
  makeDirectories,
} from "@drydock/file-lock";
import { errnoOf, SagaError } from "../errors.js";

const { O_RDONLY, O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW, O_NONBLOCK, O_DIRECTORY } = constants;

/**
 * `.drydock.<32 hex>.<pid>.<16 hex>.tmp`: the one temporary name this package writes, anywhere. The 32 hex
 * are the start of the SHA-256 of the target's name, so the temp's length never depends on the target's
 * (at most 73 bytes): a target of any length the file system allows (NAME_MAX, 255 bytes) can be staged,
 * and a temp left beside its target can still be told to be that target's (`isTempFor`).
 */
const TEMP_NAME = /^\.drydock\.([0-9a-f]{32})\.[1-9][0-9]{0,9}\.[0-9a-f]{16}\.tmp$/;
/**
 * `.<target>.<pid>.<16 hex>.tmp`: what earlier versions wrote (30-40 bytes longer than the target, so a
 * target of more than ~215 bytes could not be staged). Still recognised, so that what a writer of an
 * earlier version left is swept like any temp, and never promoted.
 */
const LEGACY_TEMP_NAME = /^\.(.+)\.[1-9][0-9]{0,9}\.[0-9a-f]{16}\.tmp$/;

/**
 * Unique per process without asking the kernel for entropy on every file: a random prefix drawn once,
 * then a counter (temps are created with O_EXCL anyway; uniqueness only spares a retry).
 */
const tempPrefix = randomBytes(4).toString("hex");
let tempCounter = 0;

/** What a temp's name says of its target: the start of the SHA-256 of the target's name, in hex. */
function targetTag(target: string): string {
  return createHash("sha256").update(target, "utf8").digest("hex").slice(0, 32);
}

export function tempNameFor(target: string): string {
  tempCounter = (tempCounter + 1) % 0x1_0000_0000;
  return `.drydock.${targetTag(target)}.${process.pid}.${tempPrefix}${tempCounter.toString(16).padStart(8, "0")}.tmp`;
}

/** A temp of this package, of this version or an earlier one. */
export function isTempName(name: string): boolean {
  return TEMP_NAME.test(name) || LEGACY_TEMP_NAME.test(name);
}

/**
 * Whether `name` is a temp written for `target` (a name in the same directory), by this version
 * (`.drydock.<tag of target>.<pid>.<hex>.tmp`) or an earlier one (`.<target>.<pid>.<hex>.tmp`).
 */
export function isTempFor(name: string, target: string): boolean {
  const tag = TEMP_NAME.exec(name)?.[1];
  if (tag !== undefined) return tag === targetTag(target);
  return LEGACY_TEMP_NAME.exec(name)?.[1] === target;
}

/**
 * The mode bits a checkpoint records and a restore sets: permissions and the sticky bit, never setuid or
 * setgid. A checkpoint does not record owners, so a setuid file a bot wrote would come back owned by
 * whoever restores it (root, perhaps); these bits are dropped when a workspace is scanned and whenever
 * a mode is set, so that a manifest written before they were dropped cannot set them either.
 */
export const MODE_BITS = 0o1777;

/**
 * Sets the mode of the directory at `path` to `mode(its current mode)`, without following a symlink at
 * its last component (opened O_NOFOLLOW | O_DIRECTORY, checked with fstat on the opened inode, changed
 * through the descriptor; nothing is changed if it already has that mode). A symlink or anything but a
 * directory there is CORRUPT: the workspace changed under the restore.
 */
export function chmodDir(fs: FileOps, path: string, mode: (current: number) => number): void {
  let fd: number;
  try {
    fd = fs.openSync(path, O_RDONLY | O_NOFOLLOW | O_DIRECTORY | O_NONBLOCK);
  } catch (error) {
    const code = errnoOf(error);
    if (code !== "ELOOP" && code !== "ENOTDIR") throw error;
    throw new SagaError({
      code: "CORRUPT",
      cause: error,
      message: `${path} is no longer a directory (a symlink or a file was put there); refusing to change anything it leads to.`,
    });
  }
  try {
    const stat = fs.fstatSync(fd);
    if (!stat.isDirectory()) {
      throw new SagaError({ code: "CORRUPT", message: `${path} is no longer a directory.` });
    }
    // Compared like a scan compares modes (a setgid bit the kernel gave a new directory stays).
    const current = stat.mode & MODE_BITS;
    const wanted = mode(current) & MODE_BITS;
    if (current !== wanted) fs.fchmodSync(fd, wanted);
  } finally {
    closeQuietly(fs, fd);
  }
}

/**
 * Where a publish failed. `before`: the target was not created or replaced. `after`: the target is in
 * place but the directory entry may not be durable yet (its fsync failed).
 */
export class PublishFailure extends Error {
  constructor(
    readonly stage: "before" | "after",
    readonly exists: boolean,
    override readonly cause: unknown,
  ) {
    super(`publish failed ${stage} the target became visible`, { cause });
  }
}

/**
 * Makes `path` (and missing parents) as 0700 directories, then insists it is a real directory. Every
 * directory it creates is flushed into its parent: a new name is durable only once its directory is
 * fsynced, and without that a power loss can forget a saga directory whose events were acknowledged (the
 * power-loss model in @drydock/power-loss found exactly that).
 */
export function ensurePrivateDir(fs: FileOps, path: string, options: { flushNew?: boolean } = {}): void {
  const parents = makeDirectories(fs, path);
  const stat = fs.lstatSync(path);
  if (!stat.isDirectory()) {
    throw new SagaError({
      code: "CORRUPT",
      message: `${path} is not a plain directory (it is a symlink or a file). Nothing was changed; remove or repair it by hand.`,
    });
  }
  if (options.flushNew === false) return;
  // mkdir -p created these names: flush each new name's parent.
  for (const parent of parents) fsyncDirectory(fs, parent);
}

/** How many flushes are kept in flight (libuv runs four at once by default). */
const FLUSH_CONCURRENCY = 8;

export interface FlushBehind {
  /**
   * Starts flushing `path` (file or directory, opened read-only without following a symlink; fsync needs
   * no write access), first waiting while FLUSH_CONCURRENCY flushes are in flight. `then` runs once that
   * flush succeeded (a checkpoint renames a blob to its content address there). Throws the first failure
   * of any flush; the caller must still `settle()` before it cleans up.
   */
  add(path: string, then?: () => void): Promise<void>;
  /** Waits for every flush started (and its `then`); throws the first failure. */
  drain(): Promise<void>;
  /** Waits for every flush started, never throws: for cleanup after a failure. */
  settle(): Promise<void>;
}

/**
 * Flushes files behind the caller while it goes on writing, several at a time: the kernel folds
 * concurrent flushes into shared journal commits, and the flushing runs on libuv's threads while the
 * caller reads, hashes and writes the next files (measured: a 1,000-file checkpoint or restore takes
 * about half the time of flushing each file before the next).
 */
export function flushBehind(fs: FileOps): FlushBehind {
  const inflight = new Set<Promise<void>>();
  let failure: { error: unknown } | null = null;
  const flushOne = async (path: string, then?: () => void): Promise<void> => {
    try {
      const fd = fs.openSync(path, O_RDONLY | O_NOFOLLOW);
      try {
        await fsyncAsync(fs, fd);
      } finally {
        closeQuietly(fs, fd);
      }
      if (failure === null) then?.();
    } catch (error) {
      // Name the path, as node does for its own path-based calls (fsync reports none).
      if (typeof error === "object" && error !== null && !("path" in error)) Object.assign(error, { path });
      failure ??= { error };
    }
  };
  const settle = async (): Promise<void> => {
    while (inflight.size > 0) await Promise.all(inflight);
  };
  return {
    async add(path, then) {
      while (failure === null && inflight.size >= FLUSH_CONCURRENCY) await Promise.race(inflight);
      if (failure !== null) throw failure.error;
      const running: Promise<void> = flushOne(path, then).finally(() => inflight.delete(running));
      inflight.add(running);
    },
    async drain() {
      await settle();
      if (failure !== null) throw failure.error;
    },
    settle,
  };
}

/** How many descriptors `closeBehind` keeps open at most; beyond it, closes run in place. */
const CLOSE_BEHIND_LIMIT = 64;

export interface CloseBehind {
  /** Takes ownership of `fd` and closes it on libuv's threads (in place when the limit is reached). */
  add(fd: number): void;
  /** Waits for every close started; never throws (a failed close of a read-only descriptor loses nothing). */
  settle(): Promise<void>;
}

/**
 * Closes descriptors behind the caller. A restore holds each file it replaces open across the rename, so
 * the rename only moves a name; the kernel frees the replaced file's blocks when the last reference goes,
 * which then happens here, on libuv's threads, instead of inside the rename on the caller's (measured: a
 * restore of 1,000 files / 98 MiB 13-22% faster in interleaved runs; the renames over existing files had
 * taken ~580 µs each).
 */
export function closeBehind(fs: FileOps): CloseBehind {
  const pending = new Set<Promise<void>>();
  return {
    add(fd) {
      if (pending.size >= CLOSE_BEHIND_LIMIT) {
        closeQuietly(fs, fd);
        return;
      }
      const closing = new Promise<void>((resolve) => {
        try {
          fs.close(fd, () => resolve());
        } catch {
          closeQuietly(fs, fd);
          resolve();
        }
      }).then(() => {
        pending.delete(closing);
      });
      pending.add(closing);
    },
    async settle() {
      while (pending.size > 0) await Promise.all(pending);
    },
  };
}

/** Flushes every path (see `flushBehind`) and waits for all of them. */
export async function fsyncPaths(fs: FileOps, paths: readonly string[]): Promise<void> {
  const flusher = flushBehind(fs);
  try {
    for (const path of paths) await flusher.add(path);
    await flusher.drain();
  } finally {
    await flusher.settle();
  }
}

/**
 * A buffer one reader reuses from file to file (`walkTree` keeps one per walk): what `readWhole` returns
 * into it is valid only until that reader's next read. Reading every file of a workspace into a fresh
 * buffer had cost a 1,000-file restore 9-15% (98 MiB of new buffers per scan; a reused one also stays in
 * the CPU's caches for the hash that follows; reading retained blobs into big slabs instead gained nothing).
 */
export interface ReadScratch {
  buffer: Buffer;
}

/**
 * Reads exactly what `fd` (a regular file) holds. The buffer is sized from fstat plus one byte, so the
 * common case is a single read: one that returns exactly the size fstat gave, short of the extra byte, has
 * met the end of the file, with no second read that returns 0. What is returned covers only bytes read
 * (a file that grew meanwhile is read on in chunks), so no uninitialised memory is ever handed out. With
 * `scratch`, the bytes are read into that buffer (grown when too small) and the result is a view of it
 * that the next read through the same scratch overwrites; without, a file that shrank is copied out.
 */
export function readWhole(
  fs: FileOps,
  fd: number,
  expectedSize: number,
  maxBytes: number,
  scratch?: ReadScratch,
): Buffer {
  const expected = Math.min(expectedSize, maxBytes);
  const cap = expected + 1;
  let first: Buffer;
  if (scratch) {
    if (scratch.buffer.length < cap) scratch.buffer = Buffer.allocUnsafe(Math.max(cap, 256 * 1024));
    first = scratch.buffer.subarray(0, cap);
  } else {
    first = Buffer.allocUnsafe(cap);
  }
  let length = 0;
  while (length < cap) {
    const read = fs.readSync(fd, first, length, cap - length, length);
    if (read === 0) {
      return length === expected || scratch
        ? first.subarray(0, length)
        : Buffer.from(first.subarray(0, length));
    }
    length += read;
    // Short of the extra byte exactly at the size fstat gave: the end of the file. Any other short read
    // is read on from, as a file system that returns short reads before the end needs.
    if (length === expectedSize && length < cap) return first.subarray(0, length);
  }
  if (length > maxBytes) throw new RangeError(`larger than ${maxBytes} bytes`);
  // The file grew after its stat: read on to its end.
  const chunks = [first];
  for (;;) {
    // Zeroed: a short read leaves the tail untouched, and only the bytes read are ever copied out.
    const chunk = Buffer.alloc(64 * 1024);
    const read = fs.readSync(fd, chunk, 0, chunk.length, length);
    if (read === 0) break;
    length += read;
    if (length > maxBytes) throw new RangeError(`larger than ${maxBytes} bytes`);
    chunks.push(chunk.subarray(0, read));
  }
  return Buffer.concat(chunks, length);
}

function writeAll(fs: FileOps, fd: number, bytes: Uint8Array): void {
  let offset = 0;
  while (offset < bytes.length) {
    const written = fs.writeSync(fd, bytes, offset, bytes.length - offset, offset);
    if (!(written > 0)) throw Object.assign(new Error("write made no progress"), { code: "EIO" });
    offset += written;
  }
}

/** Writes a fully flushed private temp file beside the target; returns its path. Removes it on failure. */
export function writeTemp(
  fs: FileOps,
  dir: string,
  target: string,
  bytes: Uint8Array,
  mode = 0o600,
  sync = true,
): string {
  const temp = join(dir, tempNameFor(target));
  // O_EXCL | O_NOFOLLOW: never write through a file or symlink someone else planted at this name.
  const fd = fs.openSync(temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600);
  try {
    try {
      writeAll(fs, fd, bytes);
      // Through the descriptor: a temp beside its target (in the workspace) could be swapped by then.
      if (mode !== 0o600) fs.fchmodSync(fd, mode & MODE_BITS);
      // Without this flush a power loss after the rename can leave the new name on an empty inode.
      if (sync) fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
  } catch (error) {
    removeQuietly(fs, temp);
    throw error;
  }
  return temp;
}

export function removeQuietly(fs: FileOps, path: string): void {
  try {
    fs.unlinkSync(path);
  } catch {
    // Best effort: a leftover temp is swept by the next writer under the lock, never promoted.
  }
}

/**
 * Create-only publish: temp → fsync → link(2) to the target (fails with EEXIST if the name exists, so an
 * event file can never be overwritten) → unlink temp → fsync dir. An event's name holds its phase, so this
 * does not stop a writer that skipped the state lock from publishing another phase at the same seq; the
 * next replay finds that fork (two events with one seq: CORRUPT). The lock is what prevents it.
 */
export function publishNewFile(fs: FileOps, dir: string, name: string, bytes: Uint8Array): void {
  let temp: string;
  try {
    temp = writeTemp(fs, dir, name, bytes);
  } catch (error) {
    throw new PublishFailure("before", false, error);
  }
  try {
    fs.linkSync(temp, join(dir, name));
  } catch (error) {
    removeQuietly(fs, temp);
    throw new PublishFailure("before", errnoOf(error) === "EEXIST", error);
  }
  // Until this unlink the target has two links; a crash here leaves a temp that the next load counts as
  // the target's second name, and removes once the chain verified.
  removeQuietly(fs, temp);
  try {
    fsyncDirectory(fs, dir);
  } catch (error) {
    throw new PublishFailure("after", true, error);
  }
}

/** Replace-publish: temp → fsync → rename over the target → fsync dir. */
export function replaceFile(fs: FileOps, dir: string, name: string, bytes: Uint8Array, mode = 0o600): void {
  let temp: string;
  try {
    temp = writeTemp(fs, dir, name, bytes, mode);
  } catch (error) {
    throw new PublishFailure("before", false, error);
  }
  try {
    fs.renameSync(temp, join(dir, name));
  } catch (error) {
    removeQuietly(fs, temp);
    throw new PublishFailure("before", false, error);
  }
  try {
    fsyncDirectory(fs, dir);
  } catch (error) {
    throw new PublishFailure("after", true, error);
  }
}

export interface SafeReadOptions {
  maxBytes: number;
  /** Named in messages ("saga event", "HEAD", "checkpoint manifest"). */
  what: string;
  /**
   * Links the file may have beyond its own name, by inode (default none): a writer killed between link(2)
   * and unlinking its temp leaves the temp as a second name, which the saga store removes only after the
   * chain verified.
   */
  extraLinks?: (stat: { dev: number | bigint; ino: number | bigint }) => number;
  /** Accept any number of hard links (a reader that only looks, and must see a hard-linked file too). */
  anyLinks?: boolean;
}

function corrupt(path: string, what: string, why: string, cause?: unknown): SagaError {
  const error = new SagaError({
    code: "CORRUPT",
    cause,
    message: `The ${what} ${path} ${why}. It was left exactly as it is; inspect it before any recovery.`,
  });
  refusals.set(error, why);
  return error;
}

/** What `readRegularFile` found wrong with a file it refused ("is not a regular file", …), by error. */
const refusals = new WeakMap<SagaError, string>();

/** The errno behind `error`: its own code, or for a SagaError (whose code is its own), its cause's. */
export function errnoBehind(error: unknown): string | undefined {
  return SagaError.isInstance(error) ? errnoOf(error.cause) : errnoOf(error);
}

/**
 * A file or directory this process could not open, inspect, read or list for a reason of the process
 * (`isProcessLevelErrno`), not of the data: `LOCK_FAILED` (503; "could not be read just now", which is what a
 * listing calls busy), never `CORRUPT`. `subject` names it ("The saga event … /path").
 */
export function transientFailure(
  subject: string,
  doing: string,
  errno: string,
  cause: unknown,
  operationId?: string,
): SagaError {
  return new SagaError({
    code: "LOCK_FAILED",
    cause,
    ...(operationId === undefined ? {} : { operationId }),
    message: `${subject} could not be ${doing} just now (${errno}: this process ran out of file descriptors or memory, or the call was interrupted). That says nothing about its contents, and it was left as it is; retry (if ${errno} persists, raise the process's limits or find what holds them).`,
  });
}

/** realpath failures that say the path itself is wrong, or not this user's to use: the caller's argument. */
const PATH_ERRNOS: ReadonlySet<string> = new Set(["ENOENT", "ENOTDIR", "ELOOP", "EACCES", "ENAMETOOLONG"]);

/**
 * Why `path` (a workspace, a data directory) could not be resolved: `INVALID_ARGUMENT` when the path is wrong
 * (missing, not a directory, a symlink loop, too long, no permission); any other failure (EIO, EMFILE, …) is
 * the disk or this process failing, not the argument, and a retry may cure it: `LOCK_FAILED` (503), with the
 * errno.
 */
export function unresolvedPath(what: string, path: string, error: unknown): SagaError {
  const errno = errnoOf(error);
  if (errno !== undefined && PATH_ERRNOS.has(errno)) {
    return new SagaError({
      code: "INVALID_ARGUMENT",
      cause: error,
      message: `The ${what} ${path} cannot be resolved (${errno}). ${
        errno === "EACCES" ? "Check the permissions of the path and its parents." : "Check that it exists."
      }`,
    });
  }
  const transient = isProcessLevelErrno(errno);
  return new SagaError({
    code: "LOCK_FAILED",
    cause: error,
    message: `The ${what} ${path} could not be resolved just now (${errno ?? (error as Error)?.name ?? "error"}): ${
      transient
        ? "this process ran out of file descriptors or memory, or the call was interrupted"
        : "the file system failed to answer"
    }, which says nothing about the path. Nothing was touched; retry${transient ? "" : ", and check the disk if it persists"}.`,
  });
}

/** Errors of `readRegularFile` that say the file could not be read (an errno), not what it holds: its path. */
const readFailures = new WeakMap<SagaError, string>();

/**
 * Why `readRegularFile` refused a file it could open ("is a symbolic link", "is not a regular file", "has
 * more than one hard link", "is larger than … bytes"); undefined for any other error, read failures included.
 */
export function refusalOf(error: unknown): string | undefined {
  return SagaError.isInstance(error) && !readFailures.has(error) ? refusals.get(error) : undefined;
}

/**
 * Whether `error` is `readRegularFile` failing to open, inspect or read the file (any errno: EIO, EMFILE, …),
 * as opposed to refusing what it found there (a symlink, a FIFO, a second hard link, an oversized file). A
 * listing may leave out a file it refused; one it could not read must fail it, never shrink it.
 */
export function isReadFailure(error: unknown): error is SagaError {
  return SagaError.isInstance(error) && readFailures.has(error);
}

/** The path `readRegularFile` could not read, for an `isReadFailure` error. */
export function readFailurePath(error: unknown): string | undefined {
  return SagaError.isInstance(error) ? readFailures.get(error) : undefined;
}

function readFailure(path: string, what: string, doing: string, error: unknown): SagaError {
  const errno = errnoOf(error);
  const failure = isProcessLevelErrno(errno)
    ? transientFailure(`The ${what} ${path}`, doing, errno, error)
    : corrupt(path, what, `could not be ${doing} (${errno ?? (error as Error)?.name ?? "error"})`, error);
  readFailures.set(failure, path);
  return failure;
}

/**
 * Reads a file only if it is a regular, single-link file no larger than `maxBytes`, without following a
 * symlink at the last component (O_NOFOLLOW). The checks are made on the opened inode itself (fstat), so
 * nothing can be swapped in between a check and the read; O_NONBLOCK keeps the open of a FIFO planted at
 * the name from blocking until its check refuses it. Returns null when the file does not exist. A failure
 * to open, inspect or read it names its errno (`isReadFailure`): `LOCK_FAILED` ("retry") for one of the
 * process (`isProcessLevelErrno`), else `CORRUPT`.
 */
export function readRegularFile(fs: FileOps, path: string, options: SafeReadOptions): Buffer | null {
  let fd: number;
  try {
    fd = fs.openSync(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  } catch (error) {
    if (errnoOf(error) === "ENOENT") return null;
    if (errnoOf(error) === "ELOOP") throw corrupt(path, options.what, "is a symbolic link", error);
    throw readFailure(path, options.what, "opened", error);
  }
  try {
    let stat: ReturnType<FileOps["fstatSync"]>;
    try {
      stat = fs.fstatSync(fd);
    } catch (error) {
      throw readFailure(path, options.what, "inspected", error);
    }
    if (!stat.isFile()) throw corrupt(path, options.what, "is not a regular file");
    if (!options.anyLinks && stat.nlink !== 1 + (options.extraLinks?.(stat) ?? 0))
      throw corrupt(path, options.what, "has more than one hard link");
    if (stat.size > options.maxBytes)
      throw corrupt(path, options.what, `is larger than ${options.maxBytes} bytes`);
    try {
      return readWhole(fs, fd, stat.size, options.maxBytes);
    } catch (error) {
      if (error instanceof RangeError)
        throw corrupt(path, options.what, `is larger than ${options.maxBytes} bytes`, error);
      throw error;
    }
  } catch (error) {
    if (error instanceof SagaError) throw error;
    throw readFailure(path, options.what, "read", error);
  } finally {
    closeQuietly(fs, fd);
  }
}

export function closeQuietly(fs: FileOps, fd: number): void {
  try {
    fs.closeSync(fd);
  } catch {
    // Nothing was written through this descriptor; a failed close loses nothing.
  }
}

/** lstat that answers null for a missing path. */
export function lstatOrNull(fs: FileOps, path: string): ReturnType<FileOps["lstatSync"]> | null {
  try {
    return fs.lstatSync(path);
  } catch (error) {
    if (errnoOf(error) === "ENOENT") return null;
    throw error;
  }
}
