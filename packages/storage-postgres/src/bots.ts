import { randomUUID } from "node:crypto";
import {
  type Bot,
  type BotRegistryStore,
  BotSchema,
  botExists,
  corruptFailure,
  type DeletionMark,
  judgeMarks,
  processGone,
  StorageError,
  tooManyBots,
  withMark,
  withoutMarks,
} from "@drydock/storage";
import type { PgHandle, PgTx } from "./database.js";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * The bot registry on PostgreSQL: one row per bot (`row_json` exactly as the registry holds it), insertion
 * order kept by `seq`; each write one transaction holding the registry's advisory lock, stamps from the
 * database's clock, at most `maxBots` bots. A mark set through a fenced store names its writer's instance
 * (id, epoch) and is abandoned exactly when that instance holds no lease by the database's clock (never a
 * pid). A mark of an unfenced writer (a tool without an instance) is judged by its process as on the other
 * backends: across hosts that answers "unverifiable" (never "dead"), so it stands until it is removed.
 */
export function pgBotRegistry(
  handle: PgHandle,
  options: { maxBots: number; live: () => void },
): BotRegistryStore {
  const instance = randomUUID();
  const parse = (raw: { row_json: string }): Bot => {
    let value: unknown;
    try {
      value = JSON.parse(raw.row_json);
    } catch (error) {
      throw corruptFailure(handle.where, "a bot row is not JSON", error);
    }
    const parsed = BotSchema.safeParse(value);
    if (!parsed.success) throw corruptFailure(handle.where, "a bot row breaks the registry's format");
    return parsed.data;
  };
  const one = async (tx: PgTx, botId: string, lock: boolean) => {
    const rows = await tx.query<{ row_json: string }>(
      `SELECT row_json FROM bots WHERE bot_id = $1${lock ? " FOR UPDATE" : ""}`,
      [botId],
    );
    return rows[0] === undefined ? null : parse(rows[0]);
  };
  const save = (tx: PgTx, bot: Bot) =>
    tx.query("UPDATE bots SET row_json = $2 WHERE bot_id = $1", [bot.botId, JSON.stringify(bot)]);
  const bump = (tx: PgTx) => tx.touch("bots");
  const readRows = async (sql: string, params: unknown[]) => {
    options.live();
    return handle.read(async (tx) =>
      Object.freeze((await tx.query<{ row_json: string }>(sql, params)).map(parse)),
    );
  };
  const dropMarks = async (botId: string, ids: readonly string[]) => {
    options.live();
    await handle.write("bots", async (tx) => {
      const bot = await one(tx, botId, true);
      const kept = bot === null ? null : withoutMarks(bot, ids);
      if (kept === null) return;
      await save(tx, kept);
      await bump(tx);
    });
  };
  /** `id:epoch` of each marks' writer that holds its lease now, by the database's clock (one read). */
  const leasesHeld = async (marks: readonly DeletionMark[]): Promise<Set<string>> => {
    const ids = [...new Set(marks.flatMap((m) => (m.writer && UUID.test(m.writer.id) ? [m.writer.id] : [])))];
    if (ids.length === 0) return new Set();
    options.live();
    const rows = await handle.read((tx) =>
      tx.query<{ id: string; epoch: string }>(
        `SELECT id::text AS id, epoch::text AS epoch FROM instances
         WHERE id = ANY($1::uuid[]) AND state = 'live' AND lease_until > clock_timestamp()`,
        [ids],
      ),
    );
    return new Set(rows.map((row) => `${row.id.toLowerCase()}:${Number(row.epoch)}`));
  };
  return {
    list: () => readRows("SELECT row_json FROM bots ORDER BY seq", []),
    async page(input) {
      const { after, limit } = input ?? {};
      if (!Number.isSafeInteger(limit) || limit < 1 || (after !== undefined && typeof after !== "string")) {
        throw new StorageError({
          code: "STORAGE_INVALID_ARGUMENT",
          message:
            "invalid page (expected a positive integer limit and, optionally, the previous page's last botId)",
        });
      }
      const rows = await readRows("SELECT row_json FROM bots WHERE bot_id > $1 ORDER BY bot_id LIMIT $2", [
        after ?? "",
        limit + 1,
      ]);
      const bots = rows.slice(0, limit);
      const last = bots.at(-1);
      return { bots, next: rows.length > limit && last !== undefined ? last.botId : null };
    },
    async count() {
      options.live();
      return handle.read(async (tx) =>
        Number((await tx.query<{ n: string }>("SELECT n FROM journal_state WHERE name = 'bots'"))[0]?.n ?? 0),
      );
    },
    async get(botId) {
      return (await readRows("SELECT row_json FROM bots WHERE bot_id = $1", [botId]))[0] ?? null;
    },
    async create({ botId, name }) {
      options.live();
      const bot = BotSchema.safeParse({ botId, name, createdAt: 1 }).data;
      if (bot === undefined) {
        throw new StorageError({
          code: "STORAGE_INVALID_ARGUMENT",
          message:
            "invalid bot (expected a bot id of letters, digits, _ and -, and a name of 1-200 characters)",
        });
      }
      return handle.write("bots", async (tx) => {
        if ((await one(tx, botId, true)) !== null) {
          throw botExists(botId);
        }
        const n = Number(
          (await tx.query<{ n: string }>("SELECT n FROM journal_state WHERE name = 'bots'"))[0]?.n,
        );
        if (n >= options.maxBots) throw tooManyBots(options.maxBots);
        const created: Bot = { botId: bot.botId, name: bot.name, createdAt: tx.now };
        await tx.query("INSERT INTO bots (bot_id, row_json) VALUES ($1, $2)", [
          botId,
          JSON.stringify(created),
        ]);
        await bump(tx);
        return created;
      });
    },
    async remove(botId) {
      options.live();
      await handle.write("bots", async (tx) => {
        const removed = await tx.query("DELETE FROM bots WHERE bot_id = $1 RETURNING bot_id", [botId]);
        if (removed.length > 0) await bump(tx);
      });
    },
    async markDeleting(botId) {
      options.live();
      return handle.write("bots", async (tx) => {
        const bot = await one(tx, botId, true);
        if (bot === null) return null;
        // The writer this transaction was fenced with (null when unfenced) is the mark's instance.
        const marked = withMark(bot, instance, tx.now, tx.writer);
        await save(tx, marked.bot);
        await bump(tx);
        return marked.mark;
      });
    },
    unmarkDeleting: (botId, mark) => dropMarks(botId, [mark.id]),
    dropAbandonedMarks: (botId, marks) =>
      dropMarks(
        botId,
        marks.map((m) => m.id),
      ),
    async liveMarks(bot, options) {
      const held = await leasesHeld(bot.deletions ?? []);
      return judgeMarks(bot, instance, options, (mark) =>
        mark.writer === undefined
          ? processGone(mark)
          : !held.has(`${mark.writer.id.toLowerCase()}:${mark.writer.epoch}`),
      );
    },
  };
}
