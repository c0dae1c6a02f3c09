import type { z } from "zod";
import { BoatApiError, BoatTransportError } from "./errors.js";
import {
  boatIdSchema,
  boatNameSchema,
  type CreateSandboxBody,
  createSandboxBodySchema,
  createSandboxResponseSchema,
  type DeletionOperation,
  deletionResponseSchema,
  errorEnvelopeSchema,
  idempotencyKeySchema,
  listSandboxesQuerySchema,
  listSandboxesResponseSchema,
  operationIdSchema,
  operationResponseSchema,
  type Sandbox,
  sandboxResponseSchema,
} from "./schema.js";
import { classifyFetchFailure, createSendTracker } from "./transport.js";
import { walkSandboxes } from "./walk.js";

export type FetchLike = (input: string, init: RequestInit) => Promise<Response>;

export interface BoatClientOptions {
  /** The API base, `<origin>/api/v1`. */
  baseUrl: string;
  /** Bearer token; sent only in the Authorization header, never in a message. */
  token: string;
  /** Defaults to the global fetch (Node's undici). */
  fetch?: FetchLike;
  /** Per request, including reading the body. Default 10 s. */
  timeoutMs?: number;
  /** For `Retry-After` HTTP dates. Default Date.now. */
  now?: () => number;
}

export interface CallOptions {
  signal?: AbortSignal;
}

export interface BoatClient {
  createSandbox(
    body: CreateSandboxBody,
    options: { idempotencyKey: string; signal?: AbortSignal },
  ): Promise<{ sandbox: Sandbox; replayed: boolean }>;
  getSandbox(id: string, options?: CallOptions): Promise<Sandbox>;
  renameSandbox(id: string, name: string, options?: CallOptions): Promise<Sandbox>;
  listSandboxes(
    options?: { cursor?: string; limit?: number } & CallOptions,
  ): Promise<{ sandboxes: Sandbox[]; nextCursor: string | null }>;
  /**
   * Every page, collected, deduplicated by id, up to `maxPages` (default 10, at most 10,000):
   * `pagination_limit_exceeded` past it, since an incomplete list must never prove a Boat absent. For an
   * account of any size, walk the list instead (`walkSandboxes`: no page cap, nothing kept but what the
   * caller keeps of each page).
   */
  listAllSandboxes(options?: { maxPages?: number; limit?: number } & CallOptions): Promise<Sandbox[]>;
  deleteSandbox(id: string, options?: CallOptions): Promise<DeletionOperation>;
  /** `targetId`, when given, must be the operation's target (else invalid_response). */
  getDeletionOperation(
    opId: string,
    options?: { targetId?: string } & CallOptions,
  ): Promise<DeletionOperation>;
}

export const DEFAULT_TIMEOUT_MS = 10_000;
/** A hostile provider cannot make us buffer more than this. */
const MAX_RESPONSE_BYTES = 4 * 1024 * 1024;

/** Parses `Retry-After`: delta-seconds or an HTTP date; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | null, now: number): number | undefined {
  if (value === null) return undefined;
  const trimmed = value.trim();
  if (/^\d{1,9}$/.test(trimmed)) return Number(trimmed) * 1000;
  if (!/[a-z]/i.test(trimmed)) return undefined;
  const at = Date.parse(trimmed);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - now);
}

function invalidArgument(what: string, issue: z.ZodError | string): BoatApiError {
  const detail = typeof issue === "string" ? issue : (issue.issues[0]?.message ?? "invalid");
  return new BoatApiError({
    status: 400,
    code: "invalid_argument",
    message: `${what} was refused before anything was sent to boat.dev: ${detail}. Fix the call and try again.`,
    details: { argument: what },
  });
}

/** What a failed answer to `request` may mean: a read changed nothing; anything else may have taken effect. */
function outcomeNote(request: string): string {
  return /^(GET|HEAD) /.test(request)
    ? "a read changes nothing at boat.dev"
    : "the request may have taken effect";
}

function invalidResponse(request: string, reason: string, httpStatus: number, cause?: unknown): BoatApiError {
  return new BoatApiError({
    status: 502,
    code: "invalid_response",
    message: `boat.dev answered ${request} with something the API does not allow (${reason}); ${outcomeNote(request)}. Reconcile before acting again.`,
    details: { reason, httpStatus },
    cause,
  });
}

interface Answer {
  status: number;
  headers: Headers;
  body: unknown;
  request: string;
}

