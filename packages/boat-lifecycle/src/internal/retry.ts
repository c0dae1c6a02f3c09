import { DEFAULT_TIMEOUT_MS } from "@drydock/boat-provider";

/**
 * Retry policy of one create call, as pure data and a pure decision function so it can be tested
 * without a provider. Every retry reuses the journaled idempotency key: a retry with a fresh key could
 * bill a second Boat.
 */

/** Waits before the 2nd, 3rd and 4th POST while boat.dev answers `409 idempotency_in_progress`. */
export const IN_PROGRESS_BACKOFF_MS = [250, 750, 1_500] as const;
/**
 * One retry for an ambiguous outcome (lost response, timeout, 5xx, ok without an id). Lost responses and
 * 5xx share it: two ambiguous answers in a row mean boat.dev is unwell, and the key is kept for later. A
 * 5xx's Retry-After is waited first (up to MAX_RETRY_AFTER_MS).
 */
export const AMBIGUOUS_RETRIES = 1;
/** One retry after a 429, waiting Retry-After (at least the first backoff step). */
export const RATE_LIMIT_RETRIES = 1;
/** A Retry-After beyond this is not waited for inside one call: the caller gets the answer instead. */
export const MAX_RETRY_AFTER_MS = 30_000;
/**
 * How long a prepared deletion fence counts as another caller's DELETE still on the wire: the provider
 * client's request timeout (`DEFAULT_TIMEOUT_MS`, 10 s, which the lifecycle's clients use) plus a margin
 * of 20 s for journaling the receipt (a slow disk, a GC pause) and clock steps. While a prepared fence's
 * `updatedAt` is younger than this (or in the future), no caller re-sends DELETE under it: the answer is
 * "deletion in progress". Only after it may an explicit retry (Delete again, provisioning) re-send.
 * A client built with a longer `timeoutMs` than the default widens the real window beyond this one.
 */
export const DELETE_IN_FLIGHT_MARGIN_MS = 20_000;
export const DELETE_IN_FLIGHT_MS = DEFAULT_TIMEOUT_MS + DELETE_IN_FLIGHT_MARGIN_MS;

/** Delays before each deletion-operation poll after DELETE was accepted. */
export const DELETE_POLL_SCHEDULE_MS = [0, 100, 250, 500, 1_000, 2_000] as const;

export type CreateOutcome =
  | { kind: "transport" }
  | { kind: "server-error"; status: number; retryAfterMs?: number }
  | { kind: "in-progress"; retryAfterMs?: number }
  | { kind: "rate-limited"; retryAfterMs?: number }
  | { kind: "refused"; status: number; code: string };

export interface RetryBudget {
  ambiguousLeft: number;
  inProgressStep: number;
  rateLimitLeft: number;
}

export function freshBudget(): RetryBudget {
  return { ambiguousLeft: AMBIGUOUS_RETRIES, inProgressStep: 0, rateLimitLeft: RATE_LIMIT_RETRIES };
}

export type RetryDecision = { retry: true; waitMs: number } | { retry: false };

/** Decides whether to POST again with the same key, consuming the budget. */
export function nextCreateRetry(outcome: CreateOutcome, budget: RetryBudget): RetryDecision {
  switch (outcome.kind) {
    case "transport":
    case "server-error": {
      // A 5xx's Retry-After is honoured like a 429's: waited when short, otherwise handed to the caller.
      const waitMs = outcome.kind === "server-error" ? (outcome.retryAfterMs ?? 0) : 0;
      if (budget.ambiguousLeft <= 0 || waitMs > MAX_RETRY_AFTER_MS) return { retry: false };
      budget.ambiguousLeft -= 1;
      return { retry: true, waitMs };
    }
    case "in-progress": {
      const step = IN_PROGRESS_BACKOFF_MS[budget.inProgressStep];
      if (step === undefined) return { retry: false };
      const waitMs = Math.max(step, outcome.retryAfterMs ?? 0);
      if (waitMs > MAX_RETRY_AFTER_MS) return { retry: false };
      budget.inProgressStep += 1;
      return { retry: true, waitMs };
    }
    case "rate-limited": {
      if (budget.rateLimitLeft <= 0) return { retry: false };
      const waitMs = Math.max(IN_PROGRESS_BACKOFF_MS[0], outcome.retryAfterMs ?? 0);
      if (waitMs > MAX_RETRY_AFTER_MS) return { retry: false };
      budget.rateLimitLeft -= 1;
      return { retry: true, waitMs };
    }
    case "refused":
      return { retry: false };
  }
}

/**
 * Statuses that prove boat.dev refused the request itself, so nothing was created under the key — but
 * only if no earlier attempt with the same key had an ambiguous outcome, and an earlier call's attempts are
 * unknown: a key resumed from an earlier call or process is never discarded on a refusal. 401/403 are answered before the
 * key is looked at, 408 is a timeout, 409 concerns the key itself and 429 is answered before processing:
 * none of them proves an earlier attempt created nothing, so they keep the key.
 */
export function isDefinitiveRefusal(status: number): boolean {
  return status >= 400 && status < 500 && ![401, 403, 408, 409, 425, 429].includes(status);
}
