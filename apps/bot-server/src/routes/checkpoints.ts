import { CHECKPOINT_ID, RESTORE_OPERATION_ID } from "@drydock/facts";
import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import { z } from "zod";
import type { ServerContext } from "../context.js";
import { HttpProblem } from "../http-errors.js";
import { BotIdParam, requireBot } from "./params.js";
import { answers, CheckpointRow, okBody } from "./schemas.js";

const RestoreView = z.looseObject({
  operationId: z.string(),
  phase: z.string(),
  seq: z.number(),
  headHash: z.string(),
  events: z.array(z.looseObject({ seq: z.number(), phase: z.string(), timestamp: z.string() })),
});

const RestoreParams = z.object({
  botId: BotIdParam.shape.botId,
  checkpointId: z.string().regex(CHECKPOINT_ID, "is not a checkpoint id"),
});
const OperationParams = z.object({
  operationId: z.string().regex(RESTORE_OPERATION_ID, "is not an operation id"),
});

/** POST /v1/bots/:botId/checkpoints */
const createCheckpointSchema = {
  schema: {
    summary: "Snapshot the workspace",
    params: BotIdParam,
    response: answers({
      201: okBody({
        checkpoint: z.looseObject({ checkpointId: z.string(), files: z.number(), bytes: z.number() }),
      }),
    }),
  },
};

/** GET /v1/bots/:botId/checkpoints */
const listCheckpointsSchema = {
  schema: {
    summary: "List the workspace's checkpoints",
    params: BotIdParam,
    response: answers({ 200: okBody({ checkpoints: z.array(CheckpointRow) }) }),
  },
};

/** POST /v1/bots/:botId/checkpoints/:checkpointId/restore */
const restoreSchema = {
  schema: {
    summary: "Restore the workspace to a checkpoint (the restore saga)",
    params: RestoreParams,
    response: answers({
      200: okBody({
        operationId: z.string(),
        phase: z.string(),
        // Set when the saga finished but could not be archived (restore-saga's ArchiveWarning).
        warning: z.looseObject({ code: z.string(), message: z.string() }).nullable(),
      }),
    }),
  },
};

/** GET /v1/restores/:operationId */
const restoreSummarySchema = {
  schema: {
    summary: "A restore saga's summary",
    params: OperationParams,
    response: answers({ 200: okBody({ botId: z.string(), restore: RestoreView }) }),
  },
};

/** POST/GET /v1/bots/:botId/checkpoints, POST …/checkpoints/:checkpointId/restore, GET /v1/restores/:operationId. */
export const checkpointRoutes: FastifyPluginAsyncZod<ServerContext> = async (app, ctx) => {
  app.post("/v1/bots/:botId/checkpoints", createCheckpointSchema, async (request, reply) => {
    const bot = await requireBot(ctx, request.params.botId);
    const created = await ctx.workspace.createCheckpoint(bot);
    return reply.code(201).send({ ok: true, checkpoint: created });
  });

  app.get("/v1/bots/:botId/checkpoints", listCheckpointsSchema, async (request) => {
    const { botId } = request.params;
    await requireBot(ctx, botId);
    return { ok: true, checkpoints: await ctx.workspace.listCheckpoints(botId) };
  });

  app.post("/v1/bots/:botId/checkpoints/:checkpointId/restore", restoreSchema, async (request) =>
    ctx.workspace.restore(request.params.botId, request.params.checkpointId),
  );

  app.get("/v1/restores/:operationId", restoreSummarySchema, async (request) => {
    const { operationId } = request.params;
    const found = await ctx.workspace.findRestore(operationId);
    if (found === null) {
      throw new HttpProblem(404, "restore_not_found", `No restore with operation id '${operationId}'.`);
    }
    return { ok: true, botId: found.botId, restore: found.restore };
  });
};
