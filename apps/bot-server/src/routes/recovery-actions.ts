import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { RESTORE_OPERATION_ID } from "@drydock/facts";
import {
  type BoatActionName,
  BoatActionNameSchema,
  type BoatRecovery,
  createRestoreRecoveryController,
  listWorkspaces,
  PlanItemSchema,
  type RestoreActionName,
  RestoreActionNameSchema,
  RestoreActionResultSchema,
  type RestoreFence,
  RestoreFenceSchema,
  RestorePreviewSchema,
  restoreCommand,
} from "@drydock/recovery-controller";
import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import { z } from "zod";
import { BOT_ID } from "../bots.js";
import type { ServerContext } from "../context.js";
import { sagaStore, workspaceRoot } from "../domain/workspaces.js";
import { HttpProblem } from "../http-errors.js";
import { collectGarbage, lockGarbage } from "./locks.js";
import { answers, ErrorBody } from "./schemas.js";

/**
 * The fenced actions `drydock` offers, over HTTP: each is a preview (the fence and the exact CLI command, as
 * data; nothing changes) and an apply that takes the previewed fence back and goes through the recovery
 * controller exactly as the CLI does. A fence that no longer matches is refused with the CLI's "state
 * changed" answer (409 `state_changed`, the message saying which part moved). Restores: abort, release,
 * complete, rollback (`restores <action>`); Boats: adopt and retireCreate (`creates adopt|retire`),
 * reconcileDeletion and retryDeletion (`deletions reconcile|retry`). Writes need the server's token (the
 * app's one auth hook).
 */

// ---------------------------------------------------------------------------------------------------------
// Schemas (exported: the console's typed client derives its types from them)

/** The shared error body of every route (schemas.ts), under the name the console's client imports. */
export const ErrorResponse = ErrorBody;

const OperationIdParam = z.string().regex(RESTORE_OPERATION_ID, "must be an operation id");

export const RestoreParams = z.object({ operationId: OperationIdParam });
export const RestoreActionParams = z.object({
  operationId: OperationIdParam,
  action: RestoreActionNameSchema,
});

/** GET /v1/recovery/restores/:operationId: the controller's preview (timeline, owner, fence, verdicts). */
export const RestoreDetailResponse = z.object({
  ok: z.literal(true),
  botId: z.string(),
  /** The preview replayed the saga's hash chain: a chain that does not verify answers an error instead. */
  chain: z.literal("verified"),
  restore: RestorePreviewSchema,
  /** The exact `drydock restores <action> … --yes` command for every eligible action, else null. */
  commands: z.object({
    abort: z.string().nullable(),
    release: z.string().nullable(),
    complete: z.string().nullable(),
    rollback: z.string().nullable(),
  }),
});

/** GET /v1/recovery/restores/:operationId/:action: what `drydock restores <action> <id>` (no --yes) prints. */
export const RestoreActionPreviewResponse = z.object({
  ok: z.literal(true),
  preview: z.literal(true),
  changed: z.literal(false),
  action: RestoreActionNameSchema,
  operationId: z.string(),
  botId: z.string(),
  eligible: z.boolean(),
  blockers: z.array(z.string()),
  /** The `--expected-*` values, to send back to apply. */
  fence: RestoreFenceSchema,
  /** The exact CLI command that applies it against this fence, or null when not eligible. */
  command: z.string().nullable(),
});

export const RestoreActionBody = z.strictObject({
  fence: RestoreFenceSchema,
  /** abort only: the reason recorded in the saga (the CLI's --reason). */
  reason: z.string().min(1).max(500).optional(),
});

export const RestoreActionApplyResponse = RestoreActionResultSchema;

const BotIdField = z.string().regex(BOT_ID, "must be 1–120 letters, digits, '_' or '-'");
const BoxIdField = z.string().min(1).max(64);

export const BoatActionParams = z.object({ action: BoatActionNameSchema });
export const BoatTarget = z.object({ botId: BotIdField.optional(), boxId: BoxIdField.optional() });

