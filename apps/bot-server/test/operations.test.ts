/**
 * Issue 25, the operable server: probes and metrics without the admin token, the metrics token, several
 * tokens with a read-only role, token rotation without a restart, request ids in the header, every error
 * body and the log, and the `*_FILE` secrets.
 */
import { spawnSync } from "node:child_process";
import { readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Writable } from "node:stream";
import { CREATE_JOURNAL_FILE } from "@drydock/boat-create-journal";
import type { BoatLifecycle } from "@drydock/boat-lifecycle";
import type { BoatClient } from "@drydock/boat-provider";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildServer } from "../src/app.js";
import { openBotRegistry } from "../src/bots.js";
import { ConfigError, loadConfig } from "../src/config.js";
import { READYZ_PROVIDER_TIMEOUT_MS } from "../src/deps.js";
import { createMetrics } from "../src/metrics.js";
import { type RunningServer, startServer } from "../src/server.js";
import { api, REPO_ROOT, tempDir } from "./helpers.js";

/** The server's version, from its package.json. */
const VERSION = (
  JSON.parse(readFileSync(join(REPO_ROOT, "apps/bot-server/package.json"), "utf8")) as { version: string }
).version;
const ADMIN = "admin-token-0123456789abcdef";
const READER = "read-token-0123456789abcdef";
const METRICS = "metrics-token-0123456789abcdef";

/** Starts a server on a fresh directory with `env` added; closed and removed after the file's tests. */
function serverWith(
  label: string,
  env: Record<string, string> | ((dir: string) => Record<string, string>),
  files?: (dir: string) => void,
) {
  const tmp = tempDir(label);
  const box: { server: RunningServer; dir: string } = { server: undefined as never, dir: tmp.dir };
  beforeAll(async () => {
    files?.(tmp.dir);
    box.server = await startServer(
      loadConfig({
        DRYDOCK_DATA_DIR: tmp.dir,
        PORT: "0",
        LOG_LEVEL: "silent",
        ...(typeof env === "function" ? env(tmp.dir) : env),
      }),
      { print: () => {} },
    );
    await box.server.startup;
  });
  afterAll(async () => {
    await box.server?.close();
    tmp.cleanup();
  });
  return box;
}

async function armDelay(server: RunningServer, ms: number): Promise<void> {
  const sim = server.simulator;
  if (!sim) throw new Error("the test server runs the embedded simulator");
  const rules = [{ method: "GET", path: "^/sandboxes", action: "delay", ms, times: 1 }];
  const armed = await fetch(`${sim.url}/_sim/faults`, {
    method: "POST",
    headers: { authorization: `Bearer ${sim.token}`, "content-type": "application/json" },
    body: JSON.stringify({ rules }),
  });
  expect(armed.status).toBe(200);
}

