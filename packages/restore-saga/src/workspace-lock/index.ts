// The workspace lock (see types.ts for what it is): types.ts, inspect.ts (reading it), overlap.ts (the
// registry scan), lease.ts (one acquisition and its lease), acquire.ts (acquire and takeovers), run.ts
// (running under it), reap.ts (dead edit locks).
export { acquireWorkspaceLock, takeoverWorkspaceLock } from "./acquire.js";
export {
  inspectWorkspaceLock,
  inspectWorkspaceLockState,
  tornLockDigest,
  workspaceLockPath,
} from "./inspect.js";
export { type ReapDeadEditLocksOptions, type ReapDeadEditLocksResult, reapDeadEditLocks } from "./reap.js";
export { lostWithCallbackError, withWorkspaceLock, withWorkspaceRecoveryLock } from "./run.js";
export {
  type HeldWorkspaceLock,
  ownerDigest,
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
} from "./types.js";
