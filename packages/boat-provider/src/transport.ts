import { AsyncLocalStorage } from "node:async_hooks";
import diagnosticsChannel from "node:diagnostics_channel";
import { BoatTransportError, SEND_REFUSED_CODE, SendRefusedError } from "./errors.js";

/**
 * Failure causes that prove the request never left this machine: the connection (or the name lookup,
 * or the TLS handshake) failed, so no byte of the request reached boat.dev.
 */
const CONNECT_CAUSE_CODES = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EAI_FAIL",
  "EAI_NONAME",
  "EHOSTUNREACH",
  "EHOSTDOWN",
  "ENETUNREACH",
  "ENETDOWN",
  "EADDRNOTAVAIL",
  // undici's own connect timeout: the TCP connection was never established.
  "UND_ERR_CONNECT_TIMEOUT",
  // TLS handshake failures happen before the request is written.
  "CERT_HAS_EXPIRED",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "ERR_TLS_CERT_ALTNAME_INVALID",
  "ERR_SSL_WRONG_VERSION_NUMBER",
]);

const UNDICI_TIMEOUT_CODES = new Set([
  "UND_ERR_CONNECT_TIMEOUT",
  "UND_ERR_HEADERS_TIMEOUT",
  "UND_ERR_BODY_TIMEOUT",
]);

/** What the client knows about one attempt when it fails. */
export interface FailureContext {
  /** `METHOD /path`, for the message; never a query, header or body. */
  request: string;
  /** Our timeout fired. */
  timedOut: boolean;
  /** The caller's signal fired. */
  aborted: boolean;
  /**
   * Whether undici reported writing this request's headers: `true` sent (maybe partly), `false` proven
   * not sent (undici reported the request but never wrote it), `undefined` unknown (a fetch that does not
   * report, e.g. an injected one).
   */
  sent: boolean | undefined;
  /** The failure happened while reading the body, after the status line arrived. */
  afterHeaders: boolean;
}

function causeCodes(error: unknown, depth = 0): string[] {
  if (depth > 4 || typeof error !== "object" || error === null) return [];
  const codes: string[] = [];
  const record = error as { code?: unknown; cause?: unknown; errors?: unknown; message?: unknown };
  if (typeof record.code === "string") codes.push(record.code);
  // undici refuses some ports before connecting ("bad port"): also never sent.
  if (record.message === "bad port") codes.push("BAD_PORT");
  if (Array.isArray(record.errors)) {
    // Happy eyeballs: an AggregateError of one failure per address.
    const nested = record.errors.map((inner) => causeCodes(inner, depth + 1));
    if (nested.length > 0 && nested.every((list) => list.some(isConnectCode))) codes.push("ECONNREFUSED");
  }
  if (record.cause !== undefined) codes.push(...causeCodes(record.cause, depth + 1));
  return codes;
}

function refusalOf(error: unknown, depth = 0): string {
  if (error instanceof SendRefusedError) return error.reason;
  const cause = (error as { cause?: unknown } | null)?.cause;
  return depth < 4 && cause !== undefined ? refusalOf(cause, depth + 1) : "a dispatcher refused to send it";
}

function isConnectCode(code: string): boolean {
  return CONNECT_CAUSE_CODES.has(code) || code === "BAD_PORT";
}

/**
 * The one place fetch failures are classified. The dangerous mistake is calling a sent request "never
 * sent" (a caller could then mint a new key and bill a second Boat), so `connect` needs proof and every
 * doubt is `response`:
 * - undici `fetch failed` caused by ECONNREFUSED / ENOTFOUND / EHOSTUNREACH / connect timeout / TLS
 *   handshake failure → connect (never sent);
 * - a timeout or abort while undici proved it had not written the request yet → connect, timedOut;
 * - a `SendRefusedError` (the caller's dispatcher refused to write it) while undici proved it had not
 *   written the request → connect, with the refusal's reason;
 * - `terminated`, `other side closed`, ECONNRESET, EPIPE, socket closed, any body read error, a timeout
 *   after the request was written or whose progress is unknown → response (outcome unknown);
 * - anything else (an unknown error shape) → response.
 */
export function classifyFetchFailure(error: unknown, context: FailureContext): BoatTransportError {
  const codes = causeCodes(error);
  const common = {
    request: context.request,
    // undici's own timers count as timeouts too (connect, headers, body).
    timedOut: context.timedOut || codes.some((code) => UNDICI_TIMEOUT_CODES.has(code)),
    aborted: context.aborted,
    cause: error,
  };
  // Once undici wrote the request, or the answer began to arrive, nothing can prove it was not committed.
  if (context.afterHeaders || context.sent === true) {
    return new BoatTransportError({ ...common, phase: "response" });
  }
  if (context.sent === false && codes.includes(SEND_REFUSED_CODE)) {
    return new BoatTransportError({ ...common, phase: "connect", refusal: refusalOf(error) });
  }
  if (context.timedOut || context.aborted) {
    return new BoatTransportError({ ...common, phase: context.sent === false ? "connect" : "response" });
  }
  if (codes.some(isConnectCode)) {
    return new BoatTransportError({ ...common, phase: "connect" });
  }
  return new BoatTransportError({ ...common, phase: "response" });
}

export interface AttemptProgress {
  /** undici announced a request for this attempt. */
  observed: boolean;
  /** undici began writing it to a socket. */
  sent: boolean;
}

type CreateMessage = { request?: unknown };

/**
 * Watches undici's diagnostics channels to learn whether one attempt's request was written. Node's
 * built-in fetch is undici; it publishes `undici:request:create` in the async context of the fetch call
 * (so the AsyncLocalStorage tells whose request it is) and `undici:client:sendHeaders` right before it
 * writes the request to the socket. The subscriptions live only while the attempt runs, and so does the
 * AsyncLocalStorage: it is disabled once no attempt is in flight, because an enabled one keeps Node's promise
 * hooks on for every later promise of the process (about 0.14 µs each: a server's every request paid it).
 * `storage` is for tests.
 */
export function createSendTracker(storage = new AsyncLocalStorage<AttemptProgress>()): {
  track<T>(run: () => Promise<T>): { progress: () => boolean | undefined; result: Promise<T> };
} {
  let inFlight = 0;
  return {
    track<T>(run: () => Promise<T>) {
      const progress: AttemptProgress = { observed: false, sent: false };
      const requests = new WeakSet<object>();
      const onCreate = (message: unknown): void => {
        const request = (message as CreateMessage).request;
        if (storage.getStore() === progress && typeof request === "object" && request !== null) {
          progress.observed = true;
          requests.add(request);
        }
      };
      const onSend = (message: unknown): void => {
        const request = (message as CreateMessage).request;
        if (typeof request === "object" && request !== null && requests.has(request)) progress.sent = true;
      };
      diagnosticsChannel.subscribe("undici:request:create", onCreate);
      diagnosticsChannel.subscribe("undici:client:sendHeaders", onSend);
      let started: Promise<T>;
      inFlight += 1;
      try {
        started = storage.run(progress, run);
      } catch (error) {
        // An injected fetch that throws instead of rejecting still yields a classified failure.
        started = Promise.reject(error);
      }
      const result = started.finally(() => {
        diagnosticsChannel.unsubscribe("undici:request:create", onCreate);
        diagnosticsChannel.unsubscribe("undici:client:sendHeaders", onSend);
        inFlight -= 1;
        // Never while another attempt runs: disabling exits every context of this storage, its too.
        if (inFlight === 0) storage.disable();
      });
      return {
        result,
        progress: () => (progress.sent ? true : progress.observed ? false : undefined),
      };
    },
  };
}
