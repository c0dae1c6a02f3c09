import { dirname } from "node:path";
import { isDeepStrictEqual } from "node:util";
import { errnoOf, isLockError, LockError, type TornLock, toLockError } from "./errors.js";
import { type FileOps, flushAncestry, fsyncDirectory, makeDirectories } from "./fs.js";
import { claimElection, resignElection } from "./internal/election.js";
import {
  type BadFile,
  candidatePath,
  type FileId,
  garbageElectionKey,
  linkExclusive,
  newOwner,
  type OwnerRead,
  readOwnerFile,
  removeQuietly,
  serializeOwner,
  writeCandidate,
} from "./internal/files.js";
import { type KeptOwner, keepOwner, keptOwnerKey, takeKeptOwner } from "./internal/kept-owners.js";
import { fileIsFromEarlierBoot, inOtherPidNamespace, judgeProcess } from "./internal/liveness.js";
import { type LockContext, type LockOptions, resolveLockOptions } from "./options.js";
import { type LockOwner, LockOwnerSchema } from "./schema.js";

export interface LockHandle {
  /** The lock file. */
  readonly path: string;
  /** What this handle published (its token is the proof of ownership: never log it). */
  readonly owner: LockOwner;
  /** Throws `LOCK_OWNERSHIP_LOST` unless the lock file still holds this owner. Call before a write it guards. */
  assertOwned(): void;
  /**
   * Removes the lock if, and only if, it still holds this owner; never deletes someone else's lock.
   * Idempotent once it succeeded. If it throws `LOCK_IO`, the lock is still held: retry, or exit.
   */
  release(): void;
}

/** Outcome of one synchronous attempt: the lock, "look again now", or "back off, someone live holds it". */
type Step = LockHandle | "again" | "wait";

/** Consecutive immediate retries before backing off anyway: a lock that keeps vanishing must not spin. */
const MAX_IMMEDIATE_RETRIES = 3;

function describeHolder(owner: LockOwner | undefined, ctx: LockContext): string {
  if (!owner) return "";
  const where = owner.host ? ` on ${owner.host}` : "";
  // Another pid namespace (another container on this host): its pid means nothing here, so say why it is kept.
  const namespace = inOtherPidNamespace(owner, ctx)
    ? ` in pid namespace ${owner.pidNamespace}, not this process's ${ctx.identity.pidNamespace?.() ?? "(unknown)"}: it cannot be checked from here, so it is never judged dead`
    : "";
  return ` (pid ${owner.pid}${where}${namespace})`;
}

function badLockError(read: BadFile, path: string): LockError {
  const what = read.code === "LOCK_INVALID" ? "is not a valid lock owner file" : "could not be read";
  return new LockError({
    code: read.code,
    path,
    cause: read.cause,
    message: `The lock ${path} ${what} (${read.reason}), so it was left exactly as it is and nothing was taken. Inspect it; remove it by hand only once no process is using it.`,
  });
}

/** A lock torn by a power loss, with `reapDeadOwners: false`: its owner is unknown but not running. */
function tornLockError(read: BadFile & { file: FileId }, path: string): LockError {
  const { dev, ino, size, ctimeMs } = read.file;
  return new LockError({
    code: "LOCK_OWNER_DEAD",
    path,
    cause: read.cause,
    tornLock: { torn: true, dev, ino, size, ctimeMs },
    message: `The lock ${path} was last written before this machine booted and does not hold a readable owner (${read.reason}): its bytes were lost in a power loss, so its owner is unknown but no longer running. It is kept for recovery: settle the work it guarded, then take it over explicitly (takeoverLock with error.tornLock).`,
  });
}

function isTornLock(expected: LockOwner | TornLock): expected is TornLock {
  return (expected as { torn?: unknown } | null)?.torn === true;
}

