// The crash-restart suite (crash-restart-suite.ts) on the postgres backend: a real PostgreSQL (the bot-server
// project's global setup starts one cluster; this file gets a database of its own, each data directory a
// schema). SIGKILLs at the lifecycle's crash points and at the storage's own (inside a transaction, before and
// after COMMIT); the restart is a new instance (new epoch), the killed one's lease lapses.
import pg from "pg";
import { expect, it } from "vitest";
import { crashRestartSuite } from "./crash-restart-suite.js";
import { usePostgresDatabase } from "./helpers.js";

const databaseUrl = usePostgresDatabase();
crashRestartSuite("postgres");

// The wrapper's own check: the suite above ran against a real PostgreSQL database of this file's own, never
// silently against nothing (the servers it started were given this URL).
it("the suite's database is a real PostgreSQL database of this file's own", async () => {
  const url = databaseUrl();
  expect(url).toMatch(/^postgres(ql)?:\/\//);
  expect(process.env.DRYDOCK_TEST_POSTGRES_URL).toBe(url);
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const [row] = (await client.query<{ name: string }>("SELECT current_database() AS name")).rows;
    expect(url.endsWith(`/${row?.name}`)).toBe(true);
  } finally {
    await client.end();
  }
});
