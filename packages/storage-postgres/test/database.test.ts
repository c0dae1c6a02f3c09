import { readFileSync } from "node:fs";
import { join } from "node:path";
import { isBoatCreateJournalError } from "@drydock/boat-create-journal";
import { isBotRegistryError, isStorageError, openStorage } from "@drydock/storage";
import pg from "pg";
import { beforeAll, describe, expect, it, vi } from "vitest";
import { toStorageError } from "../src/errors.js";
import { openPostgresStorage, postgresBackend, SCHEMA_VERSION } from "../src/index.js";
import { refusal, useStores } from "./helpers.js";

const BODY = '{"ttlSeconds":28800,"noEnv":true}';
const stores = useStores("d");
let url: string;
beforeAll(() => {
  url = stores.url();
});
const { dataDir, open } = stores;
const cleanups = { push: stores.later };
const nextSchema = stores.schema;

async function sql<T = Record<string, unknown>>(text: string, params: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(text, params)).rows as T[];
  } finally {
    await client.end();
  }
}

describe("the schema", () => {
  it("is created at open, at the current version, and the journals' invariants are constraints", async () => {
    const storage = await open();
    const s = storage.schema;
    const { request } = await storage.createJournal.beginBoatCreate("bot-1", BODY);
    await storage.createJournal.rememberCreatedBoat(request, "bx_aaaaaaaa");
    await storage.deleteJournal.prepareBoatDeletion({ boxId: "bx_bbbbbbbb", name: "n", ownerBotId: null });
    await storage.deleteJournal.markBoatDeletionAccepted("bx_bbbbbbbb", {
      id: `bdop_${"a".repeat(32)}`,
      kind: "sandbox",
      targetId: "bx_bbbbbbbb",
      status: "pending",
    });
    expect(await sql(`SELECT version FROM ${s}.schema_version`)).toEqual([{ version: SCHEMA_VERSION }]);
    const insert = (bot: string, body: string, key: string, box: string | null) =>
      sql(
        `INSERT INTO ${s}.create_rows (bot_id, request_body, idempotency_key, created_at, box_id, resolved, row_json) VALUES ($1, $2, $3, 1, $4, false, '{}')`,
        [bot, body, key, box],
      );
    const key = request.idempotencyKey;
    // The row count is kept by triggers, also for a session with another search_path.
    await insert("bot-9", BODY, "k-9", null);
    expect(await sql(`SELECT n::int FROM ${s}.journal_state WHERE name = 'create'`)).toEqual([{ n: 2 }]);
    // A second key, the same (bot, body), a second Boat for a bot: each refused by the database itself.
    await expect(insert("bot-2", "other", key, null)).rejects.toMatchObject({ code: "23505" });
    await expect(insert("bot-1", BODY, "k-2", null)).rejects.toMatchObject({ code: "23505" });
    await expect(insert("bot-1", "other", "k-3", "bx_cccccccc")).rejects.toMatchObject({ code: "23505" });
    await expect(
      sql(
        `INSERT INTO ${s}.delete_rows (box_id, owner_bot_id, operation_id, row_json) VALUES ($1, NULL, $2, '{}')`,
        ["bx_cccccccc", `bdop_${"a".repeat(32)}`],
      ),
    ).rejects.toMatchObject({ code: "23505" });
    await expect(
      sql(
        `INSERT INTO ${s}.delete_rows (box_id, owner_bot_id, operation_id, row_json) VALUES ($1, NULL, NULL, '{}')`,
        ["bx_bbbbbbbb"],
      ),
    ).rejects.toMatchObject({ code: "23505" });
  });

  it("a database at a newer schema version: STORAGE_NEWER, nothing changed", async () => {
    const storage = await open();
    await storage.createJournal.beginBoatCreate("bot-1", BODY);
    const before = await storage.exportAll();
    await sql(`UPDATE ${storage.schema}.schema_version SET version = $1`, [SCHEMA_VERSION + 1]);
    const error = await refusal(() =>
      openPostgresStorage({ url, dataDir: dataDir(), schema: storage.schema }),
    );
    expect(isStorageError(error) && error.code).toBe("STORAGE_NEWER");
    expect((error as Error).message).toMatch(/newer drydock.*Nothing was changed\. Upgrade/);
    expect((error as Error).message).not.toContain(new URL(url).password);
    expect(await sql(`SELECT version FROM ${storage.schema}.schema_version`)).toEqual([
      { version: SCHEMA_VERSION + 1 },
    ]);
    expect(await storage.exportAll()).toEqual(before);
  });

  it("eight stores opening one fresh schema at once migrate it once (pg_advisory_lock)", async () => {
    const schema = nextSchema();
    const stores = await Promise.all(
      Array.from({ length: 8 }, () => openPostgresStorage({ url, dataDir: dataDir(), schema })),
    );
    cleanups.push(async () => {
      for (const store of stores) await store.close();
    });
    expect(await sql(`SELECT version FROM ${schema}.schema_version`)).toEqual([{ version: SCHEMA_VERSION }]);
    const minted = await Promise.all(stores.map((s) => s.createJournal.beginBoatCreate("bot-1", BODY)));
    expect(new Set(minted.map((m) => m.request.idempotencyKey)).size).toBe(1);
    expect(minted.filter((m) => m.startedNow)).toHaveLength(1);
  });

  it("every stamp is the database's time, never the host's (the host's clock stubbed to 2001)", async () => {
    const storage = await open();
    const dbNow = async () =>
      (
        await sql<{ now: number }>(
          "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::float8 AS now",
        )
      )[0]?.now as number;
    const before = await dbNow();
    const hostClock = vi.spyOn(Date, "now").mockReturnValue(1_000_000_000_000);
    let stamps: number[];
    try {
      const { request } = await storage.createJournal.beginBoatCreate("bot-1", BODY);
      const fence = await storage.deleteJournal.prepareBoatDeletion({
        boxId: "bx_aaaaaaaa",
        name: "n",
        ownerBotId: null,
      });
      const bot = await storage.bots.create({ botId: "bot-1", name: "One" });
      stamps = [request.createdAt, fence.requestedAt, fence.updatedAt, bot.createdAt];
    } finally {
      hostClock.mockRestore();
    }
    const after = await dbNow();
    for (const stamp of stamps) {
      expect(stamp).toBeGreaterThanOrEqual(before);
      expect(stamp).toBeLessThanOrEqual(after);
    }
  });

  it("keeps each call's result under its call id, and prunes rows older than ten minutes", async () => {
    const storage = await open();
    await storage.createJournal.beginBoatCreate("bot-1", BODY);
    const rows = await sql<{ result_json: string }>(`SELECT result_json FROM ${storage.schema}.ops`);
    expect(rows).toHaveLength(1);
    expect(JSON.parse(rows[0]?.result_json as string).value.startedNow).toBe(true);
    await sql(`UPDATE ${storage.schema}.ops SET at = at - interval '11 minutes'`);
    await storage.createJournal.beginBoatCreate("bot-2", BODY);
    expect(await sql(`SELECT 1 FROM ${storage.schema}.ops`)).toHaveLength(1);
  });

  it("maxRows is the journal's limit: a full journal refuses as the file backend does", async () => {
    const storage = await open({ maxRows: 3 });
    for (let i = 0; i < 3; i += 1) await storage.createJournal.beginBoatCreate(`bot-${i}`, BODY);
    const error = await refusal(() => storage.createJournal.beginBoatCreate("bot-3", BODY));
    expect(isBoatCreateJournalError(error) && [error.code, error.detail]).toEqual([
      "BOAT_CREATE_PAUSED",
      "full",
    ]);
    expect((await storage.createJournal.beginBoatCreate("bot-0", BODY)).startedNow).toBe(false);
    expect((await storage.exportAll()).creates).toHaveLength(3);
  });
});

