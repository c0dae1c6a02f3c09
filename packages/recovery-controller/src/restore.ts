import { randomUUID } from "node:crypto";
import { resolve } from "node:path";
import { createSystemIdentity, type LockIdentity } from "@drydock/file-lock";
import { defaultRestorePorts } from "./defaults.js";
import { recoveryError } from "./errors.js";
import { drydockCommandPrefix } from "./internal/command.js";
import { type OwnerClaim, ownerMayBeAlive } from "./internal/liveness.js";
import type { RecoveryRollback, RecoverySagaStore, RecoveryWorkspaceLock, WorkspaceOwner } from "./ports.js";
import { type AbortInput, abort, complete, release, rollback } from "./restore/actions.js";
import type { RestoreContext } from "./restore/context.js";
import { canTakeOverTorn, refusalsAsOwnerConflict } from "./restore/lock.js";
import { preview } from "./restore/preview.js";
import type { RestoreActionResult, RestoreFence, RestorePreview } from "./schema.js";

export type { AbortInput } from "./restore/actions.js";
export type { RecoveryFailureDiagnostics } from "./restore/hold.js";

export interface RestoreRecoveryControllerOptions {
  /** The drydock data directory (sagas under `restore-sagas`, locks under `locks`). */
  dataDir: string;
  /** The workspace whose restore sagas this controller settles. */
  workspaceRoot: string;
  store?: RecoverySagaStore;
  lock?: RecoveryWorkspaceLock;
  rollback?: RecoveryRollback;
  /**
   * Liveness probe like `process.kill(pid, 0)` (return true = alive, false or throw ESRCH = dead). Used for
   * the `created` event's initiator (a lock-free abort must prove it dead), for the preview, and passed to
   * the default workspace lock, whose takeover refuses a live owner.
   */
  isProcessAlive?: (pid: number) => boolean;
  /** Liveness of a lock owner, for the preview only; the takeover itself is judged by @drydock/file-lock. */
  isOwnerAlive?: (owner: WorkspaceOwner) => boolean;
  /**
   * The machine as @drydock/file-lock sees it (boot id, boot time, process start times); default: the real
   * one. Its boot time decides that a `created` saga written before this boot has a dead initiator, and that
   * an unreadable lock file last changed before it was torn by a power loss.
   */
  identity?: LockIdentity;
  /** Mints rollback request ids (default: a random UUID). */
  newRequestId?: () => string;
  /**
   * Start of every command a message tells a person to run; default `drydockCommandPrefix(dataDir)` (the
   * absolute data directory), so a pasted line reads this installation, whatever DRYDOCK_DATA_DIR it has.
   */
  commandPrefix?: string;
  /**
   * Previews only (read-only commands such as `drydock restores list/show` and `status`): the default saga
   * store is opened `readOnly`, so reading changes no file (no lock file swept, nothing tidied); every apply
   * is refused by that store. Ignored when `store` is passed.
   */
  readOnly?: boolean;
}

export interface RestoreRecoveryController {
  readonly workspaceRoot: string;
  preview(operationId: string): Promise<RestorePreview>;
  abort(operationId: string, input: AbortInput): Promise<RestoreActionResult>;
  release(operationId: string, fence: Partial<RestoreFence>): Promise<RestoreActionResult>;
  rollback(operationId: string, fence: Partial<RestoreFence>): Promise<RestoreActionResult>;
  /**
   * Finishes a restore whose file work is done (base `workspace_applied`/`session_committed`): journals
   * recovery_required → recovery_started {resume-already-completed} → completed under the lock, releases
   * it, then archives. The workspace is not touched.
   */
  complete(operationId: string, fence: Partial<RestoreFence>): Promise<RestoreActionResult>;
}

