import { randomUUID } from "node:crypto";
import {
  BOAT_ID,
  BoatApiError,
  createBoatClient,
  isBoatApiError,
  OPERATION_ID,
  parseRetryAfter,
} from "@drydock/boat-provider";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { BODY, type Harness, harness, rejection } from "./helpers.js";

let h: Harness;
afterEach(async () => {
  await h.close();
});

async function apiError(promise: Promise<unknown>): Promise<BoatApiError> {
  const error = await rejection(promise);
  expect(isBoatApiError(error)).toBe(true);
  return error as BoatApiError;
}

describe("create", () => {
  beforeEach(async () => {
    h = await harness();
  });

  it("answers 201 with a fresh unnamed provisioning Boat", async () => {
    const { sandbox, replayed } = await h.client.createSandbox(BODY, { idempotencyKey: randomUUID() });
    expect(replayed).toBe(false);
    expect(sandbox.id).toMatch(BOAT_ID);
    expect(sandbox).toMatchObject({ name: null, state: "provisioning", ttlSeconds: 28_800 });
    expect((await h.stats()).createsCommitted).toBe(1);
  });

  it("replays the same Boat for the same key and body, with Idempotent-Replayed", async () => {
    const key = randomUUID();
    const first = await h.client.createSandbox(BODY, { idempotencyKey: key });
    const again = await h.client.createSandbox({ noEnv: true, ttlSeconds: 28_800 }, { idempotencyKey: key });
    expect(again.replayed).toBe(true);
    expect(again.sandbox.id).toBe(first.sandbox.id);
    expect(await h.stats()).toMatchObject({ createsCommitted: 1, createRequests: 2, live: 1 });
  });

  it("refuses the same key with a different body: 409 idempotency_key_reused", async () => {
    const key = randomUUID();
    await h.client.createSandbox(BODY, { idempotencyKey: key });
    const error = await apiError(
      h.client.createSandbox({ ttlSeconds: 7200, noEnv: true }, { idempotencyKey: key }),
    );
    expect(error).toMatchObject({ status: 409, code: "idempotency_key_reused", isRetryable: false });
    expect(error.requestId).toMatch(/^req_/);
    expect((await h.stats()).createsCommitted).toBe(1);
  });

  it("answers 409 idempotency_in_progress with Retry-After while the first request runs", async () => {
    // Generous: the second request must arrive while the first is held, even on a loaded machine.
    await h.faults([{ action: "delay", method: "POST", path: "^/sandboxes$", ms: 2_500 }]);
    const key = randomUUID();
    const first = h.client.createSandbox(BODY, { idempotencyKey: key });
    // The reservation is made before the delay; wait until the simulator has seen the first request.
    while ((await h.stats()).createRequests < 1) await new Promise((r) => setTimeout(r, 10));
    const error = await apiError(h.client.createSandbox(BODY, { idempotencyKey: key }));
    expect(error).toMatchObject({
      status: 409,
      code: "idempotency_in_progress",
      isRetryable: true,
      retryAfterMs: 1000,
    });
    const created = await first;
    expect(created.replayed).toBe(false);
    expect((await h.stats()).createsCommitted).toBe(1);
  });

  it("answers 400 idempotency_key_required without a key (raw request; the client never sends one)", async () => {
    const response = await fetch(`${h.sim.apiUrl}/sandboxes`, {
      method: "POST",
      headers: { authorization: `Bearer ${h.sim.token}`, "content-type": "application/json" },
      body: JSON.stringify(BODY),
    });
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({
      ok: false,
      error: { code: "idempotency_key_required", status: 400 },
    });
    expect((await h.stats()).createsCommitted).toBe(0);
  });

  it("answers 400 invalid_request for a body that is not { ttlSeconds, noEnv }, and keeps no key", async () => {
    const key = randomUUID();
    const send = (body: string) =>
      fetch(`${h.sim.apiUrl}/sandboxes`, {
        method: "POST",
        headers: { authorization: `Bearer ${h.sim.token}`, "idempotency-key": key },
        body,
      });
    expect((await send("{not json")).status).toBe(400);
    expect((await send(JSON.stringify({ ttlSeconds: -1, noEnv: true }))).status).toBe(400);
    // A key that is not a UUID v4 is refused too, and creates nothing.
    const notUuid = await fetch(`${h.sim.apiUrl}/sandboxes`, {
      method: "POST",
      headers: { authorization: `Bearer ${h.sim.token}`, "idempotency-key": "not-a-uuid" },
      body: JSON.stringify(BODY),
    });
    expect(notUuid.status).toBe(400);
    expect((await h.stats()).createsCommitted).toBe(0);
    // The refused requests did not bind the key: it still creates a Boat.
    const created = await h.client.createSandbox(BODY, { idempotencyKey: key });
    expect(created.replayed).toBe(false);
  });

  it("refuses bad arguments before sending anything (invalid_argument)", async () => {
    const before = await h.stats();
    const notUuid = await apiError(h.client.createSandbox(BODY, { idempotencyKey: "not-a-uuid" }));
    expect(notUuid).toMatchObject({ status: 400, code: "invalid_argument" });
    const badBody = await apiError(
      h.client.createSandbox({ ttlSeconds: 0, noEnv: true }, { idempotencyKey: randomUUID() }),
    );
    expect(badBody.code).toBe("invalid_argument");
    expect((await apiError(h.client.getSandbox("../_sim/stats"))).code).toBe("invalid_argument");
    expect((await apiError(h.client.renameSandbox("bx_abcdefgh", "a\nb"))).code).toBe("invalid_argument");
    expect((await apiError(h.client.getDeletionOperation("bdop_xyz"))).code).toBe("invalid_argument");
    expect((await apiError(h.client.listSandboxes({ limit: 201 }))).code).toBe("invalid_argument");
    expect(await h.stats()).toEqual(before);
  });
});