/** GET /v1/recovery/boats/:action?botId=&boxId=: what `drydock creates|deletions <action>` (no --yes) prints. */
export const BoatActionPreviewResponse = z.object({
  ok: z.literal(true),
  preview: z.literal(true),
  changed: z.literal(false),
  action: BoatActionNameSchema,
  botId: z.string().optional(),
  boxId: z.string().optional(),
  eligible: z.boolean(),
  /** The plan item that proposes exactly this action for this target (its `stateDigest` is the fence). */
  item: PlanItemSchema.nullable(),
  /** What the plan says about this target instead, when it does not propose the action. */
  instead: PlanItemSchema.nullable(),
  /** The fence to send back to apply (`--expected-state`), or null when not eligible. */
  expectedState: z.string().nullable(),
  command: z.string().nullable(),
});

export const BoatActionBody = z.strictObject({
  botId: BotIdField.optional(),
  boxId: BoxIdField.optional(),
  expectedState: z.string().regex(/^sha256:[0-9a-f]{64}$/, "must be sha256: and 64 hex digits"),
});

const PlanActionSchema = PlanItemSchema.shape.action;
export const BoatActionApplyResponse = z.discriminatedUnion("action", [
  z.object({
    ok: z.literal(true),
    action: z.literal("adopt"),
    botId: z.string(),
    boxId: z.string(),
    name: z.string(),
    renamed: z.boolean(),
    alreadyAdopted: z.boolean(),
  }),
  z.object({
    ok: z.literal(true),
    action: z.literal("retireCreate"),
    botId: z.string(),
    boxId: z.string(),
    proof: z.number(),
  }),
  z.object({
    ok: z.literal(true),
    action: z.literal("reconcileDeletion"),
    boxId: z.string(),
    outcome: z.enum(["confirmed", "pending", "blocked", "not_running"]),
    message: z.string(),
    next: PlanActionSchema.nullable(),
  }),
  z.object({
    ok: z.literal(true),
    action: z.literal("retryDeletion"),
    boxId: z.string(),
    pending: z.boolean(),
  }),
]);

/** GET /v1/recovery/locks/gc: what `drydock locks gc` (no --yes) lists; tokens in names shown as digests. */
export const LocksGcPreviewResponse = z.object({
  ok: z.literal(true),
  preview: z.literal(true),
  changed: z.literal(false),
  /** Locks of stopped workspace edits, then election records and candidates no running process keeps. */
  candidates: z.array(z.string()),
  command: z.string(),
});

/** POST /v1/recovery/locks/gc: the CLI's --yes, said in the body (a bare POST removes nothing). */
export const LocksGcBody = z.strictObject({ confirm: z.literal(true) });

/** POST /v1/recovery/locks/gc: what `drydock locks gc --yes` removed, and what it listed but left. */
export const LocksGcApplyResponse = z.object({
  ok: z.literal(true),
  removed: z.array(z.string()),
  kept: z.array(z.string()),
});

const PurgeCandidateSchema = z.object({
  botId: z.string(),
  operationId: z.string(),
  phase: z.string(),
  seq: z.number(),
  headHash: z.string(),
  finishedAt: z.string(),
});
const PurgeKeptSchema = z.object({ botId: z.string(), operationId: z.string(), problem: z.string() });
const OlderThanDays = z.coerce.number().int().min(0).max(999_999);
const PurgeDigest = z.string().regex(/^sha256:[0-9a-f]{64}$/, "must be sha256: and 64 hex digits");

export const PurgeQuery = z.object({ olderThanDays: OlderThanDays.default(30) });

/** GET /v1/recovery/restores/purge: what `drydock restores purge` (no --yes) prints, as data. */
export const PurgePreviewResponse = z.object({
  ok: z.literal(true),
  preview: z.literal(true),
  changed: z.literal(false),
  candidates: z.array(PurgeCandidateSchema),
  /** Archives whose chain does not verify or cannot be read: evidence, never purged. */
  kept: z.array(PurgeKeptSchema),
  /** The fence: a digest of exactly the listed archives (the CLI's --expected-state). */
  stateDigest: PurgeDigest,
  command: z.string(),
});

