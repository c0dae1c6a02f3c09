import type { BoatCreateJournal, BoatCreateRowFacts } from "@drydock/boat-create-journal";
import type { BoatDeleteJournal, BoatDeletionRecord } from "@drydock/boat-delete-journal";
import type { BoatLifecycle } from "@drydock/boat-lifecycle";
import type { BoatClient } from "@drydock/boat-provider";
import type {
  ArchiveResult,
  SagaStore,
  TornLock,
  WorkspaceLease,
  WorkspaceLockOwner,
  WorkspaceLockState,
} from "@drydock/restore-saga";

/**
 * What the restore recovery controller needs from @drydock/restore-saga: `Pick`s of its interfaces where it
 * has one (the saga store, the lease), an adapter interface where it has functions (the lock, the
 * rollback). The default implementations wrap the real saga store, workspace lock and rollback helper (see `defaults.ts`); tests
 * wrap those to inject a failure at an exact step.
 */

/**
 * The saga fields the controller and its rules read. A loaded `SagaState` satisfies it, and so does a plain
 * object literal (the rules' unit tests pass those).
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

/** What archiving answers, as the controller reads it (restore-saga's `ArchiveResult`). */
export type ArchiveView = Pick<ArchiveResult, "alreadyArchived" | "phase" | "seq" | "headHash">;

/**
 * The saga store calls the controller makes; an `openSagaStore(...)` result satisfies it. `load` answers
 * NOT_FOUND (a SagaError) when no active saga exists, even if it is archived; `archiveTerminal` is
 * idempotent (an already archived saga with the exact fence answers `alreadyArchived: true`).
 */
export type RecoverySagaStore = Pick<SagaStore, "load" | "loadArchived" | "advance" | "archiveTerminal">;

/**
 * A workspace lock owner as it is on disk (restore-saga's `WorkspaceLockOwner`). Its token is secret: only its
 * digest leaves this package.
 */
export type WorkspaceOwner = WorkspaceLockOwner;

/**
 * A workspace lock file torn by a power loss (file-lock's `TornLock`): its bytes hold no owner and it was
 * last changed before this machine booted, so whoever wrote it is gone. Only this very file (device, inode,
 * size, ctime) may be taken over.
 */
export type TornWorkspaceLock = TornLock;

/** What the workspace's lock file holds (restore-saga's `WorkspaceLockState`), read-only. */
export type WorkspaceLockView = WorkspaceLockState;

/**
 * The lock held while recovering: the taken-over owner, now this process (the fields of restore-saga's
 * `WorkspaceLease` the controller uses). `assertOwned` throws if the lock file no longer holds this lease's
 * owner. `retainForRecovery` keeps the lock on disk after the callback fails, so only another fenced
 * recovery can settle the saga: it always throws, and the callback must let that error propagate. A lock
 * no longer this lease's is never kept: it throws LOCK_OWNERSHIP_LOST instead (and the lock port reports
 * the loss).
 */
export type RecoveryLease = Pick<
  WorkspaceLease,
  "owner" | "ownerDigest" | "workspaceRoot" | "assertOwned" | "retainForRecovery"
>;

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

// ---------------------------------------------------------------------------------------------------------
// Boat recovery: the calls it makes on the journals, the lifecycle and the provider, as Picks of their own
// interfaces (so a change there reaches here).

/**
 * The create-journal calls Boat recovery makes; an `openBoatCreateJournal(...)` result satisfies it. The
 * compare-and-set forms are optional: with them a fenced adopt or retire pasted twice at once applies
 * once, and the other exits STATE_CHANGED; without them both may report success.
 */
export type RecoveryCreateJournal = Pick<
  BoatCreateJournal,
  "boatCreateRecoverySnapshot" | "adoptResolvedBoat" | "retireDeletedBoatCreate"
> &
  Partial<Pick<BoatCreateJournal, "adoptResolvedBoatOnce" | "retireDeletedBoatCreateOnce">>;

/** A create row's facts as a snapshot shows them (without `ageMs`): boat-create-journal's own. */
export type CreateRowFacts = BoatCreateRowFacts;

/** A deletion fence as the delete journal holds it. */
export type RecoveryDeletionRecord = BoatDeletionRecord;

/** The delete-journal calls Boat recovery makes; an `openBoatDeleteJournal(...)` result satisfies it. */
export type RecoveryDeleteJournal = Pick<BoatDeleteJournal, "boatDeletionSnapshot" | "getBoatDeletion">;

/**
 * The lifecycle calls Boat recovery makes; a `createBoatLifecycle(...)` result satisfies it. A fenced
 * `deleteBoat` retry passes `expectedFence`, the fence exactly as read: a compare-and-set on it.
 */
export type RecoveryLifecycle = Pick<
  BoatLifecycle,
  "boatNameFor" | "legacyBoatNameFor" | "reconcileDeletion" | "deleteBoat"
>;

/** The provider calls Boat recovery makes; a `createBoatClient(...)` result satisfies it. */
export type RecoveryClient = Pick<BoatClient, "getSandbox" | "renameSandbox" | "listSandboxes">;
