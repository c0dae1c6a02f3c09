import { randomBytes } from "node:crypto";
import {
  closeSync,
  constants,
  fstatSync,
  fsyncSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readlinkSync,
  readSync,
  realpathSync,
  renameSync,
  type Stats,
  unlinkSync,
  writeSync,
} from "node:fs";
import { join, sep } from "node:path";
import { MAX_PATH_BYTES } from "@drydock/facts";
import { fsyncDirectory, nodeFileOps } from "@drydock/file-lock";
// A temp this old is abandoned even if its pid looks alive (a write holds the workspace lock for seconds):
// the same age json-journal's sweep uses.
import { STALE_TEMP_MS } from "@drydock/json-journal";

const { O_RDONLY, O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW, O_NONBLOCK } = constants;

/** Why a workspace path was refused; the server answers 400 with this text. */
export class WorkspacePathError extends Error {
  override readonly name = "WorkspacePathError";
  readonly status: number = 400;
  readonly code: string = "invalid_path";
}

/** The path names a directory where a file was meant (409: remove or rename the directory first). */
export class WorkspacePathIsDirectory extends WorkspacePathError {
  override readonly status = 409;
  override readonly code = "path_is_directory";
}

/** A directory on the path changed while a write was under way (409: retry). */
export class WorkspacePathChanged extends WorkspacePathError {
  override readonly status = 409;
  override readonly code = "path_changed";
}

/** The path (or one of its names) is longer than the file system allows. */
export class WorkspacePathTooLong extends WorkspacePathError {
  override readonly code = "path_too_long";
}

export class WorkspaceFileNotFound extends Error {
  override readonly name = "WorkspaceFileNotFound";
  readonly status = 404;
  readonly code = "file_not_found";
}

export class WorkspaceFileTooLarge extends Error {
  override readonly name = "WorkspaceFileTooLarge";
  readonly status = 413;
  readonly code = "file_too_large";
}

export class WorkspaceStorageFull extends Error {
  override readonly name = "WorkspaceStorageFull";
  readonly status = 507;
  readonly code = "insufficient_storage";
}

/** Both limits are in UTF-8 bytes: the file system counts bytes, not characters (MAX_PATH_BYTES: facts). */
export { MAX_PATH_BYTES };
/** A name plus the temporary suffix (`.<name>.<pid>.<16 hex>.tmp`, at most 33 more bytes) fits NAME_MAX (255). */
export const MAX_SEGMENT_BYTES = 200;

/**
 * The temporary name a write uses beside its target: `.<name>.<pid>.<16 hex>.tmp`, the pattern
 * json-journal and restore-saga use too (so leftovers of earlier versions are recognised). A client may
 * never name a file like this (see checkRelativePath), so a temp left by a crash is never served, and
 * `sweepStaleWorkspaceTemps` can remove it without touching a user's file.
 */
const TEMP_SUFFIX = ".tmp";
/** Unicode's bidirectional embeddings, overrides, isolates and marks (U+200E-F, U+202A-E, U+2066-9). */
export const BIDI_CONTROLS = /[\u200e\u200f\u202a-\u202e\u2066-\u2069]/;
const TEMP_NAME = /^\..+\.([1-9][0-9]{0,9})\.[0-9a-f]{16}\.tmp$/;

export function isWorkspaceTempName(name: string): boolean {
  return TEMP_NAME.test(name);
}

function tempNameFor(name: string): string {
  return `.${name}.${process.pid}.${randomBytes(8).toString("hex")}${TEMP_SUFFIX}`;
}

/**
 * Turns a client-supplied relative path into a checked path inside `root`. Refused: empty, absolute,
 * backslashes (a Windows separator smuggled past a POSIX check), NUL and control characters, `.`/`..`
 * segments, empty segments, names of the server's temporary files, and over-long paths (counted in
 * bytes). Symlinks are checked separately, on disk, because a lexical check cannot see them.
 */