describe("probes and metrics without the admin token", () => {
  const box = serverWith("probes", {});

  it("GET /healthz, /readyz and /metrics answer 200 without any token", async () => {
    const anon = api(box.server.url, null);
    expect((await anon("GET", "/healthz")).json).toEqual({ ok: true });
    const ready = await anon("GET", "/readyz");
    expect(ready.status).toBe(200);
    expect(ready.json.ok).toBe(true);
    expect(ready.json.provider.reachable).toBe(true);
    const metrics = await anon("GET", "/metrics");
    expect(metrics.status).toBe(200);
    expect(metrics.headers.get("content-type")).toMatch(/^text\/plain/);
  });

  it("/metrics has build info, journal sizes against their caps, provider latency and open recovery items", async () => {
    const call = api(box.server.url, box.server.token);
    expect((await call("POST", "/v1/bots", { name: "Meter", botId: "meter" })).status).toBe(201);
    expect((await call("POST", "/v1/bots/meter/computer")).status).toBe(201);
    const text = (await api(box.server.url, null)("GET", "/metrics")).text;
    expect(text).toMatch(
      new RegExp(
        `^drydock_build_info\\{version="${VERSION.replaceAll(".", "\\.")}",node="${process.version}"\\} 1$`,
        "m",
      ),
    );
    expect(text).toMatch(/^drydock_journal_capacity\{journal="create"\} 4096$/m);
    expect(text).toMatch(/^drydock_journal_capacity\{journal="delete"\} 4096$/m);
    expect(text).toMatch(/^drydock_journal_capacity\{journal="bots"\} 4096$/m);
    expect(text).toMatch(/^drydock_journal_rows\{journal="create"\} 1$/m);
    expect(text).toMatch(/^drydock_journal_rows\{journal="delete"\} 0$/m);
    expect(text).toMatch(/^drydock_journal_rows\{journal="bots"\} 1$/m);
    // The create's POST to boat.dev was timed, by method and outcome.
    expect(text).toMatch(
      /^drydock_provider_call_duration_seconds_count\{method="POST",outcome="2xx"\} [1-9]\d*$/m,
    );
    expect(text).toMatch(
      /^drydock_provider_call_duration_seconds_bucket\{le="\+Inf",method="POST",outcome="2xx"\} [1-9]/m,
    );
    expect(text).toMatch(/^drydock_recovery_items_open 0$/m);
  });

  it("/readyz fails (503) when a journal cannot be read, and still reports boat.dev", async () => {
    const file = join(box.dir, CREATE_JOURNAL_FILE);
    const before = readFileSync(file);
    writeFileSync(file, "{ not json");
    try {
      const res = await api(box.server.url, null)("GET", "/readyz");
      expect(res.status).toBe(503);
      expect(res.json.ok).toBe(false);
      expect(res.json.checks.createJournal.ok).toBe(false);
      expect(res.json.checks.dataDir).toEqual({ ok: true });
      expect(res.json.provider.reachable).toBe(true);
    } finally {
      writeFileSync(file, before);
    }
    expect((await api(box.server.url, null)("GET", "/readyz")).status).toBe(200);
  });
});

describe("/readyz while boat.dev is slow", () => {
  const box = serverWith("readyz-slow", {});

  it("answers 200 within its bound, reporting boat.dev unreachable; the next probe reuses that check", async () => {
    await armDelay(box.server, 6_000);
    const anon = api(box.server.url, null);
    const started = performance.now();
    const res = await anon("GET", "/readyz");
    const took = performance.now() - started;
    expect(res.status).toBe(200);
    expect(res.json.ok).toBe(true);
    expect(res.json.provider).toEqual({
      reachable: false,
      message: `boat.dev did not answer within ${READYZ_PROVIDER_TIMEOUT_MS / 1000} s`,
      checkedAt: expect.any(String),
    });
    expect(res.json.checks.dataDir).toEqual({ ok: true });
    expect(took).toBeLessThan(READYZ_PROVIDER_TIMEOUT_MS + 2_000);
    // Within the cache window: the same check, not a second list at boat.dev.
    const again = await anon("GET", "/readyz");
    expect(again.json.provider).toEqual(res.json.provider);
  });
});

describe("DRYDOCK_METRICS_TOKEN", () => {
  const box = serverWith("metrics-token", {
    DRYDOCK_METRICS_TOKEN: METRICS,
    DRYDOCK_TOKENS: `ops:admin:${ADMIN},dash:read:${READER}`,
  });

  it("/metrics then needs it or an API token; it opens nothing else", async () => {
    expect((await api(box.server.url, null)("GET", "/metrics")).status).toBe(401);
    expect((await api(box.server.url, "wrong-token-0123456789")("GET", "/metrics")).status).toBe(401);
    expect((await api(box.server.url, METRICS)("GET", "/metrics")).status).toBe(200);
    expect((await api(box.server.url, READER)("GET", "/metrics")).status).toBe(200);
    expect((await api(box.server.url, ADMIN)("GET", "/metrics")).status).toBe(200);
    const other = await api(box.server.url, METRICS)("GET", "/v1/bots");
    expect(other.status).toBe(401);
    expect(other.json.error.code).toBe("unauthorized");
    // Probes stay open.
    expect((await api(box.server.url, null)("GET", "/readyz")).status).toBe(200);
  });
});

