import { isAbsolute, join, resolve } from "node:path";
import {
  type FileOps,
  flushAncestry,
  fsyncDirectory,
  isProcessLevelErrno,
  nodeFileOps,
} from "@drydock/file-lock";
import { assertDataDirOutside } from "./checkpoints.js";
import { type CommitState, errnoOf, SagaError } from "./errors.js";
import {
  canonicalJson,
  domainDigest,
  plainDigest,
  prettyCanonical,
  sha256Hex,
} from "./internal/canonical.js";
import { type CrashHook, noCrash } from "./internal/crash.js";
import {
  ensurePrivateDir,
  isTempName,
  lstatOrNull,
  PublishFailure,
  publishNewFile,
  readRegularFile,
  replaceFile,
  transientFailure,
  unresolvedPath,
} from "./internal/files.js";
import {
  lostDuringWrite,
  type StateLockOptions,
  sweepDeadLockFiles,
  withStateLock,
} from "./internal/state-lock.js";
import { issuesText } from "./internal/text.js";
import { verifiedChains } from "./internal/verified-chains.js";
import {
  basePhase,
  checkProgression,
  isTerminalPhase,
  isTransitionAllowed,
  PHASE_EVIDENCE,
  PRE_MUTATION_PHASES,
  ROLLBACK_BASE_PHASES,
} from "./phases.js";
import {
  type CreateEvidence,
  CreateEvidenceSchema,
  HASH_PATTERN,
  OPERATION_ID_PATTERN,
  type Phase,
  PhaseSchema,
  SAGA_EVENT_SCHEMA,
  SAGA_HEAD_SCHEMA,
  SAGA_PURGE_RECEIPT_SCHEMA,
  type SagaEvent,
  SagaEventSchema,
  type SagaHead,
  SagaHeadSchema,
  type SagaPurgeReceipt,
  SagaPurgeReceiptSchema,
} from "./schema.js";

/** Hash domains. Changing one orphans every chain on disk: never do it without a new schema version. */
export const EVENT_HASH_DOMAIN = "drydock-restore-saga-event-v1";
export const HEAD_ANCHOR_DOMAIN = "drydock-restore-saga-head-v1";
const WORKSPACE_IDENTITY_DOMAIN = "drydock-restore-saga-workspace-v1";

export interface SagaLimits {
  /** Events per saga (default 64). */
  maxEvents: number;
  /** Bytes of one event file (default 32 KiB). */
  maxEventBytes: number;
  /** Bytes of canonical evidence (default 16 KiB). */
  maxEvidenceBytes: number;
  /** Sagas per workspace shard, active and archived together (default 10,000). */
  maxSagasPerShard: number;
}

export const DEFAULT_SAGA_LIMITS: Readonly<SagaLimits> = Object.freeze({
  maxEvents: 64,
  maxEventBytes: 32 * 1024,
  maxEvidenceBytes: 16 * 1024,
  maxSagasPerShard: 10_000,
});

const HEAD_MAX_BYTES = 4096;
/** The instants a saga timestamp can hold: `toISOString` prints a four-digit year only within these. */
const MIN_RECORDABLE_MS = Date.parse("0000-01-01T00:00:00.000Z");
const MAX_RECORDABLE_MS = Date.parse("9999-12-31T23:59:59.999Z");
const EVENT_FILE = /^(\d{6})-([a-z_]+)\.json$/;

export interface SagaStoreOptions {
  /** Root of all saga shards; must be outside the workspace. Created 0700 on first write. */
  stateDir: string;
  /** The workspace the sagas of this store restore. Must exist; it is canonicalised with realpath. */
  workspaceRoot: string;
  /** Wall clock, ms (default Date.now). Event timestamps never go backwards, whatever it returns. */
  now?: () => number;
  fs?: FileOps;
  /** Crash points `saga.*` (tests only). */
  crash?: CrashHook;
  limits?: Partial<SagaLimits>;
  /** Liveness and wait of the short state locks. */
  lock?: StateLockOptions;
}

export interface SagaFence {
  expectedSeq: number;
  expectedHash: string;
}

export interface AdvanceInput extends SagaFence {
  phase: Phase;
  evidence: Record<string, unknown>;
}

/** A verified saga: every event replayed, hashes and chain checked, HEAD settled. Frozen. */
export interface SagaState {
  readonly operationId: string;
  readonly workspaceRoot: string;
  readonly workspaceIdentity: string;
  readonly seq: number;
  readonly headHash: string;
  readonly phase: Phase;
  /** The last phase that is not recovery_required/recovery_started: where the work itself stopped. */
  readonly basePhase: Phase | null;
  readonly terminal: boolean;
  readonly events: readonly SagaEvent[];
  /** True when this load settled a HEAD left one event behind by a crash. */
  readonly headRolledForward: boolean;
  /** True when the state was read from the archive. */
  readonly archived: boolean;
}

export interface ArchiveResult {
  archived: true;
  alreadyArchived: boolean;
  operationId: string;
  phase: Phase;
  seq: number;
  headHash: string;
}

export interface PurgeResult {
  purged: true;
  /** True when an earlier call already purged it (this one only finished deleting what was left). */
  alreadyPurged: boolean;
  operationId: string;
  phase: Phase;
  seq: number;
  headHash: string;
}

/**
 * `head_unsettled`: the chain verified, but HEAD is one event behind and rolling it forward failed (a write
 * error); the next load that can write settles it.
 */
export type PendingDiagnosticStatus =
  | "terminal_unarchived"
  | "orphan_unpublished"
  | "busy"
  | "head_unsettled"
  | "corrupt";

export interface PendingDiagnostic {
  operationId: string;
  /**
   * `orphan_unpublished`: a create died before its first event was published (the directory records no
   * work). `listPending` removes such a directory itself once no create can be working on it; this status
   * is left only when that removal could not be made just now (`code` says why: LOCK_FAILED while another
   * process holds the shard, WRITE_FAILED): the next listing, or `removeOrphan`, retries it.
   */
  status: PendingDiagnosticStatus;
  /** The SagaError code that made the entry unreadable (or kept an orphan), when it was one. */
  code: string | null;
  /** Whether a fenced recovery action (release, abort) or the store itself (an orphan) can settle it. */
  recoverable: boolean;
}

export interface RemoveOrphanResult {
  operationId: string;
  /** True when this call removed an unpublished directory; false when there was none (already removed). */
  removed: boolean;
}

export interface PendingSaga {
  operationId: string;
  phase: Phase;
  basePhase: Phase | null;
  seq: number;
  headHash: string;
  updatedAt: string;
}

export interface PendingList {
  items: PendingSaga[];
  diagnostics: PendingDiagnostic[];
  /** Pass as `after` to read the next page; null at the end. */
  nextCursor: string | null;
  truncated: boolean;
}

export interface SagaStore {
  readonly workspaceRoot: string;
  /** The shard directory of this workspace. */
  readonly shardDir: string;
  create(operationId: string, evidence: CreateEvidence): Promise<SagaState>;
  /** Replays and verifies the whole chain. No active saga (even an archived one): NOT_FOUND. */
  load(operationId: string): Promise<SagaState>;
  /** Compare-and-set on (seq, headHash): CONFLICT on any difference. */
  advance(operationId: string, input: AdvanceInput): Promise<SagaState>;
  /** One rename into `.archive/`; idempotent, and an exact read of an archived saga. */
  archiveTerminal(operationId: string, fence: SagaFence): Promise<ArchiveResult>;
  /** Replays an archived saga (read-only). A purged one: NOT_FOUND, saying so. */
  loadArchived(operationId: string): Promise<SagaState>;
  /** Ids of the archived sagas (not purged), sorted. */
  listArchived(): Promise<string[]>;
  /**
   * Deletes an archived saga's events for good, keeping a receipt (`.purged/<id>.json`: final phase, seq,
   * head hash) so the id is never used again and a retry answers `alreadyPurged`. Exact fence, like
   * `archiveTerminal`. An active saga: INVALID_TRANSITION; an archive that does not verify: CORRUPT, and
   * nothing is deleted. Purged sagas no longer count toward `maxSagasPerShard`.
   */
  purgeArchived(operationId: string, fence: SagaFence): Promise<PurgeResult>;
  /**
   * The pending sagas, a page at a time. A saga directory with no published event (a create that died
   * before event 1) is not listed: it is removed here, as `removeOrphan` does, when its locks can be taken
   * at once; otherwise it is reported as `orphan_unpublished`.
   */
  listPending(options?: { after?: string; limit?: number }): Promise<PendingList>;
  /**
   * Removes a saga directory that holds no published event (only an unpublished genesis HEAD and temporaries
   * of a create that died), under the shard lock and the operation's lock: a create holds both from making
   * the directory until event 1 and HEAD are published, so taking them and still finding no event proves
   * no create is working on it (a live holder is waited for, then LOCK_FAILED; file-lock reaps only a
   * provably dead one). Durable (the shard directory is flushed). No such directory: `removed: false`. A
   * saga with a published event (active or archived): INVALID_TRANSITION; a directory that does not verify
   * as unpublished: CORRUPT. Either way nothing is touched.
   */
  removeOrphan(operationId: string): Promise<RemoveOrphanResult>;
}

