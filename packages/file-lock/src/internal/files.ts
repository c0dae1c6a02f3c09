import { createHash, randomUUID } from "node:crypto";
import { constants } from "node:fs";
import { errnoOf, LockError } from "../errors.js";
import type { FileOps } from "../fs.js";
import type { LockContext } from "../options.js";
import {
  LEGACY_REAPER_RECORD,
  type LockOwner,
  LockOwnerSchema,
  MAX_PID,
  type ReaperRecord,
  ReaperRecordSchema,
} from "../schema.js";

/** Owner files are a few hundred bytes; anything past this is not ours and is refused unread. */
export const MAX_OWNER_BYTES = 64 * 1024;

/** Identity of the inode a read saw: what the boot-time rule and a garbage lock's election key rest on. */
export interface FileId {
  dev: number;
  ino: number;
  ctimeMs: number;
  size: number;
  /** Names of the inode: a candidate still linked as the lock (or a record) has 2. */
  nlink: number;
}

export type BadFile = {
  kind: "bad";
  code: "LOCK_INVALID" | "LOCK_UNREADABLE";
  file: FileId | null;
  cause: unknown;
  /** Why, for messages: the errno, or what is wrong with the bytes. */
  reason: string;
};

export type OwnerRead = { kind: "absent" } | { kind: "owner"; owner: LockOwner; file: FileId } | BadFile;

export type RecordRead =
  | { kind: "absent" }
  | { kind: "record"; record: ReaperRecord; file: FileId }
  | { kind: "legacy"; pid: number; file: FileId }
  | BadFile;

type RawRead = { kind: "absent" } | { kind: "text"; text: string; file: FileId } | BadFile;

function fileId(stat: FileId): FileId {
  return { dev: stat.dev, ino: stat.ino, ctimeMs: stat.ctimeMs, size: stat.size, nlink: stat.nlink };
}

/**
 * Errors that say something about this process, not about the file: no descriptor, no memory, a signal. The
 * file was not judged at all, so it is neither refused as unreadable nor recovered: the call fails with
 * LOCK_IO and changes nothing.
 */
const PROCESS_LEVEL: Readonly<Record<string, string>> = {
  EMFILE: "this process has run out of file descriptors",
  ENFILE: "the system has run out of file descriptors",
  ENOMEM: "the system is out of memory",
  EAGAIN: "a resource was temporarily unavailable",
  EINTR: "the call was interrupted by a signal",
};

/**
 * Whether an errno says the process or the system ran out of something, or the call was interrupted:
 * nothing about the file. Every drydock store reads such a failure as "retry", never as damaged data.
 */
export function isProcessLevelErrno(code: string | undefined): code is string {
  return code !== undefined && Object.hasOwn(PROCESS_LEVEL, code);
}

function notJudged(error: unknown, path: string): LockError | undefined {
  const code = errnoOf(error);
  const why = code === undefined ? undefined : PROCESS_LEVEL[code];
  if (why === undefined) return undefined;
  return new LockError({
    code: "LOCK_IO",
    path,
    cause: error,
    message: `The lock file ${path} could not be read by this process (${code}: ${why}). That says nothing about the file: it was not judged, and nothing was changed. Free descriptors or memory (or raise the limit), then retry.`,
  });
}

function bad(code: BadFile["code"], file: FileId | null, cause: unknown, reason?: string): BadFile {
  return { kind: "bad", code, file, cause, reason: reason ?? errnoOf(cause) ?? String(cause) };
}

/**
 * Reads one small file through a single descriptor, so its bytes and its ctime belong to the same inode even
 * if the name is replaced meanwhile. O_NOFOLLOW: a symlink planted at a lock name is refused, not followed.
 */
