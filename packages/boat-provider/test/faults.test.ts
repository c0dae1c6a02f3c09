import { randomUUID } from "node:crypto";
import {
  type BoatApiError,
  type BoatTransportError,
  isBoatApiError,
  isBoatTransportError,
} from "@drydock/boat-provider";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { BODY, type Harness, harness, rejection } from "./helpers.js";

let h: Harness;
beforeEach(async () => {
  h = await harness({ deletionPolls: 2 }, { timeoutMs: 5_000 });
});
afterEach(async () => {
  await h.close();
});

async function apiError(promise: Promise<unknown>): Promise<BoatApiError> {
  const error = await rejection(promise);
  expect(isBoatApiError(error)).toBe(true);
  return error as BoatApiError;
}
async function transportError(promise: Promise<unknown>): Promise<BoatTransportError> {
  const error = await rejection(promise);
  expect(isBoatTransportError(error)).toBe(true);
  return error as BoatTransportError;
}

const CREATE = { method: "POST", path: "^/sandboxes$" } as const;

describe("create under faults", () => {
  it("fail-before: an error, nothing committed, and the key is released", async () => {
    await h.faults([{ ...CREATE, action: "fail-before", status: 503, code: "service_unavailable" }]);
    const key = randomUUID();
    const error = await apiError(h.client.createSandbox(BODY, { idempotencyKey: key }));
    expect(error).toMatchObject({ status: 503, code: "service_unavailable", isRetryable: true });
    expect((await h.stats()).createsCommitted).toBe(0);
    const retry = await h.client.createSandbox(BODY, { idempotencyKey: key });
    expect(retry.replayed).toBe(false);
    expect(await h.stats()).toMatchObject({ createsCommitted: 1, createRequests: 2 });
  });

  it("fail-after: a 5xx although the Boat exists; the same key replays it", async () => {
    await h.faults([{ ...CREATE, action: "fail-after" }]);
    const key = randomUUID();
    const error = await apiError(h.client.createSandbox(BODY, { idempotencyKey: key }));
    expect(error).toMatchObject({ status: 500, code: "internal_error", isRetryable: true });
    // Said as it is: not a refusal, and it may have taken effect (it did).
    expect(error.message).toMatch(
      /^boat\.dev failed POST \/sandboxes: .*the request may have taken effect\.$/,
    );
    expect((await h.stats()).createsCommitted).toBe(1);
    const retry = await h.client.createSandbox(BODY, { idempotencyKey: key });
    expect(retry.replayed).toBe(true);
    expect(h.sim.sandboxes().map((boat) => boat.id)).toEqual([retry.sandbox.id]);
    expect((await h.stats()).createsCommitted).toBe(1);
  });

  it("drop-after: a lost response (phase response); the same key replays the same Boat", async () => {
    await h.faults([{ ...CREATE, action: "drop-after" }]);
    const key = randomUUID();
    const error = await transportError(h.client.createSandbox(BODY, { idempotencyKey: key }));
    expect(error).toMatchObject({ phase: "response", timedOut: false, code: "transport_response_lost" });
    expect((await h.stats()).createsCommitted).toBe(1);
    const retry = await h.client.createSandbox(BODY, { idempotencyKey: key });
    expect(retry.replayed).toBe(true);
    expect(h.sim.sandboxes().map((boat) => boat.id)).toEqual([retry.sandbox.id]);
    expect((await h.stats()).createsCommitted).toBe(1);
  });

  it("drop-before: also a lost response to the client, but nothing was committed", async () => {
    await h.faults([{ ...CREATE, action: "drop-before" }]);
    const key = randomUUID();
    const error = await transportError(h.client.createSandbox(BODY, { idempotencyKey: key }));
    // The client cannot tell drop-before from drop-after: both are "outcome unknown".
    expect(error.phase).toBe("response");
    expect((await h.stats()).createsCommitted).toBe(0);
    const retry = await h.client.createSandbox(BODY, { idempotencyKey: key });
    expect(retry.replayed).toBe(false);
    expect((await h.stats()).createsCommitted).toBe(1);
  });

  it("delay beyond the client timeout: timed out with outcome unknown; the Boat commits and replays", async () => {
    const slow = await harness({}, { timeoutMs: 800 });
    try {
      // Warm the keep-alive connection so the timeout can only fire after the request was written.
      await slow.client.listSandboxes();
      await slow.faults([{ ...CREATE, action: "delay", ms: 3_000 }]);
      const key = randomUUID();
      const error = await transportError(slow.client.createSandbox(BODY, { idempotencyKey: key }));
      expect(error).toMatchObject({ phase: "response", timedOut: true, aborted: false });
      // While the first request still runs, the key is in progress, not free.
      const busy = await rejection(slow.client.createSandbox(BODY, { idempotencyKey: key }));
      expect(busy).toMatchObject({ code: "idempotency_in_progress", status: 409 });
      for (let i = 0; i < 500 && (await slow.stats()).createsCommitted === 0; i += 1) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect((await slow.stats()).createsCommitted).toBe(1);
      const retry = await slow.client.createSandbox(BODY, { idempotencyKey: key });
      expect(retry.replayed).toBe(true);
      expect((await slow.stats()).createsCommitted).toBe(1);
    } finally {
      await slow.close();
    }
  });

  it("in-progress: 409 idempotency_in_progress with Retry-After for `times` requests, then the create runs", async () => {
    await h.faults([{ ...CREATE, action: "in-progress", times: 2, retryAfterS: 2 }]);
    const key = randomUUID();
    for (let i = 0; i < 2; i += 1) {
      const error = await apiError(h.client.createSandbox(BODY, { idempotencyKey: key }));
      expect(error).toMatchObject({
        status: 409,
        code: "idempotency_in_progress",
        retryAfterMs: 2000,
        isRetryable: true,
      });
    }
    expect((await h.stats()).createsCommitted).toBe(0);
    expect((await h.client.createSandbox(BODY, { idempotencyKey: key })).replayed).toBe(false);
    expect((await h.stats()).createsCommitted).toBe(1);
  });

  it("rate-limit: 429 rate_limited with Retry-After, nothing committed", async () => {
    await h.faults([{ ...CREATE, action: "rate-limit", retryAfterS: 7 }]);
    const error = await apiError(h.client.createSandbox(BODY, { idempotencyKey: randomUUID() }));
    expect(error).toMatchObject({ status: 429, code: "rate_limited", retryAfterMs: 7000, isRetryable: true });
    expect((await h.stats()).createsCommitted).toBe(0);
  });
});

