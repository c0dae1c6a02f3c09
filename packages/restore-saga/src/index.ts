// @drydock/restore-saga: hash-chained restore saga store, phase machine, workspace lock, checkpoints and
// the restore orchestrator. Public API only; internals live in src/internal/.

// Workspace lock
export type { TornLock } from "@drydock/file-lock";
// Checkpoints
export {
  type CapturedWorkspace,
  type CaptureOptions,
  type CheckpointStore,
  type CheckpointStoreOptions,
  type CheckpointSummary,
  type CreatedCheckpoint,
  MAX_CHECKPOINT_FILE_BYTES,
  openCheckpointStore,
  type VerifiedManifest,
} from "./checkpoints.js";
// Errors
export {
  type CommitState,
  isSagaError,
  SAGA_ERROR_STATUS,
  SagaError,
  type SagaErrorCode,
  type SagaErrorDetails,
  type SagaErrorInit,
} from "./errors.js";
// Canonical JSON and digests (what the hash chain is computed over)
export { canonicalJson, domainDigest } from "./internal/canonical.js";
export type { CrashHook } from "./internal/crash.js";
// Phase machine
export {
  basePhase,
  checkProgression,
  isTerminalPhase,
  isTransitionAllowed,
  PHASE_EVIDENCE,
  PHASES,
  PRE_MUTATION_PHASES,
  RECOVERY_PHASES,
  ROLLBACK_BASE_PHASES,
  TERMINAL_PHASES,
  TRANSITIONS,
} from "./phases.js";
// Orchestrator
export {
  type ArchiveWarning,
  findUnsettledRestore,
  isAbortable,
  RESTORE_CRASH_POINTS,
  type RestoreCrashPoint,
  type RestoreOptions,
  type RestoreResult,
  type RollbackOptions,
  restoreCheckpoint,
  rollbackBlockers,
  rollbackFromSafetyCheckpoint,
  type UnsettledRestore,
} from "./restore.js";
// Formats
export {
  AbortedEvidenceSchema,
  CHECKPOINT_ID_PATTERN,
  type CheckpointManifest,
  CheckpointManifestSchema,
  type CompletedEvidence,
  CompletedEvidenceSchema,
  type CreatedEvidence,
  CreatedEvidenceSchema,
  type CreateEvidence,
  CreateEvidenceSchema,
  HASH_PATTERN,
  type ManifestEntry,
  ManifestEntrySchema,
  OPERATION_ID_PATTERN,
  type Phase,
  PhaseSchema,
  type RecoveryRequiredEvidence,
  RecoveryRequiredEvidenceSchema,
  type RecoveryStartedEvidence,
  RecoveryStartedEvidenceSchema,
  type SagaEvent,
  SagaEventSchema,
  type SagaHead,
  SagaHeadSchema,
  type SagaPurgeReceipt,
  SagaPurgeReceiptSchema,
  type WorkspaceLockOwner,
  WorkspaceLockOwnerSchema,
  type WorkspaceLockPayload,
  WorkspaceLockPayloadSchema,
  type WorkspaceLockPurpose,
} from "./schema.js";
// Saga store
export {
  type AdvanceInput,
  type ArchiveResult,
  DEFAULT_SAGA_LIMITS,
  EVENT_HASH_DOMAIN,
  eventHash,
  HEAD_ANCHOR_DOMAIN,
  openSagaStore,
  type PendingDiagnostic,
  type PendingList,
  type PendingSaga,
  type PurgeResult,
  type RemoveOrphanResult,
  type SagaFence,
  type SagaLimits,
  type SagaState,
  type SagaStore,
  type SagaStoreOptions,
} from "./store/index.js";
export {
  acquireWorkspaceLock,
  type HeldWorkspaceLock,
  inspectWorkspaceLock,
  inspectWorkspaceLockState,
  ownerDigest,
  type ReapDeadEditLocksOptions,
  type ReapDeadEditLocksResult,
  reapDeadEditLocks,
  takeoverWorkspaceLock,
  tornLockDigest,
  WORKSPACE_EDIT_LOCK_PURPOSE,
  WORKSPACE_LOCK_PURPOSE,
  type WorkspaceLease,
  type WorkspaceLockBaseOptions,
  type WorkspaceLockFileIdentity,
  type WorkspaceLockOptions,
  type WorkspaceLockState,
  type WorkspaceOwnerRecoveryLockOptions,
  type WorkspaceRecoveryLockOptions,
  type WorkspaceTornRecoveryLockOptions,
  withWorkspaceLock,
  withWorkspaceRecoveryLock,
  workspaceLockPath,
} from "./workspace-lock.js";