describe("auth", () => {
  beforeEach(async () => {
    h = await harness();
  });

  it("answers 401 unauthorized for a wrong token, and the message never contains a token", async () => {
    const wrong = createBoatClient({ baseUrl: h.sim.apiUrl, token: "wrong-token-value" });
    const error = await apiError(wrong.getSandbox("bx_abcdefgh"));
    expect(error).toMatchObject({ status: 401, code: "unauthorized", isRetryable: false });
    expect(error.message).not.toContain("wrong-token-value");
    expect(error.message).not.toContain(h.sim.token);
    const noAuth = await fetch(`${h.sim.url}/_sim/stats`);
    expect(noAuth.status).toBe(401);
  });
});

describe("read and rename", () => {
  beforeEach(async () => {
    h = await harness({ provisionMs: 1000, now: () => 1_800_000_000_000 });
  });

  it("reads a Boat (provisioning, then running as the simulator clock moves)", async () => {
    const { sandbox } = await h.client.createSandbox(BODY, { idempotencyKey: randomUUID() });
    expect((await h.client.getSandbox(sandbox.id)).state).toBe("provisioning");
    await h.advance(1000);
    expect(await h.client.getSandbox(sandbox.id)).toMatchObject({ id: sandbox.id, state: "running" });
  });

  it("answers 404 not_found for an unknown Boat", async () => {
    const error = await apiError(h.client.getSandbox("bx_23456789"));
    expect(error).toMatchObject({ status: 404, code: "not_found", isRetryable: false });
  });

  it("renames a Boat and counts it per name", async () => {
    const { sandbox } = await h.client.createSandbox(BODY, { idempotencyKey: randomUUID() });
    const renamed = await h.client.renameSandbox(sandbox.id, "ogb-bot-1");
    expect(renamed).toMatchObject({ id: sandbox.id, name: "ogb-bot-1" });
    expect((await h.client.getSandbox(sandbox.id)).name).toBe("ogb-bot-1");
    expect(await h.stats()).toMatchObject({ live: 1, perName: { "ogb-bot-1": 1 }, unnamed: 0 });
  });

  it("answers 404 when renaming an unknown Boat", async () => {
    const error = await apiError(h.client.renameSandbox("bx_23456789", "x"));
    expect(error).toMatchObject({ status: 404, code: "not_found" });
  });
});

