import { BOT_ID } from "@drydock/facts";
import { StorageError } from "./errors.js";

// The registry's argument checks, shared by every backend (index.ts exports them).

function invalid(message: string): StorageError {
  return new StorageError({ code: "STORAGE_INVALID_ARGUMENT", message: `${message}; nothing was changed` });
}

/** A create's arguments, checked before anything is read or written. */
export function checkBotInput(input: unknown): { botId: string; name: string } {
  const { botId, name } = (input ?? {}) as { botId?: unknown; name?: unknown };
  if (typeof botId !== "string" || !BOT_ID.test(botId))
    throw invalid("a bot id must match ^[A-Za-z0-9_-]{1,120}$");
  if (typeof name !== "string" || name.length < 1 || name.length > 200)
    throw invalid("a bot name must be a string of 1 to 200 characters");
  return { botId: botId as string, name: name as string };
}

/** A page request: `limit` a positive integer, `after` absent or a string. */
export function checkPageInput(input: unknown): { after: string | undefined; limit: number } {
  const { after, limit } = (input ?? {}) as { after?: unknown; limit?: unknown };
  if (typeof limit !== "number" || !Number.isSafeInteger(limit) || limit < 1)
    throw invalid("a page's limit must be a positive integer");
  if (after !== undefined && typeof after !== "string") throw invalid("a page's `after` must be a bot id");
  return { after: after as string | undefined, limit: limit as number };
}
