import { z } from "zod";

/**
 * The one error body of every route (documented as each route's 4XX and 5XX answer): a lower snake case
 * `code`, a message saying what happened and what to do next, the request id also found in the server log
 * and the `x-request-id` header, and the code's own details.
 */
export const ErrorBody = z
  .object({
    ok: z.literal(false),
    error: z.looseObject({
      code: z.string().regex(/^[a-z][a-z0-9]*(?:_[a-z0-9]+)*$/),
      message: z.string(),
      requestId: z.string(),
      details: z.unknown().optional(),
    }),
  })
  .meta({ id: "ErrorBody", description: "Every error answer" });

/** `{ ok: true }` and the route's own fields: open, since an answer may grow fields without a new version. */
export function okBody<T extends z.ZodRawShape>(shape: T) {
  return z.looseObject({ ok: z.literal(true), ...shape });
}

/** The error answers every route documents, besides its own successes. */
export const ERRORS = { "4xx": ErrorBody, "5xx": ErrorBody } as const;

/** A documented answer with another content type than JSON (raw bytes, Prometheus text). */
export interface ContentAnswer {
  description: string;
  content: Record<string, { schema: z.ZodType }>;
}

/**
 * A route's `response`: its successes by status, and ERRORS. Typed loosely on purpose: the schemas document
 * the answers (OpenAPI) and openapi.test.ts checks every route's real answers against them; the handlers'
 * return types stay those of the domain functions instead of being re-derived from the documentation.
 */
export function answers(ok: Record<number, z.ZodType | ContentAnswer>): Record<string, unknown> {
  return { ...ok, ...ERRORS };
}

export const BotBody = z.looseObject({
  botId: z.string(),
  name: z.string(),
  createdAt: z.string(),
});

export const ComputerBody = z.looseObject({
  status: z.enum(["none", "provisioning", "ready", "deleting", "needs_attention"]),
  boxId: z.string().optional(),
  name: z.string().optional(),
});

export const CheckpointRow = z.looseObject({
  checkpointId: z.string(),
  createdAt: z.string(),
  kind: z.string().optional(),
  files: z.number(),
  bytes: z.number(),
});

/** Raw bytes (a workspace file). */
export const Binary = z.any().meta({ type: "string", format: "binary" });
