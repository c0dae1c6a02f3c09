import { createHash } from "node:crypto";
import type { IncomingMessage } from "node:http";
import {
  createSandboxBodySchema,
  IDEMPOTENCY_KEY,
  MAX_LIST_LIMIT,
  OPERATION_ID,
  renameSandboxBodySchema,
  type SimOperationRecord,
  type SimSandboxRecord,
} from "../../schema.js";
import type { SimContext } from "../context.js";
import { type FaultState, pauseFor, takeBlockDeletion } from "../faults.js";
import { apiError, type Outcome } from "../http.js";
import {
  finishOperation,
  type KeyState,
  liveKey,
  newBoatId,
  newOperationId,
  operationChange,
} from "../state.js";
import { decodeCursor, encodeCursor, lookup, operationView, sandboxView } from "../views.js";
import type { RouteEntry } from "./table.js";

/**
 * The boat.dev API v1 as a route table (paths relative to `/api/v1`). Each handler runs the `delay` fault
 * (`pauseFor`) right before its commit point; the server around it does authentication, settling due
 * deletions, the rate limit, the other faults and reading the body.
 */

export interface ApiRequest {
  /** The path parameters, %-decoded. */
  params: readonly string[];
  /** The path relative to /api/v1 (what fault rules match). */
  path: string;
  query: URLSearchParams;
  headers: IncomingMessage["headers"];
  body: unknown;
  /** The fault this request consumed, if any (its `delay` is the handler's to run). */
  fault: FaultState | undefined;
}

export interface ApiRoute extends RouteEntry {
  /**
   * The counter this endpoint bumps (and persists) as soon as the route matches, before the rate limit or
   * any fault: every request that reached it counts, whatever happened next.
   */
  counts?: "createRequests" | "deleteRequests";
  handler: (ctx: SimContext, request: ApiRequest) => Promise<Outcome>;
}

export const API_ROUTES: readonly ApiRoute[] = [
  { method: "POST", pattern: /^\/sandboxes$/, counts: "createRequests", handler: createSandbox },
  { method: "GET", pattern: /^\/sandboxes$/, handler: listSandboxes },
  { method: "GET", pattern: /^\/sandboxes\/([^/]+)$/, handler: getSandbox },
  { method: "PATCH", pattern: /^\/sandboxes\/([^/]+)$/, handler: renameSandbox },
  { method: "DELETE", pattern: /^\/sandboxes\/([^/]+)$/, counts: "deleteRequests", handler: deleteSandbox },
  { method: "GET", pattern: /^\/deletion-operations\/([^/]+)$/, handler: pollDeletion },
];

const DEFAULT_LIST_LIMIT = 50;
/** BOAT_DEV_API: `Idempotency-Key: <uuid v4>`, in either case. */
const IDEMPOTENCY_KEY_ANY_CASE = new RegExp(IDEMPOTENCY_KEY.source, "i");