export const PurgeBody = z.strictObject({
  olderThanDays: z.number().int().min(0).max(999_999).default(30),
  expectedState: PurgeDigest,
});

export const PurgeApplyResponse = z.object({
  ok: z.literal(true),
  purged: z.array(PurgeCandidateSchema),
  kept: z.array(PurgeKeptSchema),
});

// ---------------------------------------------------------------------------------------------------------
// Restores

/** The bot whose saga shard holds `operationId`, active or archived (the CLI's `findSaga`). */
function findRestoreBot(ctx: ServerContext, operationId: string): string {
  for (const { botId } of listWorkspaces(ctx.dataDir)) {
    const shard = sagaStore(ctx, botId).shardDir;
    if (existsSync(join(shard, operationId)) || existsSync(join(shard, ".archive", operationId)))
      return botId;
  }
  throw new HttpProblem(404, "restore_not_found", `No restore with operation id '${operationId}'.`);
}

function controllerOf(ctx: ServerContext, botId: string) {
  return createRestoreRecoveryController({
    dataDir: ctx.dataDir,
    workspaceRoot: workspaceRoot(ctx, botId),
    commandPrefix: ctx.commandPrefix(),
  });
}

/** The CLI's FENCE_MISMATCH, word for word: which part of the fence moved, and the preview to run again. */
export function staleFence(
  ctx: ServerContext,
  operationId: string,
  fresh: RestoreFence,
  given: RestoreFence,
): HttpProblem | null {
  // Say which part of the fence differs: "now seq 6" for a seq that is 6 would send a person looking in the
  // wrong place.
  const differs = [
    fresh.expectedSeq !== given.expectedSeq
      ? `its seq is ${fresh.expectedSeq}, not ${given.expectedSeq}`
      : null,
    fresh.expectedHash !== given.expectedHash ? "its head hash differs" : null,
    fresh.expectedOwnerDigest !== given.expectedOwnerDigest
      ? `its workspace lock owner is ${fresh.expectedOwnerDigest ?? "none"}, not ${given.expectedOwnerDigest ?? "none"}`
      : null,
  ].filter((part) => part !== null);
  if (differs.length === 0) return null;
  return new HttpProblem(
    409,
    "state_changed",
    `Restore ${operationId} is no longer in the state you previewed (${differs.join("; ")}); nothing was changed. Run \`${ctx.commandPrefix()} restores show ${operationId}\` again.`,
    { operationId, expected: given, actual: fresh },
  );
}

async function applyRestoreAction(
  ctx: ServerContext,
  action: RestoreActionName,
  operationId: string,
  body: z.infer<typeof RestoreActionBody>,
) {
  const botId = findRestoreBot(ctx, operationId);
  const controller = controllerOf(ctx, botId);
  // As the CLI: a fresh preview, the fence must equal it, the action must be eligible, then the controller
  // (which re-checks everything under the workspace lock, so a change after this read is refused there).
  const preview = await controller.preview(operationId);
  const stale = staleFence(ctx, operationId, preview.fence, body.fence);
  if (stale !== null) throw stale;
  const verdict = preview.actions[action];
  if (!verdict.eligible) {
    throw new HttpProblem(
      409,
      "action_not_eligible",
      `${action} is not possible for restore ${operationId}: ${verdict.blockers.join("; ")}. Nothing was changed.`,
      { operationId, blockers: verdict.blockers },
    );
  }
  const fence = body.fence;
  return action === "abort"
    ? controller.abort(operationId, { ...fence, ...(body.reason ? { reason: body.reason } : {}) })
    : action === "release"
      ? controller.release(operationId, fence)
      : action === "complete"
        ? controller.complete(operationId, fence)
        : controller.rollback(operationId, fence);
}

// ---------------------------------------------------------------------------------------------------------
// Boats

