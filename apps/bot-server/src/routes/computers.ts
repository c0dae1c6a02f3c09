import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import { z } from "zod";
import type { ServerContext } from "../context.js";
import { deleteComputer, provisionComputer } from "../domain/computers.js";
import { ComputersPageQuery, NextCursor } from "./pagination.js";
import { BotIdParam, requireBot } from "./params.js";
import { answers, ComputerBody, okBody } from "./schemas.js";

const Provisioned = okBody({
  computer: ComputerBody.extend({ boxId: z.string(), name: z.string(), createdThisAttempt: z.boolean() }),
});

const DeleteComputerBody = z.object({ confirmName: z.string().min(1).max(100) }).strict();

/** GET /v1/bots/:botId/computer */
const getComputerSchema = {
  schema: {
    summary: "The bot's computer (its Boat)",
    params: BotIdParam,
    response: answers({ 200: okBody({ computer: ComputerBody }) }),
  },
};

/** POST /v1/bots/:botId/computer */
const provisionSchema = {
  schema: {
    summary: "Provision the bot's computer (idempotent)",
    params: BotIdParam,
    response: answers({ 200: Provisioned, 201: Provisioned }),
  },
};

/** DELETE /v1/bots/:botId/computer */
const deleteComputerSchema = {
  schema: {
    summary: "Delete the bot's Boat (fenced, named)",
    params: BotIdParam,
    body: DeleteComputerBody,
    response: answers({ 200: okBody({}), 202: okBody({ pending: z.literal(true) }) }),
  },
};

/** GET /v1/computers */
const inventorySchema = {
  schema: {
    summary: "Sanitized inventory of every Boat, one page at a time",
    description:
      "This installation's Boats: first those its journals know (by id), then those boat.dev lists under its names that no journal knows, in boat.dev's list order. Each page costs at most `limit` direct reads and 5 list requests to boat.dev, whatever the account's size; a page may hold fewer than `limit` Boats (even none) while `nextCursor` is not null.",
    querystring: ComputersPageQuery,
    response: answers({
      200: okBody({ computers: z.array(z.looseObject({})), nextCursor: NextCursor }),
    }),
  },
};

/** GET/POST/DELETE /v1/bots/:botId/computer and GET /v1/computers. */
export const computerRoutes: FastifyPluginAsyncZod<ServerContext> = async (app, ctx) => {
  app.get("/v1/bots/:botId/computer", getComputerSchema, async (request) => {
    await requireBot(ctx, request.params.botId, { peek: true });
    return { ok: true, computer: ctx.computerView(request.params.botId, await ctx.readJournals()) };
  });

  app.post("/v1/bots/:botId/computer", provisionSchema, async (request, reply) => {
    const { botId } = request.params;
    await requireBot(ctx, botId);
    const result = await provisionComputer(ctx, botId, request.log);
    return reply.code(result.createdThisAttempt ? 201 : 200).send({
      ok: true,
      computer: {
        status: "ready",
        boxId: result.boxId,
        name: result.name,
        createdThisAttempt: result.createdThisAttempt,
      },
    });
  });

  app.delete("/v1/bots/:botId/computer", deleteComputerSchema, async (request, reply) => {
    const { botId } = request.params;
    await requireBot(ctx, botId);
    const result = await deleteComputer(ctx, botId, request.body.confirmName);
    return reply
      .code(result.pending ? 202 : 200)
      .send(result.pending ? { ok: true, pending: true } : { ok: true });
  });

  app.get("/v1/computers", inventorySchema, async (request) => {
    const { limit, cursor } = request.query;
    const page = await ctx.lifecycle.inventoryPage({ limit, ...(cursor === undefined ? {} : { cursor }) });
    return { ok: true, computers: page.computers, nextCursor: page.nextCursor };
  });
};
