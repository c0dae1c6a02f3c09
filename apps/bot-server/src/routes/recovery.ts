import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import { z } from "zod";
import type { ServerContext } from "../context.js";
import { recoveryReport } from "../recovery-report.js";
import { answers, okBody } from "./schemas.js";

const RecoveryBody = okBody({
  open: z.number().int().min(0),
  complete: z.boolean(),
  boats: z.array(z.looseObject({ attention: z.boolean() })),
  restores: z.array(z.looseObject({ attention: z.boolean() })),
  retirements: z.array(z.looseObject({ botId: z.string() })),
  unreadable: z.array(z.looseObject({ area: z.string(), subject: z.string(), message: z.string() })),
  startup: z.looseObject({}).nullable(),
});

/** GET /v1/recovery */
const recoverySchema = {
  schema: {
    summary: "Everything that needs a person (the same data as drydock status)",
    response: answers({ 200: RecoveryBody }),
  },
};

/** GET /v1/recovery: what needs a person, as `drydock status` shows it (see `recoveryReport`). */
export const recoveryRoutes: FastifyPluginAsyncZod<ServerContext> = async (app, ctx) => {
  app.get("/v1/recovery", recoverySchema, async () => recoveryReport(ctx));
};
