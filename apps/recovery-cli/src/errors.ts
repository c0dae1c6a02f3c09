import { isJournalStateError as isCreateJournalError } from "@drydock/boat-create-journal";
import { isJournalStateError as isDeleteJournalError } from "@drydock/boat-delete-journal";
import { isLifecycleError } from "@drydock/boat-lifecycle";
import { isBoatApiError, isBoatTransportError } from "@drydock/boat-provider";
import { isLockError } from "@drydock/file-lock";
import { isRecoveryError } from "@drydock/recovery-controller";
import { isSagaError } from "@drydock/restore-saga";

/**
 * Exit codes, the CLI's contract with scripts (SERVER_AND_CLI.md). One table; `exitCodeFor` is the only
 * place an error becomes a number.
 */
export const EXIT_CODES = {
  /** Done, or a preview printed (nothing changed). `status` also exits 0 when attention is needed. */
  OK: 0,
  /** Anything unexpected. */
  FAILURE: 1,
  /** The command line is wrong: unknown command or option, missing or malformed argument. */
  USAGE: 2,
  /** The saga, journal row, Boat or file named does not exist. */
  NOT_FOUND: 3,
  /** The state moved since the preview: the fence does not match any more. Re-run the preview. */
  STATE_CHANGED: 4,
  /** Refused because it is not safe now, or the state needs a person (recovery required, paused journal). */
  UNSAFE: 5,
  /** boat.dev could not be reached or did not answer usefully. */
  PROVIDER_UNAVAILABLE: 6,
} as const;

export type ExitCode = (typeof EXIT_CODES)[keyof typeof EXIT_CODES];

/** CLI-level refusals (arguments, missing files, fence mismatch detected before calling the controller). */
export const CLI_ERROR_EXIT = {
  USAGE: EXIT_CODES.USAGE,
  NOT_FOUND: EXIT_CODES.NOT_FOUND,
  ENVIRONMENT_ID_MISSING: EXIT_CODES.NOT_FOUND,
  PROVIDER_NOT_CONFIGURED: EXIT_CODES.USAGE,
  FENCE_MISMATCH: EXIT_CODES.STATE_CHANGED,
  ACTION_NOT_ELIGIBLE: EXIT_CODES.UNSAFE,
  CLI_FAILED: EXIT_CODES.FAILURE,
} as const;

export type CliErrorCode = keyof typeof CLI_ERROR_EXIT;

const MARKER = Symbol.for("@drydock/recovery-cli/CliError");

export class CliError extends Error {
  override readonly name = "CliError";
  readonly code: CliErrorCode;
  readonly exitCode: ExitCode;
  constructor(code: CliErrorCode, message: string, cause?: unknown) {
    super(message, cause === undefined ? undefined : { cause });
    this.code = code;
    this.exitCode = CLI_ERROR_EXIT[code];
    Object.defineProperty(this, MARKER, { value: true });
  }
}

export function isCliError(value: unknown): value is CliError {
  return typeof value === "object" && value !== null && (value as Record<symbol, unknown>)[MARKER] === true;
}

const SAGA_EXIT: Record<string, ExitCode> = {
  INVALID_ARGUMENT: EXIT_CODES.USAGE,
  INVALID_EVIDENCE: EXIT_CODES.USAGE,
  NOT_FOUND: EXIT_CODES.NOT_FOUND,
  CONFLICT: EXIT_CODES.STATE_CHANGED,
  LOCK_OWNERSHIP_LOST: EXIT_CODES.STATE_CHANGED,
  ALREADY_EXISTS: EXIT_CODES.UNSAFE,
  INVALID_TRANSITION: EXIT_CODES.UNSAFE,
  LIMIT: EXIT_CODES.UNSAFE,
  CORRUPT: EXIT_CODES.UNSAFE,
  WORKSPACE_MISMATCH: EXIT_CODES.UNSAFE,
  WORKSPACE_LOCKED: EXIT_CODES.UNSAFE,
  RECOVERY_REQUIRED: EXIT_CODES.UNSAFE,
  LOCK_FAILED: EXIT_CODES.FAILURE,
  WRITE_FAILED: EXIT_CODES.FAILURE,
};

const LIFECYCLE_EXIT: Record<string, ExitCode> = {
  invalid_argument: EXIT_CODES.USAGE,
  not_found: EXIT_CODES.NOT_FOUND,
  provider_unavailable: EXIT_CODES.PROVIDER_UNAVAILABLE,
  confirmation_mismatch: EXIT_CODES.STATE_CHANGED,
};

/** Maps anything thrown to an exit code and a public code. Unknown throwables are failures (1). */
export function classifyError(error: unknown): { exitCode: ExitCode; code: string } {
  if (isCliError(error)) return { exitCode: error.exitCode, code: error.code };
  if (isRecoveryError(error)) {
    switch (error.code) {
      case "INVALID_ARGUMENT":
        return { exitCode: EXIT_CODES.USAGE, code: error.code };
      case "SAGA_CONFLICT":
      case "STATE_CHANGED":
        return { exitCode: EXIT_CODES.STATE_CHANGED, code: error.code };
      case "OWNER_CONFLICT":
        // A live owner is not a moved state: taking over would be unsafe until it stops.
        return {
          exitCode: error.details.ownerAlive === true ? EXIT_CODES.UNSAFE : EXIT_CODES.STATE_CHANGED,
          code: error.code,
        };
      case "ACTION_NOT_ALLOWED":
        return { exitCode: EXIT_CODES.UNSAFE, code: error.code };
      case "NOT_FOUND":
        return { exitCode: EXIT_CODES.NOT_FOUND, code: error.code };
    }
  }
  if (isSagaError(error)) return { exitCode: SAGA_EXIT[error.code] ?? EXIT_CODES.FAILURE, code: error.code };
  if (isCreateJournalError(error) || isDeleteJournalError(error)) {
    return {
      exitCode: error.code === "INVALID_ARGUMENT" ? EXIT_CODES.USAGE : EXIT_CODES.UNSAFE,
      code: error.code,
    };
  }
  if (isLifecycleError(error)) {
    return { exitCode: LIFECYCLE_EXIT[error.code] ?? EXIT_CODES.UNSAFE, code: error.code };
  }
  if (isBoatTransportError(error)) return { exitCode: EXIT_CODES.PROVIDER_UNAVAILABLE, code: error.code };
  if (isBoatApiError(error)) {
    if (error.status === 404 || error.status === 410)
      return { exitCode: EXIT_CODES.NOT_FOUND, code: String(error.code) };
    if (error.status === 401) return { exitCode: EXIT_CODES.PROVIDER_UNAVAILABLE, code: String(error.code) };
    if (error.status >= 500 || error.status === 429 || error.status === 408) {
      return { exitCode: EXIT_CODES.PROVIDER_UNAVAILABLE, code: String(error.code) };
    }
    return { exitCode: EXIT_CODES.UNSAFE, code: String(error.code) };
  }
  if (isLockError(error)) {
    return {
      exitCode:
        error.code === "LOCK_TIMEOUT" || error.code === "LOCK_OWNER_UNVERIFIABLE"
          ? EXIT_CODES.UNSAFE
          : EXIT_CODES.FAILURE,
      code: error.code,
    };
  }
  return { exitCode: EXIT_CODES.FAILURE, code: "CLI_FAILED" };
}