describe("list", () => {
  it("pages with cursors and listAllSandboxes collects every page", async () => {
    h = await harness();
    const ids: string[] = [];
    for (let i = 0; i < 5; i += 1) {
      ids.push((await h.client.createSandbox(BODY, { idempotencyKey: randomUUID() })).sandbox.id);
    }
    const first = await h.client.listSandboxes({ limit: 2 });
    expect(first.sandboxes).toHaveLength(2);
    expect(first.nextCursor).not.toBeNull();
    const second = await h.client.listSandboxes({ limit: 2, cursor: first.nextCursor as string });
    expect(second.sandboxes).toHaveLength(2);
    const all = await h.client.listAllSandboxes({ limit: 2 });
    expect(all.map((s) => s.id).sort()).toEqual([...ids].sort());
    const last = await h.client.listSandboxes({ limit: 200 });
    expect(last.nextCursor).toBeNull();
  });

  it("answers 400 invalid_cursor for a cursor it never handed out", async () => {
    h = await harness();
    const error = await apiError(h.client.listSandboxes({ cursor: "garbage" }));
    expect(error).toMatchObject({ status: 400, code: "invalid_cursor" });
  });

  it("fails with pagination_limit_exceeded when there are more pages than maxPages", async () => {
    h = await harness();
    for (let i = 0; i < 3; i += 1) await h.client.createSandbox(BODY, { idempotencyKey: randomUUID() });
    const error = await apiError(h.client.listAllSandboxes({ limit: 1, maxPages: 2 }));
    expect(error).toMatchObject({ status: 502, code: "pagination_limit_exceeded" });
  });

  it("is eventually consistent: a new Boat is missing and a deleted one still listed for listLagMs", async () => {
    // A frozen wall clock: only /_sim/clock moves simulator time, so the boundary is exact.
    h = await harness({ listLagMs: 5_000, deletionPolls: 1, now: () => 1_800_000_000_000 });
    const { sandbox } = await h.client.createSandbox(BODY, { idempotencyKey: randomUUID() });
    expect((await h.client.listAllSandboxes()).map((s) => s.id)).toEqual([]);
    await h.advance(4_999);
    expect((await h.client.listAllSandboxes()).map((s) => s.id)).toEqual([]);
    await h.advance(1);
    expect((await h.client.listAllSandboxes()).map((s) => s.id)).toEqual([sandbox.id]);
    const op = await h.client.deleteSandbox(sandbox.id);
    expect((await h.client.getDeletionOperation(op.id)).status).toBe("completed");
    // Proven gone by a direct read, yet still listed.
    expect((await apiError(h.client.getSandbox(sandbox.id))).status).toBe(410);
    expect((await h.client.listAllSandboxes()).map((s) => s.id)).toEqual([sandbox.id]);
    await h.advance(5_000);
    expect(await h.client.listAllSandboxes()).toEqual([]);
  });
});

describe("seeding (test-only POST /_sim/sandboxes)", () => {
  it("seeds existing Boats, listed at once in the given order, counted live but not as creates", async () => {
    h = await harness({ listLagMs: 60_000 });
    const response = await h.control("POST", "/_sim/sandboxes", { count: 450, namePrefix: "seed-" });
    expect(response.status).toBe(201);
    const { ids } = (await response.json()) as { ids: string[] };
    expect(ids).toHaveLength(450);
    const named = h.sim.seed({ names: ["first-after", null, "last"] });
    const pages: string[][] = [];
    let cursor: string | undefined;
    do {
      const page = await h.client.listSandboxes({ limit: 200, ...(cursor ? { cursor } : {}) });
      pages.push(page.sandboxes.map((s) => s.id));
      cursor = page.nextCursor ?? undefined;
    } while (cursor !== undefined);
    expect(pages.map((p) => p.length)).toEqual([200, 200, 53]);
    // One call's Boats in its order, despite the list lag of 60 s (two calls' relative order is not defined).
    expect(pages.flat().filter((id) => !named.includes(id))).toEqual(ids);
    expect(pages.flat().filter((id) => named.includes(id))).toEqual(named);
    expect((await h.client.getSandbox(ids[7] as string)).name).toBe("seed-7");
    expect((await h.client.getSandbox(named[1] as string)).name).toBeNull();
    const stats = await h.stats();
    expect(stats).toMatchObject({ live: 453, unnamed: 1, createsCommitted: 0, createRequests: 0 });
    expect(stats.perName["seed-449"]).toBe(1);
  });

  it("refuses a body that is neither { count, namePrefix? } nor { names }, and seeds nothing", async () => {
    h = await harness();
    for (const body of [{}, { count: 0 }, { count: 2, names: ["a"] }, { names: [] }, { names: ["a\nb"] }]) {
      const response = await h.control("POST", "/_sim/sandboxes", body);
      expect(response.status).toBe(400);
      expect(((await response.json()) as { error: { code: string } }).error.code).toBe("invalid_request");
    }
    expect((await h.stats()).live).toBe(0);
  });
});

