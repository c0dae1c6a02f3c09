// @drydock/recovery-controller: fenced operator actions. Restore recovery settles an interrupted checkpoint
// restore only against the exact saga head and lock owner an operator previewed; Boat recovery plans
// everything about Boats that needs a person and performs the one safe action for each.

// Which boat.dev a data directory belongs to
export { PROVIDER_BINDING_FILE, providerIdentity, providerMismatch, readProviderBinding } from "./binding.js";
// Boat recovery
export {
  type BoatActionOptions,
  type BoatActionResult,
  type BoatPlanOptions,
  type BoatRecovery,
  type BoatRecoveryOptions,
  type CreateRowFacts,
  createBoatRecovery,
  type RecoveryClient,
  type RecoveryCreateJournal,
  type RecoveryDeleteJournal,
  type RecoveryDeletionRecord,
  type RecoveryLifecycle,
} from "./boat.js";
export { defaultRestorePorts, sagaStateDir } from "./defaults.js";
// Errors
export {
  isRecoveryError,
  RECOVERY_ERROR_STATUS,
  RecoveryError,
  type RecoveryErrorCode,
  type RecoveryErrorDetails,
} from "./errors.js";
export { validateFence } from "./internal/fence.js";
export { type OwnerClaim, ownerMayBeAlive } from "./internal/liveness.js";
export {
  collectGarbage,
  keptByLiveProcess,
  type LockListingOptions,
  type LockRow,
  listLocks,
  lockGarbage,
  lockPaths,
} from "./locks.js";
export type {
  ArchiveView,
  RecoveryLease,
  RecoveryRollback,
  RecoverySagaStore,
  RecoveryWorkspaceLock,
  SagaEventView,
  SagaView,
  TornWorkspaceLock,
  WorkspaceLockView,
  WorkspaceOwner,
} from "./ports.js";
// What needs a person, reported the same way by the CLI and the bot server
export {
  allPending,
  drydockCommandPrefix,
  listWorkspaces,
  type NeedsPersonItem,
  type NeedsPersonPlan,
  type NeedsPersonReport,
  type NeedsPersonSource,
  type NeedsPersonTallied,
  type NeedsPersonTally,
  type NeedsPersonUnchecked,
  needsPersonReport,
  planItemNeedsAttention,
  planItemWaitMs,
  RESTORE_STALLED_MS,
  type RestoreReportGap,
  type RestoreReportItem,
  RestoreReportItemSchema,
  reportNeedsPerson,
  reportRestores,
  restoreCommand,
  shellQuote,
  strayRestoreShards,
  tallyNeedsPerson,
} from "./report.js";
// Restore recovery
export {
  type AbortInput,
  createRestoreRecoveryController,
  type RecoveryFailureDiagnostics,
  type RestoreRecoveryController,
  type RestoreRecoveryControllerOptions,
} from "./restore.js";

// Schemas
export {
  type ActionVerdict,
  ActionVerdictSchema,
  type ArchiveWarning,
  ArchiveWarningSchema,
  type BoatActionName,
  BoatActionNameSchema,
  type BoatObservation,
  BoatObservationSchema,
  type BoatPlan,
  BoatPlanSchema,
  CLOCK_SKEW_TOLERANCE_MS,
  CREATE_IN_FLIGHT_MS,
  CREATE_WINDOW_MS,
  createInFlightLeftMs,
  DIGEST_PATTERN,
  fenceInFlightLeftMs,
  type PlanItem,
  type PlanItemKind,
  PlanItemKindSchema,
  PlanItemSchema,
  type RestoreActionName,
  RestoreActionNameSchema,
  type RestoreActionResult,
  RestoreActionResultSchema,
  type RestoreFence,
  RestoreFenceSchema,
  type RestorePreview,
  RestorePreviewSchema,
  TORN_DIGEST_PATTERN,
  TornDigestSchema,
} from "./schema.js";
