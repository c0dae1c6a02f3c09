// The restore orchestrator: a restore (run.ts), how it ends (settle.ts), the unsettled-restore rule
// (unsettled.ts) and the rollback through the safety checkpoint (rollback.ts).
export {
  type ArchiveWarning,
  RESTORE_CRASH_POINTS,
  type RestoreCrashPoint,
  type RestoreOptions,
  type RestoreResult,
  type RestoreRunOptions,
  type RestoreStaging,
  type RestoreStores,
  type RestoreWorkspaceLock,
  type RollbackOptions,
  type RollbackRunOptions,
} from "./options.js";
export {
  rollbackBlockers,
  rollbackFromSafetyCheckpoint,
  rollbackFromSafetyCheckpointWith,
} from "./rollback.js";
export { openRestoreStores, restoreCheckpoint, restoreCheckpointWith } from "./run.js";
export { findUnsettledRestore, isAbortable, type UnsettledRestore } from "./unsettled.js";