/** A lock path is a programming input: anything but a non-empty string is a TypeError before any file is touched. */
function assertLockPath(path: unknown, call: string): asserts path is string {
  if (typeof path !== "string" || path.length === 0 || path.includes("\0")) {
    throw new TypeError(`${call}: the lock path must be a non-empty string without NUL bytes`);
  }
}

/** The very file a TornLock names, still from before this boot. */
function isTornFile(file: FileId | null, torn: TornLock, ctx: LockContext): boolean {
  return (
    file !== null &&
    file.dev === torn.dev &&
    file.ino === torn.ino &&
    file.size === torn.size &&
    file.ctimeMs === torn.ctimeMs &&
    fileIsFromEarlierBoot(file, ctx)
  );
}

/** Lock directories whose path this process flushed up to the root, per seam (see `flushAncestry`). */
const flushedLockDirs = new WeakMap<FileOps, Set<string>>();

/**
 * A published lock's name reaches the disk only with its directory (`durable`), and the directory only
 * with its own path: once per lock directory and process, every directory above it is flushed too.
 */
function flushLockDirectory(path: string, ctx: LockContext): void {
  const dir = dirname(path);
  fsyncDirectory(ctx.fs, dir);
  let flushed = flushedLockDirs.get(ctx.fs);
  if (flushed === undefined) {
    flushed = new Set();
    flushedLockDirs.set(ctx.fs, flushed);
  }
  if (flushed.has(dir)) return;
  flushAncestry(ctx.fs, dir);
  flushed.add(dir);
}

function ownerDeadError(owner: LockOwner, path: string): LockError {
  return new LockError({
    code: "LOCK_OWNER_DEAD",
    path,
    owner,
    message: `The lock ${path} belongs to process ${owner.pid}${owner.host ? ` on ${owner.host}` : ""}, which is no longer running. It is kept for recovery: inspect it and take it over explicitly (takeoverLock) once its work is settled.`,
  });
}

function abortedError(path: string, signal: AbortSignal): LockError {
  return new LockError({
    code: "LOCK_ABORTED",
    path,
    cause: signal.reason,
    message: `Waiting for the lock ${path} was cancelled; the lock was not taken.`,
  });
}

/**
 * Removes a provably dead lock under election authority, or reports that a live reaper is at it.
 * `stillDead` re-checks the lock after winning: the lock is unlinked only if it is still the very lock that
 * was judged dead, because between our first read and our win it may have been reaped and re-taken.
 */
function reap(
  path: string,
  electionKey: string,
  stillDead: (read: OwnerRead) => boolean,
  ctx: LockContext,
): "reaped" | "busy" {
  const win = claimElection(path, electionKey, ctx);
  if (win === null) return "busy";
  try {
    ctx.crash("reap.elected");
    const read = readOwnerFile(ctx.fs, path);
    if (read.kind === "absent") return "reaped";
    if (!stillDead(read))
      return read.kind === "owner" && read.owner.token === electionKey ? "busy" : "reaped";
    // Nobody else can change the lock now: its owner is dead, and every other reaper of this token is blocked
    // by our live election record (a successor needs us judged dead). So read → unlink is one critical section.
    try {
      ctx.fs.unlinkSync(path);
    } catch (error) {
      if (errnoOf(error) !== "ENOENT") {
        throw new LockError({
          code: "LOCK_IO",
          path,
          cause: error,
          message: `The dead owner's lock ${path} could not be removed (${errnoOf(error) ?? "unknown error"}). It is unchanged; check the directory's permissions and retry.`,
        });
      }
    }
    ctx.crash("reap.lock-removed");
    return "reaped";
  } finally {
    // The record is garbage once the lock no longer holds its target, and a failed reap must not leave a live
    // process's record blocking everyone else until it exits.
    resignElection(win, ctx);
  }
}

function isSameInode(a: FileId | null, b: FileId | null): boolean {
  return a !== null && b !== null && a.dev === b.dev && a.ino === b.ino && a.ctimeMs === b.ctimeMs;
}

