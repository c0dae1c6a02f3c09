/**
 * The file and checkpoint routes on ordinary bad input: a path that is a directory, names too long in
 * bytes, a missing workspace, a crash's leftover temp. Every answer is a typed 4xx that names no server
 * path, and none of them counts as a refusal in the metrics.
 */
import { existsSync, mkdirSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { BoatCreateJournal } from "@drydock/boat-create-journal";
import type { BoatDeleteJournal } from "@drydock/boat-delete-journal";
import type { BoatLifecycle } from "@drydock/boat-lifecycle";
import type { BoatClient } from "@drydock/boat-provider";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildServer } from "../src/app.js";
import { openBotRegistry } from "../src/bots.js";
import { loadConfig } from "../src/config.js";
import { createMetrics } from "../src/metrics.js";
import { type RunningServer, startServer } from "../src/server.js";
import { api, tempDir } from "./helpers.js";

let server: RunningServer;
const tmp = tempDir("file-routes");
let call: ReturnType<typeof api>;
const ws = (botId: string) => join(tmp.dir, "workspaces", botId);
/** A pid no process has (Linux pids stop at 4194304). */
const DEAD_PID = 2147483646;

beforeAll(async () => {
  server = await startServer(loadConfig({ DRYDOCK_DATA_DIR: tmp.dir, PORT: "0", LOG_LEVEL: "silent" }), {
    print: () => {},
  });
  await server.startup;
  call = api(server.url, server.token);
});
afterAll(async () => {
  await server?.close();
  tmp.cleanup();
});

async function newBot(botId: string) {
  expect((await call("POST", "/v1/bots", { name: botId, botId })).status).toBe(201);
}

function expectClean(res: { status: number; text: string }) {
  expect(res.status).toBeGreaterThanOrEqual(400);
  expect(res.status).toBeLessThan(500);
  expect(res.text).not.toContain(tmp.dir);
  expect(res.text).not.toMatch(/free space/i);
}

