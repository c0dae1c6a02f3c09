/**
 * The OpenAPI 3 document (issue 25): valid by a validator library, covering every route the server
 * registers, and true: every documented operation is called, and each answer is checked against the
 * schema documented for its status (or the 4XX/5XX error body) and content type.
 */
import { spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { openBoatDeleteJournal } from "@drydock/boat-delete-journal";
import { Validator } from "@seriousme/openapi-schema-validator";
import { Ajv2020 } from "ajv/dist/2020.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { registeredRoutes } from "../src/app.js";
import type { RunningServer } from "../src/server.js";
import { api, inProcessServer, type ServerChild, spawnServer, tempDir } from "./helpers.js";

let server: RunningServer;
const home = inProcessServer("openapi", (s) => {
  server = s;
});

// biome-ignore lint/suspicious/noExplicitAny: the document is plain JSON read field by field.
type Doc = any;
let doc: Doc;

beforeAll(async () => {
  const res = await api(server.url, null)("GET", "/openapi.json");
  expect(res.status).toBe(200);
  doc = res.json;
});

const METHODS = ["get", "put", "post", "delete", "patch"];

/** Every (METHOD, /path/{param}) the document describes. */
function documented(): string[] {
  return Object.entries(doc.paths as Record<string, Record<string, unknown>>).flatMap(([path, item]) =>
    Object.keys(item)
      .filter((m) => METHODS.includes(m))
      .map((m) => `${m.toUpperCase()} ${path}`),
  );
}

/** Fastify's `/v1/bots/:botId/files/*` as the document spells it. */
const asDocumented = (url: string) => url.replace(/:([A-Za-z]+)/g, "{$1}").replace(/\*$/, "{path}");

describe("the OpenAPI document", () => {
  it("is a valid OpenAPI 3.1 document (@seriousme/openapi-schema-validator)", async () => {
    const validator = new Validator();
    const result = await validator.validate(doc);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(validator.version).toBe("3.1");
  });

  it("covers every route the server registered, and nothing else", () => {
    const registered = registeredRoutes(server.app)
      // Fastify's automatic HEAD twins of the GETs, the docs page's own assets (Swagger UI), and the operator
      // console's page and assets (static files, not API: the console calls the documented routes).
      .filter((r) => r.method !== "HEAD" && !r.url.startsWith("/docs") && !r.url.startsWith("/console"))
      .map((r) => `${r.method} ${asDocumented(r.url)}`);
    expect(registered.length).toBeGreaterThanOrEqual(19);
    expect([...new Set(registered)].sort()).toEqual(documented().sort());
  });

  it("gives every operation a summary, its path parameters, a success and the shared 4XX/5XX error body", () => {
    for (const [path, item] of Object.entries(doc.paths as Record<string, Record<string, Doc>>)) {
      for (const [method, op] of Object.entries(item)) {
        const where = `${method} ${path}`;
        expect(op.summary, where).toEqual(expect.any(String));
        const statuses = Object.keys(op.responses);
        expect(
          statuses.some((s) => /^2\d\d$/.test(s)),
          where,
        ).toBe(true);
        for (const range of ["4XX", "5XX"]) {
          expect(op.responses[range].content["application/json"].schema, `${where} ${range}`).toEqual({
            $ref: "#/components/schemas/ErrorBody",
          });
        }
        const inPath = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]).sort();
        const params = (op.parameters ?? [])
          .filter((p: Doc) => p.in === "path")
          .map((p: Doc) => p.name)
          .sort();
        expect(params, where).toEqual(inPath);
        if (["post", "put", "delete"].includes(method) && op.requestBody === undefined) {
          // A write without a body documents that it takes none: only these do.
          expect(
            [
              "post /v1/bots/{botId}/computer",
              "post /v1/bots/{botId}/checkpoints",
              "post /v1/bots/{botId}/checkpoints/{checkpointId}/restore",
              "delete /v1/bots/{botId}/files/{path}",
            ],
            where,
          ).toContain(where);
        }
      }
    }
    expect(doc.components.schemas.ErrorBody.properties.error.required).toEqual([
      "code",
      "message",
      "requestId",
    ]);
  });

  it("is served with a docs page at /docs", async () => {
    const page = await api(server.url, null)("GET", "/docs/static/index.html");
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toMatch(/^text\/html/);
    expect(page.text).toContain("swagger-ui");
    // Its assets come inside @fastify/swagger-ui's package: nothing is fetched from elsewhere.
    const bundle = await api(server.url, null)("GET", "/docs/static/swagger-ui-bundle.js");
    expect(bundle.status).toBe(200);
    expect(bundle.headers.get("content-type")).toMatch(/javascript/);
    expect(bundle.text.length).toBeGreaterThan(100_000);
    expect((await api(server.url, null)("GET", "/docs/json")).json.paths).toEqual(doc.paths);
    const redirect = await fetch(`${server.url}/docs`, { redirect: "manual" });
    expect([200, 302]).toContain(redirect.status);
  });
});