export function checkRelativePath(path: string): string[] {
  if (path.length === 0) throw new WorkspacePathError("The file path is empty.");
  if (Buffer.byteLength(path, "utf8") > MAX_PATH_BYTES)
    throw new WorkspacePathTooLong(`The file path is longer than ${MAX_PATH_BYTES} bytes (UTF-8).`);
  if (path.startsWith("/"))
    throw new WorkspacePathError("The file path must be relative to the workspace, not absolute.");
  if (path.includes("\\")) throw new WorkspacePathError("The file path must use forward slashes only.");
  if (/[\u0000-\u001f\u007f-\u009f]/.test(path))
    throw new WorkspacePathError("The file path contains a control character.");
  // Bidirectional overrides and isolates make a name display as another (`txt.exe` shown as `exe.txt`).
  if (BIDI_CONTROLS.test(path))
    throw new WorkspacePathError("The file path contains a bidirectional text control character.");
  const segments = path.split("/");
  for (const s of segments) {
    if (s === "" || s === "." || s === "..") {
      throw new WorkspacePathError("The file path may not contain empty, '.' or '..' segments.");
    }
    if (Buffer.byteLength(s, "utf8") > MAX_SEGMENT_BYTES)
      throw new WorkspacePathTooLong(
        `A name in the file path is longer than ${MAX_SEGMENT_BYTES} bytes (UTF-8); shorten it.`,
      );
    if (isWorkspaceTempName(s))
      throw new WorkspacePathError(
        "The file path names one of the server's temporary files (.<name>.<pid>.<hex>.tmp); choose another name.",
      );
  }
  return segments;
}

function errnoOf(error: unknown): string | undefined {
  const code = (error as NodeJS.ErrnoException | null)?.code;
  return typeof code === "string" ? code : undefined;
}

/** Turns a file system error about a client's path into a typed refusal, without any server path. */
function clientError(error: unknown, path: string): unknown {
  switch (errnoOf(error)) {
    case "ENAMETOOLONG":
      return new WorkspacePathTooLong(`The file path '${path}' is too long for the server's file system.`);
    case "EISDIR":
      return new WorkspacePathIsDirectory(`'${path}' is a directory in this workspace, not a file.`);
    case "ENOTDIR":
      return new WorkspacePathError(`A parent of '${path}' is not a directory.`);
    case "ENOENT":
      return new WorkspacePathChanged(
        `A directory on the path '${path}' was removed or moved while the file was being written; nothing was written. Retry.`,
      );
    case "ELOOP":
      return new WorkspacePathError("The file path goes through a symbolic link; links are not followed.");
    case "ENOSPC":
    case "EDQUOT":
      return new WorkspaceStorageFull("The server has no room left for this file; nothing was written.");
    default:
      return error;
  }
}

function inside(realRoot: string, real: string): boolean {
  return real === realRoot || real.startsWith(realRoot.endsWith(sep) ? realRoot : realRoot + sep);
}

function sameFile(a: Stats, b: Stats): boolean {
  return a.ino === b.ino && a.dev === b.dev;
}

/** Test seams: run between the steps of a write, where a concurrent swap would have to happen. */
export interface WorkspaceWriteHooks {
  /** After the parents were checked, before the temp is created. */
  beforeTempCreated?(): void;
  /** After the temp was created (opened O_EXCL|O_NOFOLLOW), before the parent is verified. */
  afterTempCreated?(): void;
  /** After the data was written and flushed, before the parent is verified again and the rename. */
  beforeRename?(): void;
}

/** Test seam of a read. */
export interface ReadHooks {
  beforeOpen?(): void;
}

export interface WorkspaceFilesOptions {
  /** Largest file a read returns (413 beyond it). */
  maxFileBytes?: number;
  hooks?: WorkspaceWriteHooks;
  /** Test seam: `beforeOpen` runs after a read's checks, before the file is opened. */
  readHooks?: ReadHooks;
}

export interface WorkspaceFiles {
  read(path: string): Buffer;
  write(path: string, data: Buffer): { bytes: number };
  remove(path: string): void;
}

const PARENT_ESCAPED =
  "A parent of the file path changed into a link or moved while writing; nothing was written.";

