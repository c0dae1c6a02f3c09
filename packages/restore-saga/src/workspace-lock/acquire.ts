import { join } from "node:path";
import {
  acquireLockSync,
  isLockError,
  type LockError,
  type LockHandle,
  type TornLock,
  takeoverLock,
} from "@drydock/file-lock";
import { isSagaError, SagaError } from "../errors.js";
import { lockFailed, withStateLock } from "../internal/state-lock.js";
import { type WorkspaceLockOwner, WorkspaceLockOwnerSchema } from "../schema.js";
import {
  bootTimeOf,
  invalid,
  isTornLockShape,
  parseOwner,
  readOwner,
  readState,
  sameFile,
} from "./inspect.js";
import { makeLease, type Prepared, prepare, registryLockOptions, registryLost } from "./lease.js";
import { blockedError, findOverlap, takeoverDeadEdit } from "./overlap.js";
import {
  type HeldWorkspaceLock,
  WORKSPACE_EDIT_LOCK_PURPOSE,
  WORKSPACE_LOCK_PURPOSE,
  type WorkspaceLockOptions,
  type WorkspaceRecoveryLockOptions,
  type WorkspaceTornRecoveryLockOptions,
} from "./types.js";

/** Acquiring a workspace lock, and taking over a dead or torn one. */

export const sleep = (ms: number): Promise<void> => new Promise((done) => setTimeout(done, ms));

/** How many times in a row a lock that was held when tried and gone when read is tried again at once. */
export const VANISHED_RETRIES = 5;

/**
 * The workspace lock was held when acquireLockSync tried it (LOCK_TIMEOUT, or LOCK_OWNER_DEAD) and had no
 * owner when read right after: its holder released it (or a dead one was reaped) in between.
 */
export class Vanished {
  constructor(readonly error: LockError) {}
  /** The holder the attempt saw (LOCK_TIMEOUT names it), if it parses as a workspace lock's owner. */
  holder(path: string): WorkspaceLockOwner | null {
    if (this.error.code !== "LOCK_TIMEOUT" || this.error.owner === undefined) return null;
    try {
      return parseOwner(path, this.error.owner);
    } catch {
      return null;
    }
  }
}

/**
 * Takes the workspace lock for `transactionId`. Waits up to `waitMs` while a live owner holds this or an
 * overlapping workspace (then WORKSPACE_LOCKED); a dead restore's owner gives RECOVERY_REQUIRED at once
 * and is never taken over here. A dead workspace edit's owner is taken over (see the module comment).
 */
