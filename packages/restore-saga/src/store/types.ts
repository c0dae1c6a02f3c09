import type { FileOps } from "@drydock/file-lock";
import type { CrashHook } from "../internal/crash.js";
import type { StateLockOptions } from "../internal/state-lock.js";
import type { CreateEvidence, Phase, SagaEvent } from "../schema.js";

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
  /**
   * Reads only, and changes no file it finds (for read-only commands such as `drydock restores list`):
   * no lock file a dead process left is swept, a dead process's state lock is never taken over (the saga is
   * reported busy), an unpublished saga directory is reported and left, a HEAD a crash left one event
   * behind and a leftover temporary file are read past, not rewritten or removed. The short state locks
   * are still taken (a lock file made and removed), so nothing is read mid-write. Every write is refused
   * with INVALID_ARGUMENT.
   */
  readOnly?: boolean;
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
  /** True when this load settled a HEAD left one event behind by a crash (read-only: read past it, not rewritten). */
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