const ADMIN = "a".repeat(32);
const READER = "r".repeat(32);

/**
 * A server (admin and read tokens) on a data directory where an earlier server was SIGKILLed inside a
 * restore of bot `stuck` (crash point restore.after-locked, before any file changed): a restore that needs
 * a person, for the recovery-action routes' real previews and applies.
 */
async function serverWithStuckRestore(dataDir: string): Promise<ServerChild> {
  const crashing = await spawnServer(dataDir, {
    DRYDOCK_CRASH_POINT: "restore.after-locked",
    DRYDOCK_TOKEN: ADMIN,
  });
  try {
    const call = api(crashing.url, crashing.token);
    expect((await call("POST", "/v1/bots", { name: "stuck", botId: "stuck" })).status).toBe(201);
    expect((await call("PUT", "/v1/bots/stuck/files/a.txt", "v1")).status).toBe(201);
    const checkpointId = (await call("POST", "/v1/bots/stuck/checkpoints")).json.checkpoint.checkpointId;
    await call("POST", `/v1/bots/stuck/checkpoints/${checkpointId}/restore`).catch(() => undefined);
    expect((await crashing.exited).signal).toBe("SIGKILL");
  } finally {
    crashing.kill();
  }
  return spawnServer(dataDir, { DRYDOCK_TOKEN: ADMIN, DRYDOCK_TOKENS: `dash:read:${READER}` });
}

