import { isBoatCreateJournalError, TRANSIENTLY_UNREADABLE } from "@drydock/boat-create-journal";
import { isBoatDeleteJournalError } from "@drydock/boat-delete-journal";
import { isLifecycleError, type LifecycleErrorCode } from "@drydock/boat-lifecycle";
import { isBoatApiError, isBoatTransportError } from "@drydock/boat-provider";
import { isLockError } from "@drydock/file-lock";
import { isRecoveryError } from "@drydock/recovery-controller";
import { isSagaError } from "@drydock/restore-saga";
import { isStorageError, type StorageError, type StorageErrorCode } from "@drydock/storage";

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
  /**
   * Only `status --fail-on-attention` (monitoring): something needs a person. A code of its own, so a
   * cron job or a Nagios check tells "a person is needed" from "could not look" (6) and from a refusal (5).
   */
  ATTENTION: 7,
} as const;

export type ExitCode = (typeof EXIT_CODES)[keyof typeof EXIT_CODES];

/** CLI-level refusals (arguments, missing files, fence mismatch detected before calling the controller). */
export const CLI_ERROR_EXIT = {
  USAGE: EXIT_CODES.USAGE,
  NOT_FOUND: EXIT_CODES.NOT_FOUND,
  ENVIRONMENT_ID_MISSING: EXIT_CODES.NOT_FOUND,
  PROVIDER_NOT_CONFIGURED: EXIT_CODES.USAGE,
  /** The provider given is not the one the data directory is bound to (`<dataDir>/boat-provider`). */
  PROVIDER_MISMATCH: EXIT_CODES.USAGE,
  FENCE_MISMATCH: EXIT_CODES.STATE_CHANGED,
  ACTION_NOT_ELIGIBLE: EXIT_CODES.UNSAFE,
  /** boat.dev's list could not be read, so the plan cannot say what a preview asked about. */
  PROVIDER_UNLISTED: EXIT_CODES.PROVIDER_UNAVAILABLE,
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

/**
 * boat.dev's own HTTP status as an exit code: 404/410 are "not found"; no answer worth acting on (5xx), a
 * wait it asked for (429, 408) and a refused token (401) are "boat.dev unavailable" (6: a retry, or fixing
 * the configuration, may cure it); any other 4xx is boat.dev refusing this request (5).
 */
function providerStatusExit(status: number): ExitCode {
  if (status === 404 || status === 410) return EXIT_CODES.NOT_FOUND;
  if (status >= 500 || status === 429 || status === 408 || status === 401) {
    return EXIT_CODES.PROVIDER_UNAVAILABLE;
  }
  return EXIT_CODES.UNSAFE;
}

/**
 * Every lifecycle code, decided one by one (a new code does not compile until it is placed): an outcome
 * boat.dev left unknown or a refusal a retry may cure is 6, a refusal on policy or a state that needs a
 * person is 5. `provider_refused` carries boat.dev's own status and is judged by it.
 */
const LIFECYCLE_EXIT: Record<LifecycleErrorCode, ExitCode | "provider-status"> = {
  invalid_argument: EXIT_CODES.USAGE,
  // An inventory cursor that is not one the inventory answered (the CLI pages no inventory).
  invalid_cursor: EXIT_CODES.USAGE,
  not_found: EXIT_CODES.NOT_FOUND,
  confirmation_mismatch: EXIT_CODES.STATE_CHANGED,
  // boat.dev did not answer, or its answer was lost or unusable: reconcile, then retry.
  provider_unavailable: EXIT_CODES.PROVIDER_UNAVAILABLE,
  deletion_unconfirmed: EXIT_CODES.PROVIDER_UNAVAILABLE,
  invalid_receipt: EXIT_CODES.PROVIDER_UNAVAILABLE,
  create_in_progress: EXIT_CODES.PROVIDER_UNAVAILABLE,
  // Still reading boat.dev's list once (the name sweep): a retry continues it.
  name_sweep_incomplete: EXIT_CODES.PROVIDER_UNAVAILABLE,
  provider_refused: "provider-status",
  // Refused on purpose, or a person must look first.
  computer_deleting: EXIT_CODES.UNSAFE,
  previous_deletion_finished: EXIT_CODES.UNSAFE,
  bot_busy: EXIT_CODES.UNSAFE,
  recovery_paused: EXIT_CODES.UNSAFE,
  deletion_blocked: EXIT_CODES.UNSAFE,
  name_mismatch: EXIT_CODES.UNSAFE,
  inventory_conflict: EXIT_CODES.UNSAFE,
  cleanup_unconfirmed: EXIT_CODES.UNSAFE,
  cancelled: EXIT_CODES.UNSAFE,
  provision_withdrawn: EXIT_CODES.UNSAFE,
};

/**
 * A code as the CLI shows it (`--json`'s `error.code`, the `[code, exit N]` of a human error line): lower
 * snake_case, the casing of the bot server's HTTP error codes (`WORKSPACE_LOCKED` → `workspace_locked`,
 * `transport_connect_failed` unchanged, `camelCase` → `camel_case`). The packages' own codes keep their casing.
 */
export function toSnakeCode(code: string): string {
  return code.replace(/([a-z0-9])([A-Z])/g, "$1_$2").toLowerCase();
}

/**
 * Maps anything thrown to an exit code and its public code (lower snake_case, `toSnakeCode`). Unknown
 * throwables are failures (1, `cli_failed`).
 */
export function classifyError(error: unknown): { exitCode: ExitCode; code: string } {
  const { exitCode, code } = classifyRaw(error);
  return { exitCode, code: toSnakeCode(code) };
}

/**
 * Every storage fault, decided one by one: a choice of backend the data directory is not bound to is a
 * usage error (like another provider), damaged or newer state needs a person (5), a busy database or an OS
 * refusal is a failure a retry (or freeing space, …) may cure (1).
 */
const STORAGE_EXIT: Record<StorageErrorCode, ExitCode> = {
  STORAGE_BACKEND_MISMATCH: EXIT_CODES.USAGE,
  STORAGE_INVALID_ARGUMENT: EXIT_CODES.USAGE,
  STORAGE_CORRUPT: EXIT_CODES.UNSAFE,
  STORAGE_NEWER: EXIT_CODES.UNSAFE,
  STORAGE_CONSTRAINT: EXIT_CODES.UNSAFE,
  STORAGE_BUSY: EXIT_CODES.FAILURE,
  STORAGE_UNAVAILABLE: EXIT_CODES.FAILURE,
  STORAGE_CLOSED: EXIT_CODES.FAILURE,
  STORAGE_NOT_EMPTY: EXIT_CODES.UNSAFE,
  STORAGE_IN_USE: EXIT_CODES.UNSAFE,
  STORAGE_MIGRATION_FAILED: EXIT_CODES.UNSAFE,
  // The CLI writes unfenced (it has no instance), so it never meets this; a retry is what it asks for.
  STORAGE_FENCED: EXIT_CODES.FAILURE,
};

/** The StorageError behind a journal's or the lifecycle's refusal (their `cause` chain), if any. */
function storageCause(error: unknown): StorageError | undefined {
  let at: unknown = error;
  for (let depth = 0; depth < 8 && typeof at === "object" && at !== null; depth += 1) {
    if (isStorageError(at)) return at;
    at = (at as { cause?: unknown }).cause;
  }
  return undefined;
}

/** The exit code and the error's own code, in the casing of the package that threw it. */
function classifyRaw(error: unknown): { exitCode: ExitCode; code: string } {
  if (isCliError(error)) return { exitCode: error.exitCode, code: error.code };
  // A storage fault, also below a journal's PAUSED refusal or the lifecycle's recovery_paused over it.
  const storage = storageCause(error);
  if (storage !== undefined) return { exitCode: STORAGE_EXIT[storage.code], code: storage.code };
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
  if (isBoatCreateJournalError(error) || isBoatDeleteJournalError(error)) {
    return {
      exitCode:
        error.code === "INVALID_ARGUMENT"
          ? EXIT_CODES.USAGE
          : // Not read just now (EMFILE and the like): a failure a retry may cure, nothing for a person.
            error.detail.startsWith(TRANSIENTLY_UNREADABLE)
            ? EXIT_CODES.FAILURE
            : EXIT_CODES.UNSAFE,
      code: error.code,
    };
  }
  if (isLifecycleError(error)) {
    const mapped = LIFECYCLE_EXIT[error.code] ?? EXIT_CODES.UNSAFE;
    return {
      exitCode: mapped === "provider-status" ? providerStatusExit(error.status) : mapped,
      code: error.code,
    };
  }
  if (isBoatTransportError(error)) return { exitCode: EXIT_CODES.PROVIDER_UNAVAILABLE, code: error.code };
  if (isBoatApiError(error)) return { exitCode: providerStatusExit(error.status), code: String(error.code) };
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
