import { randomUUID } from "node:crypto";
import { createSystemIdentity, judgeOwnerLiveness } from "@drydock/file-lock";
import {
  type Bot,
  BotRegistryError,
  type BotRegistryStore,
  BotSchema,
  corruptFailure,
  type DeletionMark,
  StorageError,
} from "@drydock/storage";
import type { PgHandle, PgTx } from "./database.js";

/** Deletion marks per bot at most (the registry's rule, as the file backend's). */
const MAX_MARKS = 64;

const identity = createSystemIdentity();

/** This process as file-lock records a lock's owner, so its liveness can be judged the same way. */
function thisProcess(): DeletionMark["by"] {
  const host = identity.hostname();
  const bootId = identity.bootId();
  const startTime = identity.processStartTime(process.pid);
  const pidNamespace = identity.pidNamespace?.();
  return {
    pid: process.pid,
    ...(host === undefined ? {} : { host }),
    ...(bootId === undefined ? {} : { bootId }),
    ...(startTime === undefined ? {} : { startTime }),
    ...(pidNamespace === undefined ? {} : { pidNamespace }),
  };
}

/**
 * The bot registry on PostgreSQL: one row per bot (`row_json` exactly as the registry holds it), insertion
 * order kept by `seq`; each write one transaction holding the registry's advisory lock, stamps from the
 * database's clock, at most `maxBots` bots. `liveMarks` judges a mark's process with file-lock's
 * judgeOwnerLiveness for now: across hosts that answers "unverifiable" (never "dead"), so a mark of another host
 * stands until it is removed; instance leases replace this in issue #24's next slice.
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
      const kept = (bot?.deletions ?? []).filter((m) => !ids.includes(m.id));
      if (bot === null || kept.length === (bot.deletions ?? []).length) return;
      const { deletions: _all, ...rest } = bot;
      await save(tx, kept.length === 0 ? rest : { ...rest, deletions: kept });
      await bump(tx);
    });
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
          throw new BotRegistryError("BOT_EXISTS", `A bot with id '${botId}' already exists.`);
        }
        const n = Number(
          (await tx.query<{ n: string }>("SELECT n FROM journal_state WHERE name = 'bots'"))[0]?.n,
        );
        if (n >= options.maxBots) {
          throw new BotRegistryError(
            "TOO_MANY_BOTS",
            `This installation already has ${options.maxBots} bots; delete one first.`,
          );
        }
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
        const mark: DeletionMark = { id: randomUUID(), instance, since: tx.now, by: thisProcess() };
        // A server runs one DELETE per bot at a time: an own mark already there is a leftover.
        const kept = (bot.deletions ?? []).filter((m) => m.instance !== instance);
        if (kept.length >= MAX_MARKS) {
          throw new BotRegistryError("BOT_BUSY", "Too many deletions of this bot are under way.");
        }
        await save(tx, { ...bot, deletions: [...kept, mark] });
        await bump(tx);
        return mark;
      });
    },
    unmarkDeleting: (botId, mark) => dropMarks(botId, [mark.id]),
    dropAbandonedMarks: (botId, marks) =>
      dropMarks(
        botId,
        marks.map((m) => m.id),
      ),
    liveMarks(bot, { ownIdle }) {
      const live: DeletionMark[] = [];
      const abandoned: DeletionMark[] = [];
      for (const mark of bot.deletions ?? []) {
        const gone = (ownIdle && mark.instance === instance) || judgeOwnerLiveness(mark.by) === "dead";
        (gone ? abandoned : live).push(mark);
      }
      return { live, abandoned };
    },
  };
}