export function createBoatClient(options: BoatClientOptions): BoatClient {
  if (typeof options?.baseUrl !== "string") throw invalidArgument("baseUrl", "must be an http(s) URL");
  const baseUrl = options.baseUrl.replace(/\/+$/, "");
  if (!/^https?:\/\//.test(baseUrl)) throw invalidArgument("baseUrl", "must be an http(s) URL");
  if (typeof options.token !== "string" || options.token.length === 0 || /[\r\n\0\s]/.test(options.token)) {
    throw invalidArgument("token", "must be a non-empty string without whitespace");
  }
  const token = options.token;
  const fetchImpl: FetchLike = options.fetch ?? ((input, init) => fetch(input, init));
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) throw invalidArgument("timeoutMs", "must be positive");
  const now = options.now ?? Date.now;
  const tracker = createSendTracker();

  async function send(
    method: string,
    path: string,
    init: { body?: unknown; headers?: Record<string, string>; signal?: AbortSignal; query?: string },
  ): Promise<Answer> {
    const request = `${method} ${path}`;
    const state = { timedOut: false, aborted: false, afterHeaders: false };
    if (init.signal?.aborted) {
      // Never started: nothing can have been sent.
      throw new BoatTransportError({
        phase: "connect",
        timedOut: false,
        aborted: true,
        request,
        cause: init.signal.reason,
      });
    }
    const controller = new AbortController();
    const timer = setTimeout(() => {
      state.timedOut = true;
      controller.abort(new Error(`timed out after ${timeoutMs} ms`));
    }, timeoutMs);
    const onCallerAbort = (): void => {
      state.aborted = true;
      controller.abort(init.signal?.reason);
    };
    init.signal?.addEventListener("abort", onCallerAbort, { once: true });
    const headers: Record<string, string> = {
      authorization: `Bearer ${token}`,
      accept: "application/json",
      ...init.headers,
    };
    if (init.body !== undefined) headers["content-type"] = "application/json";
    const attempt = tracker.track(() =>
      fetchImpl(`${baseUrl}${path}${init.query ?? ""}`, {
        method,
        headers,
        body: init.body === undefined ? undefined : JSON.stringify(init.body),
        signal: controller.signal,
        // A redirect could replay a POST somewhere else; the API never redirects, so treat it as invalid.
        redirect: "manual",
      }),
    );
    try {
      let response: Response;
      try {
        response = await attempt.result;
      } catch (error) {
        throw classifyFetchFailure(error, {
          request,
          timedOut: state.timedOut,
          aborted: state.aborted,
          sent: attempt.progress(),
          afterHeaders: false,
        });
      }
      state.afterHeaders = true;
      let text: string;
      try {
        text = await readBounded(response, request);
      } catch (error) {
        if (error instanceof BoatApiError) throw error;
        throw classifyFetchFailure(error, {
          request,
          timedOut: state.timedOut,
          aborted: state.aborted,
          sent: true,
          afterHeaders: true,
        });
      }
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch (error) {
        body = PARSE_FAILED;
        if (response.ok) throw invalidResponse(request, "the body is not JSON", response.status, error);
      }
      return { status: response.status, headers: response.headers, body, request };
    } finally {
      clearTimeout(timer);
      init.signal?.removeEventListener("abort", onCallerAbort);
    }
  }

  async function readBounded(response: Response, request: string): Promise<string> {
    const declared = Number(response.headers.get("content-length"));
    if (Number.isFinite(declared) && declared > MAX_RESPONSE_BYTES) {
      await response.body?.cancel().catch(() => undefined);
      throw invalidResponse(request, "the body is too large", response.status);
    }
    if (!response.body) return "";
    const reader = response.body.getReader();
    const chunks: Uint8Array[] = [];
    let total = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      total += value.byteLength;
      if (total > MAX_RESPONSE_BYTES) {
        await reader.cancel().catch(() => undefined);
        throw invalidResponse(request, "the body is too large", response.status);
      }
      chunks.push(value);
    }
    return Buffer.concat(chunks).toString("utf8");
  }

  /** Turns a non-success answer into a BoatApiError; returns the body for a 2xx `ok: true` answer. */
  function expectSuccess<T>(answer: Answer, schema: z.ZodType<T>): T {
    const { status, body, request } = answer;
    const isSuccess =
      status >= 200 && status < 300 && typeof body === "object" && body !== null && !isErrorBody(body);
    if (!isSuccess) throw toApiError(answer);
    const parsed = schema.safeParse(body);
    if (!parsed.success) {
      throw invalidResponse(request, `wrong shape: ${describeIssue(parsed.error)}`, status, parsed.error);
    }
    return parsed.data;
  }

  function toApiError(answer: Answer): BoatApiError {
    const { status, headers, body, request } = answer;
    const retryAfterMs = parseRetryAfter(headers.get("retry-after"), now());
    const headerRequestId = headers.get("x-request-id") ?? undefined;
    if (status >= 300 && status < 400) {
      return invalidResponse(request, `an unexpected redirect (${status})`, status);
    }
    const envelope = errorEnvelopeSchema.safeParse(body);
    if (envelope.success) {
      const requestId = envelope.data.requestId ?? headerRequestId;
      if (status >= 200 && status < 300) {
        // An error envelope with a success status is self-contradictory: we cannot tell what happened.
        return invalidResponse(request, `an error envelope with HTTP ${status}`, status);
      }
      const said = envelope.data.error.status;
      if (said !== undefined && said !== status) {
        // So is one whose own status is another than the answer's: a 404 saying 500 must never read as
        // proof that a Boat is gone (`provesAbsence`), nor a 500 saying 404 as a plain failure.
        return invalidResponse(
          request,
          `an error envelope saying HTTP ${said} in an HTTP ${status} answer`,
          status,
        );
      }
      return new BoatApiError({
        status,
        code: envelope.data.error.code,
        // A 5xx is not a refusal: boat.dev may have done the work before it failed (a create may exist).
        message:
          status >= 500
            ? `boat.dev failed ${request}: ${sanitize(envelope.data.error.message)} (${envelope.data.error.code}, HTTP ${status}); ${outcomeNote(request)}.`
            : `boat.dev refused ${request}: ${sanitize(envelope.data.error.message)} (${envelope.data.error.code}, HTTP ${status}).`,
        ...(requestId === undefined ? {} : { requestId }),
        ...(retryAfterMs === undefined ? {} : { retryAfterMs }),
        details: envelope.data.error.details ?? {},
      });
    }
    if (status >= 200 && status < 300) {
      return invalidResponse(request, "a success without `ok: true`", status);
    }
    return new BoatApiError({
      status: status >= 400 && status <= 599 ? status : 502,
      code: "http_error",
      message: `boat.dev (or a proxy in front of it) answered ${request} with HTTP ${status} and no error envelope; ${outcomeNote(request)}. Retry later or check boat.dev's status.`,
      ...(headerRequestId === undefined ? {} : { requestId: headerRequestId }),
      ...(retryAfterMs === undefined ? {} : { retryAfterMs }),
      details: { httpStatus: status },
    });
  }

  function checkId(what: string, value: string, schema: z.ZodType<string>): string {
    const parsed = schema.safeParse(value);
    if (!parsed.success) throw invalidArgument(what, parsed.error);
    return parsed.data;
  }

  const client: BoatClient = {
    async createSandbox(body, callOptions) {
      const parsedBody = createSandboxBodySchema.safeParse(body);
      if (!parsedBody.success) throw invalidArgument("create body", parsedBody.error);
      const key = idempotencyKeySchema.safeParse(callOptions?.idempotencyKey);
      if (!key.success) throw invalidArgument("idempotencyKey", "must be a UUID v4");
      const answer = await send("POST", "/sandboxes", {
        body: parsedBody.data,
        headers: { "idempotency-key": key.data },
        signal: callOptions.signal,
      });
      const data = expectSuccess(answer, createSandboxResponseSchema);
      const replayed = answer.headers.get("idempotent-replayed")?.toLowerCase() === "true";
      return { sandbox: data.sandbox, replayed };
    },

    async getSandbox(id, callOptions) {
      const boatId = checkId("Boat id", id, boatIdSchema);
      const answer = await send("GET", `/sandboxes/${boatId}`, { signal: callOptions?.signal });
      const data = expectSuccess(answer, sandboxResponseSchema);
      if (data.sandbox.id !== boatId) {
        throw invalidResponse(answer.request, "the sandbox id differs from the one asked for", answer.status);
      }
      return data.sandbox;
    },

    async renameSandbox(id, name, callOptions) {
      const boatId = checkId("Boat id", id, boatIdSchema);
      const boatName = checkId("Boat name", name, boatNameSchema);
      const answer = await send("PATCH", `/sandboxes/${boatId}`, {
        body: { name: boatName },
        signal: callOptions?.signal,
      });
      const data = expectSuccess(answer, sandboxResponseSchema);
      if (data.sandbox.id !== boatId) {
        throw invalidResponse(answer.request, "the sandbox id differs from the one renamed", answer.status);
      }
      if (data.sandbox.name !== boatName) {
        throw invalidResponse(answer.request, "the sandbox does not carry the new name", answer.status);
      }
      return data.sandbox;
    },

    async listSandboxes(listOptions = {}) {
      const query = listSandboxesQuerySchema.safeParse({
        ...(listOptions.limit === undefined ? {} : { limit: listOptions.limit }),
        ...(listOptions.cursor === undefined ? {} : { cursor: listOptions.cursor }),
      });
      if (!query.success) throw invalidArgument("list options", query.error);
      const params = new URLSearchParams();
      if (query.data.limit !== undefined) params.set("limit", String(query.data.limit));
      if (query.data.cursor !== undefined) params.set("cursor", query.data.cursor);
      const search = params.toString();
      const answer = await send("GET", "/sandboxes", {
        query: search ? `?${search}` : "",
        signal: listOptions.signal,
      });
      const data = expectSuccess(answer, listSandboxesResponseSchema);
      return { sandboxes: data.sandboxes, nextCursor: data.pageInfo.nextCursor };
    },

    async listAllSandboxes(listOptions = {}) {
      const maxPages = listOptions.maxPages ?? 10;
      if (!Number.isInteger(maxPages) || maxPages < 1 || maxPages > 10_000) {
        throw invalidArgument("maxPages", "must be an integer from 1 to 10000");
      }
      const walk = walkSandboxes(client, { pageSize: listOptions.limit ?? 200 });
      const byId = new Map<string, Sandbox>();
      while (!walk.complete && walk.pagesRead < maxPages) {
        // A Boat may show up on two pages of an eventually consistent listing; the first sighting wins.
        for (const sandbox of await walk.next(listOptions.signal)) {
          if (!byId.has(sandbox.id)) byId.set(sandbox.id, sandbox);
        }
      }
      if (walk.complete) return [...byId.values()];
      throw new BoatApiError({
        status: 502,
        code: "pagination_limit_exceeded",
        message: `boat.dev listed more than ${maxPages} pages of Boats; the inventory is incomplete, so it must not be used to prove a Boat absent. Raise maxPages, or walk the whole list with walkSandboxes (no page cap).`,
        details: { maxPages },
      });
    },

    async deleteSandbox(id, callOptions) {
      const boatId = checkId("Boat id", id, boatIdSchema);
      const answer = await send("DELETE", `/sandboxes/${boatId}`, {
        headers: { "x-boat-confirm-delete": boatId },
        signal: callOptions?.signal,
      });
      const data = expectSuccess(answer, deletionResponseSchema);
      // A receipt counts only if it is bound to the Boat we deleted: another Boat's operation must never
      // be recorded as proof for this one.
      if (data.operation.targetId !== boatId) {
        throw invalidResponse(answer.request, "the deletion receipt targets another Boat", answer.status);
      }
      return data.operation;
    },

    async getDeletionOperation(opId, callOptions) {
      const operationId = checkId("deletion operation id", opId, operationIdSchema);
      const targetId =
        callOptions?.targetId === undefined
          ? undefined
          : checkId("Boat id", callOptions.targetId, boatIdSchema);
      const answer = await send("GET", `/deletion-operations/${operationId}`, {
        signal: callOptions?.signal,
      });
      const data = expectSuccess(answer, operationResponseSchema);
      if (data.operation.id !== operationId) {
        throw invalidResponse(
          answer.request,
          "the operation id differs from the one asked for",
          answer.status,
        );
      }
      if (targetId !== undefined && data.operation.targetId !== targetId) {
        throw invalidResponse(answer.request, "the operation targets another Boat", answer.status);
      }
      return data.operation;
    },
  };
  return client;
}

const PARSE_FAILED = Symbol("not JSON");

function isErrorBody(body: object): boolean {
  return (body as { ok?: unknown }).ok === false;
}

function describeIssue(error: z.ZodError): string {
  const issue = error.issues[0];
  if (!issue) return "invalid";
  const path = issue.path.length > 0 ? issue.path.join(".") : "(root)";
  return `${path}: ${issue.message}`;
}

/** Provider text goes into our messages: keep it one short line. */
function sanitize(text: string): string {
  return text.replace(/[\r\n\0]+/g, " ").slice(0, 300);
}
