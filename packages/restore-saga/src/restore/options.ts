import type { FileOps, LockOptions } from "@drydock/file-lock";
import type { CheckpointStore } from "../checkpoints/index.js";
import type { CrashHook } from "../internal/crash.js";
import type { Phase } from "../schema.js";
import type { SagaFence, SagaStore } from "../store/index.js";
import type { HeldWorkspaceLock, WorkspaceLease } from "../workspace-lock/index.js";

/**
 * Every named crash point of a restore, in the order a successful restore passes them. Points marked
 * "repeats" fire once per event / per change; a crash sweep names the k-th occurrence as `name#k`.
 */
export const RESTORE_CRASH_POINTS = [
  /** repeats: after the genesis HEAD of a new saga (only in create). */
  "saga.after-genesis-head",
  /** repeats: an event is on disk, HEAD still names its predecessor (rolled forward by the next load). */
  "saga.after-event-published",
  /** repeats: event and HEAD are both settled. */
  "saga.after-head-published",
  /** `created` is durable; no lock is held yet. Recovery: lock-free abort once the actor is dead. */
  "restore.after-created",
  /** The workspace lock is on disk; `locked` is not journaled yet. */
  "restore.after-lock-acquired",
  "restore.after-locked",
  "restore.after-prepared",
  /** The intent is durable: from here a failure needs recovery, never a silent abort. */
  "restore.after-intent-committed",
  /** Safety checkpoint: blobs stored, manifest not yet written. */
  "checkpoint.after-blobs",
  /** Safety checkpoint manifest written, `safety_ready` not yet journaled. */
  "checkpoint.after-manifest",
  "restore.after-safety-checkpoint",
  "restore.after-safety-ready",
  /** Files may change from here: recovery rolls back through the safety checkpoint. */
  "restore.after-mutation-started",
  /** repeats: one workspace change is in place. */
  "restore.after-entry-applied",
  "restore.after-workspace-applied",
  /** `completed` is durable; the lock is still held. Recovery: release. */
  "restore.after-completed",
  /** The lock is released; the saga is not archived yet. */
  "restore.after-release",
  /** After the archive rename of the saga directory. */
  "saga.after-archive-rename",
  "restore.after-archive",
  /** repeats (rollback only): one change of the rollback is in place. */
  "rollback.after-entry-applied",
] as const;

export type RestoreCrashPoint = (typeof RESTORE_CRASH_POINTS)[number];

export interface RestoreOptions {
  dataDir: string;
  workspaceRoot: string;
  checkpointId: string;
  /** Defaults to `restore-<uuid>`. */
  operationId?: string;
  /** Tests only: called at every point of RESTORE_CRASH_POINTS. */
  crash?: CrashHook;
  fs?: FileOps;
  now?: () => number;
  /** How long to wait for a running restore of this (or an overlapping) workspace, ms (default 5000). */
  lockWaitMs?: number;
  isProcessAlive?: (pid: number) => boolean;
  identity?: LockOptions["identity"];
  /**
   * Called once the workspace lock is held, before the restore records `locked`: the caller's last check
   * that this is still the workspace it means. The checkpoint is read, and the saga bound to the path,
   * before the lock can be taken, so a caller whose workspaces belong to something that can be deleted and
   * created again under the same path (a bot server's bot) checks here, under the lock that its deletion
   * also needs, that it was not. A reason (a string) refuses the restore before its intent, nothing changed:
   * the saga is aborted and archived, the lock released, and WORKSPACE_MISMATCH is thrown with that reason.
   */
  confirmWorkspace?: () => string | null | Promise<string | null>;
  /**
   * Flush checkpoint blobs and restored files (default true). `false` keeps every change atomic for a
   * crashed PROCESS (rename is atomic, the page cache survives a SIGKILL) but not durable across a power
   * loss: tests only. Saga events are always flushed.
   */
  durable?: boolean;
}

export interface ArchiveWarning {
  code: string;
  message: string;
  commitState: string | null;
}

export interface RestoreResult {
  operationId: string;
  phase: Phase;
  seq: number;
  headHash: string;
  /** Changes made to the workspace. */
  targetCount: number;
  archived: boolean;
  /** Set when the saga could not be archived (the restore itself succeeded). */
  warning: ArchiveWarning | null;
}

export interface RollbackOptions {
  dataDir: string;
  workspaceRoot: string;
  operationId: string;
  /** The exact saga head the caller decided on. */
  fence: SagaFence;
  /** A lease on the workspace for THIS operation (normally from a takeover of its dead owner). */
  lease: WorkspaceLease;
  /** Names this rollback cycle in its events (default a new uuid-based id). */
  recoveryRequestId?: string;
  crash?: CrashHook;
  fs?: FileOps;
  now?: () => number;
  /** See RestoreOptions.durable. */
  durable?: boolean;
}

/** The workspace lock as a restore takes it: once its saga is created, for that saga's operation id. */
export interface RestoreWorkspaceLock {
  acquire(transactionId: string): Promise<HeldWorkspaceLock>;
}

/**
 * Where an apply stages files before it renames them into the workspace: `dir`, this workspace's own (an
 * apply holding its lock may sweep what a dead apply left there), inside `dataDir`, a directory outside
 * the workspace on a file system the rename can cross from.
 */
export interface RestoreStaging {
  dataDir: string;
  dir: string;
}

/**
 * What a restore works with, given to it instead of opened from a data directory inside: the saga store of
 * the workspace, the checkpoint store, the workspace lock and the staging directory. `openRestoreStores`
 * builds the ones `restoreCheckpoint` has always used (all under one `dataDir`); a storage backend passes
 * its own stores here.
 */
export interface RestoreStores {
  /** The saga store of the workspace being restored (`sagas.workspaceRoot` is that workspace). */
  sagas: SagaStore;
  checkpoints: CheckpointStore;
  workspaceLock: RestoreWorkspaceLock;
  staging: RestoreStaging;
}

/** What `restoreCheckpointWith` takes beside its stores: `RestoreOptions` without what opens them. */
export type RestoreRunOptions = Pick<
  RestoreOptions,
  "workspaceRoot" | "checkpointId" | "operationId" | "crash" | "fs" | "confirmWorkspace" | "durable"
>;

/** What `rollbackFromSafetyCheckpointWith` takes beside its stores (it needs no lock source: it has a lease). */
export type RollbackRunOptions = Omit<RollbackOptions, "dataDir" | "now">;
