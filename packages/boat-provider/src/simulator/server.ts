import { randomBytes, timingSafeEqual } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { isIP } from "node:net";
import { BoatSimulatorError, isBoatSimulatorError } from "../errors.js";
import { type SimSandboxRecord, type SimSeedBody, type SimStats, simSeedBodySchema } from "../schema.js";
import type { SimContext } from "./context.js";
import { abandonDelays, type FaultState, newFaults, takeFault } from "./faults.js";
import {
  apiError,
  Closing,
  NOT_JSON,
  notFound,
  type Outcome,
  readJsonBody,
  send,
  TOO_LARGE,
} from "./http.js";
import { API_ROUTES } from "./routes/api.js";
import { SIM_ROUTES } from "./routes/sim.js";
import { matchRoute } from "./routes/table.js";
import {
  advanceClock,
  changeRecord,
  operationChange,
  restoreState,
  seedSandboxes,
  settleDueOperations,
  simStats,
  snapshotState,
} from "./state.js";
import { openStateLog, readSimulatorState, type StateLog } from "./state-file.js";

/*
 * The simulator as modules: `state.ts` (what is committed, and the rules that move it), `faults.ts` (the
 * injected fault rules), `routes/api.ts` and `routes/sim.ts` (route tables of top-level handlers taking a
 * `SimContext`), `views.ts` (what the API shows of a record) and `http.ts` (bodies and answers). This file
 * builds the context and wires it to an HTTP server: authentication, then for the API the order every
 * request goes through (settle due deletions, route, count, rate limit, fault, body, handler, fault after).
 */

export interface BoatSimulatorOptions {
  /** Loopback only unless `allowNonLoopback`. Default 127.0.0.1. */
  host?: string;
  /** 0 = any free port. */
  port?: number;
  /** Bearer token the simulator accepts; random when absent. */
  token?: string;
  /** The wall clock under the simulator's clock (which is now() + every /_sim/clock advance). */
  now?: () => number;
  /** Simulator time a new Boat stays missing from, and a deleted one stays in, the listing. Default 0. */
  listLagMs?: number;
  /**
   * Persist every committed change here and resume from it on start: a snapshot at this path and a log
   * beside it (`<stateFile>.log`, one fsynced line per change), replayed and compacted at start.
   */
  stateFile?: string;
  /** Serving a fake provider with a known token beyond this machine is refused unless asked for. */
  allowNonLoopback?: boolean;
  /** Polls a deletion operation takes to finish: poll 1 → processing, poll N → completed. Default 2. */
  deletionPolls?: number;
  /**
   * Simulator time after which an accepted deletion finishes (or ends blocked) even if nobody polls it, as
   * boat.dev's own work goes on while a client is down: seen by the next request or clock move. Default 5 min.
   */
  deletionMs?: number;
  /** Simulator time a deleted Boat answers 410 gone before it answers 404. Default 60 s. */
  goneWindowMs?: number;
  /** Simulator time a new Boat reports "provisioning" before "running". Default 1 s. */
  provisionMs?: number;
  /** Fixed-window rate limit on /api/v1 requests, in simulator time. Default none. */
  rateLimit?: { limit: number; windowMs: number };
}

export interface BoatSimulator {
  /** The origin, `http://127.0.0.1:PORT`; controls live at `url + "/_sim/..."`. */
  url: string;
  /** `url + "/api/v1"`: what the client takes as `baseUrl`. */
  apiUrl: string;
  token: string;
  close(): Promise<void>;
  stats(): SimStats;
  /** The simulator's clock (ms). */
  now(): number;
  /** In-process twin of POST /_sim/clock. */
  advanceClock(ms: number): void;
  /** Every Boat ever created, with its history (twin of GET /_sim/sandboxes). */
  sandboxes(): SimSandboxRecord[];
  /** Test-only seeding, in-process twin of POST /_sim/sandboxes: the new Boats' ids, in list order. */
  seed(body: SimSeedBody): string[];
}

function isLoopback(host: string): boolean {
  const bare = host.replace(/^\[|\]$/g, "");
  if (bare === "localhost") return true;
  if (isIP(bare) === 4) return bare.startsWith("127.");
  if (isIP(bare) === 6) return bare === "::1";
  return false;
}

