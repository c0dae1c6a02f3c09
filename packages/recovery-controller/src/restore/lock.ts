/**
 * Reading the workspace lock as the controller acts on it (nothing, an owner, or a file torn by a power loss),
 * binding it to the owner digest an operator previewed, and the words for a lock file nobody can act on.
 */
import { statSync } from "node:fs";
import { isLockError } from "@drydock/file-lock";
import { isSagaError, SagaError } from "@drydock/restore-saga";
import { recoveryError } from "../errors.js";
import { shellQuote } from "../internal/command.js";
import { foreignLockHolder } from "../internal/lock-holder.js";
import type { RecoveryWorkspaceLock, SagaView, TornWorkspaceLock, WorkspaceOwner } from "../ports.js";
import type { RestoreContext } from "./context.js";

/** The workspace lock as the controller acts on it: nothing, an owner, or a file torn by a power loss. */
export type LockRead =
  | { kind: "absent" }
  | { kind: "owner"; owner: WorkspaceOwner }
  | { kind: "torn"; torn: TornWorkspaceLock; digest: string; path: string | null };

const ABSENT: LockRead = { kind: "absent" };

/**
 * A takeover refused because the lock's owner still runs comes from restore-saga as WORKSPACE_LOCKED; the
 * controller's callers are told OWNER_CONFLICT with `ownerAlive: true`, as for every other live owner
 * (its words kept). Only a refusal of the takeover itself: an error from inside `fn` passes as it is.
 */
export function refusalsAsOwnerConflict(port: RecoveryWorkspaceLock): RecoveryWorkspaceLock {
  return {
    ...port,
    async withRecovery(operationId, expectedOwner, fn) {
      let entered = false;
      try {
        return await port.withRecovery(operationId, expectedOwner, (lease) => {
          entered = true;
          return fn(lease);
        });
      } catch (error) {
        if (entered || !isSagaError(error) || error.code !== "WORKSPACE_LOCKED") throw error;
        throw recoveryError("OWNER_CONFLICT", error.message, { operationId, ownerAlive: true });
      }
    },
  };
}

/** Whether the lock port can read a torn lock and take it over (the default port can). */
export function canTakeOverTorn(lock: RecoveryWorkspaceLock): boolean {
  return (
    lock.inspectState !== undefined && lock.tornDigest !== undefined && lock.withTornRecovery !== undefined
  );
}

/**
 * The lock file, read-only: nothing, an owner, or (with a port that can take it over) a file torn by a
 * power loss. Any other unreadable file is an error that says what happened and what a person can do.
 */
export async function inspectLock(
  ctx: RestoreContext,
  operationId: string,
  saga: SagaView | null,
): Promise<LockRead> {
  const { lock } = ctx;
  if (ctx.tornTakeover) {
    let state: Awaited<ReturnType<NonNullable<RecoveryWorkspaceLock["inspectState"]>>>;
    try {
      state = await lock.inspectState!(operationId);
    } catch (error) {
      throw unreadableLockError(ctx, error, saga, operationId);
    }
    if (state.kind === "absent") return ABSENT;
    if (state.kind === "owner") return { kind: "owner", owner: state.owner };
    if (state.torn === null) throw unreadableStateError(ctx, state, saga, operationId);
    return {
      kind: "torn",
      torn: state.torn,
      digest: `torn:${lock.tornDigest!(state.torn)}`,
      path: state.path,
    };
  }
  try {
    const owner = await lock.inspect(operationId);
    return owner === null ? ABSENT : { kind: "owner", owner };
  } catch (error) {
    throw unreadableLockError(ctx, error, saga, operationId);
  }
}

/** The workspace lock if it is this operation's (or torn, or absent); another restore's lock is a conflict. */
export async function ownerOf(
  ctx: RestoreContext,
  operationId: string,
  saga: SagaView | null,
): Promise<LockRead> {
  const read = await inspectLock(ctx, operationId, saga);
  if (read.kind === "owner" && read.owner.payload.transactionId !== operationId) {
    throw recoveryError(
      "OWNER_CONFLICT",
      `The workspace is locked by ${foreignLockHolder(read.owner, ctx.isOwnerAlive(read.owner), ctx.prefix)}.`,
      { operationId, ownerAlive: ctx.isOwnerAlive(read.owner) },
    );
  }
  return read;
}

function digestOf(ctx: RestoreContext, read: LockRead): string | null {
  return read.kind === "owner" ? ctx.lock.ownerDigest(read.owner) : read.kind === "torn" ? read.digest : null;
}

/** The lock, only if it is exactly what the operator previewed (`expectedOwnerDigest`). */
export async function inspectBound(
  ctx: RestoreContext,
  operationId: string,
  expectedOwnerDigest: string | null,
  saga: SagaView | null = null,
): Promise<LockRead> {
  const read = await ownerOf(ctx, operationId, saga);
  const actual = digestOf(ctx, read);
  if (actual === expectedOwnerDigest) return read;
  const what =
    read.kind === "absent"
      ? "disappeared"
      : read.kind === "torn"
        ? expectedOwnerDigest?.startsWith("torn:")
          ? "was replaced by another unreadable file"
          : "is now an unreadable file (torn by a power loss)"
        : "changed owner";
  throw recoveryError(
    "OWNER_CONFLICT",
    `The workspace lock of restore ${operationId} ${what} since it was previewed; nothing was changed. Preview again.`,
    { operationId, expectedOwnerDigest, actualOwnerDigest: actual },
  );
}

