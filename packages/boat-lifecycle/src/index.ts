/**
 * @drydock/boat-lifecycle — provision, delete, inventory and startup reconciliation of boat.dev Boats,
 * composed from the typed client and the two journals so that no crash, lost response or second process
 * bills a second Boat, loses a deletion fence or sends a blind second DELETE.
 */

// Crash points (test hook)
export { type CrashHook, LIFECYCLE_CRASH_POINTS, type LifecycleCrashPoint, noCrash } from "./crash.js";
// Errors
export {
  isLifecycleError,
  LIFECYCLE_ERROR_STATUS,
  LIFECYCLE_MESSAGES,
  LifecycleError,
  type LifecycleErrorCode,
  type LifecycleErrorInit,
} from "./errors.js";
export type {
  LifecycleClient,
  LifecycleCreateJournal,
  LifecycleDeleteJournal,
  LifecycleLogger,
  Sleep,
} from "./internal/context.js";
export { deletionInFlightLeftMs } from "./internal/deletion.js";
export {
  INVENTORY_LIST_PAGES,
  INVENTORY_PAGE_DEFAULT,
  INVENTORY_PAGE_MAX,
  type InventoryPage,
  type InventoryPageOptions,
} from "./internal/inventory.js";
export type { NameSweepOptions, NameSweepStatus } from "./internal/name-sweep.js";
export type { ProvisionResult } from "./internal/provision.js";

// Retry and polling schedules (data, so callers and docs can quote them)
export {
  DELETE_IN_FLIGHT_MS,
  DELETE_POLL_SCHEDULE_MS,
  IN_PROGRESS_BACKOFF_MS,
  MAX_RETRY_AFTER_MS,
} from "./internal/retry.js";
// The lifecycle
export {
  type BoatLifecycle,
  type BoatLifecycleOptions,
  CREATE_KEY_RETENTION_MS,
  createBoatLifecycle,
  type DeleteBoatInput,
  type ProvisionOptions,
  type SideEffect,
} from "./lifecycle.js";
// Deterministic names
export {
  classifyName,
  environmentScope,
  legacyBoatName,
  type NameKind,
  scopedBoatName,
  scopeOfBoatName,
} from "./names.js";

// Schemas
export {
  BOAT_ID,
  BOT_ID,
  type Boat,
  boatSchema,
  CREATE_REQUEST_BODY,
  type DeletionOutcome,
  deletionOutcomeSchema,
  type InventoryItem,
  inventoryItemSchema,
  OPERATION_ID,
  type RecoveryReport,
  recoveryReportSchema,
} from "./schema.js";
