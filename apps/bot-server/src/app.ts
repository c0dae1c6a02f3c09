import { timingSafeEqual } from "node:crypto";
import Fastify, { type FastifyInstance, type FastifyReply, LogController } from "fastify";
import {
  hasZodFastifySchemaValidationErrors,
  serializerCompiler,
  validatorCompiler,
  type ZodTypeProvider,
} from "fastify-type-provider-zod";
import { createServerContext, type ServerContext } from "./context.js";
import type { ServerDeps } from "./deps.js";
import { retireWorkspace, unfinishedRetirements } from "./domain/workspace-retirement.js";
import { toHttpError } from "./http-errors.js";
import { botRoutes } from "./routes/bots.js";
import { checkpointRoutes } from "./routes/checkpoints.js";
import { computerRoutes } from "./routes/computers.js";
import { consoleRoutes } from "./routes/console.js";
import { fileRoutes } from "./routes/files.js";
import { healthRoutes } from "./routes/health.js";
import { recoveryRoutes } from "./routes/recovery.js";
import { recoveryActionRoutes } from "./routes/recovery-actions.js";
import { WorkspacePathError } from "./workspace-files.js";

export {
  FILE_WRITE_CRASH_POINT,
  READYZ_PROVIDER_TIMEOUT_MS,
  type RecoverySource,
  type ServerDeps,
} from "./deps.js";

function tokenMatches(expected: string, header: string | undefined): boolean {
  if (!header?.startsWith("Bearer ")) return false;
  const given = Buffer.from(header.slice(7));
  const want = Buffer.from(expected);
  // Constant-time compare so the token cannot be guessed byte by byte from response timing.
  return given.length === want.length && timingSafeEqual(given, want);
}

/**
 * The HTTP service: Fastify's setup, the hooks (bearer token, request metrics, retirements left half-done),
 * one error handler, and the route plugins by area (`routes/`), each registered with the server context
 * (`context.ts`). The decisions the routes take live in `domain/`.
 */
export async function buildServer(deps: ServerDeps): Promise<FastifyInstance> {
  const app = createFastify(deps);
  const ctx = createServerContext(deps);

  app.addHook("onRequest", async (request, reply) => {
    // The console's page and assets hold no data: the page asks for the token and sends it to the API.
    const url = request.routeOptions.url;
    if (url === "/healthz" || url === "/console" || url?.startsWith("/console/")) return;
    if (!tokenMatches(ctx.token, request.headers.authorization)) {
      await reply
        .code(401)
        .header("www-authenticate", "Bearer")
        .send({ ok: false, error: { code: "unauthorized", message: "Send Authorization: Bearer <token>." } });
    }
  });

  app.addHook("onResponse", async (request, reply) => {
    const route = request.routeOptions.url ?? "unmatched";
    const status = reply.statusCode;
    ctx.metrics.httpRequests.inc({ method: request.method, route, status: String(status) });
    ctx.metrics.httpDuration.observe({ route }, reply.elapsedTime / 1000);
  });

  app.setNotFoundHandler(async (request, reply) => {
    await reply.code(404).send({
      ok: false,
      error: { code: "not_found", message: `No route ${request.method} ${request.url.split("?")[0]}.` },
    });
  });

  setErrorHandler(app, ctx);

  await app.register(healthRoutes, ctx);
  await app.register(botRoutes, ctx);
  await app.register(computerRoutes, ctx);
  await app.register(fileRoutes, ctx);
  await app.register(checkpointRoutes, ctx);
  await app.register(recoveryRoutes, ctx);
  await app.register(recoveryActionRoutes, ctx);
  await app.register(consoleRoutes, ctx);

  finishRetirementsWhenReady(app, ctx);
  return app;
}