describe("ordinary bad paths answer typed 4xx errors", () => {
  it("PUT to a path that is a directory answers 409 path_is_directory, not counted as a refusal", async () => {
    await newBot("dirs");
    expect((await call("PUT", "/v1/bots/dirs/files/sub/a.txt", "x")).status).toBe(201);
    const res = await call("PUT", "/v1/bots/dirs/files/sub", "x");
    expectClean(res);
    expect(res.status).toBe(409);
    expect(res.json.error.code).toBe("path_is_directory");
    const metrics = (await call("GET", "/metrics")).text;
    expect(metrics).not.toMatch(/drydock_refusals_total\{[^}]*path_is_directory/);
    expect(metrics).not.toMatch(/drydock_refusals_total\{status="50[03]"/);
  });

  it("limits names and paths by bytes: too long answers 400 path_too_long; 200 bytes still works", async () => {
    await newBot("names");
    for (const path of [
      "a".repeat(250), // fits NAME_MAX alone, not with the temp suffix
      "é".repeat(128), // 128 characters, 256 bytes
      Array.from({ length: 10 }, () => "é".repeat(60)).join("/"), // 609 characters, 1,209 bytes
    ]) {
      const res = await call(
        "PUT",
        `/v1/bots/names/files/${encodeURIComponent(path).replaceAll("%2F", "/")}`,
        "x",
      );
      expectClean(res);
      expect(res.status, path.slice(0, 20)).toBe(400);
      expect(res.json.error.code).toBe("path_too_long");
    }
    const ok = await call("PUT", `/v1/bots/names/files/${encodeURIComponent("é".repeat(100))}`, "x");
    expect(ok.status).toBe(201);
    const metrics = (await call("GET", "/metrics")).text;
    expect(metrics).not.toMatch(/drydock_refusals_total\{status="50[03]"/);
  });

  it("refuses a symlinked parent created before the request; nothing is written outside", async () => {
    await newBot("linked");
    const outside = join(tmp.dir, "outside");
    mkdirSync(outside);
    symlinkSync(outside, join(ws("linked"), "d"));
    const res = await call("PUT", "/v1/bots/linked/files/d/f", "x");
    expectClean(res);
    expect(res.status).toBe(400);
    expect(readdirSync(outside)).toEqual([]);
  });
});

describe("a crash's leftover temp", () => {
  it("is never served, is swept by the next write and checkpoint, and is not captured", async () => {
    await newBot("temps");
    expect((await call("PUT", "/v1/bots/temps/files/sub/a.txt", "a")).status).toBe(201);
    const topTemp = `.a.txt.${DEAD_PID}.0123456789abcdef.tmp`;
    const subTemp = `.b.txt.${DEAD_PID}.fedcba9876543210.tmp`;
    writeFileSync(join(ws("temps"), topTemp), "partial");
    writeFileSync(join(ws("temps"), "sub", subTemp), "partial");

    const get = await call("GET", `/v1/bots/temps/files/${topTemp}`);
    expectClean(get);
    expect(get.status).toBe(400);
    const put = await call("PUT", `/v1/bots/temps/files/${topTemp}`, "mine");
    expect(put.status).toBe(400);

    expect((await call("PUT", "/v1/bots/temps/files/b.txt", "b")).status).toBe(201);
    expect(existsSync(join(ws("temps"), topTemp))).toBe(false);
    const created = await call("POST", "/v1/bots/temps/checkpoints");
    expect(created.status).toBe(201);
    expect(existsSync(join(ws("temps"), "sub", subTemp))).toBe(false);
    // sub/a.txt and b.txt only: neither temp is in the checkpoint.
    expect(created.json.checkpoint.files).toBe(2);
  });
});

describe("a missing workspace", () => {
  it("is not recreated by reads (404), and is recreated by a write or a checkpoint", async () => {
    await newBot("gone");
    rmSync(ws("gone"), { recursive: true, force: true });
    const get = await call("GET", "/v1/bots/gone/files/a.txt");
    expectClean(get);
    expect(get.status).toBe(404);
    expect(get.json.error.code).toBe("file_not_found");
    const del = await call("DELETE", "/v1/bots/gone/files/a.txt");
    expectClean(del);
    expect(del.status).toBe(404);
    const list = await call("GET", "/v1/bots/gone/checkpoints");
    expect(list.status).toBe(200);
    expect(list.json.checkpoints).toEqual([]);
    expect(existsSync(ws("gone"))).toBe(false);

    const checkpoint = await call("POST", "/v1/bots/gone/checkpoints");
    expect(checkpoint.status).toBe(201);
    rmSync(ws("gone"), { recursive: true, force: true });
    const put = await call("PUT", "/v1/bots/gone/files/a.txt", "back");
    expect(put.status).toBe(201);
    expect((await call("GET", "/v1/bots/gone/files/a.txt")).text).toBe("back");
  });
});

describe("GET /v1/bots/:botId/checkpoints", () => {
  it("returns checkpointId, createdAt, kind, files and bytes only: no server path", async () => {
    await newBot("rows");
    expect((await call("PUT", "/v1/bots/rows/files/a.txt", "abc")).status).toBe(201);
    expect((await call("POST", "/v1/bots/rows/checkpoints")).status).toBe(201);
    const res = await call("GET", "/v1/bots/rows/checkpoints");
    expect(res.status).toBe(200);
    expect(res.text).not.toContain(tmp.dir);
    expect(res.json.checkpoints).toHaveLength(1);
    expect(Object.keys(res.json.checkpoints[0]).sort()).toEqual(
      ["bytes", "checkpointId", "createdAt", "files", "kind"].sort(),
    );
  });
});

describe("the start banner", () => {
  it("prints BOAT_API_URL without its userinfo", async () => {
    const dir = tempDir("banner");
    const lines: string[] = [];
    const other = await startServer(
      loadConfig({
        DRYDOCK_DATA_DIR: dir.dir,
        PORT: "0",
        LOG_LEVEL: "silent",
        BOAT_API_URL: "http://someone:s3cret-pw@127.0.0.1:9/api/v1",
        BOAT_API_TOKEN: "t".repeat(32),
      }),
      { print: (line) => lines.push(line) },
    );
    try {
      const banner = lines.join("\n");
      expect(banner).toContain("boat.dev:       http://127.0.0.1:9/api/v1");
      expect(banner).not.toContain("s3cret-pw");
      expect(banner).not.toContain("someone");
    } finally {
      await other.close();
      dir.cleanup();
    }
  });
});

describe("DELETE /v1/bots/:botId with an unnamed Boat", () => {
  it("names what to confirm: the lifecycle's scoped Boat name, in details.name and the message", async () => {
    const dir = tempDir("unnamed");
    const bots = openBotRegistry(dir.dir);
    await bots.create({ botId: "nameless", name: "Nameless" });
    const row = { botId: "nameless", boxId: "box_unnamed", resolved: true };
    const app = await buildServer({
      dataDir: dir.dir,
      token: "t".repeat(32),
      maxFileBytes: 1024,
      bots,
      lifecycle: {
        findBoat: async () => ({ boxId: "box_unnamed", name: null }),
        boatNameFor: (botId: string) => `drydock-scoped-${botId}`,
      } as unknown as BoatLifecycle,
      createJournal: { boatCreateRecoverySnapshot: async () => [row] } as unknown as BoatCreateJournal,
      deleteJournal: { hasPendingBoatDeletionForBot: async () => false } as unknown as BoatDeleteJournal,
      client: {} as BoatClient,
      metrics: createMetrics(),
      recovery: { plan: async () => ({ items: [], providerListed: true }) as never },
      startupReport: () => null,
      logger: false,
    });
    try {
      const res = await app.inject({
        method: "DELETE",
        url: "/v1/bots/nameless",
        headers: { authorization: `Bearer ${"t".repeat(32)}` },
      });
      expect(res.statusCode).toBe(409);
      const body = res.json();
      expect(body.error.code).toBe("confirmation_required");
      expect(body.error.details).toEqual({ boxId: "box_unnamed", name: "drydock-scoped-nameless" });
      expect(body.error.message).toContain('"confirmName": "drydock-scoped-nameless"');
    } finally {
      await app.close();
      dir.cleanup();
    }
  });
});

describe("names that display as something else", () => {
  it("a bot name with a control character (NUL, newline, C1) or a bidi control is refused, 400", async () => {
    for (const name of ["a\u0000b", "two\nlines", "c1\u0085", "evil\u202etxt.exe", "iso\u2066late"]) {
      const res = await call("POST", "/v1/bots", { name });
      expect(res.status, JSON.stringify(name)).toBe(400);
      expect(res.json.error.code).toBe("invalid_request");
      expect(res.json.error.details).toEqual({ field: "body.name" });
    }
    // Emoji joined with ZWJ (a format character, not a bidi control) stay fine.
    expect((await call("POST", "/v1/bots", { name: "crew 👩‍🚀", botId: "crew" })).status).toBe(201);
  });

  it("a file path with a bidirectional control character is refused as invalid_path", async () => {
    await newBot("bidi");
    const res = await call("PUT", `/v1/bots/bidi/files/${encodeURIComponent("invoice\u202efdp.exe")}`, "x");
    expectClean(res);
    expect(res.status).toBe(400);
    expect(res.json.error.code).toBe("invalid_path");
    expect(res.json.error.message).toContain("bidirectional text control character");
    expect((await call("PUT", "/v1/bots/bidi/files/plain.txt", "x")).status).toBe(201);
  });
});
