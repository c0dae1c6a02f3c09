import { realpathSync } from "node:fs";
import { join } from "node:path";
import { RESTORE_SAGAS_DIR } from "@drydock/facts";
import type { LockIdentity } from "@drydock/file-lock";
import {
  inspectWorkspaceLock,
  inspectWorkspaceLockState,
  openSagaStore,
  ownerDigest,
  rollbackBlockers,
  rollbackFromSafetyCheckpoint,
  tornLockDigest,
  type WorkspaceLease,
  withWorkspaceLock,
  withWorkspaceRecoveryLock,
  workspaceLockPath,
} from "@drydock/restore-saga";
import type { RecoveryRollback, RecoverySagaStore, RecoveryWorkspaceLock, WorkspaceOwner } from "./ports.js";

/** Where the CLI and server keep restore sagas: `<dataDir>/restore-sagas`. */
export function sagaStateDir(dataDir: string): string {
  return join(dataDir, RESTORE_SAGAS_DIR);
}

/** The real store, workspace lock and rollback for one workspace of a drydock data directory. */
export function defaultRestorePorts(options: {
  dataDir: string;
  workspaceRoot: string;
  isProcessAlive?: (pid: number) => boolean;
  /** The machine's identity (boot id, boot time, start times) as file-lock judges liveness by it. */
  identity?: LockIdentity;
  /** The saga store opened read-only (previews of read-only commands; see the controller's option). */
  readOnly?: boolean;
}): {
  store: RecoverySagaStore;
  lock: RecoveryWorkspaceLock;
  rollback: RecoveryRollback;
} {
  const { dataDir, workspaceRoot } = options;
  const probe = {
    ...(options.isProcessAlive ? { isProcessAlive: options.isProcessAlive } : {}),
    ...(options.identity ? { identity: options.identity } : {}),
  };
  const store = openSagaStore({
    stateDir: sagaStateDir(dataDir),
    workspaceRoot,
    ...(options.readOnly ? { readOnly: true } : {}),
  });
  const lock: RecoveryWorkspaceLock = {
    async inspect() {
      return inspectWorkspaceLock({ dataDir, workspaceRoot, ...probe });
    },
    ownerDigest: (owner: WorkspaceOwner) => ownerDigest(owner),
    withRecovery(operationId, expectedOwner, fn) {
      return withWorkspaceRecoveryLock(
        {
          dataDir,
          workspaceRoot,
          transactionId: operationId,
          expectedOwner,
          ...probe,
        },
        (lease) => fn(lease),
      );
    },
    withFresh(operationId, fn) {
      // waitMs 0: a live holder is refused at once (WORKSPACE_LOCKED), a dead one is never taken over here
      // (RECOVERY_REQUIRED), and an overlapping workspace's lock refuses it the same way.
      return withWorkspaceLock(
        { dataDir, workspaceRoot, transactionId: operationId, waitMs: 0, ...probe },
        (lease) => fn(lease),
      );
    },
    path: () => workspaceLockPath(dataDir, realpathSync(workspaceRoot)),
    async inspectState() {
      return inspectWorkspaceLockState({ dataDir, workspaceRoot, ...probe });
    },
    tornDigest: (torn) => tornLockDigest(torn),
    withTornRecovery(operationId, expectedTorn, fn) {
      return withWorkspaceRecoveryLock(
        { dataDir, workspaceRoot, transactionId: operationId, expectedTorn, ...probe },
        (lease) => fn(lease),
      );
    },
  };
  const rollback: RecoveryRollback = {
    blockers: (operationId) =>
      rollbackBlockers({
        dataDir,
        workspaceRoot,
        operationId,
        ...(options.readOnly ? { readOnly: true } : {}),
      }),
    run: ({ operationId, fence, lease, recoveryRequestId }) =>
      rollbackFromSafetyCheckpoint({
        dataDir,
        workspaceRoot,
        operationId,
        fence,
        // The lease handed to the callback of withRecovery is restore-saga's own WorkspaceLease.
        lease: lease as unknown as WorkspaceLease,
        recoveryRequestId,
      }),
  };
  return { store, lock, rollback };
}