describe("every documented route answers as documented", () => {
  const stuckDir = tempDir("openapi-stuck");
  let stuck: ServerChild;
  beforeAll(async () => {
    stuck = await serverWithStuckRestore(stuckDir.dir);
  });
  afterAll(() => {
    stuck?.kill();
    stuckDir.cleanup();
  });

  it("calls each operation (successes and refusals) and checks every answer against its schema", async () => {
    const ajv = new Ajv2020({ strict: false, validateFormats: false });
    ajv.addSchema({ $id: "openapi.json", components: doc.components });
    /** The schema of `status` (else its range) and content type, with component refs made absolute. */
    const schemaFor = (method: string, path: string, status: number, type: string) => {
      const responses = doc.paths[path][method.toLowerCase()].responses;
      const answer = responses[String(status)] ?? responses[`${String(status)[0]}XX`];
      expect(answer, `${method} ${path} → ${status} is documented`).toBeDefined();
      const content = answer.content as Record<string, { schema: Doc }>;
      const key = Object.keys(content).find((k) => type.startsWith(k));
      expect(
        key,
        `${method} ${path} → ${status} as ${type} (documented: ${Object.keys(content)})`,
      ).toBeDefined();
      return JSON.parse(
        JSON.stringify(content[key as string]?.schema).replaceAll(
          '"#/components/',
          '"openapi.json#/components/',
        ),
      );
    };
    const called = new Set<string>();
    const admin = api(server.url, server.token);
    const check = async (
      method: string,
      path: string,
      url: string,
      expected: number,
      body?: unknown,
      token: string | null = server.token,
      base: string = server.url,
    ) => {
      const res = await (token === server.token && base === server.url ? admin : api(base, token))(
        method,
        url,
        body,
      );
      expect(res.status, `${method} ${url}: ${res.text.slice(0, 300)}`).toBe(expected);
      const type = res.headers.get("content-type") ?? "";
      const schema = schemaFor(method, path, res.status, type);
      if (type.startsWith("application/json")) {
        const validate = ajv.compile(schema);
        expect(
          validate(res.json),
          `${method} ${url} → ${res.status}: ${ajv.errorsText(validate.errors)}`,
        ).toBe(true);
      } else {
        expect(schema.type, `${method} ${url}`).toBe("string");
      }
      called.add(`${method} ${path}`);
      return res;
    };

    await check("GET", "/healthz", "/healthz", 200, undefined, null);
    await check("GET", "/readyz", "/readyz", 200, undefined, null);
    await check("GET", "/metrics", "/metrics", 200, undefined, null);
    await check("GET", "/openapi.json", "/openapi.json", 200, undefined, null);
    await check("POST", "/v1/bots", "/v1/bots", 201, { name: "Doc", botId: "doc" });
    await check("POST", "/v1/bots", "/v1/bots", 400, { name: "" });
    await check("POST", "/v1/bots", "/v1/bots", 401, { name: "x" }, null);
    await check("GET", "/v1/bots", "/v1/bots", 200);
    await check("GET", "/v1/bots/{botId}", "/v1/bots/doc", 200);
    await check("GET", "/v1/bots/{botId}", "/v1/bots/missing", 404);
    await check("GET", "/v1/bots/{botId}/computer", "/v1/bots/doc/computer", 200);
    await check("POST", "/v1/bots/{botId}/computer", "/v1/bots/doc/computer", 201);
    await check("POST", "/v1/bots/{botId}/computer", "/v1/bots/doc/computer", 200);
    const computer = await check("GET", "/v1/bots/{botId}/computer", "/v1/bots/doc/computer", 200);
    await check("GET", "/v1/computers", "/v1/computers", 200);
    await check("GET", "/v1/bots", "/v1/bots", 200);
    const files = "/v1/bots/{botId}/files/{path}";
    await check("PUT", files, "/v1/bots/doc/files/notes/a.txt", 201, "hello");
    await check("PUT", files, "/v1/bots/doc/files/..%2Fout", 400, "x");
    await check("GET", files, "/v1/bots/doc/files/notes/a.txt", 200);
    await check("GET", files, "/v1/bots/doc/files/none.txt", 404);
    const created = await check("POST", "/v1/bots/{botId}/checkpoints", "/v1/bots/doc/checkpoints", 201);
    await check("GET", "/v1/bots/{botId}/checkpoints", "/v1/bots/doc/checkpoints", 200);
    await check("DELETE", files, "/v1/bots/doc/files/notes/a.txt", 200);
    const restorePath = "/v1/bots/{botId}/checkpoints/{checkpointId}/restore";
    const restored = await check(
      "POST",
      restorePath,
      `/v1/bots/doc/checkpoints/${created.json.checkpoint.checkpointId}/restore`,
      200,
    );
    await check("POST", restorePath, "/v1/bots/doc/checkpoints/nope/restore", 404);
    await check("GET", "/v1/restores/{operationId}", `/v1/restores/${restored.json.operationId}`, 200);
    await check("GET", "/v1/restores/{operationId}", "/v1/restores/none", 404);
    await check("GET", "/v1/recovery", "/v1/recovery", 200);

    // The fenced recovery actions. Restores: the stuck server's restore, killed after it took the lock.
    const onStuck = (
      method: string,
      path: string,
      url: string,
      expected: number,
      body?: unknown,
      token = ADMIN,
    ) => check(method, path, url, expected, body, token, stuck.url);
    // The report with a real restore item (the killed restore), checked against its documented item schema.
    const stuckReport = await onStuck("GET", "/v1/recovery", "/v1/recovery", 200);
    expect(stuckReport.json.restores).toEqual([
      expect.objectContaining({ botId: "stuck", attention: true, next: "abort" }),
    ]);
    const stuckOp = stuckReport.json.restores[0].operationId;
    const detail = "/v1/recovery/restores/{operationId}";
    expect(
      (await onStuck("GET", detail, `/v1/recovery/restores/${stuckOp}`, 200)).json.commands.abort,
    ).toEqual(expect.any(String));
    await check("GET", detail, "/v1/recovery/restores/no-such-op", 404);
    const action = "/v1/recovery/restores/{operationId}/{action}";
    const abort = await onStuck("GET", action, `/v1/recovery/restores/${stuckOp}/abort`, 200);
    expect(abort.json.eligible).toBe(true);
    const release = await onStuck("GET", action, `/v1/recovery/restores/${stuckOp}/release`, 200);
    expect(release.json.eligible).toBe(false);
    await onStuck("GET", action, `/v1/recovery/restores/${stuckOp}/explode`, 400);
    await check("GET", action, "/v1/recovery/restores/no-such-op/abort", 404);
    const fence = abort.json.fence;
    await onStuck("POST", action, `/v1/recovery/restores/${stuckOp}/abort`, 403, { fence }, READER);
    await onStuck("POST", action, `/v1/recovery/restores/${stuckOp}/release`, 409, { fence });
    await onStuck("POST", action, `/v1/recovery/restores/${stuckOp}/abort`, 400, {
      fence: { ...fence, expectedHash: "nope" },
    });
    const aborted = await onStuck("POST", action, `/v1/recovery/restores/${stuckOp}/abort`, 200, {
      fence,
      reason: "openapi test",
    });
    expect(aborted.json).toMatchObject({ action: "abort", phase: "aborted" });
    const stale = await onStuck("POST", action, `/v1/recovery/restores/${stuckOp}/abort`, 409, { fence });
    expect(stale.json.error.code).toBe("state_changed");

    // The locks, and their garbage: a candidate an exited process left beside a saga lock of `stuck`.
    const locksOf = await onStuck("GET", "/v1/locks", "/v1/locks", 200);
    expect(locksOf.json.locks.length).toBeGreaterThan(0);
    await check("GET", "/v1/locks", "/v1/locks", 401, undefined, null);
    const shard = readdirSync(join(stuckDir.dir, "restore-sagas")).find((name) =>
      name.startsWith("workspace-"),
    );
    const deadPid = spawnSync(process.execPath, ["-e", ""]).pid as number;
    const deadToken = randomUUID();
    writeFileSync(
      join(
        stuckDir.dir,
        "restore-sagas",
        shard as string,
        ".locks",
        `doc.lock.candidate-${deadPid}-${deadToken}`,
      ),
      `${JSON.stringify({ version: 1, pid: deadPid, token: deadToken, createdAt: Date.now() })}\n`,
    );
    const gcPath = "/v1/recovery/locks/gc";
    const gcPreview = await onStuck("GET", gcPath, gcPath, 200);
    expect(gcPreview.json.candidates).toHaveLength(1);
    await onStuck("POST", gcPath, gcPath, 403, { confirm: true }, READER);
    await onStuck("POST", gcPath, gcPath, 400, {});
    expect((await onStuck("POST", gcPath, gcPath, 200, { confirm: true })).json.removed).toEqual(
      gcPreview.json.candidates,
    );

    // The aborted restore is archived: purged against its previewed list.
    const purge = "/v1/recovery/restores/purge";
    const purgePreview = await onStuck("GET", purge, `${purge}?olderThanDays=0`, 200);
    expect(purgePreview.json.candidates.map((c: { operationId: string }) => c.operationId)).toEqual([
      stuckOp,
    ]);
    await onStuck("GET", purge, `${purge}?olderThanDays=-1`, 400);
    const { stateDigest } = purgePreview.json;
    await onStuck("POST", purge, purge, 403, { olderThanDays: 0, expectedState: stateDigest }, READER);
    await onStuck("POST", purge, purge, 409, { olderThanDays: 0, expectedState: `sha256:${"0".repeat(64)}` });
    const purgedNow = await onStuck("POST", purge, purge, 200, {
      olderThanDays: 0,
      expectedState: stateDigest,
    });
    expect(purgedNow.json.purged).toHaveLength(1);

    // Boats: a DELETE a stopped server left on the wire (prepared, no receipt, 31 s ago) is retried.
    const boats = "/v1/recovery/boats/{action}";
    await check("POST", "/v1/bots", "/v1/bots", 201, { name: "Gone", botId: "gone" });
    const gone = (await check("POST", "/v1/bots/{botId}/computer", "/v1/bots/gone/computer", 201)).json
      .computer;
    await openBoatDeleteJournal({ dataDir: home.dir, now: () => Date.now() - 31_000 }).prepareBoatDeletion({
      boxId: gone.boxId,
      name: gone.name,
      ownerBotId: "gone",
    });
    // The report with a real Boat item (that fence), checked against its documented item schema.
    const fenced = await check("GET", "/v1/recovery", "/v1/recovery", 200);
    expect(fenced.json.boats).toEqual([
      expect.objectContaining({ kind: "deletion_fence", boxId: gone.boxId, attention: true }),
    ]);
    expect(fenced.json.startup).toEqual(expect.objectContaining({ deletions: expect.any(Array) }));
    const retry = await check("GET", boats, `/v1/recovery/boats/retryDeletion?boxId=${gone.boxId}`, 200);
    expect(retry.json.eligible).toBe(true);
    await check("GET", boats, "/v1/recovery/boats/adopt?botId=gone", 400);
    await check("GET", boats, "/v1/recovery/boats/reconcileDeletion?boxId=bx_22222222", 404);
    const expectedState = retry.json.expectedState;
    await check("POST", boats, "/v1/recovery/boats/retryDeletion", 409, {
      boxId: gone.boxId,
      expectedState: `sha256:${"0".repeat(64)}`,
    });
    await check("POST", boats, "/v1/recovery/boats/retryDeletion", 400, { boxId: gone.boxId });
    const retried = await check("POST", boats, "/v1/recovery/boats/retryDeletion", 200, {
      boxId: gone.boxId,
      expectedState,
    });
    expect(retried.json).toMatchObject({ action: "retryDeletion", boxId: gone.boxId });

    await check("DELETE", "/v1/bots/{botId}", "/v1/bots/doc", 409);
    await check("DELETE", "/v1/bots/{botId}/computer", "/v1/bots/doc/computer", 200, {
      confirmName: computer.json.computer.name,
    });
    await check("GET", "/v1/bots/{botId}/computer", "/v1/bots/doc/computer", 200);
    await check("DELETE", "/v1/bots/{botId}", "/v1/bots/doc", 200);
    await check("DELETE", "/v1/bots/{botId}", "/v1/bots/doc", 404);

    // Every documented operation was called: a route added without a case here fails this test.
    expect([...called].sort()).toEqual(documented().sort());
  });
});
