import { appendFileSync, existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { type FileOps, failNthCall, nodeFileOps } from "@drydock/file-lock";
import { isJsonJournalError } from "@drydock/json-journal";
import fc from "fast-check";
import { afterEach, describe, expect, it } from "vitest";
import {
  type BoatDeleteJournal,
  type BoatDeletionRecord,
  type BoatDeletionStatus,
  DELETE_JOURNAL_FILE,
  isJournalStateError,
  openBoatDeleteJournal,
} from "../src/index.js";
import { tempDataDir } from "./helpers.js";
import { seedVerdict } from "./seed-oracle.js";

/** Figures for `pnpm reliability` (scripts/reliability.mjs); a no-op unless DRYDOCK_RELIABILITY_OUT is set. */
function reliability(metric: string, value: number): void {
  const out = process.env.DRYDOCK_RELIABILITY_OUT;
  if (out) appendFileSync(out, `${JSON.stringify({ area: "journals", metric, value })}\n`);
}
/** DRYDOCK_RELIABILITY_SCALE resizes the run for `pnpm reliability` (default 1: the ordinary suite). */
const RELIABILITY_SCALE = Number(process.env.DRYDOCK_RELIABILITY_SCALE ?? "1") || 1;
const RUNS = Math.max(10, Math.round(40 * RELIABILITY_SCALE));

/**
 * Model-based test: random command sequences run against the real journal (real files) and against a
 * small reference model (an ordered map Boat id → fence). After every command the file on disk must equal
 * the model, pass the original system's own validation and hold no temporary files. Commands include a
 * restart (a fresh journal object), clock moves in both directions and injected file-system failures; a
 * failed write must leave the journal at its state before the command (or, only for a failure after the
 * commit point, after it).
 */

// A small world, so fences, receipts and conflicts meet often.
const BOATS = ["bx_aaaaaaaa", "bx_bbbbbbbb"];
const NAMES = ["ogb-a", "ogb-b", "renamed"];
const OWNERS = ["bot-a", null, "bot-b"];
const OPS = [`bdop_${"a".repeat(32)}`, `bdop_${"b".repeat(32)}`];
const T0 = 1_767_000_000_000;
const RANK = { pending: 0, processing: 1, completed: 2 } as const;

type Rec = BoatDeletionRecord;
type Outcome = { ok: true; value: unknown } | { ok: false; code: string; detail: string };

const ok = (value: unknown): Outcome => ({ ok: true, value });
const paused = (detail: string): Outcome => ({ ok: false, code: "BOAT_DELETE_PAUSED", detail });
const invalid = (detail: string): Outcome => ({ ok: false, code: "INVALID_ARGUMENT", detail });

class Model {
  fences = new Map<string, Rec>();
  now = T0;
  clone(): Model {
    const copy = new Model();
    copy.fences = new Map([...this.fences].map(([id, r]) => [id, { ...r }]));
    copy.now = this.now;
    return copy;
  }
  list(): Rec[] {
    return [...this.fences.values()];
  }
  boundElsewhere(boxId: string, operationId: string): boolean {
    return this.list().some((r) => r.boxId !== boxId && r.operationId === operationId);
  }
}

interface Env {
  dataDir: string;
  file: string;
  clock: { now: number };
  docFs: { current: FileOps };
  journal: BoatDeleteJournal;
  open(): BoatDeleteJournal;
}

interface Op {
  name: string;
  apply(model: Model): Outcome;
  exec(env: Env): Promise<unknown>;
}

const prepare = (boxId: string, name: string, ownerBotId: string | null): Op => ({
  name: `prepare(${boxId}, ${name}, ${ownerBotId})`,
  apply(m) {
    const existing = m.fences.get(boxId);
    if (existing) {
      if (existing.name !== name || existing.ownerBotId !== ownerBotId) {
        return paused("conflicted with the remembered deletion target");
      }
      if (existing.phase !== "blocked") return ok({ ...existing });
    }
    const fresh: Rec = { boxId, name, ownerBotId, phase: "prepared", requestedAt: m.now, updatedAt: m.now };
    m.fences.delete(boxId);
    m.fences.set(boxId, fresh);
    return ok({ ...fresh });
  },
  exec: (env) => env.journal.prepareBoatDeletion({ boxId, name, ownerBotId }),
});

const receiptOf = (boxId: string, id: string, status: BoatDeletionStatus, bound: boolean) => ({
  id,
  kind: "sandbox",
  targetId: bound ? boxId : BOATS.find((b) => b !== boxId),
  status,
});

const accept = (boxId: string, id: string, status: BoatDeletionStatus, bound: boolean): Op => ({
  name: `accept(${boxId}, ${id.slice(0, 6)}, ${status}${bound ? "" : ", other target"})`,
  apply(m) {
    if (!bound) return invalid("invalid or mismatched cloud computer deletion operation");
    if (status === "blocked")
      return invalid("blocked cloud computer deletion must use markBoatDeletionBlocked");
    const existing = m.fences.get(boxId);
    if (!existing || existing.phase === "blocked") return paused("out of date");
    if (existing.operationId !== undefined && existing.operationId !== id) {
      return paused("conflicted with another deletion operation");
    }
    if (m.boundElsewhere(boxId, id)) return paused("conflicted with another deletion operation");
    if (existing.phase === "accepted" && RANK[status] < RANK[existing.status as keyof typeof RANK]) {
      return ok({ ...existing });
    }
    const next: Rec = {
      ...existing,
      phase: "accepted",
      operationId: id,
      status,
      updatedAt: Math.max(m.now, existing.updatedAt),
    };
    m.fences.set(boxId, next);
    return ok({ ...next });
  },
  exec: (env) => env.journal.markBoatDeletionAccepted(boxId, receiptOf(boxId, id, status, bound)),
});

const block = (boxId: string, id: string | null): Op => ({
  name: `block(${boxId}, ${id ? id.slice(0, 6) : "bare"})`,
  apply(m) {
    const existing = m.fences.get(boxId);
    if (!existing) return paused("out of date");
    if (id !== null) {
      if (existing.operationId !== undefined && existing.operationId !== id) {
        return paused("conflicted with another deletion operation");
      }
      if (m.boundElsewhere(boxId, id)) return paused("conflicted with another deletion operation");
    }
    // A completed receipt is final: blocking it returns it unchanged.
    if (existing.phase === "accepted" && existing.status === "completed") return ok({ ...existing });
    const operationId = id ?? existing.operationId;
    const next: Rec = {
      ...existing,
      phase: "blocked",
      ...(operationId !== undefined ? { operationId } : {}),
      status: "blocked",
      updatedAt: Math.max(m.now, existing.updatedAt),
    };
    m.fences.set(boxId, next);
    return ok({ ...next });
  },
  exec: (env) =>
    id === null
      ? env.journal.markBoatDeletionBlocked(boxId)
      : env.journal.markBoatDeletionBlocked(boxId, receiptOf(boxId, id, "blocked", true)),
});

/**
 * Re-stamp (compare-and-set) with the fence as it stands in the model, or with a stale copy of it (another
 * caller re-stamped it meanwhile). The copy is taken when the model applies the command and reused for the
 * real call.
 */
const restamp = (boxId: string, stale: boolean): Op => {
  let expected: Rec = {
    boxId,
    name: "ogb-a",
    ownerBotId: "bot-a",
    phase: "prepared",
    requestedAt: T0,
    updatedAt: T0,
  };
  return {
    name: `restamp(${boxId}${stale ? ", stale" : ""})`,
    apply(m) {
      const existing = m.fences.get(boxId);
      if (existing) expected = stale ? { ...existing, updatedAt: existing.updatedAt + 1 } : { ...existing };
      if (!existing) return ok({ record: null, restamped: false });
      if (existing.phase !== "prepared" || stale) return ok({ record: { ...existing }, restamped: false });
      const next: Rec = { ...existing, updatedAt: Math.max(m.now, existing.updatedAt + 1) };
      m.fences.set(boxId, next);
      return ok({ record: { ...next }, restamped: true });
    },
    exec: (env) => env.journal.restampBoatDeletion(boxId, expected),
  };
};

const retire = (boxId: string): Op => ({
  name: `retire(${boxId})`,
  apply(m) {
    m.fences.delete(boxId);
    return ok(undefined);
  },
  exec: (env) => env.journal.retireBoatDeletion(boxId),
});

const read = (which: number): Op => ({
  name: ["snapshot", "get", "hasPending"][which % 3]!,
  apply(m) {
    if (which % 3 === 0) return ok(m.list());
    if (which % 3 === 1) return ok(m.fences.get(BOATS[0]!) ?? null);
    return ok(m.list().some((r) => r.ownerBotId === "bot-a"));
  },
  exec(env) {
    if (which % 3 === 0) return env.journal.boatDeletionSnapshot();
    if (which % 3 === 1) return env.journal.getBoatDeletion(BOATS[0]!);
    return env.journal.hasPendingBoatDeletionForBot("bot-a");
  },
});

function diskRecords(env: Env): Rec[] {
  if (!existsSync(env.file)) return [];
  const text = readFileSync(env.file, "utf8");
  expect(seedVerdict(text)).toBe("ok");
  expect(text).toBe(`${JSON.stringify(JSON.parse(text), null, 2)}\n`);
  return JSON.parse(text).records;
}

function assertAgrees(env: Env, model: Model): void {
  expect(diskRecords(env)).toEqual(model.list());
  const names = existsSync(env.dataDir) ? readdirSync(env.dataDir) : [];
  expect(names.filter((name) => name !== DELETE_JOURNAL_FILE)).toEqual([]);
}

/** Counted so the test proves it exercised refusals and injected failures, not only happy paths. */
const stats = { fired: 0, refusals: 0 };

async function runOp(op: Op, model: Model, env: Env, fault?: { n: number; code: string }): Promise<void> {
  const before = model.clone();
  const expected = op.apply(model);
  const faulty = fault ? failNthCall(nodeFileOps, { n: fault.n, code: fault.code }) : null;
  let actual: Outcome;
  env.docFs.current = faulty?.ops ?? nodeFileOps;
  try {
    actual = ok(await op.exec(env));
  } catch (error) {
    if (!isJournalStateError(error)) throw error;
    actual = { ok: false, code: error.code, detail: error.detail };
    stats.refusals += 1;
    if (faulty?.fired() && (error.detail === "unavailable" || error.detail === "unreadable")) {
      stats.fired += 1;
      const records = JSON.stringify(diskRecords(env));
      const committed = records === JSON.stringify(model.list());
      const untouched = records === JSON.stringify(before.list());
      expect(committed || untouched).toBe(true);
      if (!untouched) {
        expect(isJsonJournalError(error.cause) && error.cause.code).toBe("DIRECTORY_SYNC_FAILED");
      } else {
        model.fences = before.fences;
      }
      assertAgrees(env, model);
      return;
    }
  } finally {
    env.docFs.current = nodeFileOps;
  }
  expect(actual).toEqual(expected);
  assertAgrees(env, model);
}

class Command implements fc.AsyncCommand<Model, Env> {
  constructor(
    readonly op: Op,
    readonly fault?: { n: number; code: string },
  ) {}
  check = () => true;
  run(model: Model, env: Env): Promise<void> {
    return runOp(this.op, model, env, this.fault);
  }
  toString(): string {
    return this.fault ? `${this.op.name} with call ${this.fault.n} failing ${this.fault.code}` : this.op.name;
  }
}

const restart: fc.AsyncCommand<Model, Env> = {
  check: () => true,
  async run(model, env) {
    env.journal = env.open();
    assertAgrees(env, model);
  },
  toString: () => "restart",
};

const moveClock = (ms: number): fc.AsyncCommand<Model, Env> => ({
  check: () => true,
  async run(model, env) {
    model.now += ms;
    env.clock.now += ms;
  },
  toString: () => `clock(${ms > 0 ? "+" : ""}${ms})`,
});

const boxIndex = fc.nat(BOATS.length - 1);
/** Mostly the Boat's own value; one time in `odds` another one. */
const mostly = <T>(values: readonly T[], own: number, odds: number) =>
  fc.nat(odds - 1).chain((roll) => (roll === 0 ? fc.constantFrom(...values) : fc.constant(values[own]!)));

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 3,
    arbitrary: boxIndex.chain((i) =>
      fc.tuple(mostly(NAMES, i, 6), mostly(OWNERS, i, 6)).map(([n, o]) => prepare(BOATS[i]!, n, o)),
    ),
  },
  {
    weight: 6,
    arbitrary: boxIndex.chain((i) =>
      fc
        .tuple(
          mostly(OPS, i, 4),
          fc.oneof(
            {
              weight: 7,
              arbitrary: fc.constantFrom<BoatDeletionStatus>("pending", "processing", "completed"),
            },
            { weight: 1, arbitrary: fc.constant<BoatDeletionStatus>("blocked") },
          ),
          // One receipt in eight names another Boat.
          fc.nat(7).map((n) => n !== 0),
        )
        .map(([id, status, bound]) => accept(BOATS[i]!, id, status, bound)),
    ),
  },
  {
    weight: 2,
    arbitrary: boxIndex.chain((i) =>
      fc.option(mostly(OPS, i, 4), { nil: null, freq: 3 }).map((id) => block(BOATS[i]!, id)),
    ),
  },
  {
    weight: 2,
    arbitrary: fc.tuple(boxIndex, fc.nat(3)).map(([i, roll]) => restamp(BOATS[i]!, roll === 0)),
  },
  { weight: 1, arbitrary: boxIndex.map((i) => retire(BOATS[i]!)) },
  { weight: 2, arbitrary: fc.nat(2).map(read) },
);

