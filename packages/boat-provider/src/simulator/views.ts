import {
  BOAT_ID,
  type DeletionOperation,
  MAX_CURSOR_LENGTH,
  type Sandbox,
  type SimOperationRecord,
  type SimSandboxRecord,
} from "../schema.js";
import type { SimContext } from "./context.js";
import { apiError, notFound, type Outcome } from "./http.js";

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

export function sandboxView(ctx: SimContext, boat: SimSandboxRecord): Sandbox {
  const state =
    boat.state === "provisioning" && ctx.now() - boat.createdAt >= ctx.config.provisionMs
      ? "running"
      : boat.state;
  return {
    id: boat.id,
    name: boat.name,
    state,
    createdAt: iso(boat.createdAt),
    ttlSeconds: boat.ttlSeconds,
  };
}

export function operationView(op: SimOperationRecord): DeletionOperation {
  const stage = op.status === "processing" ? "removing" : op.status === "completed" ? "completed" : undefined;
  return {
    id: op.id,
    kind: "sandbox",
    targetId: op.targetId,
    status: op.status,
    ...(stage === undefined ? {} : { stage }),
    requestedAt: iso(op.requestedAt),
    ...(op.completedAt === null ? {} : { completedAt: iso(op.completedAt) }),
  };
}

/** A live Boat, or the answer for a missing one: 410 `gone` only for a read of one deleted recently. */
export function lookup(
  ctx: SimContext,
  id: string,
  read = false,
): { boat: SimSandboxRecord } | { outcome: Outcome } {
  const boat = BOAT_ID.test(id) ? ctx.state.boats.get(id) : undefined;
  if (!boat) return { outcome: notFound() };
  if (boat.deletedAt !== null) {
    if (read && ctx.now() - boat.deletedAt < ctx.config.goneWindowMs) {
      return { outcome: apiError(410, "gone", "This sandbox was deleted.") };
    }
    return { outcome: notFound() };
  }
  return { boat };
}

export function encodeCursor(createdAt: number, id: string): string {
  return Buffer.from(JSON.stringify({ c: createdAt, i: id }), "utf8").toString("base64url");
}

export function decodeCursor(cursor: string): { createdAt: number; id: string } | null {
  if (cursor.length > MAX_CURSOR_LENGTH || !/^[A-Za-z0-9_-]+$/.test(cursor)) return null;
  try {
    const value = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8")) as {
      c?: unknown;
      i?: unknown;
    };
    if (!Number.isSafeInteger(value.c) || typeof value.i !== "string" || !BOAT_ID.test(value.i)) return null;
    return { createdAt: value.c as number, id: value.i };
  } catch {
    return null;
  }
}
