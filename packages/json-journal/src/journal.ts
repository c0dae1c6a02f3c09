import * as nodeFs from "node:fs";
import { basename, dirname } from "node:path";
import {
  type FileOps,
  flushAncestry,
  fsyncDirectory,
  isLockError,
  isProcessLevelErrno,
  type LockHandle,
  type LockOptions,
  makeDirectories,
  nodeFileOps,
  withLock,
} from "@drydock/file-lock";
import type { z } from "zod";
import { sweepStaleTemps, writeFileAtomic } from "./atomic.js";
import { findShapeProblem } from "./duplicate-names.js";
import { errnoCode, JsonJournalError } from "./errors.js";
import { OS_REFUSED } from "./os-causes.js";
import { lockErrorDetail } from "./state-errors.js";

export interface JsonJournalOptions<T> {
  /** The document, e.g. `<dataDir>/box-create-requests.json`. Its directory is created (0700) when missing. */
  file: string;
  /** Cross-process lock guarding the document. Default: `file` with `.json` replaced by `.lock`. */
  lockFile?: string;
  /** zod schema of the whole document; its output type is the document type. */
  schema: z.ZodType<T>;
  /** The document when the file does not exist (a value, cloned per call, or a factory). */
  empty: T | (() => T);
  /** Cross-record invariants the schema cannot express: `null` when they hold, else a short detail. */
  check?: (doc: T) => string | null;
  /**
   * Builds the error thrown when the document cannot be used: `detail` is `"unreadable"`, `"invalid"`,
   * `NEWER_FORMAT` with both versions (written by a newer drydock: upgrade, do not repair),
   * `"unavailable"` (could not be saved), `TRANSIENTLY_UNREADABLE` with the errno (could not be read just
   * now for a reason of the process: EMFILE, ENFILE, ENOMEM, EAGAIN, EINTR), a lock detail (e.g. `"locked
   * by another drydock process"`), or the detail returned by `check`. `cause` is the underlying error, when
   * there is one.
   */
  stateError: (detail: string, cause?: unknown) => Error;
  /** Passed to file-lock's `withLock` (wait, retry, label, liveness, fs of the lock...). */
  lock?: LockOptions;
  /** File-system seam for the document and its directory (the lock uses `lock.fs`). */
  fs?: FileOps;
  /** fsync the new document and its directory before `update` returns (default true). */
  durable?: boolean;
  /** Permission bits of the document (default 0o600). */
  mode?: number;
  /**
   * A larger file is refused as `"unreadable"` without being read, and a larger `next` is refused before
   * anything is written (default 64 MiB).
   */
  maxBytes?: number;
  /** Wall clock in ms (default Date.now); decides when a file is old enough for the unchanged-file cache. */
  now?: () => number;
}

export interface JsonJournal<T> {
  /** The current document, validated (a private copy: mutating it changes nothing). */
  read(): Promise<T>;
  /**
   * The last published document, validated like `read` but read without the lock, so it never waits
   * for a writer. Never torn (every write is an atomic rename), but it answers "what is on disk now",
   * not "what is durable": a writer between its rename and its directory fsync is already visible, and a
   * power loss at that instant could take that version back. Use it for views (listings, dashboards);
   * decide with `read` or inside `update`.
   *
   * Nothing is copied: the answer is deeply frozen (mutating it throws) and is the very same object for
   * as long as this journal proves the document unchanged, so a caller may memoize what it derives from
   * it by identity (a `WeakMap` keyed by the document).
   */
  peek(): Promise<DeepReadonly<T>>;
  /**
   * Runs `fn` on a private copy of the current document while holding the lock. When `fn` returns
   * `next`, it is validated (schema + check, on the exact JSON that will be stored) and written
   * atomically before the lock is released; then `result` is returned. `fn` must be synchronous; if it
   * throws, nothing is written and its error propagates.
   */
  update<R>(fn: (doc: T) => { next?: T; result: R }): Promise<R>;
}

/** What `peek` hands out: the document, frozen all the way down. */
export type DeepReadonly<T> = T extends (infer U)[]
  ? readonly DeepReadonly<U>[]
  : T extends object
    ? { readonly [K in keyof T]: DeepReadonly<T[K]> }
    : T;

