/**
 * `drydock storage migrate --to sqlite` (and `--to file`) out of PostgreSQL (issue #24: a several-host
 * installation shrinking to one host), against a real PostgreSQL (the project's global setup; each case its own schema). A postgres
 * store with bots, create rows, a deletion fence, workspace files (one written through the store API) and a
 * checkpoint moves to a fresh data directory bound to it: journals verified, each head written as the local
 * tree and each checkpoint under its original id; the schema is retired (every later open refuses, naming
 * sqlite); a real drydock-server on sqlite serves the same files and restores the checkpoint. A live
 * instance refuses with nothing changed; a SIGKILL at each of the six crash points, towards either backend,
 * then the same command finishes it; the URL's password is never printed.
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { openCheckpointStore } from "@drydock/restore-saga";
import { MIGRATE_CRASH_POINTS, openStorage, type StorageExport } from "@drydock/storage";
import { instancesOf, pgWorkspacesOf, postgresBackend } from "@drydock/storage-postgres";
import { sqliteBackend } from "@drydock/storage-sqlite";
import { killWorkerAt } from "@drydock/test-kit";
import { describe, expect, it } from "vitest";
import { spawnServer } from "../../bot-server/test/helpers.js";
import { EXIT_CODES, StorageMigrateDocumentSchema } from "../src/index.js";
import { runMain as cli, seedFileRows, snapshotTree } from "./harness.js";
import { expectMigratedCheckpointRestores, pgMigrateKit, previewAndApply } from "./migrate-pg-kit.js";

const HERE = dirname(fileURLToPath(import.meta.url));
const SERVER_MAIN = join(HERE, "..", "..", "bot-server", "src", "main.ts");
const WORKER = join(HERE, "fixtures", "migrate-back-worker.ts");

const kit = pgMigrateKit("migback");
const { dirs, newSchema } = kit;
const tempDir = (name: string) => {
  const dir = mkdtempSync(join(tmpdir(), `drydock-cli-migback-${name}-`));
  dirs.push(dir);
  return dir;
};
const envOf = (schema: string) => ({ DRYDOCK_STORAGE: kit.url, DRYDOCK_POSTGRES_SCHEMA: schema });
const binding = (dir: string) => JSON.parse(readFileSync(join(dir, "storage.json"), "utf8"));

async function openPg(schema: string) {
  return openStorage({
    dataDir: tempDir("read"),
    storage: kit.url,
    backends: { postgres: postgresBackend },
    backendOptions: { schema },
  });
}

/**
 * A postgres installation: a file directory (two bots, two create rows, a deletion fence, ada's checkpoint
 * taken before her notes changed) moved to `schema` with `--to postgres`, then a file written through the
 * store API; and the surviving host's fresh data directory bound to postgres.
 */
async function pgInstallation(schema: string) {
  const old = tempDir("old");
  await seedFileRows(old);
  const ada = join(old, "workspaces", "ada");
  mkdirSync(join(ada, "notes"), { recursive: true });
  writeFileSync(join(ada, "notes", "todo.txt"), "before the checkpoint\n");
  writeFileSync(join(ada, "run.sh"), "#!/bin/sh\n");
  const { chmodSync } = await import("node:fs");
  chmodSync(join(ada, "run.sh"), 0o750);
  await openCheckpointStore({ dataDir: old, durable: false }).createCheckpoint(ada);
  writeFileSync(join(ada, "notes", "todo.txt"), "after the checkpoint\n");
  mkdirSync(join(old, "workspaces", "bob"), { recursive: true });
  writeFileSync(join(old, "workspaces", "bob", "hello.md"), "# bob\n");
  const forward = await previewAndApply(old, "postgres", envOf(schema));
  expect(forward.applied.code, forward.applied.err).toBe(0);
  const store = await openPg(schema);
  let source: StorageExport;
  try {
    await pgWorkspacesOf(store)?.writeFile("bob", "docs/pg.txt", Buffer.from("written on postgres\n"));
    source = await store.exportAll();
  } finally {
    await store.close();
  }
  const checkpointId = (
    await openCheckpointStore({ dataDir: old }).listCheckpoints(join(old, "workspaces", "ada"))
  )[0]?.checkpointId as string;
  const dir = tempDir("new");
  writeFileSync(join(dir, "storage.json"), `${JSON.stringify({ version: 1, kind: "postgres" })}\n`);
  return { dir, source, checkpointId };
}