describe("the bot registry", () => {
  it("creates, refuses duplicates and the limit, pages in botId order, marks and unmarks deletions", async () => {
    const storage = await open({ maxBots: 3 });
    const bots = storage.bots;
    const ada = await bots.create({ botId: "ada", name: "Ada" });
    await bots.create({ botId: "Zed", name: "Zed" });
    await bots.create({ botId: "bob", name: "Bob" });
    expect(isBotRegistryError(await refusal(() => bots.create({ botId: "ada", name: "x" })))).toBe(true);
    const tooMany = await refusal(() => bots.create({ botId: "cy", name: "Cy" }));
    expect(isBotRegistryError(tooMany) && tooMany.code).toBe("TOO_MANY_BOTS");
    expect((await bots.list()).map((b) => b.botId)).toEqual(["ada", "Zed", "bob"]);
    expect(await bots.count()).toBe(3);
    const first = await bots.page({ limit: 2 });
    expect([first.bots.map((b) => b.botId), first.next]).toEqual([["Zed", "ada"], "ada"]);
    const second = await bots.page({ after: "ada", limit: 2 });
    expect([second.bots.map((b) => b.botId), second.next]).toEqual([["bob"], null]);
    expect(await bots.get("ada")).toEqual(ada);
    for (const bad of [0, -1, 1.5, Number.NaN, "2"]) {
      const refused = await refusal(() => bots.page({ limit: bad as number }));
      expect(isStorageError(refused) && refused.code).toBe("STORAGE_INVALID_ARGUMENT");
    }
    const badId = await refusal(() => bots.create({ botId: "no spaces", name: "x" }));
    expect(isStorageError(badId) && badId.code).toBe("STORAGE_INVALID_ARGUMENT");
    const mark = await bots.markDeleting("ada");
    expect(mark).not.toBeNull();
    expect(await bots.markDeleting("nobody")).toBeNull();
    const marked = (await bots.get("ada")) as NonNullable<Awaited<ReturnType<typeof bots.get>>>;
    expect((await bots.liveMarks(marked, { ownIdle: false })).live).toEqual([mark]);
    expect((await bots.liveMarks(marked, { ownIdle: true })).abandoned).toEqual([mark]);
    await bots.unmarkDeleting("ada", mark as NonNullable<typeof mark>);
    expect(await bots.get("ada")).toEqual(ada);
    await bots.remove("ada");
    expect(await bots.get("ada")).toBeNull();
    expect((await storage.exportAll()).bots.map((b) => b.botId)).toEqual(["Zed", "bob"]);
  });
});

