import {
  closeSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  statSync,
  truncateSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { isBoatCreateJournalError } from "@drydock/boat-create-journal";
import { isBoatDeleteJournalError } from "@drydock/boat-delete-journal";
import { isStorageError, isWorkspaceError, type Storage } from "@drydock/storage";
import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { openSqliteStorage, SCHEMA_VERSION, SQLITE_FILE } from "../src/index.js";
import { MIGRATIONS } from "../src/schema.js";

const BODY = '{"ttlSeconds":28800,"noEnv":true}';
const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});
function dataDir(): string {
  const root = mkdtempSync(join(tmpdir(), "drydock-sqlite-"));
  cleanups.push(() => rmSync(root, { recursive: true, force: true }));
  return join(root, "data");
}
async function withRows(dir: string, bots = 50): Promise<void> {
  const storage = await openSqliteStorage({ dataDir: dir });
  for (let i = 0; i < bots; i += 1) {
    const { request } = await storage.createJournal.beginBoatCreate(`bot-${i}`, BODY);
    if (i % 2 === 0)
      await storage.createJournal.rememberCreatedBoat(
        request,
        `bx_${"abcdefghjk"[i % 10]}${"mnpqrstuvw"[Math.floor(i / 10) % 10]}aaaaaa`,
      );
  }
  await storage.close();
}
async function refusal(call: () => Promise<unknown>): Promise<unknown> {
  return call().then(
    () => {
      throw new Error("expected a refusal");
    },
    (error: unknown) => error,
  );
}

describe("the database file", () => {
  it("is <dataDir>/drydock.sqlite, mode 0600, WAL, synchronous=FULL, at the current schema version", async () => {
    const dir = dataDir();
    const storage = await openSqliteStorage({ dataDir: dir });
    await storage.createJournal.beginBoatCreate("bot-1", BODY);
    const path = join(dir, SQLITE_FILE);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    let seen: { journal: unknown; sync: unknown } | undefined;
    const probe = await openSqliteStorage({
      dataDir: dir,
      configure: (db) => {
        seen = {
          journal: db.pragma("journal_mode", { simple: true }),
          sync: db.pragma("synchronous", { simple: true }),
        };
      },
    });
    expect(seen).toEqual({ journal: "wal", sync: 2 });
    const raw = new Database(path, { readonly: true });
    expect(raw.prepare("SELECT version FROM schema_version").all()).toEqual([{ version: SCHEMA_VERSION }]);
    raw.close();
    await probe.close();
    await storage.close();
  });

  it("the journals' invariants are constraints: a second key, (bot, body), Boat per bot or operation id is refused", async () => {
    const dir = dataDir();
    const storage = await openSqliteStorage({ dataDir: dir });
    const { request } = await storage.createJournal.beginBoatCreate("bot-1", BODY);
    await storage.createJournal.rememberCreatedBoat(request, "bx_aaaaaaaa");
    await storage.deleteJournal.prepareBoatDeletion({ boxId: "bx_bbbbbbbb", name: "n", ownerBotId: null });
    await storage.deleteJournal.markBoatDeletionAccepted("bx_bbbbbbbb", {
      id: `bdop_${"a".repeat(32)}`,
      kind: "sandbox",
      targetId: "bx_bbbbbbbb",
      status: "pending",
    });
    await storage.close();
    const db = new Database(join(dir, SQLITE_FILE));
    const insert = db.prepare(
      "INSERT INTO create_rows (bot_id, request_body, idempotency_key, created_at, box_id, resolved, row_json) VALUES (?, ?, ?, 1, ?, 0, '{}')",
    );
    const key = request.idempotencyKey;
    expect(() => insert.run("bot-2", "other", key, null)).toThrow(/UNIQUE/);
    expect(() => insert.run("bot-1", BODY, "00000000-0000-4000-8000-000000000009", null)).toThrow(/UNIQUE/);
    expect(() => insert.run("bot-1", "other", "00000000-0000-4000-8000-00000000000a", "bx_cccccccc")).toThrow(
      /UNIQUE/,
    );
    expect(() =>
      db
        .prepare(
          "INSERT INTO delete_rows (box_id, owner_bot_id, operation_id, row_json) VALUES (?, NULL, ?, '{}')",
        )
        .run("bx_cccccccc", `bdop_${"a".repeat(32)}`),
    ).toThrow(/UNIQUE/);
    expect(() =>
      db
        .prepare(
          "INSERT INTO delete_rows (box_id, owner_bot_id, operation_id, row_json) VALUES (?, NULL, NULL, '{}')",
        )
        .run("bx_bbbbbbbb"),
    ).toThrow(/UNIQUE/);
    db.close();
  });

  it("has no 4,096 cap: maxRows is the limit, and a full journal refuses as the file backend does", async () => {
    const storage = await openSqliteStorage({ dataDir: dataDir(), maxRows: 5 });
    for (let i = 0; i < 5; i += 1) await storage.createJournal.beginBoatCreate(`bot-${i}`, BODY);
    const error = await refusal(() => storage.createJournal.beginBoatCreate("bot-5", BODY));
    expect(isBoatCreateJournalError(error) && [error.code, error.detail]).toEqual([
      "BOAT_CREATE_PAUSED",
      "full",
    ]);
    // An existing bot's key is still handed back.
    expect((await storage.createJournal.beginBoatCreate("bot-0", BODY)).startedNow).toBe(false);
    await storage.close();
    const big = await openSqliteStorage({ dataDir: dataDir() });
    for (let i = 0; i < 4_100; i += 1) await big.createJournal.beginBoatCreate(`bot-${i}`, BODY);
    expect((await big.exportAll()).creates).toHaveLength(4_100);
    await big.close();
  });
});