describe("several tokens and a read-only role", () => {
  const box = serverWith("roles", { DRYDOCK_TOKEN: ADMIN, DRYDOCK_TOKENS: `dash:read:${READER}` });

  it("a read token is refused 403 forbidden on every write route of the OpenAPI document, and nothing changes", async () => {
    const doc = (await api(box.server.url, null)("GET", "/openapi.json")).json;
    const writes: [string, string][] = [];
    for (const [path, item] of Object.entries(doc.paths as Record<string, Record<string, unknown>>)) {
      for (const method of Object.keys(item)) {
        if (method !== "get" && method !== "head") writes.push([method.toUpperCase(), path]);
      }
    }
    // POST /v1/bots, DELETE /v1/bots/{botId}, POST/DELETE …/computer, PUT/DELETE …/files, POST checkpoints
    // and restore: every non-GET route there is.
    expect(writes.length).toBeGreaterThanOrEqual(8);
    const admin = api(box.server.url, ADMIN);
    expect((await admin("POST", "/v1/bots", { name: "Kept", botId: "kept" })).status).toBe(201);
    expect((await admin("PUT", "/v1/bots/kept/files/a.txt", "a")).status).toBe(201);
    const reader = api(box.server.url, READER);
    for (const [method, template] of writes) {
      const path = template
        .replace("{botId}", "kept")
        .replace("{checkpointId}", "c1")
        .replace(/\{\*\}|\*/, "a.txt");
      const body =
        method === "PUT" ? "x" : method === "POST" && path === "/v1/bots" ? { name: "n" } : undefined;
      const res = await reader(method, path, body);
      expect(res.status, `${method} ${path}`).toBe(403);
      expect(res.json.error.code).toBe("forbidden");
      expect(res.json.error.message).toContain("'dash'");
      expect(res.json.error.requestId).toBe(res.headers.get("x-request-id"));
    }
    expect((await reader("GET", "/v1/bots")).json.bots.map((b: { botId: string }) => b.botId)).toEqual([
      "kept",
    ]);
    expect((await reader("GET", "/v1/bots/kept/files/a.txt")).text).toBe("a");
    expect((await reader("GET", "/v1/bots/kept/checkpoints")).json.checkpoints).toEqual([]);
  });

  it("a read token reads every GET route; the admin token (DRYDOCK_TOKEN) still writes", async () => {
    const reader = api(box.server.url, READER);
    for (const path of [
      "/v1/bots",
      "/v1/bots/kept",
      "/v1/bots/kept/computer",
      "/v1/computers",
      "/v1/recovery",
    ]) {
      expect((await reader("GET", path)).status, path).toBe(200);
    }
    expect((await api(box.server.url, ADMIN)("DELETE", "/v1/bots/kept/files/a.txt")).status).toBe(200);
  });
});

describe("rotation through DRYDOCK_TOKENS_FILE", { timeout: 30_000 }, () => {
  const OLD = "old-token-0123456789abcdef";
  const NEW = "new-token-0123456789abcdef";
  let file = "";
  const box = serverWith(
    "rotation",
    (dir) => ({ DRYDOCK_TOKENS_FILE: join(dir, "tokens.txt") }),
    (dir) => {
      file = join(dir, "tokens.txt");
      writeFileSync(file, `# the deployment's tokens\nold:admin:${OLD}\n`);
    },
  );

  /** Replaces the token file atomically (write a temp, rename it over), as an operator's tooling does. */
  const writeTokens = (content: string) => {
    writeFileSync(`${file}.tmp`, content);
    renameSync(`${file}.tmp`, file);
  };

  it("two tokens valid at once, then the old one revoked without a restart or a failed request", async () => {
    const server = box.server;
    const status = async (token: string) => (await api(server.url, token)("GET", "/v1/bots")).status;
    expect(await status(OLD)).toBe(200);
    expect(await status(NEW)).toBe(401);

    writeTokens(`old:admin:${OLD}\nnew:admin:${NEW}\n`);
    expect(await status(OLD)).toBe(200);
    expect(await status(NEW)).toBe(200);

    // The clients have moved to the new token: it is used without a pause while the old one is revoked.
    let stop = false;
    const seen: number[] = [];
    const client = (async () => {
      while (!stop) seen.push(await status(NEW));
    })();
    await new Promise((r) => setTimeout(r, 100));
    writeTokens(`new:admin:${NEW}\n`);
    await new Promise((r) => setTimeout(r, 100));
    // A half-written or broken file keeps the tokens in force (a typo never locks every client out).
    writeTokens("new:admin:\n");
    await new Promise((r) => setTimeout(r, 100));
    stop = true;
    await client;
    expect(seen.length).toBeGreaterThan(3);
    expect(seen.every((s) => s === 200)).toBe(true);
    expect(await status(OLD)).toBe(401);
    expect(await status(NEW)).toBe(200);
    // The same process all along.
    expect(box.server).toBe(server);
  });
});

