import { existsSync, readdirSync } from "node:fs";
import { join, relative } from "node:path";
import { LOCKS_DIR, RESTORE_SAGAS_DIR } from "@drydock/facts";
import { collectLockGarbage, inspectLock } from "@drydock/file-lock";
import {
  ownerDigest,
  reapDeadEditLocks,
  type WorkspaceLockOwner,
  workspaceLockPath,
} from "@drydock/restore-saga";
import { ownerMayBeAlive } from "./internal/liveness.js";

/**
 * The lock files of a data directory, as `drydock locks list` and the bot server's `GET /v1/locks` show
 * them (one listing for both): each lock's kind, its owner's pid, liveness and digest (never its token),
 * the restore or workspace edit holding it, and the leftovers beside it (election records and candidates
 * `locks gc` may remove). The inspection is file-lock's, the owner digest restore-saga's.
 */
export interface LockRow {
  /** Relative to the data directory. */
  path: string;
  kind: "workspace" | "workspace-registry" | "journal" | "saga-state" | "other";
  present: boolean;
  pid: number | null;
  createdAt: string | null;
  alive: boolean | null;
  /** Digest of the owner (never its token). */
  ownerDigest: string | null;
  /** The restore (or workspace edit, see `purpose`) holding a workspace lock. */
  transactionId: string | null;
  /**
   * What a workspace lock guards: `checkpoint-restore` (a restore; dead, it waits for its fenced recovery)
   * or `workspace-edit` (the bot server's file write, deletion or checkpoint; dead, it guards nothing and
   * goes by itself). Null for other locks.
   */
  purpose: "checkpoint-restore" | "workspace-edit" | null;
  /** A workspace edit's lock in words (running, or left by a stopped edit and how it goes); else null. */
  note: string | null;
  /** Election records and candidates beside the lock (what `locks gc` may remove). */
  leftovers: number;
  /**
   * Owner files of running processes beside the lock: kept for their next acquire (file-lock's
   * `reuseOwnerFile`; the restore saga store uses it), or being published right now. `locks gc` leaves them.
   */
  kept: number;
  problem: string | null;
}

export interface LockListingOptions {
  /** How the printed `drydock` command starts (`drydock --data-dir …`). */
  commandPrefix: string;
  /** Rewrites a message before it is shown (the server removes its paths); default: as it is. */
  scrub?: (message: string) => string;
}

const LOCK_NAME = /\.lock$/;
const LEFTOVER = /^(.*\.lock)\.(?:reap-|candidate-)/;
const OWNER_FILE = /\.lock\.candidate-[0-9]+-[0-9a-f-]+$/;
const ABSENT = {
  pid: null,
  createdAt: null,
  alive: null,
  ownerDigest: null,
  transactionId: null,
  purpose: null,
  note: null,
} as const;

/** A candidate whose owner may still run: kept by it, not garbage. Unreadable ones count as leftovers. */
export function keptByLiveProcess(file: string): boolean {
  if (!OWNER_FILE.test(file)) return false;
  try {
    const owner = inspectLock(file);
    return owner !== null && ownerMayBeAlive(owner);
  } catch {
    return false;
  }
}

function lockDirs(dataDir: string): string[] {
  const dirs = [dataDir, join(dataDir, LOCKS_DIR)];
  const sagas = join(dataDir, RESTORE_SAGAS_DIR);
  try {
    for (const shard of readdirSync(sagas).sort()) {
      if (shard.startsWith("workspace-")) dirs.push(join(sagas, shard, ".locks"));
    }
  } catch {
    // no sagas yet
  }
  return dirs;
}

function kindOf(dataDir: string, path: string): LockRow["kind"] {
  const rel = relative(dataDir, path);
  if (/^locks\/ws-[0-9a-f]{64}\.lock$/.test(rel)) return "workspace";
  if (rel === "locks/registry.lock") return "workspace-registry";
  if (rel.startsWith("restore-sagas/")) return "saga-state";
  if (!rel.includes("/")) return "journal";
  return "other";
}