const commandArbs = [
  fc.oneof(
    { weight: 12, arbitrary: opArb.map((op): fc.AsyncCommand<Model, Env> => new Command(op)) },
    {
      weight: 4,
      arbitrary: fc
        .tuple(opArb, fc.integer({ min: 1, max: 16 }), fc.constantFrom("EIO", "ENOSPC", "EPERM", "EEXIST"))
        .map(([op, n, code]): fc.AsyncCommand<Model, Env> => new Command(op, { n, code })),
    },
    { weight: 1, arbitrary: fc.constant(restart) },
    { weight: 2, arbitrary: fc.constantFrom(1, 1_000, -500, 60_000).map(moveClock) },
  ),
];

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

describe("delete journal against its reference model", () => {
  it("agrees with the model after every command, across restarts, clock moves and injected fs failures", async () => {
    await fc.assert(
      fc.asyncProperty(fc.commands(commandArbs, { maxCommands: 40, size: "max" }), async (cmds) => {
        const dir = tempDataDir();
        try {
          const clock = { now: T0 };
          const docFs = { current: nodeFileOps };
          const switching = Object.fromEntries(
            Object.keys(nodeFileOps).map((name) => [
              name,
              (...args: unknown[]) =>
                (docFs.current[name as keyof FileOps] as (...a: unknown[]) => unknown)(...args),
            ]),
          ) as unknown as FileOps;
          const env: Env = {
            dataDir: dir.dataDir,
            file: join(dir.dataDir, DELETE_JOURNAL_FILE),
            clock,
            docFs,
            journal: undefined as unknown as BoatDeleteJournal,
            open: () =>
              openBoatDeleteJournal({
                dataDir: dir.dataDir,
                now: () => clock.now,
                fs: switching,
                // Faults target the journal file; the lock has its own torture tests in file-lock.
                lock: { fs: nodeFileOps },
              }),
          };
          env.journal = env.open();
          await fc.asyncModelRun(() => ({ model: new Model(), real: env }), cmds);
        } finally {
          dir.cleanup();
        }
      }),
      { numRuns: RUNS },
    );
    reliability("delete journal: model-based command sequences", RUNS);
    reliability("delete journal: injected fs faults fired", stats.fired);
    reliability("delete journal: refusals checked against the model", stats.refusals);
    expect(stats.refusals).toBeGreaterThan(0);
    expect(stats.fired).toBeGreaterThan(0);
  });
});
