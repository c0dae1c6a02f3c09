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
      // limit + 1 rows by the primary key's index: the extra one only says whether a next page exists.
      const rows = handle.read(() =>
        ((after === undefined ? pageFirst.all(limit + 1) : pageAfter.all(after, limit + 1)) as string[]).map(
          parse,
        ),
      );
      const bots = rows.slice(0, limit);
      const last = bots.at(-1);
      return { bots, next: rows.length > limit && last !== undefined ? last.botId : null };
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