/** The part of acquisition shared by the sync and async loops: everything but the waiting. */
class Acquisition {
  private owner: LockOwner;
  private candidate: string;
  /** With `reuseOwnerFile`: where the owner file goes after a clean release (see internal/kept-owners.ts). */
  private readonly keepKey: string | undefined;
  /** The candidate is a kept owner file, already written. */
  private reused = false;
  private candidatePresent = false;
  private graceUsed = false;
  /** The last holder seen, for the timeout message. */
  lastHolder: LockOwner | undefined;
  /** Whether that holder was dead and another live process held its reap election. */
  holderBeingRecovered = false;

  constructor(
    readonly path: string,
    readonly ctx: LockContext,
  ) {
    this.owner = newOwner(ctx);
    this.candidate = candidatePath(path, this.owner);
    this.keepKey = ctx.reuseOwnerFile ? keptOwnerKey(path, this.owner) : undefined;
    const kept = this.keepKey === undefined ? undefined : takeKeptOwner(this.keepKey, ctx.fs);
    if (kept !== undefined) {
      this.owner = kept.owner;
      this.candidate = kept.candidate;
      this.reused = true;
    }
  }

  prepare(): void {
    if (this.reused) {
      this.candidatePresent = true;
      this.ctx.crash("acquire.candidate-written");
      return;
    }
    const content = serializeOwner(this.owner);
    // Fully written before link(2) publishes it: the lock is never visible half-written or ownerless.
    try {
      writeCandidate(this.ctx.fs, this.candidate, content, this.path, this.ctx.durable);
    } catch (error) {
      // The directory is created only when missing: an extra mkdir on every acquire is measurable.
      if (!isLockError(error) || errnoOf(error.cause) !== "ENOENT") throw error;
      this.createDirectory();
      writeCandidate(this.ctx.fs, this.candidate, content, this.path, this.ctx.durable);
    }
    this.candidatePresent = true;
    this.ctx.crash("acquire.candidate-written");
  }

  private createDirectory(): void {
    try {
      const lockDir = dirname(this.path);
      const parents = makeDirectories(this.ctx.fs, lockDir);
      // durable: each directory made here reaches the disk with its parent (the lock's name with its own).
      if (this.ctx.durable) for (const parent of parents) fsyncDirectory(this.ctx.fs, parent);
    } catch (error) {
      throw new LockError({
        code: "LOCK_IO",
        path: this.path,
        cause: error,
        message: `The lock directory for ${this.path} could not be created (${errnoOf(error) ?? "unknown error"}). Check its permissions and retry.`,
      });
    }
  }

  /** The kept owner file vanished (removed by hand, or by a sweep): write a new owner instead. */
  private replaceVanishedOwner(): void {
    this.candidatePresent = false;
    this.reused = false;
    this.owner = newOwner(this.ctx);
    this.candidate = candidatePath(this.path, this.owner);
    this.prepare();
  }

  private link(): boolean {
    try {
      return linkExclusive(this.ctx.fs, this.candidate, this.path, this.path);
    } catch (error) {
      if (!this.reused || !isLockError(error) || errnoOf(error.cause) !== "ENOENT") throw error;
      this.replaceVanishedOwner();
      return linkExclusive(this.ctx.fs, this.candidate, this.path, this.path);
    }
  }

  /** The handle for a lock that now names our owner. */
  private won(): LockHandle {
    const { ctx, path } = this;
    if (this.keepKey !== undefined) {
      // Kept while held: both names point at the owner until release unlinks the lock's.
      this.candidatePresent = false;
      return createHandle(path, this.owner, ctx, undefined, {
        key: this.keepKey,
        entry: { owner: this.owner, candidate: this.candidate, fs: ctx.fs },
      });
    }
    // Crash window: both names point at our owner now. A leftover candidate is swept by collectLockGarbage
    // once we are dead; while we live, release() retries removing it.
    this.candidatePresent = !removeQuietly(ctx.fs, this.candidate);
    if (ctx.durable) this.flushPublished();
    return createHandle(path, this.owner, ctx, this.candidatePresent ? this.candidate : undefined);
  }