export async function acquireWorkspaceLock(options: WorkspaceLockOptions): Promise<HeldWorkspaceLock> {
  const p = prepare(options);
  const start = performance.now();
  let vanishedInARow = 0;
  for (;;) {
    // A release of the registry that fails with LOCK_IO hands the lease back (the registry stayed ours
    // throughout; state-lock.ts releases it later); one that finds it lost gives the lease up.
    const made: { lease?: HeldWorkspaceLock } = {};
    let outcome: HeldWorkspaceLock | SagaError | Vanished;
    try {
      outcome = await withStateLock(
        join(p.locksDir, "registry.lock"),
        "the workspace lock registry",
        p.fs,
        registryLockOptions(p),
        async (): Promise<HeldWorkspaceLock | SagaError | Vanished> => {
          const reaped: WorkspaceLockOwner[] = [];
          const overlap = await findOverlap(p, reaped);
          if (overlap) return overlap;
          try {
            const handle = acquireLockSync(p.path, { ...p.lockOptions, waitMs: 0 });
            made.lease = makeLease(p, handle, null, null, reaped);
            return made.lease;
          } catch (error) {
            if (isLockError(error) && (error.code === "LOCK_TIMEOUT" || error.code === "LOCK_OWNER_DEAD")) {
              const owner = readOwner(p.fs, p.path);
              const dead = error.code === "LOCK_OWNER_DEAD";
              if (owner && dead && owner.payload.purpose === WORKSPACE_EDIT_LOCK_PURPOSE) {
                // A stopped edit's lock: ours now, through the exact owner's takeover (never unlocked).
                const handle = await takeoverDeadEdit(p.path, owner, p.lockOptions);
                if (handle !== null) {
                  made.lease = makeLease(p, handle, null, null, [...reaped, owner]);
                  return made.lease;
                }
              }
              if (owner) return blockedError(owner, dead, p.root);
              // Held when tried, gone when read: its holder let go in between. Not a failure: look again.
              return new Vanished(error);
            }
            if (error instanceof SagaError) throw error;
            throw lockFailed(error, `workspace ${p.root}`);
          }
        },
      );
    } catch (error) {
      if (isSagaError(error) && error.code === "LOCK_OWNERSHIP_LOST")
        throw registryLost(p, error, made.lease);
      throw error;
    }
    if (outcome instanceof Vanished) {
      // Looked again at once, a bounded number of times: two processes taking turns on a workspace can
      // free it between every attempt and its read. Past that it is a busy workspace, as WORKSPACE_LOCKED
      // says (with the holder the last attempt saw), never a lock to inspect.
      vanishedInARow += 1;
      if (vanishedInARow <= VANISHED_RETRIES) continue;
      const seen = outcome.holder(p.path);
      if (seen === null) throw lockFailed(outcome.error, `workspace ${p.root}`);
      outcome = blockedError(seen, false, p.root);
    } else {
      vanishedInARow = 0;
    }
    if (!(outcome instanceof SagaError)) return outcome;
    if (outcome.code !== "WORKSPACE_LOCKED" || performance.now() - start >= p.waitMs) throw outcome;
    await sleep(Math.min(p.retryMs, Math.max(1, p.waitMs - (performance.now() - start))));
  }
}

/**
 * Replaces the exact dead owner `expectedOwner` of this workspace with a new owner of the SAME
 * transaction (new pid and token), for a fenced recovery. Refused if the owner changed (CONFLICT), is
 * alive (WORKSPACE_LOCKED), or another lock overlaps.
 */
export async function takeoverWorkspaceLock(
  options: WorkspaceRecoveryLockOptions,
): Promise<HeldWorkspaceLock> {
  if (options.purpose !== undefined && options.purpose !== WORKSPACE_LOCK_PURPOSE)
    throw invalid(
      `Only a restore's workspace lock (${WORKSPACE_LOCK_PURPOSE}) is ever taken over for recovery.`,
    );
  if (options.expectedTorn !== undefined) {
    if (options.expectedOwner !== undefined) throw invalid("Pass expectedOwner or expectedTorn, not both.");
    return takeoverTornWorkspaceLock(options);
  }
  const p = prepare(options);
  const expected = WorkspaceLockOwnerSchema.safeParse(options.expectedOwner);
  if (
    !expected.success ||
    expected.data.payload.purpose !== WORKSPACE_LOCK_PURPOSE ||
    expected.data.payload.transactionId !== p.payload.transactionId ||
    expected.data.payload.workspaceRoot !== p.root
  ) {
    throw invalid(
      "expectedOwner must be the exact checkpoint-restore owner of this operation and workspace.",
    );
  }
  const expectedOwner = expected.data;
  return takeoverUnderRegistry(p, async () => {
    try {
      const handle = await takeoverLock(p.path, options.expectedOwner, {
        ...p.lockOptions,
        waitMs: p.waitMs,
      });
      return { handle, expectedOwner, expectedTorn: null };
    } catch (error) {
      if (isLockError(error) && error.code === "LOCK_OWNERSHIP_LOST") throw changedSinceInspected(p, error);
      if (isLockError(error) && error.code === "LOCK_TIMEOUT")
        throw blockedError(expectedOwner, false, p.root);
      throw lockFailed(error, `workspace ${p.root}`);
    }
  });
}

export function changedSinceInspected(p: Prepared, cause?: unknown): SagaError {
  return new SagaError({
    code: "CONFLICT",
    cause,
    ownerOperationId: p.payload.transactionId,
    message: `The lock on workspace ${p.root} changed since it was inspected, so it was not taken over. Inspect it again and decide anew.`,
  });
}

