import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import { z } from "zod";
import type { ServerContext } from "../context.js";
import { deleteComputer, provisionComputer } from "../domain/computers.js";
import { BotIdParam, requireBot } from "./params.js";

const DeleteComputerBody = z.object({ confirmName: z.string().min(1).max(100) }).strict();

/** GET/POST/DELETE /v1/bots/:botId/computer and GET /v1/computers. */
export const computerRoutes: FastifyPluginAsyncZod<ServerContext> = async (app, ctx) => {
  app.get("/v1/bots/:botId/computer", { schema: { params: BotIdParam } }, async (request) => {
    await requireBot(ctx, request.params.botId, { peek: true });
    return { ok: true, computer: ctx.computerView(request.params.botId, await ctx.readJournals()) };
  });

  app.post("/v1/bots/:botId/computer", { schema: { params: BotIdParam } }, async (request, reply) => {
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

  app.delete(
    "/v1/bots/:botId/computer",
    { schema: { params: BotIdParam, body: DeleteComputerBody } },
    async (request, reply) => {
      const { botId } = request.params;
      await requireBot(ctx, botId);
      const result = await deleteComputer(ctx, botId, request.body.confirmName);
      return reply
        .code(result.pending ? 202 : 200)
        .send(result.pending ? { ok: true, pending: true } : { ok: true });
    },
  );

  app.get("/v1/computers", async () => ({ ok: true, computers: await ctx.lifecycle.inventory() }));
};
