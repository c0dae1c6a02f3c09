import { randomUUID } from "node:crypto";
import {
  type Bot,
  type BotRegistryStore,
  BotSchema,
  botExists,
  checkBotInput,
  checkPageInput,
  corruptFailure,
  markMethods,
  newBot,
  tooManyBots,
  withMark,
  withoutMarks,
} from "@drydock/storage";
import type { SqliteHandle } from "./database.js";

/**
 * The bot registry on SQLite: one row per bot (`bots`, primary key `bot_id`), the registry's own pure steps
 * (`@drydock/storage`'s bot rules) run on the bot's row inside one BEGIN IMMEDIATE transaction. A row that
 * fails BotSchema is STORAGE_CORRUPT and is never rewritten.
 */
/** Pages kept between commits (each at most 500 rows): the ones a console or client is walking. */
const MAX_CACHED_PAGES = 32;

function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    for (const inner of Object.values(value)) deepFreeze(inner);
    Object.freeze(value);
  }
  return value;
}

export function sqliteBotRegistry(
  handle: SqliteHandle,
  options: { now: () => number; maxBots: number; live: () => void },
): BotRegistryStore {
  const { db } = handle;
  const { now, maxBots, live } = options;
  const instance = randomUUID();
  const one = db.prepare("SELECT row_json FROM bots WHERE bot_id = ?").pluck();
  const all = db.prepare("SELECT row_json FROM bots ORDER BY rowid").pluck();
  const pageFirst = db.prepare("SELECT row_json FROM bots ORDER BY bot_id LIMIT ?").pluck();
  const pageAfter = db.prepare("SELECT row_json FROM bots WHERE bot_id > ? ORDER BY bot_id LIMIT ?").pluck();
  const count = db.prepare("SELECT COUNT(*) FROM bots").pluck();
  const insert = db.prepare(
    "INSERT INTO bots (bot_id, name, created_at, row_json) VALUES (@bot_id, @name, @created_at, @row_json)",
  );
  const update = db.prepare("UPDATE bots SET row_json = ? WHERE bot_id = ?");
  const remove = db.prepare("DELETE FROM bots WHERE bot_id = ?");

  const pages: { version: string | null; byKey: Map<string, { bots: readonly Bot[]; next: string | null }> } =
    {
      version: null,
      byKey: new Map(),
    };
  const parse = (json: string): Bot => {
    let value: unknown;
    try {
      value = JSON.parse(json);
    } catch (error) {
      throw corruptFailure(handle.path, "a bot row is not JSON", error);
    }
    const parsed = BotSchema.safeParse(value);
    if (!parsed.success) throw corruptFailure(handle.path, "a bot row breaks the registry's format");
    return parsed.data;
  };
  const get = (botId: string): Bot | null => {
    const json = one.get(botId) as string | undefined;
    return json === undefined ? null : parse(json);
  };
  /** Runs a step on the bot's row and writes what it returns (null: nothing to write). */
  const change = <R>(botId: string, step: (bot: Bot | null) => { next: Bot | null; result: R }): R =>
    handle.write(() => {
      const { next, result } = step(get(botId));
      if (next !== null) update.run(JSON.stringify(next), botId);
      return result;
    });
  const dropMarks = async (botId: string, ids: readonly string[]) => {
    live();
    change(botId, (bot) => ({ next: bot === null ? null : withoutMarks(bot, ids), result: undefined }));
  };

  return {
    async list() {
      live();
      return handle.read(() => (all.all() as string[]).map(parse));
    },
    async page(input) {
      live();
      const { after, limit } = checkPageInput(input);
      // A page is a view (read like the file backend's peek): while no transaction committed since it was
      // read (this connection's commits and SQLite's data_version for everyone else's), the same frozen rows
      // are handed out again, so the server's listing memo sees an unchanged page and sends its body as it is.
      const version = handle.version();
      if (pages.version !== version) {
        pages.version = version;
        pages.byKey.clear();
      }
      const key = `${limit}:${after ?? ""}`;
      const cached = pages.byKey.get(key);
      if (cached !== undefined) return cached;
      // limit + 1 rows by the primary key's index: the extra one only says whether a next page exists.
      const rows = handle.read(() =>
        ((after === undefined ? pageFirst.all(limit + 1) : pageAfter.all(after, limit + 1)) as string[]).map(
          (json) => deepFreeze(parse(json)),
        ),
      );
      const bots = Object.freeze(rows.slice(0, limit));
      const last = bots.at(-1);
      const page = { bots, next: rows.length > limit && last !== undefined ? last.botId : null };
      if (pages.byKey.size >= MAX_CACHED_PAGES) pages.byKey.clear();
      pages.byKey.set(key, page);
      return page;
    },
    async count() {
      live();
      return handle.read(() => count.get() as number);
    },
    async get(botId) {
      live();
      if (typeof botId !== "string") return null;
      return handle.read(() => get(botId));
    },
    async create(input) {
      live();
      const { botId, name } = checkBotInput(input);
      return handle.write(() => {
        if (one.get(botId) !== undefined) throw botExists(botId);
        if ((count.get() as number) >= maxBots) throw tooManyBots(maxBots);
        const bot = newBot(botId, name, now());
        insert.run({ bot_id: botId, name, created_at: bot.createdAt, row_json: JSON.stringify(bot) });
        return bot;
      });
    },
    async remove(botId) {
      live();
      handle.write(() => {
        remove.run(botId);
      });
    },
    async markDeleting(botId) {
      live();
      return change(botId, (bot) => {
        if (bot === null) return { next: null, result: null };
        const marked = withMark(bot, instance, now());
        return { next: marked.bot, result: marked.mark };
      });
    },
    ...markMethods(instance, dropMarks),
  };
}