export function workspaceFiles(root: string, options: WorkspaceFilesOptions = {}): WorkspaceFiles {
  const maxFileBytes = options.maxFileBytes ?? Number.MAX_SAFE_INTEGER;
  const hooks = options.hooks ?? {};
  const readHooks = options.readHooks ?? {};

  return {
    read: (path) => readWorkspaceFile(root, path, maxFileBytes, readHooks),
    write: (path, data) => writeWorkspaceFile(root, path, data, hooks),
    remove: (path) => removeWorkspaceFile(root, path),
  };
}

/** The workspace's real path, or a 404 when the workspace does not exist (reads never create it). */
function realRootOr404(root: string, path: string): string {
  try {
    const real = realpathSync(root);
    if (!lstatSync(real).isDirectory())
      throw Object.assign(new Error("not a directory"), { code: "ENOTDIR" });
    return real;
  } catch (error) {
    const code = errnoOf(error);
    if (code === "ENOENT" || code === "ENOTDIR")
      throw new WorkspaceFileNotFound(`No file at '${path}' in this workspace.`);
    throw error;
  }
}

/**
 * Every existing directory between the workspace root and the target must be a real directory: a
 * symlink anywhere could point outside the workspace, so it is refused rather than followed. `create`
 * makes missing ones (0700); otherwise a missing one is a 404. Returns the parent's path.
 */
function walkParents(realRoot: string, path: string, segments: string[], create: boolean): string {
  let current = realRoot;
  for (const segment of segments.slice(0, -1)) {
    current = join(current, segment);
    let st: Stats;
    try {
      st = lstatSync(current);
    } catch (error) {
      if (errnoOf(error) !== "ENOENT") throw clientError(error, path);
      if (!create) throw new WorkspaceFileNotFound(`No file at '${path}' in this workspace.`);
      try {
        mkdirSync(current, { mode: 0o700 });
      } catch (mkdirError) {
        if (errnoOf(mkdirError) !== "EEXIST") throw clientError(mkdirError, path);
      }
      st = lstatSync(current);
    }
    if (st.isSymbolicLink())
      throw new WorkspacePathError("The file path goes through a symbolic link; links are not followed.");
    if (!st.isDirectory()) throw new WorkspacePathError(`A parent of '${path}' is not a directory.`);
  }
  return current;
}

/** The parent's real path, which must still be inside the workspace; else a 400. */
function verifiedParent(realRoot: string, parent: string): string {
  let real: string;
  try {
    real = realpathSync(parent);
  } catch {
    throw new WorkspacePathError(PARENT_ESCAPED);
  }
  if (!inside(realRoot, real)) throw new WorkspacePathError(PARENT_ESCAPED);
  return real;
}