/** The server's Boat recovery (server.ts builds the recovery controller's full `BoatRecovery`). */
function boatRecovery(ctx: ServerContext): BoatRecovery {
  const recovery = ctx.recovery as Partial<BoatRecovery>;
  for (const method of ["adopt", "retireCreate", "reconcileDeletion", "retryDeletion"] as const) {
    if (typeof recovery[method] !== "function") {
      throw new HttpProblem(
        503,
        "recovery_unavailable",
        `This server's recovery source cannot ${method}; run \`${ctx.commandPrefix()} reconcile\` instead.`,
      );
    }
  }
  return recovery as BoatRecovery;
}

/** Which of botId and boxId each action names, as the CLI's arguments do. */
const TARGET: Record<BoatActionName, { botId: boolean; boxId: boolean }> = {
  adopt: { botId: true, boxId: true },
  retireCreate: { botId: true, boxId: false },
  reconcileDeletion: { botId: false, boxId: true },
  retryDeletion: { botId: false, boxId: true },
};

function boatTarget(
  action: BoatActionName,
  given: { botId?: string | undefined; boxId?: string | undefined },
) {
  const wants = TARGET[action];
  const missing = [wants.botId && !given.botId ? "botId" : null, wants.boxId && !given.boxId ? "boxId" : null]
    .filter((name) => name !== null)
    .join(" and ");
  if (missing) throw new HttpProblem(400, "invalid_request", `${action} needs ${missing}.`);
  return {
    ...(wants.botId ? { botId: given.botId as string } : {}),
    ...(wants.boxId ? { boxId: given.boxId as string } : {}),
  };
}

/** The CLI's `boatAction` preview: the plan item that proposes exactly this action for this target. */
async function previewBoatAction(
  ctx: ServerContext,
  action: BoatActionName,
  target: { botId?: string; boxId?: string },
) {
  const plan = await boatRecovery(ctx).plan(target.botId === undefined ? {} : { botIds: [target.botId] });
  const matches = (candidate: (typeof plan.items)[number]) =>
    (target.boxId === undefined || candidate.boxId === target.boxId) &&
    (target.botId === undefined ||
      candidate.botId === target.botId ||
      // A Boat no bot is known for, matched by its id.
      (target.boxId !== undefined && candidate.botId === null));
  const item =
    plan.items.find(
      (candidate) =>
        candidate.action.name === action &&
        (target.botId === undefined || candidate.botId === target.botId) &&
        (target.boxId === undefined || candidate.boxId === target.boxId),
    ) ?? null;
  const instead = item === null ? (plan.items.find(matches) ?? null) : null;
  const what = [target.botId, target.boxId].filter(Boolean).join(" ");
  if (item === null && !plan.providerListed) {
    // Without boat.dev's list the plan lacks every Boat only the list shows: no verdict on this target.
    throw new HttpProblem(
      503,
      "provider_unlisted",
      `boat.dev's list of Boats could not be read (${plan.providerError}), so the recovery plan cannot say what it needs for ${what}; nothing was changed. Retry once boat.dev answers.`,
    );
  }
  if (item === null && instead === null) {
    throw new HttpProblem(
      404,
      "not_found",
      `The recovery plan knows nothing of ${what}: no create request, deletion fence or Boat of boat.dev matches it; nothing was changed. Check the id, and see GET /v1/recovery for what is open.`,
    );
  }
  return {
    ok: true as const,
    preview: true as const,
    changed: false as const,
    action,
    ...target,
    eligible: item !== null,
    item,
    instead,
    expectedState: item?.stateDigest ?? null,
    command: item?.action.command ?? null,
  };
}

