import { recoveryReportSchema } from "@drydock/boat-lifecycle";
import { PlanItemSchema, RestoreReportItemSchema } from "@drydock/recovery-controller";
import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import { z } from "zod";
import type { ServerContext } from "../context.js";
import { recoveryReport } from "../recovery-report.js";
import { answers, okBody } from "./schemas.js";

/**
 * The answer's items are described exactly as the report builds them (recovery-controller's
 * `reportNeedsPerson`, rendered by `recoveryAnswer`): a Boat plan item with its verdict, a restore report
 * item, a retirement, something unreadable, and the startup reconciliation's report. openapi.test.ts
 * checks real answers holding each kind of item against this; the console's client types come from it.
 */
const RecoveryBody = okBody({
  open: z.number().int().min(0),
  complete: z.boolean(),
  boats: z.array(PlanItemSchema.extend({ attention: z.boolean() })),
  restores: z.array(RestoreReportItemSchema),
  retirements: z.array(z.object({ botId: z.string(), message: z.string() })),
  unreadable: z.array(
    z.object({ area: z.enum(["restores", "boats", "bots"]), subject: z.string(), message: z.string() }),
  ),
  startup: recoveryReportSchema.nullable(),
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
  // Typed against the documented body too: a documented field the report lacks or types otherwise fails tsc.
  app.get(
    "/v1/recovery",
    recoverySchema,
    async (): Promise<z.infer<typeof RecoveryBody>> => recoveryReport(ctx),
  );
};
