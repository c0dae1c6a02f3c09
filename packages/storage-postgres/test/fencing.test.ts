// The writer fence on a real PostgreSQL, with real processes: a store fenced by an instance refuses every
// write once that instance lost its lease (lapsed by the database's clock, declared dead, replaced), inside
// the write's own transaction, nothing written — a SIGSTOPped process resumed past its lease changes
// nothing; a write racing a re-registration or a declare-dead is committed before it or refused, never both;
// and a deletion mark names its writer's instance and is judged by its lease, never by a pid. Every wait is
// for a condition (a process state, the database's clock, a lock wait), never a duration.
import { readFileSync } from "node:fs";
import { hostname } from "node:os";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { type Bot, type DeletionMark, isStorageError } from "@drydock/storage";
import { deadPid, spawnWorker, type Worker } from "@drydock/test-kit";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import type { PostgresStorage } from "../src/index.js";
import { refusal, untilExpired, useStores } from "./helpers.js";

const stores = useStores("fence");
const FIXTURE = fileURLToPath(new URL("./fixtures/fenced-writer.ts", import.meta.url));
const BODY = '{"ttlSeconds":28800,"noEnv":true}';

const workers: Worker[] = [];
afterEach(() => {
  for (const worker of workers.splice(0)) {
    worker.kill();
  }
});

/** The fixture in its own process group (SIGKILL after each test ends it, stopped or not). */
function spawnWriter(schema: string, mode: string): Worker {
  const worker = spawnWorker(FIXTURE, [schema, mode]);
  workers.push(worker);
  return worker;
}

/** The process state letter of `pid` (T: stopped), from /proc. */
function stateOf(pid: number): string {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[0] as string;
}

/** Polls `check` until it holds (bounded: a hang guard, not a duration). */
async function until(what: string, check: () => boolean | Promise<boolean>): Promise<void> {
  for (let i = 0; i < 1_500; i += 1) {
    if (await check()) return;
    await sleep(20);
  }
  throw new Error(`timed out waiting until ${what}`);
}

/** The instance the fixture registered (its ready line), and its process id (from its instance row). */
async function readyOf(worker: Worker, observer: PostgresStorage) {
  const line = await worker.waitFor((l) => l.includes('"ready"'));
  const { id, epoch } = JSON.parse(line) as { id: string; epoch: number };
  const row = (await observer.instances.list()).instances.find((r) => r.id === id);
  if (row === undefined) throw new Error(`instance ${id} is not listed`);
  return { id, epoch, pid: row.pid };
}

type Outcome = { op: string; ok: boolean; code?: string };
const outcomes = (worker: Worker): Outcome[] =>
  worker.lines.filter((l) => l.includes('"op"')).map((l) => JSON.parse(l) as Outcome);

/** How many backends of this test's database wait on a row or table lock right now. */
async function lockWaiters(): Promise<number> {
  const client = new pg.Client({ connectionString: stores.url() });
  await client.connect();
  try {
    const { rows } = await client.query(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
    );
    return (rows[0] as { n: number }).n;
  } finally {
    await client.end();
  }
}

