import { createHash } from "node:crypto";
import { relative } from "node:path";
import {
  collectGarbage as collectLockGarbageOf,
  lockGarbage as listGarbage,
  listLocks,
} from "@drydock/recovery-controller";
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

const LEFTOVER_TOKEN = /(\.lock\.(?:reap-|candidate-[0-9]+-))(.+)$/;

const listing = (ctx: ServerContext) => ({ commandPrefix: ctx.commandPrefix(), scrub: ctx.scrubPaths });

/** The lock files, as `drydock locks list --json` lists them (recovery-controller's one listing). */
export function collectLocks(ctx: ServerContext): LockRow[] {
  return listLocks(ctx.dataDir, listing(ctx));
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

/** What `drydock locks gc` (no --yes) lists: the locks stopped workspace edits left, and the leftovers. */
export function lockGarbage(ctx: ServerContext): { stoppedEdits: string[]; leftovers: string[] } {
  const garbage = listGarbage(ctx.dataDir, listing(ctx));
  return {
    stoppedEdits: garbage.stoppedEdits,
    leftovers: garbage.leftovers.map((file) => shownLeftover(ctx, file)),
  };
}

/** `drydock locks gc --yes` (recovery-controller's `collectGarbage`): what was removed, as answers show it. */
export async function collectGarbage(ctx: ServerContext, hadStoppedEdits: boolean): Promise<string[]> {
  return (await collectLockGarbageOf(ctx.dataDir, hadStoppedEdits)).map((file) => shownLeftover(ctx, file));
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
