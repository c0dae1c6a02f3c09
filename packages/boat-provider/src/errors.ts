/**
 * Errors of @drydock/boat-provider. The contract names two client errors: `BoatApiError` (boat.dev, or
 * something in its place, answered) and `BoatTransportError` (no usable answer; the outcome may be unknown).
 * The simulator adds `BoatSimulatorError` for its own start-up refusals. All codes share one table, so a
 * code without a status does not compile.
 */
export const BOAT_ERROR_STATUS = {
  // Codes boat.dev answers (BOAT_DEV_API.md). A BoatApiError carries the HTTP status it actually received;
  // these are the statuses the API documents for them.
  unauthorized: 401,
  not_found: 404,
  gone: 410,
  invalid_request: 400,
  invalid_cursor: 400,
  idempotency_key_required: 400,
  idempotency_in_progress: 409,
  idempotency_key_reused: 409,
  confirmation_mismatch: 409,
  sandbox_busy: 409,
  method_not_allowed: 405,
  payload_too_large: 413,
  rate_limited: 429,
  internal_error: 500,
  service_unavailable: 503,
  // Codes the client produces itself.
  /** The arguments were refused before anything was sent. */
  invalid_argument: 400,
  /** The answer was not what the API promises (not JSON, wrong shape, wrong ids, unbound receipt). */
  invalid_response: 502,
  /** A non-2xx answer without a provider error envelope (a proxy's error page, say). */
  http_error: 502,
  /** walkSandboxes (and listAllSandboxes): the provider handed back a cursor it had already given. */
  pagination_loop: 502,
  /** listAllSandboxes: more pages than `maxPages`. */
  pagination_limit_exceeded: 502,
  // BoatTransportError codes.
  /** The request never reached boat.dev: nothing was committed. */
  transport_connect_failed: 503,
  /** The request may have reached boat.dev but no complete answer came back: the outcome is unknown. */
  transport_response_lost: 503,
  // BoatSimulatorError codes.
  simulator_host_refused: 400,
  simulator_state_invalid: 503,
  simulator_state_unwritable: 503,
  simulator_start_failed: 503,
} as const;

export type BoatErrorCode = keyof typeof BOAT_ERROR_STATUS;
/** Provider codes are open-ended: boat.dev may answer codes this table does not know yet. */
export type BoatApiErrorCode = BoatErrorCode | (string & {});

const API_MARKER = Symbol.for("@drydock/boat-provider/BoatApiError");
const TRANSPORT_MARKER = Symbol.for("@drydock/boat-provider/BoatTransportError");
const SIMULATOR_MARKER = Symbol.for("@drydock/boat-provider/BoatSimulatorError");

/** Whether repeating the same request (for a create: with the SAME idempotency key) may succeed. */
function retryableStatus(status: number, code: string): boolean {
  // 408: the provider gave up waiting for our request; nothing suggests it will next time.
  if (status === 408) return true;
  // 409 idempotency_in_progress: the first request with this key is still running; the same key will
  // replay its result once it finishes. Every other 409 (key reused, busy, mismatch) needs a decision.
  if (status === 409) return code === "idempotency_in_progress";
  // 429: rate limited; Retry-After says when.
  if (status === 429) return true;
  // 502 from the client itself (invalid answer): the provider may have committed; only a retry that is
  // itself idempotent (same key, GET, poll) is safe, which is the caller's call.
  // 5xx in general: a server-side failure, possibly after committing; same caveat.
  if (status >= 500) return true;
  // Every other 4xx is a definitive refusal of this exact request.
  return false;
}

export interface BoatApiErrorInit {
  status: number;
  code: BoatApiErrorCode;
  message: string;
  requestId?: string;
  retryAfterMs?: number;
  details?: Record<string, unknown>;
  cause?: unknown;
}

/** An answer from boat.dev (or from whatever answered in its place) that is not the success we asked for. */
export class BoatApiError extends Error {
  override readonly name = "BoatApiError";
  readonly status: number;
  readonly code: BoatApiErrorCode;
  /** The provider's request id, when it sent one (quote it to boat.dev support). */
  readonly requestId?: string;
  /** From `Retry-After` (seconds or an HTTP date); absent when the provider did not say. */
  readonly retryAfterMs?: number;
  /** The provider's `error.details`, or for client-side codes a small description; never secrets. */
  readonly details: Record<string, unknown>;
  readonly isRetryable: boolean;

  constructor(init: BoatApiErrorInit) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.status = init.status;
    this.code = init.code;
    if (init.requestId !== undefined) this.requestId = init.requestId;
    if (init.retryAfterMs !== undefined) this.retryAfterMs = init.retryAfterMs;
    this.details = init.details ?? {};
    this.isRetryable = retryableStatus(init.status, init.code);
    Object.defineProperty(this, API_MARKER, { value: true });
  }
}

export type TransportPhase = "connect" | "response";

export interface BoatTransportErrorInit {
  phase: TransportPhase;
  timedOut: boolean;
  /** The caller's AbortSignal ended the request (not our timeout). */
  aborted?: boolean;
  /** `METHOD /path` of the request, never with a query string, header or body. */
  request: string;
  /** Phase connect only: what refused to write the request (a `SendRefusedError`'s reason). */
  refusal?: string;
  cause?: unknown;
}