describe("the writer fence", () => {
  it("a zombie: SIGSTOPped, its lease passed, declared dead, resumed — every kind of write refused STORAGE_FENCED, the database unchanged", async () => {
    const schema = stores.schema();
    const observer = await stores.open({ schema });
    const worker = spawnWriter(schema, "zombie");
    const { id, epoch, pid } = await readyOf(worker, observer);
    await until("the writer is stopped", () => stateOf(pid) === "T");
    // Its lease passes while it is stopped (renewed to 1 ms through the real API), and it is declared dead.
    expect(await observer.instances.renew(id, epoch, 1)).toMatchObject({ renewed: true });
    await untilExpired(observer.instances, id);
    const view = (await observer.instances.list()).instances.find((r) => r.id === id);
    expect(await observer.instances.declareDead(id, view?.fence as string)).toMatchObject({ state: "dead" });
    const before = await observer.exportAll();
    expect(before.bots.map((b) => b.botId)).toEqual(["ready"]);

    process.kill(pid, "SIGCONT");
    const ended = await worker.exited;
    expect(ended.code, ended.stderr).toBe(0);
    const seen = outcomes(worker);
    expect(seen.map((o) => o.op)).toEqual(["begin", "prepare", "bot", "mark", "remove", "meta", "import"]);
    for (const outcome of seen)
      expect(outcome).toEqual({ op: outcome.op, ok: false, code: "STORAGE_FENCED" });
    expect(await observer.exportAll()).toEqual(before);
    // An unfenced writer (a tool without an instance, as the CLI) still writes.
    await observer.bots.create({ botId: "after", name: "After" });
  }, 120_000);

  it("the refusal says why (lapsed, declared dead, replaced, stopped), that nothing was written, and what to do", async () => {
    const schema = stores.schema();
    const admin = await stores.open({ schema });
    const fenced = await stores.open({ schema });
    let me = await admin.instances.register({ host: "h", pid: 1, ttlMs: 60_000 });
    fenced.fenceWith(() => me);
    await fenced.bots.create({ botId: "ada", name: "Ada" });
    const causes: [string, () => Promise<void>][] = [
      [
        "its lease lapsed by the database's clock",
        async () => {
          await admin.instances.renew(me.id, me.epoch, 1);
          await untilExpired(admin.instances, me.id);
        },
      ],
      [
        "it was declared dead (or replaced by a newer registration)",
        async () => {
          await admin.instances.register({ host: "h", pid: 2, ttlMs: 60_000, replaces: me });
        },
      ],
      ["it was stopped", async () => void (await admin.instances.stop(me.id, me.epoch))],
    ];
    for (const [why, lose] of causes) {
      me = await admin.instances.register({ host: "h", pid: 1, ttlMs: 60_000 });
      await fenced.bots.create({ botId: `ok-${me.epoch}`, name: "Ok" });
      await lose();
      const before = await admin.exportAll();
      const refused = await refusal(() => fenced.bots.create({ botId: "zed", name: "Zed" }));
      expect(isStorageError(refused) && refused.code).toBe("STORAGE_FENCED");
      expect((refused as Error).message).toContain(why);
      expect((refused as Error).message).toContain(`${me.id} (epoch ${me.epoch})`);
      expect((refused as Error).message).toContain("Nothing was written.");
      expect((refused as Error).message).toContain("retry the request");
      expect(await admin.exportAll()).toEqual(before);
    }
    // A writer naming no instance is refused too (fail closed), and a store is fenced once.
    const broken = await stores.open({ schema });
    broken.fenceWith(() => ({ id: "not-a-uuid", epoch: 0 }));
    const bad = await refusal(() => broken.bots.create({ botId: "zed", name: "Zed" }));
    expect(isStorageError(bad) && bad.code).toBe("STORAGE_FENCED");
    expect(() => broken.fenceWith(() => me)).toThrow(/fenced once/);
  }, 60_000);

  it("a write racing a re-registration: it holds its instance's row FOR SHARE, so it commits before the row turns dead; the next write is refused", async () => {
    const schema = stores.schema();
    const observer = await stores.open({ schema, lockTimeoutMs: 60_000 });
    const worker = spawnWriter(schema, "stop-at:postgres:after-begin");
    const { id, epoch, pid } = await readyOf(worker, observer);
    await worker.waitFor((l) => l.includes('"stopped"'));
    await until("the writer is stopped inside its transaction", () => stateOf(pid) === "T");
    const waitingBefore = await lockWaiters();
    // The re-registration that replaces it (an UPDATE of its row) waits for the stopped transaction.
    const replacing = observer.instances.register({
      host: hostname(),
      pid,
      ttlMs: 60_000,
      replaces: { id, epoch },
    });
    await until(
      "the re-registration waits on the row lock",
      async () => (await lockWaiters()) > waitingBefore,
    );
    process.kill(pid, "SIGCONT");
    const successor = await replacing;
    expect(successor.epoch).toBeGreaterThan(epoch);
    // The write it held the row for committed first; it is stopped again before its next write.
    await worker.waitFor((l) => l.includes('"begin"'));
    await until("the writer is stopped between writes", () => stateOf(pid) === "T");
    process.kill(pid, "SIGCONT");
    const ended = await worker.exited;
    expect(ended.code, ended.stderr).toBe(0);
    expect(outcomes(worker)).toEqual([
      { op: "begin", ok: true },
      { op: "after", ok: false, code: "STORAGE_FENCED" },
    ]);
    const stored = await observer.exportAll();
    expect(stored.creates.map((c) => c.botId)).toEqual(["racer"]);
    expect(stored.bots.map((b) => b.botId)).toEqual(["ready"]);
    const rows = (await observer.instances.list()).instances;
    expect(rows.find((r) => r.id === id)?.state).toBe("dead");
  }, 120_000);

  it("a write whose lease lapses inside its transaction, racing a declare-dead: refused at its result (nothing written), then the declare-dead applies", async () => {
    const schema = stores.schema();
    const observer = await stores.open({ schema, lockTimeoutMs: 60_000 });
    // The lease must still hold at the write's fence check: on a machine too slow for that, try a longer one.
    let ttl = 2_000;
    for (;;) {
      const worker = spawnWriter(schema, `lapse-inside:${ttl}`);
      const { id, pid } = await readyOf(worker, observer);
      const next = await worker.waitFor((l) => l.includes('"stopped"') || l.includes('"op"'));
      if (next.includes('"op"')) {
        expect(JSON.parse(next)).toEqual({ op: "begin", ok: false, code: "STORAGE_FENCED" });
        await worker.exited;
        expect(ttl).toBeLessThan(64_000);
        ttl *= 2;
        continue;
      }
      await until("the writer is stopped after its fence check", () => stateOf(pid) === "T");
      await untilExpired(observer.instances, id);
      const view = (await observer.instances.list()).instances.find((r) => r.id === id);
      const before = await observer.exportAll();
      const waitingBefore = await lockWaiters();
      const declaring = observer.instances.declareDead(id, view?.fence as string);
      await until(
        "the declare-dead waits on the row lock",
        async () => (await lockWaiters()) > waitingBefore,
      );
      process.kill(pid, "SIGCONT");
      expect(await declaring).toMatchObject({ id, state: "dead" });
      const ended = await worker.exited;
      expect(ended.code, ended.stderr).toBe(0);
      expect(outcomes(worker)).toEqual([{ op: "begin", ok: false, code: "STORAGE_FENCED" }]);
      expect(await observer.exportAll()).toEqual(before);
      expect(before.creates).toEqual([]);
      return;
    }
  }, 240_000);
});