/**
 * Settles interrupted checkpoint restores, and only against the exact state an operator previewed.
 *
 * Lock order: a saga store call takes short internal locks and returns; the controller never holds one
 * while taking the workspace lock. Inside a workspace lock every store call follows workspace → saga order,
 * as the orchestrator's do, so the two can never deadlock.
 *
 * A phase is a durable lower bound on side effects: `mutation_started` may have changed files, so abort
 * refuses it and everything after (abort reaches up to `safety_ready`: see SAFE_ABORT_BASES); only rollback
 * (which restores the safety checkpoint) settles a restore that may have written part of its changes, and
 * complete finishes one that wrote all of them (`workspace_applied`).
 *
 * A saga whose retained lock is gone (removed by hand) is settled under a fresh lock for the same operation
 * (`expectedOwnerDigest: null`, "no owner"), and only once every process the saga recorded is proven dead;
 * the fresh acquisition refuses if any lock holds this or an overlapping workspace.
 */
export function createRestoreRecoveryController(
  options: RestoreRecoveryControllerOptions,
): RestoreRecoveryController {
  if (!options || typeof options !== "object") {
    throw recoveryError("INVALID_ARGUMENT", "Restore recovery options must be an object");
  }
  if (typeof options.dataDir !== "string" || options.dataDir.length === 0) {
    throw recoveryError("INVALID_ARGUMENT", "Restore recovery needs the drydock dataDir");
  }
  if (typeof options.workspaceRoot !== "string" || options.workspaceRoot.length === 0) {
    throw recoveryError("INVALID_ARGUMENT", "Restore recovery needs a workspaceRoot");
  }
  const { workspaceRoot } = options;
  const prefix = options.commandPrefix ?? drydockCommandPrefix(resolve(options.dataDir));
  // The real store, lock and rollback helper unless a test (or the CLI) passes its own.
  const defaults =
    options.store && options.lock && options.rollback
      ? null
      : defaultRestorePorts({
          dataDir: options.dataDir,
          workspaceRoot,
          ...(options.isProcessAlive ? { isProcessAlive: options.isProcessAlive } : {}),
          ...(options.identity ? { identity: options.identity } : {}),
          ...(options.readOnly ? { readOnly: true } : {}),
        });
  const store = options.store ?? defaults!.store;
  const lock = refusalsAsOwnerConflict(options.lock ?? defaults!.lock);
  const rollbackPort = options.rollback ?? defaults!.rollback;
  const seams = {
    ...(options.isProcessAlive ? { isProcessAlive: options.isProcessAlive } : {}),
    ...(options.identity ? { identity: options.identity } : {}),
  };
  const isProcessAlive = (pid: number) => ownerMayBeAlive({ pid }, seams);
  const isClaimAlive = (claim: OwnerClaim) => ownerMayBeAlive(claim, seams);
  const isOwnerAlive = options.isOwnerAlive ?? ((owner: WorkspaceOwner) => isClaimAlive(owner));
  const newRequestId = options.newRequestId ?? (() => `rb-${randomUUID()}`);
  let systemIdentity: LockIdentity | undefined;
  /** When this machine booted (wall-clock ms), as file-lock reads it; undefined where unknown. */
  const bootTimeMs = (): number | undefined => {
    if (options.identity) return options.identity.bootTimeMs();
    systemIdentity ??= createSystemIdentity();
    return systemIdentity.bootTimeMs();
  };
  const ctx: RestoreContext = {
    workspaceRoot,
    store,
    lock,
    rollback: rollbackPort,
    prefix,
    liveness: { bootTimeMs, isProcessAlive, isClaimAlive },
    isOwnerAlive,
    newRequestId,
    tornTakeover: canTakeOverTorn(lock),
  };
  return {
    workspaceRoot,
    preview: (operationId) => preview(ctx, operationId),
    abort: (operationId, input) => abort(ctx, operationId, input),
    release: (operationId, fence) => release(ctx, operationId, fence),
    rollback: (operationId, fence) => rollback(ctx, operationId, fence),
    complete: (operationId, fence) => complete(ctx, operationId, fence),
  };
}
