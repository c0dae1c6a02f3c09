/**
 * `drydock storage migrate --to postgres` (issue #24), against a real PostgreSQL (the project's global setup;
 * this file gets its own database, each case its own schema): a file-backend data directory with bots, create
 * rows, a deletion fence, workspace files and a restore-saga checkpoint moves to postgres — journals verified,
 * each workspace's head and checkpoint read back — and a real drydock-server started on that URL serves the
 * same files and restores the migrated checkpoint. A SIGKILL at each durable step, then the same command
 * again, finishes it. A non-empty target and an unsettled restore are refused with nothing changed, and the
 * URL's password is never printed.
 */
import { spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { startBoatSimulator } from "@drydock/boat-provider/simulator";
import { acquireWorkspaceLock, openCheckpointStore, openSagaStore } from "@drydock/restore-saga";
import { MIGRATE_CRASH_POINTS, openStorage, type StorageExport } from "@drydock/storage";
import { pgWorkspacesOf, postgresBackend } from "@drydock/storage-postgres";
import { sqliteBackend } from "@drydock/storage-sqlite";
import { killWorkerAt } from "@drydock/test-kit";
import { createDatabaseAt } from "@drydock/test-kit/postgres";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { spawnServer } from "../../bot-server/test/helpers.js";
import { EXIT_CODES, StorageMigrateDocumentSchema } from "../src/index.js";
import { runMain as cli, seedFileRows, snapshotTree } from "./harness.js";
import { expectMigratedCheckpointRestores, previewAndApply } from "./migrate-pg-kit.js";

const HERE = dirname(fileURLToPath(import.meta.url));
const SERVER_MAIN = join(HERE, "..", "..", "bot-server", "src", "main.ts");
const WORKER = join(HERE, "fixtures", "migrate-pg-worker.ts");

const dirs: string[] = [];
let url = "";
let password = "";
let sim: Awaited<ReturnType<typeof startBoatSimulator>>;
beforeAll(async () => {
  url = await createDatabaseAt(inject("postgresUrl"), "migpg");
  password = new URL(url).password;
  expect(password.length).toBeGreaterThan(0);
  sim = await startBoatSimulator({ provisionMs: 0 });
});
afterAll(async () => {
  await sim?.close();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

let schemas = 0;
function newSchema(): string {
  schemas += 1;
  return `migpg_${process.pid}_${schemas}`;
}

/**
 * A data directory as a one-host installation leaves it: the file backend's journals (two bots, two create
 * rows, a deletion fence, the environment id), ada's workspace with a checkpoint taken before her notes were
 * changed, and a deleted bot's retired workspace.
 */
async function seedDir(): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), "drydock-cli-migpg-"));
  dirs.push(dir);
  await seedFileRows(dir);
  const ada = join(dir, "workspaces", "ada");
  mkdirSync(join(ada, "notes"), { recursive: true });
  writeFileSync(join(ada, "notes", "todo.txt"), "before the checkpoint\n");
  writeFileSync(join(ada, "data.bin"), Buffer.from([0, 1, 2, 255]));
  await openCheckpointStore({ dataDir: dir, durable: false }).createCheckpoint(ada);
  writeFileSync(join(ada, "notes", "todo.txt"), "after the checkpoint\n");
  mkdirSync(join(dir, "workspaces", "bob"), { recursive: true });
  writeFileSync(join(dir, "workspaces", "bob", "hello.md"), "# bob\n");
  mkdirSync(join(dir, "workspaces", ".retired", "carol.retired-1"), { recursive: true });
  return dir;
}

/** The postgres store of `schema`, opened from a scratch directory (the migrated one may still be bound to file). */
async function openTarget(schema: string) {
  const scratch = mkdtempSync(join(tmpdir(), "drydock-cli-migpg-read-"));
  dirs.push(scratch);
  return openStorage({
    dataDir: scratch,
    storage: url,
    backends: { postgres: postgresBackend },
    backendOptions: { schema },
  });
}

async function exportOf(dir: string, storage: "file" | "postgres", schema?: string): Promise<StorageExport> {
  const opened =
    storage === "file" ? await openStorage({ dataDir: dir, storage }) : await openTarget(schema as string);
  try {
    return await opened.exportAll();
  } finally {
    await opened.close();
  }
}

const migrate = (dir: string, ...rest: string[]) => [
  "--data-dir",
  dir,
  "storage",
  "migrate",
  "--to",
  "postgres",
  ...rest,
];
const envOf = (schema: string) => ({ DRYDOCK_STORAGE: url, DRYDOCK_POSTGRES_SCHEMA: schema });

const binding = (dir: string) => JSON.parse(readFileSync(join(dir, "storage.json"), "utf8"));

