/**
 * Journal cycles on @drydock/storage-sqlite beside raw better-sqlite3 doing the same two transactions with
 * the same pragmas (WAL, synchronous=FULL, BEGIN IMMEDIATE), at 1, 4,095 and 100,000 existing rows
 * (`--rows=1,4095,100000`, `--iterations=N`). Every size's databases are open at once and the samples are
 * interleaved (one cycle of each contender per round, the order reversed every other round), so the disk's
 * drift between minutes weighs on every figure alike: the ÷ raw and the flatness ratios are side by side.
 * (This folds in the standalone script that was packages/storage-sqlite/bench/cycle.ts.)
 */
import { randomUUID } from "node:crypto";
import { existsSync, statSync } from "node:fs";
import { join } from "node:path";
import type { Storage } from "@drydock/storage";
import { openSqliteStorage, SQLITE_FILE } from "@drydock/storage-sqlite";
import Database from "better-sqlite3";
import { intList, intOption, type SuiteOptions } from "../lib/args.js";
import { scratchDir } from "../lib/dirs.js";
import { describeEnvironment } from "../lib/env.js";
import type { SuiteResult } from "../lib/report.js";
import { BODY, boatId, createRow, fenceRow } from "../lib/rows.js";
import { fmtMs, fmtRatio, summarize } from "../lib/stats.js";

/**
 * `n` resolved create rows and `n` accepted fences inserted into `create_rows` and `delete_rows` (the backend's
 * tables, or the raw peer's copies of them) in one transaction.
 */
function fillTables(db: Database.Database, n: number): void {
  const create = db.prepare(
    "INSERT INTO create_rows (bot_id, request_body, idempotency_key, created_at, box_id, resolved, row_json) VALUES (?, ?, ?, ?, ?, 1, ?)",
  );
  const fence = db.prepare(
    "INSERT INTO delete_rows (box_id, owner_bot_id, operation_id, row_json) VALUES (?, ?, ?, ?)",
  );
  db.transaction(() => {
    for (let i = 0; i < n; i++) {
      const row = createRow(i);
      create.run(row.botId, BODY, row.idempotencyKey, row.createdAt, row.boxId, JSON.stringify(row));
      const record = fenceRow(i);
      fence.run(record.boxId, record.ownerBotId, record.operationId, JSON.stringify(record));
    }
  })();
}

/**
 * Fills the backend through the contract's bulk import (`importAll`, one transaction, every row checked as
 * the journals check it: what `storage migrate` uses). Returns the fill's wall time in ms.
 */
async function fillBackend(storage: Storage, n: number): Promise<number> {
  const t0 = performance.now();
  await storage.importAll({
    creates: Array.from({ length: n }, (_, i) => createRow(i)),
    deletes: Array.from({ length: n }, (_, i) => fenceRow(i)),
    meta: {},
    bots: [],
  });
  return performance.now() - t0;
}

/**
 * The same two transactions per cycle in raw better-sqlite3: same pragmas, tables with the same columns,
 * unique constraints and lookups the backend's steps use (no row-count triggers, no JSON step in between:
 * that is the backend's own cost), each transaction BEGIN IMMEDIATE.
 */