describe("delete and poll", () => {
  beforeEach(async () => {
    h = await harness({ deletionPolls: 2, goneWindowMs: 60_000 });
  });

  it("accepts a delete with a bound receipt and advances pending → processing → completed", async () => {
    const { sandbox } = await h.client.createSandbox(BODY, { idempotencyKey: randomUUID() });
    const op = await h.client.deleteSandbox(sandbox.id);
    expect(op).toMatchObject({ kind: "sandbox", targetId: sandbox.id, status: "pending" });
    expect(op.id).toMatch(OPERATION_ID);
    // Deleting again while the operation runs returns the same operation; no second deletion starts.
    expect((await h.client.deleteSandbox(sandbox.id)).id).toBe(op.id);
    const p1 = await h.client.getDeletionOperation(op.id, { targetId: sandbox.id });
    expect(p1.status).toBe("processing");
    expect((await h.client.getSandbox(sandbox.id)).id).toBe(sandbox.id);
    const p2 = await h.client.getDeletionOperation(op.id);
    expect(p2).toMatchObject({ status: "completed", stage: "completed" });
    expect(p2.completedAt).toBeDefined();
    expect(await h.stats()).toMatchObject({ deletesAccepted: 1, deleteRequests: 2, live: 0 });
    // Read of a recently deleted Boat → 410 gone, later 404 not_found; delete and rename → 404 (BOAT_DEV_API
    // allows 410 for a read only).
    expect(await apiError(h.client.getSandbox(sandbox.id))).toMatchObject({ status: 410, code: "gone" });
    expect(await apiError(h.client.deleteSandbox(sandbox.id))).toMatchObject({
      status: 404,
      code: "not_found",
    });
    expect(await apiError(h.client.renameSandbox(sandbox.id, "late"))).toMatchObject({
      status: 404,
      code: "not_found",
    });
    await h.advance(60_000);
    expect(await apiError(h.client.getSandbox(sandbox.id))).toMatchObject({ status: 404, code: "not_found" });
  });

  it("finishes an accepted deletion nobody polls once its time is up (the clock moves operations too)", async () => {
    const { sandbox } = await h.client.createSandbox(BODY, { idempotencyKey: randomUUID() });
    const op = await h.client.deleteSandbox(sandbox.id);
    await h.advance(299_000);
    expect((await h.client.getSandbox(sandbox.id)).id).toBe(sandbox.id);
    await h.advance(1_000);
    // Seen without a poll: the Boat is gone, and its operation completed.
    expect(await apiError(h.client.getSandbox(sandbox.id))).toMatchObject({ status: 410, code: "gone" });
    expect((await h.stats()).live).toBe(0);
    expect(await h.client.getDeletionOperation(op.id)).toMatchObject({ status: "completed" });
  });

  it("answers 404 for deleting an unknown Boat and polling an unknown operation", async () => {
    expect(await apiError(h.client.deleteSandbox("bx_23456789"))).toMatchObject({
      status: 404,
      code: "not_found",
    });
    const poll = await apiError(h.client.getDeletionOperation(`bdop_${"0".repeat(32)}`));
    expect(poll).toMatchObject({ status: 404, code: "not_found" });
    expect((await h.stats()).deletesAccepted).toBe(0);
  });

  it("answers 409 confirmation_mismatch when X-Boat-Confirm-Delete differs (raw request)", async () => {
    const { sandbox } = await h.client.createSandbox(BODY, { idempotencyKey: randomUUID() });
    const response = await fetch(`${h.sim.apiUrl}/sandboxes/${sandbox.id}`, {
      method: "DELETE",
      headers: { authorization: `Bearer ${h.sim.token}`, "x-boat-confirm-delete": "bx_23456789" },
    });
    expect(response.status).toBe(409);
    expect(await response.json()).toMatchObject({ error: { code: "confirmation_mismatch" } });
    expect(await h.stats()).toMatchObject({ deletesAccepted: 0, live: 1 });
  });

  it("answers 409 sandbox_busy for a Boat that cannot be deleted now", async () => {
    const { sandbox } = await h.client.createSandbox(BODY, { idempotencyKey: randomUUID() });
    expect((await h.control("PATCH", `/_sim/sandboxes/${sandbox.id}`, { busy: true })).status).toBe(200);
    const error = await apiError(h.client.deleteSandbox(sandbox.id));
    expect(error).toMatchObject({ status: 409, code: "sandbox_busy", isRetryable: false });
    expect(await h.stats()).toMatchObject({ deletesAccepted: 0, live: 1 });
  });

  it("ends a deletion blocked with block-deletion; the Boat stays, a retry starts a new operation", async () => {
    const { sandbox } = await h.client.createSandbox(BODY, { idempotencyKey: randomUUID() });
    await h.faults([{ action: "block-deletion" }]);
    const op = await h.client.deleteSandbox(sandbox.id);
    await h.client.getDeletionOperation(op.id);
    const blocked = await h.client.getDeletionOperation(op.id);
    expect(blocked.status).toBe("blocked");
    expect((await h.client.getDeletionOperation(op.id)).status).toBe("blocked");
    expect((await h.client.getSandbox(sandbox.id)).id).toBe(sandbox.id);
    const retry = await h.client.deleteSandbox(sandbox.id);
    expect(retry.id).not.toBe(op.id);
    await h.client.getDeletionOperation(retry.id);
    expect((await h.client.getDeletionOperation(retry.id)).status).toBe("completed");
    expect(await h.stats()).toMatchObject({ deletesAccepted: 2, live: 0 });
  });
});

