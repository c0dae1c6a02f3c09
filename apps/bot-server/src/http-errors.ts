import { isLifecycleError } from "@drydock/boat-lifecycle";

/**
 * One place that turns anything thrown into an HTTP answer. Every drydock package error carries `code`,
 * `status` and a plain-language `message` (what happened, what to do next); those pass through as they are.
 * Anything else is an internal error whose details stay in the log, never in the response.
 */
export interface HttpErrorBody {
  ok: false;
  error: { code: string; message: string; details?: unknown };
}

export interface HttpError {
  status: number;
  body: HttpErrorBody;
  /** The `Retry-After` header (whole seconds, rounded up) when boat.dev said how long to wait. */
  retryAfterS?: number;
}

interface CodedError {
  code: string;
  status: number;
  message: string;
}

function isCoded(error: unknown): error is CodedError & Error {
  if (!(error instanceof Error)) return false;
  const { code, status } = error as Error & Partial<CodedError>;
  return (
    typeof code === "string" &&
    typeof status === "number" &&
    Number.isInteger(status) &&
    status >= 400 &&
    status <= 599
  );
}

export class HttpProblem extends Error {
  override readonly name = "HttpProblem";
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: unknown,
  ) {
    super(message);
  }
}

export function toHttpError(error: unknown): HttpError {
  if (error instanceof HttpProblem) {
    return {
      status: error.status,
      body: {
        ok: false,
        error: {
          code: error.code,
          message: error.message,
          ...(error.details === undefined ? {} : { details: error.details }),
        },
      },
    };
  }
  if (isCoded(error)) {
    // Provider transport and 5xx errors arrive as 502/503 from the packages; pass the package's status on.
    const mapped: HttpError = {
      status: error.status,
      body: { ok: false, error: { code: error.code, message: error.message } },
    };
    // boat.dev's Retry-After travels on to the caller, so a client backs off as long as boat.dev asked.
    if (isLifecycleError(error) && error.retryAfterMs !== undefined) {
      mapped.retryAfterS = Math.max(0, Math.ceil(error.retryAfterMs / 1_000));
    }
    return mapped;
  }
  return {
    status: 500,
    body: {
      ok: false,
      error: {
        code: "internal",
        message: "drydock hit an unexpected error; the details are in the server log.",
      },
    },
  };
}