function createFastify(deps: ServerDeps) {
  const app = Fastify({
    logger: deps.logger,
    bodyLimit: deps.maxFileBytes,
    // Never log bodies, headers or query strings: they may carry tokens, keys or user files.
    logController: new LogController({ disableRequestLogging: true }),
    return503OnClosing: true,
    // Fastify's default (100) would refuse legitimate nested file paths with its own 414 shape; params are
    // bounded by our zod schemas instead (file paths ≤ 1024 characters), which answer 400 naming the field.
    routerOptions: { maxParamLength: 4096 },
    // What Fastify refuses before routing (a path whose percent-encoding does not decode, e.g. `%FF`) gets
    // the same JSON error shape too, instead of Fastify's own.
    frameworkErrors: (error, _request, reply) => {
      void (reply as FastifyReply).code(400).send({
        ok: false,
        error: { code: "bad_request", message: `Malformed request: ${error.message}` },
      });
    },
    // Requests Node's HTTP parser rejects (bad bytes in the path, broken headers) get the same JSON error
    // shape as every other refusal, instead of Fastify's default text.
    clientErrorHandler: (error, socket) => {
      if (!socket.writable) return;
      const body = JSON.stringify({
        ok: false,
        error: {
          code: "bad_request",
          message: `Malformed HTTP request (${(error as NodeJS.ErrnoException).code ?? "parse error"}).`,
        },
      });
      socket.end(
        `HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
      );
    },
  }).withTypeProvider<ZodTypeProvider>();
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);

  app.addContentTypeParser("application/octet-stream", { parseAs: "buffer" }, (_req, body, done) =>
    done(null, body),
  );
  // Many clients label every request JSON, also a DELETE sent without a body: an empty JSON body is no body
  // (Fastify's parser refuses it), so the route answers as it does to a bare request. Anything else goes to
  // Fastify's own parser, with its prototype-poisoning refusals.
  const parseJson = app.getDefaultJsonParser("error", "error");
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser("application/json", { parseAs: "string" }, (request, body, done) => {
    const text = typeof body === "string" ? body : body.toString("utf8");
    if (text === "") return done(null, undefined);
    void parseJson(request, text, done);
  });
  return app;
}

/** One error handler: schema refusals, Fastify's own, and everything else through `toHttpError`. */
function setErrorHandler(app: FastifyInstance, ctx: ServerContext): void {
  app.setErrorHandler(async (error, request, reply) => {
    if (hasZodFastifySchemaValidationErrors(error)) {
      const where = (error as { validationContext?: string }).validationContext ?? "request";
      const first = error.validation[0];
      const field = `${where}${first?.instancePath ? first.instancePath.replaceAll("/", ".") : ""}`;
      return reply.code(400).send({
        ok: false,
        error: {
          code: "invalid_request",
          message: `${field}: ${first?.message ?? "invalid"}`,
          details: { field },
        },
      });
    }
    const fastifyStatus = (error as { statusCode?: number }).statusCode;
    if (typeof fastifyStatus === "number" && fastifyStatus >= 400 && fastifyStatus < 500) {
      // Fastify's own refusals: bad JSON, body too large, unsupported media type.
      const code =
        fastifyStatus === 413
          ? "payload_too_large"
          : fastifyStatus === 415
            ? "unsupported_media_type"
            : "invalid_request";
      return reply
        .code(fastifyStatus)
        .send({ ok: false, error: { code, message: (error as Error).message } });
    }
    const mapped = toHttpError(error);
    if (mapped.status >= 500) request.log.error({ err: error }, "request failed");
    // Answers never name server paths: a package message that does gets the data directory elided.
    mapped.body.error.message = ctx.scrubPaths(mapped.body.error.message);
    // A bad file path is the client's mistake, not a refusal of work (busy, fenced, paused).
    const clientMistake = error instanceof WorkspacePathError;
    if (!clientMistake && (mapped.status === 409 || mapped.status === 429 || mapped.status === 503)) {
      ctx.metrics.refusals.inc({ status: String(mapped.status), code: mapped.body.error.code });
    }
    if (mapped.retryAfterS !== undefined) reply.header("retry-after", String(mapped.retryAfterS));
    return reply.code(mapped.status).send(mapped.body);
  });
}

/**
 * Retirements a stopped server left half-done, finished once the server is up, in the background (a busy
 * workspace must not hold up the start); each re-checks the registry under the workspace lock. One that
 * cannot run now (a restore still unsettled, a disk error) stays in GET /v1/recovery until DELETE does it.
 */
function finishRetirementsWhenReady(app: FastifyInstance, ctx: ServerContext): void {
  let retiringAtStart: Promise<void> = Promise.resolve();
  app.addHook("onReady", async () => {
    retiringAtStart = (async () => {
      let unfinished: { botId: string }[];
      try {
        unfinished = await unfinishedRetirements(ctx);
      } catch (error) {
        app.log.warn(
          { err: error },
          "deleted bots' unfinished workspace retirements could not be looked for",
        );
        return;
      }
      for (const { botId } of unfinished) {
        try {
          await ctx.exclusivity.run(botId, () => retireWorkspace(ctx, botId, "retire-deleted"));
          app.log.info({ botId }, "finished retiring a deleted bot's workspace");
        } catch (error) {
          app.log.warn({ err: error, botId }, "a deleted bot's workspace could not be retired at start");
        }
      }
    })();
  });
  app.addHook("onClose", async () => {
    await retiringAtStart;
  });
}
