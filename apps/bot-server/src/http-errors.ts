import { isLifecycleError } from "@drydock/boat-lifecycle";
import {
  isStorageError,
  isWorkspaceError,
  type StorageError,
  type WorkspaceErrorCode,
} from "@drydock/storage";

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

/** How deep a cause chain is followed (journal error → lifecycle error → StorageError → OS error …). */
const MAX_CAUSE_DEPTH = 8;

/** `error` and its causes, outermost first. */
function causeChain(error: unknown): unknown[] {
  const chain: unknown[] = [];
  let at: unknown = error;
  while (chain.length < MAX_CAUSE_DEPTH && typeof at === "object" && at !== null) {
    chain.push(at);
    at = (at as { cause?: unknown }).cause;
  }
  return chain;
}

/**
 * The StorageError behind `error`: itself, or the cause of a journal's refusal (BOAT_CREATE_PAUSED and
 * BOAT_DELETE_PAUSED carry it, see @drydock/storage `asJournalError`) and of the lifecycle's
 * `recovery_paused` over that.
 */
export function storageCause(error: unknown): StorageError | undefined {
  return causeChain(error).find(isStorageError);
}

/**
 * Whether the root of `error` is a full disk or an exhausted quota (ENOSPC, EDQUOT): then the answer is
 * 507 Insufficient Storage, whichever store refused (a workspace file, a journal on either backend, the bot
 * registry), so a client and an alert can tell "no room" from "busy" or "damaged".
 */
export function isFullDisk(error: unknown): boolean {
  return causeChain(error).some((link) => {
    const { code, errno } = link as { code?: unknown; errno?: unknown };
    return [code, errno].some((value) => value === "ENOSPC" || value === "EDQUOT");
  });
}

/** The code of every answer that says this server lost its instance lease (the gate, the write fence). */
export const LEASE_LOST = "lease_lost";

/** Retry-After for a storage fault a retry may cure: a busy database soon, anything else later. */
export const STORAGE_RETRY_AFTER_S = { busy: 1, other: 10 } as const;

export function toHttpError(error: unknown): HttpError {
  const mapped = toHttpErrorBase(error);
  // A storage fault below a package's refusal: its own code (storage_busy, storage_corrupt, …) and status,
  // and the message the client gets (the outer one when it carries the storage's, as asJournalError's do).
  const storage = storageCause(error);
  if (storage !== undefined && mapped.status !== 500) {
    mapped.status = storage.status;
    // A write refused by the instance fence (STORAGE_FENCED, postgres): the same answer as the side-effect
    // gate's, 503 `lease_lost` — this server lost its lease; retry here once it re-registered, or elsewhere.
    mapped.body.error.code = storage.code === "STORAGE_FENCED" ? LEASE_LOST : httpErrorCode(storage.code);
    if (!mapped.body.error.message.includes(storage.message)) mapped.body.error.message = storage.message;
    if (storage.retryable) {
      mapped.retryAfterS =
        storage.code === "STORAGE_BUSY" ? STORAGE_RETRY_AFTER_S.busy : STORAGE_RETRY_AFTER_S.other;
    }
  } else if (storage !== undefined) {
    return toHttpError(storage);
  }
  if (mapped.status !== 500 && isFullDisk(error)) mapped.status = 507;
  return mapped;
}

/**
 * The store's workspace refusals (postgres, decision 0031) in the words the local workspace answers with: a
 * client sees the same code for the same refusal on every backend. A version conflict (another change came
 * first, after the server's retries) and an id naming something else have no local equivalent.
 * WORKSPACE_INVALID_ARGUMENT reaches a route only for a path (bot, checkpoint and operation ids are checked
 * by the route's schema first).
 */
export const WORKSPACE_ERROR_CODES: Record<WorkspaceErrorCode, string> = {
  WORKSPACE_VERSION_CONFLICT: "workspace_version_conflict",
  WORKSPACE_FILE_NOT_FOUND: "file_not_found",
  WORKSPACE_CHECKPOINT_NOT_FOUND: "checkpoint_not_found",
  WORKSPACE_ID_CONFLICT: "workspace_id_conflict",
  WORKSPACE_FILE_TOO_LARGE: "file_too_large",
  WORKSPACE_INVALID_ARGUMENT: "invalid_path",
};

function toHttpErrorBase(error: unknown): HttpError {
  if (isWorkspaceError(error)) {
    return {
      status: error.status,
      body: { ok: false, error: { code: WORKSPACE_ERROR_CODES[error.code], message: error.message } },
    };
  }
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
