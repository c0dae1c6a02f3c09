import { randomUUID } from "node:crypto";
import { join } from "node:path";
import { BOT_ID, BOTS_FILE } from "@drydock/facts";
import { createSystemIdentity, judgeOwnerLiveness } from "@drydock/file-lock";
import { isNotDamaged, openJsonJournal } from "@drydock/json-journal";
import { z } from "zod";
import { HttpProblem } from "./http-errors.js";

/** Same rule as the journals' BOT_ID: safe in file names, URLs and Boat names. */
export { BOT_ID };
export const MAX_BOTS = 4096;

export const BotSchema = z.looseObject({
  botId: z.string().regex(BOT_ID),
  name: z.string().min(1).max(200),
  createdAt: z.number().int().positive(),
  /**
   * One mark per DELETE /v1/bots/:botId under way, set before it reads the create journal and removed when
   * it keeps the bot (the bot's removal takes them all). A computer create (in any process) asks, after
   * journaling its key, whether the bot is still wanted: it sees a mark, or each deletion sees its key,
   * never neither (a Boat created for a deleted bot). Each DELETE holds its own mark the whole time it runs,
   * so another DELETE's failing (which removes only that one's) never leaves it unmarked. A mark names its
   * process (file-lock's liveness claim): one whose process is proven dead (a server killed in its DELETE)
   * is no deletion under way, and a create removes it.
   */
  deletions: z
    .array(
      z
        .looseObject({
          id: z.string().min(1).max(64),
          /** The registry instance (one per server) that set it: its own leftovers are told by this. */
          instance: z.string().min(1).max(64),
          since: z.number().int().positive(),
          by: z
            .looseObject({
              pid: z.number().int().positive(),
              host: z.string().optional(),
              bootId: z.string().optional(),
              startTime: z.number().optional(),
              pidNamespace: z.string().optional(),
            })
            .readonly(),
        })
        .readonly(),
    )
    .max(64)
    .readonly()
    .optional(),
});
export type Bot = z.infer<typeof BotSchema>;

export const BotsFileSchema = z.looseObject({
  version: z.literal(1),
  bots: z.array(BotSchema).max(MAX_BOTS),
});
export type BotsFile = z.infer<typeof BotsFileSchema>;

function checkBots(doc: BotsFile): string | null {
  const seen = new Set<string>();
  for (const b of doc.bots) {
    if (seen.has(b.botId)) return "invalid";
    seen.add(b.botId);
  }
  return null;
}

function botsStateError(file: string, detail: string, cause?: unknown): HttpProblem {
  const problem = new HttpProblem(
    503,
    "bots_paused",
    isNotDamaged(detail)
      ? `Bots cannot be changed: the bot registry ${file} is ${detail}.`
      : `The bot registry ${file} is ${detail}, so bots cannot be changed. Repair or restore it before retrying; drydock never overwrites a file it could not read.`,
  );
  if (cause !== undefined) (problem as { cause?: unknown }).cause = cause;
  return problem;
}

/** One DELETE's mark on its bot. */
export type DeletionMark = NonNullable<Bot["deletions"]>[number];

/** `peek: true` reads without the lock (json-journal's `peek`): for views, never for decisions. */
export interface BotReadOptions {
  peek?: boolean;
}

/** Rows are read-only: with `peek` they are json-journal's frozen, shared objects. */
export interface BotRegistry {
  list(options?: BotReadOptions): Promise<readonly Readonly<Bot>[]>;
  /** One page of bots, botId ascending, after `after` (the previous page's last botId); read with `peek`. */
  page(input: {
    after?: string;
    limit: number;
  }): Promise<{ bots: readonly Readonly<Bot>[]; next: string | null }>;
  /** How many bots there are (read with `peek`). */
  count(): Promise<number>;
  get(botId: string, options?: BotReadOptions): Promise<Readonly<Bot> | null>;
  create(input: { botId: string; name: string }): Promise<Bot>;
  remove(botId: string): Promise<void>;
  /** Adds this DELETE's mark to the bot (`deletions`); null: no such bot. */
  markDeleting(botId: string): Promise<DeletionMark | null>;
  /** Removes that one mark (the deletion kept the bot); other deletions' marks stay. */
  unmarkDeleting(botId: string, mark: DeletionMark): Promise<void>;
  /** Removes marks whose process is proven dead, and this registry's own leftovers (see `liveMarks`). */
  dropAbandonedMarks(botId: string, marks: readonly DeletionMark[]): Promise<void>;
  /**
   * The bot's deletion marks that stand for a DELETE that may still run, and those that do not: a mark
   * whose process is proven dead, or (with `ownIdle`: the caller holds this bot's exclusivity in this
   * server, so no DELETE of it runs here) one this registry left behind when it could not remove it.
   */
  liveMarks(
    bot: Readonly<Bot>,
    options: { ownIdle: boolean },
  ): { live: DeletionMark[]; abandoned: DeletionMark[] };
}

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

