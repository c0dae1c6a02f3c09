// Journal cycles on the SQLite backend beside raw better-sqlite3 doing the same two transactions with the
// same pragmas (WAL, synchronous=FULL, BEGIN IMMEDIATE). Not a test (timings are never asserted):
//   node --conditions=@drydock/source --import tsx packages/storage-sqlite/bench/cycle.ts [iterations] [sizes...]
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { openSqliteStorage, SQLITE_FILE } from "../src/index.js";

const BODY = JSON.stringify({ ttlSeconds: 28_800, noEnv: true });
const ALPHABET = "23456789abcdefghjkmnpqrstuvwxyz";
const boatId = (i: number) => {
  let s = "";
  let n = i;
  for (let k = 0; k < 8; k++) {
    s += ALPHABET[n % ALPHABET.length];
    n = Math.floor(n / ALPHABET.length);
  }
  return `bx_${s}`;
};

/** n resolved create rows and n accepted fences, written straight into the backend's tables. */
function seed(path: string, n: number): void {
  const db = new Database(path);
  const create = db.prepare(
    "INSERT INTO create_rows (bot_id, request_body, idempotency_key, created_at, box_id, resolved, row_json) VALUES (?, ?, ?, ?, ?, 1, ?)",
  );
  const fence = db.prepare(
    "INSERT INTO delete_rows (box_id, owner_bot_id, operation_id, row_json) VALUES (?, ?, ?, ?)",
  );
  db.transaction(() => {
    for (let i = 0; i < n; i++) {
      const row = {
        botId: `bot-${i}`,
        requestBody: BODY,
        idempotencyKey: randomUUID(),
        createdAt: 1_700_000_000_000 + i,
        boxId: boatId(i),
        resolved: true,
      };
      create.run(row.botId, BODY, row.idempotencyKey, row.createdAt, row.boxId, JSON.stringify(row));
      const record = {
        boxId: boatId(i),
        name: `ogb-bench-${i}`,
        ownerBotId: `bot-${i}`,
        phase: "accepted",
        requestedAt: 1_700_000_000_000 + i,
        updatedAt: 1_700_000_000_000 + i,
        operationId: `bdop_${i.toString(16).padStart(32, "0")}`,
        status: "pending",
      };
      fence.run(record.boxId, record.ownerBotId, record.operationId, JSON.stringify(record));
    }
  })();
  db.close();
}

/** The same two transactions in raw better-sqlite3, same pragmas, the same kind of table and indexes. */
function raw(dir: string, n: number) {
  const db = new Database(join(dir, "raw.sqlite"));
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = FULL");
  db.exec(
    "CREATE TABLE requests (seq INTEGER PRIMARY KEY, bot_id TEXT NOT NULL, request_body TEXT NOT NULL, idempotency_key TEXT NOT NULL UNIQUE, created_at REAL NOT NULL, box_id TEXT, resolved INTEGER NOT NULL, row_json TEXT NOT NULL, UNIQUE (bot_id, request_body))",
  );
  const insert = db.prepare(
    "INSERT INTO requests (bot_id, request_body, idempotency_key, created_at, box_id, resolved, row_json) VALUES (?, ?, ?, ?, ?, ?, ?)",
  );
  db.transaction(() => {
    for (let i = 0; i < n; i++) insert.run(`bot-${i}`, BODY, randomUUID(), 1, boatId(i), 1, "{}");
  })();
  const find = db.prepare("SELECT seq, row_json FROM requests WHERE bot_id = ?");
  const remove = db.prepare("DELETE FROM requests WHERE idempotency_key = ?");
  const begin = db.transaction((bot: string, key: string) => {
    if (find.all(bot).length === 0)
      insert.run(bot, BODY, key, Date.now(), null, 0, JSON.stringify({ bot, key }));
  });
  const discard = db.transaction((key: string) => {
    find.all("bench-bot");
    remove.run(key);
  });
  return {
    cycle() {
      const key = randomUUID();
      begin.immediate("bench-bot", key);
      discard.immediate(key);
    },
    close: () => db.close(),
  };
}

const p50 = (samples: number[]) =>
  [...samples].sort((a, b) => a - b)[Math.floor(samples.length / 2)] as number;
async function time(fn: () => unknown, iterations: number): Promise<number> {
  const samples: number[] = [];
  for (let i = 0; i < iterations; i++) {
    const t = process.hrtime.bigint();
    await fn();
    samples.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  return p50(samples);
}

const [iterationsArg, ...sizeArgs] = process.argv.slice(2);
const iterations = Number(iterationsArg ?? 200);
const sizes = sizeArgs.length ? sizeArgs.map(Number) : [1, 4_095, 100_000];
console.log(`p50 of ${iterations} cycles; node ${process.version}; ${tmpdir()}`);
console.log("rows\tbegin+discard ms\traw ms\t÷ raw\tprepare+retire ms\traw ms\t÷ raw");
for (const n of sizes) {
  const dir = mkdtempSync(join(tmpdir(), "drydock-sqlite-bench-"));
  try {
    const dataDir = join(dir, "data");
    await (await openSqliteStorage({ dataDir })).close();
    seed(join(dataDir, SQLITE_FILE), n);
    const storage = await openSqliteStorage({ dataDir });
    let i = 0;
    const create = await time(async () => {
      const { request } = await storage.createJournal.beginBoatCreate(`bench-${i++}`, BODY);
      await storage.createJournal.discardBoatCreate(request);
    }, iterations);
    const del = await time(async () => {
      const boxId = boatId(1_000_000 + i++);
      await storage.deleteJournal.prepareBoatDeletion({
        boxId,
        name: "ogb-bench-target",
        ownerBotId: "bench-bot",
      });
      await storage.deleteJournal.retireBoatDeletion(boxId);
    }, iterations);
    await storage.close();
    const peer = raw(dir, n);
    const rawCycle = await time(() => peer.cycle(), iterations);
    peer.close();
    const f = (x: number) => x.toFixed(3);
    console.log(
      `${n}\t${f(create)}\t${f(rawCycle)}\t${(create / rawCycle).toFixed(2)}\t${f(del)}\t${f(rawCycle)}\t${(del / rawCycle).toFixed(2)}`,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
