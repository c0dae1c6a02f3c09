/**
 * GET /console/: the operator console's page and assets, served by the bot server from the build that ships
 * inside it (routes/console.ts). The page holds no data, so it loads without a token; everything it reads
 * or changes still needs one.
 */

import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { consoleAssetsDir } from "../src/routes/console.js";
import type { RunningServer } from "../src/server.js";
import { api, inProcessServer, REPO_ROOT } from "./helpers.js";

const CONSOLE_APP = join(REPO_ROOT, "apps", "console");

// Running from sources, the server serves apps/console's own build: made here when it is missing (a fresh
// clone whose tests run before `pnpm build`), so this suite never depends on a build step done by hand.
beforeAll(() => {
  if (consoleAssetsDir() !== null) return;
  execFileSync(
    process.execPath,
    [join(CONSOLE_APP, "node_modules", "vite", "bin", "vite.js"), "build", "--logLevel", "warn"],
    {
      cwd: CONSOLE_APP,
      stdio: "inherit",
    },
  );
});

let server: RunningServer;
inProcessServer("console-route", (started) => {
  server = started;
});

describe("the console under /console/", () => {
  it("serves the page without a token, with strict headers, and its hashed assets", async () => {
    const dir = consoleAssetsDir();
    expect(dir).not.toBeNull();
    expect(existsSync(join(dir!, "index.html"))).toBe(true);
    const anonymous = api(server.url, null);
    const redirect = await fetch(`${server.url}/console`, { redirect: "manual" });
    expect(redirect.status).toBe(308);
    expect(redirect.headers.get("location")).toBe("/console/");

    const page = await anonymous("GET", "/console/");
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toMatch(/^text\/html/);
    expect(page.text).toBe(readFileSync(join(dir!, "index.html"), "utf8"));
    expect(page.headers.get("content-security-policy")).toContain("default-src 'self'");
    expect(page.headers.get("content-security-policy")).toContain("frame-ancestors 'none'");
    expect(page.headers.get("cache-control")).toBe("no-cache");
    const script = /src="(\/console\/assets\/[^"]+\.js)"/.exec(page.text)?.[1];
    expect(script).toBeDefined();
    const asset = await anonymous("GET", script!);
    expect(asset.status).toBe(200);
    expect(asset.headers.get("content-type")).toMatch(/javascript/);
    expect(asset.headers.get("cache-control")).toContain("immutable");
  });

  it("exempts only the console from the token: the API, the token file and other paths still need it", async () => {
    const anonymous = api(server.url, null);
    for (const path of [
      "/v1/bots",
      "/v1/recovery",
      "/v1/recovery/restores/op-1/abort",
      "/consoles",
      "/console-x",
    ]) {
      const res = await anonymous("GET", path);
      expect(res.status, path).toBe(401);
    }
    for (const path of [
      "/console/../server-token",
      "/console/%2e%2e/server-token",
      "/console/..%2fserver-token",
    ]) {
      const res = await anonymous("GET", path);
      expect(res.status, path).toBeGreaterThanOrEqual(400);
      expect(res.text, path).not.toContain(server.token);
    }
    expect((await anonymous("GET", "/console/no-such-asset.js")).status).toBe(404);
  });
});