  /**
   * `durable`: the lock's name is on disk before acquire returns (after the candidate's removal, so a power
   * loss does not bring that back). If the flush fails, the lock is given up again: nothing ran under it.
   */
  private flushPublished(): void {
    const { ctx, path } = this;
    try {
      flushLockDirectory(path, ctx);
    } catch (error) {
      const gaveUp = removeQuietly(ctx.fs, path);
      throw new LockError({
        code: "LOCK_IO",
        path,
        cause: error,
        message: gaveUp
          ? `The lock ${path} was taken but could not be flushed to disk (${errnoOf(error) ?? "unknown error"}), so it was given up again and nothing is held. Check the disk and retry.`
          : `The lock ${path} was taken but could not be flushed to disk (${errnoOf(error) ?? "unknown error"}), and removing it failed too: this process holds it until it exits. Check the disk.`,
      });
    }
  }

  step(): Step {
    const { ctx, path } = this;
    if (this.link()) {
      ctx.crash("acquire.published");
      return this.won();
    }
    const read = readOwnerFile(ctx.fs, path);
    // Released between our EEXIST and the read: look again at once (the loop bounds this by waitMs).
    if (read.kind === "absent") return "again";
    if (read.kind === "bad") {
      // Only the boot-time rule may remove a lock whose bytes cannot be trusted (a power loss can leave an
      // unsynced owner file empty); otherwise fail closed and leave the bytes alone.
      if (read.file === null || !fileIsFromEarlierBoot(read.file, ctx)) throw badLockError(read, path);
      // With reapDeadOwners false a lock is evidence: a torn one is reported like a dead owner, never removed.
      if (!ctx.reapDeadOwners) throw tornLockError({ ...read, file: read.file }, path);
      const seen = read.file;
      const outcome = reap(
        path,
        garbageElectionKey(seen),
        (now) => now.kind === "bad" && isSameInode(now.file, seen) && fileIsFromEarlierBoot(seen, ctx),
        ctx,
      );
      return outcome === "reaped" ? "again" : "wait";
    }
    const holder = read.owner;
    if (holder.token === this.owner.token) {
      // Our own candidate's bytes: a link that reported failure yet happened (the NFS retransmission case of
      // open(2)'s O_EXCL notes). The lock is ours. (A kept owner is never named by a lock when it is taken
      // out for an acquisition, so this cannot be an earlier hold of ours.)
      return this.won();
    }
    if (judgeProcess(holder, read.file, ctx, path) === "alive") {
      this.lastHolder = holder;
      this.holderBeingRecovered = false;
      return "wait";
    }
    if (!ctx.reapDeadOwners) throw ownerDeadError(holder, path);
    const outcome = reap(
      path,
      holder.token,
      (now) =>
        now.kind === "owner" &&
        now.owner.token === holder.token &&
        judgeProcess(now.owner, now.file, ctx, path) === "dead",
      ctx,
    );
    if (outcome === "busy") {
      this.lastHolder = holder;
      this.holderBeingRecovered = true;
    }
    return outcome === "reaped" ? "again" : "wait";
  }

  /**
   * Removes our candidate unless it was handed to a handle (or keeps it, with `reuseOwnerFile`: no lock names
   * it); never throws (the caller is already failing or done).
   */
  dispose(): void {
    if (!this.candidatePresent) return;
    if (this.keepKey !== undefined) {
      this.candidatePresent = false;
      keepOwner(this.keepKey, { owner: this.owner, candidate: this.candidate, fs: this.ctx.fs });
      return;
    }
    this.candidatePresent = !removeQuietly(this.ctx.fs, this.candidate);
  }

