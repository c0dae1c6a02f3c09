import { readFileSync } from "node:fs";
import { join } from "node:path";
import { scopedBoatName } from "@drydock/boat-lifecycle";
import { type BoatSimulator, startBoatSimulator } from "@drydock/boat-provider/simulator";
import { simFaults } from "@drydock/test-kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../src/config.js";
import { type RunningServer, startServer } from "../src/server.js";
import { type Api, api, tempDir } from "./helpers.js";

/**
 * GET /v1/computers and GET /v1/recovery in an account past boat.dev's 10th page of 200 (issue #23): both
 * used to fail closed past 2,000 Boats. The computers are paginated (every Boat of this installation once,
 * a stable order, bounded pages), the recovery report is complete and names a Boat with our name listed
 * past page 10, and a list fault answers a typed error after which the next call works. A real server on a
 * real simulator, seeded cheaply (POST /_sim/sandboxes in process).
 */

let server: RunningServer;
let sim: BoatSimulator;
let call: Api;
const dir = tempDir("large-account");
/** Every Boat GET /v1/computers must list: 3 provisioned, 15 unknown with our names, the last past page 10. */
const ours: string[] = [];
let late: string;

const faults = (rules: unknown[]) => simFaults(sim, rules);

beforeAll(async () => {
  sim = await startBoatSimulator({ provisionMs: 0 });
  server = await startServer(
    loadConfig({
      DRYDOCK_DATA_DIR: dir.dir,
      PORT: "0",
      LOG_LEVEL: "silent",
      BOAT_API_URL: sim.apiUrl,
      BOAT_API_TOKEN: sim.token,
    }),
    { print: () => {} },
  );
  await server.startup;
  call = api(server.url, server.token);
  for (const botId of ["ada", "bob", "cy"]) {
    expect((await call("POST", "/v1/bots", { name: botId, botId })).status).toBe(201);
    const made = await call("POST", `/v1/bots/${botId}/computer`);
    expect(made.status).toBe(201);
    ours.push((made.json as { computer: { boxId: string } }).computer.boxId);
  }
  const environmentId = readFileSync(join(dir.dir, "environment-id"), "utf8").trim();
  // One seeding call, so boat.dev lists them in exactly this order (createdAt 1 ms apart): 150 foreign
  // Boats, then one with our name that no journal knows, 14 times; then the last one, past page 10.
  const names: string[] = [];
  const mine: number[] = [];
  for (let i = 0; i < 14; i += 1) {
    for (let j = 0; j < 150; j += 1) names.push(`someone-else-${i}-${j}`);
    mine.push(names.push(scopedBoatName(environmentId, `lost-${i}`)) - 1);
  }
  mine.push(names.push(scopedBoatName(environmentId, "lost-late")) - 1);
  const seeded = sim.seed({ names });
  for (const index of mine) ours.push(seeded[index] as string);
  late = seeded.at(-1) as string;
}, 120_000);

afterAll(async () => {
  await server?.close();
  await sim?.close();
  dir.cleanup();
});

type Page = { computers: Array<{ boxId: string; ownerBotId: string | null }>; nextCursor: string | null };

async function allPages(limit: number): Promise<Page[]> {
  const pages: Page[] = [];
  let cursor: string | null = null;
  do {
    const query: string = `?limit=${limit}${cursor === null ? "" : `&cursor=${encodeURIComponent(cursor)}`}`;
    const res = await call("GET", `/v1/computers${query}`);
    expect(res.status, res.text).toBe(200);
    const page = res.json as Page;
    pages.push(page);
    cursor = page.nextCursor;
  } while (cursor !== null && pages.length < 500);
  return pages;
}