function applyBoatAction(
  ctx: ServerContext,
  action: BoatActionName,
  target: { botId?: string; boxId?: string },
  expectedState: string,
) {
  const recovery = boatRecovery(ctx);
  // The recovery re-reads everything the action depends on and refuses with STATE_CHANGED (409
  // state_changed) when the digest no longer matches: never applied against what the journals say now.
  const options = { expectedState };
  switch (action) {
    case "adopt":
      return recovery.adopt(target.botId as string, target.boxId as string, options);
    case "retireCreate":
      return recovery.retireCreate(target.botId as string, options);
    case "reconcileDeletion":
      return recovery.reconcileDeletion(target.boxId as string, options);
    case "retryDeletion":
      return recovery.retryDeletion(target.boxId as string, options);
  }
}

// ---------------------------------------------------------------------------------------------------------
// Lock garbage and archived restores (`drydock locks gc`, `drydock restores purge`)

/**
 * `locks gc` has no fence in the CLI (it removes only what is garbage when it runs, judged by file-lock and
 * restore-saga again at that moment), and neither has its apply here: the preview lists what would be
 * removed; the apply removes what is still garbage then, and answers what it removed and which of the
 * listed files it left (`kept`: no longer garbage, or already gone).
 */
function previewLocksGc(ctx: ServerContext) {
  const { stoppedEdits, leftovers } = lockGarbage(ctx);
  return {
    ok: true as const,
    preview: true as const,
    changed: false as const,
    candidates: [...stoppedEdits, ...leftovers],
    command: `${ctx.commandPrefix()} locks gc --yes`,
  };
}

async function applyLocksGc(ctx: ServerContext) {
  const { stoppedEdits, leftovers } = lockGarbage(ctx);
  const listed = [...stoppedEdits, ...leftovers];
  const removed = await collectGarbage(ctx, stoppedEdits.length > 0);
  return { ok: true as const, removed, kept: listed.filter((file) => !removed.includes(file)) };
}

const DAY_MS = 24 * 60 * 60 * 1000;
type PurgeCandidate = z.infer<typeof PurgeCandidateSchema>;

/** The CLI's purge fence: a digest of exactly which archives are listed, each at its final seq and head. */
function purgeDigest(candidates: readonly PurgeCandidate[]): string {
  const facts = candidates
    .map((c) => [c.botId, c.operationId, c.seq, c.headHash] as const)
    .sort((a, b) => (a[0] === b[0] ? a[1].localeCompare(b[1]) : a[0].localeCompare(b[0])));
  const hash = createHash("sha256").update("drydock-restores-purge-v1\0").update(JSON.stringify(facts));
  return `sha256:${hash.digest("hex")}`;
}

/**
 * The CLI's `findPurgeCandidates`: every archived saga finished at or before `cutoff`, with the store that
 * holds it; an archive whose chain does not verify (or cannot be read) is `kept`, with why: it is evidence.
 */
async function findPurgeCandidates(ctx: ServerContext, cutoff: number) {
  const candidates: (PurgeCandidate & { store: ReturnType<typeof sagaStore> })[] = [];
  const kept: z.infer<typeof PurgeKeptSchema>[] = [];
  for (const { botId } of listWorkspaces(ctx.dataDir)) {
    const store = sagaStore(ctx, botId);
    for (const operationId of await store.listArchived()) {
      try {
        const saga = await store.loadArchived(operationId);
        const finishedAt = saga.events.at(-1)?.timestamp ?? "";
        if (Date.parse(finishedAt) > cutoff) continue;
        const { phase, seq, headHash } = saga;
        candidates.push({ botId, operationId, phase, seq, headHash, finishedAt, store });
      } catch (error) {
        kept.push({ botId, operationId, problem: ctx.scrubPaths((error as Error).message) });
      }
    }
  }
  return { candidates, kept };
}

async function previewPurge(ctx: ServerContext, days: number) {
  const { candidates, kept } = await findPurgeCandidates(ctx, ctx.now() - days * DAY_MS);
  const listed = candidates.map(({ store: _store, ...rest }) => rest);
  const stateDigest = purgeDigest(listed);
  const command = `${ctx.commandPrefix()} restores purge --older-than-days ${days} --expected-state ${stateDigest} --yes`;
  return { listed, candidates, kept, stateDigest, command };
}

