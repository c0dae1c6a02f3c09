import { describe, expect, it } from "vitest";
import { BoatApiError, isBoatApiError, isRefusedCursor, type Sandbox, walkSandboxes } from "../src/index.js";

/**
 * walkSandboxes: boat.dev's whole list with no page cap, its position kept across a failed page, a cursor
 * handed back twice refused, a refused cursor starting it again. A scripted list (pages of 2) whose answers
 * the test decides one by one.
 */

function boat(i: number): Sandbox {
  return {
    id: `bx_${String(i).padStart(8, "0")}`,
    name: `b${i}`,
    state: "running",
    createdAt: new Date(1_700_000_000_000 + i).toISOString(),
    ttlSeconds: 60,
  } as Sandbox;
}

/** A list of `total` Boats in pages of `limit`; `fail(call)` may throw for a given call number (0-based). */
function scripted(total: number, fail: (call: number, cursor: string | undefined) => unknown = () => null) {
  const calls: Array<string | undefined> = [];
  return {
    calls,
    async listSandboxes(options: { cursor?: string; limit?: number } = {}) {
      const call = calls.length;
      calls.push(options.cursor);
      const failure = fail(call, options.cursor);
      if (failure !== null) throw failure;
      const limit = options.limit ?? 200;
      const start = options.cursor === undefined ? 0 : Number(options.cursor.slice(2));
      const sandboxes = Array.from({ length: Math.max(0, Math.min(limit, total - start)) }, (_, i) =>
        boat(start + i),
      );
      const end = start + sandboxes.length;
      return { sandboxes, nextCursor: end < total ? `c:${end}` : null };
    },
  };
}

const failure = (status: number, code: string) =>
  new BoatApiError({ status, code, message: `boat.dev answered ${status}` });

describe("walkSandboxes", () => {
  it("reads every page to the end, far past listAllSandboxes' 10 pages, each Boat once", async () => {
    const client = scripted(51);
    const walk = walkSandboxes(client, { pageSize: 2 });
    const ids: string[] = [];
    while (!walk.complete) for (const sandbox of await walk.next()) ids.push(sandbox.id);
    expect(walk.pagesRead).toBe(26);
    expect(walk.boatsSeen).toBe(51);
    expect(new Set(ids).size).toBe(51);
    expect(ids[50]).toBe(boat(50).id);
    expect(walk.progress()).toBe("26 pages (51 Boats) read so far");
    expect(await walk.next()).toEqual([]); // complete: nothing more is sent
    expect(client.calls).toHaveLength(26);
  });

  it("a failed page throws boat.dev's own error and keeps the position: the next call reads that page again", async () => {
    const client = scripted(10, (call) => (call === 3 ? failure(503, "service_unavailable") : null));
    const walk = walkSandboxes(client, { pageSize: 2 });
    for (let i = 0; i < 3; i += 1) await walk.next();
    const error = await walk.next().catch((e: unknown) => e);
    expect(isBoatApiError(error) && error.status).toBe(503);
    expect(walk.progress()).toBe("3 pages (6 Boats) read so far");
    expect(walk.cursor).toBe("c:6");
    expect((await walk.next()).map((s) => s.id)).toEqual([boat(6).id, boat(7).id]);
    expect(client.calls.slice(3)).toEqual(["c:6", "c:6"]);
  });

  it("a cursor handed back twice is pagination_loop (502), naming the progress", async () => {
    const walk = walkSandboxes({
      async listSandboxes() {
        return { sandboxes: [boat(1)], nextCursor: "same" };
      },
    });
    await walk.next();
    const error = await walk.next().catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "pagination_loop", status: 502 });
    expect((error as Error).message).toContain("(1 page (1 Boat) read so far)");
    expect(walk.complete).toBe(false);
  });

  it("boat.dev refusing the saved cursor starts the walk again from the first page", async () => {
    const client = scripted(6, (call) => (call === 2 ? failure(400, "invalid_cursor") : null));
    const walk = walkSandboxes(client, { pageSize: 2 });
    await walk.next();
    await walk.next();
    const error = await walk.next().catch((e: unknown) => e);
    expect(isRefusedCursor(error)).toBe(true);
    expect(walk.pagesRead).toBe(0);
    expect(walk.cursor).toBeUndefined();
    while (!walk.complete) await walk.next();
    expect(client.calls).toEqual([undefined, "c:2", "c:4", undefined, "c:2", "c:4"]);
  });

  it("starts from a given cursor", async () => {
    const client = scripted(6);
    const walk = walkSandboxes(client, { pageSize: 2, cursor: "c:4" });
    expect((await walk.next()).map((s) => s.id)).toEqual([boat(4).id, boat(5).id]);
    expect(walk.complete).toBe(true);
  });
});