/** Freezes a parsed JSON value in place (objects and arrays only; JSON has no cycles). */
function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    for (const key of Object.keys(value)) deepFreeze((value as Record<string, unknown>)[key]);
    Object.freeze(value);
  }
  return value;
}

const DEFAULT_MAX_BYTES = 64 * 1024 * 1024;

/**
 * Timestamp granularity we refuse to bet on. File times come from a coarse clock (one kernel tick, up to
 * 10 ms on Linux; one or two *seconds* on ext3, HFS+, FAT, some network file systems), so an in-place
 * rewrite of the same size within one tick keeps inode, size, mtime and ctime. A stat taken while the
 * file's ctime is that recent proves nothing ("racy git"), so such a read is not cached; once the file
 * is older than this window, any later change must carry a later ctime and is seen.
 */
const RACY_WINDOW_NS = 2_000_000_000n;

interface FileIdentity {
  dev: bigint;
  ino: bigint;
  size: bigint;
  mtimeNs: bigint;
  ctimeNs: bigint;
}

function identityOf(stats: nodeFs.BigIntStats): FileIdentity {
  return { dev: stats.dev, ino: stats.ino, size: stats.size, mtimeNs: stats.mtimeNs, ctimeNs: stats.ctimeNs };
}

function sameIdentity(a: FileIdentity, b: FileIdentity): boolean {
  return (
    a.dev === b.dev &&
    a.ino === b.ino &&
    a.size === b.size &&
    a.mtimeNs === b.mtimeNs &&
    a.ctimeNs === b.ctimeNs
  );
}

/**
 * A file's identity as `peek` trusts it (device, inode, size, mtime and ctime, as one string; "absent" when
 * there is no file), or null when its ctime is within the racy window of `nowMs`: a later change could then
 * keep every one of them, so the identity proves nothing. For memo keys kept outside a journal (the file
 * backend's Storage.changeToken). Throws what `statSync` throws, other than ENOENT.
 */
export function trustedFileIdentity(file: string, nowMs: number): string | null {
  const stats = nodeFs.statSync(file, { bigint: true, throwIfNoEntry: false });
  if (stats === undefined) return "absent";
  const identity = trustedIdentity(stats, nowMs);
  return identity === null
    ? null
    : `${identity.dev}:${identity.ino}:${identity.size}:${identity.mtimeNs}:${identity.ctimeNs}`;
}

/** The identity `peek` may key its cache on, or null while the file's ctime is within the racy window. */
function trustedIdentity(stats: nodeFs.BigIntStats, nowMs: number): FileIdentity | null {
  return BigInt(Math.floor(nowMs)) * 1_000_000n - stats.ctimeNs < RACY_WINDOW_NS ? null : identityOf(stats);
}

/** Marks errors raised inside the critical section, so they are never mistaken for the lock's own. */
class Inner {
  constructor(readonly error: unknown) {}
}

function invalidArgument(message: string): JsonJournalError {
  return new JsonJournalError({ code: "INVALID_ARGUMENT", message });
}

export function defaultLockFile(file: string): string {
  return file.endsWith(".json") ? `${file.slice(0, -".json".length)}.lock` : `${file}.lock`;
}

/**
 * The start of the detail for a document that could not be opened, inspected or read just now for a reason
 * of the process (file-lock's `isProcessLevelErrno`): `"temporarily unreadable (EMFILE: …; retry)"`. The caller's message
 * ("…recovery state is <detail>") must not say a healthy file is damaged, so it names the errno and says
 * to retry; any other failure to read is `"unreadable"`, as before.
 */
export const TRANSIENTLY_UNREADABLE = "temporarily unreadable";

/**
 * The start of the detail for a document whose numeric `version` is above the one this journal writes (the
 * `version` of `empty`): a newer drydock wrote it, as in a rolling upgrade or a rollback of one process.
 * It is not damaged, and not this process's to repair: a person told to "repair" it could delete what the
 * newer version recorded (a deletion fence, a create key). The detail names both versions and says to
 * upgrade; like any document that fails its schema, it is never overwritten.
 */
export const NEWER_FORMAT = "in a newer format";

/**
 * How deep a document's values may nest (the top-level value is level 1); a deeper one is `invalid`, left
 * as it is. drydock's own documents nest 6 levels at most, and every member a newer version adds is kept by
 * each rewrite, so the bound leaves room for those; it stays far below the few thousand levels at which
 * structuredClone and JSON.stringify (each update uses both) overflow the stack, which JSON.parse does not.
 */