function invalid(message: string): SagaError {
  return new SagaError({ code: "INVALID_ARGUMENT", message });
}

function corrupt(operationId: string, why: string, cause?: unknown): SagaError {
  return new SagaError({
    code: "CORRUPT",
    operationId,
    cause,
    message: `The restore saga ${operationId} is inconsistent: ${why}. Its files were left exactly as they are; inspect them before any recovery.`,
  });
}

function assertOperationId(operationId: unknown): asserts operationId is string {
  if (typeof operationId !== "string" || !OPERATION_ID_PATTERN.test(operationId)) {
    throw invalid("An operation id is 1-128 letters, digits, '-' or '_', starting with a letter or digit.");
  }
  // A saga's state lock is `.locks/<id>.lock`, and the shard's is `.locks/shard.lock`: the id `shard` would
  // make create wait for the lock it holds itself. The shard lock keeps its name (an older version must
  // still exclude a newer one during an upgrade), so the id is refused; in any case, for file systems that
  // ignore case. Every other name the store derives from an id cannot collide: ids hold no '.', and the
  // store's own entries (`.locks`, `.archive`, `.purge`, `.purged`) start with one.
  if (operationId.toLowerCase() === "shard") {
    throw invalid(
      `The operation id ${JSON.stringify(operationId)} is reserved (the saga store's shard lock has that name). Choose another id; nothing was changed.`,
    );
  }
}

/** The caller's fence, or CONFLICT when it is malformed: archiving and purging act only on an exact state. */
function exactFence(operationId: string, fence: SagaFence | undefined, doing: string): SagaFence {
  const { expectedSeq, expectedHash } = fence ?? ({} as SagaFence);
  if (
    !Number.isSafeInteger(expectedSeq) ||
    typeof expectedHash !== "string" ||
    !HASH_PATTERN.test(expectedHash)
  ) {
    throw new SagaError({
      code: "CONFLICT",
      operationId,
      message: `${doing} restore saga ${operationId} needs the exact expectedSeq and expectedHash. Nothing was changed.`,
    });
  }
  return { expectedSeq, expectedHash };
}

/** How a saga's head differs from a fence, in words: the seq when it differs, else the head hash. */
function headDifference(fence: SagaFence, actual: { seq: number; headHash: string; phase: Phase }): string {
  return actual.seq === fence.expectedSeq
    ? `is at seq ${actual.seq} (${actual.phase}) as the caller expected, but its head hash is ${actual.headHash}, not ${fence.expectedHash}`
    : `is at seq ${actual.seq} (${actual.phase}), not the seq ${fence.expectedSeq} the caller expected`;
}

function fenceMismatch(
  operationId: string,
  fence: SagaFence,
  actual: { seq: number; headHash: string; phase: Phase },
): SagaError {
  return new SagaError({
    code: "CONFLICT",
    operationId,
    phase: actual.phase,
    expectedSeq: fence.expectedSeq,
    expectedHash: fence.expectedHash,
    actualSeq: actual.seq,
    actualHash: actual.headHash,
    message: `Restore saga ${operationId} ${headDifference(fence, actual)}. Nothing was changed.`,
  });
}

/** The state a create or advance returns: `event` committed after `before`, read from nothing but those. */
function committedState(
  saga: Pick<SagaState, "operationId" | "workspaceRoot" | "workspaceIdentity">,
  before: readonly SagaEvent[],
  event: SagaEvent,
): SagaState {
  const events = Object.freeze([...before, Object.freeze(event)]);
  return Object.freeze({
    operationId: saga.operationId,
    workspaceRoot: saga.workspaceRoot,
    workspaceIdentity: saga.workspaceIdentity,
    seq: event.seq,
    headHash: event.hash,
    phase: event.phase,
    basePhase: basePhase(events),
    terminal: isTerminalPhase(event.phase),
    events,
    headRolledForward: false,
    archived: false,
  });
}

function eventFileName(seq: number, phase: Phase): string {
  return `${String(seq).padStart(6, "0")}-${phase}.json`;
}

export function eventHash(event: Omit<SagaEvent, "hash">): string {
  return domainDigest(EVENT_HASH_DOMAIN, event);
}

function headAnchor(head: Omit<SagaHead, "anchorHash">): string {
  return domainDigest(HEAD_ANCHOR_DOMAIN, head);
}

function makeHead(operationId: string, last: SagaEvent | null): SagaHead {
  const body: Omit<SagaHead, "anchorHash"> = {
    schema: SAGA_HEAD_SCHEMA,
    version: 1,
    state: last ? "committed" : "unpublished",
    operationId,
    seq: last ? last.seq : 0,
    phase: last ? last.phase : null,
    eventFile: last ? eventFileName(last.seq, last.phase) : null,
    eventHash: last ? last.hash : null,
  };
  return { ...body, anchorHash: headAnchor(body) };
}

function parseExact(bytes: Buffer, operationId: string, what: string): unknown {
  let parsed: unknown;
  try {
    parsed = JSON.parse(bytes.toString("utf8"));
  } catch (error) {
    throw corrupt(operationId, `${what} is not JSON`, error);
  }
  // Byte-exact: the hash covers values, not whitespace or key order, so the file must also be exactly
  // the canonical rendering of what it holds. Any changed byte is then tampering, whatever it was.
  let rendered: string;
  try {
    rendered = prettyCanonical(parsed);
  } catch (error) {
    throw corrupt(operationId, `${what} holds a value canonical JSON cannot represent`, error);
  }
  if (!bytes.equals(Buffer.from(rendered, "utf8"))) {
    throw corrupt(operationId, `${what} is not byte-for-byte its canonical form`);
  }
  return parsed;
}

function isExactSuccessor(state: SagaState, fence: SagaFence, phase: Phase, evidence: unknown): boolean {
  const last = state.events.at(-1);
  return (
    state.seq === fence.expectedSeq + 1 &&
    last !== undefined &&
    last.phase === phase &&
    last.prevHash === fence.expectedHash &&
    canonicalJson(last.evidence) === canonicalJson(evidence)
  );
}

type ChainStep = { readonly phase: Phase; readonly evidence: Readonly<Record<string, unknown>> };

/** The longest recovery attempt (recovery_started … its terminal event) a saga stopped at `base` may run. */
function attemptLength(base: Phase | null): number {
  // A rollback: recovery_started, rollback_prepared, rollback_started, workspace_rolled_back,
  // session_rollback_committed, rolled_back. An abort (or a resume): recovery_started, then the terminal.
  return base !== null && ROLLBACK_BASE_PHASES.has(base) ? 6 : 2;
}

/**
 * The most events that can still be needed to settle a saga whose chain is `events`, if nothing else fails:
 * the rest of a recovery attempt under way; one whole attempt after recovery_required; after a restore's
 * own step, recovery_required and one attempt (what recovery writes when the restore stops there).
 */
function eventsToSettle(events: readonly ChainStep[]): number {
  const last = events.at(-1)!;
  switch (last.phase) {
    case "completed":
    case "aborted":
    case "rolled_back":
      return 0;
    case "recovery_required":
      return attemptLength(basePhase(events));
    case "recovery_started":
      return last.evidence.recoveryAction === "rollback-partial-mutation" ? 5 : 1;
    case "rollback_prepared":
      return 4;
    case "rollback_started":
      return 3;
    case "workspace_rolled_back":
      return 2;
    case "session_rollback_committed":
      return 1;
    default:
      return 1 + attemptLength(last.phase);
  }
}

/** What still settles a saga from `events`, for a person, with `left` events of room. */
function settleHint(events: readonly ChainStep[], left: number, maxEvents: number): string {
  const last = events.at(-1)!;
  const needed = eventsToSettle(events);
  // A restore's own step can also be settled by one terminal event, which only the cap holds back: aborted
  // before any file changed, completed once applied.
  const direct = PRE_MUTATION_PHASES.has(last.phase)
    ? "aborted"
    : last.phase === "workspace_applied" || last.phase === "session_committed"
      ? "completed"
      : null;
  if (direct && left >= 1) {
    return `What still fits is to finish it directly (${direct})${needed <= left ? ", or recovery_required and one recovery" : ""}.`;
  }
  if (needed > left) {
    return `It cannot be settled within its limit of ${maxEvents} events any more (that could take ${needed}, ${left} are left): inspect the workspace and the saga by hand.`;
  }
  const base = basePhase(events);
  switch (last.phase) {
    case "recovery_started":
    case "rollback_prepared":
    case "rollback_started":
    case "workspace_rolled_back":
    case "session_rollback_committed": {
      const action = events.findLast((event) => event.phase === "recovery_started")?.evidence.recoveryAction;
      const end =
        action === "rollback-partial-mutation"
          ? "rolled_back"
          : action === "abort-pre-intent"
            ? "aborted"
            : "completed";
      return `What still fits is to finish the recovery already started (${String(action)}), up to ${end}.`;
    }
    case "recovery_required": {
      const end =
        base !== null && PRE_MUTATION_PHASES.has(base)
          ? "aborted"
          : attemptLength(base) > 2
            ? "rolled_back"
            : "completed";
      return `What still fits is one recovery: recovery_started, then up to ${end}.`;
    }
    default:
      return "What still fits is recovery_required and one recovery.";
  }
}