describe("delete under faults", () => {
  it("drop-after on DELETE: outcome unknown, one deletion started; a second DELETE returns the same operation", async () => {
    const { sandbox } = await h.client.createSandbox(BODY, { idempotencyKey: randomUUID() });
    await h.faults([{ method: "DELETE", action: "drop-after" }]);
    const error = await transportError(h.client.deleteSandbox(sandbox.id));
    expect(error.phase).toBe("response");
    expect((await h.stats()).deletesAccepted).toBe(1);
    const op = await h.client.deleteSandbox(sandbox.id);
    expect(op.targetId).toBe(sandbox.id);
    expect(await h.stats()).toMatchObject({ deletesAccepted: 1, deleteRequests: 2 });
  });

  it("fail-after on DELETE: a 5xx although the deletion started", async () => {
    const { sandbox } = await h.client.createSandbox(BODY, { idempotencyKey: randomUUID() });
    await h.faults([{ method: "DELETE", action: "fail-after", status: 502, code: "bad_gateway" }]);
    const error = await apiError(h.client.deleteSandbox(sandbox.id));
    expect(error).toMatchObject({ status: 502, code: "bad_gateway" });
    expect((await h.stats()).deletesAccepted).toBe(1);
  });

  it("block-deletion: the next deletion operation ends blocked and the Boat stays live", async () => {
    const { sandbox } = await h.client.createSandbox(BODY, { idempotencyKey: randomUUID() });
    await h.faults([{ action: "block-deletion" }]);
    const op = await h.client.deleteSandbox(sandbox.id);
    expect(op.status).toBe("pending");
    await h.client.getDeletionOperation(op.id);
    expect((await h.client.getDeletionOperation(op.id)).status).toBe("blocked");
    expect((await h.stats()).live).toBe(1);
  });

  it("drop-after on a poll: lost answer, but the poll still advanced the operation", async () => {
    const { sandbox } = await h.client.createSandbox(BODY, { idempotencyKey: randomUUID() });
    const op = await h.client.deleteSandbox(sandbox.id);
    await h.faults([{ method: "GET", path: "^/deletion-operations/", action: "drop-after" }]);
    expect((await transportError(h.client.getDeletionOperation(op.id))).phase).toBe("response");
    expect((await h.client.getDeletionOperation(op.id)).status).toBe("completed");
  });
});

describe("fault rules", () => {
  it("match by method and path regex, apply `times` times, and DELETE /_sim/faults clears them", async () => {
    await h.faults([{ method: "GET", path: "^/sandboxes$", action: "fail-before", status: 500, times: 2 }]);
    // Another route is untouched.
    await h.client.createSandbox(BODY, { idempotencyKey: randomUUID() });
    expect((await apiError(h.client.listSandboxes())).status).toBe(500);
    expect((await apiError(h.client.listSandboxes())).status).toBe(500);
    expect((await h.client.listSandboxes()).sandboxes).toHaveLength(1);
    await h.faults([{ action: "fail-before", status: 500, times: 5 }]);
    await h.clearFaults();
    expect((await h.client.listSandboxes()).sandboxes).toHaveLength(1);
  });

  it("refuses invalid rules with 400 and applies none of them", async () => {
    const bad = await h.control("POST", "/_sim/faults", { rules: [{ action: "explode" }] });
    expect(bad.status).toBe(400);
    const badRegex = await h.control("POST", "/_sim/faults", { rules: [{ action: "delay", path: "(" }] });
    expect(badRegex.status).toBe(400);
    // boat.dev's own 4xx after a committed change would read as proof that nothing happened: refused.
    const committedThen404 = await h.control("POST", "/_sim/faults", {
      rules: [
        { action: "fail-before", status: 500 },
        { action: "fail-after", status: 404, code: "not_found" },
      ],
    });
    expect(committedThen404.status).toBe(400);
    // Neither rule of that batch applies: the next create succeeds.
    await h.client.createSandbox(BODY, { idempotencyKey: randomUUID() });
    expect((await h.client.listSandboxes()).sandboxes).toHaveLength(1);
  });
});
