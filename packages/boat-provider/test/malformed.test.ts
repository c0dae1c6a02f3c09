import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { createServer } from "node:net";
import {
  type BoatApiError,
  type BoatClient,
  createBoatClient,
  isBoatApiError,
  isBoatTransportError,
  provesAbsence,
} from "@drydock/boat-provider";
import { afterEach, describe, expect, it } from "vitest";
import { BODY, OPERATION, type RawServer, rawServer, rejection, SANDBOX } from "./helpers.js";

const TOKEN = "secret-token-never-in-messages";
let raw: RawServer | undefined;
afterEach(async () => {
  await raw?.close();
  raw = undefined;
});

function json(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(text),
    ...headers,
  });
  res.end(text);
}

async function serve(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<BoatClient> {
  raw = await rawServer(handler);
  return createBoatClient({ baseUrl: raw.url, token: TOKEN, timeoutMs: 3_000 });
}

/** Every failure is typed, and no message leaks the token. */
async function typed(promise: Promise<unknown>): Promise<unknown> {
  const error = await rejection(promise);
  expect(isBoatApiError(error) || isBoatTransportError(error)).toBe(true);
  expect((error as Error).message).not.toContain(TOKEN);
  return error;
}

async function invalid(promise: Promise<unknown>, reason?: RegExp): Promise<BoatApiError> {
  const error = (await typed(promise)) as BoatApiError;
  expect(error).toMatchObject({ code: "invalid_response", status: 502 });
  if (reason) expect(String(error.details.reason)).toMatch(reason);
  return error;
}

describe("malformed answers are invalid_response", () => {
  it("a sandbox whose id differs from the one asked for", async () => {
    const client = await serve((_req, res) =>
      json(res, 200, { ok: true, sandbox: { ...SANDBOX, id: "bx_zzzzzzzz" } }),
    );
    await invalid(client.getSandbox("bx_abcdefgh"), /differs/);
  });

  it("an id outside the Boat id format", async () => {
    const client = await serve((_req, res) =>
      json(res, 200, { ok: true, sandbox: { ...SANDBOX, id: "bx_0000000O" } }),
    );
    await invalid(client.getSandbox("bx_abcdefgh"), /wrong shape/);
  });

  it("a sandbox with missing fields", async () => {
    const { state: _state, ...partial } = SANDBOX;
    const client = await serve((_req, res) => json(res, 200, { ok: true, sandbox: partial }));
    await invalid(client.getSandbox("bx_abcdefgh"), /state/);
  });

  it("a success that is not JSON", async () => {
    const client = await serve((_req, res) => {
      res.writeHead(200, { "content-type": "text/html" });
      res.end("<html>hello</html>");
    });
    await invalid(client.listSandboxes(), /not JSON/);
  });

  it("a truncated JSON body with an honest Content-Length", async () => {
    const client = await serve((_req, res) => {
      res.writeHead(201, { "content-type": "application/json", "content-length": "20" });
      res.end('{"ok":true,"type":"s');
    });
    await invalid(client.createSandbox(BODY, { idempotencyKey: randomUUID() }), /not JSON/);
  });

  it("a success without ok: true, and an error envelope with a 2xx status", async () => {
    const client = await serve((req, res) => {
      if (req.url?.includes("bx_abcdefgh")) json(res, 200, { sandbox: SANDBOX });
      else json(res, 200, { ok: false, error: { code: "x", message: "y", status: 500 }, requestId: "r" });
    });
    await invalid(client.getSandbox("bx_abcdefgh"));
    await invalid(client.listSandboxes(), /error envelope/);
  });

  it("an error envelope whose own status differs from the answer's: a 404 saying 500 never proves absence", async () => {
    const client = await serve((req, res) => {
      if (req.url?.includes("bx_abcdefgh"))
        json(res, 404, {
          ok: false,
          error: { code: "not_found", message: "gone", status: 500 },
          requestId: "r",
        });
      else
        json(res, 404, {
          ok: false,
          error: { code: "not_found", message: "gone", status: 404 },
          requestId: "r",
        });
    });
    const contradictory = await invalid(client.getSandbox("bx_abcdefgh"), /saying HTTP 500 in an HTTP 404/);
    expect(provesAbsence(contradictory)).toBe(false);
    // The consistent one is the plain not_found it always was.
    const plain = await typed(client.getSandbox("bx_bcdefghj"));
    expect(plain).toMatchObject({ status: 404, code: "not_found" });
    expect(provesAbsence(plain)).toBe(true);
  });

  it("a client without a baseUrl is refused as an argument, before anything is sent", () => {
    for (const baseUrl of [undefined, 5, "", "ftp://x"]) {
      expect(() => createBoatClient({ baseUrl: baseUrl as never, token: "t" })).toThrow(
        expect.objectContaining({ code: "invalid_argument" }),
      );
    }
  });

  it("a create answered with the wrong type", async () => {
    const client = await serve((_req, res) =>
      json(res, 201, { ok: true, type: "box.created", sandbox: SANDBOX }),
    );
    await invalid(client.createSandbox(BODY, { idempotencyKey: randomUUID() }));
  });

  it("a rename answered without the new name", async () => {
    const client = await serve((_req, res) =>
      json(res, 200, { ok: true, sandbox: { ...SANDBOX, name: "other" } }),
    );
    await invalid(client.renameSandbox("bx_abcdefgh", "wanted"), /new name/);
  });

  it("a deletion receipt of the wrong kind", async () => {
    const client = await serve((_req, res) =>
      json(res, 202, { ok: true, type: "deletion.operation", operation: { ...OPERATION, kind: "box" } }),
    );
    await invalid(client.deleteSandbox("bx_abcdefgh"));
  });

  it("a deletion receipt bound to another Boat", async () => {
    const client = await serve((_req, res) =>
      json(res, 202, {
        ok: true,
        type: "deletion.operation",
        operation: { ...OPERATION, targetId: "bx_zzzzzzzz" },
      }),
    );
    await invalid(client.deleteSandbox("bx_abcdefgh"), /another Boat/);
  });

  it("a receipt with an unknown status or a malformed operation id", async () => {
    const client = await serve((req, res) =>
      json(res, 202, {
        ok: true,
        type: "deletion.operation",
        operation: req.url?.includes("bx_abcdefgh")
          ? { ...OPERATION, status: "done" }
          : { ...OPERATION, targetId: "bx_bcdefghj", id: "bdop_XYZ" },
      }),
    );
    await invalid(client.deleteSandbox("bx_abcdefgh"));
    await invalid(client.deleteSandbox("bx_bcdefghj"));
  });

  it("a polled operation with another id, or another target than expected", async () => {
    const other = `bdop_${"b".repeat(32)}`;
    const client = await serve((req, res) =>
      json(res, 200, {
        ok: true,
        operation: req.url?.endsWith(other) ? { ...OPERATION, id: "bdop_" + "c".repeat(32) } : OPERATION,
      }),
    );
    await invalid(client.getDeletionOperation(other), /operation id differs/);
    await invalid(client.getDeletionOperation(OPERATION.id, { targetId: "bx_zzzzzzzz" }), /another Boat/);
    expect((await client.getDeletionOperation(OPERATION.id, { targetId: OPERATION.targetId })).id).toBe(
      OPERATION.id,
    );
  });

  it("an unexpected redirect", async () => {
    const client = await serve((_req, res) => {
      res.writeHead(307, { location: "http://127.0.0.1:1/elsewhere" });
      res.end();
    });
    await invalid(client.createSandbox(BODY, { idempotencyKey: randomUUID() }), /redirect/);
  });

  it("a body larger than the client's bound", async () => {
    const client = await serve((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(`{"ok":true,"sandboxes":[],"pad":"${"x".repeat(5 * 1024 * 1024)}"}`);
    });
    await invalid(client.listSandboxes(), /too large/);
  });

  it("a listing that hands back a cursor twice is pagination_loop", async () => {
    const client = await serve((_req, res) =>
      json(res, 200, { ok: true, sandboxes: [SANDBOX], pageInfo: { nextCursor: "same" } }),
    );
    const error = (await typed(client.listAllSandboxes())) as BoatApiError;
    expect(error).toMatchObject({ code: "pagination_loop", status: 502 });
  });
});

describe("error answers without an envelope", () => {
  it("an HTML 503 from a proxy is http_error with its real status, retryable", async () => {
    const client = await serve((_req, res) => {
      res.writeHead(503, { "content-type": "text/html", "retry-after": "4" });
      res.end("<h1>Service Unavailable</h1>");
    });
    const error = (await typed(client.getSandbox("bx_abcdefgh"))) as BoatApiError;
    expect(error).toMatchObject({ code: "http_error", status: 503, isRetryable: true, retryAfterMs: 4000 });
  });

  it("a provider message with line breaks is flattened into one line", async () => {
    const client = await serve((_req, res) =>
      json(res, 400, {
        ok: false,
        error: { code: "bad", message: "line1\r\nline2", status: 400 },
        requestId: "r9",
      }),
    );
    const error = (await typed(client.getSandbox("bx_abcdefgh"))) as BoatApiError;
    expect(error.message).not.toMatch(/[\r\n]/);
    expect(error).toMatchObject({ code: "bad", status: 400, requestId: "r9", isRetryable: false });
  });
});

describe("broken connections are BoatTransportError", () => {
  it("a Content-Length lie (the body stops short and the socket closes): outcome unknown", async () => {
    const client = await serve((_req, res) => {
      res.writeHead(201, { "content-type": "application/json", "content-length": "500" });
      res.write('{"ok":true,"type":"sandbox.created"');
      setTimeout(() => res.socket?.destroy(), 20);
    });
    const error = await typed(client.createSandbox(BODY, { idempotencyKey: randomUUID() }));
    expect(error).toMatchObject({ phase: "response", timedOut: false });
  });

  it("a socket destroyed mid-body: outcome unknown", async () => {
    const client = await serve((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.write('{"ok":true,"sandboxes":[');
      setTimeout(() => res.socket?.destroy(), 20);
    });
    expect(await typed(client.listSandboxes())).toMatchObject({ phase: "response" });
  });

  it("a socket destroyed before any answer: outcome unknown", async () => {
    const client = await serve((req) => req.socket.destroy());
    expect(await typed(client.deleteSandbox("bx_abcdefgh"))).toMatchObject({ phase: "response" });
  });

  it("connection refused on a closed port: never sent", async () => {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const port = (server.address() as { port: number }).port;
    await new Promise<void>((resolve) => server.close(() => resolve()));
    const client = createBoatClient({ baseUrl: `http://127.0.0.1:${port}/api/v1`, token: TOKEN });
    const error = await typed(client.createSandbox(BODY, { idempotencyKey: randomUUID() }));
    expect(error).toMatchObject({ phase: "connect", timedOut: false, code: "transport_connect_failed" });
  });
});
