import { createHash, randomUUID } from "node:crypto";
import { isBoatApiError, isBoatTransportError, KEY_RETENTION_MS } from "@drydock/boat-provider";
import type { SimSandboxRecord } from "@drydock/boat-provider/simulator";
import fc from "fast-check";
import { afterEach, describe, expect, it } from "vitest";
import { BODY, type Harness, harness, rejection } from "./helpers.js";

const FROZEN = () => 1_800_000_000_000;
let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

const sha256 = (text: string): string => createHash("sha256").update(text).digest("hex");

describe("idempotency keys", () => {
  it("several concurrent identical creates with one key (one delayed) produce exactly one Boat", async () => {
    h = await harness({ now: FROZEN });
    const sim = h;
    await sim.faults([{ method: "POST", path: "^/sandboxes$", action: "delay", ms: 2_000 }]);
    const key = randomUUID();
    const attempts = await Promise.allSettled(
      Array.from({ length: 5 }, () => sim.client.createSandbox(BODY, { idempotencyKey: key })),
    );
    const ids = new Set<string>();
    let inProgress = 0;
    for (const attempt of attempts) {
      if (attempt.status === "fulfilled") ids.add(attempt.value.sandbox.id);
      else {
        expect(attempt.reason).toMatchObject({ code: "idempotency_in_progress", status: 409 });
        inProgress += 1;
      }
    }
    // The delayed first request held the key; everyone else was told to come back.
    expect(inProgress).toBeGreaterThanOrEqual(1);
    // Callers retry with the same key and all get the same Boat.
    const retried = await sim.client.createSandbox(BODY, { idempotencyKey: key });
    ids.add(retried.sandbox.id);
    expect(ids.size).toBe(1);
    expect(await sim.stats()).toMatchObject({ createsCommitted: 1, live: 1 });
  });

  it("replays at 24 h − 1 ms and creates a second Boat at 24 h + 1 ms (simulator clock)", async () => {
    h = await harness({ now: FROZEN });
    const key = randomUUID();
    const first = await h.client.createSandbox(BODY, { idempotencyKey: key });
    await h.advance(KEY_RETENTION_MS - 1);
    const replay = await h.client.createSandbox(BODY, { idempotencyKey: key });
    expect(replay).toMatchObject({ replayed: true, sandbox: { id: first.sandbox.id } });
    await h.advance(2);
    const fresh = await h.client.createSandbox(BODY, { idempotencyKey: key });
    expect(fresh.replayed).toBe(false);
    expect(fresh.sandbox.id).not.toBe(first.sandbox.id);
    expect((await h.stats()).createsCommitted).toBe(2);
    // The key now belongs to the new Boat.
    expect((await h.client.createSandbox(BODY, { idempotencyKey: key })).sandbox.id).toBe(fresh.sandbox.id);
  });

  it("an expired key is unknown, so a different body is no longer 'reused'", async () => {
    h = await harness({ now: FROZEN });
    const key = randomUUID();
    await h.client.createSandbox(BODY, { idempotencyKey: key });
    const reused = await rejection(
      h.client.createSandbox({ ttlSeconds: 60, noEnv: true }, { idempotencyKey: key }),
    );
    expect(reused).toMatchObject({ code: "idempotency_key_reused" });
    await h.advance(KEY_RETENTION_MS);
    const created = await h.client.createSandbox({ ttlSeconds: 60, noEnv: true }, { idempotencyKey: key });
    expect(created).toMatchObject({ replayed: false, sandbox: { ttlSeconds: 60 } });
  });
});

type Command =
  | { kind: "create"; key: number; body: number; parallel: number }
  | { kind: "advance"; ms: number }
  | { kind: "fault"; action: string; times: number };

const commandArb: fc.Arbitrary<Command> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      kind: fc.constant("create" as const),
      key: fc.integer({ min: 0, max: 2 }),
      body: fc.integer({ min: 0, max: 1 }),
      parallel: fc.integer({ min: 1, max: 3 }),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant("advance" as const),
      ms: fc.constantFrom(1, 1_000, 3_600_000, 43_200_000, KEY_RETENTION_MS - 1, KEY_RETENTION_MS),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant("fault" as const),
      action: fc.constantFrom(
        "drop-after",
        "fail-after",
        "fail-before",
        "drop-before",
        "delay",
        "in-progress",
        "rate-limit",
      ),
      times: fc.integer({ min: 1, max: 2 }),
    }),
  },
);

describe("property: one key, one Boat per 24 h", () => {
  it("random interleavings of creates, faults and clock moves never yield two Boats for one key within 24 h", async () => {
    // One simulator for all runs (fresh keys per run keep them independent); faults are cleared per run.
    const run = await harness({ now: FROZEN }, { timeoutMs: 2_000 });
    try {
      await fc.assert(
        fc.asyncProperty(fc.array(commandArb, { minLength: 1, maxLength: 12 }), async (commands) => {
          await run.clearFaults();
          const keys = [randomUUID(), randomUUID(), randomUUID()];
          const bodies = [BODY, { ttlSeconds: 3_600, noEnv: false }];
          for (const command of commands) {
            if (command.kind === "advance") await run.advance(command.ms);
            else if (command.kind === "fault") {
              await run.faults([
                {
                  method: "POST",
                  path: "^/sandboxes$",
                  action: command.action as "delay",
                  times: command.times,
                  ms: 30,
                },
              ]);
            } else {
              const key = keys[command.key] as string;
              const body = bodies[command.body] as typeof BODY;
              const results = await Promise.allSettled(
                Array.from({ length: command.parallel }, () =>
                  run.client.createSandbox(body, { idempotencyKey: key }),
                ),
              );
              for (const result of results) {
                // Whatever happens, the client reports a typed outcome.
                if (result.status === "rejected") {
                  expect(isBoatApiError(result.reason) || isBoatTransportError(result.reason)).toBe(true);
                }
              }
            }
          }
          // Give a delayed request time to commit, so its Boat is judged too (the invariant holds either way).
          await new Promise((resolve) => setTimeout(resolve, 40));
          const boats = run.sim.sandboxes();
          for (const key of keys) {
            const created = boats
              .filter((boat: SimSandboxRecord) => boat.keyHash === sha256(key))
              .map((boat) => boat.createdAt)
              .sort((a, b) => a - b);
            for (let i = 1; i < created.length; i += 1) {
              expect((created[i] as number) - (created[i - 1] as number)).toBeGreaterThanOrEqual(
                KEY_RETENTION_MS,
              );
            }
          }
          expect((await run.stats()).createsCommitted).toBe(boats.length);
        }),
        { numRuns: 40 },
      );
    } finally {
      await run.close();
    }
  });
});
