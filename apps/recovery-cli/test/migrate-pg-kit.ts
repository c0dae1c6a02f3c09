/**
 * What the `storage migrate` tests against a real PostgreSQL share: a database of their own (the project's
 * global setup), a Boat simulator for the servers they start, temp directories removed afterwards, and
 * a fresh schema per case.
 */
import { rmSync } from "node:fs";
import { startBoatSimulator } from "@drydock/boat-provider/simulator";
import { createDatabaseAt } from "@drydock/test-kit/postgres";
import { afterAll, beforeAll, expect, inject } from "vitest";

export interface PgMigrateKit {
  url: string;
  password: string;
  sim: Awaited<ReturnType<typeof startBoatSimulator>>;
  dirs: string[];
  newSchema(): string;
}

/** Registers the file's beforeAll/afterAll; the fields are set once beforeAll ran. */
export function pgMigrateKit(name: string): PgMigrateKit {
  let schemas = 0;
  const kit = {
    url: "",
    password: "",
    dirs: [] as string[],
    newSchema: () => `${name}_${process.pid}_${++schemas}`,
  } as PgMigrateKit;
  beforeAll(async () => {
    kit.url = await createDatabaseAt(inject("postgresUrl"), name);
    kit.password = new URL(kit.url).password;
    expect(kit.password.length).toBeGreaterThan(0);
    kit.sim = await startBoatSimulator({ provisionMs: 0 });
  });
  afterAll(async () => {
    await kit.sim?.close();
    for (const dir of kit.dirs) rmSync(dir, { recursive: true, force: true });
  });
  return kit;
}
