import { errnoOf, LockError } from "../errors.js";
import type { LockContext } from "../options.js";
import type { FileId } from "./files.js";

/** Who a lock file or an election record claims as its process. Seed files carry only `pid`. */
export interface ProcessClaim {
  pid: number;
  host?: string | undefined;
  bootId?: string | undefined;
  startTime?: number | undefined;
  pidNamespace?: string | undefined;
}

export type Liveness = "alive" | "dead";

/**
 * The only place that decides whether an owner is dead. Dead only on proof; anything ambiguous keeps the lock.
 * Verdicts, in order:
 *   1. `host` recorded and not this host          → alive: another machine's pids cannot be probed from here.
 *   2. `bootId` recorded and not this boot's       → dead: every process of an earlier boot is gone.
 *   3. no `bootId`, file ctime older than boot time → dead: the file was last changed before this boot
 *      (ctime cannot be set by any caller); a recorded bootId is the stronger proof and wins over this rule,
 *      which a forward clock step right after boot could fool.
 *   4. `pidNamespace` recorded and not this process's (or ours unknown) → alive: its pid names another process,
 *      or none, in our namespace (two containers of one pod, docker --network host). An owner without the
 *      field (the seeds' format, older owners) is probed as before: it is taken to be in our namespace.
 *   5. kill(pid, 0) fails with ESRCH               → dead.
 *   6. kill(pid, 0) fails with EPERM               → alive: a process owns the pid, we may not signal it.
 *   7. kill(pid, 0) fails with anything else       → LOCK_OWNER_UNVERIFIABLE (fail closed).
 *   8. `startTime` recorded and the live pid's start time differs → dead: the pid was reused.
 *   9. otherwise                                   → alive. Zombies are alive: kill(0) reaches them and their
 *      /proc entry keeps its start time until they are reaped.
 * Precedent: tox-dev/filelock `owner_is_stale`, PostgreSQL postmaster.pid, Mercurial lock.py.
 */
export function judgeProcess(
  claim: ProcessClaim,
  file: FileId | null,
  ctx: LockContext,
  lockPath: string,
): Liveness {
  const identity = ctx.identity;
  if (claim.host !== undefined && claim.host !== identity.hostname()) return "alive";
  const bootId = identity.bootId();
  if (claim.bootId !== undefined && bootId !== undefined) {
    if (claim.bootId !== bootId) return "dead";
  } else if (file !== null && fileIsFromEarlierBoot(file, ctx)) {
    return "dead";
  }
  if (inOtherPidNamespace(claim, ctx)) return "alive";
  try {
    if (!ctx.isProcessAlive(claim.pid)) return "dead";
  } catch (error) {
    const code = errnoOf(error);
    if (code === "ESRCH") return "dead";
    if (code !== "EPERM") {
      throw new LockError({
        code: "LOCK_OWNER_UNVERIFIABLE",
        path: lockPath,
        cause: error,
        message: `The lock ${lockPath} is kept because its owner, process ${claim.pid}, could not be checked (${code ?? "unknown error"}). Check whether that process is still running before removing the lock by hand.`,
      });
    }
  }
  if (claim.startTime !== undefined) {
    const current = identity.processStartTime(claim.pid);
    if (current !== undefined && current !== claim.startTime) return "dead";
  }
  return "alive";
}

/** The boot-time rule on its own: also decides garbage files, which name no process at all. */
export function fileIsFromEarlierBoot(file: FileId, ctx: LockContext): boolean {
  const bootTimeMs = ctx.identity.bootTimeMs();
  return bootTimeMs !== undefined && file.ctimeMs < bootTimeMs;
}

/** Whether the claim names a pid namespace that is not provably ours: its pid cannot be probed from here. */
export function inOtherPidNamespace(claim: ProcessClaim, ctx: LockContext): boolean {
  return claim.pidNamespace !== undefined && claim.pidNamespace !== ctx.identity.pidNamespace?.();
}