/** Every lock path (present, or absent but with leftovers beside it) under the data directory. */
export function lockPaths(dataDir: string): { path: string; leftovers: string[] }[] {
  const out = new Map<string, string[]>();
  for (const dir of lockDirs(dataDir)) {
    let names: string[];
    try {
      names = readdirSync(dir).sort();
    } catch {
      continue;
    }
    for (const name of names) {
      if (LOCK_NAME.test(name)) {
        const path = join(dir, name);
        if (!out.has(path)) out.set(path, []);
        continue;
      }
      const leftover = LEFTOVER.exec(name);
      if (leftover?.[1]) {
        const path = join(dir, leftover[1]);
        out.set(path, [...(out.get(path) ?? []), join(dir, name)]);
      }
    }
  }
  return [...out.entries()].map(([path, leftovers]) => ({ path, leftovers }));
}

function lockRow(dataDir: string, path: string, leftovers: string[], options: LockListingOptions): LockRow {
  const kept = leftovers.filter(keptByLiveProcess).length;
  const base = {
    path: relative(dataDir, path),
    kind: kindOf(dataDir, path),
    leftovers: leftovers.length - kept,
    kept,
  };
  try {
    const owner = existsSync(path) ? inspectLock(path) : null;
    if (owner === null) return { ...base, ...ABSENT, present: false, problem: null };
    const payload = (owner as { payload?: { transactionId?: unknown; purpose?: unknown } }).payload;
    const alive = ownerMayBeAlive(owner);
    const purpose =
      base.kind === "workspace" &&
      (payload?.purpose === "checkpoint-restore" || payload?.purpose === "workspace-edit")
        ? payload.purpose
        : null;
    return {
      ...base,
      present: true,
      pid: owner.pid,
      createdAt: new Date(owner.createdAt).toISOString(),
      alive,
      ownerDigest: ownerDigest(owner as unknown as WorkspaceLockOwner),
      transactionId: typeof payload?.transactionId === "string" ? payload.transactionId : null,
      purpose,
      note:
        purpose !== "workspace-edit"
          ? null
          : alive
            ? "a file write, deletion or checkpoint in progress"
            : `left by a stopped file write, deletion or checkpoint; it guards nothing: the next write, the bot server's start or \`${options.commandPrefix} locks gc --yes\` removes it`,
      problem: null,
    };
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    return { ...base, ...ABSENT, present: true, problem: options.scrub ? options.scrub(message) : message };
  }
}

/** The lock files of the data directory (see LockRow). */
export function listLocks(dataDir: string, options: LockListingOptions): LockRow[] {
  return lockPaths(dataDir).map(({ path, leftovers }) => lockRow(dataDir, path, leftovers, options));
}

/**
 * What `locks gc` without --yes lists: the locks stopped workspace edits left (relative paths), and the
 * election records and candidates beside every lock that no running process keeps (absolute paths: a
 * running process's kept owner file is not garbage, and its name holds a live token, so it is never listed).
 */
export function lockGarbage(
  dataDir: string,
  options: LockListingOptions,
): { stoppedEdits: string[]; leftovers: string[] } {
  const stoppedEdits = listLocks(dataDir, options)
    .filter((row) => row.purpose === "workspace-edit" && row.alive === false)
    .map((row) => row.path);
  const leftovers = lockPaths(dataDir).flatMap((entry) =>
    entry.leftovers.filter((file) => !keptByLiveProcess(file)),
  );
  return { stoppedEdits, leftovers };
}

/**
 * `locks gc --yes`: the locks of stopped workspace edits (restore-saga's `reapDeadEditLocks`, each owner
 * judged again under the registry lock: only a provably dead one goes) and every leftover file-lock's
 * `collectLockGarbage` judges garbage now. No other lock file is ever touched: a restore's dead lock waits
 * for its fenced recovery. Answers the removed files' absolute paths; `onLock` is told each lock as it is
 * visited (the CLI's progress).
 */
export async function collectGarbage(
  dataDir: string,
  hadStoppedEdits: boolean,
  onLock: (path: string, index: number, total: number) => void = () => {},
): Promise<string[]> {
  const removed: string[] = [];
  if (hadStoppedEdits) {
    for (const owner of (await reapDeadEditLocks({ dataDir })).removed) {
      removed.push(workspaceLockPath(dataDir, owner.payload.workspaceRoot));
    }
  }
  const now = lockPaths(dataDir);
  now.forEach(({ path }, index) => {
    onLock(path, index, now.length);
    for (const file of collectLockGarbage(path).removed) removed.push(file);
  });
  return removed;
}