describe("rate limiting and 5xx", () => {
  it("answers 429 rate_limited with Retry-After beyond the configured rate", async () => {
    h = await harness({ rateLimit: { limit: 2, windowMs: 10_000 }, now: () => 1_800_000_000_000 });
    await h.client.listSandboxes();
    await h.client.listSandboxes();
    const error = await apiError(h.client.listSandboxes());
    expect(error).toMatchObject({
      status: 429,
      code: "rate_limited",
      isRetryable: true,
      retryAfterMs: 10_000,
    });
    await h.advance(10_000);
    expect((await h.client.listSandboxes()).sandboxes).toEqual([]);
  });

  it("reports a provider 5xx as a retryable BoatApiError", async () => {
    h = await harness();
    await h.faults([{ action: "fail-before", status: 503, code: "service_unavailable" }]);
    const error = await apiError(h.client.listSandboxes());
    expect(error).toMatchObject({ status: 503, code: "service_unavailable", isRetryable: true });
  });
});

describe("malformed requests to the simulator", () => {
  it("answer 4xx envelopes, never crash the server", async () => {
    h = await harness();
    const raw = (method: string, path: string, body?: string) =>
      fetch(`${h.sim.url}${path}`, {
        method,
        headers: { authorization: `Bearer ${h.sim.token}`, "idempotency-key": randomUUID() },
        ...(body === undefined ? {} : { body }),
      });
    expect((await raw("GET", "/api/v1/sandboxes/%E0%A4%A")).status).toBe(404);
    expect((await raw("GET", "/api/v1/nowhere")).status).toBe(404);
    expect((await raw("PUT", "/api/v1/sandboxes")).status).toBe(405);
    expect((await raw("GET", "/api/v1/sandboxes?limit=0")).status).toBe(400);
    expect((await raw("GET", "/api/v1/sandboxes?limit=abc")).status).toBe(400);
    expect((await raw("PATCH", "/api/v1/sandboxes/bx_abcdefgh", "{")).status).toBe(400);
    const tooLarge = await raw("POST", "/api/v1/sandboxes", JSON.stringify({ pad: "x".repeat(70_000) }));
    expect(tooLarge.status).toBe(413);
    expect(await tooLarge.json()).toMatchObject({ ok: false, error: { code: "payload_too_large" } });
    // Still serving, and nothing was created.
    expect(await h.stats()).toMatchObject({ createsCommitted: 0, live: 0 });
  });
});

describe("parseRetryAfter", () => {
  it("reads delta-seconds and HTTP dates, and ignores garbage", () => {
    const now = Date.parse("2026-01-01T00:00:00Z");
    expect(parseRetryAfter("3", now)).toBe(3000);
    expect(parseRetryAfter("Thu, 01 Jan 2026 00:00:05 GMT", now)).toBe(5000);
    expect(parseRetryAfter("Wed, 31 Dec 2025 23:59:00 GMT", now)).toBe(0);
    expect(parseRetryAfter("soon", now)).toBeUndefined();
    expect(parseRetryAfter("-1", now)).toBeUndefined();
    expect(parseRetryAfter(null, now)).toBeUndefined();
  });

  it("fills retryAfterMs from an HTTP date answered by the provider", async () => {
    h = await harness();
    const { rawServer } = await import("./helpers.js");
    const raw = await rawServer((_req, res) => {
      res.writeHead(429, {
        "content-type": "application/json",
        "retry-after": "Thu, 01 Jan 2026 00:00:07 GMT",
      });
      res.end(
        JSON.stringify({
          ok: false,
          error: { code: "rate_limited", message: "slow down", status: 429 },
          requestId: "r1",
        }),
      );
    });
    try {
      const client = createBoatClient({
        baseUrl: raw.url,
        token: "t",
        now: () => Date.parse("2026-01-01T00:00:00Z"),
      });
      const error = await apiError(client.listSandboxes());
      expect(error).toMatchObject({ status: 429, code: "rate_limited", retryAfterMs: 7000, requestId: "r1" });
      expect(error).toBeInstanceOf(BoatApiError);
    } finally {
      await raw.close();
    }
  });
});
