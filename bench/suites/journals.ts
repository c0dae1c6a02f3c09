import { randomUUID } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { openBoatCreateJournal } from "@drydock/boat-create-journal";
import { openBoatDeleteJournal } from "@drydock/boat-delete-journal";
import Database from "better-sqlite3";
import { scratchDir } from "../lib/dirs.js";
import { describeEnvironment } from "../lib/env.js";
import type { SuiteResult } from "../lib/report.js";
import { BODY, boatId, createRow, fenceRow } from "../lib/rows.js";
import { fmtMs, fmtRatio, summarize, timeAsync, timeSync } from "../lib/stats.js";
import { floorOps } from "./floor.js";

/** A create journal with `n` resolved rows, one per bot, exactly in the original create journal's file format. */
function seedCreateFile(dir: string, n: number): string {
  const requests = Array.from({ length: n }, (_, i) => createRow(i));
  const text = `${JSON.stringify({ version: 1, requests }, null, 2)}\n`;
  writeFileSync(join(dir, "box-create-requests.json"), text, { mode: 0o600 });
  return text;
}

/** A delete journal with `n` accepted records, exactly in the original delete journal's file format. */
function seedDeleteFile(dir: string, n: number): string {
  const records = Array.from({ length: n }, (_, i) => fenceRow(i));
  const text = `${JSON.stringify({ version: 1, records }, null, 2)}\n`;
  writeFileSync(join(dir, "box-delete-requests.json"), text, { mode: 0o600 });
  return text;
}

/** The same transaction in SQLite (WAL, synchronous=FULL): the usual alternative to a JSON journal. */
function sqliteCreate(dir: string, n: number) {
  const db = new Database(join(dir, "journal.sqlite"));
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = FULL");
  db.exec(
    "CREATE TABLE requests (bot_id TEXT NOT NULL, request_body TEXT NOT NULL, idempotency_key TEXT PRIMARY KEY, created_at INTEGER NOT NULL, box_id TEXT UNIQUE, resolved INTEGER, UNIQUE (bot_id, request_body))",
  );
  const insert = db.prepare("INSERT INTO requests VALUES (?, ?, ?, ?, ?, ?)");
  db.transaction(() => {
    for (let i = 0; i < n; i++)
      insert.run(`bot-${i}`, BODY, randomUUID(), 1_700_000_000_000 + i, boatId(i), 1);
  })();
  const find = db.prepare("SELECT * FROM requests WHERE bot_id = ?");
  const remove = db.prepare("DELETE FROM requests WHERE idempotency_key = ?");
  const begin = db.transaction((bot: string, key: string) => {
    if (find.all(bot).length === 0) insert.run(bot, BODY, key, Date.now(), null, null);
  });
  const discard = db.transaction((key: string) => remove.run(key));
  return {
    cycle() {
      const key = randomUUID();
      begin.immediate("bench-bot", key);
      discard.immediate(key);
    },
    close: () => db.close(),
  };
}

export async function runJournals(opts: { quick: boolean }): Promise<SuiteResult> {
  // 4,095 existing rows: the begin adds the 4,096th, the journals' cap (MAX_REQUESTS).
  const sizes = [1, 256, 4095];
  const iterations = opts.quick ? 40 : 300;
  const rows: string[][] = [];
  const figures: Record<string, number> = {};
  let environment = describeEnvironment(".");
  for (const n of sizes) {
    const { dir, cleanup } = scratchDir(`journals-${n}`);
    environment = describeEnvironment(dir);
    try {
      const createText = seedCreateFile(dir, n);
      const deleteText = seedDeleteFile(dir, n);
      const create = openBoatCreateJournal({ dataDir: dir });
      const del = openBoatDeleteJournal({ dataDir: dir });
      let i = 0;
      const createSamples = await timeAsync(async () => {
        const { request } = await create.beginBoatCreate(`bench-${i++}`, BODY);
        await create.discardBoatCreate(request);
      }, iterations);
      const deleteSamples = await timeAsync(async () => {
        const boxId = boatId(1_000_000 + i++);
        await del.prepareBoatDeletion({ boxId, name: "ogb-bench-target", ownerBotId: "bench-bot" });
        await del.retireBoatDeletion(boxId);
      }, iterations);
      // Floor: the same two durable whole-file replaces of the same bytes, with raw fs calls.
      const floorCreate = floorOps(dir, Buffer.from(createText));
      const floorDelete = floorOps(dir, Buffer.from(deleteText));
      const createFloor = timeSync(() => {
        floorCreate.atomicReplace();
        floorCreate.atomicReplace();
      }, iterations);
      const deleteFloor = timeSync(() => {
        floorDelete.atomicReplace();
        floorDelete.atomicReplace();
      }, iterations);
      const sqlite = sqliteCreate(dir, n);
      const sqliteSamples = timeSync(() => sqlite.cycle(), iterations);
      sqlite.close();
      const p = (s: number[]) => summarize(s).p50Ms;
      figures[`create${n}_p50Ms`] = p(createSamples);
      figures[`create${n}_floorRatio`] = p(createSamples) / p(createFloor);
      figures[`create${n}_sqliteRatio`] = p(createSamples) / p(sqliteSamples);
      figures[`delete${n}_p50Ms`] = p(deleteSamples);
      figures[`delete${n}_floorRatio`] = p(deleteSamples) / p(deleteFloor);
      rows.push([
        `begin + discard @ ${n}`,
        `${(createText.length / 1024).toFixed(0)} KiB`,
        fmtMs(p(createSamples)),
        fmtMs(summarize(createSamples).p99Ms),
        fmtMs(p(createFloor)),
        fmtRatio(p(createSamples) / p(createFloor)),
        fmtMs(p(sqliteSamples)),
        fmtRatio(p(createSamples) / p(sqliteSamples)),
      ]);
      rows.push([
        `prepare + retire @ ${n}`,
        `${(deleteText.length / 1024).toFixed(0)} KiB`,
        fmtMs(p(deleteSamples)),
        fmtMs(summarize(deleteSamples).p99Ms),
        fmtMs(p(deleteFloor)),
        fmtRatio(p(deleteSamples) / p(deleteFloor)),
        "",
        "",
      ]);
    } finally {
      cleanup();
    }
  }
  return {
    id: "journals",
    title: "Journals: two durable transactions per cycle, against the floor and SQLite",
    environment,
    tables: [
      {
        title: `p50 of ${iterations} cycles at each journal size (existing records)`,
        columns: [
          "cycle @ records",
          "file size",
          "drydock p50 ms",
          "drydock p99 ms",
          "floor p50 ms",
          "÷ floor",
          "SQLite p50 ms",
          "÷ SQLite",
        ],
        rows,
      },
    ],
    figures,
    notes: [
      "Floor: the same two whole-file durable replaces (temp write + fsync + rename + fsync(dir)) of the same bytes, with raw fs calls.",
      "SQLite: better-sqlite3 12, WAL, synchronous=FULL, BEGIN IMMEDIATE; insert-if-absent then delete by key, as two transactions.",
      "The journal rewrites the whole file per change (the original journals' format), so its cost grows with the file; SQLite's does not.",
    ],
  };
}
