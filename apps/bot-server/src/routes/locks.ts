import { createHash } from "node:crypto";
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
import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import { z } from "zod";
import type { ServerContext } from "../context.js";
import { answers } from "./schemas.js";

/**
 * The lock files of the data directory, as `drydock locks list` shows them: each lock's kind, its owner's
 * pid, liveness and digest (never its token), the restore or workspace edit holding it, and the leftovers
 * beside it (election records and candidates `locks gc` may remove). Also the garbage `locks gc` removes
 * (routes/recovery-actions.ts serves its preview and apply). The inspection is file-lock's (`inspectLock`,
 * `collectLockGarbage`), the liveness the recovery controller's, the owner digest restore-saga's: the same
 * calls the CLI makes.
 */

export const LockRowSchema = z.object({
  /** Relative to the data directory. */
  path: z.string(),
  kind: z.enum(["workspace", "workspace-registry", "journal", "saga-state", "other"]),
  present: z.boolean(),
  pid: z.number().nullable(),
  createdAt: z.string().nullable(),
  alive: z.boolean().nullable(),
  /** Digest of the owner (never its token). */
  ownerDigest: z.string().nullable(),
  transactionId: z.string().nullable(),
  purpose: z.enum(["checkpoint-restore", "workspace-edit"]).nullable(),
  note: z.string().nullable(),
  /** Election records and candidates beside the lock (what `locks gc` may remove). */
  leftovers: z.number(),
  /** Owner files of running processes beside the lock, kept for their next acquire: gc leaves them. */
  kept: z.number(),
  problem: z.string().nullable(),
});
export type LockRow = z.infer<typeof LockRowSchema>;

export const LocksResponse = z.object({ ok: z.literal(true), locks: z.array(LockRowSchema) });

const LOCK_NAME = /\.lock$/;
const LEFTOVER = /^(.*\.lock)\.(?:reap-|candidate-)/;
const OWNER_FILE = /\.lock\.candidate-[0-9]+-[0-9a-f-]+$/;
/** The token part of a leftover's name (`.reap-<token>…`, `.candidate-<pid>-<token>`). */
const LEFTOVER_TOKEN = /(\.lock\.(?:reap-|candidate-[0-9]+-))(.+)$/;

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
function lockPaths(dataDir: string): { path: string; leftovers: string[] }[] {
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

const ABSENT = {
  pid: null,
  createdAt: null,
  alive: null,
  ownerDigest: null,
  transactionId: null,
  purpose: null,
  note: null,
} as const;

function lockRow(ctx: ServerContext, path: string, leftovers: string[]): LockRow {
  const kept = leftovers.filter(keptByLiveProcess).length;
  const base = {
    path: relative(ctx.dataDir, path),
    kind: kindOf(ctx.dataDir, path),
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
            : `left by a stopped file write, deletion or checkpoint; it guards nothing: the next write, the bot server's start or \`${ctx.commandPrefix()} locks gc --yes\` removes it`,
      problem: null,
    };
  } catch (error) {
    // Answers never name server paths.
    const problem = ctx.scrubPaths(error instanceof Error ? error.message : String(error));
    return { ...base, ...ABSENT, present: true, problem };
  }
}

/** The lock files, as `drydock locks list --json` lists them. */
export function collectLocks(ctx: ServerContext): LockRow[] {
  return lockPaths(ctx.dataDir).map(({ path, leftovers }) => lockRow(ctx, path, leftovers));
}

/**
 * A leftover's name as answers show it: its token part replaced by a digest. A dead candidate's token
 * guards nothing any more, but an answer never carries a token (the same digest names the same file twice).
 */
export function shownLeftover(ctx: ServerContext, file: string): string {
  return relative(ctx.dataDir, file).replace(
    LEFTOVER_TOKEN,
    (_all, head: string, token: string) =>
      `${head}sha256:${createHash("sha256").update(token).digest("hex").slice(0, 16)}`,
  );
}

/**
 * What `drydock locks gc` (no --yes) lists: the locks stopped workspace edits left, and the election
 * records and candidates beside every lock that no running process keeps.
 */
export function lockGarbage(ctx: ServerContext): { stoppedEdits: string[]; leftovers: string[] } {
  const stoppedEdits = collectLocks(ctx)
    .filter((row) => row.purpose === "workspace-edit" && row.alive === false)
    .map((row) => row.path);
  // A running process's kept owner file is not garbage (and its name holds a live token): not listed.
  const leftovers = lockPaths(ctx.dataDir).flatMap((entry) =>
    entry.leftovers.filter((file) => !keptByLiveProcess(file)).map((file) => shownLeftover(ctx, file)),
  );
  return { stoppedEdits, leftovers };
}

/**
 * `drydock locks gc --yes`: the locks of stopped workspace edits (restore-saga's `reapDeadEditLocks`,
 * each owner judged again under the registry lock) and every leftover file-lock's `collectLockGarbage`
 * judges garbage now. No other lock file is ever touched: a restore's dead lock waits for its fenced
 * recovery. What the preview listed but is no longer garbage (its process came back, or someone else
 * removed it) stays or is gone: the answer says which were removed.
 */
export async function collectGarbage(ctx: ServerContext, hadStoppedEdits: boolean): Promise<string[]> {
  const removed: string[] = [];
  if (hadStoppedEdits) {
    for (const owner of (await reapDeadEditLocks({ dataDir: ctx.dataDir })).removed) {
      removed.push(relative(ctx.dataDir, workspaceLockPath(ctx.dataDir, owner.payload.workspaceRoot)));
    }
  }
  for (const { path } of lockPaths(ctx.dataDir)) {
    for (const file of collectLockGarbage(path).removed) removed.push(shownLeftover(ctx, file));
  }
  return removed;
}

/** GET /v1/locks */
const locksSchema = {
  schema: {
    summary: "The lock files: owners as digests, liveness, the restore or edit holding each, leftovers",
    response: answers({ 200: LocksResponse }),
  },
};

/** GET /v1/locks: what `drydock locks list` shows. */
export const lockRoutes: FastifyPluginAsyncZod<ServerContext> = async (app, ctx) => {
  app.get("/v1/locks", locksSchema, async () => ({ ok: true as const, locks: collectLocks(ctx) }));
};