describe("GET /v1/computers in an account of 2,118 Boats", () => {
  it("pages through every Boat of this installation once, in a stable order, each page bounded", async () => {
    const pages = await allPages(4);
    const ids = pages.flatMap((page) => page.computers.map((computer) => computer.boxId));
    expect(ids.length).toBe(new Set(ids).size);
    expect([...ids].sort()).toEqual([...ours].sort());
    expect(ids).toContain(late);
    for (const page of pages) expect(page.computers.length).toBeLessThanOrEqual(4);
    expect(pages.length).toBeGreaterThan(ours.length / 4);
    // The same order when listed again, and with another page size.
    expect((await allPages(4)).flatMap((page) => page.computers.map((c) => c.boxId))).toEqual(ids);
    expect((await allPages(500)).flatMap((page) => page.computers.map((c) => c.boxId))).toEqual(ids);
    // The first page defaults to at most 100.
    const first = await call("GET", "/v1/computers");
    expect((first.json as Page).computers.length).toBeLessThanOrEqual(100);
  });

  it("refuses a limit past 500 and a cursor it never answered (400), changing nothing", async () => {
    expect((await call("GET", "/v1/computers?limit=501")).status).toBe(400);
    const bad = await call("GET", "/v1/computers?cursor=not-a-cursor");
    expect(bad.status).toBe(400);
    expect((bad.json as { error: { code: string; message: string } }).error).toMatchObject({
      code: "invalid_cursor",
      message: expect.stringContaining("Restart from the first page"),
    });
  });

  it("a list fault: 503 provider_unavailable saying nothing changed and the same cursor retries; then the listing goes on", async () => {
    const first = (await call("GET", "/v1/computers?limit=3")).json as Page; // the journal's three Boats
    expect(first.computers.map((c) => c.ownerBotId).sort()).toEqual(["ada", "bob", "cy"]);
    await faults([{ method: "GET", path: "^/sandboxes$", action: "fail-before", status: 503, times: 1 }]);
    const cursor = encodeURIComponent(first.nextCursor as string);
    const failed = await call("GET", `/v1/computers?limit=3&cursor=${cursor}`);
    expect(failed.status).toBe(503);
    const error = (failed.json as { error: { code: string; message: string } }).error;
    expect(error.code).toBe("provider_unavailable");
    expect(error.message).toMatch(
      /Nothing was changed; retrying the same page \(the same cursor\) continues/,
    );
    const retried = await call("GET", `/v1/computers?limit=3&cursor=${cursor}`);
    expect(retried.status).toBe(200);
    // The listing goes on from there to its end: every Boat once, none lost to the fault.
    const seen = first.computers.map((c) => c.boxId);
    let page = retried.json as Page;
    for (;;) {
      seen.push(...page.computers.map((c) => c.boxId));
      if (page.nextCursor === null) break;
      page = (await call("GET", `/v1/computers?limit=3&cursor=${encodeURIComponent(page.nextCursor)}`))
        .json as Page;
    }
    expect(seen.length).toBe(new Set(seen).size);
    expect([...seen].sort()).toEqual([...ours].sort());
  });
});

describe("GET /v1/recovery in an account of 2,118 Boats", () => {
  type Recovery = {
    complete: boolean;
    boats: Array<{ kind: string; boxId: string | null }>;
    unreadable: Array<{ subject: string; message: string }>;
  };

  it("answers complete (no 'inventory incomplete'), naming the unknown Boat listed past page 10", async () => {
    const res = await call("GET", "/v1/recovery");
    expect(res.status).toBe(200);
    const body = res.json as Recovery;
    expect(body.unreadable).toEqual([]);
    expect(body.complete).toBe(true);
    expect(res.text).not.toMatch(/inventory is incomplete|pages of Boats/);
    expect(body.boats).toContainEqual(expect.objectContaining({ kind: "unknown_boat", boxId: late }));
  });

  it("a list fault: says boat.dev could not be listed, how far it got and that a retry reads it again; the next call is complete", async () => {
    await faults([{ method: "GET", path: "^/sandboxes$", action: "fail-before", status: 503, times: 1 }]);
    const failed = (await call("GET", "/v1/recovery")).json as Recovery;
    expect(failed.complete).toBe(false);
    expect(failed.unreadable).toContainEqual(
      expect.objectContaining({
        subject: "boat.dev",
        message: expect.stringContaining("read so far; a retry reads it again from its start"),
      }),
    );
    const again = (await call("GET", "/v1/recovery")).json as Recovery;
    expect(again.complete).toBe(true);
    expect(again.boats).toContainEqual(expect.objectContaining({ kind: "unknown_boat", boxId: late }));
  });
});
