import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { openBotRegistry } from "../src/bots.js";
import { decodeCursor, encodeCursor } from "../src/routes/pagination.js";
import type { RunningServer } from "../src/server.js";
import { api, inProcessServer } from "./helpers.js";

let server: RunningServer;
inProcessServer("pagination", (started) => {
  server = started;
});

type Page = { bots: { botId: string }[]; nextCursor: string | null };

describe("GET /v1/bots is paginated", () => {
  it("pages cover every bot once in botId order, under creates and deletes between pages", async () => {
    const call = api(server.url, server.token);
    const ids = Array.from({ length: 12 }, (_, i) => `b${String(i).padStart(2, "0")}`);
    for (const botId of ids)
      expect((await call("POST", "/v1/bots", { name: botId, botId })).status).toBe(201);
    const seen: string[] = [];
    let cursor: string | null = null;
    let round = 0;
    do {
      const query: string = cursor === null ? "?limit=5" : `?limit=5&cursor=${encodeURIComponent(cursor)}`;
      const res = await call("GET", `/v1/bots${query}`);
      expect(res.status).toBe(200);
      const page = res.json as Page;
      expect(page.bots.length).toBeLessThanOrEqual(5);
      seen.push(...page.bots.map((b) => b.botId));
      cursor = page.nextCursor;
      // Between pages: one bot created before and one after the position, one already-listed deleted.
      round += 1;
      if (round === 1) {
        expect((await call("POST", "/v1/bots", { name: "a", botId: "a00" })).status).toBe(201);
        expect((await call("POST", "/v1/bots", { name: "z", botId: "z99" })).status).toBe(201);
        expect((await call("DELETE", "/v1/bots/b00")).status).toBe(200);
      }
    } while (cursor !== null);
    expect(new Set(seen).size).toBe(seen.length);
    expect([...seen].sort()).toEqual(seen);
    // Every bot that existed throughout is listed; the one created after the position is too.
    for (const botId of ids.slice(1)) expect(seen).toContain(botId);
    expect(seen).toContain("z99");
    expect(seen).not.toContain("a00");
  });

  it("defaults to 100, bounds limit to 1..500, and refuses an invalid cursor with invalid_cursor", async () => {
    const call = api(server.url, server.token);
    expect((await call("GET", "/v1/bots")).json.nextCursor).toBeNull();
    for (const limit of ["0", "501", "-1", "x", "1.5"]) {
      expect((await call("GET", `/v1/bots?limit=${limit}`)).status).toBe(400);
    }
    expect((await call("GET", "/v1/bots?limit=500")).status).toBe(200);
    for (const cursor of [
      "nope",
      encodeURIComponent(Buffer.from('{"v":2,"after":"x"}').toString("base64url")),
    ]) {
      const res = await call("GET", `/v1/bots?cursor=${cursor}`);
      expect(res.status).toBe(400);
      expect(res.json.error.code).toBe("invalid_cursor");
      expect(res.json.error.message).toMatch(/first page/);
    }
  });
});

describe("registry.page", () => {
  it("cursors round-trip", () => {
    expect(decodeCursor(encodeCursor("bot_1"))).toBe("bot_1");
    expect(decodeCursor(undefined)).toBeUndefined();
  });

  it("over random bot sets and page sizes, pages are the sorted set, each id once", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.uniqueArray(fc.stringMatching(/^[a-z0-9_-]{1,8}$/), { maxLength: 30 }),
        fc.integer({ min: 1, max: 12 }),
        async (ids, limit) => {
          const dir = mkdtempSync(join(tmpdir(), "drydock-page-"));
          try {
            const registry = openBotRegistry(dir);
            for (const botId of ids) await registry.create({ botId, name: botId });
            expect(await registry.count()).toBe(ids.length);
            const seen: string[] = [];
            let after: string | undefined;
            for (;;) {
              const page = await registry.page({ ...(after === undefined ? {} : { after }), limit });
              expect(page.bots.length).toBeLessThanOrEqual(limit);
              seen.push(...page.bots.map((b) => b.botId));
              if (page.next === null) break;
              expect(page.bots.length).toBe(limit);
              after = page.next;
            }
            expect(seen).toEqual([...ids].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
          } finally {
            rmSync(dir, { recursive: true, force: true });
          }
        },
      ),
      { numRuns: 40 },
    );
  });
});
