import { randomUUID } from "node:crypto";
import Fastify, {
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  LogController,
} from "fastify";
import {
  hasZodFastifySchemaValidationErrors,
  validatorCompiler,
  type ZodTypeProvider,
} from "fastify-type-provider-zod";
import { bearerToken, sameToken } from "./auth.js";
import { createServerContext, type ServerContext } from "./context.js";
import type { ServerDeps } from "./deps.js";
import { toHttpError } from "./http-errors.js";
import { REQUEST_ID_HEADER, requestIdFor } from "./request-id.js";
import { botRoutes } from "./routes/bots.js";
import { checkpointRoutes } from "./routes/checkpoints.js";
import { computerRoutes } from "./routes/computers.js";
import { consoleRoutes } from "./routes/console.js";
import { fileRoutes } from "./routes/files.js";
import { healthRoutes } from "./routes/health.js";
import { lockRoutes } from "./routes/locks.js";
import { isPublicRoute, openApiRoutes, registerOpenApi } from "./routes/openapi.js";
import { recoveryRoutes } from "./routes/recovery.js";
import { recoveryActionRoutes } from "./routes/recovery-actions.js";
import { WorkspacePathError } from "./workspace-files.js";

export {
  FILE_WRITE_CRASH_POINT,
  READYZ_PROVIDER_TIMEOUT_MS,
  type RecoverySource,
  type ServerDeps,
} from "./deps.js";

export interface RegisteredRoute {
  method: string;
  url: string;
}

const ROUTES = new WeakMap<FastifyInstance, RegisteredRoute[]>();

/** Every route `buildServer` registered on `app` (also Fastify's HEAD twins and the docs page's own). */
export function registeredRoutes(app: FastifyInstance): readonly RegisteredRoute[] {
  return ROUTES.get(app) ?? [];
}

/** Methods a `read` token may use; every other one is a write (403 `forbidden` for a read token). */
const READ_METHODS = new Set(["GET", "HEAD"]);

/** Why a request is refused before its route runs: 401 (no or unknown token) or 403 (a read token writing). */
interface Refusal {
  status: 401 | 403;
  body: { ok: false; error: { code: "unauthorized" | "forbidden"; message: string } };
}

/**
 * Who may call what: probes, the OpenAPI document and its page are open; /metrics is open unless
 * DRYDOCK_METRICS_TOKEN is set (then it takes that token or any API token); everything else needs an API
 * token (401), and a write needs an `admin` one (403). A route that does not exist answers 401 without a
 * token and 404 with any, so an unauthenticated caller learns nothing about the routes.
 */
function refusal(ctx: ServerContext, request: FastifyRequest): Refusal | null {
  const route = request.routeOptions.url;
  if (route !== undefined && isPublicRoute(route)) return null;
  const presented = bearerToken(request.headers.authorization);
  const principal = presented === null ? null : ctx.auth.lookup(presented);
  if (route === "/metrics") {
    if (ctx.metricsToken === undefined || principal !== null) return null;
    if (presented !== null && sameToken(ctx.metricsToken, presented)) return null;
  }
  if (principal === null) {
    return {
      status: 401,
      body: { ok: false, error: { code: "unauthorized", message: "Send Authorization: Bearer <token>." } },
    };
  }
  if (route !== undefined && principal.role !== "admin" && !READ_METHODS.has(request.method)) {
    return {
      status: 403,
      body: {
        ok: false,
        error: {
          code: "forbidden",
          message: `The token '${principal.name}' may only read (role ${principal.role}); changes need an admin token.`,
        },
      },
    };
  }
  return null;
}

/** The request id goes into every error body (`error.requestId`), as in the header and the log lines. */
function withRequestId(request: FastifyRequest, payload: unknown): unknown {
  if (typeof payload !== "object" || payload === null) return payload;
  const body = payload as { ok?: unknown; error?: unknown };
  if (body.ok !== false || typeof body.error !== "object" || body.error === null) return payload;
  if ("requestId" in body.error) return payload;
  return { ...body, error: { ...body.error, requestId: request.id } };
}

/**
 * The HTTP service: Fastify's setup, the hooks (bearer token, request metrics, retirements left half-done),
 * one error handler, and the route plugins by area (`routes/`), each registered with the server context
 * (`context.ts`). The decisions the routes take live in `domain/`.
 */
export async function buildServer(deps: ServerDeps): Promise<FastifyInstance> {
  const app = createFastify(deps);
  const ctx = createServerContext(deps);
  const routes: RegisteredRoute[] = [];
  ROUTES.set(app, routes);
  app.addHook("onRoute", (route) => {
    for (const method of [route.method].flat()) routes.push({ method, url: route.url });
  });

  addRequestHooks(app, ctx, deps);

  app.setNotFoundHandler(async (request, reply) => {
    await reply.code(404).send({
      ok: false,
      error: { code: "route_not_found", message: `No route ${request.method} ${request.url.split("?")[0]}.` },
    });
  });

  setErrorHandler(app, ctx);

  // Before the routes, so that it sees each of them (its onRoute hook) and documents it from its schemas.
  await registerOpenApi(app);
  await app.register(openApiRoutes, ctx);
  await app.register(healthRoutes, ctx);
  await app.register(botRoutes, ctx);
  await app.register(computerRoutes, ctx);
  await app.register(fileRoutes, ctx);
  await app.register(checkpointRoutes, ctx);
  await app.register(recoveryRoutes, ctx);
  await app.register(recoveryActionRoutes, ctx);
  await app.register(lockRoutes, ctx);
  await app.register(consoleRoutes, ctx);

  finishRetirementsWhenReady(app, ctx);
  return app;
}