function sha256(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

/** Key order never makes two equal bodies look different. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : 1));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

/** POST /sandboxes: at most one Boat per Idempotency-Key and body, replayed for 24 hours. */
export async function createSandbox(ctx: SimContext, { headers, body, fault }: ApiRequest): Promise<Outcome> {
  const rawKey = headers["idempotency-key"];
  const key = Array.isArray(rawKey) ? rawKey[0] : rawKey;
  if (key === undefined || key.length === 0) {
    return apiError(400, "idempotency_key_required", "Send an Idempotency-Key header (a UUID v4).");
  }
  // Anything but a UUID v4 is refused before a key is looked at.
  if (!IDEMPOTENCY_KEY_ANY_CASE.test(key)) {
    return apiError(400, "invalid_request", "The Idempotency-Key must be a UUID v4.");
  }
  const parsed = createSandboxBodySchema.safeParse(body);
  if (!parsed.success) {
    return apiError(400, "invalid_request", "The body must be { ttlSeconds, noEnv }.", {
      details: { issues: parsed.error.issues.map((issue) => issue.message) },
    });
  }
  const keyHash = sha256(key);
  const fingerprint = canonicalJson(parsed.data);
  const existing = liveKey(ctx, keyHash);
  if (existing) return replay(ctx, existing, fingerprint);
  // Reserve the key before the (possibly delayed) commit, so a concurrent request with the same key
  // sees "in progress" instead of creating a second Boat.
  const reservation: KeyState = { fingerprint, firstSeenAt: ctx.now() };
  ctx.state.keys.set(keyHash, reservation);
  try {
    await pauseFor(ctx.faults, fault);
  } catch (reason) {
    // No Boat exists yet: the key is released, as boat.dev does for a create that failed early.
    if (ctx.state.keys.get(keyHash) === reservation) ctx.state.keys.delete(keyHash);
    throw reason;
  }
  const at = ctx.now();
  const boat: SimSandboxRecord = {
    id: newBoatId(ctx.state),
    name: null,
    state: "provisioning",
    createdAt: at,
    ttlSeconds: parsed.data.ttlSeconds,
    busy: false,
    keyHash,
    deletedAt: null,
    history: [{ at, event: "created" }],
  };
  ctx.state.boats.set(boat.id, boat);
  reservation.boatId = boat.id;
  ctx.state.counters.createsCommitted += 1;
  ctx.persist({ boats: [boat.id], keys: [keyHash] });
  return { status: 201, body: { ok: true, type: "sandbox.created", sandbox: sandboxView(ctx, boat) } };
}

/** A create whose key is known: the same Boat again, or a refusal (other body, or still running). */
function replay(ctx: SimContext, existing: KeyState, fingerprint: string): Outcome {
  if (existing.fingerprint !== fingerprint) {
    return apiError(
      409,
      "idempotency_key_reused",
      "This Idempotency-Key was used with a different body; use a new key for a different request.",
    );
  }
  if (existing.boatId === undefined) {
    return apiError(409, "idempotency_in_progress", "A request with this Idempotency-Key is still running.", {
      retryAfterS: 1,
    });
  }
  const boat = ctx.state.boats.get(existing.boatId);
  if (!boat) return apiError(500, "internal_error", "The replayed sandbox is missing.");
  return {
    status: 200,
    body: { ok: true, type: "sandbox.created", sandbox: sandboxView(ctx, boat) },
    headers: { "idempotent-replayed": "true" },
  };
}

/** GET /sandboxes/:id */
export async function getSandbox(ctx: SimContext, { params, fault }: ApiRequest): Promise<Outcome> {
  await pauseFor(ctx.faults, fault);
  const found = lookup(ctx, params[0] ?? "", true);
  if ("outcome" in found) return found.outcome;
  return { status: 200, body: { ok: true, sandbox: sandboxView(ctx, found.boat) } };
}

/** PATCH /sandboxes/:id `{ name }` */
export async function renameSandbox(ctx: SimContext, { params, body, fault }: ApiRequest): Promise<Outcome> {
  const parsed = renameSandboxBodySchema.safeParse(body);
  if (!parsed.success)
    return apiError(400, "invalid_request", "The body must be { name } (1–100 characters).");
  await pauseFor(ctx.faults, fault);
  const found = lookup(ctx, params[0] ?? "");
  if ("outcome" in found) return found.outcome;
  const boat = found.boat;
  if (boat.name !== parsed.data.name) {
    boat.name = parsed.data.name;
    boat.history.push({ at: ctx.now(), event: "renamed", name: boat.name });
    ctx.persist({ boats: [boat.id] });
  }
  return { status: 200, body: { ok: true, sandbox: sandboxView(ctx, boat) } };
}

/** GET /sandboxes?limit&cursor: keyset pages of the (lagging) listing. */
export async function listSandboxes(ctx: SimContext, { query, fault }: ApiRequest): Promise<Outcome> {
  const rawLimit = query.get("limit");
  const limit = rawLimit === null ? DEFAULT_LIST_LIMIT : Number(rawLimit);
  if (!/^\d{1,3}$/.test(rawLimit ?? "1") || !Number.isInteger(limit) || limit < 1 || limit > MAX_LIST_LIMIT) {
    return apiError(400, "invalid_request", `limit must be an integer from 1 to ${MAX_LIST_LIMIT}.`);
  }
  const cursor = query.get("cursor");
  let after: { createdAt: number; id: string } | null = null;
  if (cursor !== null) {
    after = decodeCursor(cursor);
    if (after === null) return apiError(400, "invalid_cursor", "The cursor is not one this API handed out.");
  }
  await pauseFor(ctx.faults, fault);
  const now = ctx.now();
  const { listLagMs } = ctx.config;
  // Eventual consistency: the listing lags the truth by listLagMs of simulator time, in both directions.
  const visible = [...ctx.state.boats.values()]
    .filter((boat) => boat.createdAt + listLagMs <= now)
    .filter((boat) => boat.deletedAt === null || now < boat.deletedAt + listLagMs)
    .sort((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  // Keyset pagination on (createdAt, id): a Boat appearing or vanishing between pages never shifts the
  // pages after it, which an offset cursor would.
  const cursorKey = after;
  const start =
    cursorKey === null
      ? visible
      : visible.filter(
          (boat) =>
            boat.createdAt > cursorKey.createdAt ||
            (boat.createdAt === cursorKey.createdAt && boat.id > cursorKey.id),
        );
  const page = start.slice(0, limit);
  const last = page[page.length - 1];
  const nextCursor = start.length > limit && last ? encodeCursor(last.createdAt, last.id) : null;
  return {
    status: 200,
    body: { ok: true, sandboxes: page.map((boat) => sandboxView(ctx, boat)), pageInfo: { nextCursor } },
  };
}

/** DELETE /sandboxes/:id (with X-Boat-Confirm-Delete): starts one deletion operation, or returns the running one. */
export async function deleteSandbox(
  ctx: SimContext,
  { params, path, headers, fault }: ApiRequest,
): Promise<Outcome> {
  const id = params[0] ?? "";
  const confirm = headers["x-boat-confirm-delete"];
  if (confirm !== id) {
    return apiError(409, "confirmation_mismatch", "X-Boat-Confirm-Delete must equal the sandbox id.");
  }
  await pauseFor(ctx.faults, fault);
  const found = lookup(ctx, id);
  if ("outcome" in found) return found.outcome;
  const boat = found.boat;
  // Deleting again while the operation runs returns the same operation: no second deletion starts.
  for (const op of ctx.state.operations.values()) {
    if (op.targetId === id && (op.status === "pending" || op.status === "processing")) {
      return { status: 202, body: { ok: true, type: "deletion.operation", operation: operationView(op) } };
    }
  }
  if (boat.busy)
    return apiError(409, "sandbox_busy", "The sandbox cannot be deleted right now; retry later.");
  const at = ctx.now();
  const op: SimOperationRecord = {
    id: newOperationId(ctx.state),
    targetId: id,
    status: "pending",
    requestedAt: at,
    completedAt: null,
    polls: 0,
    endsBlocked: takeBlockDeletion(ctx.faults, path),
  };
  ctx.state.operations.set(op.id, op);
  ctx.state.counters.deletesAccepted += 1;
  boat.history.push({ at, event: "deletion_requested", operationId: op.id });
  if (ctx.config.deletionPolls <= 0) finishOperation(ctx, op);
  ctx.persist(operationChange([op]));
  return { status: 202, body: { ok: true, type: "deletion.operation", operation: operationView(op) } };
}

/** GET /deletion-operations/:id: poll 1 → processing, poll `deletionPolls` → completed (or blocked). */
export async function pollDeletion(ctx: SimContext, { params, fault }: ApiRequest): Promise<Outcome> {
  await pauseFor(ctx.faults, fault);
  const opId = params[0] ?? "";
  const op = OPERATION_ID.test(opId) ? ctx.state.operations.get(opId) : undefined;
  if (!op) return apiError(404, "not_found", "No such deletion operation.");
  if (op.status === "pending" || op.status === "processing") {
    op.polls += 1;
    if (op.polls >= ctx.config.deletionPolls) finishOperation(ctx, op);
    else op.status = "processing";
    ctx.persist(operationChange([op]));
  }
  return { status: 200, body: { ok: true, operation: operationView(op) } };
}
