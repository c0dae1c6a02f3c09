import { BoatApiError, BoatTransportError, type Sandbox } from "@drydock/boat-provider";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { classifyName, legacyBoatName, scopedBoatName } from "../names.js";
import type { SweepContext } from "./context.js";
import { createNameSweep, resolveNameSweepOptions } from "./name-sweep.js";

const ENV = "4f1d2c3b-aaaa-4bbb-8ccc-123456789abc";
const OTHER_ENV = "9e8d7c6b-1111-4222-8333-abcdefabcdef";

/**
 * An in-memory keyset-paged list (the cursor is the index of the next Boat), failing the page reads
 * whose number (1-based, counting every request) is in `failAt`.
 */
function pagedClient(boats: readonly Sandbox[], failAt: ReadonlySet<number>) {
  let requests = 0;
  const starts: number[] = [];
  const client = {
    async listSandboxes(options: { limit?: number; cursor?: string } = {}) {
      requests += 1;
      const start = options.cursor === undefined ? 0 : Number(options.cursor);
      starts.push(start);
      if (failAt.has(requests)) {
        if (requests % 2 === 0) {
          throw new BoatApiError({
            status: 503,
            code: "service_unavailable",
            message: "Service unavailable.",
          });
        }
        throw new BoatTransportError({ phase: "response", timedOut: false, request: "GET /sandboxes" });
      }
      const end = start + (options.limit ?? 50);
      return {
        sandboxes: boats.slice(start, end),
        nextCursor: end < boats.length ? String(end) : null,
      };
    },
  };
  return { client, starts: () => starts };
}

function sandbox(id: number, name: string | null): Sandbox {
  return {
    id: `bx_${String(id).padStart(8, "0")}`,
    name,
    state: "running",
    createdAt: new Date(0).toISOString(),
    ttlSeconds: 60,
  } as Sandbox;
}

const nameArb = fc.oneof(
  fc.constant(null),
  fc.string({ minLength: 1, maxLength: 20 }),
  fc.constantFrom("bot-1", "bot-2", "Bot_3", "x").map((bot) => scopedBoatName(ENV, bot)),
  fc.constantFrom("bot-1", "bot-2", "Bot_3", "x").map((bot) => legacyBoatName(bot)),
  fc.constantFrom("bot-1", "bot-2").map((bot) => scopedBoatName(OTHER_ENV, bot)),
);

describe("name sweep index", () => {
  it("property: for any account, page size and failed pages, the index is exactly the list filtered to our names", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(nameArb, { maxLength: 60 }),
        fc.integer({ min: 1, max: 7 }),
        fc.uniqueArray(fc.integer({ min: 1, max: 40 }), { maxLength: 10 }),
        async (names, pageSize, failures) => {
          const boats = names.map((name, i) => sandbox(i, name));
          const { client, starts } = pagedClient(boats, new Set(failures));
          const ctx = {
            client,
            environmentId: ENV,
            logger: {},
            sleep: async () => {},
          } as unknown as SweepContext;
          const sweep = createNameSweep(ctx, resolveNameSweepOptions({ inlinePages: 1, pageSize }));
          for (let calls = 0; !sweep.status().complete; calls += 1) {
            if (calls > 200) throw new Error("the sweep never completed");
            await sweep.ensureComplete().catch(() => {});
          }
          const expected = new Map<string, string[]>();
          for (const boat of boats) {
            if (boat.name === null || classifyName(ENV, boat.name) === "foreign") continue;
            expected.set(boat.name, [...(expected.get(boat.name) ?? []), boat.id]);
          }
          for (const boat of boats) {
            if (boat.name === null) continue;
            expect(sweep.idsFor([boat.name])).toEqual([...(expected.get(boat.name) ?? [])].sort());
          }
          expect(sweep.status()).toMatchObject({
            indexed: [...expected.values()].flat().length,
            boatsSeen: boats.length,
            pagesRead: Math.max(1, Math.ceil(boats.length / pageSize)),
          });
          // Pages are read in order and a failed page is asked again, never an earlier one.
          const seen = starts();
          for (let i = 1; i < seen.length; i += 1)
            expect(seen[i]).toBeGreaterThanOrEqual(seen[i - 1] as number);
        },
      ),
      { numRuns: 200 },
    );
  });

  it("refuses bad options before anything is read", () => {
    expect(() => resolveNameSweepOptions({ inlinePages: -1 })).toThrow(/nameSweep.inlinePages/);
    expect(() => resolveNameSweepOptions({ pageSize: 201 })).toThrow(/nameSweep.pageSize/);
    expect(resolveNameSweepOptions()).toMatchObject({ inlinePages: 10, pageSize: 200, background: true });
  });
});
