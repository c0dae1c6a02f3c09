import { accessSync, constants as fsConstants } from "node:fs";
import { ENVIRONMENT_ID_FILE } from "@drydock/facts";
import type { FastifyBaseLogger } from "fastify";
import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import { z } from "zod";
import type { ServerContext } from "../context.js";
import { READYZ_PROVIDER_TIMEOUT_MS } from "../deps.js";
import { recoveryReport } from "../recovery-report.js";
import { answers } from "./schemas.js";

/** How old the open recovery items count may be when /metrics is scraped before it is recounted. */
const RECOVERY_GAUGE_MAX_AGE_MS = 60_000;
/** How long a scrape waits for a recount it found running before it answers with the last count. */
const RECOVERY_GAUGE_WAIT_MS = 2_000;
/** How long one provider check of /readyz is reused (probes of every replica come every few seconds). */
export const READYZ_PROVIDER_CACHE_MS = 5_000;

const Check = z.object({ ok: z.boolean(), message: z.string().optional() });
const ProviderState = z.object({
  reachable: z.boolean(),
  message: z.string().optional(),
  /** When the answer was found (ISO time); one check is reused for READYZ_PROVIDER_CACHE_MS. */
  checkedAt: z.string(),
});
const ReadyBody = z.object({
  ok: z.boolean(),
  checks: z.record(z.string(), Check),
  provider: ProviderState,
});

/** The provider check of /readyz: one page of one Boat, bounded, shared and cached (see `readyzProvider`). */
export interface ProviderProbe {
  last: { at: number; state: z.infer<typeof ProviderState> } | null;
  running: Promise<z.infer<typeof ProviderState>> | null;
}

/**
 * Whether boat.dev answers: a list of at most one Boat within READYZ_PROVIDER_TIMEOUT_MS, one at a time,
 * its answer reused for READYZ_PROVIDER_CACHE_MS, so probes never list boat.dev's Boats on every call.
 */
function readyzProvider(ctx: ServerContext, probe: ProviderProbe): Promise<z.infer<typeof ProviderState>> {
  if (probe.last !== null && performance.now() - probe.last.at < READYZ_PROVIDER_CACHE_MS) {
    return Promise.resolve(probe.last.state);
  }
  probe.running ??= (async () => {
    const bound = AbortSignal.timeout(READYZ_PROVIDER_TIMEOUT_MS);
    let state: z.infer<typeof ProviderState>;
    try {
      await ctx.client.listSandboxes({ limit: 1, signal: bound });
      state = { reachable: true, checkedAt: new Date().toISOString() };
    } catch (error) {
      state = {
        reachable: false,
        message: bound.aborted
          ? `boat.dev did not answer within ${READYZ_PROVIDER_TIMEOUT_MS / 1000} s`
          : (error as Error).message,
        checkedAt: new Date().toISOString(),
      };
    }
    probe.last = { at: performance.now(), state };
    return state;
  })().finally(() => {
    probe.running = null;
  });
  return probe.running;
}

/** GET /readyz */
const readyzSchema = {
  schema: {
    summary: "Readiness: storage and journals; boat.dev's reachability is reported, not required",
    response: answers({ 200: ReadyBody, 503: ReadyBody }),
  },
};

/** GET /metrics */
const metricsSchema = {
  schema: {
    summary: "Prometheus metrics",
    response: answers({
      200: {
        description: "Prometheus text exposition format",
        content: { "text/plain": { schema: z.string() } },
      },
    }),
  },
};

/**
 * The storage checks of GET /readyz: data directory readable and writable, the storage readable (a meta
 * read, on every backend), journals and registry readable.
 */
async function storageChecks(ctx: ServerContext) {
  const checks: Record<string, { ok: boolean; message?: string }> = {};
  try {
    accessSync(ctx.dataDir, fsConstants.R_OK | fsConstants.W_OK);
    checks.dataDir = { ok: true };
  } catch (error) {
    checks.dataDir = { ok: false, message: ctx.scrubPaths((error as Error).message) };
  }
  const storage = ctx.storage;
  for (const [name, read] of [
    // One cheap read of the store itself, on every backend (a damaged, busy or unreachable database).
    ...(storage ? ([["storage", () => storage.meta.get(ENVIRONMENT_ID_FILE)]] as const) : []),
    ["createJournal", () => ctx.createJournal.boatCreateRecoverySnapshot()],
    ["deleteJournal", () => ctx.deleteJournal.boatDeletionSnapshot()],
    ["bots", () => ctx.bots.list()],
  ] as const) {
    try {
      await read();
      checks[name] = { ok: true };
    } catch (error) {
      checks[name] = { ok: false, message: ctx.scrubPaths((error as Error).message) };
    }
  }
  const ok = Object.values(checks).every((c) => c.ok);
  return { ok, checks };
}

/** Recounts the open recovery items for a scrape when the count is old (the rule is explained inside). */
async function freshRecoveryGauge(ctx: ServerContext, log: FastifyBaseLogger): Promise<void> {
  // An alert on open recovery items must not wait for someone to GET /v1/recovery: a scrape starts a
  // recount when the count is older than RECOVERY_GAUGE_MAX_AGE_MS (the plan lists boat.dev, so not on
  // every scrape). One recount at a time, shared by every scrape meanwhile, and timed from its start (a
  // failing one is not retried by the next scrape); a scrape waits for it at most
  // RECOVERY_GAUGE_WAIT_MS, then answers with the last count, so a slow boat.dev never fails the scrape.
  const gauge = ctx.recoveryGauge;
  if (gauge.countedAt === null || performance.now() - gauge.countedAt > RECOVERY_GAUGE_MAX_AGE_MS) {
    gauge.countedAt = performance.now();
    gauge.recount ??= recoveryReport(ctx)
      .then(
        () => undefined,
        (error: unknown) => {
          log.warn({ err: error }, "could not count open recovery items for /metrics");
        },
      )
      .finally(() => {
        gauge.recount = null;
      });
  }
  const running = gauge.recount;
  if (running !== null) {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      running,
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, RECOVERY_GAUGE_WAIT_MS);
      }),
    ]);
    clearTimeout(timer);
  }
}

/**
 * GET /healthz (process up), GET /readyz (this instance can serve: storage and journals; boat.dev's state
 * reported, never failing the probe) and GET /metrics (Prometheus text). None needs an API token; /metrics
 * takes DRYDOCK_METRICS_TOKEN when one is set (see app.ts).
 */
export const healthRoutes: FastifyPluginAsyncZod<ServerContext> = async (app, ctx) => {
  app.get(
    "/healthz",
    { schema: { summary: "Liveness", response: answers({ 200: z.object({ ok: z.literal(true) }) }) } },
    async () => ({ ok: true as const }),
  );

  const probe: ProviderProbe = { last: null, running: null };
  app.get("/readyz", readyzSchema, async (_request, reply) => {
    const { ok, checks } = await storageChecks(ctx);
    // A boat.dev outage is every replica's at once: pulling them all out of the load balancer would stop
    // file routes, listings and recovery too. It is reported here (and in /metrics), not failed on.
    const provider = await readyzProvider(ctx, probe);
    return reply.code(ok ? 200 : 503).send({ ok, checks, provider });
  });

  app.get("/metrics", metricsSchema, async (request, reply) => {
    await freshRecoveryGauge(ctx, request.log);
    return reply
      .header("content-type", ctx.metrics.registry.contentType)
      .send(await ctx.metrics.registry.metrics());
  });
};
