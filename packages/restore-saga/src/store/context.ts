import { isAbsolute, join, resolve } from "node:path";
import { type FileOps, flushAncestry, isProcessLevelErrno, nodeFileOps } from "@drydock/file-lock";
import { assertDataDirOutside } from "../checkpoints/index.js";
import { errnoOf, SagaError } from "../errors.js";
import { domainDigest, sha256Hex } from "../internal/canonical.js";
import { type CrashHook, noCrash } from "../internal/crash.js";
import { ensurePrivateDir, lstatOrNull, transientFailure, unresolvedPath } from "../internal/files.js";
import { type StateLockOptions, sweepDeadLockFiles, withStateLock } from "../internal/state-lock.js";
import { verifiedChains } from "../internal/verified-chains.js";
import { invalid } from "./failures.js";
import { WORKSPACE_IDENTITY_DOMAIN } from "./format.js";
import { DEFAULT_SAGA_LIMITS, type SagaLimits, type SagaStoreOptions } from "./types.js";

/**
 * What every module of the saga store shares: the options it was opened with, the layout of its shard
 * (`<stateDir>/workspace-<32 hex of the workspace path>/`: one directory per saga, and `.locks/`,
 * `.archive/`, `.purge/`, `.purged/` beside them), the memo of verified chains, and the two once-per-store
 * flags. One context per `openSagaStore` call; every function of the store takes it first.
 */
export interface StoreContext {
  readonly fs: FileOps;
  /** Wall clock, ms. */
  readonly now: () => number;
  readonly crash: CrashHook;
  readonly limits: SagaLimits;
  /** Liveness and wait of the short state locks. */
  readonly lock: StateLockOptions | undefined;
  /** `SagaStoreOptions.readOnly`: nothing found is tidied, every write refused. */
  readonly readOnly: boolean;
  /** Canonical (realpath). */
  readonly workspaceRoot: string;
  readonly stateDir: string;
  /** This workspace's shard: one directory per active saga. */
  readonly shardDir: string;
  /** The state locks: `shard.lock` and `<id>.lock`. */
  readonly locksDir: string;
  readonly archiveDir: string;
  /** Where a purge moves an archived saga before deleting it. */
  readonly purgeDir: string;
  /** Purge receipts, `<id>.json`. */
  readonly receiptsDir: string;
  readonly shardLock: string;
  readonly verified: ReturnType<typeof verifiedChains>;
  /** Whether `.locks/` was swept of dead processes' lock files (see `sweepLocksOnce`). */
  locksSwept: boolean;
  /** Whether the shard's ancestry was flushed (see `ensureLayout`). */
  ancestryFlushed: boolean;
  receiptPath(id: string): string;
  opDir(id: string): string;
  opLock(id: string): string;
}

/** Checks the options and lays out the shard of `options.workspaceRoot`; nothing is written yet. */
export function makeContext(options: SagaStoreOptions): StoreContext {
  const fs = options.fs ?? nodeFileOps;
  const limits: SagaLimits = { ...DEFAULT_SAGA_LIMITS, ...options.limits };
  if (typeof options.stateDir !== "string" || !isAbsolute(options.stateDir)) {
    throw invalid("The saga store needs an absolute stateDir.");
  }
  if (typeof options.workspaceRoot !== "string" || !isAbsolute(options.workspaceRoot)) {
    throw invalid("The saga store needs an absolute workspaceRoot.");
  }
  let workspaceRoot: string;
  try {
    workspaceRoot = fs.realpathSync(options.workspaceRoot);
  } catch (error) {
    throw unresolvedPath("workspace", options.workspaceRoot, error);
  }
  const stateDir = resolve(options.stateDir);
  // The state must not live inside the workspace: a restore would delete it as "absent from the checkpoint".
  // Judged by realpath (of its nearest existing ancestor), like the checkpoint store's data directory.
  assertDataDirOutside(fs, stateDir, workspaceRoot, "saga stateDir");
  const shardDir = join(stateDir, `workspace-${sha256Hex(workspaceRoot).slice(0, 32)}`);
  const locksDir = join(shardDir, ".locks");
  const receiptsDir = join(shardDir, ".purged");
  return {
    fs,
    now: options.now ?? Date.now,
    crash: options.crash ?? noCrash,
    limits,
    // Read-only: a dead holder's lock is reported, never taken over, and no owner file is kept for reuse.
    lock: options.readOnly ? { ...options.lock, reapDeadOwners: false, reuseOwnerFile: false } : options.lock,
    readOnly: options.readOnly === true,
    workspaceRoot,
    stateDir,
    shardDir,
    locksDir,
    archiveDir: join(shardDir, ".archive"),
    purgeDir: join(shardDir, ".purge"),
    receiptsDir,
    shardLock: join(locksDir, "shard.lock"),
    verified: verifiedChains(),
    locksSwept: false,
    ancestryFlushed: false,
    receiptPath: (id) => join(receiptsDir, `${id}.json`),
    opDir: (id) => join(shardDir, id),
    opLock: (id) => join(locksDir, `${id}.lock`),
  };
}