describe("a damaged database is refused, typed, and never changed or recreated", () => {
  const cases: [string, (path: string) => void][] = [
    ["truncated to half", (path) => truncateSync(path, Math.floor(statSync(path).size / 2))],
    ["truncated to 50 bytes", (path) => truncateSync(path, 50)],
    ["truncated to 0 bytes", (path) => truncateSync(path, 0)],
    ["not a database", (path) => writeFileSync(path, "hello, I am not SQLite\n".repeat(100))],
    [
      "garbage over its pages",
      (path) => {
        const fd = openSync(path, "r+");
        writeSync(fd, Buffer.alloc(statSync(path).size - 4096, 0x5a), 0, statSync(path).size - 4096, 4096);
        closeSync(fd);
      },
    ],
  ];
  for (const [name, damage] of cases) {
    it(`${name}: STORAGE_CORRUPT (503), the bytes unchanged`, async () => {
      const dir = dataDir();
      await withRows(dir);
      const path = join(dir, SQLITE_FILE);
      damage(path);
      const bytes = readFileSync(path);
      const error = await refusal(() => openSqliteStorage({ dataDir: dir }));
      expect(isStorageError(error) && [error.code, error.status]).toEqual(["STORAGE_CORRUPT", 503]);
      expect((error as Error).message).toMatch(/is damaged .* has not changed it\. Restore it from a backup/);
      expect(readFileSync(path).equals(bytes)).toBe(true);
      // A second attempt is refused the same way: nothing was recreated over it.
      expect(isStorageError(await refusal(() => openSqliteStorage({ dataDir: dir })))).toBe(true);
      expect(readFileSync(path).equals(bytes)).toBe(true);
    });
  }

  it("a database at a newer schema version: STORAGE_NEWER, unchanged", async () => {
    const dir = dataDir();
    await withRows(dir, 2);
    const path = join(dir, SQLITE_FILE);
    const db = new Database(path);
    db.prepare("UPDATE schema_version SET version = ?").run(SCHEMA_VERSION + 1);
    db.close();
    const bytes = readFileSync(path);
    const error = await refusal(() => openSqliteStorage({ dataDir: dir }));
    expect(isStorageError(error) && error.code).toBe("STORAGE_NEWER");
    expect((error as Error).message).toMatch(/newer drydock.*Nothing was changed\. Upgrade/);
    expect(readFileSync(path).equals(bytes)).toBe(true);
  });
});