describe("importAll", () => {
  it("writes an export verbatim into an empty store, and refuses a non-empty one, changing nothing", async () => {
    const source = await open();
    await source.createJournal.beginBoatCreate("bot-1", BODY);
    const { request } = await source.createJournal.beginBoatCreate("bot-2", BODY);
    await source.createJournal.rememberCreatedBoat(request, "bx_aaaaaaaa");
    await source.deleteJournal.prepareBoatDeletion({ boxId: "bx_bbbbbbbb", name: "n", ownerBotId: "bot-1" });
    await source.meta.getOrCreate("environment-id", () => "env-1");
    await source.bots.create({ botId: "bot-1", name: "One" });
    const exported = await source.exportAll();
    const target = await open();
    await target.importAll(exported);
    expect(await target.exportAll()).toEqual(exported);
    // The imported rows behave as native ones: the key is handed back, not minted again.
    expect((await target.createJournal.beginBoatCreate("bot-1", BODY)).startedNow).toBe(false);
    const error = await refusal(() => target.importAll(exported));
    expect(isStorageError(error) && error.code).toBe("STORAGE_NOT_EMPTY");
    expect((error as Error).message).toMatch(/already holds .*nothing was changed/);
    expect(await target.exportAll()).toEqual(exported);
    const broken = { ...exported, creates: [...exported.creates, exported.creates[0]] };
    const empty = await open();
    expect(isStorageError(await refusal(() => empty.importAll(broken as never)))).toBe(true);
    expect(await empty.exportAll()).toEqual({ creates: [], deletes: [], meta: {}, bots: [] });
  });
});

describe("openStorage with postgresBackend", () => {
  it("binds the data directory to postgres and opens the store at the URL", async () => {
    const dir = dataDir();
    const storage = await openStorage({
      dataDir: dir,
      storage: url,
      backends: { postgres: postgresBackend },
      backendOptions: { schema: nextSchema() },
    });
    cleanups.push(() => storage.close());
    expect(storage.kind).toBe("postgres");
    await storage.createJournal.beginBoatCreate("bot-1", BODY);
    expect((await storage.exportAll()).creates).toHaveLength(1);
    expect(readFileSync(join(dir, "storage.json"), "utf8")).toContain("postgres");
    expect(readFileSync(join(dir, "storage.json"), "utf8")).not.toContain(new URL(url).password);
  });
});

describe("server errors as StorageErrors (codes a test cannot provoke here mapped by hand)", () => {
  const cases: [string, string, boolean, RegExp][] = [
    [
      "53100",
      "STORAGE_UNAVAILABLE",
      true,
      /the database server's disk is full \(53100\).*Nothing was changed/,
    ],
    ["53300", "STORAGE_UNAVAILABLE", true, /too many connections.*Nothing was changed/],
    ["57P01", "STORAGE_UNAVAILABLE", true, /admin shutdown.*Nothing was changed/],
    ["57P03", "STORAGE_UNAVAILABLE", true, /starting up/],
    ["ECONNREFUSED", "STORAGE_UNAVAILABLE", true, /refused the connection/],
    ["28P01", "STORAGE_UNAVAILABLE", false, /refused the credentials/],
    ["25006", "STORAGE_UNAVAILABLE", false, /accepts only reads/],
    ["40001", "STORAGE_BUSY", true, /busy.*Nothing was changed\. Retry/],
    ["55P03", "STORAGE_BUSY", true, /busy/],
    ["23505", "STORAGE_CONSTRAINT", false, /would break a journal invariant.*Nothing was changed/],
  ];
  for (const [code, storageCode, retryable, message] of cases) {
    it(`${code} → ${storageCode}`, () => {
      const raw = Object.assign(new Error("failed at postgres://u:hunter2@db/x"), { code });
      const error = toStorageError(raw, "postgres://u:***@db/x", 100);
      expect(isStorageError(error) && [error.code, error.retryable]).toEqual([storageCode, retryable]);
      expect((error as Error).message).toMatch(message);
      expect((error as Error).message).not.toContain("hunter2");
    });
  }
});