/**
 * Before the first lock a store takes: what dead processes left in `.locks/` is removed. The owner files
 * they kept for reuse would otherwise pile up with every killed process.
 */
export function sweepLocksOnce(ctx: StoreContext): void {
  if (ctx.locksSwept || ctx.readOnly) return;
  ctx.locksSwept = true;
  sweepDeadLockFiles(ctx.locksDir, ctx.fs, ctx.lock);
}

export function stateLock<T>(
  ctx: StoreContext,
  path: string,
  what: string,
  fn: () => T | Promise<T>,
): Promise<T> {
  sweepLocksOnce(ctx);
  return withStateLock(path, what, ctx.fs, ctx.lock, fn);
}

/** lstat that answers null for a missing path; any other failure is the state being unreadable. */
export function present(ctx: StoreContext, path: string): ReturnType<FileOps["lstatSync"]> | null {
  try {
    return lstatOrNull(ctx.fs, path);
  } catch (error) {
    const errno = errnoOf(error);
    if (isProcessLevelErrno(errno))
      throw transientFailure(`The restore saga path ${path}`, "inspected", errno, error);
    throw new SagaError({
      code: "CORRUPT",
      cause: error,
      message: `The restore saga path ${path} could not be inspected (${errno ?? "error"}). Nothing was changed; check the disk, then retry.`,
    });
  }
}

export function workspaceIdentity(ctx: StoreContext): string {
  let stat: ReturnType<FileOps["statSync"]>;
  try {
    stat = ctx.fs.statSync(ctx.workspaceRoot);
  } catch (error) {
    const errno = errnoOf(error);
    // Gone (or replaced by a file): not the workspace the sagas were bound to. Any other failure says
    // nothing about which workspace it is (EIO, EMFILE: LOCK_FAILED, retry; EACCES: the caller's path).
    if (errno !== "ENOENT" && errno !== "ENOTDIR")
      throw unresolvedPath("workspace", ctx.workspaceRoot, error);
    throw new SagaError({
      code: "WORKSPACE_MISMATCH",
      cause: error,
      message: `The workspace ${ctx.workspaceRoot} cannot be read (${errno ?? "error"}), so its restore sagas cannot be bound to it. Check that it exists.`,
    });
  }
  return domainDigest(WORKSPACE_IDENTITY_DOMAIN, {
    path: ctx.workspaceRoot,
    dev: String(stat.dev),
    ino: String(stat.ino),
  });
}

export function ensureLayout(ctx: StoreContext): void {
  try {
    ensurePrivateDir(ctx.fs, ctx.stateDir);
    ensurePrivateDir(ctx.fs, ctx.shardDir);
    ensurePrivateDir(ctx.fs, ctx.locksDir);
    ensurePrivateDir(ctx.fs, ctx.archiveDir);
    // Once per store: the shard's path may exist without being durable (made by a process killed before
    // it flushed, or by someone else's `mkdir -p`); a saga acknowledged in it must not vanish with it.
    // (The shard's flush, first of them, also covers .locks and .archive beside it.)
    if (!ctx.ancestryFlushed) {
      flushAncestry(ctx.fs, ctx.locksDir);
      ctx.ancestryFlushed = true;
    }
  } catch (error) {
    if (error instanceof SagaError) throw error;
    throw new SagaError({
      code: "WRITE_FAILED",
      commitState: "event_not_committed",
      cause: error,
      message: `The saga directory ${ctx.shardDir} could not be created (${errnoOf(error) ?? "error"}). Nothing was written; check the disk and permissions, then retry.`,
    });
  }
}

/** Archive and purge: NOT_FOUND without a shard, else the shard lock, then the operation's lock. */
export function withShardAndOpLocks<T>(ctx: StoreContext, id: string, fn: () => T): Promise<T> {
  return withShardAndOpLocksFor(ctx, id, ctx.lock, fn);
}

/** `withShardAndOpLocks` with its own lock options (a listing waits only briefly). */
export function withShardAndOpLocksFor<T>(
  ctx: StoreContext,
  id: string,
  lock: StateLockOptions | undefined,
  fn: () => T,
): Promise<T> {
  if (!present(ctx, ctx.shardDir)) {
    throw new SagaError({ code: "NOT_FOUND", operationId: id, message: `No restore saga ${id} exists.` });
  }
  ensureLayout(ctx);
  sweepLocksOnce(ctx);
  return withStateLock(ctx.shardLock, `the restore saga shard of ${ctx.workspaceRoot}`, ctx.fs, lock, () =>
    withStateLock(ctx.opLock(id), `restore saga ${id}`, ctx.fs, lock, fn),
  );
}

/**
 * The operation's lock nested inside the shard lock, awaited like any other: a synchronous wait here
 * froze the event loop whenever another task of this process held the operation's lock (a load), which
 * could then never release it. `fn` itself stays synchronous.
 */
export function withNestedOpLock<T>(ctx: StoreContext, id: string, fn: () => T): Promise<T> {
  return withStateLock(ctx.opLock(id), `restore saga ${id}`, ctx.fs, ctx.lock, fn);
}
