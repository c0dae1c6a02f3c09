// Each test file gets a fresh database in the project's cluster (global-setup.ts).

import pg from "pg";
import { inject } from "vitest";

/** Creates a fresh database for this test file; sets DRYDOCK_TEST_POSTGRES_URL for the fixture and workers. */
export async function freshDatabase(): Promise<string> {
  const admin = inject("postgresUrl");
  const name = `t_${process.pid}_${Math.random().toString(36).slice(2, 10)}`;
  const client = new pg.Client({ connectionString: admin });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE ${name}`);
  } finally {
    await client.end();
  }
  const url = admin.replace(/\/postgres$/, `/${name}`);
  process.env.DRYDOCK_TEST_POSTGRES_URL = url;
  return url;
}
