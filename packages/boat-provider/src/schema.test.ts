import { describe, expect, it } from "vitest";
import { BoatApiError, BoatTransportError, isBoatApiError, isBoatTransportError } from "./errors.js";
import {
  BOAT_ID,
  boatNameSchema,
  deletionOperationSchema,
  errorEnvelopeSchema,
  OPERATION_ID,
  sandboxSchema,
} from "./schema.js";

describe("ids and names", () => {
  it("BOAT_ID accepts bx_ + 8 of the unambiguous alphabet only", () => {
    expect(BOAT_ID.test("bx_23456789")).toBe(true);
    expect(BOAT_ID.test("bx_abcdefgh")).toBe(true);
    for (const bad of [
      "bx_0bcdefgh",
      "bx_1bcdefgh",
      "bx_ibcdefgh",
      "bx_lbcdefgh",
      "bx_obcdefgh",
      "bx_ABCDEFGH",
      "bx_abcdefg",
      "bx_abcdefghj",
      "xx_abcdefgh",
      " bx_abcdefgh",
    ]) {
      expect(BOAT_ID.test(bad), bad).toBe(false);
    }
  });

  it("OPERATION_ID accepts bdop_ + 32 lowercase hex only", () => {
    expect(OPERATION_ID.test(`bdop_${"0a".repeat(16)}`)).toBe(true);
    expect(OPERATION_ID.test(`bdop_${"0A".repeat(16)}`)).toBe(false);
    expect(OPERATION_ID.test(`bdop_${"0".repeat(31)}`)).toBe(false);
    expect(OPERATION_ID.test(`bdop_${"g".repeat(32)}`)).toBe(false);
  });

  it("names are 1–100 characters without CR, LF or NUL", () => {
    expect(boatNameSchema.safeParse("a").success).toBe(true);
    expect(boatNameSchema.safeParse("x".repeat(100)).success).toBe(true);
    expect(boatNameSchema.safeParse("").success).toBe(false);
    expect(boatNameSchema.safeParse("x".repeat(101)).success).toBe(false);
    for (const bad of ["a\rb", "a\nb", "a\0b"]) expect(boatNameSchema.safeParse(bad).success).toBe(false);
  });
});

describe("response schemas", () => {
  const sandbox = {
    id: "bx_abcdefgh",
    name: null,
    state: "running",
    createdAt: "2026-01-01T00:00:00Z",
    ttlSeconds: 60,
  };

  it("tolerate unknown fields but not wrong ones", () => {
    expect(sandboxSchema.parse({ ...sandbox, extra: 1 })).toEqual(sandbox);
    expect(sandboxSchema.safeParse({ ...sandbox, state: "sleeping" }).success).toBe(false);
    expect(sandboxSchema.safeParse({ ...sandbox, createdAt: "yesterday" }).success).toBe(false);
  });

  it("bind a deletion operation to kind sandbox and a Boat target", () => {
    const op = {
      id: `bdop_${"a".repeat(32)}`,
      kind: "sandbox",
      targetId: "bx_abcdefgh",
      status: "pending",
      requestedAt: "2026-01-01T00:00:00Z",
    };
    expect(deletionOperationSchema.safeParse(op).success).toBe(true);
    expect(deletionOperationSchema.safeParse({ ...op, kind: "box" }).success).toBe(false);
    expect(deletionOperationSchema.safeParse({ ...op, targetId: "bx_x" }).success).toBe(false);
    expect(deletionOperationSchema.safeParse({ ...op, status: "failed" }).success).toBe(false);
  });

  it("read the error envelope", () => {
    expect(
      errorEnvelopeSchema.safeParse({
        ok: false,
        error: { code: "gone", message: "m", status: 410 },
        requestId: "r",
      }).success,
    ).toBe(true);
    expect(errorEnvelopeSchema.safeParse({ ok: false, error: { message: "m" } }).success).toBe(false);
  });
});

describe("errors", () => {
  it("derive isRetryable from the status (and the in-progress code for 409)", () => {
    const make = (status: number, code: string) => new BoatApiError({ status, code, message: "m" });
    expect(make(400, "invalid_request").isRetryable).toBe(false);
    expect(make(401, "unauthorized").isRetryable).toBe(false);
    expect(make(404, "not_found").isRetryable).toBe(false);
    expect(make(408, "timeout").isRetryable).toBe(true);
    expect(make(409, "idempotency_in_progress").isRetryable).toBe(true);
    expect(make(409, "idempotency_key_reused").isRetryable).toBe(false);
    expect(make(409, "sandbox_busy").isRetryable).toBe(false);
    expect(make(410, "gone").isRetryable).toBe(false);
    expect(make(429, "rate_limited").isRetryable).toBe(true);
    expect(make(500, "internal_error").isRetryable).toBe(true);
    expect(make(502, "invalid_response").isRetryable).toBe(true);
  });

  it("are recognised by Symbol.for markers, not by class identity", () => {
    const api = new BoatApiError({ status: 404, code: "not_found", message: "m" });
    const transport = new BoatTransportError({ phase: "connect", timedOut: false, request: "GET /x" });
    expect(isBoatApiError(api)).toBe(true);
    expect(isBoatTransportError(api)).toBe(false);
    expect(isBoatTransportError(transport)).toBe(true);
    // A copy from another package instance carries the same registered symbol.
    const foreign = Object.defineProperty(new Error("x"), Symbol.for("@drydock/boat-provider/BoatApiError"), {
      value: true,
    });
    expect(isBoatApiError(foreign)).toBe(true);
    expect(isBoatApiError(new Error("plain"))).toBe(false);
    expect(isBoatApiError(null)).toBe(false);
  });

  it("transport messages say whether anything may have happened", () => {
    const connect = new BoatTransportError({ phase: "connect", timedOut: true, request: "POST /sandboxes" });
    expect(connect).toMatchObject({ status: 503, code: "transport_connect_failed", isRetryable: true });
    expect(connect.message).toMatch(/never sent/);
    const response = new BoatTransportError({
      phase: "response",
      timedOut: false,
      request: "POST /sandboxes",
    });
    expect(response.code).toBe("transport_response_lost");
    expect(response.message).toMatch(/may or may not have taken effect.*same idempotency key/);
    // A lost read changed nothing: it says so, and names no create or key.
    const read = new BoatTransportError({ phase: "response", timedOut: true, request: "GET /sandboxes" });
    expect(read.message).toMatch(/lost \(timed out\)\. A read changes nothing at boat\.dev: retry it/);
    expect(read.message).not.toMatch(/taken effect|idempotency/);
    const deletion = new BoatTransportError({
      phase: "response",
      timedOut: false,
      request: "DELETE /sandboxes/bx_23456789",
    });
    expect(deletion.message).toMatch(/may or may not have taken effect\. Reconcile before acting again\.$/);
  });
});