async function localExport(dir: string, kind: "sqlite" | "file" = "sqlite"): Promise<StorageExport> {
  const opened = await openStorage({ dataDir: dir, storage: kind, backends: { sqlite: sqliteBackend } });
  try {
    return await opened.exportAll();
  } finally {
    await opened.close();
  }
}

/** Opening the schema again: the refusal's code and message, or "opened". */
async function reopen(schema: string): Promise<string> {
  return openPg(schema).then(
    async (s) => {
      await s.close();
      return "opened";
    },
    (error: { code?: string; message: string }) => `${error.code}: ${error.message}`,
  );
}

function expectLocal(dir: string, checkpointId: string) {
  const ws = join(dir, "workspaces");
  expect(readFileSync(join(ws, "ada", "notes", "todo.txt"), "utf8")).toBe("after the checkpoint\n");
  expect(statSync(join(ws, "ada", "run.sh")).mode & 0o777).toBe(0o750);
  expect(readFileSync(join(ws, "bob", "hello.md"), "utf8")).toBe("# bob\n");
  expect(readFileSync(join(ws, "bob", "docs", "pg.txt"), "utf8")).toBe("written on postgres\n");
  const store = openCheckpointStore({ dataDir: dir });
  expect(store.readVerifiedManifest(checkpointId).manifest.entries.map((e) => e.path)).toEqual([
    "notes",
    "notes/todo.txt",
    "run.sh",
  ]);
}

/** A real drydock-server on the migrated directory lists the bots, serves both files and restores the checkpoint. */
async function expectServedOn(
  dir: string,
  kind: "sqlite" | "file",
  source: StorageExport,
  checkpointId: string,
) {
  const server = await spawnServer(
    dir,
    { DRYDOCK_STORAGE: kind, BOAT_API_URL: kit.sim.apiUrl, BOAT_API_TOKEN: kit.sim.token },
    { entry: SERVER_MAIN },
  );
  try {
    const get = (path: string, init: RequestInit = {}) =>
      fetch(`${server.url}${path}`, { ...init, headers: { authorization: `Bearer ${server.token}` } });
    const bots = (await (await get("/v1/bots")).json()) as { bots: { botId: string }[] };
    expect(bots.bots.map((b) => b.botId).sort()).toEqual(source.bots.map((b) => b.botId).sort());
    expect(await (await get("/v1/bots/ada/files/notes/todo.txt")).text()).toBe("after the checkpoint\n");
    expect(await (await get("/v1/bots/bob/files/docs/pg.txt")).text()).toBe("written on postgres\n");
    await expectMigratedCheckpointRestores(get, checkpointId);
  } finally {
    server.kill();
    await server.exited;
  }
}

/**
 * A migration out of postgres applied: it succeeded and retired the schema, the directory is bound to `kind`
 * and holds the source's rows (and `also`'s), the workspaces and checkpoint are local, the schema refuses to
 * open naming `kind`, and a real server on `kind` serves it all.
 */
async function expectMovedOut(
  dir: string,
  kind: "sqlite" | "file",
  applied: { code: number; out: string; err: string },
  moved: { schema: string; source: StorageExport; checkpointId: string },
  also: () => void = () => {},
) {
  expect(applied.code, applied.err).toBe(0);
  expect(applied.out).toContain("The postgres schema is retired");
  expect(binding(dir)).toEqual({ version: 1, kind });
  expect(await localExport(dir, kind)).toEqual(moved.source);
  also();
  expectLocal(dir, moved.checkpointId);
  expect(await reopen(moved.schema)).toMatch(new RegExp(`^STORAGE_BACKEND_MISMATCH: .*retired.*${kind}`));
  await expectServedOn(dir, kind, moved.source, moved.checkpointId);
}