describe("request ids", () => {
  /** A server over fakes whose GET /v1/computers throws, its log lines captured. */
  async function failingServer() {
    const dir = tempDir("request-id");
    const lines: string[] = [];
    const stream = new Writable({
      write(chunk, _enc, done) {
        lines.push(...chunk.toString().split("\n").filter(Boolean));
        done();
      },
    });
    const app = await buildServer({
      dataDir: dir.dir,
      token: ADMIN,
      maxFileBytes: 1024,
      bots: openBotRegistry(dir.dir),
      lifecycle: {
        inventoryPage: async () => {
          throw new Error("the inventory broke");
        },
      } as unknown as BoatLifecycle,
      createJournal: {} as never,
      deleteJournal: {} as never,
      client: {} as BoatClient,
      metrics: createMetrics(),
      recovery: { plan: async () => ({ items: [], providerListed: true }) as never },
      startupReport: () => null,
      logger: { level: "info", stream },
    });
    const cleanup = async () => {
      await app.close();
      dir.cleanup();
    };
    return { app, lines, cleanup };
  }

  it("a 500's request id is in its header, its error body and the server log's lines for it", async () => {
    const { app, lines, cleanup } = await failingServer();
    try {
      const res = await app.inject({
        method: "GET",
        url: "/v1/computers",
        headers: { authorization: `Bearer ${ADMIN}` },
      });
      expect(res.statusCode).toBe(500);
      const id = res.headers["x-request-id"];
      expect(typeof id).toBe("string");
      expect(res.json().error).toEqual({
        code: "internal",
        message: "drydock hit an unexpected error; the details are in the server log.",
        requestId: id,
      });
      const logged = lines.map((l) => JSON.parse(l)).filter((l) => l.reqId === id);
      const failure = logged.find((l) => l.msg === "request failed");
      expect(failure?.err?.message).toBe("the inventory broke");
      const access = logged.find((l) => l.msg === "request");
      expect(access).toMatchObject({
        method: "GET",
        route: "/v1/computers",
        path: "/v1/computers",
        status: 500,
      });
      // Never the token.
      expect(lines.join("\n")).not.toContain(ADMIN);
    } finally {
      await cleanup();
    }
  });

  it("keeps a sane incoming x-request-id, replaces an insane one, and puts it in every error body", async () => {
    const { app, lines, cleanup } = await failingServer();
    try {
      const kept = await app.inject({
        method: "GET",
        url: "/v1/bots/x",
        headers: { "x-request-id": "lb-7f3a.9" },
      });
      expect(kept.statusCode).toBe(401);
      expect(kept.headers["x-request-id"]).toBe("lb-7f3a.9");
      expect(kept.json().error.requestId).toBe("lb-7f3a.9");
      for (const insane of ["a b", "x".repeat(129), "id\u00e9", ""]) {
        const res = await app.inject({
          method: "GET",
          url: "/healthz",
          headers: { "x-request-id": insane },
        });
        expect(res.headers["x-request-id"]).not.toBe(insane);
        expect(res.headers["x-request-id"]).toMatch(/^[0-9a-f-]{36}$/);
      }
      const auth = { authorization: `Bearer ${ADMIN}` };
      for (const [method, url, status] of [
        ["GET", "/nowhere", 404],
        ["POST", "/v1/bots", 400],
        ["GET", "/v1/bots/missing", 404],
      ] as const) {
        const res = await app.inject({ method, url, headers: { ...auth, "x-request-id": `case-${status}` } });
        expect(res.statusCode, url).toBe(status);
        expect(res.json().error.requestId, url).toBe(`case-${status}`);
      }
      expect(lines.some((l) => JSON.parse(l).reqId === "lb-7f3a.9")).toBe(true);
    } finally {
      await cleanup();
    }
  });
});