/** The code a `SendRefusedError` carries, which `classifyFetchFailure` reads as proof of "not sent". */
export const SEND_REFUSED_CODE = "ERR_DRYDOCK_SEND_REFUSED";

/**
 * What a caller's dispatcher aborts a request with when it refuses to write it (a server whose instance
 * lease has passed, checked at the moment undici would write the request to the socket). With undici's
 * own word that the request was never written, the client classifies the failure as `phase: "connect"`:
 * nothing reached boat.dev. `reason` says why, for a person; `cause` is the refusal itself.
 */
export class SendRefusedError extends Error {
  override readonly name = "SendRefusedError";
  readonly code = SEND_REFUSED_CODE;
  constructor(
    readonly reason: string,
    options?: { cause?: unknown },
  ) {
    super(reason, options);
  }
}

/**
 * No usable answer. `phase: "connect"` is proof the request never left (connection refused, DNS failure,
 * timed out before the connection existed): nothing was committed. `phase: "response"` means the request
 * may have been committed: a create may only be retried with the SAME idempotency key, a delete is
 * reconciled by polling or reading the Boat, never by a blind second request.
 */
export class BoatTransportError extends Error {
  override readonly name = "BoatTransportError";
  readonly code: "transport_connect_failed" | "transport_response_lost";
  readonly status: 503;
  readonly phase: TransportPhase;
  readonly timedOut: boolean;
  readonly aborted: boolean;
  // Transport failures are transient by nature; for phase "response" a retry must be idempotent (same
  // key, read, poll), which is the caller's decision.
  readonly isRetryable = true;

  constructor(init: BoatTransportErrorInit) {
    const what =
      init.phase === "connect" && init.refusal !== undefined
        ? `${init.request} was not sent to boat.dev, so nothing changed there: ${init.refusal}`
        : init.phase === "connect"
          ? `boat.dev could not be reached for ${init.request}${init.timedOut ? " before the timeout" : ""}; the request was never sent, so nothing changed. Retry when boat.dev is reachable.`
          : /^(GET|HEAD) /.test(init.request)
            ? `The answer from boat.dev to ${init.request} was lost${init.timedOut ? " (timed out)" : ""}. A read changes nothing at boat.dev: retry it when boat.dev answers.`
            : `The answer from boat.dev to ${init.request} was lost${init.timedOut ? " (timed out)" : ""}; the request may or may not have taken effect. Reconcile before acting again${/^POST \/sandboxes(\?|$)/.test(init.request) ? " (retry a create only with the same idempotency key)" : ""}.`;
    super(init.aborted ? `${init.request} was cancelled. ${what}` : what, { cause: init.cause });
    this.phase = init.phase;
    this.timedOut = init.timedOut;
    this.aborted = init.aborted ?? false;
    this.code = init.phase === "connect" ? "transport_connect_failed" : "transport_response_lost";
    this.status = BOAT_ERROR_STATUS[this.code];
    Object.defineProperty(this, TRANSPORT_MARKER, { value: true });
  }
}

export type BoatSimulatorErrorCode =
  | "simulator_host_refused"
  | "simulator_state_invalid"
  | "simulator_state_unwritable"
  | "simulator_start_failed";

/** The simulator refused to start (non-loopback host, unreadable state file) or could not persist. */
export class BoatSimulatorError extends Error {
  override readonly name = "BoatSimulatorError";
  readonly code: BoatSimulatorErrorCode;
  readonly status: number;
  /** The state file (or its log) at fault, when a file is. */
  readonly path?: string;
  /** The byte offset of the record at fault in `path`, for a corrupt log record. */
  readonly offset?: number;
  constructor(init: {
    code: BoatSimulatorErrorCode;
    message: string;
    cause?: unknown;
    path?: string;
    offset?: number;
  }) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.code = init.code;
    this.status = BOAT_ERROR_STATUS[init.code];
    if (init.path !== undefined) this.path = init.path;
    if (init.offset !== undefined) this.offset = init.offset;
    Object.defineProperty(this, SIMULATOR_MARKER, { value: true });
  }
}

function hasMarker(value: unknown, marker: symbol): boolean {
  return typeof value === "object" && value !== null && (value as Record<symbol, unknown>)[marker] === true;
}

/** True for a BoatApiError from any copy of this package. */
export function isBoatApiError(value: unknown): value is BoatApiError {
  return hasMarker(value, API_MARKER);
}
/**
 * True when `error` is boat.dev's own proof that what was read does not exist: 404 `not_found` or 410 `gone`
 * with its error envelope. A 404/410 without the envelope (a proxy's page: `http_error`) proves nothing.
 */
export function provesAbsence(error: unknown): boolean {
  return (
    isBoatApiError(error) &&
    (error.status === 404 || error.status === 410) &&
    (error.code === "not_found" || error.code === "gone")
  );
}
/** True for a BoatTransportError from any copy of this package. */
export function isBoatTransportError(value: unknown): value is BoatTransportError {
  return hasMarker(value, TRANSPORT_MARKER);
}
/** True for a BoatSimulatorError from any copy of this package. */
export function isBoatSimulatorError(value: unknown): value is BoatSimulatorError {
  return hasMarker(value, SIMULATOR_MARKER);
}
