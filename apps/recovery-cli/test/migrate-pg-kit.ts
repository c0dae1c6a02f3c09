/**
 * What the `storage migrate` tests against a real PostgreSQL share: a database of their own (the project's
 * global setup), a Boat simulator for the servers they start, temp directories removed afterwards, and
 * a fresh schema per case.
 */
import { rmSync } from "node:fs";
import { startBoatSimulator } from "@drydock/boat-provider/simulator";
import { createDatabaseAt } from "@drydock/test-kit/postgres";
import { afterAll, beforeAll, expect, inject } from "vitest";
import { runMain as cli, snapshotTree } from "./harness.js";

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

/**
 * `drydock storage migrate --to <to>` as a person runs it: the preview (which must change nothing and print
 * no password), then the command it prints, pasted. Returns both outputs.
 */
export async function previewAndApply(dir: string, to: string, env: Record<string, string>) {
  const before = snapshotTree(dir);
  const preview = await cli(["--data-dir", dir, "storage", "migrate", "--to", to], env);
  expect(preview.code, preview.err).toBe(0);
  expect(snapshotTree(dir)).toEqual(before);
  const line = preview.out
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l.startsWith("drydock "))
    .at(-1) as string;
  expect(line, preview.out).toBeDefined();
  return { preview, applied: await cli(line.split(" ").slice(1), env) };
}

/**
 * Through a server started on the migrated store: ada's one checkpoint is listed under its original id, and
 * restoring it brings back `notes/todo.txt` as it was when the checkpoint was taken.
 */
export async function expectMigratedCheckpointRestores(
  get: (path: string, init?: RequestInit) => Promise<Response>,
  checkpointId: string,
): Promise<void> {
  const listed = (await (await get("/v1/bots/ada/checkpoints")).json()) as {
    checkpoints: { checkpointId: string }[];
  };
  expect(listed.checkpoints.map((c) => c.checkpointId)).toEqual([checkpointId]);
  const restored = await get(`/v1/bots/ada/checkpoints/${checkpointId}/restore`, { method: "POST" });
  expect(restored.status, await restored.clone().text()).toBe(200);
  expect(await (await get("/v1/bots/ada/files/notes/todo.txt")).text()).toBe("before the checkpoint\n");
}
