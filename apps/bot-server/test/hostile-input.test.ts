/**
 * Hostile input: well over 1,000 generated malformed requests (bad JSON, wrong types, oversize bodies, bad
 * ids, traversal and absolute paths, wrong media types, missing or wrong tokens), sent raw over HTTP so no
 * client library normalises them first. Every answer must be a 4xx with a JSON error; the server must never
 * answer 5xx and must keep serving.
 */
import { request } from "node:http";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../src/config.js";
import { type RunningServer, startServer } from "../src/server.js";
import { api, tempDir } from "./helpers.js";

let server: RunningServer;
const tmp = tempDir("hostile");
const MAX = 64 * 1024;

beforeAll(async () => {
  server = await startServer(
    loadConfig({
      DRYDOCK_DATA_DIR: tmp.dir,
      PORT: "0",
      LOG_LEVEL: "silent",
      DRYDOCK_MAX_FILE_BYTES: String(MAX),
    }),
    { print: () => {} },
  );
  await server.startup;
  const call = api(server.url, server.token);
  expect((await call("POST", "/v1/bots", { name: "target", botId: "target" })).status).toBe(201);
  expect((await call("PUT", "/v1/bots/target/files/keep.txt", "keep")).status).toBe(201);
});

afterAll(async () => {
  await server?.close();
  tmp.cleanup();
});

interface RawRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: Buffer | string;
}