/** `WorkspaceFiles.read`: the file's bytes, at most `maxFileBytes` (see `workspaceFiles`). */
function readWorkspaceFile(root: string, path: string, maxFileBytes: number, readHooks: ReadHooks): Buffer {
  const segments = checkRelativePath(path);
  const realRoot = realRootOr404(root, path);
  const parent = walkParents(realRoot, path, segments, false);
  const name = segments[segments.length - 1] as string;
  readHooks.beforeOpen?.();
  let fd: number;
  try {
    // O_NOFOLLOW: a symlink swapped in at the last name fails (ELOOP) instead of being followed;
    // O_NONBLOCK: a FIFO swapped in cannot block the server (it is then refused by the fstat below).
    fd = openSync(join(parent, name), O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  } catch (error) {
    const code = errnoOf(error);
    if (code === "ENOENT" || code === "ENOTDIR")
      throw new WorkspaceFileNotFound(`No file at '${path}' in this workspace.`);
    throw clientError(error, path);
  }
  try {
    const st = fstatSync(fd);
    if (st.isDirectory()) throw new WorkspaceFileNotFound(`No file at '${path}' in this workspace.`);
    if (!st.isFile())
      throw new WorkspacePathError("The file path names something that is not a regular file.");
    // The parent may have been swapped for a link after the walk: the file opened must be the one at
    // the parent's real path, inside the workspace.
    const realParent = verifiedParent(realRoot, parent);
    let again: Stats;
    try {
      again = lstatSync(join(realParent, name));
    } catch {
      throw new WorkspacePathError(PARENT_ESCAPED);
    }
    if (!sameFile(st, again)) throw new WorkspacePathError(PARENT_ESCAPED);
    if (st.size > maxFileBytes)
      throw new WorkspaceFileTooLarge(`'${path}' is larger than ${maxFileBytes} bytes; it cannot be served.`);
    // Read at most one byte past the limit: a file growing under us is refused, never read unbounded.
    const buffer = Buffer.allocUnsafe(Math.min(maxFileBytes + 1, Math.max(st.size, 0) + 1));
    let length = 0;
    for (;;) {
      if (length === buffer.length) break;
      const n = readSync(fd, buffer, length, buffer.length - length, null);
      if (n === 0) break;
      length += n;
    }
    if (length > maxFileBytes)
      throw new WorkspaceFileTooLarge(`'${path}' is larger than ${maxFileBytes} bytes; it cannot be served.`);
    if (length === buffer.length) {
      // Grew while being read (but still under the limit): read the rest up to the limit.
      const chunks = [buffer.subarray(0, length)];
      let total = length;
      const more = Buffer.allocUnsafe(64 * 1024);
      for (;;) {
        const n = readSync(fd, more, 0, more.length, null);
        if (n === 0) break;
        total += n;
        if (total > maxFileBytes)
          throw new WorkspaceFileTooLarge(
            `'${path}' is larger than ${maxFileBytes} bytes; it cannot be served.`,
          );
        chunks.push(Buffer.from(more.subarray(0, n)));
      }
      return Buffer.concat(chunks);
    }
    return buffer.subarray(0, length);
  } finally {
    closeSync(fd);
  }
}

/** `WorkspaceFiles.write`: a flushed temp renamed over the target, inside the workspace (see `workspaceFiles`). */
function writeWorkspaceFile(
  root: string,
  path: string,
  data: Buffer,
  hooks: WorkspaceWriteHooks,
): { bytes: number } {
  const segments = checkRelativePath(path);
  let realRoot: string;
  try {
    realRoot = realpathSync(root);
  } catch {
    throw new WorkspacePathError("This bot's workspace does not exist; nothing was written.");
  }
  const name = segments[segments.length - 1] as string;
  let parent: string;
  let realParent: string;
  try {
    parent = walkParents(realRoot, path, segments, true);
    realParent = verifiedParent(realRoot, parent);
    const existing = lstatSync(join(realParent, name), { throwIfNoEntry: false });
    if (existing?.isDirectory())
      throw new WorkspacePathIsDirectory(`'${path}' is a directory in this workspace, not a file.`);
    if (existing?.isSymbolicLink())
      throw new WorkspacePathError("The file path names a symbolic link; links are not replaced.");
    if (existing && !existing.isFile())
      throw new WorkspacePathError("The file path names something that is not a regular file.");
  } catch (error) {
    throw clientError(error, path);
  }
  const temp = tempNameFor(name);
  hooks.beforeTempCreated?.();
  let fd: number;
  try {
    // O_EXCL|O_NOFOLLOW: never reuses or follows whatever sits at the temp's name.
    fd = openSync(join(realParent, temp), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600);
  } catch (error) {
    throw clientError(error, path);
  }
  // The descriptor stays open until the end: if anything fails, it still says where our temp is.
  const created = fstatSync(fd);
  let renamed = false;
  /**
   * The parent's real path, now, if it is inside the workspace and our temp is in it; else a 400.
   * Run after the temp is created (it may have landed anywhere, had the parent been swapped for a
   * link before the open) and again just before the rename.
   */
  const verifyTemp = (): string => {
    const now = verifiedParent(realRoot, parent);
    const st = lstatSync(join(now, temp), { throwIfNoEntry: false });
    if (!st || !sameFile(st, created)) throw new WorkspacePathError(PARENT_ESCAPED);
    return now;
  };
  try {
    hooks.afterTempCreated?.();
    verifyTemp();
    let offset = 0;
    while (offset < data.length) offset += writeSync(fd, data, offset, data.length - offset);
    fsyncSync(fd);
    hooks.beforeRename?.();
    const dir = verifyTemp();
    renameSync(join(dir, temp), join(dir, name));
    renamed = true;
    fsyncDirectory(nodeFileOps, dir);
  } catch (error) {
    if (!renamed) removeTemp(fd, [join(realParent, temp), join(parent, temp)], created);
    throw clientError(error, path);
  } finally {
    closeSync(fd);
  }
  return { bytes: data.length };
}

/** `WorkspaceFiles.remove`: one unlink of a regular file inside the workspace. */
function removeWorkspaceFile(root: string, path: string): void {
  const segments = checkRelativePath(path);
  const realRoot = realRootOr404(root, path);
  const parent = walkParents(realRoot, path, segments, false);
  const realParent = verifiedParent(realRoot, parent);
  const target = join(realParent, segments[segments.length - 1] as string);
  let st: Stats;
  try {
    st = lstatSync(target);
  } catch (error) {
    if (errnoOf(error) === "ENOENT")
      throw new WorkspaceFileNotFound(`No file at '${path}' in this workspace.`);
    throw clientError(error, path);
  }
  if (!st.isFile()) throw new WorkspacePathError("Only files can be deleted through this route.");
  verifiedParent(realRoot, parent);
  try {
    unlinkSync(target);
  } catch (error) {
    if (errnoOf(error) === "ENOENT")
      throw new WorkspaceFileNotFound(`No file at '${path}' in this workspace.`);
    throw clientError(error, path);
  }
}

/**
 * Removes the temp we created, wherever it now is, and only if it is still the file we created: at the
 * names we know, and where the kernel says the open descriptor is (Linux `/proc/self/fd`).
 */
function removeTemp(fd: number, known: string[], created: Stats): void {
  const candidates = [...known];
  try {
    candidates.unshift(readlinkSync(`/proc/self/fd/${fd}`));
  } catch {
    // No /proc (not Linux): the known names are all there is to try.
  }
  for (const candidate of candidates) {
    try {
      const st = lstatSync(candidate);
      if (sameFile(st, created)) {
        unlinkSync(candidate);
        return;
      }
    } catch {
      // Not there.
    }
  }
}

/** Whether a pid names a live process here: only ESRCH is proof of death (EPERM is someone else's). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return errnoOf(error) !== "ESRCH";
  }
}

/**
 * Removes temporaries of interrupted writes from a workspace: those whose writer process is dead, and any
 * older than STALE_TEMP_MS. Call it holding the workspace lock (no write of this server is then in
 * flight in the workspace). Walks the tree without following links; best effort, never throws. With
 * `dirs`, only those directories (relative to the root) are swept, not the whole tree.
 */
export function sweepStaleWorkspaceTemps(
  root: string,
  options: { now?: number; dirs?: readonly string[] } = {},
): { removed: string[] } {
  const now = options.now ?? Date.now();
  const removed: string[] = [];
  const sweepDir = (dir: string, rel: string, recurse: boolean): void => {
    let entries: import("node:fs").Dirent[];
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const entry of entries) {
      const relPath = rel === "" ? entry.name : `${rel}/${entry.name}`;
      if (entry.isDirectory()) {
        if (recurse) sweepDir(join(dir, entry.name), relPath, true);
        continue;
      }
      const match = TEMP_NAME.exec(entry.name);
      if (!match || !entry.isFile()) continue;
      const pid = Number(match[1]);
      const full = join(dir, entry.name);
      try {
        const stale = pid !== process.pid ? !processAlive(pid) : false;
        if (stale || now - lstatSync(full).mtimeMs > STALE_TEMP_MS) {
          unlinkSync(full);
          removed.push(relPath);
        }
      } catch {
        // Gone already, or not ours to remove: leave it.
      }
    }
  };
  if (options.dirs === undefined) sweepDir(root, "", true);
  else {
    for (const rel of options.dirs) {
      const segments = rel === "" ? [] : rel.split("/");
      let dir = root;
      let ok = true;
      for (const s of segments) {
        dir = join(dir, s);
        const st = lstatSync(dir, { throwIfNoEntry: false });
        if (!st?.isDirectory()) {
          ok = false;
          break;
        }
      }
      if (ok) sweepDir(dir, rel, false);
    }
  }
  return { removed };
}
