import type { BoatClient } from "./client.js";
import { BoatApiError, isBoatApiError } from "./errors.js";
import type { Sandbox } from "./schema.js";

/**
 * A walk of boat.dev's list of Boats, one page at a time, with no page cap: boat.dev's list is keyset-paged
 * on (createdAt, id) and eventually consistent, so the only way to see every Boat is to follow its cursor to
 * the end. The walk keeps its position after each whole page (a failed page is read again from where it
 * stopped, never from the start), counts what it read, and refuses a cursor handed back twice (the list
 * would never end). It keeps no Boats: the caller keeps what it needs of each page, so memory stays
 * O(what the caller keeps) plus one cursor per page read.
 *
 * Used by the lifecycle's name sweep, its paginated inventory, the Boat recovery plan and
 * `listAllSandboxes` (its `maxPages` cap is the only difference).
 */
export interface SandboxWalk {
  /** True once the list's last page was read. */
  readonly complete: boolean;
  /** Whole pages read so far (a failed page is not counted). */
  readonly pagesRead: number;
  /** Boats on those pages. */
  readonly boatsSeen: number;
  /** The cursor of the next page (undefined: the first page). */
  readonly cursor: string | undefined;
  /**
   * Reads the next page and returns its Boats ([] once complete). What a failed page throws is boat.dev's
   * (or the transport's) own error, unchanged, and the position stays: calling again reads that page again.
   * Two exceptions: a cursor boat.dev had already handed back is `pagination_loop` (502, the position
   * stays); and when boat.dev refuses the saved cursor (`invalid_cursor`, see `isRefusedCursor`) the walk
   * is back at the list's start (counters reset), so calling again reads the list again from its start.
   */
  next(signal?: AbortSignal): Promise<Sandbox[]>;
  /** Where the walk stands, in words: "3 pages (600 Boats) read so far". */
  progress(): string;
}

export interface SandboxWalkOptions {
  /** Boats per page (1–200, default 200: boat.dev's largest page). */
  pageSize?: number;
  /** Start from this cursor (a position a previous walk's `cursor` gave) instead of the first page. */
  cursor?: string;
}

/** Whether a failed page was boat.dev refusing the cursor it was given (400 `invalid_cursor`). */
export function isRefusedCursor(error: unknown): boolean {
  return isBoatApiError(error) && error.status === 400 && error.code === "invalid_cursor";
}

function plural(count: number, word: string): string {
  return `${count} ${word}${count === 1 ? "" : "s"}`;
}

export function walkSandboxes(
  client: Pick<BoatClient, "listSandboxes">,
  options: SandboxWalkOptions = {},
): SandboxWalk {
  const pageSize = options.pageSize ?? 200;
  const seenCursors = new Set<string>();
  let cursor = options.cursor;
  if (cursor !== undefined) seenCursors.add(cursor);
  let complete = false;
  let pagesRead = 0;
  let boatsSeen = 0;
  const progress = () => `${plural(pagesRead, "page")} (${plural(boatsSeen, "Boat")}) read so far`;

  return {
    get complete() {
      return complete;
    },
    get pagesRead() {
      return pagesRead;
    },
    get boatsSeen() {
      return boatsSeen;
    },
    get cursor() {
      return cursor;
    },
    progress,
    async next(signal) {
      if (complete) return [];
      let page: { sandboxes: Sandbox[]; nextCursor: string | null };
      try {
        page = await client.listSandboxes({
          limit: pageSize,
          ...(cursor === undefined ? {} : { cursor }),
          ...(signal === undefined ? {} : { signal }),
        });
      } catch (error) {
        if (cursor !== undefined && isRefusedCursor(error)) {
          // boat.dev no longer accepts the saved position: nothing else could move the walk forward, so it
          // starts again from the first page.
          cursor = undefined;
          seenCursors.clear();
          pagesRead = 0;
          boatsSeen = 0;
        }
        throw error;
      }
      const next = page.nextCursor;
      if (next !== null && seenCursors.has(next)) {
        throw new BoatApiError({
          status: 502,
          code: "pagination_loop",
          message: `boat.dev handed back a list cursor it had already given, so its list cannot be read to the end (${progress()})`,
          details: { pages: pagesRead + 1 },
        });
      }
      // The page counts only once it is whole: the counters and the cursor move together.
      pagesRead += 1;
      boatsSeen += page.sandboxes.length;
      if (next === null) {
        complete = true;
        seenCursors.clear();
      } else {
        seenCursors.add(next);
        cursor = next;
      }
      return page.sandboxes;
    },
  };
}
