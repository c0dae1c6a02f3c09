import { readFileSync, readlinkSync } from "node:fs";
import { hostname } from "node:os";

/**
 * Facts about this machine and its processes that liveness proofs rest on. Injectable so tests can fake a
 * reboot, another host or a reused pid; the default reads Linux's /proc directly (not through `FileOps`:
 * these are kernel answers, not files the lock owns, and fault injection on them would test nothing).
 */
export interface LockIdentity {
  /** This machine's name, recorded as `host`. */
  hostname(): string;
  /** This boot's id (/proc/sys/kernel/random/boot_id); undefined where the platform has none. */
  bootId(): string | undefined;
  /** When this boot started, wall-clock ms (`btime` of /proc/stat); undefined where unknown. */
  bootTimeMs(): number | undefined;
  /** Field 22 of /proc/<pid>/stat; undefined when unknown (no /proc, or no such process). */
  processStartTime(pid: number): number | undefined;
  /**
   * Fields 3 (state) and 20 (num_threads) of /proc/<pid>/stat, read in one go; undefined when unknown. Decides
   * whether a pid that kill(pid, 0) still reaches names a process that has exited and was not reaped (a
   * zombie: see `provesProcessExited` in liveness.ts). Optional, so an identity written before it existed
   * still type-checks: without it no process is ever judged a zombie (it stays alive, as before).
   */
  processState?(pid: number): ProcessState | undefined;
  /**
   * This process's pid namespace (`readlink /proc/self/ns/pid`, e.g. "pid:[4026531836]"); undefined where
   * unknown. Optional, so an identity written before it existed still type-checks: without it this process's
   * namespace is unknown, and an owner that recorded one is never judged dead.
   */
  pidNamespace?(): string | undefined;
}

/** What /proc/<pid>/stat says about a process as a whole, for the zombie rule. */
export interface ProcessState {
  /** Field 3: one letter (R, S, D, T, t, Z, X, I, …). */
  state: string;
  /** Field 20: the threads the kernel still counts in the thread group (0 when it could not tell). */
  threads: number;
}

function readText(path: string): string | undefined {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return undefined;
  }
}

/** Parses field 22 (starttime) of /proc/<pid>/stat. Field 2 (comm) may contain spaces and ')', so fields are
 * counted from the last ')'. */
export function parseProcStatStartTime(text: string): number | undefined {
  const close = text.lastIndexOf(")");
  if (close < 0) return undefined;
  // After ") " come fields 3 (state) .. 52; field 22 is the 20th of them.
  const fields = text.slice(close + 2).split(" ");
  const value = Number(fields[19]);
  return Number.isSafeInteger(value) && value >= 0 ? value : undefined;
}

/**
 * Parses fields 3 (state) and 20 (num_threads) of /proc/<pid>/stat. Field 2 (comm) is "(name)" where the name
 * is up to 15 arbitrary bytes, ")", " Z (" and spaces included, and is not escaped: the fields are counted from
 * the LAST ")" (nothing after comm can contain one). Anything that is not exactly one state letter and a
 * whole number of threads is undefined: unknown, so the zombie rule does not apply.
 */
export function parseProcStatState(text: string): ProcessState | undefined {
  const close = text.lastIndexOf(")");
  if (close < 0 || text[close + 1] !== " ") return undefined;
  // After ") " come fields 3 (state) .. 52; field 20 is the 18th of them.
  const fields = text.slice(close + 2).split(" ");
  const state = fields[0] ?? "";
  const threadsField = fields[17] ?? "";
  if (!/^[A-Za-z]$/.test(state) || !/^\d+$/.test(threadsField)) return undefined;
  const threads = Number(threadsField);
  return Number.isSafeInteger(threads) ? { state, threads } : undefined;
}

export function parseBootTimeMs(procStat: string): number | undefined {
  const match = /^btime (\d+)$/m.exec(procStat);
  if (!match) return undefined;
  const seconds = Number(match[1]);
  return Number.isSafeInteger(seconds) && seconds > 0 ? seconds * 1000 : undefined;
}

/**
 * The real machine. Host name, boot id, this process's own start time and its pid namespace cannot change
 * while it runs, so they are read once; boot time is re-read on each use because /proc/stat derives it from the wall clock.
 */
export function createSystemIdentity(): LockIdentity {
  return systemIdentityFor(process.pid);
}

/**
 * Whether /proc is mounted from this process's own pid namespace: `/proc/self` names the pid this process
 * has there. A process in a pid namespace that did not mount its own /proc (`unshare --pid --fork` without
 * `--mount-proc`) sees its parent namespace's /proc, where `/proc/<pid>` is some other process, or a zombie,
 * with that number. kill(pid, 0) looks in our namespace and /proc in another: no fact of /proc about a pid
 * is then about our pid (a live holder would be judged by a stranger's start time or a stranger's zombie
 * state), so none is read. Unreadable: not proven ours either.
 */
export function procIsOwnNamespace(
  selfPid: number,
  readLink: (path: string) => string = readlinkSync,
): boolean {
  try {
    return readLink("/proc/self") === String(selfPid);
  } catch {
    return false;
  }
}

/** The system identity of a process whose pid in its own namespace is `selfPid` (tests give another). */
export function systemIdentityFor(selfPid: number, readLink?: (path: string) => string): LockIdentity {
  let host: string | undefined;
  let boot: { id: string | undefined } | undefined;
  let ownStart: { value: number | undefined } | undefined;
  let pidNs: { value: string | undefined } | undefined;
  let procOurs: boolean | undefined;
  /** /proc/<pid>/stat, only when /proc is this namespace's (see procIsOwnNamespace). */
  const statOf = (pid: number): string | undefined => {
    procOurs ??= procIsOwnNamespace(selfPid, readLink);
    return procOurs ? readText(`/proc/${pid}/stat`) : undefined;
  };
  const startTimeOf = (pid: number): number | undefined => {
    const text = statOf(pid);
    return text === undefined ? undefined : parseProcStatStartTime(text);
  };
  return {
    hostname: () => {
      host ??= hostname();
      return host;
    },
    bootId: () => {
      boot ??= { id: readText("/proc/sys/kernel/random/boot_id")?.trim() || undefined };
      return boot.id;
    },
    bootTimeMs: () => {
      const text = readText("/proc/stat");
      return text === undefined ? undefined : parseBootTimeMs(text);
    },
    processStartTime: (pid) => {
      if (pid === selfPid) {
        ownStart ??= { value: startTimeOf(pid) };
        return ownStart.value;
      }
      return startTimeOf(pid);
    },
    processState: (pid) => {
      const text = statOf(pid);
      return text === undefined ? undefined : parseProcStatState(text);
    },
    pidNamespace: () => {
      if (pidNs === undefined) {
        let value: string | undefined;
        try {
          value = readlinkSync("/proc/self/ns/pid");
        } catch {
          value = undefined;
        }
        pidNs = { value };
      }
      return pidNs.value;
    },
  };
}

/** Process facts shared by every lock call without options: immutable, so not configuration state. */
export const systemIdentity: LockIdentity = createSystemIdentity();