/**
 * `restores purge --yes --expected-state`: each listed archive purged with the fence just read (events
 * deleted, a receipt kept), but only if the list is still exactly the one previewed (else 409
 * state_changed, the CLI's FENCE_MISMATCH, nothing purged).
 */
async function applyPurge(ctx: ServerContext, days: number, expectedState: string) {
  const { listed, candidates, kept, stateDigest } = await previewPurge(ctx, days);
  if (expectedState !== stateDigest) {
    throw new HttpProblem(
      409,
      "state_changed",
      `The archived restores to purge are not the ones previewed (now ${listed.length}); nothing was purged. Run \`${ctx.commandPrefix()} restores purge --older-than-days ${days}\` again and check the list.`,
      { expected: expectedState, actual: stateDigest },
    );
  }
  const purged: PurgeCandidate[] = [];
  for (const { store, ...candidate } of candidates) {
    await store.purgeArchived(candidate.operationId, {
      expectedSeq: candidate.seq,
      expectedHash: candidate.headHash,
    });
    purged.push(candidate);
  }
  return { ok: true as const, purged, kept };
}

// ---------------------------------------------------------------------------------------------------------
// Routes

/** GET /v1/recovery/restores/:operationId */
const restoreDetailSchema = {
  schema: {
    summary: "A restore that needs a person: its timeline, owner, fence and the actions it allows",
    params: RestoreParams,
    response: answers({ 200: RestoreDetailResponse }),
  },
};

/** GET /v1/recovery/restores/:operationId/:action */
const restorePreviewSchema = {
  schema: {
    summary: "Preview a restore action (abort, release, complete, rollback): its fence and CLI command",
    params: RestoreActionParams,
    response: answers({ 200: RestoreActionPreviewResponse }),
  },
};

/** POST /v1/recovery/restores/:operationId/:action */
const restoreApplySchema = {
  schema: {
    summary: "Apply a restore action against its previewed fence (409 state_changed when it moved)",
    params: RestoreActionParams,
    body: RestoreActionBody,
    response: answers({ 200: RestoreActionApplyResponse }),
  },
};

/** GET /v1/recovery/boats/:action */
const boatPreviewSchema = {
  schema: {
    summary: "Preview a Boat action (adopt, retireCreate, reconcileDeletion, retryDeletion) for a target",
    params: BoatActionParams,
    querystring: BoatTarget,
    response: answers({ 200: BoatActionPreviewResponse }),
  },
};

/** POST /v1/recovery/boats/:action */
const boatApplySchema = {
  schema: {
    summary: "Apply a Boat action against its previewed state (409 state_changed when it moved)",
    params: BoatActionParams,
    body: BoatActionBody,
    response: answers({ 200: BoatActionApplyResponse }),
  },
};

/** GET /v1/recovery/locks/gc */
const locksGcPreviewSchema = {
  schema: {
    summary: "Preview lock garbage collection: the leftovers and stopped-edit locks that would go",
    response: answers({ 200: LocksGcPreviewResponse }),
  },
};

/** POST /v1/recovery/locks/gc */
const locksGcApplySchema = {
  schema: {
    summary: "Remove the lock garbage that is still garbage now (as `drydock locks gc --yes`)",
    body: LocksGcBody,
    response: answers({ 200: LocksGcApplyResponse }),
  },
};

/** GET /v1/recovery/restores/purge */
const purgePreviewSchema = {
  schema: {
    summary: "Preview purging archived restores finished olderThanDays ago: the list and its fence",
    querystring: PurgeQuery,
    response: answers({ 200: PurgePreviewResponse }),
  },
};

/** POST /v1/recovery/restores/purge */
const purgeApplySchema = {
  schema: {
    summary: "Purge the previewed archived restores (409 state_changed when the list moved)",
    body: PurgeBody,
    response: answers({ 200: PurgeApplyResponse }),
  },
};

/** The restore and Boat action routes: one plugin for app.ts to register. */
export const recoveryActionRoutes: FastifyPluginAsyncZod<ServerContext> = async (app, ctx) => {
  await app.register(restoreActionRoutes, ctx);
  await app.register(boatActionRoutes, ctx);
  await app.register(housekeepingRoutes, ctx);
};