function rawPeer(path: string, n: number) {
  const db = new Database(path);
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = FULL");
  db.exec(`
    CREATE TABLE create_rows (seq INTEGER PRIMARY KEY, bot_id TEXT NOT NULL, request_body TEXT NOT NULL,
      idempotency_key TEXT NOT NULL UNIQUE, created_at REAL NOT NULL, box_id TEXT, resolved INTEGER NOT NULL,
      row_json TEXT NOT NULL, UNIQUE (bot_id, request_body));
    CREATE UNIQUE INDEX create_one_boat_per_bot ON create_rows (bot_id) WHERE box_id IS NOT NULL;
    CREATE TABLE delete_rows (seq INTEGER PRIMARY KEY, box_id TEXT NOT NULL UNIQUE, owner_bot_id TEXT,
      operation_id TEXT UNIQUE, row_json TEXT NOT NULL);
    CREATE INDEX delete_by_owner ON delete_rows (owner_bot_id);`);
  const insertCreate = db.prepare(
    "INSERT INTO create_rows (bot_id, request_body, idempotency_key, created_at, box_id, resolved, row_json) VALUES (?, ?, ?, ?, ?, ?, ?)",
  );
  const insertFence = db.prepare(
    "INSERT INTO delete_rows (box_id, owner_bot_id, operation_id, row_json) VALUES (?, ?, ?, ?)",
  );
  fillTables(db, n);
  const byBot = db.prepare("SELECT seq, row_json FROM create_rows WHERE bot_id = ? ORDER BY seq");
  const byKey = db.prepare("SELECT seq, row_json FROM create_rows WHERE idempotency_key = ?");
  const removeCreate = db.prepare("DELETE FROM create_rows WHERE seq = ?");
  const byBoat = db.prepare("SELECT seq, row_json FROM delete_rows WHERE box_id = ?");
  const removeFence = db.prepare("DELETE FROM delete_rows WHERE seq = ?");
  const begin = db.transaction((bot: string, key: string) => {
    if (byBot.all(bot).length === 0)
      insertCreate.run(bot, BODY, key, Date.now(), null, 0, JSON.stringify({ bot, key }));
  });
  const discard = db.transaction((key: string) => {
    const row = byKey.get(key) as { seq: number } | undefined;
    if (row) removeCreate.run(row.seq);
  });
  const prepare = db.transaction((box: string) => {
    if (byBoat.all(box).length === 0) insertFence.run(box, "bench-bot", null, JSON.stringify({ box }));
  });
  const retire = db.transaction((box: string) => {
    const row = byBoat.get(box) as { seq: number } | undefined;
    if (row) removeFence.run(row.seq);
  });
  return {
    createCycle() {
      const key = randomUUID();
      begin.immediate("bench-bot", key);
      discard.immediate(key);
    },
    deleteCycle(box: string) {
      prepare.immediate(box);
      retire.immediate(box);
    },
    close: () => db.close(),
  };
}

interface Contender {
  label: string;
  run(): Promise<void> | void;
  samples: number[];
}

