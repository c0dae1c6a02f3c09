import type { IncomingMessage, ServerResponse } from "node:http";

/** What a route answers: sent as JSON by `send`. */
export interface Outcome {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
}

/** The request was abandoned because the simulator is closing. */
export class Closing extends Error {}

const MAX_BODY_BYTES = 64 * 1024;

/** boat.dev's error envelope (`send` adds the request id). */
export function apiError(
  status: number,
  code: string,
  message: string,
  extra: { retryAfterS?: number; details?: Record<string, unknown> } = {},
): Outcome {
  return {
    status,
    body: {
      ok: false,
      error: { code, message, status, ...(extra.details ? { details: extra.details } : {}) },
    },
    ...(extra.retryAfterS === undefined ? {} : { headers: { "retry-after": String(extra.retryAfterS) } }),
  };
}

export const notFound = (): Outcome => apiError(404, "not_found", "No such sandbox.");

export const TOO_LARGE = Symbol("too large");
export const NOT_JSON = Symbol("not JSON");

/** The body as JSON: undefined when empty, TOO_LARGE above 64 KiB, NOT_JSON when it does not parse. */
export async function readJsonBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of req) {
    total += (chunk as Buffer).length;
    if (total > MAX_BODY_BYTES) return TOO_LARGE;
    chunks.push(chunk as Buffer);
  }
  if (total === 0) return undefined;
  try {
    return JSON.parse(Buffer.concat(chunks).toString("utf8"));
  } catch {
    return NOT_JSON;
  }
}

export function send(res: ServerResponse, requestId: string, outcome: Outcome, close = false): void {
  if (res.headersSent || res.destroyed) return;
  let body = outcome.body;
  if (body && typeof body === "object" && (body as { ok?: unknown }).ok === false) {
    body = { ...(body as object), requestId };
  }
  const text = JSON.stringify(body);
  res.writeHead(outcome.status, {
    "content-type": "application/json; charset=utf-8",
    "content-length": Buffer.byteLength(text),
    "x-request-id": requestId,
    ...(close ? { connection: "close" } : {}),
    ...outcome.headers,
  });
  res.end(text);
}

/** A malformed %-escape is just an id that matches nothing (→ 404), never a crash. */
export function safeDecode(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return "";
  }
}
