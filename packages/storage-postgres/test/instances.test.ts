// Instances with leases on a real PostgreSQL: epochs only increase, a renewal is refused to a replaced, stopped,
// declared-dead or expired instance (judged by the database's clock), and declare-dead applies only on its
// fence and never while the lease holds. Waits are for a condition read from the database, never a duration.
import pg from "pg";
import { describe, expect, it } from "vitest";
import { isInstanceError, type PostgresStorage } from "../src/index.js";
import { refusal, untilExpired, useStores } from "./helpers.js";

const stores = useStores("inst");

describe("instances", () => {
  it("register: live rows, epochs strictly increasing across stores of one schema; renew extends by database time", async () => {
    const schema = stores.schema();
    const a = await stores.open({ schema });
    const b = await stores.open({ schema });
    const first = await a.instances.register({ host: "h1", pid: 11, ttlMs: 60_000 });
    const second = await b.instances.register({ host: "h2", pid: 22, ttlMs: 60_000 });
    const third = await a.instances.register({ host: "h1", pid: 12, ttlMs: 60_000 });
    expect(second.epoch).toBeGreaterThan(first.epoch);
    expect(third.epoch).toBeGreaterThan(second.epoch);
    const { instances } = await b.instances.list();
    expect(instances.map((row) => row.epoch)).toEqual([third.epoch, second.epoch, first.epoch]);
    expect(instances.every((row) => row.state === "live" && row.holdsLease)).toBe(true);
    const renewed = await a.instances.renew(first.id, first.epoch, 120_000);
    expect(renewed).toEqual({ renewed: true, leaseUntil: expect.any(Number) });
    expect((renewed as { leaseUntil: number }).leaseUntil).toBeGreaterThan(first.leaseUntil);
  });

  it("renew is refused to another epoch, a stopped instance and an expired lease; re-registering kills the old row", async () => {
    const storage = await stores.open();
    const one = await storage.instances.register({ host: "h", pid: 1, ttlMs: 60_000 });
    expect(await storage.instances.renew(one.id, one.epoch + 1, 60_000)).toEqual({
      renewed: false,
      reason: "epoch",
      state: "live",
    });
    expect(await storage.instances.stop(one.id, one.epoch)).toBe(true);
    expect(await storage.instances.stop(one.id, one.epoch)).toBe(false);
    expect(await storage.instances.renew(one.id, one.epoch, 60_000)).toEqual({
      renewed: false,
      reason: "not_live",
      state: "stopped",
    });

    const short = await storage.instances.register({ host: "h", pid: 2, ttlMs: 1 });
    await untilExpired(storage.instances, short.id);
    expect(await storage.instances.renew(short.id, short.epoch, 60_000)).toEqual({
      renewed: false,
      reason: "expired",
      state: "live",
    });
    const again = await storage.instances.register({
      host: "h",
      pid: 2,
      ttlMs: 60_000,
      replaces: { id: short.id, epoch: short.epoch },
    });
    expect(again.epoch).toBeGreaterThan(short.epoch);
    const rows = (await storage.instances.list()).instances;
    expect(rows.find((row) => row.id === short.id)?.state).toBe("dead");
    expect(rows.find((row) => row.id === again.id)?.holdsLease).toBe(true);
    expect(await storage.instances.renew("00000000-0000-4000-8000-000000000000", 1, 1_000)).toMatchObject({
      renewed: false,
      reason: "missing",
    });
  });

  it("declareDead: refused while the lease holds and on a stale fence (nothing changed); applied once passed; the dead never renew", async () => {
    const storage: PostgresStorage = await stores.open();
    const held = await storage.instances.register({ host: "h", pid: 3, ttlMs: 60_000 });
    const view = (await storage.instances.list()).instances[0];
    expect(view?.id).toBe(held.id);
    const unexpired = await refusal(() => storage.instances.declareDead(held.id, view?.fence as string));
    expect(isInstanceError(unexpired) && unexpired.code).toBe("INSTANCE_LEASE_UNEXPIRED");
    expect((unexpired as Error).message).toContain("Nothing was changed");
    expect((await storage.instances.list()).instances[0]?.state).toBe("live");

    const lapsing = await storage.instances.register({ host: "h", pid: 4, ttlMs: 1 });
    await untilExpired(storage.instances, lapsing.id);
    const seen = (await storage.instances.list()).instances.find((row) => row.id === lapsing.id);
    const stale = await refusal(() => storage.instances.declareDead(lapsing.id, "0".repeat(16)));
    expect(isInstanceError(stale) && stale.code).toBe("INSTANCE_CHANGED");
    const dead = await storage.instances.declareDead(lapsing.id, seen?.fence as string);
    expect(dead).toMatchObject({ id: lapsing.id, state: "dead", holdsLease: false });
    // Applying the same preview again is refused: the row changed (its state is in the fence).
    const twice = await refusal(() => storage.instances.declareDead(lapsing.id, seen?.fence as string));
    expect(isInstanceError(twice) && twice.code).toBe("INSTANCE_CHANGED");
    expect(await storage.instances.renew(lapsing.id, lapsing.epoch, 60_000)).toMatchObject({
      renewed: false,
      reason: "not_live",
      state: "dead",
    });
    const missing = await refusal(() =>
      storage.instances.declareDead("00000000-0000-4000-8000-000000000000", "x"),
    );
    expect(isInstanceError(missing) && missing.code).toBe("INSTANCE_NOT_FOUND");
  });

  it("epochs come from a sequence: a raw insert cannot reuse one, a state outside live|dead|stopped is refused", async () => {
    const storage = await stores.open();
    const row = await storage.instances.register({ host: "h", pid: 5, ttlMs: 60_000 });
    const client = new pg.Client({ connectionString: stores.url() });
    await client.connect();
    try {
      const insert = (epoch: number, state: string) =>
        client.query(
          `INSERT INTO ${storage.schema}.instances (id, host, pid, lease_until, epoch, state) VALUES (gen_random_uuid(), 'x', 1, now(), $1, $2)`,
          [epoch, state],
        );
      await expect(insert(row.epoch, "live")).rejects.toMatchObject({ code: "23505" });
      await expect(insert(row.epoch + 1000, "zombie")).rejects.toMatchObject({ code: "23514" });
    } finally {
      await client.end();
    }
  });

  it("a renewal that waited for a row lock across the lease's end is refused (the lease is judged after the wait, never revived)", async () => {
    const storage = await stores.open();
    const one = await storage.instances.register({ host: "h", pid: 6, ttlMs: 1_500 });
    // A fenced write of this instance holds its row FOR SHARE (as every write does), and its process is
    // paused mid-transaction: the transaction stays open.
    const holder = new pg.Client({ connectionString: stores.url() });
    await holder.connect();
    stores.later(() => holder.end());
    await holder.query("BEGIN");
    await holder.query(`SELECT 1 FROM ${storage.schema}.instances WHERE id = $1 FOR SHARE`, [one.id]);
    // The heartbeat's renewal, sent while the lease held, waits for that lock.
    const renewal = storage.instances.renew(one.id, one.epoch, 60_000);
    const watcher = new pg.Client({ connectionString: stores.url() });
    await watcher.connect();
    stores.later(() => watcher.end());
    for (let i = 0; ; i += 1) {
      const waiting = await watcher.query(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()",
      );
      if (waiting.rows[0].n > 0) break;
      if (i > 500) throw new Error("the renewal never waited for the row lock");
      await new Promise((r) => setTimeout(r, 10));
    }
    await untilExpired(storage.instances, one.id);
    // The paused write is refused at its commit (its lease passed) and rolls back: the lock is free.
    await holder.query("ROLLBACK");
    expect(await renewal).toEqual({ renewed: false, reason: "expired", state: "live" });
    const row = (await storage.instances.list()).instances.find((r) => r.id === one.id);
    expect(row?.leaseLeftMs).toBeLessThanOrEqual(0);
  });
});