/** GET|POST /v1/recovery/locks/gc, GET|POST /v1/recovery/restores/purge. */
const housekeepingRoutes: FastifyPluginAsyncZod<ServerContext> = async (app, ctx) => {
  app.get("/v1/recovery/locks/gc", locksGcPreviewSchema, async () => previewLocksGc(ctx));
  app.post("/v1/recovery/locks/gc", locksGcApplySchema, async () => applyLocksGc(ctx));

  app.get("/v1/recovery/restores/purge", purgePreviewSchema, async (request) => {
    const days = request.query.olderThanDays;
    const { listed, kept, stateDigest, command } = await previewPurge(ctx, days);
    return {
      ok: true as const,
      preview: true as const,
      changed: false as const,
      candidates: listed,
      kept,
      stateDigest,
      command,
    };
  });
  app.post("/v1/recovery/restores/purge", purgeApplySchema, async (request) =>
    applyPurge(ctx, request.body.olderThanDays, request.body.expectedState),
  );
};

/** GET /v1/recovery/restores/:operationId, GET|POST /v1/recovery/restores/:operationId/:action. */
const restoreActionRoutes: FastifyPluginAsyncZod<ServerContext> = async (app, ctx) => {
  app.get("/v1/recovery/restores/:operationId", restoreDetailSchema, async (request) => {
    const { operationId } = request.params;
    const botId = findRestoreBot(ctx, operationId);
    const preview = await controllerOf(ctx, botId).preview(operationId);
    const command = (action: RestoreActionName) =>
      preview.actions[action].eligible ? restoreCommand(ctx.commandPrefix(), action, preview) : null;
    return {
      ok: true as const,
      botId,
      chain: "verified" as const,
      // The lock file's server path never leaves (answers name no server paths).
      restore: {
        ...preview,
        ...(preview.tornLock ? { tornLock: { ...preview.tornLock, path: null } } : {}),
      },
      commands: {
        abort: command("abort"),
        release: command("release"),
        complete: command("complete"),
        rollback: command("rollback"),
      },
    };
  });

  app.get("/v1/recovery/restores/:operationId/:action", restorePreviewSchema, async (request) => {
    const { operationId, action } = request.params;
    const botId = findRestoreBot(ctx, operationId);
    const preview = await controllerOf(ctx, botId).preview(operationId);
    const verdict = preview.actions[action];
    return {
      ok: true as const,
      preview: true as const,
      changed: false as const,
      action,
      operationId,
      botId,
      eligible: verdict.eligible,
      blockers: verdict.blockers,
      fence: preview.fence,
      command: verdict.eligible ? restoreCommand(ctx.commandPrefix(), action, preview) : null,
    };
  });

  app.post("/v1/recovery/restores/:operationId/:action", restoreApplySchema, async (request) => {
    const { operationId, action } = request.params;
    return applyRestoreAction(ctx, action, operationId, request.body);
  });
};

/** GET|POST /v1/recovery/boats/:action (adopt, retireCreate, reconcileDeletion, retryDeletion). */
const boatActionRoutes: FastifyPluginAsyncZod<ServerContext> = async (app, ctx) => {
  app.get("/v1/recovery/boats/:action", boatPreviewSchema, async (request) => {
    const { action } = request.params;
    return previewBoatAction(ctx, action, boatTarget(action, request.query));
  });

  app.post("/v1/recovery/boats/:action", boatApplySchema, async (request) => {
    const { action } = request.params;
    const target = boatTarget(action, request.body);
    const run = () => applyBoatAction(ctx, action, target, request.body.expectedState);
    // One lifecycle operation per bot in this process, as the computer routes: an overlapping click is a
    // clear 409 bot_busy, not a queue (the journals serialize two processes).
    return target.botId === undefined ? run() : ctx.exclusivity.run(target.botId, run);
  });
};
