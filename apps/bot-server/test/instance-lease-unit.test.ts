/**
 * The server's instance lease without a database: an InstanceRegistry that answers as told, a monotonic
 * clock the test moves, and vitest's fake timers for the heartbeat. The gate closes exactly when the local
 * lease passes (503 lease_lost), and a renewal the database refuses re-registers: `current()` — what the
 * write fence reads for each call — switches to the new, greater epoch, and the old one is named as replaced.
 */
import type { Instance, InstanceRegistry, RenewResult } from "@drydock/storage-postgres";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { HttpProblem } from "../src/http-errors.js";
import { startInstanceLease } from "../src/instance-lease.js";

const TTL = 3_000;

function fakeRegistry() {
  let epoch = 0;
  const registered: { replaces?: { id: string; epoch: number } }[] = [];
  const renewals: RenewResult[] = [];
  const registry: InstanceRegistry = {
    async register(input) {
      registered.push(input.replaces === undefined ? {} : { replaces: input.replaces });
      epoch += 1;
      return {
        id: `00000000-0000-4000-8000-00000000000${epoch}`,
        host: input.host,
        pid: input.pid,
        startedAt: 1,
        leaseUntil: 2,
        epoch,
        state: "live",
      } satisfies Instance;
    },
    async renew() {
      return renewals.shift() ?? { renewed: true, leaseUntil: 1 };
    },
    async stop() {
      return true;
    },
    async list() {
      return { now: 0, instances: [] };
    },
    async declareDead() {
      throw new Error("not used");
    },
  };
  return { registry, registered, renewals };
}

const quiet = { info() {}, warn() {} };

const leaseOn = (instances: InstanceRegistry, monotonic: () => number) =>
  startInstanceLease({ instances, ttlMs: TTL, log: quiet, monotonic });

describe("the instance lease (no database)", () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("the gate is open inside the local lease (ttl less a fifth) and answers 503 lease_lost once it passes", async () => {
    const { registry } = fakeRegistry();
    let now = 0;
    const lease = await leaseOn(registry, () => now);
    expect(() => lease.gate()).not.toThrow();
    now = TTL - TTL / 5 - 1;
    expect(() => lease.gate()).not.toThrow();
    now = TTL - TTL / 5;
    let refused: unknown;
    try {
      lease.gate();
    } catch (error) {
      refused = error;
    }
    expect(refused).toBeInstanceOf(HttpProblem);
    expect(refused).toMatchObject({ status: 503, code: "lease_lost" });
    await lease.close();
  });

  it("a renewal the database refuses re-registers: current() switches to the greater epoch, the old one replaced", async () => {
    const { registry, registered, renewals } = fakeRegistry();
    let now = 0;
    const lease = await leaseOn(registry, () => now);
    const first = lease.current();
    expect(first.epoch).toBe(1);
    renewals.push({ renewed: false, reason: "expired", state: "live" });
    now = TTL; // the local lease has passed (a pause)
    expect(() => lease.gate()).toThrow(HttpProblem);
    await vi.advanceTimersByTimeAsync(TTL / 3);
    const second = lease.current();
    expect(second.epoch).toBeGreaterThan(first.epoch);
    expect(second.id).not.toBe(first.id);
    expect(registered.at(-1)?.replaces).toMatchObject(first);
    // The new registration's local lease starts at its own request: the gate is open again.
    expect(() => lease.gate()).not.toThrow();
    await lease.close();
  });

  it("a request keeps the epoch it began under: its writer stays, its gate closes after a re-registration; new requests get the new epoch", async () => {
    const { registry, renewals } = fakeRegistry();
    let now = 0;
    const lease = await leaseOn(registry, () => now);
    let resume: () => void = () => {};
    const paused = new Promise<void>((resolve) => {
      resume = resolve;
    });
    const seen: { epoch: number; gate: unknown }[] = [];
    const request = new Promise<void>((done) => {
      lease.scope(() => {
        void (async () => {
          await paused; // the request is "paused" across the re-registration
          let gate: unknown = null;
          try {
            lease.gate();
          } catch (error) {
            gate = error;
          }
          seen.push({ epoch: lease.writer().epoch, gate });
          done();
        })();
      });
    });
    renewals.push({ renewed: false, reason: "expired", state: "live" });
    now = TTL;
    await vi.advanceTimersByTimeAsync(TTL / 3);
    expect(lease.current().epoch).toBe(2);
    resume();
    await request;
    expect(seen).toHaveLength(1);
    expect(seen[0]?.epoch).toBe(1);
    expect(seen[0]?.gate).toMatchObject({ status: 503, code: "lease_lost" });
    // A request that begins now, and work outside any request, carry the new epoch; the gate is open.
    lease.scope(() => {
      expect(lease.writer().epoch).toBe(2);
      expect(() => lease.gate()).not.toThrow();
    });
    expect(lease.writer().epoch).toBe(2);
    await lease.close();
  });

  it("boundGate keeps the epoch of the request that took it, checked later from any async context (the socket write)", async () => {
    const { registry, renewals } = fakeRegistry();
    let now = 0;
    const lease = await leaseOn(registry, () => now);
    let bound: () => void = () => {};
    lease.scope(() => {
      bound = lease.boundGate();
    });
    const background = lease.boundGate(); // taken outside any request: follows the current lease
    expect(() => bound()).not.toThrow();
    now = TTL; // a pause past the local lease: both closed
    expect(() => bound()).toThrow(HttpProblem);
    expect(() => background()).toThrow(HttpProblem);
    renewals.push({ renewed: false, reason: "expired", state: "live" });
    await vi.advanceTimersByTimeAsync(TTL / 3);
    expect(lease.current().epoch).toBe(2);
    // Re-registered: the request's bound gate stays closed (checked here, outside its scope); work outside
    // any request may go on under the new epoch.
    let refused: unknown;
    try {
      bound();
    } catch (error) {
      refused = error;
    }
    expect(refused).toMatchObject({
      status: 503,
      code: "lease_lost",
      message: expect.stringContaining("epoch 1"),
    });
    expect(() => background()).not.toThrow();
    await lease.close();
  });
});