describe("storage migrate --to sqlite from postgres", () => {
  it("moves journals, registry, meta and workspaces; retires the schema; a real server on sqlite serves them and restores the checkpoint", async () => {
    const schema = newSchema();
    const { dir, source, checkpointId } = await pgInstallation(schema);
    const json = await cli(
      ["--data-dir", dir, "storage", "migrate", "--to", "sqlite", "--json"],
      envOf(schema),
    );
    expect(json.code, json.err).toBe(0);
    expect(StorageMigrateDocumentSchema.parse(JSON.parse(json.out))).toMatchObject({
      preview: true,
      from: "postgres",
      to: "sqlite",
      counts: { creates: 2, deletes: 1, bots: 2, meta: 1 },
      workspaces: { workspaces: 2, files: 4, checkpoints: 1 },
    });
    const { preview, applied } = await previewAndApply(dir, "sqlite", envOf(schema));
    for (const text of [json.out, preview.out, preview.err, applied.out, applied.err]) {
      expect(text).not.toContain(kit.password);
    }
    await expectMovedOut(dir, "sqlite", applied, { schema, source, checkpointId });
  }, 240_000);

  it("--to file: the seed-compatible JSON files hold the same rows; a real server on file serves the files and restores the checkpoint", async () => {
    const schema = newSchema();
    const { dir, source, checkpointId } = await pgInstallation(schema);
    const { applied } = await previewAndApply(dir, "file", envOf(schema));
    // The journals as the seeds wrote them: one JSON document each.
    await expectMovedOut(dir, "file", applied, { schema, source, checkpointId }, () => {
      expect(JSON.parse(readFileSync(join(dir, "box-create-requests.json"), "utf8")).requests).toHaveLength(
        2,
      );
      expect(JSON.parse(readFileSync(join(dir, "box-delete-requests.json"), "utf8")).records).toHaveLength(1);
    });
  }, 240_000);

  it("more rows than a file holds (4,096): --to sqlite moves them all; --to file refuses, nothing changed", async () => {
    const schema = newSchema();
    const n = 5_000;
    const source: StorageExport = {
      creates: Array.from({ length: n }, (_, i) => ({
        botId: `b${i}`,
        requestBody: '{"ttlSeconds":28800,"noEnv":true}',
        idempotencyKey: `00000000-0000-4000-8000-${i.toString(16).padStart(12, "0")}`,
        createdAt: 1_767_000_000_000 + i,
      })),
      deletes: [],
      meta: {},
      bots: Array.from({ length: n }, (_, i) => ({
        botId: `b${i}`,
        name: `Bot ${i}`,
        createdAt: 1_767_000_000_000 + i,
      })).sort((a, b) => (a.botId < b.botId ? -1 : 1)),
    };
    const store = await openPg(schema);
    try {
      await store.importAll(source);
    } finally {
      await store.close();
    }
    const dir = tempDir("big");
    writeFileSync(join(dir, "storage.json"), `${JSON.stringify({ version: 1, kind: "postgres" })}\n`);
    const before = snapshotTree(dir);
    // Refused at the preview, naming what is over and where it can go; with --yes too: nothing changed.
    for (const args of [[], ["--yes", "--expected-state", `sha256:${"0".repeat(64)}`]]) {
      const toFile = await cli(
        ["--data-dir", dir, "storage", "migrate", "--to", "file", ...args],
        envOf(schema),
      );
      expect(toFile.code, toFile.out).toBe(EXIT_CODES.USAGE);
      expect(toFile.err).toContain(
        `holds 5000 create rows and 5000 bots, more than the file backend can (at most 4096 rows a journal and 4096 bots), so nothing was changed. Keep it on postgres, or move it to sqlite, which has no such cap: drydock storage migrate --data-dir ${JSON.stringify(dir)} --to sqlite`,
      );
      expect(toFile.out).not.toContain("To apply it");
      expect(snapshotTree(dir)).toEqual(before);
      expect(await reopen(schema)).toBe("opened");
    }
    // SQLite holds them all (its import was held to a file's 4,096 rows until this was fixed).
    const { applied } = await previewAndApply(dir, "sqlite", envOf(schema));
    expect(applied.code, applied.err).toBe(0);
    expect(binding(dir)).toEqual({ version: 1, kind: "sqlite" });
    expect(await localExport(dir)).toEqual(source);
  }, 240_000);

  it("refuses while an instance is live in the database, and while the local side holds workspaces: nothing changed", async () => {
    const schema = newSchema();
    const { dir, source } = await pgInstallation(schema);
    // The fenced command is printed before the instance registers: the apply's own check must refuse too.
    const printed = (
      await cli(["--data-dir", dir, "storage", "migrate", "--to", "sqlite"], envOf(schema))
    ).out
      .split("\n")
      .map((l) => l.trim())
      .filter((l) => l.startsWith("drydock "))
      .at(-1) as string;
    const store = await openPg(schema);
    const live = await instancesOf(store)?.register({ host: "other-host", pid: 4242, ttlMs: 600_000 });
    await store.close();
    expect(live).toBeDefined();
    const before = snapshotTree(dir);
    const refused = await cli(["--data-dir", dir, "storage", "migrate", "--to", "sqlite"], envOf(schema));
    expect(refused.code).toBe(EXIT_CODES.UNSAFE);
    expect(refused.err).toContain("live bot-server instances");
    expect(refused.err).toContain("other-host pid 4242");
    expect(refused.err).not.toContain(kit.password);
    const apply = await cli(printed.split(" ").slice(1), envOf(schema));
    expect(apply.code, apply.out).toBe(EXIT_CODES.UNSAFE);
    expect(apply.err).toContain("other-host pid 4242");
    // migrateStorage's own check of the source (inside the migration's lock), without the CLI's read before it.
    const direct = spawnSync(
      process.execPath,
      ["--conditions=@drydock/source", "--import", "tsx", WORKER, dir, kit.url, schema, "none"],
      { encoding: "utf8" },
    );
    expect(direct.status, direct.stdout).not.toBe(0);
    expect(direct.stderr).toContain("live bot-server instances");
    expect(direct.stdout).not.toContain("finished");
    // Only the migration lock's (empty) directory is new: no progress record, no sqlite, no workspace.
    expect(snapshotTree(dir)).toEqual({ ...before, "locks/": "" });
    expect(await reopen(schema)).toBe("opened");
    const after = await openPg(schema);
    try {
      expect(await after.exportAll()).toEqual(source);
      await instancesOf(after)?.stop(live?.id as string, live?.epoch as number);
    } finally {
      await after.close();
    }
    mkdirSync(join(dir, "workspaces", "stray"), { recursive: true });
    const local = snapshotTree(dir);
    const occupied = await cli(["--data-dir", dir, "storage", "migrate", "--to", "sqlite"], envOf(schema));
    expect(occupied.code).toBe(EXIT_CODES.UNSAFE);
    expect(occupied.err).toContain("already holds local workspaces");
    expect(snapshotTree(dir)).toEqual(local);
    expect(binding(dir)).toEqual({ version: 1, kind: "postgres" });
  }, 240_000);
});