function writeFailed(
  operationId: string,
  commitState: CommitState,
  cause: unknown,
  intended: { seq: number; hash: string } | null,
): SagaError {
  const what: Record<CommitState, string> = {
    event_not_committed: "nothing was written; the saga is as it was",
    event_commit_unknown: "the event may or may not be on disk",
    event_committed_head_unsettled: "the event is on disk but HEAD still names its predecessor",
    head_settlement_unknown: "the event is on disk and HEAD may or may not name it",
    archive_not_committed: "the saga was not archived",
    archive_commit_unknown: "the saga may or may not be archived",
    purge_not_committed: "nothing was purged; the archived saga is as it was",
    purge_commit_unknown: "the purge is recorded but its events may not all be deleted; retry the purge",
    orphan_removal_unfinished:
      "the unpublished saga directory may be partly removed (it never held an event); retry the removal",
  };
  return new SagaError({
    code: "WRITE_FAILED",
    operationId,
    commitState,
    cause,
    ...(intended ? { intendedSeq: intended.seq, intendedHash: intended.hash } : {}),
    message: `Writing restore saga ${operationId} failed (${errnoOf(cause) ?? "error"}): ${what[commitState]}. Reload the saga and accept only the exact step you meant; never retry blindly.`,
  });
}

interface Replay {
  state: SagaState | null;
  /** True when the directory holds no event (a create that never published). */
  orphan: boolean;
}

