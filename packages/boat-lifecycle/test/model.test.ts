import type { FaultRule } from "@drydock/boat-provider/simulator";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { DELETE_IN_FLIGHT_MS, isLifecycleError, legacyBoatName } from "../src/index.js";
import { type Harness, harness } from "./helpers.js";

/**
 * Random command sequences (fast-check) against the real simulator: provision, delete, reconcile,
 * restart and injected provider faults in any order. After every command the billing and fencing
 * invariants must hold; at the end, with the faults gone, every bot converges on exactly one Boat that
 * the create journal owns.
 */

const BOTS = ["bot-a", "bot-b"] as const;
const ROUTES: Array<Pick<FaultRule, "method" | "path">> = [
  { method: "POST", path: "^/sandboxes$" },
  { method: "PATCH", path: "^/sandboxes/" },
  { method: "DELETE", path: "^/sandboxes/" },
  { method: "GET", path: "^/sandboxes/bx_" },
  { method: "GET", path: "^/sandboxes$" },
  { method: "GET", path: "^/deletion-operations/" },
];
const faultArb: fc.Arbitrary<FaultRule> = fc
  .record({
    route: fc.constantFrom(...ROUTES),
    action: fc.constantFrom(
      "fail-before",
      "fail-after",
      "drop-after",
      "drop-before",
      "delay",
      "in-progress",
      "rate-limit",
      "block-deletion",
    ),
    status: fc.constantFrom(400, 409, 429, 500, 503),
    times: fc.integer({ min: 1, max: 2 }),
  })
  .map(({ route, action, status, times }) => ({
    ...route,
    action,
    times,
    ...(action === "fail-before" || action === "fail-after"
      ? { status: action === "fail-after" ? 500 : status }
      : {}),
    ...(action === "delay" ? { ms: 30 } : {}),
    ...(action === "rate-limit" || action === "in-progress" ? { retryAfterS: 0 } : {}),
  }));

type Command =
  | { kind: "provision"; bot: string }
  | { kind: "delete"; bot: string }
  | { kind: "reconcile" }
  | { kind: "restart" }
  | { kind: "fault"; rule: FaultRule };

const commandArb: fc.Arbitrary<Command> = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...BOTS).map((bot) => ({ kind: "provision" as const, bot })) },
  { weight: 3, arbitrary: fc.constantFrom(...BOTS).map((bot) => ({ kind: "delete" as const, bot })) },
  { weight: 1, arbitrary: fc.constant({ kind: "reconcile" as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: "restart" as const }) },
  { weight: 3, arbitrary: faultArb.map((rule) => ({ kind: "fault" as const, rule })) },
);

async function run(t: Harness, command: Command): Promise<void> {
  const lifecycle = t.lifecycle;
  try {
    switch (command.kind) {
      case "provision":
        await lifecycle.provision(command.bot);
        return;
      case "delete": {
        const item = (await lifecycle.inventory()).find(
          (i) => i.ownerBotId === command.bot && i.name !== null,
        );
        if (item?.name != null) {
          await lifecycle.deleteBoat({ boxId: item.boxId, confirmName: item.name, ownerBotId: command.bot });
        }
        return;
      }
      case "reconcile":
        await lifecycle.recoverAtStartup();
        return;
      case "restart":
        t.restart();
        return;
      case "fault":
        await t.faults(command.rule);
        return;
    }
  } catch (error) {
    // Every failure is a typed, plain-language LifecycleError — never a raw provider or journal error.
    if (!isLifecycleError(error)) throw error;
    expect(error.message.length).toBeGreaterThan(0);
  }
}

function invariants(t: Harness): void {
  const boats = t.sim.sandboxes();
  const live = boats.filter((b) => b.deletedAt === null);
  const names = BOTS.flatMap((bot) => [t.lifecycle.boatNameFor(bot), legacyBoatName(bot)]);
  // At most one named Boat per bot, and never more Boats than bots.
  for (const bot of BOTS) {
    const own = [t.lifecycle.boatNameFor(bot), legacyBoatName(bot)];
    expect(live.filter((b) => b.name !== null && own.includes(b.name)).length).toBeLessThanOrEqual(1);
  }
  expect(live.length).toBeLessThanOrEqual(BOTS.length);
  expect(live.every((b) => b.name === null || names.includes(b.name))).toBe(true);
  // A Boat whose deletion was requested and is not finished keeps its fence.
  const fences = (t.deleteFile()?.records ?? []).map((r) => r.boxId);
  for (const boat of live) {
    if (boat.history.some((e) => e.event === "deletion_requested")) expect(fences).toContain(boat.id);
  }
}

describe("model-based sequences against the simulator", () => {
  it("any order of provision/delete/reconcile/restart/faults keeps the invariants and converges", async () => {
    let sequences = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(commandArb, { minLength: 4, maxLength: 12 }), async (commands) => {
        const t = await harness({ sim: { deletionPolls: 3 } });
        try {
          for (const command of commands) {
            await run(t, command);
            invariants(t);
          }
          // Faults gone, a restart, recovery, then every bot provisions deliberately until it has its Boat.
          await t.clearFaults();
          const lifecycle = t.restart();
          await lifecycle.recoverAtStartup();
          // The deliberate retries come after DELETE_IN_FLIGHT_MS: a prepared fence younger than that is
          // another caller's DELETE in flight and is never re-sent (delete-in-flight.test.ts).
          t.clock.offsetMs += DELETE_IN_FLIGHT_MS;
          for (const bot of BOTS) {
            let done = false;
            for (let attempt = 0; attempt < 6 && !done; attempt += 1) {
              done = await lifecycle.provision(bot).then(
                () => true,
                (error: unknown) => {
                  if (!isLifecycleError(error)) throw error;
                  expect(["computer_deleting", "previous_deletion_finished", "create_in_progress"]).toContain(
                    error.code,
                  );
                  return false;
                },
              );
            }
            expect(done).toBe(true);
          }
          invariants(t);
          const live = t.sim.sandboxes().filter((b) => b.deletedAt === null);
          expect(live).toHaveLength(BOTS.length);
          const rows = t.createFile()?.requests ?? [];
          for (const boat of live) {
            expect(rows.some((r) => r.boxId === boat.id && r.resolved === true)).toBe(true);
          }
          sequences += 1;
        } finally {
          await t.close();
        }
      }),
      { numRuns: 12, endOnFailure: true },
    );
    expect(sequences).toBe(12);
  }, 120_000);
});
