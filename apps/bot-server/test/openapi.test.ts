/**
 * The OpenAPI 3 document (issue 25): valid by a validator library, covering every route the server
 * registers, and true: every documented operation is called, and each answer is checked against the
 * schema documented for its status (or the 4XX/5XX error body) and content type.
 */
import { Validator } from "@seriousme/openapi-schema-validator";
import { Ajv2020 } from "ajv/dist/2020.js";
import { beforeAll, describe, expect, it } from "vitest";
import { registeredRoutes } from "../src/app.js";
import type { RunningServer } from "../src/server.js";
import { api, inProcessServer } from "./helpers.js";

let server: RunningServer;
inProcessServer("openapi", (s) => {
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

describe("every documented route answers as documented", () => {
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
    ) => {
      const res = await (token === server.token ? admin : api(server.url, token))(method, url, body);
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