describe("a database busy beyond the bounded wait", () => {
  it("answers a typed, retryable error, changes nothing, and the next call after the holder is gone works", async () => {
    const dir = dataDir();
    const storage: Storage = await openSqliteStorage({ dataDir: dir, busyTimeoutMs: 50 });
    await storage.createJournal.beginBoatCreate("bot-0", BODY);
    const before = await storage.exportAll();
    const holder = new Database(join(dir, SQLITE_FILE));
    holder.exec("BEGIN IMMEDIATE");
    try {
      for (const call of [
        () => storage.createJournal.beginBoatCreate("bot-1", BODY),
        () =>
          storage.deleteJournal.prepareBoatDeletion({ boxId: "bx_aaaaaaaa", name: "n", ownerBotId: null }),
        () => storage.meta.getOrCreate("environment-id", () => "x"),
      ]) {
        const error = await refusal(call);
        // The journals' own error (create's or delete's class) carries the StorageError as its cause; meta throws it.
        const storageError =
          isBoatCreateJournalError(error) || isBoatDeleteJournalError(error) ? error.cause : error;
        expect(isStorageError(storageError) && [storageError.code, storageError.retryable]).toEqual([
          "STORAGE_BUSY",
          true,
        ]);
        expect((error as Error).message).toMatch(
          /was busy .* longer than 50 ms\. Nothing was changed\. Retry/,
        );
      }
      // Readers are not blocked by a writer (WAL).
      expect(await storage.exportAll()).toEqual(before);
    } finally {
      holder.exec("ROLLBACK");
      holder.close();
    }
    expect((await storage.createJournal.beginBoatCreate("bot-1", BODY)).startedNow).toBe(true);
    await storage.close();
  });
});

describe("OS-level refusals say what happened, that nothing changed, and what to do", () => {
  const cases: [string, string, (db: Database.Database) => void, RegExp][] = [
    [
      "a full disk",
      "ENOSPC",
      (db) => db.pragma(`max_page_count = ${db.pragma("page_count", { simple: true })}`),
      /because the disk is full \(ENOSPC\)\. Nothing was changed\. To continue, free space/,
    ],
    [
      "a read-only file system",
      "EROFS",
      (db) => db.pragma("query_only = 1"),
      /because the file system is read-only \(EROFS\)\. Nothing was changed\. To continue, remount/,
    ],
  ];
  for (const [name, errno, configure, message] of cases) {
    it(`${name}: ${errno}, the rows unchanged, never "invalid"`, async () => {
      const dir = dataDir();
      await withRows(dir, 3);
      const reference = await openSqliteStorage({ dataDir: dir });
      const before = await reference.exportAll();
      await reference.close();
      const storage = await openSqliteStorage({ dataDir: dir, configure });
      const bodies = Array.from({ length: 200 }, (_, i) => `{"pad":"${"x".repeat(900)}","i":${i}}`);
      let error: unknown;
      // A full page budget may take a few rows before the first refusal; bounded.
      for (let i = 0; i < bodies.length && error === undefined; i += 1) {
        error = await storage.createJournal.beginBoatCreate(`new-${i}`, bodies[i] as string).then(
          () => undefined,
          (e: unknown) => e,
        );
      }
      expect(isBoatCreateJournalError(error)).toBe(true);
      const journalError = error as { detail: string; message: string; cause: unknown };
      expect(journalError.detail).toBe("unavailable");
      expect(journalError.message).toMatch(message);
      expect(journalError.message).not.toMatch(/invalid|repair/i);
      expect(isStorageError(journalError.cause) && journalError.cause.errno).toBe(errno);
      const after = await storage.exportAll();
      await storage.close();
      // Whatever committed before the refusal stays; the refused call wrote nothing: every row is whole.
      expect(after.creates.slice(0, before.creates.length)).toEqual(before.creates);
      const reopened = await openSqliteStorage({ dataDir: dir });
      expect(await reopened.exportAll()).toEqual(after);
      await reopened.close();
    });
  }
});