export const MAX_NESTING_DEPTH = 128;

/**
 * Whether a state error's detail says the file is not damaged, so its message must not send a person to
 * repair it: read just now for a reason of the process (TRANSIENTLY_UNREADABLE: retry), or written by a
 * newer drydock (NEWER_FORMAT: upgrade).
 */
export function isNotDamaged(detail: string): boolean {
  return (
    detail.startsWith(TRANSIENTLY_UNREADABLE) ||
    detail.startsWith(NEWER_FORMAT) ||
    detail.startsWith(OS_REFUSED)
  );
}

/** The detail for a document in version `found`, written by a newer drydock than one that reads `known`. */
export function newerFormatDetail(found: number, known: number): string {
  return `${NEWER_FORMAT} (version ${found}; this drydock reads version ${known}): upgrade this process, and leave the file as it is`;
}

function versionOf(value: unknown): number | null {
  const version =
    typeof value === "object" && value !== null ? (value as { version?: unknown }).version : undefined;
  return typeof version === "number" && Number.isSafeInteger(version) ? version : null;
}

function unreadableDetail(error: unknown): string {
  const errno = errnoCode(error);
  if (!isProcessLevelErrno(errno)) return "unreadable";
  return `${TRANSIENTLY_UNREADABLE} (${errno}: this process ran out of file descriptors or memory, or the read was interrupted; the file is not known to be damaged, retry)`;
}

/**
 * A JSON document shared by processes on one machine. Every call but `peek` takes the lock; every call
 * re-validates what is on disk (or proves it unchanged since this journal last validated it), so two processes always
 * agree; a document that cannot be read or fails its schema or `check` is never overwritten.
 */
