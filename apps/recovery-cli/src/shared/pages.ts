import type { CommandContext } from "../context.js";
import { CliError } from "../errors.js";

/**
 * Pages of the CLI's lists (`creates list`, `deletions list`, `restores list`, `locks list`): `--limit N`
 * (default 100, at most 500: the bot server's page bounds, so a page reads the same from either) and
 * `--cursor C`, the opaque position a page printed. Each list has a stable order by a key of its own rows
 * (the bot, the Boat, the operation, the lock path); a cursor names the last key of its page, so the next
 * page starts strictly after it: a row added or removed meanwhile never shifts another into or out of view.
 */
export const PAGE_LIMIT_DEFAULT = 100;
export const PAGE_LIMIT_MAX = 500;

/** A row's position in its list: compared element by element. */
export type PageKey = readonly string[];

export interface Page<T> {
  items: T[];
  /** Pass as `--cursor` for the next page; null on the last page. */
  nextCursor: string | null;
  /** The `drydock … --cursor …` line that prints the next page, or null on the last page. */
  nextCommand: string | null;
}

function compareKeys(a: PageKey, b: PageKey): number {
  for (let i = 0; i < Math.max(a.length, b.length); i += 1) {
    const x = a[i] ?? "";
    const y = b[i] ?? "";
    if (x !== y) return x < y ? -1 : 1;
  }
  return 0;
}

function encodeCursor(key: PageKey): string {
  return Buffer.from(JSON.stringify({ v: 1, after: key }), "utf8").toString("base64url");
}

function decodeCursor(cursor: string): PageKey {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
  } catch {
    parsed = undefined;
  }
  const { v, after } = (parsed ?? {}) as { v?: unknown; after?: unknown };
  if (v !== 1 || !Array.isArray(after) || !after.every((part) => typeof part === "string")) {
    throw new CliError(
      "USAGE",
      `--cursor ${cursor.length > 40 ? `${cursor.slice(0, 40)}…` : cursor} is not a cursor drydock printed; start from the first page (omit --cursor).`,
    );
  }
  return after as string[];
}

function pageLimit(value: string | undefined): number {
  if (value === undefined) return PAGE_LIMIT_DEFAULT;
  const limit = /^\d+$/.test(value) ? Number(value) : Number.NaN;
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > PAGE_LIMIT_MAX) {
    throw new CliError("USAGE", `--limit must be a whole number from 1 to ${PAGE_LIMIT_MAX}, not ${value}.`);
  }
  return limit;
}

/**
 * One page of `rows` in the order of `keyOf`, after `--cursor` and at most `--limit` long. `command` is the
 * list's command words (`creates list`): the next page's line repeats them with the cursor.
 */
export function pageOf<T>(
  ctx: CommandContext,
  rows: readonly T[],
  keyOf: (row: T) => PageKey,
  command: string,
): Page<T> {
  const limit = pageLimit(ctx.options.limit);
  const after = ctx.options.cursor === undefined ? null : decodeCursor(ctx.options.cursor);
  const keyed = rows.map((row) => ({ row, key: keyOf(row) })).sort((a, b) => compareKeys(a.key, b.key));
  const rest = after === null ? keyed : keyed.filter((entry) => compareKeys(entry.key, after) > 0);
  const shown = rest.slice(0, limit);
  const last = shown.at(-1);
  const nextCursor = rest.length > limit && last !== undefined ? encodeCursor(last.key) : null;
  const limitWords = ctx.options.limit === undefined ? "" : ` --limit ${limit}`;
  return {
    items: shown.map((entry) => entry.row),
    nextCursor,
    nextCommand:
      nextCursor === null ? null : `${ctx.commandPrefix} ${command}${limitWords} --cursor ${nextCursor}`,
  };
}

/** The line under a page that has more after it: `next: drydock … --cursor X`. */
export function nextLine(page: Page<unknown>): string {
  return page.nextCommand === null ? "" : `next: ${page.nextCommand}\n`;
}
