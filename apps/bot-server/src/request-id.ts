import { randomUUID } from "node:crypto";
import type { IncomingMessage } from "node:http";

/** The header a request id arrives in (from a proxy or a client) and is echoed in. */
export const REQUEST_ID_HEADER = "x-request-id";

/** An incoming id is kept only if it is short and plain: it goes into every log line and error body. */
const SANE_REQUEST_ID = /^[A-Za-z0-9._:@-]{1,128}$/;

/** Fastify's `genReqId`: the caller's `x-request-id` when it is sane, else a fresh UUID. */
export function requestIdFor(request: IncomingMessage): string {
  const given = request.headers[REQUEST_ID_HEADER];
  return typeof given === "string" && SANE_REQUEST_ID.test(given) ? given : randomUUID();
}