/** Where the workspace lock is, for messages; null when the port cannot say. */
function lockPath(ctx: RestoreContext): string | null {
  try {
    return ctx.lock.path?.() ?? null;
  } catch {
    return null;
  }
}

/**
 * The workspace lock file exists but holds no owner this controller may act on: `unreadableLockError` for
 * the error of `inspect`, `unreadableStateError` for an `unreadable` state that is not torn. It is left
 * exactly as it is; this says what happened and what a person can do. A LOCK_IO (this process could not
 * read it) is not this.
 */
function unreadableLockError(
  ctx: RestoreContext,
  error: unknown,
  saga: SagaView | null,
  operationId: string,
): unknown {
  if (!isSagaError(error) || error.code !== "LOCK_FAILED") return error;
  const cause = (error as { cause?: unknown }).cause;
  if (isLockError(cause) && cause.code === "LOCK_IO") return error;
  const what = isLockError(cause)
    ? cause.code === "LOCK_UNREADABLE"
      ? "it could not be read"
      : "it is not a valid lock owner file"
    : "it is not a workspace lock of this workspace";
  const path = lockPath(ctx);
  let ctimeMs: number | null = null;
  if (path !== null) {
    try {
      ctimeMs = statSync(path).ctimeMs;
    } catch {
      // Gone or unreadable since: the words below still hold.
    }
  }
  return describeUnreadable(
    ctx,
    { what, path, ctimeMs, written: !isLockError(cause), cause: error },
    saga,
    operationId,
  );
}

function unreadableStateError(
  ctx: RestoreContext,
  state: { path: string; reason: string; identity: { ctimeMs: number } | null },
  saga: SagaView | null,
  operationId: string,
): SagaError {
  const written = state.reason.includes("not a workspace lock");
  return describeUnreadable(
    ctx,
    {
      what: state.reason,
      path: state.path,
      ctimeMs: state.identity?.ctimeMs ?? null,
      written,
      cause: undefined,
    },
    saga,
    operationId,
  );
}

function describeUnreadable(
  ctx: RestoreContext,
  file: { what: string; path: string | null; ctimeMs: number | null; written: boolean; cause: unknown },
  saga: SagaView | null,
  operationId: string,
): SagaError {
  const { path } = file;
  const { prefix } = ctx;
  const boot = ctx.liveness.bootTimeMs();
  const beforeBoot = file.ctimeMs !== null && boot !== undefined && file.ctimeMs < boot;
  let changed = "";
  if (file.ctimeMs !== null && boot !== undefined) {
    changed = beforeBoot
      ? " It was last changed before this machine booted, so whoever wrote it is no longer running."
      : " It was last changed after this machine booted, so a process of this boot may have written it.";
  } else if (boot === undefined) {
    changed = " This machine's boot time is unknown, so whether a power loss tore it cannot be told.";
  }
  // Why it is not taken over, in the one case the controller could otherwise take it over.
  let why: string;
  if (!ctx.tornTakeover) why = " drydock cannot take over a lock whose owner it cannot read here.";
  else if (file.written)
    why =
      " It holds a complete lock file, written on purpose, so it is not a lock torn by a power loss and is never taken over.";
  else if (beforeBoot)
    why =
      " It is not a lock torn by a power loss either (drydock could not identify the file), so it is not taken over.";
  else
    why = ` drydock takes over an unreadable lock only when it was last changed before this machine booted (torn by a power loss); this one is not, so it is left to a person.`;
  const where = path ?? "of this workspace";
  const unsettled = saga !== null && !saga.terminal;
  const advice = unsettled
    ? ` Restore ${operationId} (${saga.phase}) is not settled and this lock may guard it: do not delete the lock.${why} To settle the restore: stop every drydock server and CLI using this data directory (so no restore can start), move the file aside and keep it${path === null ? "" : ` (mv ${shellQuote(path)} ${shellQuote(`${path}.unreadable`)})`}, then run \`${prefix} restores show ${operationId}\` again and paste the command it prints (--expected-owner-digest none): it takes a fresh lock only if nothing holds this or an overlapping workspace, and only once every process the restore recorded is proven dead.`
    : ` Restore ${operationId} ${saga === null ? "could not be read" : `has ended (${saga.phase})`}, so this lock does not guard it; if \`${prefix} restores list\` shows no unsettled restore of this workspace and none is running, move the file away.`;
  return new SagaError({
    code: "LOCK_FAILED",
    ...(file.cause === undefined ? {} : { cause: file.cause }),
    operationId,
    message: `The workspace lock ${where} is unreadable (${file.what}); it was left exactly as it is.${changed}${advice}`,
  });
}
