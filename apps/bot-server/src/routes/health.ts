import { accessSync, constants as fsConstants } from "node:fs";
import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import type { ServerContext } from "../context.js";
import { READYZ_PROVIDER_TIMEOUT_MS } from "../deps.js";
import { recoveryReport } from "../recovery-report.js";

/** How old the open recovery items count may be when /metrics is scraped before it is recounted. */
const RECOVERY_GAUGE_MAX_AGE_MS = 60_000;
/** How long a scrape waits for a recount it found running before it answers with the last count. */
const RECOVERY_GAUGE_WAIT_MS = 2_000;

/** GET /healthz (no token), GET /readyz and GET /metrics. */
export const healthRoutes: FastifyPluginAsyncZod<ServerContext> = async (app, ctx) => {
  app.get("/healthz", async () => ({ ok: true }));

  app.get("/readyz", async (_request, reply) => {
    const checks: Record<string, { ok: boolean; message?: string }> = {};
    try {
      accessSync(ctx.dataDir, fsConstants.W_OK);
      checks.dataDir = { ok: true };
    } catch (error) {
      checks.dataDir = { ok: false, message: (error as Error).message };
    }
    for (const [name, read] of [
      ["createJournal", () => ctx.createJournal.boatCreateRecoverySnapshot()],
      ["deleteJournal", () => ctx.deleteJournal.boatDeletionSnapshot()],
      ["bots", () => ctx.bots.list()],
    ] as const) {
      try {
        await read();
        checks[name] = { ok: true };
      } catch (error) {
        checks[name] = { ok: false, message: (error as Error).message };
      }
    }
    // Bounded: a probe with a short timeout gets an answer, and a boat.dev this slow is not ready either.
    const bound = AbortSignal.timeout(READYZ_PROVIDER_TIMEOUT_MS);
    try {
      await ctx.client.listSandboxes({ limit: 1, signal: bound });
      checks.provider = { ok: true };
    } catch (error) {
      checks.provider = {
        ok: false,
        message: bound.aborted
          ? `boat.dev did not answer within ${READYZ_PROVIDER_TIMEOUT_MS / 1000} s`
          : (error as Error).message,
      };
    }
    const ok = Object.values(checks).every((c) => c.ok);
    return reply.code(ok ? 200 : 503).send({ ok, checks });
  });

  app.get("/metrics", async (request, reply) => {
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
            request.log.warn({ err: error }, "could not count open recovery items for /metrics");
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
    return reply
      .header("content-type", ctx.metrics.registry.contentType)
      .send(await ctx.metrics.registry.metrics());
  });
};
