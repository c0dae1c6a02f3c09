import { join } from "node:path";
import { createSystemIdentity, judgeOwnerLiveness } from "@drydock/file-lock";
import { openJsonJournal } from "@drydock/json-journal";
import { z } from "zod";
import { HttpProblem } from "./http-errors.js";

/** Same rule as the journals' BOT_ID: safe in file names, URLs and Boat names. */
export const BOT_ID = /^[A-Za-z0-9_-]{1,120}$/;
export const MAX_BOTS = 4096;

export const BotSchema = z.object({
  botId: z.string().regex(BOT_ID),
  name: z.string().min(1).max(200),
  createdAt: z.number().int().positive(),
  /**
   * Set by DELETE /v1/bots/:botId before it reads the create journal, and cleared when it keeps the bot: a
   * computer create (in any process) asks after journaling its key whether the bot is still wanted, so it
   * sees this mark, or the deletion sees its key, never neither (a Boat created for a deleted bot).
   */
  deletingSince: z.number().int().positive().optional(),
  /**
   * The process that set the mark (file-lock's liveness claim). A mark whose process is proven dead is no
   * deletion under way (a server killed in its DELETE): a computer create clears it and goes on.
   */
  deletingBy: z
    .object({
      pid: z.number().int().positive(),
      host: z.string().optional(),
      bootId: z.string().optional(),
      startTime: z.number().optional(),
      pidNamespace: z.string().optional(),
    })
    .optional(),
});
export type Bot = z.infer<typeof BotSchema>;

export const BotsFileSchema = z.object({
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

function botsStateError(detail: string, cause?: unknown): HttpProblem {
  const problem = new HttpProblem(
    503,
    "bots_paused",
    `The bot registry is ${detail}, so bots cannot be changed. Repair or restore ${"<dataDir>/bots.json"} before retrying; drydock never overwrites a file it could not read.`,
  );
  if (cause !== undefined) (problem as { cause?: unknown }).cause = cause;
  return problem;
}

/** One deletion mark, as `markDeleting` set it: what `unmarkDeleting` compares before it clears. */
export interface DeletionMark {
  deletingSince: number;
  pid: number;
}

/** `peek: true` reads without the lock (json-journal's `peek`): for views, never for decisions. */
export interface BotReadOptions {
  peek?: boolean;
}

/** Rows are read-only: with `peek` they are json-journal's frozen, shared objects. */
export interface BotRegistry {
  list(options?: BotReadOptions): Promise<readonly Readonly<Bot>[]>;
  get(botId: string, options?: BotReadOptions): Promise<Readonly<Bot> | null>;
  create(input: { botId: string; name: string }): Promise<Bot>;
  remove(botId: string): Promise<void>;
  /**
   * Marks the bot as being deleted by this process (`deletingSince`, `deletingBy`); null: no such bot. A
   * mark another running process holds is left as it is (`own: false`: never clear it).
   */
  markDeleting(botId: string): Promise<(DeletionMark & { own: boolean }) | null>;
  /** Clears the mark (the deletion kept the bot). With `only`: only that very mark (compare and clear). */
  unmarkDeleting(botId: string, only?: DeletionMark): Promise<void>;
}

const identity = createSystemIdentity();

/** This process as file-lock records a lock's owner, so its liveness can be judged the same way. */
function thisProcess(): NonNullable<Bot["deletingBy"]> {
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

/** Whether a bot's deletion mark is stale: the process that set it is proven dead. */
export function deletionMarkAbandoned(bot: Readonly<Bot>): boolean {
  if (bot.deletingSince === undefined) return false;
  // A mark without its process is never judged dead.
  return bot.deletingBy !== undefined && judgeOwnerLiveness(bot.deletingBy) === "dead";
}

/** The bot registry: `<dataDir>/bots.json` (+ `bots.lock`), a locked, schema-checked JSON journal. */
export function openBotRegistry(dataDir: string, now: () => number = Date.now): BotRegistry {
  const journal = openJsonJournal<BotsFile>({
    file: join(dataDir, "bots.json"),
    schema: BotsFileSchema,
    empty: () => ({ version: 1, bots: [] }),
    check: checkBots,
    stateError: botsStateError,
    lock: { label: "drydock bot registry" },
  });
  // `read` hands out a private copy and `peek` a frozen one, so the rows need no further copying.
  const read = (options?: BotReadOptions) => (options?.peek === true ? journal.peek() : journal.read());
  return {
    async list(options) {
      return (await read(options)).bots;
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
        return { next: { version: 1, bots: [...doc.bots, bot] }, result: bot };
      });
    },
    markDeleting(botId) {
      return journal.update<(DeletionMark & { own: boolean }) | null>((doc) => {
        const bot = doc.bots.find((b) => b.botId === botId);
        if (bot === undefined) return { result: null };
        // Another server's DELETE that still runs keeps its mark: this one must never clear it (the mark
        // would be gone while that DELETE goes on). A mark of this process (only one DELETE per bot runs in
        // a process: an earlier one's left after a failed clear) or of a dead one is taken over.
        if (
          bot.deletingSince !== undefined &&
          bot.deletingBy !== undefined &&
          bot.deletingBy.pid !== process.pid &&
          !deletionMarkAbandoned(bot)
        ) {
          return { result: { deletingSince: bot.deletingSince, pid: bot.deletingBy.pid, own: false } };
        }
        const deletingBy = thisProcess();
        const deletingSince = now();
        const bots = doc.bots.map((b) => (b.botId === botId ? { ...b, deletingSince, deletingBy } : b));
        return { next: { version: 1, bots }, result: { deletingSince, pid: deletingBy.pid, own: true } };
      });
    },
    unmarkDeleting(botId, only) {
      return journal.update((doc) => {
        const marked = doc.bots.find((b) => b.botId === botId && b.deletingSince !== undefined);
        if (
          marked === undefined ||
          (only !== undefined &&
            (marked.deletingSince !== only.deletingSince || marked.deletingBy?.pid !== only.pid))
        )
          return { result: undefined };
        const bots = doc.bots.map((b) => {
          if (b.botId !== botId) return b;
          const { deletingSince: _since, deletingBy: _by, ...kept } = b;
          return kept;
        });
        return { next: { version: 1, bots }, result: undefined };
      });
    },
    remove(botId) {
      return journal.update((doc) => {
        const bots = doc.bots.filter((b) => b.botId !== botId);
        return bots.length === doc.bots.length
          ? { result: undefined }
          : { next: { version: 1, bots }, result: undefined };
      });
    },
  };
}
