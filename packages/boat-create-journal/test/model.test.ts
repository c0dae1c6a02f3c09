import { appendFileSync, existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { type FileOps, failNthCall, nodeFileOps } from "@drydock/file-lock";
import { isJsonJournalError } from "@drydock/json-journal";
import fc from "fast-check";
import { afterEach, describe, expect, it } from "vitest";
import {
  type BoatCreateJournal,
  type BoatCreateRequest,
  CREATE_JOURNAL_FILE,
  isJournalStateError,
  KEY_RETENTION_MS,
  KEY_SAFETY_MARGIN_MS,
  openBoatCreateJournal,
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
 * small reference model (an ordered map bot → row). After every command the file on disk must equal the
 * model, pass the original system's own validation and hold no temporary files. Commands include a
 * restart (a fresh journal object) and injected file-system failures; a failed write must leave the
 * journal at its state before the command (or, only for a failure after the commit point, after it).
 */

const BOTS = ["bot-a", "bot-b", "bot-c"];
const BODIES = ['{"ttlSeconds":28800,"noEnv":true}', '{"ttlSeconds":7200,"noEnv":true}'];
const BOATS = ["bx_aaaaaaaa", "bx_bbbbbbbb", "bx_cccccccc"];
const T0 = 1_767_000_000_000;
const keyOf = (n: number) => `00000000-0000-4000-8000-${n.toString(16).padStart(12, "0")}`;

type Row = BoatCreateRequest;
type Outcome = { ok: true; value: unknown } | { ok: false; detail: string };

class Model {
  rows = new Map<string, Row>();
  held: Row[] = [];
  now = T0;
  minted = 0;

  clone(): Model {
    const copy = new Model();
    copy.rows = new Map([...this.rows].map(([bot, row]) => [bot, { ...row }]));
    copy.held = this.held.map((row) => ({ ...row }));
    copy.now = this.now;
    copy.minted = this.minted;
    return copy;
  }

  list(): Row[] {
    return [...this.rows.values()];
  }

  hold(row: Row): Row {
    this.held.push({ ...row });
    if (this.held.length > 8) this.held.shift();
    return { ...row };
  }

  mint(): string {
    this.minted += 1;
    return keyOf(this.minted);
  }
}

interface Env {
  dataDir: string;
  file: string;
  clock: { now: number };
  keys: { minted: number };
  docFs: { current: FileOps };
  journal: BoatCreateJournal;
  open(): BoatCreateJournal;
}

interface Op {
  name: string;
  /** Applies the command to the model (mutating it) and returns what the journal must answer. */
  apply(model: Model): Outcome;
  exec(env: Env, model: Model): Promise<unknown>;
}

const fail = (detail: string): Outcome => ({ ok: false, detail });
const ok = (value: unknown): Outcome => ({ ok: true, value });

const begin = (bot: string, body: string): Op => ({
  name: `begin(${bot}, body${BODIES.indexOf(body)})`,
  apply(m) {
    const row = m.rows.get(bot);
    if (row?.boxId !== undefined) return ok({ request: m.hold(row), startedNow: false });
    if (row) {
      if (row.requestBody !== body)
        return fail("waiting for an earlier cloud computer request to be reconciled");
      if (m.now - row.createdAt >= KEY_RETENTION_MS)
        return fail("older than boat.dev's 24-hour retry window");
      if (m.now - row.createdAt >= KEY_RETENTION_MS - KEY_SAFETY_MARGIN_MS)
        return fail("too close to the end of boat.dev's 24-hour retry window");
      return ok({ request: m.hold(row), startedNow: false });
    }
    const fresh: Row = { botId: bot, requestBody: body, idempotencyKey: m.mint(), createdAt: m.now };
    m.rows.set(bot, fresh);
    return ok({ request: m.hold(fresh), startedNow: true });
  },
  exec: (env) => env.journal.beginBoatCreate(bot, body),
});

const sameAttempt = (a: Row, b: Row) =>
  a.botId === b.botId && a.requestBody === b.requestBody && a.idempotencyKey === b.idempotencyKey;

const remember = (heldIndex: number, boat: string): Op => ({
  name: `remember(held[${heldIndex}], ${boat})`,
  apply(m) {
    const held = m.held[heldIndex % m.held.length]!;
    const row = m.rows.get(held.botId);
    if (!row || !sameAttempt(row, held) || (row.boxId !== undefined && row.boxId !== boat)) {
      return fail("out of date");
    }
    const completed = { ...row, boxId: boat };
    m.rows.delete(held.botId);
    m.rows.set(held.botId, completed);
    return ok(m.hold(completed));
  },
  exec: (env, m) => env.journal.rememberCreatedBoat(m.held[heldIndex % m.held.length]!, boat),
});

const resolve = (heldIndex: number): Op => ({
  name: `resolve(held[${heldIndex}])`,
  apply(m) {
    const held = m.held[heldIndex % m.held.length]!;
    const row = m.rows.get(held.botId);
    if (!row || !sameAttempt(row, held) || row.boxId !== held.boxId || row.boxId === undefined) {
      return fail("out of date");
    }
    row.resolved = true;
    return ok(m.hold(row));
  },
  exec: (env, m) => env.journal.resolveBoatCreate(m.held[heldIndex % m.held.length]!),
});

const discard = (heldIndex: number): Op => ({
  name: `discard(held[${heldIndex}])`,
  apply(m) {
    const held = m.held[heldIndex % m.held.length]!;
    for (const [bot, row] of m.rows) {
      if (row.idempotencyKey !== held.idempotencyKey) continue;
      if (!sameAttempt(row, held) || row.boxId !== held.boxId) return fail("out of date");
      m.rows.delete(bot);
    }
    return ok(undefined);
  },
  exec: (env, m) => env.journal.discardBoatCreate(m.held[heldIndex % m.held.length]!),
});

const adopt = (bot: string, boat: string): Op => ({
  name: `adopt(${bot}, ${boat})`,
  apply(m) {
    const sameBoat = m.list().find((row) => row.boxId === boat);
    if (sameBoat && sameBoat.botId !== bot)
      return fail("conflicted with another bot's remembered cloud computer");
    if (sameBoat?.resolved === true) return ok(undefined);
    const adopted: Row = sameBoat
      ? { ...sameBoat, resolved: true }
      : {
          botId: bot,
          requestBody: JSON.stringify({ adopted: "legacy-name", boxId: boat }),
          idempotencyKey: m.mint(),
          createdAt: m.now,
          boxId: boat,
          resolved: true,
        };
    m.rows.delete(bot);
    m.rows.set(bot, adopted);
    return ok(undefined);
  },
  exec: (env) => env.journal.adoptResolvedBoat(bot, boat),
});

const retire = (boat: string): Op => ({
  name: `retire(${boat})`,
  apply(m) {
    for (const [bot, row] of m.rows) if (row.boxId === boat) m.rows.delete(bot);
    return ok(undefined);
  },
  exec: (env) => env.journal.retireDeletedBoatCreate(boat),
});

const sanitised = (m: Model, botId?: string) =>
  ok(
    m
      .list()
      .filter((row) => botId === undefined || row.botId === botId)
      .map((row) => ({
        botId: row.botId,
        ...(row.boxId !== undefined ? { boxId: row.boxId } : {}),
        resolved: row.resolved === true,
        createdAt: row.createdAt,
        ageMs: Math.max(0, m.now - row.createdAt),
      })),
  );

const snapshot: Op = {
  name: "snapshot",
  apply: (m) => sanitised(m),
  exec: (env) => env.journal.boatCreateRecoverySnapshot(),
};

const rowsOf = (bot: string): Op => ({
  name: `rowsOf(${bot})`,
  apply: (m) => sanitised(m, bot),
  exec: (env) => env.journal.boatCreateRowsOf(bot),
});

function diskRows(env: Env): Row[] {
  if (!existsSync(env.file)) return [];
  const text = readFileSync(env.file, "utf8");
  expect(seedVerdict(text)).toBe("ok");
  expect(text).toBe(`${JSON.stringify(JSON.parse(text), null, 2)}\n`);
  return JSON.parse(text).requests;
}

function assertAgrees(env: Env, model: Model): void {
  expect(diskRows(env)).toEqual(model.list());
  // Nothing half-written: no temporary file, no lock left behind.
  const names = existsSync(env.dataDir) ? readdirSync(env.dataDir) : [];
  expect(names.filter((name) => name !== CREATE_JOURNAL_FILE)).toEqual([]);
}

/** Counted so the test proves it exercised refusals and injected failures, not only happy paths. */
const stats = { ops: 0, faults: 0, fired: 0, refusals: 0 };
async function runOp(op: Op, model: Model, env: Env, fault?: { n: number; code: string }): Promise<void> {
  stats.ops += 1;
  if (fault) stats.faults += 1;
  const before = model.clone();
  const expected = op.apply(model);
  const faulty = fault ? failNthCall(nodeFileOps, { n: fault.n, code: fault.code }) : null;
  let actual: Outcome;
  env.docFs.current = faulty?.ops ?? nodeFileOps;
  try {
    actual = ok(await op.exec(env, before));
  } catch (error) {
    if (!isJournalStateError(error) || error.code !== "BOAT_CREATE_PAUSED") throw error;
    actual = { ok: false, detail: error.detail };
    stats.refusals += 1;
    if (faulty?.fired() && (error.detail === "unavailable" || error.detail === "unreadable")) {
      // The injected failure stopped the call. The journal is at its state before the command, or — only if
      // the failure came after the new file was renamed into place — after it.
      stats.fired += 1;
      const rows = diskRows(env);
      const committed = JSON.stringify(rows) === JSON.stringify(model.list());
      const untouched = JSON.stringify(rows) === JSON.stringify(before.list());
      expect(committed || untouched).toBe(true);
      if (!untouched) {
        expect(isJsonJournalError(error.cause) && error.cause.code).toBe("DIRECTORY_SYNC_FAILED");
      }
      const held = model.held;
      Object.assign(model, untouched ? before : model);
      if (untouched) model.held = held;
      model.minted = env.keys.minted;
      assertAgrees(env, model);
      return;
    }
  } finally {
    env.docFs.current = nodeFileOps;
  }
  expect(actual).toEqual(expected);
  expect(env.keys.minted).toBe(model.minted);
  assertAgrees(env, model);
}

class Command implements fc.AsyncCommand<Model, Env> {
  constructor(
    readonly op: Op,
    readonly fault?: { n: number; code: string },
  ) {}
  check(model: Readonly<Model>): boolean {
    return !/held/.test(this.op.name) || model.held.length > 0;
  }
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

const advance = (ms: number): fc.AsyncCommand<Model, Env> => ({
  check: () => true,
  async run(model, env) {
    model.now += ms;
    env.clock.now += ms;
  },
  toString: () => `advance(${ms})`,
});

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.tuple(fc.constantFrom(...BOTS), fc.constantFrom(...BODIES)).map(([b, y]) => begin(b, y)),
  },
  { weight: 3, arbitrary: fc.tuple(fc.nat(7), fc.constantFrom(...BOATS)).map(([i, x]) => remember(i, x)) },
  { weight: 2, arbitrary: fc.nat(7).map(resolve) },
  { weight: 1, arbitrary: fc.nat(7).map(discard) },
  {
    weight: 2,
    arbitrary: fc.tuple(fc.constantFrom(...BOTS), fc.constantFrom(...BOATS)).map(([b, x]) => adopt(b, x)),
  },
  { weight: 1, arbitrary: fc.constantFrom(...BOATS).map(retire) },
  { weight: 1, arbitrary: fc.constant(snapshot) },
  { weight: 1, arbitrary: fc.constantFrom(...BOTS).map(rowsOf) },
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
    {
      weight: 2,
      arbitrary: fc
        .constantFrom(
          1_000,
          60 * 60 * 1_000,
          KEY_RETENTION_MS / 2,
          KEY_RETENTION_MS - KEY_SAFETY_MARGIN_MS,
          KEY_RETENTION_MS - 1,
        )
        .map(advance),
    },
  ),
];

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

