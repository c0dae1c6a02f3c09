import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { CREATE_JOURNAL_FILE, openBoatCreateJournal } from "@drydock/boat-create-journal";
import { DELETE_JOURNAL_FILE } from "@drydock/boat-delete-journal";
import { BOTS_FILE } from "@drydock/facts";
import {
  type BackendFactory,
  claimDataDir,
  MIGRATE_CRASH_POINTS,
  migrateStorage,
  openFileStorage,
  openStorage,
  pendingMigration,
  readStorageBinding,
  type Storage,
  type StorageExport,
  type StorageKind,
} from "@drydock/storage";
import { killWorkerAt, spawnWorker } from "@drydock/test-kit";
import { afterEach, describe, expect, it } from "vitest";
import { openSqliteStorage, SQLITE_FILE, sqliteBackend } from "../src/index.js";

const SEED_DRIVER = fileURLToPath(new URL("../../storage/test/seeds/driver.ts", import.meta.url));
const WORKER = fileURLToPath(new URL("./fixtures/migrate-worker.ts", import.meta.url));
const backends = { sqlite: sqliteBackend };
const JSON_FILES = [CREATE_JOURNAL_FILE, DELETE_JOURNAL_FILE, BOTS_FILE];

const roots: string[] = [];
afterEach(() => {
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
});
function fresh(): string {
  const root = mkdtempSync(join(tmpdir(), "drydock-migrate-"));
  roots.push(root);
  return join(root, "data");
}

/** Runs the seeds' own modules on `dataDir` in a child process. */
function seed(
  dataDir: string,
  op: string,
  arg?: string,
): { ok: boolean; value?: unknown; message?: string; status?: number } {
  const out = execFileSync(process.execPath, ["--import", "tsx", SEED_DRIVER, op, ...(arg ? [arg] : [])], {
    env: { ...process.env, DRYDOCK_SEED_DATA_DIR: dataDir },
    encoding: "utf8",
  });
  return JSON.parse(out.trim().split("\n").at(-1) as string);
}

/** A data directory written by the seeds' own code, plus bots (with a deletion mark) and an environment id. */
async function seedFormatDataDir(): Promise<{ dataDir: string; before: StorageExport }> {
  const dataDir = fresh();
  expect(seed(dataDir, "write-sample")).toEqual({ ok: true, value: { creates: 3, deletes: 2 } });
  const storage = await openStorage({ dataDir });
  try {
    await storage.bots.create({ botId: "seed-a", name: "Seed A" });
    await storage.bots.create({ botId: "Zed", name: "Zed" });
    await storage.bots.markDeleting("seed-a");
    await storage.meta.getOrCreate("environment-id", () => "5f0c6f9e-2b1d-4c3a-9d8e-7f6a5b4c3d2e");
    return { dataDir, before: await storage.exportAll() };
  } finally {
    await storage.close();
  }
}

async function exportOf(dataDir: string, kind: StorageKind): Promise<StorageExport> {
  const storage = await openStorage({ dataDir, storage: kind, backends });
  try {
    return await storage.exportAll();
  } finally {
    await storage.close();
  }
}

const bytesOf = (dataDir: string) =>
  Object.fromEntries(
    JSON_FILES.map((name) => [
      name,
      existsSync(join(dataDir, name)) ? readFileSync(join(dataDir, name), "utf8") : null,
    ]),
  );
const binding = async (dataDir: string) => (await readStorageBinding(dataDir))?.kind;
const codeOf = (promise: Promise<unknown>) =>
  promise.then(
    () => null,
    (e: unknown) => (e as { code?: unknown }).code,
  );

