import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import type { ServerContext } from "../context.js";
import { recoveryReport } from "../recovery-report.js";

/** GET /v1/recovery: what needs a person, as `drydock status` shows it (see `recoveryReport`). */
export const recoveryRoutes: FastifyPluginAsyncZod<ServerContext> = async (app, ctx) => {
  app.get("/v1/recovery", async () => recoveryReport(ctx));
};