/**
 * A takeover under the registry lock, after the overlap check. `take` renames the new owner over the old
 * file, so this workspace's lock never goes missing and every overlapping acquisition sees a lock here
 * throughout, registry or not: if the registry is lost after the takeover (LOCK_IO hands the lease back by
 * itself), the lease is handed back too, since giving it up would unlock a workspace that needs recovery.
 */
export async function takeoverUnderRegistry(
  p: Prepared,
  take: () => Promise<{
    handle: LockHandle;
    expectedOwner: WorkspaceLockOwner | null;
    expectedTorn: TornLock | null;
  }>,
): Promise<HeldWorkspaceLock> {
  const made: { lease?: HeldWorkspaceLock } = {};
  const reaped: WorkspaceLockOwner[] = [];
  try {
    return await withStateLock(
      join(p.locksDir, "registry.lock"),
      "the workspace lock registry",
      p.fs,
      registryLockOptions(p),
      async () => {
        const overlap = await findOverlap(p, reaped);
        if (overlap) throw overlap;
        const taken = await take();
        made.lease = makeLease(p, taken.handle, taken.expectedOwner, taken.expectedTorn, reaped);
        return made.lease;
      },
    );
  } catch (error) {
    if (made.lease && isSagaError(error) && error.code === "LOCK_OWNERSHIP_LOST") return made.lease;
    throw error;
  }
}

/**
 * Replaces the exact lock file torn by a power loss, `expectedTorn` (an `unreadable` inspection's `torn`),
 * with a new owner of `transactionId`, for a fenced recovery. Under the registry lock, like every
 * acquisition: refused if another lock overlaps (WORKSPACE_LOCKED / RECOVERY_REQUIRED), if the file is no
 * longer exactly that one (CONFLICT, nothing changed), or if it was last changed after this machine booted
 * (LOCK_FAILED: a process of this boot may have written it, so it is never taken over). file-lock's
 * takeoverLock checks the file once more under its election and renames the new owner over it, so the
 * workspace is never unlocked.
 */
export async function takeoverTornWorkspaceLock(
  options: WorkspaceTornRecoveryLockOptions,
): Promise<HeldWorkspaceLock> {
  const p = prepare(options);
  if (!isTornLockShape(options.expectedTorn)) {
    throw invalid(
      "expectedTorn must be the `torn` of an unreadable workspace lock inspection ({ torn: true, dev, ino, size, ctimeMs }).",
    );
  }
  const { dev, ino, size, ctimeMs } = options.expectedTorn;
  const expectedTorn: TornLock = { torn: true, dev, ino, size, ctimeMs };
  const bootTimeMs = () => bootTimeOf(options.identity);
  const tx = p.payload.transactionId;
  return takeoverUnderRegistry(p, async () => {
    const state = readState(p.fs, p.path, bootTimeMs);
    if (state.kind !== "unreadable" || !sameFile(state.identity, expectedTorn))
      throw changedSinceInspected(p);
    if (state.torn === null) {
      throw new SagaError({
        code: "LOCK_FAILED",
        ownerOperationId: tx,
        message: `The workspace lock ${p.path} is unreadable (${state.reason}) but was last changed after this machine booted${bootTimeMs() === undefined ? " (or this machine's boot time is unknown)" : ""}, so a process of this boot may have written it: it is not a lock torn by a power loss and is never taken over (fail closed). It was left exactly as it is. Find out what wrote it; to settle restore ${tx}, stop every drydock server and CLI using this data directory, move the file aside and keep it, then settle the restore under a fresh lock (\`drydock restores show ${tx}\`, --expected-owner-digest none).`,
      });
    }
    try {
      const handle = await takeoverLock(p.path, expectedTorn, { ...p.lockOptions, waitMs: p.waitMs });
      return { handle, expectedOwner: null, expectedTorn };
    } catch (error) {
      if (isLockError(error) && error.code === "LOCK_OWNERSHIP_LOST") throw changedSinceInspected(p, error);
      throw lockFailed(error, `workspace ${p.root}`);
    }
  });
}