describe("migrateStorage", () => {
  it("a seed-written data directory migrates file → sqlite → file with equal exports", async () => {
    const { dataDir, before } = await seedFormatDataDir();
    expect(before.creates).toHaveLength(3);
    expect(before.bots[1]?.deletions).toHaveLength(1);
    const there = await migrateStorage({ dataDir, to: "sqlite", backends });
    expect(there).toMatchObject({
      from: "file",
      to: "sqlite",
      outcome: "migrated",
      counts: { creates: 3, deletes: 2, bots: 2 },
    });
    expect(await binding(dataDir)).toBe("sqlite");
    expect(await exportOf(dataDir, "sqlite")).toEqual(before);
    const back = await migrateStorage({ dataDir, to: "file", backends });
    expect(back.outcome).toBe("migrated");
    expect(await binding(dataDir)).toBe("file");
    expect(await exportOf(dataDir, "file")).toEqual(before);
    // The retired database refuses every open, even a direct one; the live files serve the seeds again.
    expect(await codeOf(openSqliteStorage({ dataDir }))).toBe("STORAGE_BACKEND_MISMATCH");
    expect(seed(dataDir, "begin", "seed-new")).toEqual({ ok: true, value: true });
    // And once more: the retired database is moved aside, a new one built.
    await migrateStorage({ dataDir, to: "sqlite", backends });
    const again = await exportOf(dataDir, "sqlite");
    expect(again.creates.map((r) => r.botId)).toEqual(["seed-a", "seed-b", "seed-c", "seed-new"]);
    expect(again.bots).toEqual(before.bots);
  });

  it("the server token and the provider binding stay the data directory's files: never exported, migrated or keys", async () => {
    const { dataDir, before } = await seedFormatDataDir();
    const token = "tok_secret-do-not-copy";
    writeFileSync(join(dataDir, "server-token"), `${token}\n`, { mode: 0o600 });
    // A binding as a person may type it: quotes and a space (not a meta value at all).
    writeFileSync(join(dataDir, "boat-provider"), '"https://boat.dev/api "\n');
    expect(await exportOf(dataDir, "file")).toEqual(before);
    expect(Object.keys(before.meta)).toEqual(["environment-id"]);
    await migrateStorage({ dataDir, to: "sqlite", backends });
    expect(await exportOf(dataDir, "sqlite")).toEqual(before);
    const database = readFileSync(join(dataDir, SQLITE_FILE));
    expect(database.includes(Buffer.from(token))).toBe(false);
    expect(readFileSync(join(dataDir, "server-token"), "utf8")).toBe(`${token}\n`);
    for (const kind of ["file", "sqlite"] as const) {
      const storage = await openStorage({ dataDir: fresh(), storage: kind, backends });
      try {
        for (const key of ["server-token", "boat-provider"]) {
          expect(await codeOf(storage.meta.getOrCreate(key, () => "x"))).toBe("STORAGE_INVALID_ARGUMENT");
          expect(await codeOf(storage.meta.get(key))).toBe("STORAGE_INVALID_ARGUMENT");
        }
      } finally {
        await storage.close();
      }
    }
  });

  it("after file → sqlite, the seeds' code and drydock's file backend refuse the retired files, bytes unchanged", async () => {
    const { dataDir } = await seedFormatDataDir();
    await migrateStorage({ dataDir, to: "sqlite", backends });
    const retired = bytesOf(dataDir);
    for (const text of Object.values(retired))
      expect(JSON.parse(text as string)).toMatchObject({ version: "migrated", to: "sqlite" });
    // The seeds' own loaders accept only version 1: no create begins, no fence is written.
    const begin = seed(dataDir, "begin", "seed-new");
    expect(begin).toMatchObject({ ok: false, status: 503 });
    expect(begin.message).toContain("recovery state is invalid");
    expect(seed(dataDir, "prepare", "bx_dddddddd")).toMatchObject({ ok: false, status: 503 });
    // drydock: the binding refuses first; the file backend opened directly names where the state went.
    expect(await codeOf(openStorage({ dataDir, storage: "file" }))).toBe("STORAGE_BACKEND_MISMATCH");
    const direct = await openFileStorage({ dataDir }).then(
      () => null,
      (e: Error & { code?: string }) => e,
    );
    expect(direct?.code).toBe("STORAGE_BACKEND_MISMATCH");
    expect(direct?.message).toMatch(
      /retired by `drydock storage migrate`.*sqlite storage backend.*DRYDOCK_STORAGE=sqlite/,
    );
    // The journal package opened on the retired file refuses too; it never reads it as empty.
    const journal = openBoatCreateJournal({ dataDir });
    expect(await codeOf(journal.beginBoatCreate("seed-new", "{}"))).toBe("BOAT_CREATE_PAUSED");
    expect(await codeOf(journal.boatCreateRecoverySnapshot())).toBe("BOAT_CREATE_PAUSED");
    expect(bytesOf(dataDir)).toEqual(retired);
  });

  it("sqlite → file refuses live JSON files holding rows (STORAGE_NOT_EMPTY): nothing written, sqlite still bound", async () => {
    const { dataDir, before } = await seedFormatDataDir();
    await migrateStorage({ dataDir, to: "sqlite", backends });
    const live = `${JSON.stringify({ version: 1, bots: [{ botId: "stray", name: "Stray", createdAt: 1 }] }, null, 2)}\n`;
    writeFileSync(join(dataDir, BOTS_FILE), live);
    const bytes = bytesOf(dataDir);
    expect(await codeOf(migrateStorage({ dataDir, to: "file", backends }))).toBe("STORAGE_NOT_EMPTY");
    expect(bytesOf(dataDir)).toEqual(bytes);
    expect(await binding(dataDir)).toBe("sqlite");
    expect(await exportOf(dataDir, "sqlite")).toEqual(before);
    expect(existsSync(join(dataDir, "locks", "storage-migrate.json"))).toBe(false);
  });

  it("sqlite → file of more bots than a file holds (4,096) is refused before anything is written, naming the cap", async () => {
    const dataDir = fresh();
    await migrateStorage({ dataDir, to: "sqlite", backends });
    const store = await openStorage({ dataDir, storage: "sqlite", backends });
    const bots = Array.from({ length: 4_097 }, (_, i) => ({
      botId: `b${i}`,
      name: `Bot ${i}`,
      createdAt: 1 + i,
    }));
    try {
      await store.importAll({ creates: [], deletes: [], meta: {}, bots });
    } finally {
      await store.close();
    }
    const before = await exportOf(dataDir, "sqlite");
    const bytes = bytesOf(dataDir);
    const refusal = await migrateStorage({ dataDir, to: "file", backends }).then(
      () => null,
      (e: unknown) => e as { code: string; message: string },
    );
    expect(refusal).toMatchObject({
      code: "STORAGE_INVALID_ARGUMENT",
      message: `The sqlite store of ${dataDir} holds 4097 bots, more than the file backend can (at most 4096 rows a journal and 4096 bots), so nothing was changed. Keep it on sqlite.`,
    });
    expect(bytesOf(dataDir)).toEqual(bytes);
    expect(await binding(dataDir)).toBe("sqlite");
    expect(await exportOf(dataDir, "sqlite")).toEqual(before);
    expect(existsSync(join(dataDir, "locks", "storage-migrate.json"))).toBe(false);
  });

  it("a difference found by the verification removes the new database and leaves the source bound and untouched", async () => {
    const { dataDir, before } = await seedFormatDataDir();
    const bytes = bytesOf(dataDir);
    // A target that loses the last bot on import: the comparison must catch it.
    const lossy: BackendFactory = async (options) => {
      const storage = await sqliteBackend(options);
      return {
        ...storage,
        importAll: (data) => storage.importAll({ ...data, bots: data.bots.slice(0, -1) }),
      } as Storage;
    };
    const error = await migrateStorage({ dataDir, to: "sqlite", backends: { sqlite: lossy } }).then(
      () => null,
      (e: Error & { code?: string }) => e,
    );
    expect(error?.code).toBe("STORAGE_MIGRATION_FAILED");
    expect(error?.message).toMatch(/bots: 2 vs 1 rows.*sqlite store was removed.*file store is untouched/);
    expect(existsSync(join(dataDir, SQLITE_FILE))).toBe(false);
    expect(await binding(dataDir)).toBe("file");
    expect(bytesOf(dataDir)).toEqual(bytes);
    expect(await exportOf(dataDir, "file")).toEqual(before);
  });

  it("offline: a live claim refuses the migration naming its pid; once that process is SIGKILLed it proceeds", async () => {
    const { dataDir, before } = await seedFormatDataDir();
    const bytes = bytesOf(dataDir);
    const holder = spawnWorker(WORKER, [dataDir, "claim"]);
    try {
      const pid = (await holder.waitFor((line) => line.startsWith("claimed "))).split(" ")[1];
      const refusal = await migrateStorage({ dataDir, to: "sqlite", backends }).then(
        () => null,
        (e: Error & { code?: string }) => e,
      );
      expect(refusal?.code).toBe("STORAGE_IN_USE");
      expect(refusal?.message).toContain(`server pid ${pid}`);
      expect(bytesOf(dataDir)).toEqual(bytes);
      expect(existsSync(join(dataDir, SQLITE_FILE))).toBe(false);
      holder.kill();
      expect((await holder.exited).signal).toBe("SIGKILL");
      expect((await migrateStorage({ dataDir, to: "sqlite", backends })).outcome).toBe("migrated");
      expect(await exportOf(dataDir, "sqlite")).toEqual(before);
    } finally {
      holder.kill();
    }
  });

  it("a process claiming the data directory while a live migration runs is refused, its claim removed", async () => {
    const { dataDir } = await seedFormatDataDir();
    const migration = spawnWorker(WORKER, [dataDir, "migrate", "sqlite", "migrate:marked"]);
    try {
      const pid = (await migration.waitFor((line) => line.startsWith("at-point "))).split(" ")[1];
      const refusal = await claimDataDir(dataDir, { role: "cli" }).then(
        () => null,
        (e: Error & { code?: string }) => e,
      );
      expect(refusal?.code).toBe("STORAGE_IN_USE");
      expect(refusal?.message).toContain(`pid ${pid}`);
      expect(readdirClaims(dataDir)).toEqual([]);
      migration.kill();
      await migration.exited;
      // The migration's owner is dead: claiming works again (and the interrupted migration still bound file).
      const claim = await claimDataDir(dataDir, { role: "cli" });
      expect(readdirClaims(dataDir)).toHaveLength(1);
      claim.release();
      expect(await binding(dataDir)).toBe("file");
    } finally {
      migration.kill();
    }
  });

  for (const [from, to] of [
    ["file", "sqlite"],
    ["sqlite", "file"],
  ] as const) {
    for (const point of MIGRATE_CRASH_POINTS) {
      it(`${from} → ${to} SIGKILLed at ${point}: one backend bound and whole, never both writable; a re-run finishes`, async () => {
        const { dataDir, before } = await seedFormatDataDir();
        if (from === "sqlite") await migrateStorage({ dataDir, to: "sqlite", backends });
        expect((await killedAt(dataDir, to, point)).signal).toBe("SIGKILL");
        const bound = (await binding(dataDir)) as StorageKind;
        const other = bound === from ? to : from;
        // Whatever is bound is whole; the other refuses to open (by binding, and by its retirement).
        expect(await codeOf(openStorage({ dataDir, storage: other, backends }))).toBe(
          "STORAGE_BACKEND_MISMATCH",
        );
        if (point === "migrate:rebound") {
          expect(bound).toBe(to);
          expect(await exportOf(dataDir, to)).toEqual(before);
        } else if (point === "migrate:retired") {
          // Retired, not yet rebound: neither store takes writes until the re-run (which the refusal names).
          expect(bound).toBe(from);
          const refusal = await openStorage({ dataDir, storage: from, backends }).then(
            () => null,
            (e: Error) => e.message,
          );
          expect(refusal).toMatch(/run the same migrate command again/);
        } else {
          expect(bound).toBe(from);
          expect(await exportOf(dataDir, from)).toEqual(before);
        }
        if (from === "file" && point !== "migrate:retired" && point !== "migrate:rebound") {
          expect(seed(dataDir, "begin", "seed-a")).toMatchObject({ ok: true });
        } else if (from === "file") {
          expect(seed(dataDir, "begin", "seed-new")).toMatchObject({ ok: false, status: 503 });
        }
        const rerun = await migrateStorage({ dataDir, to, backends });
        expect(["migrated", "resumed"]).toContain(rerun.outcome);
        expect(await binding(dataDir)).toBe(to);
        expect(await exportOf(dataDir, to)).toEqual(before);
        expect(await codeOf(openStorage({ dataDir, storage: from, backends }))).toBe(
          "STORAGE_BACKEND_MISMATCH",
        );
        expect(existsSync(join(dataDir, "locks", "storage-migrate.json"))).toBe(false);
      });
    }
  }
});

