import { isBoatCreateJournalError } from "@drydock/boat-create-journal";
import { isBoatDeleteJournalError } from "@drydock/boat-delete-journal";
import { isBotRegistryError, isWorkspaceError, StorageError } from "@drydock/storage";

/** A URL with its password replaced by `***`: the only form of a URL this package ever prints. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password !== "") parsed.password = "***";
    return parsed.toString();
  } catch {
    // Not a URL we can parse: hide anything between "://" and "@" (credentials).
    return url.replace(/\/\/[^@/]*@/, "//***@");
  }
}

/** Removes every URL's password from a message (pg repeats connection strings in some errors). */
export function redactText(text: string): string {
  return text.replace(/(postgres(?:ql)?:\/\/[^:/@\s]*:)[^@\s]*@/g, "$1***@");
}

/** SQLSTATEs of a connection that ended or never began; the same call may work once the server is back. */
const CONNECTION_STATES: Record<string, string> = {
  "57P01": "the server is shutting down (admin shutdown) or an administrator terminated the connection",
  "57P02": "the server crashed (crash shutdown)",
  "57P03": "the server is starting up or recovering and does not accept connections yet",
  "53300": "the server has too many connections",
  "08000": "the connection failed",
  "08003": "the connection does not exist",
  "08006": "the connection failed",
  "08001": "the client could not establish a connection",
  "08004": "the server rejected the connection",
};

/** Node's socket errors while reaching the server. */
const SOCKET_ERRNOS: Record<string, string> = {
  ECONNREFUSED: "the server refused the connection (is PostgreSQL running and listening there?)",
  ECONNRESET: "the connection was reset",
  EPIPE: "the connection was closed while drydock was writing to it",
  ETIMEDOUT: "the connection timed out",
  EHOSTUNREACH: "the server's host is unreachable",
  ENETUNREACH: "the server's network is unreachable",
  ENOTFOUND: "the server's host name does not resolve",
  EAI_AGAIN: "the server's host name could not be resolved right now",
};

/** True when `error` says the connection itself failed (so a transaction on it may or may not have committed). */
export function isConnectionFailure(error: unknown): boolean {
  if (error instanceof StorageError) return error.code === "STORAGE_UNAVAILABLE" && error.retryable;
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === "string" && (code in CONNECTION_STATES || code in SOCKET_ERRNOS)) return true;
  const message = String((error as { message?: unknown } | null)?.message ?? "");
  return /Connection terminated|connection timeout|Client has encountered a connection error|Connection ended|not queryable|Query read timeout|timeout expired/i.test(
    message,
  );
}

/** True for a transaction the server aborted to keep it serializable (retry it from the start). */
export function isSerializationFailure(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === "40001" || code === "40P01";
}

function unavailable(where: string, what: string, retryable: boolean, errno: string, cause: unknown) {
  return new StorageError({
    code: "STORAGE_UNAVAILABLE",
    errno,
    retryable,
    message: `drydock could not use ${where} because ${what} (${errno}). Nothing was changed. ${
      retryable
        ? "Retry once the server is reachable; the stored state is intact."
        : "Fix the cause, then retry; the stored state is intact."
    }`,
    cause,
  });
}

/**
 * pg's and the socket's failures as StorageErrors. `where` names the database (its URL, redacted). A
 * journal's, the registry's or a workspace's own refusal is an answer, never a fault, and passes through.
 */
export function toStorageError(error: unknown, where: string, lockTimeoutMs: number): unknown {
  if (error instanceof StorageError) return error;
  if (
    isBoatCreateJournalError(error) ||
    isBoatDeleteJournalError(error) ||
    isBotRegistryError(error) ||
    isWorkspaceError(error)
  ) {
    return error;
  }
  const code = (error as { code?: unknown } | null)?.code;
  const detail = redactText(String((error as { message?: unknown } | null)?.message ?? error));
  if (typeof code === "string") {
    const connection = CONNECTION_STATES[code] ?? SOCKET_ERRNOS[code];
    if (connection !== undefined) return unavailable(where, `${connection}: ${detail}`, true, code, error);
    if (code === "53100") {
      return unavailable(where, "the database server's disk is full (53100)", true, "ENOSPC", error);
    }
    if (code === "53200")
      return unavailable(where, "the database server is out of memory", true, code, error);
    if (code === "25006") {
      return unavailable(
        where,
        "the server accepts only reads (a standby, or default_transaction_read_only)",
        false,
        code,
        error,
      );
    }
    if (code === "28P01" || code === "28000") {
      return unavailable(where, `the server refused the credentials: ${detail}`, false, code, error);
    }
    if (code === "3D000")
      return unavailable(where, `the database does not exist: ${detail}`, false, code, error);
    if (code === "42501") {
      return unavailable(where, `the database user lacks a privilege: ${detail}`, false, code, error);
    }
    if (code === "40001" || code === "40P01" || code === "55P03") {
      return new StorageError({
        code: "STORAGE_BUSY",
        errno: code,
        retryable: true,
        message: `${where} was busy (another drydock process held the journal, ${code}) for longer than ${lockTimeoutMs} ms or kept conflicting. Nothing was changed. Retry in a moment.`,
        cause: error,
      });
    }
    if (code.startsWith("23")) {
      return new StorageError({
        code: "STORAGE_CONSTRAINT",
        errno: code,
        message: `${where} refused a write that would break a journal invariant (${code}: ${detail}). Nothing was changed. This is a bug in drydock: report it with this message.`,
        cause: error,
      });
    }
  }
  if (isConnectionFailure(error)) {
    return unavailable(where, `the connection to the server failed: ${detail}`, true, "ECONNRESET", error);
  }
  return error;
}
