import { dirname } from "node:path";
import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import { z } from "zod";
import type { ServerContext } from "../context.js";
import { FILE_WRITE_CRASH_POINT } from "../deps.js";
import { refuseReadDuringRestore, withWorkspace } from "../domain/workspace-guards.js";
import { ensureWorkspace, workspaceExists, workspaceRoot } from "../domain/workspaces.js";
import { HttpProblem } from "../http-errors.js";
import { sweepStaleWorkspaceTemps, workspaceFiles } from "../workspace-files.js";
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

/** PUT/GET/DELETE /v1/bots/:botId/files/*: the workspace's files, raw bytes. */
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
    const body = request.body;
    const path = request.params["*"];
    ensureWorkspace(ctx, botId);
    const root = workspaceRoot(ctx, botId);
    const written = await withWorkspace(
      ctx,
      botId,
      "file-write",
      () => {
        // Temps an interrupted write left beside this one (and at the top) go now, under the lock.
        const parent = dirname(path);
        sweepStaleWorkspaceTemps(root, { dirs: parent === "." ? [""] : ["", parent] });
        return workspaceFiles(root, {
          maxFileBytes: ctx.maxFileBytes,
          // Tests only: the write's data is in its flushed temp, not renamed yet, the workspace lock held.
          ...(ctx.restoreCrash
            ? { hooks: { beforeRename: () => ctx.restoreCrash?.point(FILE_WRITE_CRASH_POINT) } }
            : {}),
        }).write(path, body);
      },
      bot,
    );
    return reply.code(201).send({ ok: true, path: request.params["*"], bytes: written.bytes });
  });

  app.get("/v1/bots/:botId/files/*", readFileSchema, async (request, reply) => {
    const { botId } = request.params;
    await requireBot(ctx, botId);
    await refuseReadDuringRestore(ctx, botId);
    const data = workspaceFiles(workspaceRoot(ctx, botId), { maxFileBytes: ctx.maxFileBytes }).read(
      request.params["*"],
    );
    return reply.header("content-type", "application/octet-stream").send(data);
  });

  app.delete("/v1/bots/:botId/files/*", deleteFileSchema, async (request) => {
    const { botId } = request.params;
    const bot = await requireBot(ctx, botId);
    if (!workspaceExists(ctx, botId)) {
      throw new HttpProblem(404, "file_not_found", `No file at '${request.params["*"]}' in this workspace.`);
    }
    await withWorkspace(
      ctx,
      botId,
      "file-delete",
      () => workspaceFiles(workspaceRoot(ctx, botId)).remove(request.params["*"]),
      bot,
    );
    return { ok: true };
  });
};
