import { errnoOf, LockError } from "../errors.js";
import type { LockContext } from "../options.js";
import type { FileId } from "./files.js";
import type { ProcessState } from "./identity.js";

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
 *      field (the original format, older owners) is probed as before: it is taken to be in our namespace.
 *   5. kill(pid, 0) fails with ESRCH               → dead.
 *   6. kill(pid, 0) fails with EPERM               → alive: a process owns the pid, we may not signal it.
 *   7. kill(pid, 0) fails with anything else       → LOCK_OWNER_UNVERIFIABLE (fail closed).
 *   8. `startTime` recorded and the live pid's start time differs → dead: the pid was reused.
 *   9. /proc/<pid>/stat shows state Z or X with exactly one thread → dead: an exited process nobody has
 *      reaped yet (a zombie). kill(0) still reaches it and its start time is unchanged, but it can never run
 *      or write again. See `provesProcessExited` for why one thread, and why anything else stays alive.
 *  10. otherwise                                   → alive.
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
  if (provesProcessExited(identity.processState?.(claim.pid))) return "dead";
  return "alive";
}

/**
 * Rule 9: whether /proc/<pid>/stat proves that the whole process has exited (a zombie, or one being reaped).
 * Where nobody reaps (a container whose PID 1 does not wait for orphans, a parent that never waits), a
 * SIGKILLed holder stays a zombie for ever, and calling it alive kept its lock, and everything behind it,
 * for ever. Dead on proof only:
 *   - State Z (EXIT_ZOMBIE) or X (EXIT_DEAD) of the pid. The pid names the thread-group leader: a lock owner is
 *     a process id. Once Z, a leader stays Z until it is reaped, and a zombie's pid is not reused before that.
 *     If the pid was reaped and reused between kill(0) and this read, the recorded owner is dead anyway.
 *   - AND num_threads (field 20) exactly 1. A leader whose own thread exited while others run (pthread_exit
 *     in main) shows Z too, and that process lives. The count is the thread group's `signal->nr_threads`; a
 *     non-leader thread leaves it when it is released, which for an unptraced thread is at its exit, while
 *     the zombie leader stays counted until the last thread is gone and it is reaped. So Z with a count of 1
 *     means the leader is the only thread left, and a group holding only a zombie can never gain a thread
 *     again (only a running thread can clone). More than 1 may be a live thread: alive. 0 is what the kernel
 *     prints when it could not lock the task's signal handlers, which happens when the task is being
 *     released, including the old leader that exec(2) from another thread (de_thread) replaces while the
 *     process lives on under the same pid: alive (ambiguous). A thread exited under ptrace stays counted
 *     until its tracer reaps it: alive until then (ambiguous too).
 *   - /proc/<pid>/status gives the same facts ("State:", "Threads:"), but stat is read once, through the same
 *     identity seam as the start time, and state and count come from one read.
 * Unreadable /proc (hidepid, no /proc, not Linux), an unparsable line, any other state: no proof, alive.
 */
export function provesProcessExited(state: ProcessState | undefined): boolean {
  return state !== undefined && (state.state === "Z" || state.state === "X") && state.threads === 1;
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