function send(
  req: RawRequest,
): Promise<{ status: number; body: string; headers: import("node:http").IncomingHttpHeaders }> {
  const url = new URL(server.url);
  return new Promise((resolve, reject) => {
    const r = request(
      // A fresh connection per request (agent: false): a server that closes a connection after refusing an
      // oversized body must not make the next request fail on a reused socket.
      {
        host: url.hostname,
        port: url.port,
        method: req.method,
        path: req.path,
        headers: req.headers,
        agent: false,
      },
      (res) => {
        let body = "";
        res.on("data", (d: Buffer) => {
          body += d.toString();
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
      },
    );
    r.on("error", reject);
    if (req.body !== undefined) r.write(req.body);
    r.end();
  });
}

const auth = () => ({ authorization: `Bearer ${server.token}` });
const json = (body: string) => ({
  ...auth(),
  "content-type": "application/json",
  "content-length": String(Buffer.byteLength(body)),
});

const badBotId = fc.oneof(
  fc.string({ minLength: 121, maxLength: 200 }).map((s) => `a${s.replace(/[^A-Za-z]/g, "b")}`),
  fc.constantFrom("bad.id", "bad%20id", "%2e%2e", "..", "a%2Fb", "%00", "bot$", "ü", "a+b", "a%0Ab"),
);
const traversal = fc.constantFrom(
  "../x",
  "..%2fx",
  "%2e%2e/%2e%2e/etc/passwd",
  "a/../../x",
  "/etc/passwd",
  "%2Fetc%2Fpasswd",
  "a//b",
  "./a",
  "a/./b",
  "a%5c..%5cb",
  "a%00b",
  "a%0ab",
  `${"d/".repeat(600)}f`,
  `${"x".repeat(300)}`,
);
const garbageJson = fc.oneof(
  fc.string({ maxLength: 200 }).filter((s) => {
    try {
      JSON.parse(s);
      return false;
    } catch {
      return true;
    }
  }),
  fc.constantFrom("{", '{"name":', "[1,2", "nul", '{"name":"a",}', "\u0000", '{"__proto__":{"x":1}'),
);
const wrongTypes = fc.oneof(
  fc.record({ name: fc.oneof(fc.integer(), fc.boolean(), fc.constant(null), fc.array(fc.string())) }),
  fc.record({ name: fc.constant(""), botId: fc.string() }),
  fc.record({ name: fc.string({ minLength: 1, maxLength: 5 }), botId: badBotId }),
  fc.record({ name: fc.string({ minLength: 201, maxLength: 260 }) }),
  fc.record({ name: fc.constant("ok"), extra: fc.jsonValue() }),
  fc.constantFrom([], 5, "str", null, true),
);

const malformed: fc.Arbitrary<RawRequest> = fc.oneof(
  // no token, or a wrong one, on any route
  fc
    .tuple(
      fc.constantFrom("GET", "POST", "PUT", "DELETE"),
      fc.constantFrom(
        "/v1/bots",
        "/v1/bots/target",
        "/v1/bots/target/computer",
        "/v1/computers",
        "/v1/recovery",
        // Not /metrics or /readyz: a probe and a scrape need no API token (issue 25, operations.test.ts).
        "/v1/bots/target/files/keep.txt",
      ),
      fc.oneof(
        fc.constant(undefined),
        fc.string({ maxLength: 80 }),
        fc.constant("Bearer"),
        fc.constant("Basic abc"),
      ),
    )
    .map(
      ([method, path, authorization]): RawRequest => ({
        method,
        path,
        headers:
          authorization === undefined ? {} : { authorization: authorization.replace(/[^\x20-\x7e]/g, "") },
      }),
    ),
  // bad JSON
  garbageJson.map((body) => ({ method: "POST", path: "/v1/bots", headers: json(body), body })),
  // wrong types
  wrongTypes.map((value) => {
    const body = JSON.stringify(value);
    return { method: "POST", path: "/v1/bots", headers: json(body), body };
  }),
  fc
    .oneof(
      fc.constant({}),
      fc.record({
        confirmName: fc.oneof(fc.integer(), fc.constant(""), fc.string({ minLength: 101, maxLength: 120 })),
      }),
    )
    .map((value) => {
      const body = JSON.stringify(value);
      return { method: "DELETE", path: "/v1/bots/target/computer", headers: json(body), body };
    }),
  // oversized bodies
  fc.integer({ min: MAX + 1, max: MAX + 4096 }).map((n) => ({
    method: "PUT",
    path: "/v1/bots/target/files/big.bin",
    headers: { ...auth(), "content-type": "application/octet-stream", "content-length": String(n) },
    body: Buffer.alloc(n, 1),
  })),
  // bad ids in the path
  fc.tuple(badBotId, fc.constantFrom("", "/computer", "/checkpoints", "/files/a.txt")).map(([id, rest]) => ({
    method: rest === "" ? "GET" : "GET",
    path: `/v1/bots/${id}${rest}`,
    headers: auth(),
  })),
  fc
    .constantFrom("bad id", "a.b", "%2e%2e", "x".repeat(200))
    .map((id) => ({ method: "GET", path: `/v1/restores/${encodeURI(id)}`, headers: auth() })),
  fc.constantFrom("bad.id", "%2e%2e", "x".repeat(200), "does-not-exist").map((id) => ({
    method: "POST",
    path: `/v1/bots/target/checkpoints/${id}/restore`,
    headers: auth(),
  })),
  // traversal, absolute and hostile file paths
  fc.tuple(fc.constantFrom("GET", "PUT", "DELETE"), traversal).map(([method, p]) => ({
    method,
    path: `/v1/bots/target/files/${p}`,
    headers:
      method === "PUT"
        ? { ...auth(), "content-type": "application/octet-stream", "content-length": "1" }
        : auth(),
    ...(method === "PUT" ? { body: "x" } : {}),
  })),
  // wrong media type for a file body
  fc.constantFrom("text/plain", "application/json", "multipart/form-data; boundary=x").map((type) => ({
    method: "PUT",
    path: "/v1/bots/target/files/a.txt",
    headers: { ...auth(), "content-type": type, "content-length": "2" },
    body: type === "application/json" ? "{}" : "hi",
  })),
  // unknown routes and methods
  fc
    .constantFrom("/", "/v2/bots", "/v1/botz", "/v1/bots/target/nothing", "/_sim/stats")
    .map((path) => ({ method: "PATCH", path, headers: auth() })),
);

describe("hostile input", () => {
  it("answers every one of 1,200 generated malformed requests with a 4xx JSON error and keeps serving", async () => {
    let sent = 0;
    const statuses = new Map<number, number>();
    await fc.assert(
      fc.asyncProperty(malformed, async (req) => {
        const res = await send(req);
        sent += 1;
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        expect(
          res.status,
          `${req.method} ${req.path.slice(0, 120)} → ${res.status} ${res.body.slice(0, 200)}`,
        ).toBeGreaterThanOrEqual(400);
        expect(res.status).toBeLessThan(500);
        expect(
          JSON.parse(res.body).ok,
          `${req.method} ${req.path.slice(0, 120)} → ${res.status} ${res.body.slice(0, 200)}`,
        ).toBe(false);
      }),
      { numRuns: 1200, seed: 20261130 },
    );
    expect(sent).toBeGreaterThanOrEqual(1200);
    // Still serving, and nothing outside the workspace or inside it was touched by the hostile writes.
    const call = api(server.url, server.token);
    expect((await call("GET", "/healthz")).status).toBe(200);
    expect((await call("GET", "/v1/bots/target/files/keep.txt")).text).toBe("keep");
    expect((await call("GET", "/v1/bots")).json.bots.map((b: { botId: string }) => b.botId)).toEqual([
      "target",
    ]);
    // The mix of answers is what the generator aimed at: auth, validation, size, media type, not found.
    for (const status of [400, 401, 404, 413, 415])
      expect(statuses.get(status) ?? 0, `status ${status}`).toBeGreaterThan(0);
  });
});

describe("an empty body sent as application/json", () => {
  // Many HTTP clients label every request JSON, also a DELETE they send without a body. That is no body,
  // not malformed JSON: the route answers as it does to a bare request.
  it("is no body: DELETE of a bot without a computer deletes it, and of an unknown bot answers 404", async () => {
    const call = api(server.url, server.token);
    expect((await call("POST", "/v1/bots", { name: "bare", botId: "bare" })).status).toBe(201);
    const empty = { ...json(""), "content-length": "0" };
    const deleted = await send({ method: "DELETE", path: "/v1/bots/bare", headers: empty });
    expect(deleted.status, deleted.body).toBe(200);
    const again = await send({ method: "DELETE", path: "/v1/bots/bare", headers: empty });
    expect(again.status, again.body).toBe(404);
    expect(JSON.parse(again.body).error.code).toBe("bot_not_found");
  });

  it("is still refused where a body is required: POST /v1/bots answers 400 invalid_request", async () => {
    const res = await send({
      method: "POST",
      path: "/v1/bots",
      headers: { ...json(""), "content-length": "0" },
    });
    expect(res.status, res.body).toBe(400);
    expect(JSON.parse(res.body).error.code).toBe("invalid_request");
  });
});

describe("a path whose percent-encoding does not decode", () => {
  it("answers 400 bad_request in the documented error shape, for any route", async () => {
    for (const path of [
      "/v1/bots/%FF",
      "/v1/bots/target/files/%FF",
      "/v1/bots/target/files/%C0%AE%C0%AE/x",
    ]) {
      const res = await send({ method: "GET", path, headers: auth() });
      expect(res.status, `${path} → ${res.body}`).toBe(400);
      expect(JSON.parse(res.body)).toEqual({
        ok: false,
        error: {
          code: "bad_request",
          message: expect.stringContaining("Malformed request"),
          // Every error body carries the request id (issue 25), also in the header.
          requestId: res.headers["x-request-id"],
        },
      });
    }
  });
});
