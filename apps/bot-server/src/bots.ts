import { BOT_ID } from "@drydock/facts";
import {
  type Bot,
  type BotReadOptions,
  type BotRegistryStore,
  BotSchema,
  type BotsFile,
  BotsFileSchema,
  type DeletionMark,
  isBotRegistryError,
  isStorageError,
  MAX_FILE_BOTS,
  openFileBotRegistry,
} from "@drydock/storage";
import { HttpProblem } from "./http-errors.js";

/**
 * The bot registry lives in @drydock/storage (`Storage.bots`); this is the server's adapter: it opens the
 * file backend's registry (`<dataDir>/bots.json`) and maps its answers to HTTP, in the words the server has
 * always used — a refusal by rule is 409 (`bot_exists`, `too_many_bots`, `bot_busy`), a storage fault 503
 * `bots_paused`.
 */

/** Same rule as the journals' BOT_ID: safe in file names, URLs and Boat names. */
export { BOT_ID };
export const MAX_BOTS = MAX_FILE_BOTS;
export { type Bot, type BotReadOptions, BotSchema, type BotsFile, BotsFileSchema, type DeletionMark };

/** Rows are read-only: with `peek` they are json-journal's frozen, shared objects. */
export type BotRegistry = BotRegistryStore;

const CODES = { BOT_EXISTS: "bot_exists", TOO_MANY_BOTS: "too_many_bots", BOT_BUSY: "bot_busy" } as const;

/** The registry's answers as HTTP problems: refusals 409, storage faults 503 bots_paused (their own words). */
export function toBotsProblem(error: unknown): unknown {
  if (isBotRegistryError(error)) return new HttpProblem(409, CODES[error.code], error.message);
  if (isStorageError(error) && error.code !== "STORAGE_INVALID_ARGUMENT") {
    const problem = new HttpProblem(503, "bots_paused", error.message);
    (problem as { cause?: unknown }).cause = error;
    return problem;
  }
  return error;
}

/** Each method of the registry with its rejections mapped to HTTP. */
export function httpBotRegistry(registry: BotRegistryStore): BotRegistry {
  const mapped = {} as Record<string, unknown>;
  for (const [name, value] of Object.entries(registry)) {
    if (typeof value !== "function") continue;
    mapped[name] = async (...args: unknown[]) => {
      try {
        return await (value as (...a: unknown[]) => Promise<unknown>)(...args);
      } catch (error) {
        throw toBotsProblem(error);
      }
    };
  }
  return mapped as unknown as BotRegistry;
}

/** The bot registry: `<dataDir>/bots.json` (+ `bots.lock`), the file backend's registry. */
export function openBotRegistry(dataDir: string, now: () => number = Date.now): BotRegistry {
  return httpBotRegistry(openFileBotRegistry(dataDir, { now }));
}
