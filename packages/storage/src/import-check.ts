import { BoatCreateRequestSchema } from "@drydock/boat-create-journal";
import { checkCreateJournal } from "@drydock/boat-create-journal/logic";
import { BoatDeletionRecordSchema } from "@drydock/boat-delete-journal";
import { checkDeleteJournal } from "@drydock/boat-delete-journal/logic";
import type { z } from "zod";
import { BotSchema } from "./bots.js";
import type { StorageExport } from "./contract.js";
import { StorageError } from "./errors.js";
import { assertMetaKey, META_VALUE } from "./meta-rules.js";

/** How much a backend holds: its journals' rows each, and its bots. */
export interface ImportLimits {
  maxRows: number;
  maxBots: number;
}

function refused(what: string): StorageError {
  return new StorageError({
    code: "STORAGE_INVALID_ARGUMENT",
    message: `importAll was given ${what}; nothing was imported`,
  });
}

/** The first bad row of a list, named by its place and what is wrong with it. */
function firstBadRow<T>(
  list: unknown,
  schema: z.ZodType<T>,
  what: string,
  label: (row: unknown) => string,
): T[] {
  if (!Array.isArray(list)) throw refused(`no list of ${what}s`);
  return list.map((row, i) => {
    const parsed = schema.safeParse(row);
    if (parsed.success) return parsed.data;
    const issue = parsed.error.issues[0];
    const field = issue === undefined || issue.path.length === 0 ? "" : `${issue.path.join(".")}: `;
    throw refused(
      `${what} ${i}${label(row)} that breaks its format (${field}${issue?.message ?? "invalid"})`,
    );
  });
}

const lengthOf = (list: unknown) => (Array.isArray(list) ? list.length : 0);

/** The lists of an export longer than a store's limits allow (none: it fits). */
export function overLimits(
  data: Partial<Record<keyof StorageExport, unknown>>,
  limits: ImportLimits,
): { what: string; count: number; cap: number; option: keyof ImportLimits }[] {
  const sizes = [
    { what: "create rows", count: lengthOf(data.creates), cap: limits.maxRows, option: "maxRows" as const },
    {
      what: "deletion fences",
      count: lengthOf(data.deletes),
      cap: limits.maxRows,
      option: "maxRows" as const,
    },
    { what: "bots", count: lengthOf(data.bots), cap: limits.maxBots, option: "maxBots" as const },
  ];
  return sizes.filter((size) => size.count > size.cap);
}

const named = (key: string) => (row: unknown) => {
  const value = typeof row === "object" && row !== null ? (row as Record<string, unknown>)[key] : undefined;
  return typeof value === "string" ? ` (${key} ${JSON.stringify(value.slice(0, 80))})` : "";
};

/**
 * The whole export, checked before anything is written, by every backend's importAll: each row against its
 * journal's schema (the rows', not a file's: a row backend holds more than a file's 4,096), each journal's
 * invariants (its own check, the one it runs on load), the bots once each, meta keys and values, and the
 * backend's limits. A refusal names the first row at fault and what is wrong with it.
 */
export function checkImport(data: unknown, limits: ImportLimits): StorageExport {
  if (typeof data !== "object" || data === null) throw refused("no export");
  const given = data as Partial<Record<keyof StorageExport, unknown>>;
  // The sizes first: an export over the store's limits is refused before a row of it is parsed.
  const over = overLimits(given, limits)[0];
  if (over !== undefined) {
    throw refused(`${over.count} ${over.what}, more than this store holds (${over.option} ${over.cap})`);
  }
  const creates = firstBadRow(given.creates, BoatCreateRequestSchema, "create row", named("botId"));
  const deletes = firstBadRow(given.deletes, BoatDeletionRecordSchema, "deletion fence", named("boxId"));
  const bots = firstBadRow(given.bots, BotSchema, "bot", named("botId"));
  if (checkCreateJournal({ version: 1, requests: creates }) !== null) {
    throw refused(
      "create rows that break the create journal's rules (one row per bot and request body, each idempotency key once, at most one Boat per bot)",
    );
  }
  if (checkDeleteJournal({ version: 1, records: deletes }) !== null) {
    throw refused(
      "deletion fences that break the delete journal's rules (one fence per Boat, each operation id once)",
    );
  }
  const seen = new Set<string>();
  for (const bot of bots) {
    if (seen.has(bot.botId)) throw refused(`the bot ${JSON.stringify(bot.botId)} twice`);
    seen.add(bot.botId);
  }
  const meta = given.meta ?? {};
  if (typeof meta !== "object" || meta === null || Array.isArray(meta))
    throw refused("meta that is not a map");
  for (const [key, value] of Object.entries(meta)) {
    assertMetaKey(key);
    if (typeof value !== "string" || !META_VALUE.test(value))
      throw refused(`an invalid value for the meta key ${key}`);
  }
  return { creates, deletes, bots, meta: meta as Record<string, string> };
}