describe("configuration: token lists and *_FILE secrets", () => {
  const tmp = tempDir("config-files");
  afterAll(() => tmp.cleanup());
  const base = { DRYDOCK_DATA_DIR: tmp.dir };
  const refusal = (env: Record<string, string>) => {
    try {
      loadConfig({ ...base, ...env });
      return null;
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
      return (error as Error).message;
    }
  };

  it("reads DRYDOCK_TOKEN_FILE, BOAT_API_TOKEN_FILE and DRYDOCK_METRICS_TOKEN_FILE, trimmed", () => {
    const put = (name: string, value: string) => {
      const path = join(tmp.dir, name);
      writeFileSync(path, `${value}\n`);
      return path;
    };
    const config = loadConfig({
      ...base,
      DRYDOCK_TOKEN_FILE: put("token", ADMIN),
      BOAT_API_URL: "https://boat.example/api/v1",
      BOAT_API_TOKEN_FILE: put("boat", "boat-secret"),
      DRYDOCK_METRICS_TOKEN_FILE: put("metrics", METRICS),
    });
    expect(config.token).toBe(ADMIN);
    expect(config.provider).toEqual({ apiUrl: "https://boat.example/api/v1", token: "boat-secret" });
    expect(config.metricsToken).toBe(METRICS);
    expect(config.shutdownTimeoutMs).toBe(10_000);
  });

  it("a file that cannot be read, both forms at once, or a bad value names the variable", () => {
    const missing = join(tmp.dir, "nope");
    expect(refusal({ DRYDOCK_TOKEN_FILE: missing })).toBe(
      `invalid configuration: DRYDOCK_TOKEN_FILE: cannot read ${missing}: ENOENT`,
    );
    expect(refusal({ DRYDOCK_METRICS_TOKEN_FILE: tmp.dir })).toBe(
      `invalid configuration: DRYDOCK_METRICS_TOKEN_FILE: cannot read ${tmp.dir}: EISDIR`,
    );
    writeFileSync(join(tmp.dir, "short"), "short");
    expect(refusal({ DRYDOCK_TOKEN_FILE: join(tmp.dir, "short") })).toBe(
      "invalid configuration: DRYDOCK_TOKEN_FILE: must be at least 16 characters",
    );
    expect(refusal({ DRYDOCK_TOKEN: ADMIN, DRYDOCK_TOKEN_FILE: join(tmp.dir, "short") })).toBe(
      "invalid configuration: DRYDOCK_TOKEN_FILE: set DRYDOCK_TOKEN or DRYDOCK_TOKEN_FILE, not both",
    );
    expect(refusal({ DRYDOCK_TOKENS: `a:root:${ADMIN}` })).toBe(
      "invalid configuration: DRYDOCK_TOKENS: entry 1 (a): role must be admin or read",
    );
    expect(refusal({ DRYDOCK_TOKENS: `a:read:${ADMIN},a:admin:${READER}` })).toBe(
      "invalid configuration: DRYDOCK_TOKENS: entry 2: name 'a' appears twice",
    );
    expect(refusal({ DRYDOCK_TOKENS_FILE: missing })).toBe(
      `invalid configuration: DRYDOCK_TOKENS_FILE: cannot read ${missing}: ENOENT`,
    );
    expect(refusal({ DRYDOCK_SHUTDOWN_TIMEOUT_MS: "soon" })).toMatch(
      /^invalid configuration: DRYDOCK_SHUTDOWN_TIMEOUT_MS: /,
    );
  });

  it("drydock-server stops with one line naming the variable and the OS's reason (exit 2)", () => {
    const missing = join(tmp.dir, "secret-that-is-not-there");
    const run = spawnSync(
      process.execPath,
      ["--conditions=@drydock/source", "--import", "tsx", join(REPO_ROOT, "apps/bot-server/src/main.ts")],
      {
        cwd: REPO_ROOT,
        env: {
          ...process.env,
          DRYDOCK_DATA_DIR: tmp.dir,
          PORT: "0",
          BOAT_API_URL: "https://boat.example/api/v1",
          BOAT_API_TOKEN_FILE: missing,
        },
        encoding: "utf8",
        timeout: 60_000,
      },
    );
    expect(run.status).toBe(2);
    expect(run.stderr).toBe(
      `drydock-server: invalid configuration: BOAT_API_TOKEN_FILE: cannot read ${missing}: ENOENT\n`,
    );
    expect(run.stdout).toBe("");
  });
});