function readRaw(fs: FileOps, path: string): RawRead {
  let fd: number;
  try {
    fd = fs.openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch (error) {
    const code = errnoOf(error);
    if (code === "ENOENT") return { kind: "absent" };
    const processLevel = notJudged(error, path);
    if (processLevel) throw processLevel;
    let file: FileId | null = null;
    try {
      file = fileId(fs.lstatSync(path));
    } catch (statError) {
      if (errnoOf(statError) === "ENOENT") return { kind: "absent" };
    }
    if (code === "ELOOP") return bad("LOCK_INVALID", file, error, "ELOOP: it is a symbolic link");
    return bad("LOCK_UNREADABLE", file, error);
  }
  let file: FileId | null = null;
  try {
    const stat = fs.fstatSync(fd);
    file = fileId(stat);
    if (!stat.isFile())
      return bad("LOCK_INVALID", file, new Error("not a regular file"), "not a regular file");
    if (stat.size > MAX_OWNER_BYTES) {
      const why = "larger than an owner file can be";
      return bad("LOCK_INVALID", file, new Error(why), why);
    }
    // Sized from fstat (owner files are a few hundred bytes; zero-filling the 64 KiB bound on every read
    // cost more than the rest of an acquire). Grows only if the file grew after fstat, up to the bound.
    let buffer = Buffer.allocUnsafe(stat.size + 1);
    let length = 0;
    for (;;) {
      if (length === buffer.length) {
        if (length > MAX_OWNER_BYTES) {
          const why = "larger than an owner file can be";
          return bad("LOCK_INVALID", file, new Error(why), why);
        }
        const grown = Buffer.allocUnsafe(Math.min(buffer.length * 2, MAX_OWNER_BYTES + 1));
        buffer.copy(grown, 0, 0, length);
        buffer = grown;
      }
      const n = fs.readSync(fd, buffer, length, buffer.length - length, length);
      if (n === 0) break;
      length += n;
    }
    return { kind: "text", text: buffer.toString("utf8", 0, length), file };
  } catch (error) {
    const processLevel = notJudged(error, path);
    if (processLevel) throw processLevel;
    return bad("LOCK_UNREADABLE", file, error);
  } finally {
    try {
      fs.closeSync(fd);
    } catch {
      // A failed close of a read-only descriptor loses nothing: the bytes were already read.
    }
  }
}

/** What a power loss leaves of an unflushed file (nothing, or zeros) reads differently from other garbage. */
function notJson(text: string): string {
  if (text.length === 0) return "empty";
  return /^\0+$/.test(text) ? "only NUL bytes" : "not JSON";
}

function parseJson(text: string): { ok: true; value: unknown } | { ok: false; cause: unknown } {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch (cause) {
    return { ok: false, cause };
  }
}

export function readOwnerFile(fs: FileOps, path: string): OwnerRead {
  const raw = readRaw(fs, path);
  if (raw.kind !== "text") return raw;
  const json = parseJson(raw.text);
  if (!json.ok) return bad("LOCK_INVALID", raw.file, json.cause, notJson(raw.text));
  const parsed = LockOwnerSchema.safeParse(json.value);
  if (!parsed.success) return bad("LOCK_INVALID", raw.file, parsed.error, "not a lock owner record");
  return { kind: "owner", owner: parsed.data, file: raw.file };
}

/** An election record must name the very lock token it reaps; the original's `PID\n` records are honoured. */
export function readRecordFile(fs: FileOps, path: string, targetToken: string): RecordRead {
  const raw = readRaw(fs, path);
  if (raw.kind !== "text") return raw;
  if (LEGACY_REAPER_RECORD.test(raw.text)) {
    const pid = Number(raw.text.trim());
    if (Number.isSafeInteger(pid) && pid <= MAX_PID) return { kind: "legacy", pid, file: raw.file };
  }
  const json = parseJson(raw.text);
  if (!json.ok) return bad("LOCK_INVALID", raw.file, json.cause, notJson(raw.text));
  const parsed = ReaperRecordSchema.safeParse(json.value);
  if (!parsed.success) return bad("LOCK_INVALID", raw.file, parsed.error, "not an election record");
  if (parsed.data.targetToken !== targetToken) {
    const why = "the record names another lock";
    return bad("LOCK_INVALID", raw.file, new Error(why), why);
  }
  return { kind: "record", record: parsed.data, file: raw.file };
}

/** A new owner for this process, with every identity fact this machine can give. */
export function newOwner(ctx: LockContext): LockOwner {
  const createdAt = ctx.now();
  if (!Number.isFinite(createdAt) || createdAt <= 0) {
    throw new TypeError("file-lock option now() must return a positive number of milliseconds");
  }
  const owner: LockOwner = { version: 1, pid: process.pid, token: randomUUID(), createdAt };
  // Identity facts are recorded only when they fit the schema: one odd value (a 300-character host name)
  // must cost that fact, not make every reader reject our lock as invalid.
  const shape = LockOwnerSchema.shape;
  const host = ctx.identity.hostname();
  if (host && shape.host.safeParse(host).success) owner.host = host;
  const bootId = ctx.identity.bootId();
  if (bootId !== undefined && shape.bootId.safeParse(bootId).success) owner.bootId = bootId;
  const startTime = ctx.identity.processStartTime(process.pid);
  if (startTime !== undefined && shape.startTime.safeParse(startTime).success) owner.startTime = startTime;
  const pidNamespace = ctx.identity.pidNamespace?.();
  if (pidNamespace !== undefined && shape.pidNamespace.safeParse(pidNamespace).success)
    owner.pidNamespace = pidNamespace;
  // A copy: the caller mutating its object later must not make the handle disagree with the file.
  if (ctx.payload !== undefined) owner.payload = structuredClone(ctx.payload);
  return owner;
}

export function serializeOwner(owner: LockOwner | ReaperRecord): string {
  return `${JSON.stringify(owner)}\n`;
}

export function candidatePath(target: string, owner: { pid: number; token: string }): string {
  return `${target}.candidate-${owner.pid}-${owner.token}`;
}

export function electionPath(lockPath: string, targetToken: string): string {
  return `${lockPath}.reap-${targetToken}`;
}

export function successorElectionPath(lockPath: string, targetToken: string, reaperIdentity: string): string {
  const digest = createHash("sha256").update(reaperIdentity).digest("hex").slice(0, 32);
  return `${lockPath}.reap-${targetToken}-${digest}`;
}

/**
 * Election key of a lock whose bytes cannot be trusted (only ever reaped under the boot-time rule). It has a
 * uuid's shape so records keep the `<path>.reap-<token>` format, and it names the inode and its change time, so
 * every contender on this host derives the same key and a new lock at the same name gets another.
 */
export function garbageElectionKey(file: Pick<FileId, "dev" | "ino" | "ctimeMs">): string {
  const hex = createHash("sha256")
    .update(`unreadable-lock:${file.dev}:${file.ino}:${file.ctimeMs}`)
    .digest("hex");
  const variant = ((Number.parseInt(hex[16] ?? "0", 16) & 0x3) | 0x8).toString(16);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-${variant}${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}

/** Link errors meaning "no hard links on this file system", as opposed to a transient failure. */
const NO_HARD_LINKS = new Set(["EPERM", "ENOTSUP", "EOPNOTSUPP", "EXDEV", "ENOSYS"]);

/** fsync of a file or directory by name (a read-only descriptor flushes on Linux). */
export function fsyncPath(fs: FileOps, path: string): void {
  const fd = fs.openSync(path, constants.O_RDONLY);
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * Writes `content` to a new candidate file. Not fsynced unless `durable`: a lock only has to be recoverable
 * after a power loss, not to survive it, and the boot-time rule recovers a lock whose bytes never reached the
 * disk. On any failure the partial candidate is removed before the error leaves.
 */
export function writeCandidate(
  fs: FileOps,
  candidate: string,
  content: string,
  lockPath: string,
  durable = false,
): void {
  try {
    fs.writeFileSync(candidate, content, { flag: "wx", mode: 0o600 });
    if (durable) fsyncPath(fs, candidate);
  } catch (error) {
    removeQuietly(fs, candidate);
    throw new LockError({
      code: "LOCK_IO",
      path: lockPath,
      cause: error,
      message: `The lock ${lockPath} could not be prepared: writing its candidate file failed (${errnoOf(error) ?? "unknown error"}). Check that the directory is writable and the disk has space, then retry.`,
    });
  }
}

/** link(2): publishes a fully written file under `target` or fails with EEXIST; never replaces anything. */
export function linkExclusive(fs: FileOps, candidate: string, target: string, lockPath: string): boolean {
  try {
    fs.linkSync(candidate, target);
    return true;
  } catch (error) {
    const code = errnoOf(error);
    if (code === "EEXIST") return false;
    if (code !== undefined && NO_HARD_LINKS.has(code)) {
      throw new LockError({
        code: "LOCK_UNSUPPORTED_FS",
        path: lockPath,
        cause: error,
        message: `The lock ${lockPath} cannot be used: this file system refused a hard link (${code}), and locks are published atomically with link(2). Put the data directory on a local file system such as ext4, xfs or btrfs.`,
      });
    }
    throw new LockError({
      code: "LOCK_IO",
      path: lockPath,
      cause: error,
      message: `The lock ${lockPath} could not be published (${code ?? "unknown error"}). Nothing was taken; check the directory and retry.`,
    });
  }
}

/** Unlink that treats "already gone" as done. Returns false (never throws) when the unlink failed. */
export function removeQuietly(fs: FileOps, path: string): boolean {
  for (let attempt = 0; attempt < 2; attempt += 1) {
    try {
      fs.unlinkSync(path);
      return true;
    } catch (error) {
      if (errnoOf(error) === "ENOENT") return true;
    }
  }
  return false;
}