export async function startBoatSimulator(options: BoatSimulatorOptions = {}): Promise<BoatSimulator> {
  const host = options.host ?? "127.0.0.1";
  if (!isLoopback(host) && options.allowNonLoopback !== true) {
    throw new BoatSimulatorError({
      code: "simulator_host_refused",
      message: `The boat.dev simulator refuses to listen on ${host}: it accepts a fixed token and has no real security. Use a loopback host, or pass allowNonLoopback: true if you really mean it.`,
    });
  }
  const token = options.token ?? randomBytes(24).toString("base64url");
  const tokenBytes = Buffer.from(`Bearer ${token}`, "utf8");
  const { ctx, startLog } = simulatorContext(options);

  const server = createServer((req, res) => {
    const requestId = `req_${randomBytes(8).toString("hex")}`;
    handleRequest(ctx, tokenBytes, req, res, requestId).catch((reason: unknown) => {
      if (reason instanceof Closing) {
        req.socket.destroy();
        return;
      }
      const detail = isBoatSimulatorError(reason) ? reason.message : "unexpected simulator failure";
      if (!res.headersSent) send(res, requestId, apiError(500, "internal_error", detail));
      else req.socket.destroy();
    });
  });
  // Idle keep-alive sockets must not outlive a test; close() also drops them explicitly.
  server.keepAliveTimeout = 5_000;
  const url = await listen(server, host, options.port ?? 0);
  // The first write: the state compacted into a fresh snapshot and an empty log, as soon as it runs.
  try {
    startLog();
  } catch (error) {
    await new Promise<void>((resolve) => server.close(() => resolve()));
    throw error;
  }

  return {
    url,
    apiUrl: `${url}/api/v1`,
    token,
    stats: () => simStats(ctx.state),
    now: ctx.now,
    advanceClock: (ms) => advanceClock(ctx, ms),
    seed: (body) => seedSandboxes(ctx, simSeedBodySchema.parse(body)).map((boat) => boat.id),
    sandboxes: () => structuredClone([...ctx.state.boats.values()]),
    async close() {
      abandonDelays(ctx.faults);
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      ctx.closeLog();
    },
  };
}

/**
 * The context every handler takes: settings, the state (resumed from the state file and its log, if any)
 * and faults; `startLog` compacts the state and opens the log every later change is appended to.
 */
function simulatorContext(options: BoatSimulatorOptions): {
  ctx: SimContext & { closeLog(): void };
  startLog(): void;
} {
  const wallNow = options.now ?? Date.now;
  const stateFile = options.stateFile;
  const state = restoreState(stateFile === undefined ? null : readSimulatorState(stateFile));
  let log: StateLog | undefined;
  const ctx: SimContext & { closeLog(): void } = {
    config: {
      listLagMs: options.listLagMs ?? 0,
      deletionPolls: options.deletionPolls ?? 2,
      deletionMs: options.deletionMs ?? 300_000,
      goneWindowMs: options.goneWindowMs ?? 60_000,
      provisionMs: options.provisionMs ?? 1_000,
      ...(options.rateLimit ? { rateLimit: options.rateLimit } : {}),
    },
    state,
    faults: newFaults(),
    now: () => wallNow() + state.clockOffsetMs,
    persist: (change = {}, persistOptions) => log?.append(changeRecord(state, change), persistOptions),
    closeLog: () => log?.close(),
  };
  return {
    ctx,
    startLog: () => {
      if (stateFile !== undefined) log = openStateLog(stateFile, snapshotState(state));
    },
  };
}

/** Resolves with the origin once the server listens. */
async function listen(server: ReturnType<typeof createServer>, host: string, port: number): Promise<string> {
  await new Promise<void>((resolve, reject) => {
    const onError = (reason: Error): void => {
      reject(
        new BoatSimulatorError({
          code: "simulator_start_failed",
          message: `The boat.dev simulator could not listen on ${host}:${port}: ${reason.message}.`,
          cause: reason,
        }),
      );
    };
    server.once("error", onError);
    server.listen(port, host, () => {
      server.off("error", onError);
      resolve();
    });
  });
  const address = server.address();
  if (address === null || typeof address === "string") {
    server.close();
    throw new BoatSimulatorError({
      code: "simulator_start_failed",
      message: "The simulator has no TCP address.",
    });
  }
  const urlHost = isIP(address.address) === 6 ? `[${address.address}]` : address.address;
  return `http://${urlHost}:${address.port}`;
}

async function handleRequest(
  ctx: SimContext,
  tokenBytes: Buffer,
  req: IncomingMessage,
  res: ServerResponse,
  requestId: string,
): Promise<void> {
  const url = new URL(req.url ?? "/", "http://simulator.invalid");
  const path = url.pathname;
  if (!authorized(req, tokenBytes)) {
    send(res, requestId, apiError(401, "unauthorized", "Send Authorization: Bearer <token>."));
    return;
  }
  if (path === "/api/v1" || path.startsWith("/api/v1/")) {
    await handleApi(ctx, req, res, path.slice("/api/v1".length) || "/", url.searchParams, requestId);
  } else if (path.startsWith("/_sim/")) {
    await handleSim(ctx, req, res, path, requestId);
  } else {
    send(res, requestId, apiError(404, "not_found", "Not found."));
  }
}

