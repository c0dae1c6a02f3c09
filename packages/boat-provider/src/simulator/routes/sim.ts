import { clockBodySchema, faultsBodySchema, simSandboxPatchSchema, simSeedBodySchema } from "../../schema.js";
import type { SimContext } from "../context.js";
import { addFaultRules, faultRulesView } from "../faults.js";
import { apiError, notFound, type Outcome } from "../http.js";
import { advanceClock, seedSandboxes, simStats } from "../state.js";
import type { RouteEntry } from "./table.js";

/** The simulator's own controls (`/_sim/...`), as a route table. The body is read (and checked) before. */
export interface SimRoute extends RouteEntry {
  handler: (ctx: SimContext, request: { params: readonly string[]; body: unknown }) => Outcome;
}

export const SIM_ROUTES: readonly SimRoute[] = [
  { method: "POST", pattern: /^\/_sim\/faults$/, handler: addFaults },
  { method: "DELETE", pattern: /^\/_sim\/faults$/, handler: clearFaults },
  { method: "GET", pattern: /^\/_sim\/faults$/, handler: listFaults },
  { method: "POST", pattern: /^\/_sim\/clock$/, handler: moveClock },
  { method: "GET", pattern: /^\/_sim\/clock$/, handler: readClock },
  {
    method: "GET",
    pattern: /^\/_sim\/stats$/,
    handler: (ctx) => ({ status: 200, body: simStats(ctx.state) }),
  },
  { method: "GET", pattern: /^\/_sim\/sandboxes$/, handler: listRecords },
  { method: "POST", pattern: /^\/_sim\/sandboxes$/, handler: seed },
  { method: "PATCH", pattern: /^\/_sim\/sandboxes\/([^/]+)$/, handler: patchSandbox },
];

/** POST /_sim/faults `{ rules }` */
export function addFaults(ctx: SimContext, { body }: { body: unknown }): Outcome {
  const parsed = faultsBodySchema.safeParse(body);
  if (!parsed.success)
    return apiError(400, "invalid_request", `Invalid fault rules: ${parsed.error.message}`);
  addFaultRules(ctx.faults, parsed.data.rules);
  return { status: 200, body: { ok: true, active: ctx.faults.rules.length } };
}

/** DELETE /_sim/faults */
export function clearFaults(ctx: SimContext): Outcome {
  ctx.faults.rules = [];
  return { status: 200, body: { ok: true, active: 0 } };
}

/** GET /_sim/faults */
export function listFaults(ctx: SimContext): Outcome {
  return { status: 200, body: { ok: true, rules: faultRulesView(ctx.faults) } };
}

/** POST /_sim/clock `{ advanceMs }` */
export function moveClock(ctx: SimContext, { body }: { body: unknown }): Outcome {
  const parsed = clockBodySchema.safeParse(body);
  if (!parsed.success) return apiError(400, "invalid_request", "The body must be { advanceMs }.");
  advanceClock(ctx, parsed.data.advanceMs);
  return { status: 200, body: { ok: true, now: ctx.now() } };
}

/** GET /_sim/clock */
export function readClock(ctx: SimContext): Outcome {
  return { status: 200, body: { ok: true, now: ctx.now() } };
}

/** GET /_sim/sandboxes: every Boat ever created and every deletion operation, with their history. */
export function listRecords(ctx: SimContext): Outcome {
  return {
    status: 200,
    body: { sandboxes: [...ctx.state.boats.values()], operations: [...ctx.state.operations.values()] },
  };
}

/** POST /_sim/sandboxes `{ count, namePrefix? }` or `{ names }`: test-only seeding of existing Boats. */
export function seed(ctx: SimContext, { body }: { body: unknown }): Outcome {
  const parsed = simSeedBodySchema.safeParse(body);
  if (!parsed.success) {
    return apiError(400, "invalid_request", "The body must be { count, namePrefix? } or { names }.");
  }
  const seeded = seedSandboxes(ctx, parsed.data);
  return { status: 201, body: { ok: true, ids: seeded.map((boat) => boat.id) } };
}

/** PATCH /_sim/sandboxes/:id `{ busy?, state? }` */
export function patchSandbox(
  ctx: SimContext,
  { params, body }: { params: readonly string[]; body: unknown },
): Outcome {
  const parsed = simSandboxPatchSchema.safeParse(body);
  const boat = ctx.state.boats.get(params[0] ?? "");
  if (!parsed.success) return apiError(400, "invalid_request", "The body must be { busy?, state? }.");
  if (!boat) return notFound();
  if (parsed.data.busy !== undefined) boat.busy = parsed.data.busy;
  if (parsed.data.state !== undefined) boat.state = parsed.data.state;
  boat.history.push({ at: ctx.now(), event: "patched" });
  ctx.persist({ boats: [boat.id] });
  return { status: 200, body: { ok: true, sandbox: boat } };
}