describe("create journal against its reference model", () => {
  it("agrees with the model after every command, across restarts, clock moves and injected fs failures", async () => {
    await fc.assert(
      fc.asyncProperty(fc.commands(commandArbs, { maxCommands: 30, size: "max" }), async (cmds) => {
        const dir = tempDataDir();
        try {
          const clock = { now: T0 };
          const keys = { minted: 0 };
          const docFs = { current: nodeFileOps };
          // A stable object whose calls go to whatever docFs.current is at that moment.
          const switching = Object.fromEntries(
            Object.keys(nodeFileOps).map((name) => [
              name,
              (...args: unknown[]) =>
                (docFs.current[name as keyof FileOps] as (...a: unknown[]) => unknown)(...args),
            ]),
          ) as unknown as FileOps;
          const env: Env = {
            dataDir: dir.dataDir,
            file: join(dir.dataDir, CREATE_JOURNAL_FILE),
            clock,
            keys,
            docFs,
            journal: undefined as unknown as BoatCreateJournal,
            open: () =>
              openBoatCreateJournal({
                dataDir: dir.dataDir,
                now: () => clock.now,
                newKey: () => keyOf(++keys.minted),
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
    reliability("create journal: model-based command sequences", RUNS);
    reliability("create journal: injected fs faults fired", stats.fired);
    reliability("create journal: refusals checked against the model", stats.refusals);
    expect(stats.refusals).toBeGreaterThan(0);
    expect(stats.fired).toBeGreaterThan(0);
  });
});