function authorized(req: IncomingMessage, tokenBytes: Buffer): boolean {
  const header = req.headers.authorization;
  if (typeof header !== "string") return false;
  const given = Buffer.from(header, "utf8");
  return given.length === tokenBytes.length && timingSafeEqual(given, tokenBytes);
}

/** One /api/v1 request, in boat.dev's order: settle, route, count, rate limit, fault, body, handler. */
async function handleApi(
  ctx: SimContext,
  req: IncomingMessage,
  res: ServerResponse,
  path: string,
  query: URLSearchParams,
  requestId: string,
): Promise<void> {
  const method = req.method ?? "GET";
  // boat.dev's deletions go on between requests: whatever finished meanwhile is seen by this one.
  const settled = settleDueOperations(ctx);
  if (settled.length > 0) ctx.persist(operationChange(settled));
  const match = matchRoute(API_ROUTES, method, path);
  if (match === "not_found" || match === "method_not_allowed") {
    send(
      res,
      requestId,
      match === "not_found" ? notFound() : apiError(405, "method_not_allowed", "Method not allowed."),
    );
    return;
  }
  const { route, params } = match;
  if (route.counts !== undefined) {
    ctx.state.counters[route.counts] += 1;
    // Written, not fsynced: it acknowledges nothing, survives a kill, and the commit that usually follows
    // (or the next one) fsyncs it; one fsync fewer per create and per DELETE.
    ctx.persist({}, { fsync: false });
  }
  const limited = rateLimited(ctx);
  if (limited) {
    send(res, requestId, limited);
    return;
  }
  const fault = takeFault(ctx.faults, method, path);
  const before = faultBefore(fault);
  if (before === "drop") {
    req.socket.destroy();
    return;
  }
  if (before) {
    send(res, requestId, before);
    return;
  }
  const body = await readJsonBody(req);
  if (body === TOO_LARGE) {
    send(res, requestId, apiError(413, "payload_too_large", "The body is larger than 64 KiB."), true);
    return;
  }
  if (body === NOT_JSON) {
    send(res, requestId, apiError(400, "invalid_request", "The body is not valid JSON."));
    return;
  }
  const outcome = await route.handler(ctx, { params, path, query, headers: req.headers, body, fault });
  if (fault?.action === "fail-after") {
    const failure = apiError(
      fault.status ?? 500,
      fault.code ?? "internal_error",
      "Injected failure after the change was made.",
    );
    send(res, requestId, failure);
    return;
  }
  if (fault?.action === "drop-after") {
    req.socket.destroy();
    return;
  }
  send(res, requestId, outcome);
}

/** The fixed-window rate limit on simulator time: the 429 to send, or null. */
function rateLimited(ctx: SimContext): Outcome | null {
  const limit = ctx.config.rateLimit;
  if (!limit) return null;
  const now = ctx.now();
  const window = ctx.state;
  if (now - window.rateWindow.start >= limit.windowMs) window.rateWindow = { start: now, count: 0 };
  window.rateWindow.count += 1;
  if (window.rateWindow.count <= limit.limit) return null;
  const retryAfterS = Math.max(1, Math.ceil((window.rateWindow.start + limit.windowMs - now) / 1000));
  return apiError(429, "rate_limited", "Too many requests.", { retryAfterS });
}

/** What a fault does before the handler runs: drop the connection, answer in its place, or nothing. */
function faultBefore(fault: FaultState | undefined): Outcome | "drop" | undefined {
  switch (fault?.action) {
    case "drop-before":
      return "drop";
    case "fail-before":
      return apiError(
        fault.status ?? 503,
        fault.code ?? "service_unavailable",
        "Injected failure; nothing was done.",
      );
    case "in-progress":
      return apiError(
        409,
        "idempotency_in_progress",
        "A request with this Idempotency-Key is still running.",
        {
          retryAfterS: fault.retryAfterS ?? 1,
        },
      );
    case "rate-limit":
      return apiError(429, "rate_limited", "Too many requests.", { retryAfterS: fault.retryAfterS ?? 1 });
    default:
      return undefined;
  }
}

/** One /_sim control: the body first (JSON of at most 64 KiB), then the route. */
async function handleSim(
  ctx: SimContext,
  req: IncomingMessage,
  res: ServerResponse,
  path: string,
  requestId: string,
): Promise<void> {
  const method = req.method ?? "GET";
  const body = await readJsonBody(req);
  if (body === TOO_LARGE || body === NOT_JSON) {
    send(res, requestId, apiError(400, "invalid_request", "The body must be JSON of at most 64 KiB."));
    return;
  }
  const match = matchRoute(SIM_ROUTES, method, path);
  if (match === "not_found" || match === "method_not_allowed") {
    send(res, requestId, apiError(404, "not_found", "No such simulator control."));
    return;
  }
  send(res, requestId, match.route.handler(ctx, { params: match.params, body }));
}