/** `rounds` rounds, each one sample of every contender, the order reversed every other round. */
async function interleave(contenders: Contender[], rounds: number, warmup: number): Promise<void> {
  for (let r = 0; r < warmup + rounds; r++) {
    const order = r % 2 === 0 ? contenders : [...contenders].reverse();
    for (const c of order) {
      const t0 = process.hrtime.bigint();
      await c.run();
      if (r >= warmup) c.samples.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
  }
}

export async function runSqliteJournals(opts: SuiteOptions): Promise<SuiteResult> {
  const sizes = intList(opts.options, "rows", opts.quick ? [1, 4_095, 10_000] : [1, 4_095, 100_000]);
  const iterations = intOption(opts.options, "iterations", opts.quick ? 40 : 300);
  const { dir, cleanup } = scratchDir("sqlite-journals");
  const environment = describeEnvironment(dir);
  const opened: { storage: Storage; raw: ReturnType<typeof rawPeer> }[] = [];
  try {
    const fills: string[][] = [];
    const contenders: Record<string, Contender> = {};
    let serial = 0;
    for (const n of sizes) {
      const dataDir = join(dir, `data-${n}`);
      const storage = await openSqliteStorage({ dataDir });
      const fillMs = await fillBackend(storage, n);
      const raw = rawPeer(join(dir, `raw-${n}.sqlite`), n);
      opened.push({ storage, raw });
      const exported = await storage.exportAll();
      if (exported.creates.length !== n || exported.deletes.length !== n) {
        throw new Error(
          `the backend holds ${exported.creates.length} create rows and ${exported.deletes.length} fences after filling ${n}: the import did not reach the backend's tables`,
        );
      }
      // The database and its WAL: the import's pages may not be checkpointed into the main file yet.
      const onDisk = (file: string) => (existsSync(file) ? statSync(file).size : 0);
      const database = join(dataDir, SQLITE_FILE);
      const bytes = onDisk(database) + onDisk(`${database}-wal`);
      fills.push([
        n.toLocaleString("en-US"),
        fmtMs(fillMs),
        ((2 * n) / (fillMs / 1000)).toFixed(0),
        `${(bytes / 2 ** 20).toFixed(1)} MiB`,
      ]);
      contenders[`create-${n}`] = {
        label: `begin + discard @ ${n}`,
        samples: [],
        async run() {
          const { request } = await storage.createJournal.beginBoatCreate(`bench-${serial++}`, BODY);
          await storage.createJournal.discardBoatCreate(request);
        },
      };
      contenders[`raw-create-${n}`] = { label: "", samples: [], run: () => raw.createCycle() };
      contenders[`delete-${n}`] = {
        label: `prepare + retire @ ${n}`,
        samples: [],
        async run() {
          const boxId = boatId(10_000_000 + serial++);
          await storage.deleteJournal.prepareBoatDeletion({
            boxId,
            name: "ogb-bench-target",
            ownerBotId: "bench-bot",
          });
          await storage.deleteJournal.retireBoatDeletion(boxId);
        },
      };
      contenders[`raw-delete-${n}`] = {
        label: "",
        samples: [],
        run: () => raw.deleteCycle(boatId(20_000_000 + serial++)),
      };
    }
    await interleave(Object.values(contenders), iterations, Math.min(20, iterations));

    const p50 = (key: string) => summarize(contenders[key]?.samples ?? []).p50Ms;
    const figures: Record<string, number> = {};
    const rows: string[][] = [];
    const first = sizes[0] as number;
    for (const kind of ["create", "delete"] as const) {
      for (const n of sizes) {
        const mine = p50(`${kind}-${n}`);
        const raw = p50(`raw-${kind}-${n}`);
        const flat = mine / p50(`${kind}-${first}`);
        figures[`${kind}${n}_p50Ms`] = mine;
        figures[`${kind}${n}_rawP50Ms`] = raw;
        figures[`${kind}${n}_rawRatio`] = mine / raw;
        figures[`${kind}${n}_flatRatio`] = flat;
        rows.push([
          contenders[`${kind}-${n}`]?.label ?? "",
          fmtMs(mine),
          fmtMs(summarize(contenders[`${kind}-${n}`]?.samples ?? []).p99Ms),
          fmtMs(raw),
          fmtRatio(mine / raw),
          n === first ? "—" : fmtRatio(flat),
          n === first ? "—" : fmtRatio(raw / p50(`raw-${kind}-${first}`)),
        ]);
      }
    }
    return {
      id: "sqlite-journals",
      title: "SQLite backend: journal cycles against raw better-sqlite3, and flatness with rows",
      environment,
      tables: [
        {
          title: `p50 of ${iterations} interleaved cycles per contender (two durable transactions each)`,
          columns: [
            "cycle @ existing rows",
            "backend p50 ms",
            "backend p99 ms",
            "raw p50 ms",
            "÷ raw",
            `÷ itself @ ${first}`,
            `raw ÷ raw @ ${first}`,
          ],
          rows,
        },
        {
          title: "Filling the database (create rows + fences, one transaction)",
          columns: ["rows per journal", "fill ms", "rows/s (both tables)", "database + WAL size"],
          rows: fills,
        },
      ],
      figures,
      notes: [
        "Targets (issue 23): within 2× of raw, and flat (the largest size within 1.3× of 1 row).",
        "Raw: better-sqlite3 12 on its own file on the same disk, WAL, synchronous=FULL, each transaction BEGIN IMMEDIATE; tables with the backend's columns, unique constraints and indexes; begin = look up the bot's rows then insert if absent, discard = look up the key then delete; prepare = look up the Boat's fence then insert, retire = look up then delete.",
        "Backend: @drydock/storage-sqlite's createJournal.beginBoatCreate + discardBoatCreate and deleteJournal.prepareBoatDeletion + retireBoatDeletion (each one BEGIN IMMEDIATE … COMMIT running the journal's pure step on the rows it reads).",
        "Fill: the contract's bulk import (storage.importAll: one transaction, each row checked as the journals check it; what `storage migrate` uses), checked by exportAll before timing. The raw peer is filled by a plain SQL insert of the same rows.",
      ],
    };
  } finally {
    for (const { storage, raw } of opened) {
      await storage.close();
      raw.close();
    }
    cleanup();
  }
}
