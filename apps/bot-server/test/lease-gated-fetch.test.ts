/**
 * The lease gate at the socket write (leaseGatedFetch), over real loopback sockets: a create POST taken by
 * undici while the gate was open, and written only after it closed, never reaches the server, and the
 * boat.dev client reports it as proven not sent with the gate's words; reads are never gated.
 */
import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { createBoatClient, isBoatTransportError, SendRefusedError } from "@drydock/boat-provider";
import { afterEach, describe, expect, it } from "vitest";
import { leaseGatedFetch } from "../src/lease-gated-fetch.js";

interface Upstream {
  url: string;
  /** Every request the server received, as `METHOD /path`. */
  seen: string[];
  /** Answers the held request (GET /hold). */
  release(): void;
  held: Promise<void>;
  close(): Promise<void>;
}

const SANDBOX = {
  sandbox: {
    id: "bx_0123456789abcdef",
    name: "bot-1",
    state: "running",
    createdAt: "2026-12-04T00:00:00.000Z",
  },
};

async function upstream(): Promise<Upstream> {
  const seen: string[] = [];
  let release: () => void = () => {};
  let heldNow: () => void = () => {};
  const held = new Promise<void>((resolve) => {
    heldNow = resolve;
  });
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    seen.push(`${req.method} ${req.url}`);
    req.resume();
    const answer = () => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(SANDBOX));
    };
    if (req.url === "/hold") {
      release = answer;
      heldNow();
    } else answer();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    release: () => release(),
    held,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A lease whose gate the test opens and closes; counts the gates bound (one per gated dispatch). */
function fakeLease() {
  const state = { open: true, bound: 0 };
  return {
    state,
    lease: {
      boundGate() {
        state.bound += 1;
        return () => {
          if (!state.open) throw new Error("this server's instance lease has passed (test)");
        };
      },
    },
  };
}

let cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const step of cleanup.reverse()) await step();
  cleanup = [];
});

describe("leaseGatedFetch: the lease checked again as the request is written", () => {
  it("a create POST dispatched with the gate open but written after it closed is never sent: the client says not sent, in the gate's words", async () => {
    const up = await upstream();
    const { state, lease } = fakeLease();
    // One connection: the POST waits behind a held GET, as a request waits out a pause or a slow connect.
    const gated = leaseGatedFetch(lease, { connections: 1, pipelining: 1 });
    cleanup.push(gated.close, up.close);
    const client = createBoatClient({ baseUrl: `${up.url}/api/v1`, token: "t", fetch: gated.fetch });

    const hold = gated.fetch(`${up.url}/hold`, { method: "GET" });
    await up.held;
    const create = client.createSandbox({ ttlSeconds: 3600, noEnv: true }, { idempotencyKey: randomUUID() });
    const outcome = create.then(
      () => null,
      (error: unknown) => error,
    );
    // undici took the POST (its gate is bound at dispatch) while the gate was open; then the gate closes.
    for (let i = 0; i < 100 && state.bound === 0; i++) await new Promise((r) => setTimeout(r, 5));
    expect(state.bound).toBe(1);
    state.open = false;
    up.release();
    await (await hold).text();

    const error = await outcome;
    expect(isBoatTransportError(error)).toBe(true);
    expect(error).toMatchObject({
      phase: "connect",
      code: "transport_connect_failed",
      message: expect.stringContaining("this server's instance lease has passed (test)"),
    });
    let cause: unknown = error;
    while (cause instanceof Error && !(cause instanceof SendRefusedError)) cause = cause.cause;
    expect(cause).toBeInstanceOf(SendRefusedError);
    expect(up.seen).toEqual(["GET /hold"]);
  });

  it("the gate open: the POST and a DELETE go out; reads are never gated, not even with the gate closed", async () => {
    const up = await upstream();
    const { state, lease } = fakeLease();
    const gated = leaseGatedFetch(lease);
    cleanup.push(gated.close, up.close);
    const post = await gated.fetch(`${up.url}/api/v1/sandboxes`, { method: "POST", body: "{}" });
    expect(post.status).toBe(200);
    await post.text();
    const del = await gated.fetch(`${up.url}/api/v1/sandboxes/bx_1`, { method: "DELETE" });
    await del.text();
    expect(state.bound).toBe(2);
    state.open = false;
    const read = await gated.fetch(`${up.url}/api/v1/sandboxes`, { method: "GET" });
    expect(read.status).toBe(200);
    await read.text();
    expect(state.bound).toBe(2);
    await expect(gated.fetch(`${up.url}/api/v1/sandboxes/bx_1`, { method: "DELETE" })).rejects.toMatchObject({
      cause: expect.any(SendRefusedError),
    });
    expect(up.seen).toEqual([
      "POST /api/v1/sandboxes",
      "DELETE /api/v1/sandboxes/bx_1",
      "GET /api/v1/sandboxes",
    ]);
  });
});
