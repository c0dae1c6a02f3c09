import { z } from "zod";
import { BOT_ID } from "../bots.js";
import { HttpProblem } from "../http-errors.js";

/** The page bounds of every list at the HTTP edge. */
export const PAGE_LIMIT_DEFAULT = 100;
export const PAGE_LIMIT_MAX = 500;

/** `?limit=&cursor=`: a bounded page size and the opaque position a previous page answered. */
export const PageQuery = z
  .object({
    limit: z.coerce.number().int().min(1).max(PAGE_LIMIT_MAX).default(PAGE_LIMIT_DEFAULT),
    cursor: z.string().min(1).max(1024).optional(),
  })
  .strict();

/**
 * `?limit=&cursor=` of GET /v1/computers: the same bounds, and a longer cursor (it carries boat.dev's own
 * list position, up to 4,096 characters, which the lifecycle checks).
 */
export const ComputersPageQuery = PageQuery.extend({
  cursor: z.string().min(1).max(8192).optional(),
}).strict();

/** `nextCursor`: the position after this page, or null on the last page. */
export const NextCursor = z
  .string()
  .nullable()
  .meta({ description: "Pass as `cursor` for the next page; null on the last page." });

const CursorPosition = z.object({ v: z.literal(1), after: z.string().regex(BOT_ID) }).strict();

/** The opaque cursor: base64url of the position (the last key of the page before). */
export function encodeCursor(after: string): string {
  return Buffer.from(JSON.stringify({ v: 1, after }), "utf8").toString("base64url");
}

/** The position a cursor names; anything else is 400 invalid_cursor. */
export function decodeCursor(cursor: string | undefined): string | undefined {
  if (cursor === undefined) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
  } catch {
    parsed = undefined;
  }
  const position = CursorPosition.safeParse(parsed);
  if (!position.success) {
    throw new HttpProblem(
      400,
      "invalid_cursor",
      "The cursor is not one this server answered (or no longer valid); restart from the first page (omit `cursor`).",
    );
  }
  return position.data.after;
}