  /**
   * Whether the wait is over. Past the deadline one last look is granted when the lock was just freed (our own
   * reap, or a release we saw): otherwise a reaper could time out right after clearing the way for itself.
   * Only one, so the wait stays bounded even when the lock vanishes again and again.
   */
  expired(step: "again" | "wait", remaining: number): boolean {
    if (remaining > 0) return false;
    if (step === "again" && !this.graceUsed) {
      this.graceUsed = true;
      return false;
    }
    return true;
  }

  timeoutError(): LockError {
    const holder = this.lastHolder;
    return new LockError({
      code: "LOCK_TIMEOUT",
      path: this.path,
      ...(holder ? { owner: holder } : {}),
      message: this.holderBeingRecovered
        ? `The lock ${this.path} is locked by another ${this.ctx.label} process${describeHolder(holder, this.ctx)} that has exited, and another live process is recovering it; gave up after ${this.ctx.waitMs} ms. Retry later; if this persists, check the processes named in its .reap- files.`
        : `The lock ${this.path} is locked by another ${this.ctx.label} process${describeHolder(holder, this.ctx)}; gave up after ${this.ctx.waitMs} ms. Retry later, or check that process if this persists.`,
    });
  }
}

function createHandle(
  path: string,
  owner: LockOwner,
  ctx: LockContext,
  leftoverCandidate: string | undefined,
  keep?: { key: string; entry: KeptOwner },
): LockHandle {
  // Frozen: the handle's owner is the proof of ownership and must keep matching the file.
  Object.freeze(owner);
  let released = false;
  let candidate = leftoverCandidate;
  const lost = (detail: string, cause?: unknown): LockError =>
    new LockError({
      code: "LOCK_OWNERSHIP_LOST",
      path,
      cause,
      message: `This process no longer holds the lock ${path}: ${detail}. Whatever it guarded may have been changed by another process; re-read it before writing.`,
    });
  const check = (): void => {
    if (released) throw lost("it was already released");
    const read = readOwnerFile(ctx.fs, path);
    if (read.kind === "absent") throw lost("the lock file is gone");
    if (read.kind === "bad") throw badLockError(read, path);
    if (read.owner.token !== owner.token || read.owner.pid !== owner.pid)
      throw lost("another owner holds it now");
  };
  return {
    path,
    owner,
    assertOwned(): void {
      try {
        check();
      } catch (error) {
        throw toLockError(error, path, "checked");
      }
    },
    release(): void {
      if (released) return;
      // A lock this process cannot read is not proof that it lost it: nothing is removed, the hold stands.
      const stillHeld = (cause: unknown, code: "LOCK_IO" | BadFile["code"], reason: string): LockError =>
        new LockError({
          code,
          path,
          cause,
          message:
            code === "LOCK_INVALID"
              ? `release() found the lock ${path} no longer holding a valid owner (${reason}): something other than this lock changed it. It was left as it is; inspect it, and remove it by hand only once nothing uses it.`
              : `The lock ${path} could not be read while releasing it (${reason}), so it was left as it is and this process still holds it. Retry release(); if it keeps failing, exit the process so others can recover the lock.`,
        });
      try {
        let read: OwnerRead;
        try {
          read = readOwnerFile(ctx.fs, path);
        } catch (error) {
          const reason = errnoOf(isLockError(error) ? error.cause : error) ?? "unknown error";
          throw stillHeld(error, "LOCK_IO", reason);
        }
        if (read.kind === "bad") throw stillHeld(read.cause, read.code, read.reason);
        if (read.kind === "absent" || read.owner.token !== owner.token || read.owner.pid !== owner.pid) {
          released = true;
          throw lost(
            read.kind === "absent" ? "the lock file was already gone" : "another owner holds it now",
          );
        }
        // Nobody can replace our lock while we live (reapers and takeovers need us proven dead), so this
        // read-then-unlink cannot remove someone else's lock.
        ctx.crash("release.verified");
        try {
          ctx.fs.unlinkSync(path);
        } catch (error) {
          if (errnoOf(error) === "ENOENT") {
            released = true;
            throw lost("the lock file vanished while releasing", error);
          }
          throw new LockError({
            code: "LOCK_IO",
            path,
            cause: error,
            message: `The lock ${path} could not be released (${errnoOf(error) ?? "unknown error"}); this process still holds it. Retry release(), or exit the process so others can recover it.`,
          });
        }
        released = true;
        // No lock names the owner any more: keep its file for this process's next acquire of this lock.
        if (keep !== undefined) keepOwner(keep.key, keep.entry);
        keep = undefined;
      } catch (error) {
        throw toLockError(error, path, "released");
      } finally {
        if (released && candidate !== undefined && removeQuietly(ctx.fs, candidate)) candidate = undefined;
        // Released without a clean unlink (the lock was gone or someone else's): the owner is not kept.
        if (released && keep !== undefined) {
          removeQuietly(ctx.fs, keep.entry.candidate);
          keep = undefined;
        }
      }
    },
  };
}