describe("renewals under pauses", () => {
  it("a renewal never moves a lease's end once the lease has passed, wherever its process was paused (SIGSTOP at random points of a back-to-back renewal loop)", async () => {
    const schema = stores.schema();
    const observer = await stores.open({ schema });
    const worker = spawnWriter(schema, "renew-loop:300");
    const { pid } = await readyOf(worker, observer);
    const ownRows = async () =>
      (await observer.instances.list()).instances
        .filter((row) => row.pid === pid)
        .sort((a, b) => b.epoch - a.epoch);
    for (let pause = 0; pause < 12; pause += 1) {
      // A random delay chooses where in a renewal the pause lands (the loop renews back to back).
      await sleep(1 + Math.floor(Math.random() * 30));
      process.kill(pid, "SIGSTOP");
      await until("the renewing process is stopped", () => stateOf(pid) === "T");
      const latest = (await ownRows())[0];
      if (latest === undefined) throw new Error("the renewing process has no instance row");
      await untilExpired(observer.instances, latest.id);
      const passed = (await ownRows()).find((row) => row.id === latest.id)?.leaseUntil;
      process.kill(pid, "SIGCONT");
      // Resumed, it finds its lease passed and registers again; the lapsed row's lease end stays.
      await until("the renewing process registered again", async () =>
        (await ownRows()).some((row) => row.epoch > latest.epoch),
      );
      const after = (await ownRows()).find((row) => row.id === latest.id);
      expect(after?.leaseUntil, `pause ${pause}: the lease end of ${latest.id} moved after it passed`).toBe(
        passed,
      );
    }
  }, 120_000);
});

describe("deletion marks by instance", () => {
  it("a mark names its writer's instance and is judged by that instance's lease alone — whatever pid the mark or the reader has", async () => {
    const schema = stores.schema();
    const reader = await stores.open({ schema });
    const writer = await stores.open({ schema });
    const me = await reader.instances.register({ host: "elsewhere", pid: 77, ttlMs: 60_000 });
    writer.fenceWith(() => me);
    await writer.bots.create({ botId: "ada", name: "Ada" });
    const mark = (await writer.bots.markDeleting("ada")) as DeletionMark;
    expect(mark.writer).toEqual({ id: me.id, epoch: me.epoch });
    const bot = (await reader.bots.get("ada")) as Bot;
    expect(await reader.bots.liveMarks(bot, { ownIdle: false })).toEqual({ live: [mark], abandoned: [] });

    // The same instance's mark recorded with a pid that is certainly dead on this host: still live (its
    // lease holds); without the instance, the pid judgement would drop it (the control).
    const byDeadPid = { ...mark, id: "m-dead-pid", by: { ...mark.by, pid: deadPid() } };
    const { writer: _w, ...unfenced } = byDeadPid;
    const otherEpoch = { ...mark, id: "m-epoch", writer: { id: me.id, epoch: me.epoch + 1 } };
    const crafted = { ...bot, deletions: [byDeadPid, unfenced, otherEpoch] };
    expect(await reader.bots.liveMarks(crafted, { ownIdle: false })).toEqual({
      live: [byDeadPid],
      abandoned: [unfenced, otherEpoch],
    });

    // Its lease passes: abandoned, though its process (this one) runs and the reader's pid is alive.
    expect(mark.by.pid).toBe(process.pid);
    await reader.instances.renew(me.id, me.epoch, 1);
    await untilExpired(reader.instances, me.id);
    const verdict = await reader.bots.liveMarks(bot, { ownIdle: false });
    expect(verdict).toEqual({ live: [], abandoned: [mark] });
    await reader.bots.dropAbandonedMarks("ada", verdict.abandoned);
    expect((await reader.bots.get("ada"))?.deletions).toBeUndefined();
  }, 60_000);

  it("an unfenced store's marks name no instance and keep the process judgement (the CLI, tools)", async () => {
    const storage = await stores.open();
    await storage.bots.create({ botId: "bob", name: "Bob" });
    const mark = (await storage.bots.markDeleting("bob")) as DeletionMark;
    expect(mark.writer).toBeUndefined();
    const bot = (await storage.bots.get("bob")) as Bot;
    expect(await storage.bots.liveMarks(bot, { ownIdle: false })).toEqual({ live: [mark], abandoned: [] });
    await storage.createJournal.beginBoatCreate("bob", BODY);
  });
});