describe("a migration killed after rebinding, then migrated back without a re-run", () => {
  it("the live store is never taken for an untrusted target: every row goes back, the record is dropped", async () => {
    const { dataDir, before } = await seedFormatDataDir();
    expect((await killedAt(dataDir, "sqlite", "migrate:rebound")).signal).toBe("SIGKILL");
    expect(await binding(dataDir)).toBe("sqlite");
    expect(pendingMigration(dataDir)).toMatchObject({ from: "file", to: "sqlite", phase: "verified" });
    // Straight back to file: the progress record names sqlite as its (then untrusted) target, but the
    // directory is bound to it — it is the live store.
    const back = await migrateStorage({ dataDir, to: "file", backends });
    expect(back).toMatchObject({ from: "sqlite", to: "file", outcome: "migrated" });
    expect(await exportOf(dataDir, "file")).toEqual(before);
    expect(pendingMigration(dataDir)).toBeNull();
  });
});

/** The migration worker migrating `dataDir` to `to`, SIGKILLed at the crash point `point`. */
function killedAt(dataDir: string, to: StorageKind, point: string) {
  return killWorkerAt(WORKER, [dataDir, "migrate", to, point], (line) => line.startsWith("at-point "));
}

function readdirClaims(dataDir: string): string[] {
  return readdirSync(join(dataDir, "locks")).filter((n) => n.startsWith("claim-"));
}