describe("storage migrate --to postgres", () => {
  it("moves journals, registry, meta and workspaces; a real server on postgres serves them and restores the checkpoint", async () => {
    const dir = await seedDir();
    const schema = newSchema();
    const source = await exportOf(dir, "file");
    const checkpointId = (
      await openCheckpointStore({ dataDir: dir }).listCheckpoints(join(dir, "workspaces", "ada"))
    )[0]?.checkpointId as string;
    const json = await cli(migrate(dir, "--json"), envOf(schema));
    expect(json.code, json.err).toBe(0);
    const document = StorageMigrateDocumentSchema.parse(JSON.parse(json.out));
    expect(document).toMatchObject({
      preview: true,
      to: "postgres",
      counts: { creates: 2, deletes: 1, bots: 2, meta: 1 },
      workspaces: { workspaces: 2, files: 3, checkpoints: 1, retired: 1 },
    });
    const { preview, applied } = await previewAndApply(dir, "postgres", envOf(schema));
    expect(preview.out).toContain("1 retired workspace(s) of deleted bots stay behind");
    expect(applied.code, applied.err).toBe(0);
    expect(applied.out).toContain("the server on postgres never reads it");
    for (const text of [json.out, preview.out, preview.err, applied.out, applied.err]) {
      expect(text).not.toContain(password);
    }
    expect(binding(dir)).toEqual({ version: 1, kind: "postgres" });
    expect(await exportOf(dir, "postgres", schema)).toEqual(source);
    // The old JSON files are retired: the file backend refuses them.
    await expect(openStorage({ dataDir: dir, storage: "file" }).then((s) => s.close())).rejects.toThrow();
    const retired = JSON.parse(readFileSync(join(dir, "bots.json"), "utf8"));
    expect(retired.version).toBe("migrated");

    const server = await spawnServer(
      dir,
      { ...envOf(schema), BOAT_API_URL: sim.apiUrl, BOAT_API_TOKEN: sim.token },
      { entry: SERVER_MAIN },
    );
    try {
      const get = (path: string, init: RequestInit = {}) =>
        fetch(`${server.url}${path}`, { ...init, headers: { authorization: `Bearer ${server.token}` } });
      expect(await (await get("/v1/bots/ada/files/notes/todo.txt")).text()).toBe("after the checkpoint\n");
      expect(Buffer.from(await (await get("/v1/bots/ada/files/data.bin")).arrayBuffer())).toEqual(
        Buffer.from([0, 1, 2, 255]),
      );
      expect(await (await get("/v1/bots/bob/files/hello.md")).text()).toBe("# bob\n");
      await expectMigratedCheckpointRestores(get, checkpointId);
      // The local tree is left in place, untouched by the server on postgres.
      expect(readFileSync(join(dir, "workspaces", "ada", "notes", "todo.txt"), "utf8")).toBe(
        "after the checkpoint\n",
      );
    } finally {
      server.kill();
      await server.exited;
    }
  }, 180_000);

  it("refuses a target that is not empty: exit 5, nothing changed on either side", async () => {
    const dir = await seedDir();
    const schema = newSchema();
    const other = await openStorage({
      dataDir: mkdtempSync(join(tmpdir(), "drydock-cli-migpg-other-")),
      storage: url,
      backends: { postgres: postgresBackend },
      backendOptions: { schema },
    });
    dirs.push(other.dataDir);
    await other.meta.getOrCreate("environment-id", randomUUID);
    await other.close();
    const targetBefore = await exportOf(dir, "postgres", schema);
    const before = snapshotTree(dir);
    const { applied } = await previewAndApply(dir, "postgres", envOf(schema));
    expect(applied.code).toBe(EXIT_CODES.UNSAFE);
    expect(applied.err).toContain("already holds rows (journals, bots or meta), so it is not migrated into");
    expect(applied.err).toContain("nothing was changed");
    expect(applied.err).not.toContain(password);
    // Only the (empty) locks directory the migration's own lock lives in may appear.
    const { "locks/": _locks, ...after } = snapshotTree(dir);
    expect(after).toEqual(before);
    expect(await exportOf(dir, "postgres", schema)).toEqual(targetBefore);
    const heads = await openTarget(schema);
    try {
      expect((await pgWorkspacesOf(heads)?.head("ada"))?.version).toBe(0);
    } finally {
      await heads.close();
    }
  }, 120_000);

  it("refuses while a restore saga is unsettled, naming `restores list`: nothing changed", async () => {
    const dir = await seedDir();
    const schema = newSchema();
    const store = openSagaStore({
      stateDir: join(dir, "restore-sagas"),
      workspaceRoot: join(dir, "workspaces", "ada"),
    });
    await store.create("op-unsettled", {
      kind: "checkpoint-restore",
      checkpointId: "cp-1",
      checkpointManifestDigest: `sha256:${"b".repeat(64)}`,
      actorPid: spawnSync(process.execPath, ["-e", ""]).pid as number,
    });
    const before = snapshotTree(dir);
    for (const args of [[], ["--yes", "--expected-state", `sha256:${"0".repeat(64)}`]]) {
      const refused = await cli(migrate(dir, ...args), envOf(schema));
      expect(refused.code).toBe(EXIT_CODES.UNSAFE);
      expect(refused.err).toContain("restores list");
      expect(refused.err).toContain("nothing was changed");
    }
    expect(snapshotTree(dir)).toEqual(before);
    expect(await exportOf(dir, "postgres", schema)).toEqual({ creates: [], deletes: [], meta: {}, bots: [] });
  }, 120_000);

  it("refuses while a workspace is locked by a live process (a workspace edit in flight): nothing changed", async () => {
    const dir = await seedDir();
    const schema = newSchema();
    const lock = await acquireWorkspaceLock({
      dataDir: dir,
      workspaceRoot: join(dir, "workspaces", "bob"),
      transactionId: "edit-1",
      purpose: "workspace-edit",
    });
    try {
      const before = snapshotTree(dir);
      const refused = await cli(migrate(dir), envOf(schema));
      expect(refused.code).toBe(EXIT_CODES.UNSAFE);
      expect(refused.err).toContain("Workspaces are locked");
      expect(refused.err).toContain(`pid ${process.pid}`);
      expect(snapshotTree(dir)).toEqual(before);
      expect(await exportOf(dir, "postgres", schema)).toEqual({
        creates: [],
        deletes: [],
        meta: {},
        bots: [],
      });
    } finally {
      lock.release();
    }
  }, 120_000);

  it("refuses without a postgres URL, and never prints the password of a refused one", async () => {
    const dir = await seedDir();
    const missing = await cli(migrate(dir));
    expect(missing.code).toBe(EXIT_CODES.USAGE);
    expect(missing.err).toContain("DRYDOCK_STORAGE_FILE");
  });
});