export function openSagaStore(options: SagaStoreOptions): SagaStore {
  const fs = options.fs ?? nodeFileOps;
  const now = options.now ?? Date.now;
  const crash = options.crash ?? noCrash;
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
  const archiveDir = join(shardDir, ".archive");
  const purgeDir = join(shardDir, ".purge");
  const receiptsDir = join(shardDir, ".purged");
  const receiptPath = (id: string): string => join(receiptsDir, `${id}.json`);
  const opDir = (id: string): string => join(shardDir, id);
  const opLock = (id: string): string => join(locksDir, `${id}.lock`);
  const shardLock = join(locksDir, "shard.lock");
  const verified = verifiedChains();
  let locksSwept = false;

  /**
   * Before the first lock a store takes: what dead processes left in `.locks/` is removed. The owner files
   * they kept for reuse would otherwise pile up with every killed process.
   */
  function sweepLocksOnce(): void {
    if (locksSwept) return;
    locksSwept = true;
    sweepDeadLockFiles(locksDir, fs, options.lock);
  }

  function stateLock<T>(path: string, what: string, fn: () => T | Promise<T>): Promise<T> {
    sweepLocksOnce();
    return withStateLock(path, what, fs, options.lock, fn);
  }

  /** lstat that answers null for a missing path; any other failure is the state being unreadable. */
  function present(path: string): ReturnType<FileOps["lstatSync"]> | null {
    try {
      return lstatOrNull(fs, path);
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

  function workspaceIdentity(): string {
    let stat: ReturnType<FileOps["statSync"]>;
    try {
      stat = fs.statSync(workspaceRoot);
    } catch (error) {
      const errno = errnoOf(error);
      // Gone (or replaced by a file): not the workspace the sagas were bound to. Any other failure says
      // nothing about which workspace it is (EIO, EMFILE: LOCK_FAILED, retry; EACCES: the caller's path).
      if (errno !== "ENOENT" && errno !== "ENOTDIR") throw unresolvedPath("workspace", workspaceRoot, error);
      throw new SagaError({
        code: "WORKSPACE_MISMATCH",
        cause: error,
        message: `The workspace ${workspaceRoot} cannot be read (${errno ?? "error"}), so its restore sagas cannot be bound to it. Check that it exists.`,
      });
    }
    return domainDigest(WORKSPACE_IDENTITY_DOMAIN, {
      path: workspaceRoot,
      dev: String(stat.dev),
      ino: String(stat.ino),
    });
  }

  let ancestryFlushed = false;
  function ensureLayout(): void {
    try {
      ensurePrivateDir(fs, stateDir);
      ensurePrivateDir(fs, shardDir);
      ensurePrivateDir(fs, locksDir);
      ensurePrivateDir(fs, archiveDir);
      // Once per store: the shard's path may exist without being durable (made by a process killed before
      // it flushed, or by someone else's `mkdir -p`); a saga acknowledged in it must not vanish with it.
      // (The shard's flush, first of them, also covers .locks and .archive beside it.)
      if (!ancestryFlushed) {
        flushAncestry(fs, locksDir);
        ancestryFlushed = true;
      }
    } catch (error) {
      if (error instanceof SagaError) throw error;
      throw new SagaError({
        code: "WRITE_FAILED",
        commitState: "event_not_committed",
        cause: error,
        message: `The saga directory ${shardDir} could not be created (${errnoOf(error) ?? "error"}). Nothing was written; check the disk and permissions, then retry.`,
      });
    }
  }

  /**
   * Replays one saga directory. With `repair` (caller holds the saga lock): temporaries are deleted, never
   * promoted, and a HEAD exactly one event behind is rolled forward. Anything else inconsistent: CORRUPT.
   */
  function replay(id: string, dir: string, repair: boolean, archived: boolean): Replay {
    const temps: string[] = [];
    const result = replayFiles(id, dir, repair, archived, temps);
    // Only once the chain verified: a CORRUPT saga's files are left exactly as they are, as its error says.
    for (const name of temps) {
      try {
        fs.unlinkSync(join(dir, name));
      } catch (error) {
        if (errnoOf(error) !== "ENOENT") {
          throw new SagaError({
            code: "LOCK_FAILED",
            operationId: id,
            cause: error,
            message: `A leftover temporary file of restore saga ${id} could not be removed (${errnoOf(error) ?? "error"}). The saga itself verified, and a temporary file is never promoted; retry.`,
          });
        }
      }
    }
    return result;
  }

  /** The replay itself; the temporaries it finds (with `repair`) are collected in `temps`, not deleted. */
  function replayFiles(id: string, dir: string, repair: boolean, archived: boolean, temps: string[]): Replay {
    const dirStat = present(dir);
    if (!dirStat) {
      throw new SagaError({
        code: "NOT_FOUND",
        operationId: id,
        message: `No ${archived ? "archived" : "active"} restore saga ${id} exists for ${workspaceRoot}.`,
      });
    }
    if (!dirStat.isDirectory()) throw corrupt(id, "its directory is a symlink or not a directory");
    let names: string[];
    try {
      names = fs.readdirSync(dir);
    } catch (error) {
      const errno = errnoOf(error);
      if (isProcessLevelErrno(errno)) {
        throw transientFailure(`The directory of restore saga ${id}`, "listed", errno, error, id);
      }
      throw corrupt(id, `its directory cannot be listed (${errno ?? "error"})`, error);
    }
    const eventFiles = new Map<number, { name: string; phase: string }>();
    const tempLinks = new Map<string, number>();
    const extraLinks = (stat: { dev: number | bigint; ino: number | bigint }): number =>
      tempLinks.get(`${stat.dev}:${stat.ino}`) ?? 0;
    let hasHead = false;
    for (const name of names) {
      if (name === "HEAD") {
        hasHead = true;
        continue;
      }
      if (isTempName(name)) {
        if (!repair) throw corrupt(id, `it holds a temporary file ${name}`);
        temps.push(name);
        // A writer killed between link(2) and unlinking its temp left the temp as a second name of the
        // event (or genesis HEAD) it published: that one link is expected until the temp is removed.
        const stat = present(join(dir, name));
        if (stat?.isFile()) {
          const key = `${stat.dev}:${stat.ino}`;
          tempLinks.set(key, (tempLinks.get(key) ?? 0) + 1);
        }
        continue;
      }
      const match = EVENT_FILE.exec(name);
      if (!match) throw corrupt(id, `it holds an unexpected file ${JSON.stringify(name)}`);
      const seq = Number(match[1]);
      if (eventFiles.has(seq)) throw corrupt(id, `it holds two events with seq ${seq}`);
      eventFiles.set(seq, { name, phase: match[2]! });
    }
    if (eventFiles.size > limits.maxEvents)
      throw corrupt(id, `it holds more than ${limits.maxEvents} events`);
    const expectedIdentity = archived ? null : workspaceIdentity();

    const memo = verified.recall(dir);
    let trusted = memo !== undefined;
    const events: SagaEvent[] = [];
    const eventBytes: Buffer[] = [];
    for (let seq = 1; seq <= eventFiles.size; seq += 1) {
      const file = eventFiles.get(seq);
      if (!file) throw corrupt(id, `event ${seq} is missing`);
      const bytes = readRegularFile(fs, join(dir, file.name), {
        maxBytes: limits.maxEventBytes,
        what: `saga event ${id}/${file.name}`,
        extraLinks,
      });
      if (!bytes) throw corrupt(id, `event ${file.name} vanished while being read`);
      eventBytes.push(bytes);
      const known = trusted ? memo?.events[seq - 1] : undefined;
      // The file name is part of what was verified (its phase must be the event's): equal bytes renamed to
      // another phase are verified in full, and fail there.
      trusted =
        known !== undefined &&
        file.name === eventFileName(known.event.seq, known.event.phase) &&
        known.bytes.equals(bytes);
      if (trusted && known) {
        // The very bytes this store verified before, under the same name, after the very same prefix: the
        // checks below would give the same answer. Only what lies outside the file is checked again (the
        // workspace identity).
        checkCreatedBinding(id, known.event, expectedIdentity);
        events.push(known.event);
        continue;
      }
      const parsed = SagaEventSchema.safeParse(parseExact(bytes, id, `event ${file.name}`));
      if (!parsed.success) throw corrupt(id, `event ${file.name} does not match the event schema`);
      const event = parsed.data;
      const { hash, ...body } = event;
      if (event.operationId !== id) throw corrupt(id, `event ${file.name} belongs to ${event.operationId}`);
      if (event.seq !== seq || event.phase !== file.phase) {
        throw corrupt(id, `event ${file.name} holds seq ${event.seq} ${event.phase}`);
      }
      if (eventHash(body) !== hash) throw corrupt(id, `event ${file.name} does not match its hash`);
      const previous = events.at(-1);
      if (event.prevHash !== (previous ? previous.hash : null)) {
        throw corrupt(id, `event ${file.name} does not chain to its predecessor`);
      }
      if (previous && Date.parse(event.timestamp) < Date.parse(previous.timestamp)) {
        throw corrupt(id, `event ${file.name} goes back in time`);
      }
      if (!PHASE_EVIDENCE[event.phase].safeParse(event.evidence).success) {
        throw corrupt(id, `event ${file.name} carries evidence its phase does not allow`);
      }
      const reason = checkProgression(events, event, { operationId: id, workspaceRoot });
      if (reason) throw corrupt(id, `event ${file.name} breaks the phase machine (${reason})`);
      if ("lockOwnerDigest" in event.evidence) {
        if (plainDigest(event.evidence.workspaceLockOwner) !== event.evidence.lockOwnerDigest) {
          throw corrupt(id, `event ${file.name} records a lock owner digest that does not match its owner`);
        }
      }
      checkCreatedBinding(id, event, expectedIdentity);
      events.push(Object.freeze(event));
    }

    if (!hasHead) {
      if (events.length === 0) return { state: null, orphan: true };
      throw corrupt(id, "its HEAD is missing");
    }
    const headBytes = readRegularFile(fs, join(dir, "HEAD"), {
      maxBytes: HEAD_MAX_BYTES,
      what: `HEAD of ${id}`,
      extraLinks,
    });
    if (!headBytes) throw corrupt(id, "its HEAD vanished while being read");
    const knownHead = memo?.head?.bytes.equals(headBytes) ? memo.head : undefined;
    const last = events.at(-1);
    if (knownHead && trusted && memo?.events.length === events.length && last !== undefined) {
      // Every file is byte for byte what this store verified (or wrote) last time, when this HEAD named
      // this last event: settled, with nothing to repair.
      return settled(id, dir, events, eventBytes, knownHead, archived);
    }
    const head = knownHead ? knownHead.head : verifyHead(id, headBytes);
    const namesEvent = (event: SagaEvent | undefined): boolean =>
      event !== undefined &&
      canonicalJson(makeHead(id, event)) === canonicalJson(head) &&
      head.state === "committed";
    const isGenesis =
      head.state === "unpublished" && canonicalJson(makeHead(id, null)) === canonicalJson(head);

    let rolledForward = false;
    if (events.length === 0) {
      if (isGenesis) return { state: null, orphan: true };
      throw corrupt(id, "HEAD names an event that does not exist");
    }
    if (namesEvent(last)) {
      // Settled.
    } else if (events.length === 1 ? isGenesis : namesEvent(events.at(-2))) {
      // The one repair: a crash between publishing event N and replacing HEAD leaves HEAD one behind.
      if (!repair) throw corrupt(id, "its HEAD is one event behind");
      try {
        replaceFile(fs, dir, "HEAD", Buffer.from(prettyCanonical(makeHead(id, last!)), "utf8"));
      } catch (error) {
        const failure = error instanceof PublishFailure ? error : null;
        throw writeFailed(
          id,
          failure?.stage === "after" ? "head_settlement_unknown" : "event_committed_head_unsettled",
          failure?.cause ?? error,
          { seq: last!.seq, hash: last!.hash },
        );
      }
      rolledForward = true;
    } else {
      throw corrupt(
        id,
        `HEAD (seq ${head.seq}) does not name the last event (seq ${events.length}) or the one before`,
      );
    }

    return settled(id, dir, events, eventBytes, rolledForward ? null : { bytes: headBytes, head }, archived);
  }

  /**
   * The state a replay found, remembered as verified. `head` is the HEAD read when it named the last event;
   * null when the replay rolled HEAD forward (the one rewritten is not remembered).
   */
  function settled(
    id: string,
    dir: string,
    events: SagaEvent[],
    eventBytes: Buffer[],
    head: { head: SagaHead; bytes: Buffer } | null,
    archived: boolean,
  ): Replay {
    const created = events[0]!;
    const last = events.at(-1)!;
    verified.remember(dir, {
      events: events.map((event, i) => ({ event, bytes: eventBytes[i]! })),
      head,
    });
    return {
      orphan: false,
      state: Object.freeze({
        operationId: id,
        workspaceRoot,
        workspaceIdentity: created.evidence.workspaceIdentity as string,
        seq: last.seq,
        headHash: last.hash,
        phase: last.phase,
        basePhase: basePhase(events),
        terminal: isTerminalPhase(last.phase),
        events: Object.freeze(events),
        headRolledForward: head === null,
        archived,
      }),
    };
  }

  /** The checks of event 1 that depend on more than its bytes: the store's workspace, and its identity now. */
  function checkCreatedBinding(id: string, event: SagaEvent, expectedIdentity: string | null): void {
    if (event.seq !== 1) return;
    if (event.evidence.workspaceRoot !== workspaceRoot) {
      throw new SagaError({
        code: "WORKSPACE_MISMATCH",
        operationId: id,
        message: `Restore saga ${id} belongs to another workspace. Nothing was changed.`,
      });
    }
    if (expectedIdentity !== null && event.evidence.workspaceIdentity !== expectedIdentity) {
      throw new SagaError({
        code: "WORKSPACE_MISMATCH",
        operationId: id,
        message: `The workspace ${workspaceRoot} was replaced after restore saga ${id} began (another directory now has its path). Nothing was changed; recover by hand.`,
      });
    }
  }

  function verifyHead(id: string, bytes: Buffer): SagaHead {
    const parsed = SagaHeadSchema.safeParse(parseExact(bytes, id, "HEAD"));
    if (!parsed.success) throw corrupt(id, "HEAD does not match the HEAD schema");
    const head = parsed.data;
    const { anchorHash, ...headBody } = head;
    if (headAnchor(headBody) !== anchorHash) throw corrupt(id, "HEAD does not match its anchor hash");
    if (head.operationId !== id) throw corrupt(id, `HEAD belongs to ${head.operationId}`);
    return head;
  }

  function loadLocked(id: string): SagaState {
    const result = replay(id, opDir(id), true, false);
    if (!result.state) {
      throw new SagaError({
        code: "NOT_FOUND",
        operationId: id,
        message: `Restore saga ${id} was never published (its create did not finish). It can be created again.`,
      });
    }
    return result.state;
  }

  /**
   * `time` as the schemas record it (ISO-8601 with a four-digit year). A clock beyond year 9999 (one counting
   * microseconds, say) would write a file every reader calls CORRUPT, and NaN cannot be written at all; both
   * are refused before anything is written, naming the clock, not the disk.
   */
  function recordableTime(id: string, time: number, clock: number, commitState: CommitState): string {
    if (time >= MIN_RECORDABLE_MS && time <= MAX_RECORDABLE_MS) return new Date(time).toISOString();
    throw new SagaError({
      code: "INVALID_ARGUMENT",
      operationId: id,
      commitState,
      message: `The clock of this restore saga store gave ${clock}, which is not a time restore saga ${id} can record (years 0000 to 9999, in milliseconds). Nothing was written; fix the clock (the store's now option) and retry.`,
    });
  }

  function buildEvent(state: SagaState | null, id: string, phase: Phase, evidence: Record<string, unknown>) {
    const last = state?.events.at(-1) ?? null;
    const clock = now();
    // Clamp: a clock that steps back must not make the chain look reordered.
    const time = Math.max(clock, last ? Date.parse(last.timestamp) : 0);
    const body: Omit<SagaEvent, "hash"> = {
      schema: SAGA_EVENT_SCHEMA,
      version: 1,
      operationId: id,
      seq: last ? last.seq + 1 : 1,
      prevHash: last ? last.hash : null,
      phase,
      timestamp: recordableTime(id, time, clock, "event_not_committed"),
      evidence: JSON.parse(canonicalJson(evidence)) as Record<string, unknown>,
    };
    const event: SagaEvent = { ...body, hash: eventHash(body) };
    const bytes = Buffer.from(prettyCanonical(event), "utf8");
    if (bytes.length > limits.maxEventBytes) {
      throw new SagaError({
        code: "LIMIT",
        operationId: id,
        message: `The ${phase} event of restore saga ${id} would exceed ${limits.maxEventBytes} bytes. Nothing was written.`,
      });
    }
    return { event, bytes };
  }

  /** Publishes `event` then HEAD. Every failure says exactly how far it got. */
  function commitEvent(
    id: string,
    dir: string,
    event: SagaEvent,
    bytes: Buffer,
  ): { head: SagaHead; bytes: Buffer } {
    const intended = { seq: event.seq, hash: event.hash };
    try {
      publishNewFile(fs, dir, eventFileName(event.seq, event.phase), bytes);
    } catch (error) {
      if (error instanceof PublishFailure && error.stage === "before") {
        if (error.exists) {
          throw new SagaError({
            code: "CONFLICT",
            operationId: id,
            commitState: "event_not_committed",
            cause: error.cause,
            ...intended,
            message: `Restore saga ${id} already has an event ${event.seq} that this process did not expect (a writer outside the lock?). Nothing was written; reload it.`,
          });
        }
        throw writeFailed(id, "event_not_committed", error.cause, intended);
      }
      throw writeFailed(
        id,
        "event_commit_unknown",
        error instanceof PublishFailure ? error.cause : error,
        intended,
      );
    }
    // Crash window: the event is on disk, HEAD names its predecessor. The next load rolls HEAD forward.
    crash.point("saga.after-event-published");
    const head = makeHead(id, event);
    const headBytes = Buffer.from(prettyCanonical(head), "utf8");
    try {
      replaceFile(fs, dir, "HEAD", headBytes);
    } catch (error) {
      const failure = error instanceof PublishFailure ? error : null;
      throw writeFailed(
        id,
        failure?.stage === "after" ? "head_settlement_unknown" : "event_committed_head_unsettled",
        failure?.cause ?? error,
        intended,
      );
    }
    crash.point("saga.after-head-published");
    return { head, bytes: headBytes };
  }

  /**
   * After a write whose outcome is unknown, reload (repairing HEAD) and accept only the exact successor we
   * tried to write; anything else rethrows the original failure.
   */
  function reconcile(
    id: string,
    error: unknown,
    fence: SagaFence,
    phase: Phase,
    evidence: unknown,
  ): SagaState {
    if (
      !(error instanceof SagaError) ||
      error.code !== "WRITE_FAILED" ||
      error.commitState === "event_not_committed"
    ) {
      throw error;
    }
    let observed: SagaState;
    try {
      observed = loadLocked(id);
    } catch (loadError) {
      throw new SagaError({
        code: error.code,
        commitState: error.commitState ?? "event_commit_unknown",
        cause: error.cause,
        message: error.message,
        ...error.details,
        secondaryError: loadError,
      });
    }
    if (isExactSuccessor(observed, fence, phase, evidence)) return observed;
    throw error;
  }

  /**
   * After an advance wrote `event` and HEAD, extends the memo by what was written: the event was built
   * from a state replayed and verified under the same lock, by the rules replay checks (schema, chain,
   * phase machine, evidence), and its bytes are its canonical rendering; HEAD is the one made for it. The
   * next replay then compares bytes instead of parsing the writer's own output again (any byte changed on
   * disk still fails the comparison and is verified in full). Only when the memo holds exactly the chain
   * the advance appended to.
   */
  function rememberAppended(
    dir: string,
    state: SagaState,
    event: SagaEvent,
    bytes: Buffer,
    head: { head: SagaHead; bytes: Buffer },
  ): void {
    const known = verified.recall(dir);
    if (
      !known ||
      known.events.length !== state.events.length ||
      known.events.some((entry, i) => entry.event !== state.events[i])
    ) {
      verified.forget(dir);
      return;
    }
    verified.remember(dir, { events: [...known.events, { event, bytes }], head });
  }

  function checkEvidence(id: string, phase: Phase, evidence: unknown): Record<string, unknown> {
    const parsed = PHASE_EVIDENCE[phase].safeParse(evidence);
    if (!parsed.success) {
      throw new SagaError({
        code: "INVALID_EVIDENCE",
        operationId: id,
        phase,
        cause: parsed.error,
        message: `The evidence for ${phase} of restore saga ${id} is not allowed (${issuesText(parsed.error.issues)}). Nothing was written.`,
      });
    }
    let text: string;
    try {
      text = canonicalJson(parsed.data);
    } catch (error) {
      throw new SagaError({
        code: "INVALID_EVIDENCE",
        operationId: id,
        phase,
        cause: error,
        message: `The evidence for ${phase} of restore saga ${id} is not plain JSON. Nothing was written.`,
      });
    }
    if (Buffer.byteLength(text, "utf8") > limits.maxEvidenceBytes) {
      throw new SagaError({
        code: "LIMIT",
        operationId: id,
        phase,
        message: `The evidence for ${phase} of restore saga ${id} exceeds ${limits.maxEvidenceBytes} bytes. Nothing was written.`,
      });
    }
    if (
      "lockOwnerDigest" in parsed.data &&
      plainDigest(parsed.data.workspaceLockOwner) !== parsed.data.lockOwnerDigest
    ) {
      throw new SagaError({
        code: "INVALID_EVIDENCE",
        operationId: id,
        phase,
        message: `The lock owner digest given for ${phase} of restore saga ${id} does not match the owner. Nothing was written.`,
      });
    }
    // Write what was validated, in canonical form: the input object may hold extra prototype baggage.
    return JSON.parse(text) as Record<string, unknown>;
  }

  /**
   * Whether the shard has room for one more saga. Every saga is a directory in the shard or in its archive,
   * and where the file system keeps a directory's link count as 2 + its subdirectories (ext4, xfs, tmpfs),
   * the two link counts bound the sagas from above: below the limit, that answers without listing every
   * saga ever archived on every create (10,000 names by default). Near the limit, or where the link count
   * is not kept (btrfs reports 1, some FUSE and network mounts 2), the directories are listed and the names
   * counted.
   */
  function hasRoomForSaga(): boolean {
    let bound = 0;
    for (const dir of [shardDir, archiveDir]) {
      const links = Number(present(dir)?.nlink ?? 0);
      // The shard holds .locks and .archive (ensureLayout made them): a count below 4 there is one the file
      // system does not keep (btrfs reports 1, some FUSE and network mounts a constant 2).
      if (links < (dir === shardDir ? 4 : 2)) return countSagas() < limits.maxSagasPerShard;
      bound += links - 2;
    }
    return bound < limits.maxSagasPerShard || countSagas() < limits.maxSagasPerShard;
  }

  function countSagas(): number {
    let count = 0;
    for (const dir of [shardDir, archiveDir]) {
      let names: string[];
      try {
        names = fs.readdirSync(dir);
      } catch (error) {
        throw new SagaError({
          code: "CORRUPT",
          cause: error,
          message: `The restore saga directory ${dir} could not be listed (${errnoOf(error) ?? "error"}). Nothing was written; check the disk, then retry.`,
        });
      }
      for (const name of names) if (OPERATION_ID_PATTERN.test(name)) count += 1;
    }
    return count;
  }

  const store: SagaStore = {
    workspaceRoot,
    shardDir,

    async create(operationId, input) {
      assertOperationId(operationId);
      const parsedInput = CreateEvidenceSchema.safeParse(input);
      if (!parsedInput.success) {
        throw new SagaError({
          code: "INVALID_EVIDENCE",
          operationId,
          phase: "created",
          cause: parsedInput.error,
          message: `The evidence for created of restore saga ${operationId} is not allowed (${issuesText(parsedInput.error.issues)}${
            typeof input === "object" &&
            input !== null &&
            ("workspaceRoot" in input || "workspaceIdentity" in input)
              ? "; the store sets workspaceRoot and workspaceIdentity itself"
              : ""
          }). Nothing was written.`,
        });
      }
      ensureLayout();
      return stateLock(shardLock, `the restore saga shard of ${workspaceRoot}`, () => {
        if (present(join(archiveDir, operationId))) {
          throw new SagaError({
            code: "ALREADY_EXISTS",
            operationId,
            message: `Restore saga ${operationId} was already used and archived; choose a new operation id.`,
          });
        }
        if (present(receiptPath(operationId)) || present(join(purgeDir, operationId))) {
          throw new SagaError({
            code: "ALREADY_EXISTS",
            operationId,
            message: `Restore saga ${operationId} was already used and purged; choose a new operation id.`,
          });
        }
        const dir = opDir(operationId);
        const exists = present(dir) !== null;
        if (!exists && !hasRoomForSaga()) {
          throw new SagaError({
            code: "LIMIT",
            operationId,
            message: `The workspace ${workspaceRoot} already has ${limits.maxSagasPerShard} restore sagas (active and archived). Purge old archives first.`,
          });
        }
        // Lock order everywhere: shard lock, then the operation's lock.
        return withNestedOpLock(operationId, () => {
          const evidence = checkEvidence(operationId, "created", {
            ...parsedInput.data,
            workspaceRoot,
            workspaceIdentity: workspaceIdentity(),
          });
          if (exists) {
            // A create that died before publishing event 1 leaves an event-free directory: reuse it.
            const previous = replay(operationId, dir, true, false);
            if (!previous.orphan) {
              throw new SagaError({
                code: "ALREADY_EXISTS",
                operationId,
                message: `Restore saga ${operationId} already exists; load it instead of creating it again.`,
              });
            }
          }
          // Built (and its clock checked) before the saga's directory is made: a refusal leaves nothing.
          const { event, bytes } = buildEvent(null, operationId, "created", evidence);
          let head: { head: SagaHead; bytes: Buffer };
          try {
            if (!exists) fs.mkdirSync(dir, { mode: 0o700 });
            // The saga's directory name must be durable before any event in it is acknowledged: a power
            // loss would otherwise forget the whole saga after create and advance returned. Also when an
            // earlier create made the directory and died before this flush.
            fsyncDirectory(fs, shardDir);
          } catch (error) {
            throw writeFailed(operationId, "event_not_committed", error, null);
          }
          try {
            if (!present(join(dir, "HEAD"))) {
              // Genesis HEAD first, so "events but no HEAD" is never a legitimate crash state.
              try {
                publishNewFile(
                  fs,
                  dir,
                  "HEAD",
                  Buffer.from(prettyCanonical(makeHead(operationId, null)), "utf8"),
                );
              } catch (error) {
                const failure = error instanceof PublishFailure ? error : null;
                throw writeFailed(
                  operationId,
                  failure?.stage === "after" ? "event_commit_unknown" : "event_not_committed",
                  failure?.cause ?? error,
                  { seq: 1, hash: event.hash },
                );
              }
              crash.point("saga.after-genesis-head");
            }
            head = commitEvent(operationId, dir, event, bytes);
          } catch (error) {
            const observed = reconcileCreate(operationId, error, event);
            if (observed) return observed;
            throw error;
          }
          // Event 1 and HEAD are published: the state is the event just written, as advance returns it. A
          // re-read here could fail (EIO, a replaced workspace) and report a committed create as a failure
          // that "changed nothing", while a retry would then answer ALREADY_EXISTS.
          verified.remember(dir, { events: [{ event, bytes }], head });
          return committedState(
            { operationId, workspaceRoot, workspaceIdentity: evidence.workspaceIdentity as string },
            [],
            event,
          );
        });
      });
    },

    async load(operationId) {
      assertOperationId(operationId);
      if (!present(opDir(operationId))) {
        throw new SagaError({
          code: "NOT_FOUND",
          operationId,
          message: `No active restore saga ${operationId} exists for ${workspaceRoot}.`,
        });
      }
      return stateLock(opLock(operationId), `restore saga ${operationId}`, () => loadLocked(operationId));
    },

    async advance(operationId, input) {
      assertOperationId(operationId);
      const { expectedSeq, expectedHash, phase } = input ?? ({} as AdvanceInput);
      if (
        !Number.isSafeInteger(expectedSeq) ||
        expectedSeq < 1 ||
        typeof expectedHash !== "string" ||
        !HASH_PATTERN.test(expectedHash)
      ) {
        throw new SagaError({
          code: "CONFLICT",
          operationId,
          message: `An advance of restore saga ${operationId} needs the exact expectedSeq and expectedHash it was read at. Nothing was written.`,
        });
      }
      const phaseParsed = PhaseSchema.safeParse(phase);
      if (!phaseParsed.success || phaseParsed.data === "created") {
        throw new SagaError({
          code: "INVALID_TRANSITION",
          operationId,
          message: `Restore saga ${operationId} cannot advance to ${JSON.stringify(phase)}. Nothing was written.`,
        });
      }
      const evidence = checkEvidence(operationId, phaseParsed.data, input.evidence);
      if (!present(opDir(operationId))) {
        throw new SagaError({
          code: "NOT_FOUND",
          operationId,
          message: `No active restore saga ${operationId} exists for ${workspaceRoot}.`,
        });
      }
      const fence = { expectedSeq, expectedHash };
      return stateLock(opLock(operationId), `restore saga ${operationId}`, () => {
        const state = loadLocked(operationId);
        if (state.seq !== expectedSeq || state.headHash !== expectedHash) {
          throw new SagaError({
            code: "CONFLICT",
            operationId,
            phase: state.phase,
            expectedSeq,
            expectedHash,
            actualSeq: state.seq,
            actualHash: state.headHash,
            message: `Restore saga ${operationId} moved on: it ${headDifference(fence, state)}. Nothing was written; reload it and decide again.`,
          });
        }
        const next = { phase: phaseParsed.data, evidence };
        if (!isTransitionAllowed(state.phase, next.phase)) {
          throw new SagaError({
            code: "INVALID_TRANSITION",
            operationId,
            phase: state.phase,
            message: `Restore saga ${operationId} cannot go from ${state.phase} to ${next.phase}. Nothing was written.`,
          });
        }
        const reason = checkProgression(state.events, next, { operationId, workspaceRoot });
        if (reason) {
          throw new SagaError({
            code: "INVALID_TRANSITION",
            operationId,
            phase: state.phase,
            message: `Restore saga ${operationId} cannot record ${next.phase} here: ${reason}. Nothing was written.`,
          });
        }
        // The cap keeps room to settle: a step that is not terminal is written only if what it could still
        // take to settle the saga afterwards fits (the rest of a recovery under way, else one whole recovery
        // attempt, the longest its base phase allows). So a recovery the store lets start can always finish,
        // however many attempts failed before it; a terminal event is held back by the cap alone.
        const left = limits.maxEvents - state.events.length;
        const needed = isTerminalPhase(next.phase) ? 0 : eventsToSettle([...state.events, next]);
        if (left - 1 < needed) {
          throw new SagaError({
            code: "LIMIT",
            operationId,
            phase: state.phase,
            message: `Restore saga ${operationId} ${
              left < 1
                ? `already has ${state.events.length} events, its limit`
                : `has ${state.events.length} of at most ${limits.maxEvents} events: after ${next.phase}, ${left - 1} would be left, and settling it could then take ${needed}`
            }. Nothing was written. ${settleHint(state.events, left, limits.maxEvents)}`,
          });
        }
        const { event, bytes } = buildEvent(state, operationId, next.phase, evidence);
        const dir = opDir(operationId);
        let head: { head: SagaHead; bytes: Buffer };
        try {
          head = commitEvent(operationId, dir, event, bytes);
        } catch (error) {
          verified.forget(dir);
          return reconcile(operationId, error, fence, next.phase, evidence);
        }
        rememberAppended(dir, state, event, bytes, head);
        return committedState(state, state.events, event);
      });
    },

    async archiveTerminal(operationId, fence) {
      assertOperationId(operationId);
      const exact = exactFence(operationId, fence, "Archiving");
      const { expectedSeq, expectedHash } = exact;
      return withShardAndOpLocks(operationId, () => {
        const active = opDir(operationId);
        const archived = join(archiveDir, operationId);
        const activeExists = present(active) !== null;
        const archivedExists = present(archived) !== null;
        const mismatch = (state: SagaState): SagaError => fenceMismatch(operationId, exact, state);
        if (activeExists && archivedExists) throw corrupt(operationId, "it is both active and archived");
        if (!activeExists) {
          if (!archivedExists) {
            if (present(receiptPath(operationId))) {
              throw new SagaError({
                code: "CONFLICT",
                operationId,
                message: `Restore saga ${operationId} was archived and then purged; only its receipt is left. Nothing was changed.`,
              });
            }
            throw new SagaError({
              code: "NOT_FOUND",
              operationId,
              message: `No restore saga ${operationId} exists.`,
            });
          }
          const state = replay(operationId, archived, false, true).state;
          if (!state) throw corrupt(operationId, "its archive holds no event");
          if (state.seq !== expectedSeq || state.headHash !== expectedHash || !state.terminal)
            throw mismatch(state);
          return result(state, true);
        }
        const state = loadLocked(operationId);
        if (state.seq !== expectedSeq || state.headHash !== expectedHash) throw mismatch(state);
        if (!state.terminal) {
          throw new SagaError({
            code: "INVALID_TRANSITION",
            operationId,
            phase: state.phase,
            message: `Restore saga ${operationId} is still ${state.phase}; only a finished saga can be archived.`,
          });
        }
        verified.forget(active);
        try {
          fs.renameSync(active, archived);
        } catch (error) {
          throw writeFailed(operationId, "archive_not_committed", error, null);
        }
        crash.point("saga.after-archive-rename");
        try {
          fsyncDirectory(fs, archiveDir);
          fsyncDirectory(fs, shardDir);
        } catch (error) {
          throw writeFailed(operationId, "archive_commit_unknown", error, null);
        }
        return result(state, false);
      });
    },

    async loadArchived(operationId) {
      assertOperationId(operationId);
      const dir = join(archiveDir, operationId);
      // The receipt decides: once it exists the saga is purged, even if a crash left its archive to delete.
      if (present(receiptPath(operationId))) {
        throw new SagaError({
          code: "NOT_FOUND",
          operationId,
          message: `Restore saga ${operationId} was purged; only its receipt (${receiptPath(operationId)}) is left.`,
        });
      }
      const state = replay(operationId, dir, false, true).state;
      if (!state) throw corrupt(operationId, "its archive holds no event");
      return state;
    },

    async listArchived() {
      let names: string[];
      try {
        names = fs.readdirSync(archiveDir);
      } catch (error) {
        if (errnoOf(error) === "ENOENT") return [];
        throw new SagaError({
          code: "CORRUPT",
          cause: error,
          message: `The archive ${archiveDir} could not be listed (${errnoOf(error) ?? "error"}). Check the disk, then retry.`,
        });
      }
      return names.filter((name) => OPERATION_ID_PATTERN.test(name) && !present(receiptPath(name))).sort();
    },

    async purgeArchived(operationId, fence) {
      assertOperationId(operationId);
      const exact = exactFence(operationId, fence, "Purging");
      return withShardAndOpLocks(operationId, () => purgeLocked(operationId, exact));
    },

    async listPending(listOptions = {}) {
      const limit = listOptions.limit ?? 64;
      if (!Number.isSafeInteger(limit) || limit < 1 || limit > 64)
        throw invalid("listPending's limit is 1 to 64.");
      if (listOptions.after !== undefined) assertOperationId(listOptions.after);
      let names: string[];
      try {
        names = fs.readdirSync(shardDir);
      } catch (error) {
        if (errnoOf(error) === "ENOENT")
          return { items: [], diagnostics: [], nextCursor: null, truncated: false };
        const errno = errnoOf(error);
        if (isProcessLevelErrno(errno)) {
          throw transientFailure(`The restore saga shard ${shardDir}`, "listed", errno, error);
        }
        throw corrupt("(shard)", `the shard directory cannot be listed (${errno ?? "error"})`, error);
      }
      const after = listOptions.after;
      const ids = names
        .filter((name) => OPERATION_ID_PATTERN.test(name) && (after === undefined || name > after))
        .sort();
      const page = ids.slice(0, limit);
      const items: PendingSaga[] = [];
      const diagnostics: PendingDiagnostic[] = [];
      // Short waits: a listing reports a busy saga instead of queueing behind it.
      const listLock = { ...options.lock, waitMs: 200 };
      const read = (id: string): Promise<Replay> =>
        withStateLock(opLock(id), `restore saga ${id}`, fs, listLock, () =>
          replay(id, opDir(id), true, false),
        );
      for (const id of page) {
        try {
          sweepLocksOnce();
          let state = await read(id);
          if (!state.state) {
            // No published event: no restore ever ran under this directory. It is removed once no create can
            // be working on it (under the shard and operation locks); a create that published in between is
            // read again and listed as it now is.
            let outcome: "removed" | "absent" | "published" | SagaError;
            try {
              outcome = await withShardAndOpLocksFor(id, listLock, () => removeOrphanLocked(id));
            } catch (error) {
              // A directory that does not verify is reported as corrupt, below.
              if (!(error instanceof SagaError) || error.code === "CORRUPT") throw error;
              outcome = error;
            }
            if (outcome === "removed" || outcome === "absent") continue;
            if (outcome instanceof SagaError) {
              if (outcome.code === "NOT_FOUND") continue;
              // Not removable just now (another process holds the shard, a write failed): the next listing
              // retries. No event, so nothing else is at stake meanwhile.
              diagnostics.push({
                operationId: id,
                status: "orphan_unpublished",
                code: outcome.code,
                recoverable: true,
              });
              continue;
            }
            state = await read(id);
          }
          if (!state.state) {
            // Read again after a create published it, and found unpublished once more: keep it listed.
            diagnostics.push({
              operationId: id,
              status: "orphan_unpublished",
              code: null,
              recoverable: true,
            });
          } else if (state.state.terminal) {
            diagnostics.push({
              operationId: id,
              status: "terminal_unarchived",
              code: null,
              recoverable: true,
            });
          } else {
            const s = state.state;
            items.push({
              operationId: id,
              phase: s.phase,
              basePhase: s.basePhase,
              seq: s.seq,
              headHash: s.headHash,
              updatedAt: s.events.at(-1)!.timestamp,
            });
          }
        } catch (error) {
          const code = error instanceof SagaError ? error.code : null;
          // Archived (or purged) by another process since the listing: not pending any more.
          if (code === "NOT_FOUND") continue;
          diagnostics.push({
            operationId: id,
            // WRITE_FAILED here is the one repair a replay makes, rolling HEAD forward: the chain verified,
            // only the write failed (the next load retries it).
            status: code === "LOCK_FAILED" ? "busy" : code === "WRITE_FAILED" ? "head_unsettled" : "corrupt",
            code,
            recoverable: false,
          });
        }
      }
      const truncated = ids.length > page.length;
      return { items, diagnostics, nextCursor: truncated ? page.at(-1)! : null, truncated };
    },

    async removeOrphan(operationId) {
      assertOperationId(operationId);
      if (!present(shardDir)) return { operationId, removed: false };
      const outcome = await withShardAndOpLocksFor(operationId, options.lock, () =>
        removeOrphanLocked(operationId),
      );
      if (outcome === "published") {
        throw new SagaError({
          code: "INVALID_TRANSITION",
          operationId,
          message: `Restore saga ${operationId} has a published chain; only a directory whose create never published an event is removed. Nothing was changed.`,
        });
      }
      return { operationId, removed: outcome === "removed" };
    },
  };

  /**
   * Under the shard lock and the operation's lock. A create holds both from making the saga's directory
   * until its first event and HEAD are published, so a directory found here with no published event has no
   * create working on it (its creator died, or failed and let go): it records no work, and is removed (its
   * genesis HEAD and temporaries, then the directory), durably. A published chain (or an archived or purged
   * saga of this id) is never touched: "published". A directory that does not verify as unpublished (an
   * unexpected file, a HEAD that is not this id's genesis HEAD) is CORRUPT, and left exactly as it is.
   */
  function removeOrphanLocked(id: string): "removed" | "absent" | "published" {
    const used = present(join(archiveDir, id)) || present(receiptPath(id)) || present(join(purgeDir, id));
    const dir = opDir(id);
    if (!present(dir)) return used ? "published" : "absent";
    // create refuses an archived or purged id before it makes a directory: this is no crash state.
    if (used) throw corrupt(id, "it has an unpublished directory, yet the id was already archived or purged");
    // Verifies what is there (an unpublished genesis HEAD, or nothing) and deletes temporaries, never
    // promoting one; an event file means a published chain.
    if (!replay(id, dir, true, false).orphan) return "published";
    verified.forget(dir);
    const failed = (error: unknown): SagaError =>
      new SagaError({
        code: "WRITE_FAILED",
        operationId: id,
        commitState: "orphan_removal_unfinished",
        cause: error,
        message: `Removing the unpublished directory of restore saga ${id} failed (${errnoOf(error) ?? "error"}). It never held an event, so no restore ran under it; what is left is still unpublished. Retry (the next listing does); check the disk if this persists.`,
      });
    try {
      for (const name of fs.readdirSync(dir)) {
        // The replay verified HEAD as this id's genesis HEAD and deleted every temporary.
        if (name !== "HEAD") throw corrupt(id, `its unpublished directory holds ${JSON.stringify(name)}`);
        fs.unlinkSync(join(dir, name));
      }
      fs.rmdirSync(dir);
    } catch (error) {
      if (error instanceof SagaError) throw error;
      throw failed(error);
    }
    try {
      fsyncDirectory(fs, shardDir);
    } catch (error) {
      throw failed(error);
    }
    return "removed";
  }

  function readReceipt(id: string): SagaPurgeReceipt | null {
    const bytes = readRegularFile(fs, receiptPath(id), { maxBytes: 4096, what: `purge receipt of ${id}` });
    if (!bytes) return null;
    const parsed = SagaPurgeReceiptSchema.safeParse(parseExact(bytes, id, "its purge receipt"));
    if (!parsed.success || parsed.data.operationId !== id) {
      throw corrupt(id, "its purge receipt does not match the receipt schema");
    }
    return parsed.data;
  }

  /** Moves the archive (if still there) aside and deletes it; idempotent, so a retry finishes a purge. */
  function finishPurge(id: string): void {
    const archived = join(archiveDir, id);
    const purging = join(purgeDir, id);
    try {
      if (present(archived)) {
        ensurePrivateDir(fs, purgeDir);
        // One rename takes the saga out of the archive; what is in .purge is only ever deleted. The rename is
        // made durable before any file goes, so a power loss never leaves a half-deleted archive behind.
        fs.renameSync(archived, purging);
        crash.point("saga.after-purge-rename");
        fsyncDirectory(fs, archiveDir);
        fsyncDirectory(fs, purgeDir);
      }
      const stat = present(purging);
      if (stat) {
        if (!stat.isDirectory()) throw corrupt(id, "what is being purged is not a directory");
        for (const name of fs.readdirSync(purging)) fs.unlinkSync(join(purging, name));
        fs.rmdirSync(purging);
      }
      if (present(purgeDir)) fsyncDirectory(fs, purgeDir);
    } catch (error) {
      if (error instanceof SagaError) throw error;
      throw writeFailed(id, "purge_commit_unknown", error, null);
    }
  }

  function purgeLocked(id: string, fence: SagaFence): PurgeResult {
    if (present(opDir(id))) {
      throw new SagaError({
        code: "INVALID_TRANSITION",
        operationId: id,
        message: `Restore saga ${id} is still active; only an archived saga can be purged. Nothing was changed.`,
      });
    }
    const matches = (actual: { seq: number; headHash: string }): boolean =>
      actual.seq === fence.expectedSeq && actual.headHash === fence.expectedHash;
    const done = (receipt: SagaPurgeReceipt, alreadyPurged: boolean): PurgeResult => ({
      purged: true,
      alreadyPurged,
      operationId: id,
      phase: receipt.phase,
      seq: receipt.seq,
      headHash: receipt.headHash,
    });
    const earlier = readReceipt(id);
    if (earlier) {
      if (!matches(earlier)) throw fenceMismatch(id, fence, earlier);
      finishPurge(id);
      return done(earlier, true);
    }
    if (!present(join(archiveDir, id))) {
      if (present(join(purgeDir, id))) throw corrupt(id, "it is being purged but has no receipt");
      throw new SagaError({
        code: "NOT_FOUND",
        operationId: id,
        message: `No archived restore saga ${id} exists.`,
      });
    }
    // Verified before anything goes: a chain that does not check out is evidence, and stays.
    const state = replay(id, join(archiveDir, id), false, true).state;
    if (!state) throw corrupt(id, "its archive holds no event");
    if (!matches(state)) throw fenceMismatch(id, fence, state);
    const clock = now();
    const receipt: SagaPurgeReceipt = {
      schema: SAGA_PURGE_RECEIPT_SCHEMA,
      version: 1,
      operationId: id,
      phase: state.phase,
      seq: state.seq,
      headHash: state.headHash,
      purgedAt: recordableTime(id, clock, clock, "purge_not_committed"),
    };
    try {
      ensurePrivateDir(fs, receiptsDir);
      // Durable before anything is deleted: from here the purge is decided, and a retry finishes it.
      replaceFile(fs, receiptsDir, `${id}.json`, Buffer.from(prettyCanonical(receipt), "utf8"));
    } catch (error) {
      const failure = error instanceof PublishFailure ? error : null;
      if (failure?.stage === "after") throw writeFailed(id, "purge_commit_unknown", failure.cause, null);
      throw writeFailed(id, "purge_not_committed", failure?.cause ?? error, null);
    }
    crash.point("saga.after-purge-receipt");
    finishPurge(id);
    verified.forget(join(archiveDir, id));
    return done(receipt, false);
  }

  function result(state: SagaState, alreadyArchived: boolean): ArchiveResult {
    return {
      archived: true,
      alreadyArchived,
      operationId: state.operationId,
      phase: state.phase,
      seq: state.seq,
      headHash: state.headHash,
    };
  }

  function reconcileCreate(id: string, error: unknown, event: SagaEvent): SagaState | null {
    if (
      !(error instanceof SagaError) ||
      error.code !== "WRITE_FAILED" ||
      error.commitState === "event_not_committed"
    ) {
      return null;
    }
    try {
      const observed = loadLocked(id);
      const first = observed.events[0];
      if (observed.seq === 1 && first && canonicalJson(first.evidence) === canonicalJson(event.evidence)) {
        return observed;
      }
    } catch {
      // The original failure is the one to report.
    }
    return null;
  }

  /** Archive and purge: NOT_FOUND without a shard, else the shard lock, then the operation's lock. */
  function withShardAndOpLocks<T>(id: string, fn: () => T): Promise<T> {
    return withShardAndOpLocksFor(id, options.lock, fn);
  }

  /** `withShardAndOpLocks` with its own lock options (a listing waits only briefly). */
  function withShardAndOpLocksFor<T>(
    id: string,
    lock: StateLockOptions | undefined,
    fn: () => T,
  ): Promise<T> {
    if (!present(shardDir)) {
      throw new SagaError({ code: "NOT_FOUND", operationId: id, message: `No restore saga ${id} exists.` });
    }
    ensureLayout();
    sweepLocksOnce();
    return withStateLock(shardLock, `the restore saga shard of ${workspaceRoot}`, fs, lock, () =>
      withStateLock(opLock(id), `restore saga ${id}`, fs, lock, fn),
    );
  }

  /**
   * The operation's lock nested inside the shard lock, awaited like any other: a synchronous wait here
   * froze the event loop whenever another task of this process held the operation's lock (a load), which
   * could then never release it. `fn` itself stays synchronous.
   */
  function withNestedOpLock<T>(id: string, fn: () => T): Promise<T> {
    return withStateLock(opLock(id), `restore saga ${id}`, fs, options.lock, fn);
  }

  return Object.freeze({
    workspaceRoot,
    shardDir,
    create: (id, evidence) => guard(store.create(id, evidence), "event_commit_unknown"),
    load: (id) => guard(store.load(id), null),
    advance: (id, input) => guard(store.advance(id, input), "event_commit_unknown"),
    archiveTerminal: (id, fence) => guard(store.archiveTerminal(id, fence), "archive_commit_unknown"),
    loadArchived: (id) => guard(store.loadArchived(id), null),
    listPending: (listOptions) => guard(store.listPending(listOptions), null),
    listArchived: () => guard(store.listArchived(), null),
    purgeArchived: (id, fence) => guard(store.purgeArchived(id, fence), "purge_commit_unknown"),
    removeOrphan: (id) => guard(store.removeOrphan(id), "orphan_removal_unfinished"),
  } satisfies SagaStore);
}

/**
 * The boundary: every failure leaves the store as a SagaError. Each file operation inside is wrapped where
 * it happens; this only catches what slipped through, and says the least it can promise. `lostLock` is
 * what a call that writes reports when its state lock turned out to be someone else's by the time it let
 * go (the only LOCK_OWNERSHIP_LOST inside the store): its write may collide with theirs. Null: a read.
 */
async function guard<T>(work: Promise<T>, lostLock: CommitState | null): Promise<T> {
  const writes = lostLock !== null;
  try {
    return await work;
  } catch (error) {
    if (error instanceof SagaError && error.code === "LOCK_OWNERSHIP_LOST" && writes) {
      throw lostDuringWrite(error, lostLock);
    }
    if (error instanceof SagaError) throw error;
    throw new SagaError({
      code: writes ? "WRITE_FAILED" : "CORRUPT",
      cause: error,
      ...(writes ? { commitState: "event_commit_unknown" as const } : {}),
      message: `The restore saga store failed unexpectedly (${errnoOf(error) ?? (error as Error)?.name ?? "error"}). Reload the saga before deciding anything.`,
    });
  }
}