function backoffMs(attempt: number, ctx: LockContext): number {
  // Exponential from 1 ms, capped at retryMs, with jitter in [cap/2, cap] so contenders do not move in lockstep.
  const cap = Math.min(ctx.retryMs, 2 ** Math.min(attempt, 20));
  return cap / 2 + (Math.random() * cap) / 2;
}

function sleep(ms: number, signal: AbortSignal | undefined, path: string): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(abortedError(path, signal));
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(abortedError(path, signal as AbortSignal));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** Takes the lock, waiting with timers (never blocking the event loop) for at most `waitMs`. */
export async function acquireLock(path: string, options?: LockOptions): Promise<LockHandle> {
  assertLockPath(path, "acquireLock");
  const ctx = resolveLockOptions(options);
  if (ctx.signal?.aborted) throw abortedError(path, ctx.signal);
  const acquisition = new Acquisition(path, ctx);
  try {
    acquisition.prepare();
    const deadline = ctx.monotonicNow() + ctx.waitMs;
    let immediate = 0;
    for (let attempt = 0; ; attempt += 1) {
      if (ctx.signal?.aborted) throw abortedError(path, ctx.signal);
      // One synchronous step: no other task of this process can interleave between its checks and writes.
      const step = acquisition.step();
      if (typeof step === "object") return step;
      const remaining = deadline - ctx.monotonicNow();
      // Checked after every step, whatever it saw: a lock that vanishes or is replaced forever still times out.
      if (acquisition.expired(step, remaining)) throw acquisition.timeoutError();
      immediate = step === "again" ? immediate + 1 : 0;
      const ms = step === "again" && immediate <= MAX_IMMEDIATE_RETRIES ? 0 : backoffMs(attempt, ctx);
      await sleep(Math.max(0, Math.min(ms, remaining)), ctx.signal, path);
    }
  } catch (error) {
    throw toLockError(error, path, "acquired");
  } finally {
    acquisition.dispose();
  }
}

/** Takes the lock, blocking this thread with Atomics.wait between attempts, for at most `waitMs`. For scripts. */
export function acquireLockSync(path: string, options?: LockOptions): LockHandle {
  assertLockPath(path, "acquireLockSync");
  const ctx = resolveLockOptions(options);
  if (ctx.signal?.aborted) throw abortedError(path, ctx.signal);
  const acquisition = new Acquisition(path, ctx);
  let waiter: Int32Array | undefined;
  try {
    acquisition.prepare();
    const deadline = ctx.monotonicNow() + ctx.waitMs;
    let immediate = 0;
    for (let attempt = 0; ; attempt += 1) {
      if (ctx.signal?.aborted) throw abortedError(path, ctx.signal);
      const step = acquisition.step();
      if (typeof step === "object") return step;
      const remaining = deadline - ctx.monotonicNow();
      if (acquisition.expired(step, remaining)) throw acquisition.timeoutError();
      immediate = step === "again" ? immediate + 1 : 0;
      if (remaining <= 0 || (step === "again" && immediate <= MAX_IMMEDIATE_RETRIES)) continue;
      waiter ??= new Int32Array(new SharedArrayBuffer(4));
      Atomics.wait(waiter, 0, 0, Math.min(backoffMs(attempt, ctx), remaining));
    }
  } catch (error) {
    throw toLockError(error, path, "acquired");
  } finally {
    acquisition.dispose();
  }
}

