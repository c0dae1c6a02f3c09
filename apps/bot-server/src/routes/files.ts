import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import { z } from "zod";
import type { ServerContext } from "../context.js";
import { HttpProblem } from "../http-errors.js";
import { BotIdParam, requireBot } from "./params.js";
import { answers, Binary, okBody } from "./schemas.js";

const FileParams = z.object({
  botId: BotIdParam.shape.botId,
  "*": z.string().min(1, "a file path is required"),
});

/** PUT /v1/bots/:botId/files/* */
const writeFileSchema = {
  schema: {
    summary: "Write a workspace file (raw bytes)",
    params: FileParams,
    // Documents the raw body; the handler refuses anything but application/octet-stream (415).
    consumes: ["application/octet-stream"],
    body: Binary,
    response: answers({ 201: okBody({ path: z.string(), bytes: z.number() }) }),
  },
};

/** GET /v1/bots/:botId/files/* */
const readFileSchema = {
  schema: {
    summary: "Read a workspace file (raw bytes)",
    params: FileParams,
    response: answers({
      200: {
        description: "The file's bytes",
        content: { "application/octet-stream": { schema: Binary } },
      },
    }),
  },
};

/** DELETE /v1/bots/:botId/files/* */
const deleteFileSchema = {
  schema: {
    summary: "Delete a workspace file",
    params: FileParams,
    response: answers({ 200: okBody({}) }),
  },
};

/** PUT/GET/DELETE /v1/bots/:botId/files/*: the workspace's files, raw bytes (ctx.workspace: local or store). */
export const fileRoutes: FastifyPluginAsyncZod<ServerContext> = async (app, ctx) => {
  app.put("/v1/bots/:botId/files/*", writeFileSchema, async (request, reply) => {
    const { botId } = request.params;
    const bot = await requireBot(ctx, botId);
    if (!Buffer.isBuffer(request.body)) {
      throw new HttpProblem(
        415,
        "unsupported_media_type",
        "Send the file's bytes with Content-Type: application/octet-stream.",
      );
    }
    const path = request.params["*"];
    const written = await ctx.workspace.writeFile(bot, path, request.body);
    return reply.code(201).send({ ok: true, path, bytes: written.bytes });
  });

  app.get("/v1/bots/:botId/files/*", readFileSchema, async (request, reply) => {
    const { botId } = request.params;
    await requireBot(ctx, botId);
    const data = await ctx.workspace.readFile(botId, request.params["*"]);
    return reply.header("content-type", "application/octet-stream").send(data);
  });

  app.delete("/v1/bots/:botId/files/*", deleteFileSchema, async (request) => {
    const bot = await requireBot(ctx, request.params.botId);
    await ctx.workspace.deleteFile(bot, request.params["*"]);
    return { ok: true };
  });
};