describe("a migration out of postgres killed (SIGKILL) at each durable step: the same command again finishes it", () => {
  const cases = (["sqlite", "file"] as const).flatMap((to) =>
    MIGRATE_CRASH_POINTS.map((point) => ({ point, to })),
  );
  for (const { point, to } of cases) {
    it(`--to ${to}, killed at ${point}`, async () => {
      const schema = newSchema();
      const { dir, source, checkpointId } = await pgInstallation(schema);
      const ended = await killWorkerAt(WORKER, [dir, kit.url, schema, point, to], (line) =>
        line.startsWith("at-point "),
      );
      expect(ended.signal).toBe("SIGKILL");
      const { applied } = await previewAndApply(dir, to, envOf(schema));
      expect(applied.code, applied.err).toBe(0);
      // Killed while copying, the partial local store is untrusted and the migration starts over (the local
      // files written again, the checkpoints found equal); killed once it was verified, only the rest is done.
      const verified =
        point === "migrate:verified" || point === "migrate:retired" || point === "migrate:rebound";
      expect(applied.out).toContain(verified ? "(resumed)" : "(migrated)");
      expect(binding(dir)).toEqual({ version: 1, kind: to });
      expect(await localExport(dir, to)).toEqual(source);
      expectLocal(dir, checkpointId);
      expect(await reopen(schema)).toMatch(/^STORAGE_BACKEND_MISMATCH: /);
    }, 240_000);
  }
});