/**
 * Runs `fn` holding the lock and releases it afterwards. If `fn` throws, its error wins and a failing release
 * is dropped: the lock then stays held by this live process until it exits (never released for someone else).
 */
export async function withLock<T>(
  path: string,
  fn: (handle: LockHandle) => T | Promise<T>,
  options?: LockOptions,
): Promise<T> {
  const handle = await acquireLock(path, options);
  let result: T;
  try {
    result = await fn(handle);
  } catch (error) {
    try {
      handle.release();
    } catch {
      // fn's failure is the one the caller must see.
    }
    throw error;
  }
  handle.release();
  return result;
}

/**
 * `fn` must be synchronous. One that returns a promise (an async function) would go on running after the
 * first await, past the release: so its lock is then held until that promise settles, and the call throws
 * a TypeError saying to use `withLock` (the work has started and cannot be called back).
 */
export function withLockSync<T>(path: string, fn: (handle: LockHandle) => T, options?: LockOptions): T {
  const handle = acquireLockSync(path, options);
  let result: T;
  try {
    result = fn(handle);
  } catch (error) {
    try {
      handle.release();
    } catch {
      // fn's failure is the one the caller must see.
    }
    throw error;
  }
  if (isThenable(result)) {
    const releaseQuietly = (): void => {
      try {
        handle.release();
      } catch {
        // The caller was told already; a lock that could not be released stays held until this process exits.
      }
    };
    try {
      result.then(releaseQuietly, releaseQuietly);
    } catch {
      // A thenable whose then() throws will never settle: nothing is left to wait for.
      releaseQuietly();
    }
    throw new TypeError(
      `withLockSync: fn returned a promise, so its work would run past the release of ${path}. Use withLock for async work; this lock is held until that promise settles.`,
    );
  }
  handle.release();
  return result;
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    (typeof value === "object" || typeof value === "function") &&
    value !== null &&
    typeof (value as { then?: unknown }).then === "function"
  );
}

export interface InspectOptions {
  fs?: LockOptions["fs"];
}

/** The current owner, or null when nobody holds the lock. Read-only: creates and changes nothing. */
export function inspectLock(path: string, options?: InspectOptions): LockOwner | null {
  assertLockPath(path, "inspectLock");
  const ctx = resolveLockOptions(options);
  try {
    const read = readOwnerFile(ctx.fs, path);
    if (read.kind === "absent") return null;
    if (read.kind === "bad") throw badLockError(read, path);
    return read.owner;
  } catch (error) {
    throw toLockError(error, path, "inspected");
  }
}

/**
 * Replaces a dead owner's lock with a new one owned by this process, only if the file still holds exactly
 * `expected` (as returned by inspectLock or carried by LOCK_OWNER_DEAD) and that owner is provably dead; or,
 * for `expected` a `TornLock` (LOCK_OWNER_DEAD's `tornLock`), only if the lock is still that very torn file.
 * Race-free: it wins the reap election for `expected.token` (for a torn lock, the election every reaper of that
 * file would hold), re-checks under it, and rename(2)s a fully written candidate over the lock, so the lock is
 * never absent (no acquirer can slip in) and no other reaper can act meanwhile. Waits up to `waitMs` only while
 * another live reaper holds that election. With `durable`, the candidate is flushed before the rename and the
 * directory after it.
 */