/** The bot registry: `<dataDir>/bots.json` (+ `bots.lock`), a locked, schema-checked JSON journal. */
export function openBotRegistry(dataDir: string, now: () => number = Date.now): BotRegistry {
  const file = join(dataDir, BOTS_FILE);
  const journal = openJsonJournal<BotsFile>({
    file,
    schema: BotsFileSchema,
    empty: () => ({ version: 1, bots: [] }),
    check: checkBots,
    stateError: (detail, cause) => botsStateError(file, detail, cause),
    lock: { label: "drydock bot registry" },
  });
  // This registry (one per server): tells its own leftover marks from other servers' (which may share its
  // process, as in tests, or its pid after a restart).
  const instance = randomUUID();
  /** Removes exactly these marks (by id) from the bot, if they are still there. */
  const dropMarks = (botId: string, ids: readonly string[]) =>
    journal.update((doc) => {
      const bot = doc.bots.find((b) => b.botId === botId);
      const kept = (bot?.deletions ?? []).filter((m) => !ids.includes(m.id));
      if (bot === undefined || kept.length === (bot.deletions ?? []).length) return { result: undefined };
      const bots = doc.bots.map((b) => {
        if (b.botId !== botId) return b;
        const { deletions: _all, ...rest } = b;
        return kept.length === 0 ? rest : { ...rest, deletions: kept };
      });
      return { next: { ...doc, bots }, result: undefined };
    });
  // `read` hands out a private copy and `peek` a frozen one, so the rows need no further copying.
  const read = (options?: BotReadOptions) => (options?.peek === true ? journal.peek() : journal.read());
  return {
    async list(options) {
      return (await read(options)).bots;
    },
    async page({ after, limit }) {
      const sorted = [...(await journal.peek()).bots].sort((a, b) =>
        a.botId < b.botId ? -1 : a.botId > b.botId ? 1 : 0,
      );
      const rest = after === undefined ? sorted : sorted.filter((b) => b.botId > after);
      const bots = rest.slice(0, limit);
      const last = bots.at(-1);
      return { bots, next: rest.length > limit && last !== undefined ? last.botId : null };
    },
    async count() {
      return (await journal.peek()).bots.length;
    },
    async get(botId, options) {
      return (await read(options)).bots.find((b) => b.botId === botId) ?? null;
    },
    create({ botId, name }) {
      return journal.update((doc) => {
        if (doc.bots.some((b) => b.botId === botId)) {
          throw new HttpProblem(409, "bot_exists", `A bot with id '${botId}' already exists.`);
        }
        if (doc.bots.length >= MAX_BOTS) {
          throw new HttpProblem(
            409,
            "too_many_bots",
            `This installation already has ${MAX_BOTS} bots; delete one first.`,
          );
        }
        const bot = { botId, name, createdAt: now() };
        return { next: { ...doc, bots: [...doc.bots, bot] }, result: bot };
      });
    },
    markDeleting(botId) {
      return journal.update<DeletionMark | null>((doc) => {
        const bot = doc.bots.find((b) => b.botId === botId);
        if (bot === undefined) return { result: null };
        const mark: DeletionMark = { id: randomUUID(), instance, since: now(), by: thisProcess() };
        // A server runs one DELETE per bot at a time: an own mark already there is a leftover.
        const kept = (bot.deletions ?? []).filter((m) => m.instance !== instance);
        if (kept.length >= 64)
          throw new HttpProblem(409, "bot_busy", "Too many deletions of this bot are under way.");
        const bots = doc.bots.map((b) => (b.botId === botId ? { ...b, deletions: [...kept, mark] } : b));
        return { next: { ...doc, bots }, result: mark };
      });
    },
    unmarkDeleting(botId, mark) {
      return dropMarks(botId, [mark.id]);
    },
    dropAbandonedMarks(botId, marks) {
      return dropMarks(
        botId,
        marks.map((m) => m.id),
      );
    },
    liveMarks(bot, options) {
      const live: DeletionMark[] = [];
      const abandoned: DeletionMark[] = [];
      for (const mark of bot.deletions ?? []) {
        const gone =
          (options.ownIdle && mark.instance === instance) || judgeOwnerLiveness(mark.by) === "dead";
        (gone ? abandoned : live).push(mark);
      }
      return { live, abandoned };
    },
    remove(botId) {
      return journal.update((doc) => {
        const bots = doc.bots.filter((b) => b.botId !== botId);
        return bots.length === doc.bots.length
          ? { result: undefined }
          : { next: { ...doc, bots }, result: undefined };
      });
    },
  };
}
