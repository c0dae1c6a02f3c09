import { describe, expect, it } from "vitest";
import {
  DELETE_POLL_SCHEDULE_MS,
  freshBudget,
  IN_PROGRESS_BACKOFF_MS,
  isDefinitiveRefusal,
  nextCreateRetry,
} from "./retry.js";

describe("create retry policy", () => {
  it("waits 250/750/1500 ms for idempotency_in_progress, then gives up (4 POSTs at most)", () => {
    const budget = freshBudget();
    const waits: number[] = [];
    for (;;) {
      const decision = nextCreateRetry({ kind: "in-progress" }, budget);
      if (!decision.retry) break;
      waits.push(decision.waitMs);
    }
    expect(waits).toEqual([250, 750, 1500]);
    expect(IN_PROGRESS_BACKOFF_MS).toEqual([250, 750, 1500]);
  });

  it("honours a Retry-After larger than the step, never a smaller one", () => {
    const budget = freshBudget();
    expect(nextCreateRetry({ kind: "in-progress", retryAfterMs: 2_000 }, budget)).toEqual({
      retry: true,
      waitMs: 2_000,
    });
    expect(nextCreateRetry({ kind: "in-progress", retryAfterMs: 10 }, budget)).toEqual({
      retry: true,
      waitMs: 750,
    });
  });

  it("does not wait inside one call for a Retry-After beyond 30 s", () => {
    expect(nextCreateRetry({ kind: "in-progress", retryAfterMs: 120_000 }, freshBudget())).toEqual({
      retry: false,
    });
  });

  it("lost responses and 5xx share ONE ambiguous retry", () => {
    const budget = freshBudget();
    expect(nextCreateRetry({ kind: "transport" }, budget).retry).toBe(true);
    expect(nextCreateRetry({ kind: "server-error", status: 503 }, budget).retry).toBe(false);
    const other = freshBudget();
    expect(nextCreateRetry({ kind: "server-error", status: 500 }, other).retry).toBe(true);
    expect(nextCreateRetry({ kind: "transport" }, other).retry).toBe(false);
  });

  it("waits a 5xx's Retry-After before the ambiguous retry, and not at all beyond 30 s", () => {
    expect(
      nextCreateRetry({ kind: "server-error", status: 503, retryAfterMs: 2_000 }, freshBudget()),
    ).toEqual({
      retry: true,
      waitMs: 2_000,
    });
    const budget = freshBudget();
    expect(nextCreateRetry({ kind: "server-error", status: 503, retryAfterMs: 3_600_000 }, budget)).toEqual({
      retry: false,
    });
    // The budget was not spent on a retry that was not made.
    expect(budget.ambiguousLeft).toBe(1);
  });

  it("never retries a refusal", () => {
    expect(nextCreateRetry({ kind: "refused", status: 400, code: "invalid_request" }, freshBudget())).toEqual(
      {
        retry: false,
      },
    );
  });

  it("retries a 429 once after Retry-After", () => {
    const budget = freshBudget();
    expect(nextCreateRetry({ kind: "rate-limited", retryAfterMs: 1_000 }, budget)).toEqual({
      retry: true,
      waitMs: 1_000,
    });
    expect(nextCreateRetry({ kind: "rate-limited", retryAfterMs: 1_000 }, budget).retry).toBe(false);
  });

  it("only statuses that prove a refusal of the request itself may discard the key", () => {
    for (const status of [400, 404, 413, 422]) expect(isDefinitiveRefusal(status)).toBe(true);
    for (const status of [401, 403, 408, 409, 429, 500, 502, 503, 200])
      expect(isDefinitiveRefusal(status)).toBe(false);
  });

  it("polls deletions at 0, 100, 250, 500, 1000 and 2000 ms", () => {
    expect(DELETE_POLL_SCHEDULE_MS).toEqual([0, 100, 250, 500, 1000, 2000]);
  });
});
