// @drydock/file-lock: a cross-process lock file published with link(2), proof-only liveness, reaper
// election, fenced takeover. Public API only (internals live in src/internal/). Exports, by module:
//   errors   LockError, its code → status table and guard
//   fs       the FileOps seam shared by every drydock package that writes durable state
//   gc       collectLockGarbage, and its sweep of a whole directory of locks
//   identity the default host / boot / process-start facts (LockIdentity)
//   lock     acquire (async + sync), withLock, inspect, takeover, LockHandle
//   liveness the lock's own verdict on a recorded process, for previews and initiator checks
//   options  LockOptions and the crash points of every flow
//   schema   the owner and election record formats (zod)

export {
  isLockError,
  LOCK_ERROR_STATUS,
  LockError,
  type LockErrorCode,
  type LockErrorInit,
  type TornLock,
} from "./errors.js";
export type { FailNthOptions, FaultyFileOps } from "./fs.js";
export {
  errnoError,
  type FileOpName,
  type FileOps,
  failNthCall,
  flushAncestry,
  fsyncAsync,
  fsyncDirectory,
  makeDirectories,
  nodeFileOps,
} from "./fs.js";
export { collectLockGarbage, collectLockGarbageIn, type GarbageOptions } from "./gc.js";
export { isProcessLevelErrno } from "./internal/files.js";
export { createSystemIdentity } from "./internal/identity.js";
export { judgeOwnerLiveness, type ProcessClaim } from "./liveness.js";
export type { InspectOptions, LockHandle } from "./lock.js";
export { acquireLock, acquireLockSync, inspectLock, takeoverLock, withLock, withLockSync } from "./lock.js";
export {
  LOCK_CRASH_POINTS,
  type LockCrashPoint,
  type LockIdentity,
  type LockOptions,
  type ProcessState,
} from "./options.js";
export { type LockOwner, LockOwnerSchema, type ReaperRecord, ReaperRecordSchema } from "./schema.js";
