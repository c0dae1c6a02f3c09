import { isDeepStrictEqual } from "node:util";
import type { FileOps } from "./fs.js";
import { nodeFileOps } from "./fs.js";
import { type LockIdentity, systemIdentity } from "./internal/identity.js";

export type { LockIdentity, ProcessState } from "./internal/identity.js";

export interface LockOptions {
  /** Longest time to wait for the lock, ms (default 2000). Every wait is bounded by it. */
  waitMs?: number;
  /** Cap of the jittered exponential backoff between attempts, ms (default 20). */
  retryMs?: number;
  /** How many reapers of one dead owner may die mid-recovery before giving up (default 128). */
  maxReaperGenerations?: number;
  /** Remove a provably dead owner's lock (default true). False: throw `LOCK_OWNER_DEAD` instead. */
  reapDeadOwners?: boolean;
  /**
   * Keep this process's owner file after a release and publish it again, unchanged, at its next acquire of the
   * same lock (default false). An acquire then links an existing file instead of creating one, which is most
   * of its cost on many file systems. While the process lives, up to 16 idle `<path>.candidate-<pid>-<token>`
   * files stay beside their locks; they are removed at exit, and by collectLockGarbage once a killed process
   * is dead. The token is then reused by its own live process, for the same lock only, and `createdAt` is when
   * the file was first written.
   */
  reuseOwnerFile?: boolean;
  /**
   * Make the lock survive a power loss (default false). The owner file is flushed before link(2) publishes it,
   * and the lock's directory after, so once acquire (or takeoverLock) returns, the lock is on disk with its
   * owner. Two fsyncs per acquire: for a lock that is evidence after a crash (restore-saga's workspace lock),
   * not for short locks, which only have to be recoverable (the boot-time rule). Release is not flushed: a
   * released lock that comes back after a power loss names a dead owner.
   */
  durable?: boolean;
  /** Caller data stored in the owner file (JSON object). */
  payload?: Record<string, unknown>;
  /** Aborts a wait with `LOCK_ABORTED` (checked between attempts by the sync variants). */
  signal?: AbortSignal;
  /** Names the holder in messages: "locked by another <label> process" (default "drydock"). */
  label?: string;
  /** Liveness probe; return or throw like `process.kill(pid, 0)` (ESRCH dead, EPERM alive, else unverifiable). */
  isProcessAlive?: (pid: number) => boolean;
  /** Wall clock for `createdAt`, ms (default Date.now). */
  now?: () => number;
  /** Monotonic clock for the wait deadline, ms (default performance.now). */
  monotonicNow?: () => number;
  /** File system seam (default the real one). */
  fs?: FileOps;
  /** Host name, boot id, boot time and process start times (default: this Linux machine's /proc). */
  identity?: LockIdentity;
  /** Test hook called at each named crash point (see LOCK_CRASH_POINTS); a crash test SIGKILLs itself there. */
  crash?: (point: LockCrashPoint) => void;
}

/**
 * Every step after which a crash leaves something on disk, in the order a flow meets them. A crash test runs
 * each flow once per point, killing itself there, and checks that the next contender recovers.
 */
export const LOCK_CRASH_POINTS = [
  /** Candidate written, not yet linked: a stray candidate, swept once its process is dead. */
  "acquire.candidate-written",
  /** Lock linked, candidate not yet removed: the lock and its candidate share an inode. */
  "acquire.published",
  /** A reaper's election record candidate written, not yet linked. */
  "election.candidate-written",
  /** Election won, dead lock not yet re-read: the next contender finds a dead reaper and elects a successor. */
  "reap.elected",
  /** Dead lock removed, election record not yet given up: garbage for collectLockGarbage. */
  "reap.lock-removed",
  /** Release verified ownership, lock not yet unlinked: the lock of a now-dead owner. */
  "release.verified",
  /** Takeover candidate written, election not yet run. */
  "takeover.candidate-written",
  /** Takeover election won, lock not yet replaced. */
  "takeover.elected",
  /** Lock replaced by the new owner, election record not yet given up. */
  "takeover.replaced",
] as const;

export type LockCrashPoint = (typeof LOCK_CRASH_POINTS)[number];

export interface LockContext {
  readonly waitMs: number;
  readonly retryMs: number;
  readonly maxReaperGenerations: number;
  readonly reapDeadOwners: boolean;
  readonly reuseOwnerFile: boolean;
  readonly durable: boolean;
  readonly payload: Record<string, unknown> | undefined;
  readonly signal: AbortSignal | undefined;
  readonly label: string;
  readonly isProcessAlive: (pid: number) => boolean;
  readonly now: () => number;
  readonly monotonicNow: () => number;
  readonly fs: FileOps;
  readonly identity: LockIdentity;
  readonly crash: (point: LockCrashPoint) => void;
}

function noCrash(): void {}

/** `kill(pid, 0)`: returns when a process owns the pid, throws its errno otherwise (ESRCH, EPERM, ...). */
function signalZero(pid: number): boolean {
  process.kill(pid, 0);
  return true;
}

function bounded(name: string, value: number | undefined, fallback: number, min: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== "number" || !Number.isFinite(value) || value < min) {
    throw new TypeError(`file-lock option ${name} must be a finite number >= ${min}`);
  }
  return value;
}

/** Keeps the owner file far below the reader's size bound. */
const MAX_PAYLOAD_BYTES = 16 * 1024;

/** The payload is stored as JSON, so what the handle reports must be exactly what a reader will parse back. */
function isJsonObject(value: unknown): boolean {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
  let text: string;
  try {
    text = JSON.stringify(value);
  } catch {
    return false;
  }
  return text.length <= MAX_PAYLOAD_BYTES && isDeepStrictEqual(JSON.parse(text), value);
}

/** Bad options are programming errors: they throw a TypeError before any file is touched. */
export function resolveLockOptions(options: LockOptions | undefined): LockContext {
  const o = options ?? {};
  if (o.payload !== undefined && !isJsonObject(o.payload)) {
    throw new TypeError(
      `file-lock option payload must be a plain JSON object of at most ${MAX_PAYLOAD_BYTES} bytes that survives JSON.stringify unchanged`,
    );
  }
  if (o.durable === true && o.reuseOwnerFile === true) {
    throw new TypeError(
      "file-lock options durable and reuseOwnerFile cannot be combined: a kept owner file is published again as it is",
    );
  }
  if (o.label !== undefined && (typeof o.label !== "string" || o.label.length === 0)) {
    throw new TypeError("file-lock option label must be a non-empty string");
  }
  return {
    waitMs: bounded("waitMs", o.waitMs, 2_000, 0),
    retryMs: bounded("retryMs", o.retryMs, 20, 1),
    maxReaperGenerations: Math.floor(bounded("maxReaperGenerations", o.maxReaperGenerations, 128, 1)),
    reapDeadOwners: o.reapDeadOwners ?? true,
    reuseOwnerFile: o.reuseOwnerFile === true,
    durable: o.durable === true,
    payload: o.payload,
    signal: o.signal,
    label: o.label ?? "drydock",
    isProcessAlive: o.isProcessAlive ?? signalZero,
    now: o.now ?? Date.now,
    monotonicNow: o.monotonicNow ?? (() => performance.now()),
    fs: o.fs ?? nodeFileOps,
    identity: o.identity ?? systemIdentity,
    crash: o.crash ?? noCrash,
  };
}