describe("the bot registry on SQLite", () => {
  it("a row that fails BotSchema is STORAGE_CORRUPT on read, and is never rewritten", async () => {
    const dir = dataDir();
    const storage = await openSqliteStorage({ dataDir: dir });
    await storage.bots.create({ botId: "kept", name: "Kept" });
    await storage.close();
    const db = new Database(join(dir, SQLITE_FILE));
    db.prepare("UPDATE bots SET row_json = ? WHERE bot_id = 'kept'").run('{"botId":"x y"}');
    db.close();
    const again = await openSqliteStorage({ dataDir: dir });
    for (const call of [
      () => again.bots.get("kept"),
      () => again.bots.list(),
      () => again.bots.page({ limit: 10 }),
      () => again.bots.markDeleting("kept"),
    ]) {
      const error = await refusal(call);
      expect(isStorageError(error) && error.code).toBe("STORAGE_CORRUPT");
    }
    await again.close();
    const check = new Database(join(dir, SQLITE_FILE), { readonly: true });
    expect(check.prepare("SELECT row_json FROM bots").pluck().all()).toEqual(['{"botId":"x y"}']);
    check.close();
  });

  it("page() walks the primary key's index (no full scan), count() is COUNT(*)", async () => {
    const dir = dataDir();
    const storage = await openSqliteStorage({ dataDir: dir });
    await storage.close();
    const db = new Database(join(dir, SQLITE_FILE), { readonly: true });
    const plan = (sql: string) =>
      (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all() as { detail: string }[]).map((r) => r.detail).join("; ");
    expect(plan("SELECT row_json FROM bots WHERE bot_id > 'a' ORDER BY bot_id LIMIT 11")).toMatch(
      /SEARCH bots USING INDEX sqlite_autoindex_bots_1 \(bot_id>\?\)/,
    );
    expect(plan("SELECT row_json FROM bots ORDER BY bot_id LIMIT 11")).toMatch(
      /SCAN bots USING INDEX sqlite_autoindex_bots_1/,
    );
    expect(plan("SELECT row_json FROM bots ORDER BY bot_id LIMIT 11")).not.toMatch(/TEMP B-TREE/);
    db.close();
  });

  it("a full disk while creating a bot: ENOSPC in words that never say invalid, the registry unchanged", async () => {
    const dir = dataDir();
    const plain = await openSqliteStorage({ dataDir: dir });
    await plain.bots.create({ botId: "kept", name: "Kept" });
    const before = await plain.exportAll();
    await plain.close();
    const storage = await openSqliteStorage({
      dataDir: dir,
      configure: (db) => db.pragma(`max_page_count = ${db.pragma("page_count", { simple: true })}`),
    });
    let error: unknown;
    for (let i = 0; i < 400 && error === undefined; i += 1) {
      error = await storage.bots.create({ botId: `b${i}`, name: "n".repeat(200) }).then(
        () => undefined,
        (e: unknown) => e,
      );
    }
    expect(isStorageError(error) && error.errno).toBe("ENOSPC");
    expect((error as Error).message).not.toMatch(/invalid|repair/i);
    const after = await storage.exportAll();
    await storage.close();
    expect(after.bots.filter((b) => b.botId === "kept")).toEqual(before.bots);
  });
});

describe("schema migration 2 (the bot registry)", () => {
  it("a version-1 database (journals only) opens at the current version with its rows intact and a working registry", async () => {
    const dir = dataDir();
    mkdirSync(dir, { recursive: true });
    const db = new Database(join(dir, SQLITE_FILE));
    db.pragma("journal_mode = WAL");
    db.exec(MIGRATIONS[0] as string);
    db.exec("CREATE TABLE schema_version (version INTEGER NOT NULL); INSERT INTO schema_version VALUES (1)");
    db.prepare("INSERT INTO meta (key, value) VALUES ('environment-id', 'kept')").run();
    db.close();
    const storage = await openSqliteStorage({ dataDir: dir });
    expect(SCHEMA_VERSION).toBe(3);
    expect(await storage.meta.get("environment-id")).toBe("kept");
    await storage.bots.create({ botId: "ada", name: "Ada" });
    expect((await storage.exportAll()).bots.map((b) => b.botId)).toEqual(["ada"]);
    await storage.close();
    const check = new Database(join(dir, SQLITE_FILE), { readonly: true });
    expect(check.prepare("SELECT version FROM schema_version").pluck().get()).toBe(3);
    check.close();
  });
});

describe("schema migration 3 (workspaces)", () => {
  it("a version-2 database with bots opens at version 3, its rows intact, and workspaces work", async () => {
    const dir = dataDir();
    mkdirSync(dir, { recursive: true });
    const db = new Database(join(dir, SQLITE_FILE));
    db.pragma("journal_mode = WAL");
    db.exec(MIGRATIONS[0] as string);
    db.exec(MIGRATIONS[1] as string);
    db.exec("CREATE TABLE schema_version (version INTEGER NOT NULL); INSERT INTO schema_version VALUES (2)");
    db.prepare("INSERT INTO meta (key, value) VALUES ('environment-id', 'kept')").run();
    db.close();
    const storage = await openSqliteStorage({ dataDir: dir });
    expect(await storage.meta.get("environment-id")).toBe("kept");
    expect((await storage.workspaces.writeFile("ada", "f", Buffer.from("x"))).version).toBe(1);
    expect(Buffer.from((await storage.workspaces.readFile("ada", "f")).bytes).toString()).toBe("x");
    await storage.close();
    const check = new Database(join(dir, SQLITE_FILE), { readonly: true });
    expect(check.prepare("SELECT version FROM schema_version").pluck().get()).toBe(3);
    check.close();
  });
});

