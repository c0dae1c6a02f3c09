import { readFileSync } from "node:fs";
import { join } from "node:path";
import { scopedBoatName } from "@drydock/boat-lifecycle";
import { type BoatSimulator, startBoatSimulator } from "@drydock/boat-provider/simulator";
import { afterEach, describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../src/config.js";
import { type RunningServer, startServer } from "../src/server.js";
import { api, tempDir } from "./helpers.js";

/**
 * Provisioning through the server in an account of thousands of Boats (issue #23): the one-time name sweep
 * answers 503 name_sweep_incomplete with Retry-After while it reads, a retry continues it, and once it
 * is complete a provision lists nothing. The provider is a real simulator, seeded with foreign Boats.
 */

let server: RunningServer | undefined;
let sim: BoatSimulator | undefined;
const dirs: Array<{ cleanup(): void }> = [];

afterEach(async () => {
  await server?.close();
  await sim?.close();
  server = undefined;
  sim = undefined;
  for (const dir of dirs.splice(0)) dir.cleanup();
});

/** A server on a fresh data directory whose provider is `sim`, its list requests counted by path. */
async function serverOn(simulator: BoatSimulator, inlinePages: string) {
  const tmp = tempDir("name-sweep");
  dirs.push(tmp);
  server = await startServer(
    loadConfig({
      DRYDOCK_DATA_DIR: tmp.dir,
      PORT: "0",
      LOG_LEVEL: "silent",
      BOAT_API_URL: simulator.apiUrl,
      BOAT_API_TOKEN: simulator.token,
      DRYDOCK_NAME_SWEEP_INLINE_PAGES: inlinePages,
    }),
    { print: () => {} },
  );
  await server.startup;
  return { call: api(server.url, server.token), dataDir: tmp.dir };
}

describe("DRYDOCK_NAME_SWEEP_INLINE_PAGES", () => {
  it("defaults to 10 and refuses anything but an integer from 0 to 100000, naming the variable", () => {
    expect(loadConfig({}).nameSweepInlinePages).toBe(10);
    expect(loadConfig({ DRYDOCK_NAME_SWEEP_INLINE_PAGES: "0" }).nameSweepInlinePages).toBe(0);
    for (const bad of ["-1", "2.5", "many", "100001"]) {
      expect(() => loadConfig({ DRYDOCK_NAME_SWEEP_INLINE_PAGES: bad })).toThrow(ConfigError);
      expect(() => loadConfig({ DRYDOCK_NAME_SWEEP_INLINE_PAGES: bad })).toThrow(
        /^invalid configuration: DRYDOCK_NAME_SWEEP_INLINE_PAGES: /,
      );
    }
  });
});

describe("provisioning in an account of 4,000 Boats", () => {
  it("503 name_sweep_incomplete with Retry-After while the list is read, then the Boat; no Boat before, one after", async () => {
    sim = await startBoatSimulator({ provisionMs: 0 });
    sim.seed({ count: 4_000, namePrefix: "someone-else-" }); // 20 pages: twice the old cap
    // The background walk's first page is held for a while, so the first provision (one inline page,
    // read after it: one page at a time) cannot find the walk complete.
    await fetch(`${sim.url}/_sim/faults`, {
      method: "POST",
      headers: { authorization: `Bearer ${sim.token}`, "content-type": "application/json" },
      body: JSON.stringify({ rules: [{ method: "GET", path: "^/sandboxes$", action: "delay", ms: 3_000 }] }),
    });
    const { call, dataDir } = await serverOn(sim, "1");
    expect((await call("POST", "/v1/bots", { name: "Ada", botId: "ada" })).status).toBe(201);
    const answers: number[] = [];
    let firstMessage = "";
    for (let attempt = 0; attempt < 40; attempt += 1) {
      const res = await call("POST", "/v1/bots/ada/computer");
      answers.push(res.status);
      if (res.status === 503) {
        const error = (res.json as { error: { code: string; message: string } }).error;
        expect(error.code).toBe("name_sweep_incomplete");
        if (firstMessage === "") firstMessage = error.message;
        expect(error.message).toMatch(/^nothing was created: drydock is still reading boat\.dev's list/);
        expect(res.headers.get("retry-after")).toBe("1");
        expect(sim.stats().createRequests).toBe(0);
        continue;
      }
      expect(res.status).toBe(201);
      break;
    }
    expect(answers[0]).toBe(503);
    // The first answer came after the background's page and exactly one page of its own (the configured 1).
    expect(firstMessage).toContain("(2 pages (400 Boats) read so far, and the list goes on)");
    expect(answers.at(-1)).toBe(201);
    const environmentId = readFileSync(join(dataDir, "environment-id"), "utf8").trim();
    expect(sim.stats().perName[scopedBoatName(environmentId, "ada")]).toBe(1);
    expect(sim.stats().createsCommitted).toBe(1);
    // Complete now: the next bot's first provision is answered at once.
    expect((await call("POST", "/v1/bots", { name: "Bob", botId: "bob" })).status).toBe(201);
    expect((await call("POST", "/v1/bots/bob/computer")).status).toBe(201);
  });
});
