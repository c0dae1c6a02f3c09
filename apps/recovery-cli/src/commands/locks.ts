import { existsSync, readdirSync } from "node:fs";
import { join, relative } from "node:path";
import { LOCKS_DIR, RESTORE_SAGAS_DIR } from "@drydock/facts";
import { collectLockGarbage, inspectLock } from "@drydock/file-lock";
import { ownerMayBeAlive } from "@drydock/recovery-controller";
import {
  ownerDigest,
  reapDeadEditLocks,
  type WorkspaceLockOwner,
  workspaceLockPath,
} from "@drydock/restore-saga";
import type { CommandContext } from "../context.js";
import { type Rendered, table } from "../render.js";

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

const LOCK_NAME = /\.lock$/;
const LEFTOVER = /^(.*\.lock)\.(?:reap-|candidate-)/;
const OWNER_FILE = /\.lock\.candidate-[0-9]+-[0-9a-f-]+$/;

/** A candidate whose owner may still run: kept by it, not garbage. Unreadable ones count as leftovers. */
function keptByLiveProcess(file: string): boolean {
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

export function collectLocks(ctx: CommandContext): LockRow[] {
  return lockPaths(ctx.dataDir).map(({ path, leftovers }) => {
    const kept = leftovers.filter(keptByLiveProcess).length;
    const base = {
      path: relative(ctx.dataDir, path),
      kind: kindOf(ctx.dataDir, path),
      leftovers: leftovers.length - kept,
      kept,
    };
    try {
      const owner = existsSync(path) ? inspectLock(path) : null;
      if (owner === null) {
        return {
          ...base,
          present: false,
          pid: null,
          createdAt: null,
          alive: null,
          ownerDigest: null,
          transactionId: null,
          purpose: null,
          note: null,
          problem: null,
        };
      }
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
              : `left by a stopped file write, deletion or checkpoint; it guards nothing: the next write, the bot server's start or \`${ctx.commandPrefix} locks gc --yes\` removes it`,
        problem: null,
      };
    } catch (error) {
      return {
        ...base,
        present: true,
        pid: null,
        createdAt: null,
        alive: null,
        ownerDigest: null,
        transactionId: null,
        purpose: null,
        note: null,
        problem: error instanceof Error ? error.message : String(error),
      };
    }
  });
}

/** `locks list`: the lock files (`collectLocks`), rendered by `renderLocks`. */
export async function locksList(ctx: CommandContext): Promise<Rendered> {
  return renderLocks(ctx, collectLocks(ctx));
}

/** The lock files as a table: owner liveness (digest only), the restore or edit holding each, leftovers. */
export function renderLocks(ctx: CommandContext, rows: LockRow[]): Rendered {
  const human =
    rows.length === 0
      ? "No lock files.\n"
      : table(
          ["lock", "kind", "pid", "owner", "since", "restore", "leftovers", "kept"],
          rows.map((row) => [
            row.path,
            row.kind,
            row.pid,
            row.problem
              ? `unreadable: ${row.problem}`
              : !row.present
                ? "absent"
                : row.note
                  ? `${row.alive ? "running" : "dead"}: ${row.note}`
                  : row.alive
                    ? "running"
                    : "dead",
            row.createdAt,
            // A workspace edit is no restore: its id is shown as what it is.
            row.purpose === "workspace-edit" ? `(edit) ${row.transactionId}` : row.transactionId,
            row.leftovers,
            row.kept,
          ]),
          ctx.tty,
        );
  return { data: { locks: rows }, human };
}

/**
 * Removes election records whose lock moved on and candidates of dead processes (file-lock decides which
 * are garbage), and the workspace locks stopped workspace edits left (restore-saga's `reapDeadEditLocks`:
 * dead `workspace-edit` owners only, each by an exact-owner takeover under the registry lock). No other lock
 * file is ever touched: a restore's dead lock waits for its fenced recovery. Without --yes: what could be
 * removed.
 */
export async function locksGc(ctx: CommandContext): Promise<Rendered> {
  const paths = lockPaths(ctx.dataDir);
  // A running process's kept owner file is not garbage (and its name holds a live token): not listed.
  const stoppedEdits = collectLocks(ctx)
    .filter((row) => row.purpose === "workspace-edit" && row.alive === false)
    .map((row) => row.path);
  const leftovers = [
    ...stoppedEdits,
    ...paths.flatMap((entry) =>
      entry.leftovers.filter((file) => !keptByLiveProcess(file)).map((file) => relative(ctx.dataDir, file)),
    ),
  ];
  if (!ctx.yes) {
    const command = `${ctx.commandPrefix} locks gc --yes`;
    return {
      data: { ok: true, preview: true, changed: false, candidates: leftovers, command },
      human:
        leftovers.length === 0
          ? "Preview: no election records or candidates beside any lock, and no lock of a stopped workspace edit. Nothing was changed.\n"
          : `Preview: ${leftovers.length} leftover file(s) (beside locks, or locks of stopped workspace edits); those that are provably garbage would be removed:\n${leftovers.map((file) => `  ${file}\n`).join("")}Nothing was changed. To apply it, run:\n  ${command}\n`,
    };
  }
  const removed: string[] = [];
  if (stoppedEdits.length > 0) {
    // file-lock judges each owner again under the registry lock: only a provably dead one goes.
    for (const owner of (await reapDeadEditLocks({ dataDir: ctx.dataDir })).removed) {
      removed.push(relative(ctx.dataDir, workspaceLockPath(ctx.dataDir, owner.payload.workspaceRoot)));
    }
  }
  for (const { path } of lockPaths(ctx.dataDir)) {
    for (const file of collectLockGarbage(path).removed) removed.push(relative(ctx.dataDir, file));
  }
  return {
    data: { ok: true, removed, kept: leftovers.filter((file) => !removed.includes(file)) },
    human: `Removed ${removed.length} garbage file(s).\n${removed.map((file) => `  ${file}\n`).join("")}`,
  };
}
