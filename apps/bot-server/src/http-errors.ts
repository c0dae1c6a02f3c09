import { isLifecycleError } from "@drydock/boat-lifecycle";

/**
 * One place that turns anything thrown into an HTTP answer. Every drydock package error carries `code`,
 * `status` and a plain-language `message` (what happened, what to do next); those pass through, the code
 * in the API's one casing (`httpErrorCode`). Anything else is an internal error whose details stay in the
 * log, never in the response.
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

const UPPER_SNAKE = /^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*$/;

/**
 * The HTTP API answers every error code in lower snake case (`bot_busy`, `restore_running`). The packages
 * keep their own codes (restore-saga's and file-lock's are UPPER_SNAKE, as CONTRACTS.md names them): at the
 * edge an UPPER_SNAKE code becomes its lower form (`WORKSPACE_LOCKED` → `workspace_locked`), and a code
 * already in lower snake case is kept as it is.
 */
export function httpErrorCode(code: string): string {
  return UPPER_SNAKE.test(code) ? code.toLowerCase() : code;
}

export function toHttpError(error: unknown): HttpError {
  if (error instanceof HttpProblem) {
    return {
      status: error.status,
      body: {
        ok: false,
        error: {
          // A problem built from a package error (a workspace guard, a restore's failure) carries its code.
          code: httpErrorCode(error.code),
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
      body: { ok: false, error: { code: httpErrorCode(error.code), message: error.message } },
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
