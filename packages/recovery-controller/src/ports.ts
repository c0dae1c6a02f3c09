/**
 * What the restore recovery controller needs from @drydock/restore-saga, as narrow interfaces. The default
 * implementations wrap the real saga store, workspace lock and rollback helper (see `defaults.ts`); tests
 * wrap those to inject a failure at an exact step.
 */

export interface SagaEventView {
  readonly seq: number;
  readonly phase: string;
  readonly timestamp: string;
  readonly prevHash: string | null;
  readonly hash: string;
  readonly evidence: Readonly<Record<string, unknown>>;
}

export interface SagaView {
  readonly operationId: string;
  readonly seq: number;
  readonly headHash: string;
  readonly phase: string;
  readonly basePhase: string | null;
  readonly terminal: boolean;
  readonly events: readonly SagaEventView[];
  readonly archived?: boolean;
}

export interface ArchiveView {
  readonly alreadyArchived: boolean;
  readonly phase: string;
  readonly seq: number;
  readonly headHash: string;
}

export interface RecoverySagaStore {
  /** NOT_FOUND (a SagaError) when no active saga exists, even if it is archived. */
  load(operationId: string): Promise<SagaView>;
  loadArchived(operationId: string): Promise<SagaView>;
  advance(
    operationId: string,
    input: { expectedSeq: number; expectedHash: string; phase: string; evidence: Record<string, unknown> },
  ): Promise<SagaView>;
  /** Idempotent: an already archived saga with the exact fence answers `alreadyArchived: true`. */
  archiveTerminal(
    operationId: string,
    fence: { expectedSeq: number; expectedHash: string },
  ): Promise<ArchiveView>;
}

/** A workspace lock owner as it is on disk. Its token is secret: only its digest leaves this package. */
export interface WorkspaceOwner {
  readonly pid: number;
  readonly token: string;
  readonly host?: string | undefined;
  readonly bootId?: string | undefined;
  readonly startTime?: number | undefined;
  readonly payload: {
    readonly transactionId: string;
    readonly workspaceRoot: string;
    readonly purpose: string;
  };
}

/**
 * A workspace lock file torn by a power loss (file-lock's `TornLock`): its bytes hold no owner and it was
 * last changed before this machine booted, so whoever wrote it is gone. Only this very file (device, inode,
 * size, ctime) may be taken over.
 */
export interface TornWorkspaceLock {
  readonly torn: true;
  readonly dev: number;
  readonly ino: number;
  readonly size: number;
  readonly ctimeMs: number;
}

/** What the workspace's lock file holds (restore-saga's `WorkspaceLockState`), read-only. */
export type WorkspaceLockView =
  | { readonly kind: "absent" }
  | { readonly kind: "owner"; readonly owner: WorkspaceOwner }
  | {
      readonly kind: "unreadable";
      readonly path: string;
      /** Why no owner could be read, for messages. */
      readonly reason: string;
      /** Set when the file is torn by a power loss and may be taken over (`withTornRecovery`). */
      readonly torn: TornWorkspaceLock | null;
      readonly identity: {
        readonly dev: number;
        readonly ino: number;
        readonly size: number;
        readonly ctimeMs: number;
      } | null;
    };

/** The lock held while recovering: the taken-over owner, now this process. */
export interface RecoveryLease {
  readonly owner: WorkspaceOwner;
  readonly ownerDigest: string;
  readonly workspaceRoot: string;
  /** Throws if the lock file no longer holds this lease's owner. */
  assertOwned(): void;
  /**
   * Keeps the lock on disk after the callback fails, so only another fenced recovery can settle the saga.
   * Always throws; the callback must let that error propagate. A lock no longer this lease's is never
   * kept: it throws LOCK_OWNERSHIP_LOST instead (and the lock port reports the loss).
   */
  retainForRecovery(reason: string): never;
}

export interface RecoveryWorkspaceLock {
  /** Read-only: the owner of this workspace's lock when it belongs to `operationId`, null when unlocked. */
  inspect(operationId: string): Promise<WorkspaceOwner | null>;
  ownerDigest(owner: WorkspaceOwner): string;
  /** Takes over `expectedOwner` (must be exactly on disk and dead), runs `fn`, releases unless retained. */
  withRecovery<T>(
    operationId: string,
    expectedOwner: WorkspaceOwner,
    fn: (lease: RecoveryLease) => Promise<T>,
  ): Promise<T>;
  /**
   * Takes a fresh lock on this workspace for `operationId` when none is on disk (a retained lock an operator
   * removed), refused if any lock holds this or an overlapping workspace; runs `fn`, releases unless
   * retained. Optional: without it, a saga whose lock is gone can only be released.
   */
  withFresh?<T>(operationId: string, fn: (lease: RecoveryLease) => Promise<T>): Promise<T>;
  /** The lock file of this workspace, for messages about it (optional). */
  path?(): string;
  /**
   * Read-only, like `inspect` (any owner, not only `operationId`'s), but an unreadable lock file is a result,
   * not an error. Optional: with it, `tornDigest` and `withTornRecovery`, a lock torn by a power loss is
   * offered for takeover (fence `torn:sha256:…`), and the controller reads the lock through it instead of
   * `inspect` (a port that wraps `inspect` must wrap this too); without them an unreadable lock is left to a
   * person.
   */
  inspectState?(operationId: string): Promise<WorkspaceLockView>;
  /** `sha256:…` of a torn lock's identity (restore-saga's `tornLockDigest`); the fence is `torn:` + it. */
  tornDigest?(torn: TornWorkspaceLock): string;
  /**
   * Takes over the torn lock file `expectedTorn` for `operationId` (refused, changing nothing, unless it is
   * still exactly that file, from before this boot, checked again under the registry lock, and no other lock
   * covers this or an overlapping workspace); runs `fn`, releases unless retained.
   */
  withTornRecovery?<T>(
    operationId: string,
    expectedTorn: TornWorkspaceLock,
    fn: (lease: RecoveryLease) => Promise<T>,
  ): Promise<T>;
}

/**
 * Rolls a restore stopped after `mutation_started` back to its safety checkpoint under the caller's lease,
 * journaling recovery_required → recovery_started → rollback_prepared → rollback_started →
 * workspace_rolled_back → rolled_back. Fails with the saga left where it stopped.
 */
export interface RecoveryRollback {
  /**
   * Read-only: why the rollback could not run now, in words for a person (empty when it could), from
   * what only the workspace can tell (something written since the restore stopped that the rollback would
   * have to delete). Optional: without it the preview reports only the saga's and the lock's blockers.
   */
  blockers?(operationId: string): Promise<string[]>;
  run(input: {
    operationId: string;
    fence: { expectedSeq: number; expectedHash: string };
    lease: RecoveryLease;
    recoveryRequestId: string;
  }): Promise<SagaView>;
}