export function openJsonJournal<T>(options: JsonJournalOptions<T>): JsonJournal<T> {
  const { file, schema, check, stateError } = options;
  if (typeof file !== "string" || file === "" || file.includes("\0") || basename(file) === "") {
    throw invalidArgument("openJsonJournal needs `file`, the path of the JSON document.");
  }
  const lockFile = options.lockFile ?? defaultLockFile(file);
  if (typeof lockFile !== "string" || lockFile === "" || lockFile.includes("\0") || lockFile === file) {
    throw invalidArgument("openJsonJournal's `lockFile` must be a path other than the document's.");
  }
  if (typeof schema?.safeParse !== "function") throw invalidArgument("openJsonJournal needs a zod `schema`.");
  if (typeof stateError !== "function") {
    throw invalidArgument("openJsonJournal needs a `stateError` function.");
  }
  if (check !== undefined && typeof check !== "function") {
    throw invalidArgument("openJsonJournal's `check` must be a function.");
  }
  const fs = options.fs ?? nodeFileOps;
  const durable = options.durable ?? true;
  const mode = options.mode ?? 0o600;
  const maxBytes = options.maxBytes ?? DEFAULT_MAX_BYTES;
  if (!Number.isInteger(mode) || mode < 0 || mode > 0o7777) {
    throw invalidArgument("openJsonJournal's `mode` must be permission bits between 0 and 0o7777.");
  }
  if (!Number.isSafeInteger(maxBytes) || maxBytes < 1) {
    throw invalidArgument("openJsonJournal's `maxBytes` must be a positive integer.");
  }
  const now = options.now ?? Date.now;
  const label = options.lock?.label ?? "drydock";
  const dirs = [...new Set([dirname(file), dirname(lockFile)])];

  // The last document this journal validated, with the identity of the file it came from (null: the file
  // did not exist). Only set when the read was not racy (see RACY_WINDOW_NS). Documents held here and in
  // `validated` are deeply frozen: `peek` hands them out as they are, everything else gets a clone.
  let cache: { identity: FileIdentity | null; doc: T } | null = null;
  // The exact bytes this journal last validated (read or wrote) and their document. Unlike the identity
  // cache it needs no timestamp argument: equal bytes parse to the same value, and schema and `check`
  // are pure, so the verdict is the same. It spares the parse and the schema walk (most of an update's
  // cost on a large journal: ~35 ms for 4,096 create rows) whenever nobody else wrote in between, which
  // the racy-window rule cannot prove right after a write.
  let validated: { bytes: Buffer; doc: T } | null = null;
  /** How many documents this journal has saved: tells a failed release after a save from one before. */
  let saves = 0;
  let swept = false;
  /** Directories whose entry for a directory created here is not yet flushed (retried until it is). */
  const unflushed = new Set<string>();
  let ancestryFlushed = false;

  function emptyDoc(): T {
    const empty = options.empty;
    return typeof empty === "function" ? (empty as () => T)() : structuredClone(empty);
  }

  /** The `version` this journal writes, if its empty document has one: a higher one is a newer format. */
  let knownVersion: number | null | undefined;
  function newerFormat(raw: unknown): string | null {
    if (knownVersion === undefined) knownVersion = versionOf(emptyDoc());
    const version = versionOf(raw);
    if (knownVersion === null || version === null || version <= knownVersion) return null;
    return newerFormatDetail(version, knownVersion);
  }

  /** Schema, then cross-record invariants; returns the schema's output or the detail of the failure. */
  function validate(raw: unknown): { ok: true; doc: T } | { ok: false; detail: string; cause: unknown } {
    const newer = newerFormat(raw);
    if (newer !== null) return { ok: false, detail: newer, cause: undefined };
    const parsed = schema.safeParse(raw);
    if (!parsed.success) return { ok: false, detail: "invalid", cause: parsed.error };
    const detail = check ? check(parsed.data) : null;
    if (detail === null) return { ok: true, doc: parsed.data };
    // A check that answers with something other than a detail still means "the invariants do not hold".
    return { ok: false, detail: typeof detail === "string" && detail ? detail : "invalid", cause: undefined };
  }

  /** The document as a frozen value that may be shared (see `cache`); callers that hand it on clone it. */
  function readFresh(): T {
    let fd: number;
    try {
      // O_NONBLOCK: a FIFO planted at the path must not hang the process; it is refused below. O_NOFOLLOW:
      // a symlink planted at the path is refused too (ELOOP, "unreadable"), never read through and then
      // replaced by the next write's rename, which would leave its target behind with the old state.
      fd = fs.openSync(
        file,
        nodeFs.constants.O_RDONLY | nodeFs.constants.O_NONBLOCK | nodeFs.constants.O_NOFOLLOW,
      );
    } catch (error) {
      if (errnoCode(error) !== "ENOENT") throw stateError(unreadableDetail(error), error);
      // Absence needs no racy window: a file created later is seen by the next stat.
      // Cloned before freezing: an `empty` factory may hand back an object its caller still uses.
      cache = { identity: null, doc: deepFreeze(structuredClone(emptyDoc())) };
      return cache.doc;
    }
    let stats: nodeFs.BigIntStats;
    let bytes: Buffer;
    try {
      // fstat of the descriptor we read from: the identity we cache is that of these exact bytes.
      stats = fs.fstatSync(fd, { bigint: true });
      if (!stats.isFile()) throw new Error("not a regular file");
      if (stats.size > BigInt(maxBytes)) throw new Error(`larger than ${maxBytes} bytes`);
      bytes = fs.readFileSync(fd);
    } catch (error) {
      throw stateError(unreadableDetail(error), error);
    } finally {
      try {
        fs.closeSync(fd);
      } catch {
        // A read-only descriptor: nothing of ours is lost if its close fails.
      }
    }
    const identity = trustedIdentity(stats, now());
    if (validated?.bytes.equals(bytes)) {
      cache = identity === null ? null : { identity, doc: validated.doc };
      return validated.doc;
    }
    let text: string;
    let raw: unknown;
    try {
      // fatal: bytes that are not UTF-8 would otherwise become U+FFFD and be rewritten as such.
      text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes);
      raw = JSON.parse(text);
    } catch (error) {
      // The seeds call a file that does not parse (truncated, corrupt) "unreadable", and one that
      // parses but breaks the format "invalid"; drydock keeps those words.
      throw stateError("unreadable", error);
    }
    // JSON.parse keeps the last copy of a repeated member name, and the next update would write back only
    // that copy: a row lost without a word. Such a file is "invalid". Always scanned: on a 0.9 MB create
    // journal (4,096 rows) the scan takes ~3 ms, about one JSON.parse and less than the shortcut of
    // comparing the text with JSON.stringify(raw, null, 2) (~5 ms); bytes this journal validated or wrote
    // last never get here (see `validated`).
    const problem = findShapeProblem(text, MAX_NESTING_DEPTH);
    if (problem?.kind === "duplicate") throw stateError("invalid", duplicateNameError(text, problem));
    if (problem?.kind === "too_deep") throw stateError("invalid", tooDeepError(text, problem.offset));
    const result = validate(raw);
    if (!result.ok) throw stateError(result.detail, result.cause);
    validated = { bytes, doc: deepFreeze(result.doc) };
    cache = identity === null ? null : { identity, doc: validated.doc };
    return validated.doc;
  }

  /** The current document, frozen and possibly shared: `peek` hands it out, `read` and `update` clone it. */
  function load(): T {
    if (cache) {
      let stats: nodeFs.BigIntStats | undefined;
      try {
        stats = fs.statSync(file, { bigint: true, throwIfNoEntry: false });
      } catch (error) {
        cache = null;
        throw stateError(unreadableDetail(error), error);
      }
      const known = cache.identity;
      if (stats ? known !== null && sameIdentity(known, identityOf(stats)) : known === null) return cache.doc;
      cache = null;
    }
    return readFresh();
  }

  function sweepOnce(): void {
    if (swept) return;
    swept = true;
    try {
      const isProcessAlive = options.lock?.isProcessAlive;
      // minAgeMs 0: this runs under the document's lock, and every writer of the document writes only
      // while holding it, so none of its temps can be mid-write now (a writer in another pid namespace
      // included: it would be holding the lock). The age rule is for sweeps without that lock.
      sweepStaleTemps(dirname(file), {
        name: basename(file),
        minAgeMs: 0,
        fs,
        ...(isProcessAlive ? { isProcessAlive } : {}),
      });
    } catch {
      // Hygiene only: a temp left by a dead writer is never read, and the next journal opened retries.
    }
  }

  function save(handle: LockHandle, next: T): void {
    let text: string;
    let stored: unknown;
    try {
      text = `${JSON.stringify(next, null, 2)}\n`;
      // Validate what will be on disk, not the object: JSON drops undefined, turns NaN into null, etc.
      stored = JSON.parse(text);
    } catch (error) {
      throw invalidNext("it cannot be stored as JSON", error);
    }
    const bytes = Buffer.from(text);
    // Every read refuses a file over maxBytes: writing one would lock this journal out of its own file.
    if (bytes.length > maxBytes) {
      throw new JsonJournalError({
        code: "INVALID_NEXT_DOCUMENT",
        message:
          `Refused to save ${file}: the new document is ${bytes.length} bytes, larger than maxBytes ` +
          `(${maxBytes}), so it could never be read back. Nothing was written and the previous document is ` +
          "intact; remove records that are no longer needed, or raise maxBytes.",
      });
    }
    const result = validate(stored);
    if (!result.ok) throw invalidNext(result.detail, result.cause);
    // A lock that was taken from us (reaped as dead, replaced by hand) must not let this write through.
    // Reported like every other lock failure (nothing was saved), with the LockError as the cause.
    try {
      handle.assertOwned();
    } catch (error) {
      throw isLockError(error) ? stateError(lockErrorDetail(error, label), error) : error;
    }
    cache = null;
    validated = null;
    try {
      writeFileAtomic(file, bytes, { mode, durable, fs });
    } catch (error) {
      throw stateError("unavailable", error);
    }
    saves += 1;
    // Only after the write returned: a failed write must not make its bytes look validated-and-current
    // (they are still compared byte for byte with what the next read finds, so this is belt and braces).
    validated = { bytes, doc: deepFreeze(result.doc) };
  }

  function invalidNext(detail: string, cause: unknown): JsonJournalError {
    return new JsonJournalError({
      code: "INVALID_NEXT_DOCUMENT",
      message:
        `Refused to save ${file}: the new document is ${detail === "invalid" ? "invalid" : `invalid (${detail})`}. ` +
        "Nothing was written and the previous document is intact; this is a bug in the caller.",
      cause,
    });
  }

  function tooDeepError(text: string, offset: number): Error {
    const line = text.slice(0, offset).split("\n").length;
    return new Error(
      `${file} nests values more than ${MAX_NESTING_DEPTH} levels deep (line ${line}). No drydock writes such a ` +
        "document, and this one could not write it back; the file was left untouched. Repair it by hand.",
    );
  }

  function duplicateNameError(text: string, duplicate: { name: string; offset: number }): Error {
    const line = text.slice(0, duplicate.offset).split("\n").length;
    const name = JSON.stringify(
      duplicate.name.length > 80 ? `${duplicate.name.slice(0, 80)}…` : duplicate.name,
    );
    return new Error(
      `${file} repeats the member name ${name} within one object (line ${line}). A JSON reader keeps only ` +
        "one copy, so the other would be lost on the next save; the file was left untouched. Repair it by " +
        "hand, keeping the copy that is right.",
    );
  }

  /**
   * Creates the directories; when any were created, flushes their parents before anything is saved. And
   * once per journal, every directory above them (`flushAncestry`): a directory that already exists may be
   * one nobody flushed (made by a process killed first, or by `mkdir -p`), which a power loss can take
   * away with the first record update() reported saved in it.
   */
  function makeDirs(): void {
    for (const dir of dirs) {
      // A new directory is only an entry in its parent: until the parent is flushed, a power loss can drop
      // it, and with it a first record that update() reported saved. Deepest first (a Set keeps insertion
      // order); a parent whose flush failed is flushed by the next call.
      const parents = makeDirectories(fs, dir);
      if (durable) for (const parent of parents) unflushed.add(parent);
    }
    if (durable && !ancestryFlushed) {
      // Every directory above them, deepest first: the parents of those just made among them.
      for (const dir of dirs) flushAncestry(fs, dir);
      ancestryFlushed = true;
      unflushed.clear();
    }
    for (const parent of unflushed) {
      fsyncDirectory(fs, parent);
      unflushed.delete(parent);
    }
  }

  async function locked<R>(section: (handle: LockHandle) => R): Promise<R> {
    try {
      makeDirs();
    } catch (error) {
      throw stateError("unavailable", error);
    }
    // Counted when the section starts, under the lock: the section runs synchronously and the release
    // follows it at once, so a change in `saves` by the time a lock failure arrives means that failure was
    // this call's release, after this call's save (null: the section never ran, the lock was never held).
    let savesBefore: number | null = null;
    try {
      return await withLock(
        lockFile,
        (handle) => {
          savesBefore = saves;
          try {
            sweepOnce();
            return section(handle);
          } catch (error) {
            throw new Inner(error);
          }
        },
        { ...options.lock, label },
      );
    } catch (error) {
      if (error instanceof Inner) throw error.error;
      // The lock's own failures become the journal's state error (the seeds' wording: "…recovery state
      // is locked by another … process"), keeping the LockError as the cause. An abort is the caller's
      // own request, not a state problem, so it propagates as the LockError it is.
      if (isLockError(error) && error.code !== "LOCK_ABORTED") {
        // The seeds report a failed release as recovery state too; after a save it must not read as
        // "nothing changed": the new document is on disk, only the lock is in doubt.
        const saved = savesBefore !== null && saves !== savesBefore ? " (the change itself was saved)" : "";
        throw stateError(`${lockErrorDetail(error, label)}${saved}`, error);
      }
      throw error;
    }
  }

  return {
    read: () => locked(() => structuredClone(load())),
    // No lock and no directory creation: a missing file is the empty document, as for `read`. `load` is
    // synchronous, so it cannot interleave with this process's own critical sections.
    peek: async () => load() as DeepReadonly<T>,
    update<R>(fn: (doc: T) => { next?: T; result: R }): Promise<R> {
      if (typeof fn !== "function") return Promise.reject(invalidArgument("update needs a function."));
      return locked<R>((handle) => {
        const outcome = fn(structuredClone(load()));
        if (typeof outcome !== "object" || outcome === null) {
          throw invalidArgument("update's fn must return { next?, result }.");
        }
        if (typeof (outcome as { then?: unknown }).then === "function") {
          // The document would be written after the lock is released, or an await would stretch the
          // critical section across the event loop: both are refused.
          (outcome as unknown as Promise<unknown>).then(undefined, () => undefined);
          throw invalidArgument("update's fn must be synchronous; nothing was written.");
        }
        if (outcome.next !== undefined) save(handle, outcome.next);
        return outcome.result;
      });
    },
  };
}
