import { basename, dirname, join } from "node:path";
import { errnoOf, toLockError } from "./errors.js";
import { garbageElectionKey, readOwnerFile, removeQuietly } from "./internal/files.js";
import { judgeProcess } from "./internal/liveness.js";
import { type LockContext, type LockOptions, resolveLockOptions } from "./options.js";
import { MAX_PID } from "./schema.js";

export type GarbageOptions = Pick<LockOptions, "fs" | "isProcessAlive" | "identity">;

const ESCAPE = /[.*+?^${}()|[\]\\]/g;

/**
 * Removes what crashed processes left beside the lock `path`, and nothing else:
 * - election records `<path>.reap-<token>[-<digest>]` whose target token is no longer the lock's. A token is
 *   never reused once its owner is dead (only a live process republishes its kept owner, `reuseOwnerFile`),
 *   so such a record can never again authorise anything; a record for the current lock is kept
 *   (its election may be running);
 * - candidates `<path>[.reap-…].candidate-<pid>-<token>` whose process is provably dead (same liveness rules as
 *   the lock: a live or unverifiable process keeps its candidate), unless the candidate is still linked under
 *   another name (the lock or a record: the same inode).
 * The lock itself is never touched. A lock that is garbage is keyed as the boot-time rule keys it (by inode), so
 * its own election survives; if the lock cannot even be stat'ed, election records are all kept.
 */
export function collectLockGarbage(path: string, options?: GarbageOptions): { removed: string[] } {
  const ctx = resolveLockOptions(options);
  try {
    const names = namesIn(dirname(path), ctx);
    return { removed: names === null ? [] : collectFrom(path, names, ctx) };
  } catch (error) {
    throw toLockError(error, path, "cleaned up");
  }
}

/** `<lock>[.reap-…].candidate-<pid>-<token>` or `<lock>.reap-<token>[-<digest>]`: the lock it belongs to. */
const LEFTOVER_OF = /^(.+?)(?:\.reap-[0-9a-f-]+)?\.candidate-[0-9]+-[0-9a-f-]+$|^(.+)\.reap-[0-9a-f-]+$/;

/**
 * collectLockGarbage for every lock in `dir` that has leftovers beside it (present or not), listing the
 * directory once: what a process sweeps when it opens a directory of many short locks.
 */
export function collectLockGarbageIn(dir: string, options?: GarbageOptions): { removed: string[] } {
  const ctx = resolveLockOptions(options);
  try {
    const names = namesIn(dir, ctx);
    if (names === null) return { removed: [] };
    const locks = new Set<string>();
    for (const name of names) {
      const match = LEFTOVER_OF.exec(name);
      const lock = match?.[1] ?? match?.[2];
      if (lock !== undefined) locks.add(lock);
    }
    const removed: string[] = [];
    for (const lock of locks) removed.push(...collectFrom(join(dir, lock), names, ctx));
    return { removed };
  } catch (error) {
    throw toLockError(error, dir, "cleaned up");
  }
}

/** The names in `dir`, or null when it does not exist (nothing to collect). */
function namesIn(dir: string, ctx: LockContext): string[] | null {
  try {
    return ctx.fs.readdirSync(dir);
  } catch (error) {
    if (errnoOf(error) === "ENOENT") return null;
    throw error;
  }
}

/** The work of collectLockGarbage, given the names in the lock's directory. */
function collectFrom(path: string, names: readonly string[], ctx: LockContext): string[] {
  const directory = dirname(path);
  const prefix = basename(path).replace(ESCAPE, "\\$&");
  const candidateName = new RegExp(`^${prefix}(?:\\.reap-[0-9a-f-]+)?\\.candidate-([0-9]+)-[0-9a-f-]+$`);
  const recordName = new RegExp(
    `^${prefix}\\.reap-([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})(?:-[0-9a-f]{32})?$`,
  );
  const lock = readOwnerFile(ctx.fs, path);
  const currentKey =
    lock.kind === "absent"
      ? null
      : lock.kind === "owner"
        ? lock.owner.token
        : lock.file !== null
          ? garbageElectionKey(lock.file)
          : undefined;
  const removed: string[] = [];
  // Records first: a candidate still linked as a record it published is free once that record is gone.
  for (const name of names) {
    const record = recordName.exec(name);
    const full = join(directory, name);
    if (record && currentKey !== undefined && record[1] !== currentKey && removeQuietly(ctx.fs, full))
      removed.push(full);
  }
  for (const name of names) {
    const full = join(directory, name);
    const candidate = candidateName.exec(name);
    if (!candidate) continue;
    const pid = Number(candidate[1]);
    if (!Number.isSafeInteger(pid) || pid < 1 || pid > MAX_PID) continue;
    const read = readOwnerFile(ctx.fs, full);
    if (read.kind === "absent") continue;
    // Still the lock's (or a record's) other name, as after a crash right after link(2), or a kept owner
    // (reuseOwnerFile) while held. Unlinking it would change that inode's ctime, and the boot-time rule reads
    // the ctime: a torn lock from before the boot would then look new and be refused forever. It goes once the
    // lock (or record) it is linked as is gone.
    if (read.file !== null && read.file.nlink > 1) continue;
    // A readable candidate carries its full identity (start time, boot id); a torn one only its name's pid.
    const claim = read.kind === "owner" && read.owner.pid === pid ? read.owner : { pid };
    let dead = false;
    try {
      dead = judgeProcess(claim, read.kind === "bad" ? read.file : read.file, ctx, path) === "dead";
    } catch {
      dead = false; // unverifiable: keep it
    }
    if (dead && removeQuietly(ctx.fs, full)) removed.push(full);
  }
  return removed;
}
