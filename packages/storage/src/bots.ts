import { BOT_ID } from "@drydock/facts";
import { z } from "zod";

/**
 * The bot registry's record and its contract (`Storage.bots`). The `file` backend keeps it as
 * `<dataDir>/bots.json` (`{ version: 1, bots: [...] }`, at most 4,096 bots, exactly the format the bot server
 * has always written); a row backend keeps one row per bot with a configurable limit.
 */

/** The file backend's cap (its whole-file format); row backends take a configurable limit. */
export const MAX_FILE_BOTS = 4096;

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
   * is no deletion under way, and a create removes it. A mark set by a fenced writer (a server's instance on
   * postgres) also names that instance (`writer`): it is judged by the instance's lease alone, never by pid.
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
          /** The writer's instance (id, epoch) on a fenced store: abandoned once it holds no lease. */
          writer: z
            .looseObject({ id: z.string().min(1).max(64), epoch: z.number().int().positive() })
            .readonly()
            .optional(),
        })
        .readonly(),
    )
    .max(64)
    .readonly()
    .optional(),
});
export type Bot = z.infer<typeof BotSchema>;

/** One DELETE's mark on its bot. */
export type DeletionMark = NonNullable<Bot["deletions"]>[number];

/** `liveMarks`'s answer: the marks that stand, and those no DELETE holds any more. */
export interface MarkVerdict {
  live: DeletionMark[];
  abandoned: DeletionMark[];
}

/** `peek: true` reads without the lock (json-journal's `peek`): for views, never for decisions. */
export interface BotReadOptions {
  peek?: boolean;
}

/** The registry's refusals (its rules, not storage faults): the HTTP edge maps each to 409. */
export const BOT_REGISTRY_ERROR_CODES = ["BOT_EXISTS", "TOO_MANY_BOTS", "BOT_BUSY"] as const;
export type BotRegistryErrorCode = (typeof BOT_REGISTRY_ERROR_CODES)[number];

const MARKER = Symbol.for("@drydock/storage/BotRegistryError");

export class BotRegistryError extends Error {
  override readonly name = "BotRegistryError";
  readonly code: BotRegistryErrorCode;
  constructor(code: BotRegistryErrorCode, message: string) {
    super(message);
    this.code = code;
    Object.defineProperty(this, MARKER, { value: true });
  }
}

export function isBotRegistryError(value: unknown): value is BotRegistryError {
  return typeof value === "object" && value !== null && (value as Record<symbol, unknown>)[MARKER] === true;
}

/**
 * The bot registry (`Storage.bots`). Rows are read-only: with `peek` they may be shared, frozen objects.
 * Each write is one atomic, durable transaction. Refusals by rule are `BotRegistryError`s (`BOT_EXISTS`,
 * `TOO_MANY_BOTS`, `BOT_BUSY`); storage faults are `StorageError`s.
 */
export interface BotRegistryStore {
  list(options?: BotReadOptions): Promise<readonly Readonly<Bot>[]>;
  /** One page of bots, botId ascending, after `after` (the previous page's last botId). */
  page(input: {
    after?: string;
    limit: number;
  }): Promise<{ bots: readonly Readonly<Bot>[]; next: string | null }>;
  /** How many bots there are. */
  count(): Promise<number>;
  get(botId: string, options?: BotReadOptions): Promise<Readonly<Bot> | null>;
  /** BOT_EXISTS when the id is taken; TOO_MANY_BOTS at the backend's limit. */
  create(input: { botId: string; name: string }): Promise<Bot>;
  remove(botId: string): Promise<void>;
  /** Adds this DELETE's mark to the bot (`deletions`); null: no such bot. BOT_BUSY past 64 marks. */
  markDeleting(botId: string): Promise<DeletionMark | null>;
  /** Removes that one mark (the deletion kept the bot); other deletions' marks stay. */
  unmarkDeleting(botId: string, mark: DeletionMark): Promise<void>;
  /** Removes marks whose process is proven dead, and this registry's own leftovers (see `liveMarks`). */
  dropAbandonedMarks(botId: string, marks: readonly DeletionMark[]): Promise<void>;
  /**
   * The bot's deletion marks that stand for a DELETE that may still run, and those that do not: a mark
   * whose process is proven dead (a mark naming a `writer` instance: whose instance holds no lease by the
   * database's clock), or (with `ownIdle`: the caller holds this bot's exclusivity in this server, so no
   * DELETE of it runs here) one this registry left behind when it could not remove it. Asynchronous: a
   * backend with instances asks its database.
   */
  liveMarks(bot: Readonly<Bot>, options: { ownIdle: boolean }): Promise<MarkVerdict>;
}