export async function takeoverLock(
  path: string,
  expected: LockOwner | TornLock,
  options?: LockOptions,
): Promise<LockHandle> {
  assertLockPath(path, "takeoverLock");
  const ctx = resolveLockOptions(options);
  if (ctx.signal?.aborted) throw abortedError(path, ctx.signal);
  const torn = isTornLock(expected) ? expected : undefined;
  if (torn === undefined && !LockOwnerSchema.safeParse(expected).success)
    throw new TypeError(
      "takeoverLock: expected must be a lock owner (see inspectLock) or a LockError's tornLock",
    );
  const electionKey = torn === undefined ? (expected as LockOwner).token : garbageElectionKey(torn);
  const owner = newOwner(ctx);
  const candidate = candidatePath(path, owner);
  let candidateWritten = false;
  const changed = (): LockError =>
    new LockError({
      code: "LOCK_OWNERSHIP_LOST",
      path,
      message: `The lock ${path} changed since it was inspected, so it was not taken over. Inspect it again and decide anew.`,
    });
  /** Whether the lock is still exactly what the caller inspected, and dead; throws when it is not. */
  const check = (read: OwnerRead): LockOwner | "dead" => {
    if (torn !== undefined) {
      if (read.kind === "bad" && isTornFile(read.file, torn, ctx)) return "dead";
      throw changed();
    }
    if (read.kind === "bad") throw badLockError(read, path);
    if (read.kind === "absent" || !isDeepStrictEqual(read.owner, expected)) throw changed();
    return judgeProcess(read.owner, read.file, ctx, path) === "alive" ? read.owner : "dead";
  };
  try {
    const deadline = ctx.monotonicNow() + ctx.waitMs;
    for (let attempt = 0; ; attempt += 1) {
      if (ctx.signal?.aborted) throw abortedError(path, ctx.signal);
      const alive = check(readOwnerFile(ctx.fs, path));
      if (alive !== "dead") {
        throw new LockError({
          code: "LOCK_TIMEOUT",
          path,
          owner: alive,
          message: `The lock ${path} is locked by another ${ctx.label} process${describeHolder(alive, ctx)} that may still be running, so it cannot be taken over.`,
        });
      }
      if (!candidateWritten) {
        writeCandidate(ctx.fs, candidate, serializeOwner(owner), path, ctx.durable);
        candidateWritten = true;
        ctx.crash("takeover.candidate-written");
      }
      const win = claimElection(path, electionKey, ctx);
      if (win !== null) {
        try {
          ctx.crash("takeover.elected");
          if (check(readOwnerFile(ctx.fs, path)) !== "dead") throw changed();
          // Under election authority nobody else changes the lock; rename replaces it in one step.
          ctx.fs.renameSync(candidate, path);
          candidateWritten = false;
          ctx.crash("takeover.replaced");
          // A failed flush leaves the lock ours (the old owner's is gone either way): no handle, so it stays
          // held until this process exits, and can then be taken over again. Never given up to a plain acquire.
          if (ctx.durable) flushTakenOver(path, ctx);
          return createHandle(path, owner, ctx, undefined);
        } finally {
          resignElection(win, ctx);
        }
      }
      const remaining = deadline - ctx.monotonicNow();
      if (remaining <= 0) {
        throw new LockError({
          code: "LOCK_TIMEOUT",
          path,
          message: `The lock ${path} is being recovered by another ${ctx.label} process; gave up after ${ctx.waitMs} ms. Inspect it again and retry.`,
        });
      }
      await sleep(Math.min(backoffMs(attempt, ctx), remaining), ctx.signal, path);
    }
  } catch (error) {
    throw toLockError(error, path, "taken over");
  } finally {
    if (candidateWritten) removeQuietly(ctx.fs, candidate);
  }
}

function flushTakenOver(path: string, ctx: LockContext): void {
  try {
    flushLockDirectory(path, ctx);
  } catch (error) {
    throw new LockError({
      code: "LOCK_IO",
      path,
      cause: error,
      message: `The lock ${path} was taken over but could not be flushed to disk (${errnoOf(error) ?? "unknown error"}). It now names this process, which holds it until it exits; then take it over again. Check the disk.`,
    });
  }
}
