import type { BoatCreateJournal } from "@drydock/boat-create-journal";
import { isBoatCreateJournalError } from "@drydock/boat-create-journal";
import type { BoatDeleteJournal } from "@drydock/boat-delete-journal";
import { isBoatDeleteJournalError } from "@drydock/boat-delete-journal";
import type { BoatClient } from "@drydock/boat-provider";
import { isBoatApiError, isBoatTransportError, provesAbsence } from "@drydock/boat-provider";
import type { CrashHook } from "../crash.js";
import { isLifecycleError, LifecycleError } from "../errors.js";
import type { NameSweep } from "./name-sweep.js";

/** The provider calls the lifecycle makes; a `createBoatClient(...)` result satisfies it. */
export type LifecycleClient = Pick<
  BoatClient,
  | "createSandbox"
  | "getSandbox"
  | "renameSandbox"
  | "listAllSandboxes"
  | "listSandboxes"
  | "deleteSandbox"
  | "getDeletionOperation"
>;
/** The create-journal calls the lifecycle makes; an `openBoatCreateJournal(...)` result satisfies it. */
export type LifecycleCreateJournal = Pick<
  BoatCreateJournal,
  | "beginBoatCreate"
  | "rememberCreatedBoat"
  | "resolveBoatCreate"
  | "boatCreateRecoverySnapshot"
  | "boatCreateRowsOf"
  | "adoptResolvedBoat"
  | "retireDeletedBoatCreate"
  | "discardBoatCreate"
>;
/** The delete-journal calls the lifecycle makes; an `openBoatDeleteJournal(...)` result satisfies it. */
export type LifecycleDeleteJournal = Pick<
  BoatDeleteJournal,
  | "prepareBoatDeletion"
  | "prepareBoatDeletionOnce"
  | "restampBoatDeletion"
  | "markBoatDeletionAccepted"
  | "markBoatDeletionBlocked"
  | "boatDeletionSnapshot"
  | "getBoatDeletion"
  | "hasPendingBoatDeletionForBot"
  | "retireBoatDeletion"
>;

/** Structured log lines: ids and outcomes only, never keys, bodies or tokens. */
export interface LifecycleLogger {
  info?(message: string, fields?: Record<string, unknown>): void;
  warn?(message: string, fields?: Record<string, unknown>): void;
}

export type Sleep = (ms: number, signal?: AbortSignal) => Promise<void>;

export interface Context {
  client: LifecycleClient;
  createJournal: LifecycleCreateJournal;
  deleteJournal: LifecycleDeleteJournal;
  environmentId: string;
  now: () => number;
  sleep: Sleep;
  logger: LifecycleLogger;
  onCreateRetry: (info: { botId: string; outcome: string }) => void;
  crash: CrashHook;
  /** The caller's gate before a create POST or a DELETE (`BoatLifecycleOptions.beforeSideEffect`). */
  beforeSideEffect: (effect: { kind: "create"; botId: string } | { kind: "delete"; boxId: string }) => void;
  /** `BoatLifecycleOptions.keysSharedAcrossProcesses`: a minted key is never discarded. */
  keysShared: boolean;
  scopedName(botId: string): string;
  legacyName(botId: string): string;
  /** The one walk of boat.dev's list that the deterministic-name lookup relies on (name-sweep.ts). */
  nameSweep: NameSweep;
}

/** What the name sweep needs of the context (it is built before the context that holds it). */
export type SweepContext = Pick<Context, "client" | "environmentId" | "logger" | "sleep">;

/** setTimeout-based wait that honours an AbortSignal and leaves no timer behind. */
export const realSleep: Sleep = (ms, signal) =>
  new Promise<void>((resolve, reject) => {
    if (signal?.aborted) {
      reject(cancelledError());
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(cancelledError());
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });

export function cancelledError(cause?: unknown): LifecycleError {
  return new LifecycleError({
    code: "cancelled",
    message:
      "The request was cancelled. Anything already sent to boat.dev stays recorded; retry to reconcile it.",
    cause,
  });
}

export function throwIfAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw cancelledError();
}

/**
 * Runs a journal call and turns its refusal into `recovery_paused`, keeping the journal's own message:
 * that message tells the operator what to check ("Check boat.dev for an unnamed Boat …").
 */
export async function journal<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    throw fromJournalError(error);
  }
}

export function fromJournalError(error: unknown): unknown {
  if (isLifecycleError(error)) return error;
  if (isBoatCreateJournalError(error) || isBoatDeleteJournalError(error)) {
    return new LifecycleError({
      code: error.code === "INVALID_ARGUMENT" ? "invalid_argument" : "recovery_paused",
      message: error.message,
      cause: error,
    });
  }
  return error;
}

/** How a provider failure is handled: every branch of the flows switches on this, nothing else. */
export type ProviderFailure =
  /**
   * boat.dev's own 404 `not_found` / 410 `gone` on an immutable id: proof that the Boat (or operation) does
   * not exist. A 404/410 without boat.dev's envelope (a proxy's page) is not proof: it is an `api` failure.
   */
  | { kind: "absent"; status: number; message: string }
  /** boat.dev answered with an error (or an answer the client could not accept: status 502). */
  | {
      kind: "api";
      status: number;
      code: string;
      message: string;
      retryAfterMs: number | undefined;
    }
  /** No answer. `committed` is false only when the request provably never left. */
  | { kind: "transport"; committed: boolean; aborted: boolean; message: string };

/** Classifies a thrown provider error; anything that is not one is rethrown unchanged (a bug). */
export function classifyProviderError(error: unknown): ProviderFailure {
  if (isBoatTransportError(error)) {
    return {
      kind: "transport",
      committed: error.phase !== "connect",
      aborted: error.aborted,
      message: error.message,
    };
  }
  if (isBoatApiError(error)) {
    if (provesAbsence(error)) return { kind: "absent", status: error.status, message: error.message };
    const missing = error.status === 404 || error.status === 410;
    return {
      kind: "api",
      // Proof of absence only comes from boat.dev itself: a 404/410 without its envelope (the client's
      // `http_error`, e.g. a proxy's page) proves nothing, so it counts as a bad gateway answer (unknown).
      status: missing ? 502 : error.status,
      code: String(error.code),
      message: error.message,
      retryAfterMs: error.retryAfterMs,
    };
  }
  throw error;
}

/** The generic mapping for a provider failure of a read or rename: 4xx refused, 5xx/none unavailable. */
export function providerError(what: string, failure: ProviderFailure, boxId?: string): LifecycleError {
  const base = {
    ...(boxId === undefined ? {} : { boxId }),
    ...(failure.kind === "api" && failure.retryAfterMs !== undefined
      ? { retryAfterMs: failure.retryAfterMs }
      : {}),
  };
  switch (failure.kind) {
    case "transport":
      if (failure.aborted) return cancelledError();
      return new LifecycleError({
        ...base,
        code: "provider_unavailable",
        status: 503,
        message: `${what}: boat.dev did not answer (${failure.message}) — retry in a moment`,
      });
    case "absent":
      return new LifecycleError({
        ...base,
        code: "not_found",
        message: `${what}: boat.dev has no such cloud computer`,
      });
    case "api":
      if (failure.status >= 500) {
        return new LifecycleError({
          ...base,
          code: "provider_unavailable",
          status: 502,
          message: `${what}: ${failure.message}`,
        });
      }
      return new LifecycleError({
        ...base,
        code: "provider_refused",
        status: failure.status,
        message: `${what}: ${failure.message}`,
      });
  }
}

export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