/**
 * Every request: its id in the response header, the token check, the request id put into error bodies,
 * `Connection: close` once closing, and on its end the request metrics and the access log line.
 *
 * The hooks take Fastify's `done` callback rather than being async: none of them waits for anything, and an
 * async hook costs each request a promise and a turn of the microtask queue (bench/suites/bots-page.ts).
 */
function addRequestHooks(app: FastifyInstance, ctx: ServerContext, deps: ServerDeps): void {
  // First: the request's scope (its epoch on postgres), entered with `done` so every later hook and the
  // handler run inside it.
  const scope = deps.requestScope;
  if (scope !== undefined) app.addHook("onRequest", (_request, _reply, done) => scope(done));
  app.addHook("onRequest", (request, reply, done) => {
    reply.header(REQUEST_ID_HEADER, request.id);
    const refused = refusal(ctx, request);
    if (refused === null) return done();
    // Answered here: a hook that sends the reply does not call `done`, and the request goes no further.
    if (refused.status === 401) reply.header("www-authenticate", "Bearer");
    void reply.code(refused.status).send(refused.body);
  });

  app.addHook("preSerialization", (request, _reply, payload, done) =>
    done(null, withRequestId(request, payload)),
  );

  // Once closing, every answer still sent closes its connection: a client's keep-alive connection would
  // otherwise hold the close (and so the shutdown) until Fastify's keep-alive timeout.
  let closing = false;
  app.addHook("preClose", async () => {
    closing = true;
  });
  app.addHook("onSend", (_request, reply, payload, done) => {
    if (closing) reply.header("connection", "close");
    done(null, payload);
  });

  app.addHook("onResponse", (request, reply, done) => {
    const route = request.routeOptions.url ?? "unmatched";
    const status = reply.statusCode;
    ctx.metrics.httpRequests.inc({ method: request.method, route, status: String(status) });
    ctx.metrics.httpDuration.observe({ route }, reply.elapsedTime / 1000);
    // The access log: one line per request, with its id (pino's `reqId`, as every line of the request).
    // The path without its query, cut short; never headers or bodies (tokens, keys, user files).
    request.log.info(
      {
        method: request.method,
        route,
        path: request.url.split("?")[0]?.slice(0, 512),
        status,
        ms: Math.round(reply.elapsedTime * 10) / 10,
      },
      "request",
    );
    done();
  });
}

function createFastify(deps: ServerDeps) {
  // Set once Fastify is built: Node's parser errors (below) are logged with their id too.
  let log: FastifyInstance["log"] | null = null;
  const app = Fastify({
    logger: deps.logger,
    // The caller's x-request-id when it is sane (short, plain characters), else a fresh one (request-id.ts).
    requestIdHeader: false,
    genReqId: requestIdFor,
    bodyLimit: deps.maxFileBytes,
    // Never log bodies, headers or query strings: they may carry tokens, keys or user files.
    logController: new LogController({ disableRequestLogging: true }),
    return503OnClosing: true,
    // Fastify's default (100) would refuse legitimate nested file paths with its own 414 shape; params are
    // bounded by our zod schemas instead (file paths ≤ 1024 characters), which answer 400 naming the field.
    routerOptions: { maxParamLength: 4096 },
    // What Fastify refuses before routing (a path whose percent-encoding does not decode, e.g. `%FF`) gets
    // the same JSON error shape too, instead of Fastify's own.
    frameworkErrors: (error, request, reply) => {
      void (reply as FastifyReply)
        .code(400)
        .header(REQUEST_ID_HEADER, request.id)
        .send({
          ok: false,
          error: {
            code: "bad_request",
            message: `Malformed request: ${error.message}`,
            requestId: request.id,
          },
        });
    },
    // Requests Node's HTTP parser rejects (bad bytes in the path, broken headers) get the same JSON error
    // shape as every other refusal, instead of Fastify's default text.
    clientErrorHandler: (error, socket) => {
      if (!socket.writable) return;
      const requestId = randomUUID();
      const reason = (error as NodeJS.ErrnoException).code ?? "parse error";
      log?.info({ reqId: requestId, status: 400, reason }, "malformed HTTP request");
      const body = JSON.stringify({
        ok: false,
        error: { code: "bad_request", message: `Malformed HTTP request (${reason}).`, requestId },
      });
      socket.end(
        `HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Type: application/json; charset=utf-8\r\nX-Request-Id: ${requestId}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
      );
    },
  }).withTypeProvider<ZodTypeProvider>();
  log = app.log;
  app.setValidatorCompiler(validatorCompiler);
  // Response schemas document the answers (OpenAPI) and are checked by the tests (openapi.test.ts); at run
  // time an answer is sent as the handler built it, never reshaped or turned into a 500 by its schema.
  app.setSerializerCompiler(() => (data) => JSON.stringify(data));

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
    if (
      !clientMistake &&
      (mapped.status === 409 || mapped.status === 429 || mapped.status === 503 || mapped.status === 507)
    ) {
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
        unfinished = await ctx.workspace.unfinishedRetirements();
      } catch (error) {
        app.log.warn(
          { err: error },
          "deleted bots' unfinished workspace retirements could not be looked for",
        );
        return;
      }
      for (const { botId } of unfinished) {
        try {
          await ctx.exclusivity.run(botId, () => ctx.workspace.retire(botId, "retire-deleted"));
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