describe("workspaces on SQLite: faults", () => {
  const codeOf = async (call: () => Promise<unknown>) => {
    const error = await refusal(call);
    return isStorageError(error) || isWorkspaceError(error) ? error.code : `not typed: ${String(error)}`;
  };

  it("a damaged head manifest row is STORAGE_CORRUPT on read and write, never read as empty, the row unchanged", async () => {
    const dir = dataDir();
    const storage = await openSqliteStorage({ dataDir: dir });
    await storage.workspaces.writeFile("ada", "f", Buffer.from("x"));
    const raw = new Database(join(dir, SQLITE_FILE));
    const damaged = '[{"type":"file","path":"/etc"}]';
    raw.prepare("UPDATE ws_heads SET manifest = ? WHERE bot_id = 'ada'").run(damaged);
    expect(await codeOf(() => storage.workspaces.head("ada"))).toBe("STORAGE_CORRUPT");
    expect(await codeOf(() => storage.workspaces.writeFile("ada", "g", Buffer.from("g")))).toBe(
      "STORAGE_CORRUPT",
    );
    expect(await codeOf(() => storage.workspaces.restore("ada", "cp", "op"))).toBe("STORAGE_CORRUPT");
    expect(raw.prepare("SELECT version, manifest FROM ws_heads").all()).toEqual([
      { version: 1, manifest: damaged },
    ]);
    expect(raw.prepare("SELECT count(*) FROM ws_blobs").pluck().get()).toBe(1);
    raw.close();
    await storage.close();
  });

  it("a missing blob: a restore from it is refused whole (STORAGE_CORRUPT), the head unchanged, nothing recorded", async () => {
    const dir = dataDir();
    const storage = await openSqliteStorage({ dataDir: dir });
    const ws = storage.workspaces;
    await ws.writeFile("ada", "g", Buffer.from("g"));
    await ws.checkpoint("ada", "cp-2");
    await ws.deleteFile("ada", "g");
    const raw = new Database(join(dir, SQLITE_FILE));
    raw.prepare("DELETE FROM ws_blobs").run();
    raw.close();
    const head = await ws.head("ada");
    expect(await codeOf(() => ws.restore("ada", "cp-2", "op-2"))).toBe("STORAGE_CORRUPT");
    expect(await ws.head("ada")).toEqual(head);
    expect(await ws.getRestore("op-2")).toBeNull();
    await storage.close();
  });

  it("a database busy beyond the bounded wait: STORAGE_BUSY, the head unchanged, the next write works", async () => {
    const dir = dataDir();
    const storage = await openSqliteStorage({ dataDir: dir, busyTimeoutMs: 50 });
    await storage.workspaces.writeFile("ada", "f", Buffer.from("one"));
    const holder = new Database(join(dir, SQLITE_FILE));
    holder.exec("BEGIN IMMEDIATE");
    try {
      const error = await refusal(() => storage.workspaces.writeFile("ada", "f", Buffer.from("two")));
      expect(isStorageError(error) && [error.code, error.retryable]).toEqual(["STORAGE_BUSY", true]);
      expect((error as Error).message).toMatch(/Nothing was changed\. Retry/);
      // A reader is not blocked (WAL).
      expect((await storage.workspaces.head("ada")).version).toBe(1);
    } finally {
      holder.exec("ROLLBACK");
      holder.close();
    }
    expect(
      (await storage.workspaces.writeFile("ada", "f", Buffer.from("two"), { expectedVersion: 1 })).version,
    ).toBe(2);
    await storage.close();
  });

  it("a full disk during a blob write: ENOSPC in words that never say invalid, the head unchanged", async () => {
    const dir = dataDir();
    const plain = await openSqliteStorage({ dataDir: dir });
    await plain.workspaces.writeFile("ada", "kept", Buffer.from("kept"));
    await plain.close();
    const storage = await openSqliteStorage({
      dataDir: dir,
      configure: (db) => db.pragma(`max_page_count = ${db.pragma("page_count", { simple: true })}`),
    });
    const error = await refusal(() =>
      storage.workspaces.writeFile("ada", "big", Buffer.alloc(256 * 1024, 7)),
    );
    expect(isStorageError(error) && error.errno).toBe("ENOSPC");
    expect((error as Error).message).toMatch(/Nothing was changed/);
    expect((error as Error).message).not.toMatch(/invalid|repair/i);
    const head = await storage.workspaces.head("ada");
    expect([head.version, head.files.map((f) => f.path)]).toEqual([1, ["kept"]]);
    await storage.close();
  });
});
