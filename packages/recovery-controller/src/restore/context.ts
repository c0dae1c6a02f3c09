import type { RecoveryRollback, RecoverySagaStore, RecoveryWorkspaceLock, WorkspaceOwner } from "../ports.js";
import type { Liveness } from "./rules.js";

/**
 * What every part of the restore recovery controller shares: the ports, the liveness judges and the start of
 * every printed command. Built once by `createRestoreRecoveryController`; the modules beside this one are
 * top-level functions that take it.
 */
export interface RestoreContext {
  readonly workspaceRoot: string;
  readonly store: RecoverySagaStore;
  /** The lock port, with a takeover refused for a live owner reported as OWNER_CONFLICT. */
  readonly lock: RecoveryWorkspaceLock;
  readonly rollback: RecoveryRollback;
  /** `drydock --data-dir <dir>`: the start of every command a message names. */
  readonly prefix: string;
  readonly liveness: Liveness;
  /** Liveness of a lock owner, for the preview and the foreign-lock words. */
  isOwnerAlive(owner: WorkspaceOwner): boolean;
  newRequestId(): string;
  /** Whether the lock port can read a torn lock and take it over (the default port can). */
  readonly tornTakeover: boolean;
}

/** A recovery that failed and kept the lock names the command that shows what is eligible now. */
export function withShowCommand(ctx: RestoreContext, error: unknown, operationId: string): unknown {
  if (error instanceof Error && !Object.isFrozen(error))
    error.message = `${error.message} Run \`${ctx.prefix} restores show ${operationId}\` for it and its exact command.`;
  return error;
}

export function errorCodeOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : undefined;
}
