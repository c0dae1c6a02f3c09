import { LockError } from "../errors.js";
import type { LockContext } from "../options.js";
import type { ReaperRecord } from "../schema.js";
import {
  candidatePath,
  electionPath,
  linkExclusive,
  newOwner,
  readRecordFile,
  removeQuietly,
  serializeOwner,
  successorElectionPath,
  writeCandidate,
} from "./files.js";
import { fileIsFromEarlierBoot, judgeProcess } from "./liveness.js";

/** Authority to remove (or replace) the lock while it still holds `targetToken`. */
export interface ElectionWin {
  recordPath: string;
}

/**
 * Wins the right to reap the lock holding `targetToken`, or learns that a live reaper already has it.
 * Authority is a record published with link(2) at `<path>.reap-<token>`: exactly one process can create it.
 * If its reaper died mid-recovery, the next election is at `<path>.reap-<token>-<sha256(identity)[:32]>`,
 * named after the dead reaper, so every contender that judged the same reaper dead races for the same slot,
 * and no contender ever deletes a slot someone else may hold. Bounded by `maxReaperGenerations`.
 * Returns null when a live reaper holds the election (back off and look again later).
 */
export function claimElection(lockPath: string, targetToken: string, ctx: LockContext): ElectionWin | null {
  let recordPath = electionPath(lockPath, targetToken);
  for (let generation = 0; generation < ctx.maxReaperGenerations; generation += 1) {
    const record: ReaperRecord = { ...newOwner({ ...ctx, payload: undefined }), targetToken };
    if (publishRecord(recordPath, record, lockPath, ctx)) return { recordPath };

    const current = readRecordFile(ctx.fs, recordPath, targetToken);
    // Vanished between our EEXIST and the read (collected as garbage): the same slot is open again.
    if (current.kind === "absent") continue;
    let reaperIdentity: string;
    if (current.kind === "bad") {
      // A record the original cannot have written (or one torn by a power loss): only the boot-time rule may
      // pass it; anything else fails closed and stays on disk as it is.
      if (current.file === null || !fileIsFromEarlierBoot(current.file, ctx)) {
        throw new LockError({
          code: current.code,
          path: lockPath,
          cause: current.cause,
          message: `The lock ${lockPath} cannot be recovered: its stale-lock recovery record ${recordPath} is ${current.code === "LOCK_INVALID" ? "invalid" : "unreadable"} (${current.reason}). It was left untouched; inspect it, and remove it by hand only once no process is using the lock.`,
        });
      }
      reaperIdentity = `unreadable:${current.file.dev}:${current.file.ino}:${current.file.ctimeMs}`;
    } else if (current.kind === "legacy") {
      if (judgeProcess({ pid: current.pid }, current.file, ctx, lockPath) === "alive") return null;
      reaperIdentity = `legacy:${current.pid}`;
    } else {
      if (judgeProcess(current.record, current.file, ctx, lockPath) === "alive") return null;
      reaperIdentity = current.record.token;
    }
    recordPath = successorElectionPath(lockPath, targetToken, reaperIdentity);
  }
  throw new LockError({
    code: "LOCK_REAPER_EXHAUSTED",
    path: lockPath,
    message: `The lock ${lockPath} could not be recovered: ${ctx.maxReaperGenerations} processes in a row died while recovering it. Stop the processes that use it, then run collectLockGarbage or remove its .reap- files by hand.`,
  });
}

function publishRecord(
  recordPath: string,
  record: ReaperRecord,
  lockPath: string,
  ctx: LockContext,
): boolean {
  const candidate = candidatePath(recordPath, record);
  writeCandidate(ctx.fs, candidate, serializeOwner(record), lockPath);
  ctx.crash("election.candidate-written");
  try {
    return linkExclusive(ctx.fs, candidate, recordPath, lockPath);
  } finally {
    removeQuietly(ctx.fs, candidate);
  }
}

/**
 * Gives up an election this process won. Safe without re-reading the record: a slot is only ever created by
 * link(2), nobody starts a successor while we are alive, and once we stop acting as reaper a second winner of
 * the same slot still re-checks the lock before touching it.
 */
export function resignElection(win: ElectionWin, ctx: LockContext): void {
  removeQuietly(ctx.fs, win.recordPath);
}