describe("a migration to postgres killed (SIGKILL) at each durable step: the same command again finishes it", () => {
  for (const point of MIGRATE_CRASH_POINTS) {
    it(`killed at ${point}`, async () => {
      const dir = await seedDir();
      const schema = newSchema();
      const source = await exportOf(dir, "file");
      const ended = await killWorkerAt(WORKER, [dir, url, schema, point], (line) =>
        line.startsWith("at-point "),
      );
      expect(ended.signal).toBe("SIGKILL");
      const { applied } = await previewAndApply(dir, "postgres", envOf(schema));
      expect(applied.code, applied.err).toBe(0);
      expect(applied.out).toContain("resumed");
      expect(binding(dir)).toEqual({ version: 1, kind: "postgres" });
      expect(await exportOf(dir, "postgres", schema)).toEqual(source);
      const target = await openTarget(schema);
      try {
        const ada = await pgWorkspacesOf(target)?.exportWorkspace("ada");
        expect(ada?.files.map((f) => f.path)).toEqual(["data.bin", "notes/todo.txt"]);
        expect(ada?.checkpoints).toHaveLength(1);
        expect(ada?.badBlobs).toEqual([]);
      } finally {
        await target.close();
      }
    }, 120_000);
  }
});

describe("storage migrate --to postgres from sqlite", () => {
  it("moves a directory bound to sqlite: the database is retired, the rows and workspaces are in postgres", async () => {
    const dir = await seedDir();
    const schema = newSchema();
    const source = await exportOf(dir, "file");
    const toSqlite = await cli(["--data-dir", dir, "storage", "migrate", "--to", "sqlite"]);
    const line = toSqlite.out
      .split("\n")
      .map((l) => l.trim())
      .filter((l) => l.startsWith("drydock "))
      .at(-1) as string;
    expect((await cli(line.split(" ").slice(1))).code).toBe(0);
    expect(binding(dir)).toEqual({ version: 1, kind: "sqlite" });
    const { applied } = await previewAndApply(dir, "postgres", envOf(schema));
    expect(applied.code, applied.err).toBe(0);
    expect(applied.out).toContain("from sqlite to postgres");
    expect(binding(dir)).toEqual({ version: 1, kind: "postgres" });
    expect(await exportOf(dir, "postgres", schema)).toEqual(source);
    // The sqlite database itself is retired: its backend refuses to open it (whatever the binding says).
    const refusal = await Promise.resolve(sqliteBackend({ dataDir: dir })).then(
      async (opened) => {
        await opened.close();
        return "opened";
      },
      (error: { code?: string; message: string }) => `${error.code}: ${error.message}`,
    );
    expect(refusal).toMatch(/^STORAGE_BACKEND_MISMATCH: .*postgres/);
    const target = await openTarget(schema);
    try {
      expect((await pgWorkspacesOf(target)?.exportWorkspace("bob"))?.files.map((f) => f.path)).toEqual([
        "hello.md",
      ]);
    } finally {
      await target.close();
    }
  }, 120_000);
});
