import type { BoatDeletionRecord } from "@drydock/boat-delete-journal";
import { isBoatApiError, isRefusedCursor, MAX_CURSOR_LENGTH, walkSandboxes } from "@drydock/boat-provider";
import { z } from "zod";
import { isLifecycleError, LifecycleError } from "../errors.js";
import { botSlug, classifyName } from "../names.js";
import { BOAT_ID, type InventoryItem } from "../schema.js";
import { type Context, classifyProviderError, journal, messageOf } from "./context.js";
import { finishDeletion, reconcileRecord } from "./deletion.js";

interface ListedSandbox {
  id: string;
  name: string | null;
  state: "provisioning" | "running" | "stopped" | "error";
}

const REPAIR = "repair it in boat.dev before continuing";

/** Items per inventory page: the same bounds as every list of the bot server. */
export const INVENTORY_PAGE_DEFAULT = 100;
export const INVENTORY_PAGE_MAX = 500;
/**
 * boat.dev list pages one inventory page reads at most (of 200 Boats): in an account of foreign Boats a
 * page may hold few or none of ours, and still costs no more than this. Its `nextCursor` goes on.
 */
export const INVENTORY_LIST_PAGES = 5;

export interface InventoryPageOptions {
  /** Items per page, 1–500 (default 100). A page may hold fewer (see `nextCursor`). */
  limit?: number;
  /** The `nextCursor` of the previous page; omitted: the first page. */
  cursor?: string;
  signal?: AbortSignal;
}

export interface InventoryPage {
  computers: InventoryItem[];
  /** Pass as `cursor` for the next page; null once every Boat was listed. */
  nextCursor: string | null;
}

/**
 * Where a listing stands. First the Boats the journals know (create rows with a Boat id, deletion fences),
 * by id; then boat.dev's list in its own keyset order (`at`: the cursor of the provider page to read, null
 * for its first; `after`: the last Boat of that page already looked at), for the Boats with this
 * installation's names that no journal knows.
 */
const positionSchema = z.union([
  z.strictObject({ v: z.literal(1), journal: z.string().regex(BOAT_ID) }),
  z.strictObject({
    v: z.literal(1),
    at: z.string().min(1).max(MAX_CURSOR_LENGTH).nullable(),
    after: z.string().max(200).nullable(),
  }),
]);
type Position = z.infer<typeof positionSchema>;

function encode(position: Position): string {
  return Buffer.from(JSON.stringify(position), "utf8").toString("base64url");
}

function decode(cursor: string | undefined): Position | null {
  if (cursor === undefined) return null;
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
  } catch {
    parsed = undefined;
  }
  const position = positionSchema.safeParse(parsed);
  if (!position.success) throw invalidCursor();
  return position.data;
}

function invalidCursor(): LifecycleError {
  return new LifecycleError({
    code: "invalid_cursor",
    message:
      "The cursor is not one this inventory answered (or no longer valid); nothing was read. Restart from the first page (omit the cursor).",
  });
}

function pageLimit(limit: number | undefined): number {
  if (limit === undefined) return INVENTORY_PAGE_DEFAULT;
  if (!Number.isInteger(limit) || limit < 1 || limit > INVENTORY_PAGE_MAX) {
    throw new LifecycleError({
      code: "invalid_argument",
      message: `limit must be an integer from 1 to ${INVENTORY_PAGE_MAX}`,
    });
  }
  return limit;
}

/** What the journals know, read once per page. */
interface Journals {
  fences: Map<string, BoatDeletionRecord>;
  rememberedBy: Map<string, { botId: string; resolved: boolean }>;
  /** Bot → the Boat ids its create rows remember. */
  boxesOf: Map<string, string[]>;
  botIds: Set<string>;
}

async function readJournals(ctx: Context): Promise<Journals> {
  const fences = new Map<string, BoatDeletionRecord>();
  for (const record of await journal(() => ctx.deleteJournal.boatDeletionSnapshot())) {
    fences.set(record.boxId, record);
  }
  const rememberedBy = new Map<string, { botId: string; resolved: boolean }>();
  const boxesOf = new Map<string, string[]>();
  const botIds = new Set<string>();
  for (const row of await journal(() => ctx.createJournal.boatCreateRecoverySnapshot())) {
    botIds.add(row.botId);
    if (row.boxId === undefined) continue;
    rememberedBy.set(row.boxId, { botId: row.botId, resolved: row.resolved });
    boxesOf.set(row.botId, [...(boxesOf.get(row.botId) ?? []), row.boxId]);
  }
  for (const record of fences.values()) if (record.ownerBotId !== null) botIds.add(record.ownerBotId);
  return { fences, rememberedBy, boxesOf, botIds };
}

/**
 * Name → bot, for the names on one page only: the bots are grouped by the slug every name carries, so a
 * page hashes only the ids whose slug matches one of its names (cheap however many bots are registered).
 */
function attributor(ctx: Context, botIds: Iterable<string>): (name: string | null) => string | undefined {
  const bySlug = new Map<string, string[]>();
  for (const botId of botIds) {
    const slug = botSlug(botId);
    bySlug.set(slug, [...(bySlug.get(slug) ?? []), botId]);
  }
  return (name) => {
    if (name === null) return undefined;
    const slug = /^ogb-(?:[0-9a-f]{12}-)?([a-z0-9]{1,8})-[0-9a-f]{6}$/.exec(name)?.[1];
    if (slug === undefined) return undefined;
    return (bySlug.get(slug) ?? []).find(
      (botId) => ctx.scopedName(botId) === name || ctx.legacyName(botId) === name,
    );
  };
}

/** One page of the sanitized inventory; see `BoatLifecycle.inventoryPage`. */
export async function buildInventoryPage(
  ctx: Context,
  knownBotIds: () => readonly string[] | Promise<readonly string[]>,
  options: InventoryPageOptions = {},
): Promise<InventoryPage> {
  const limit = pageLimit(options.limit);
  let position = decode(options.cursor);
  const items: InventoryItem[] = [];
  if (position === null || "journal" in position) {
    const page = await journalPage(ctx, knownBotIds, limit, position?.journal);
    items.push(...page.items);
    position = page.next;
  }
  // The journal's Boats are done and the page has room: boat.dev's list fills it.
  if (position !== null && !("journal" in position) && items.length < limit) {
    const page = await listPage(ctx, knownBotIds, limit - items.length, position, options.signal);
    items.push(...page.items);
    position = page.next;
  }
  const j = await readJournals(ctx);
  return {
    computers: markConflicts(items, await otherClaims(ctx, j, items)),
    nextCursor: position === null ? null : encode(position),
  };
}

/**
 * Which Boats a page shows, and how: `describe` joins one Boat (as read, or null when it could not be)
 * with the journals; `conflicts` marks two live Boats that claim one bot.
 */
function describer(ctx: Context, j: Journals, nameOwner: (name: string | null) => string | undefined) {
  return (
    sandbox: ListedSandbox | null,
    boxId: string,
    extra: { hidden?: boolean; fenceProblem?: string } = {},
  ) => {
    if (extra.hidden) return null;
    const fence = j.fences.get(boxId);
    const name = sandbox?.name ?? fence?.name ?? null;
    const remembered = j.rememberedBy.get(boxId);
    const kind = classifyName(ctx.environmentId, sandbox === null ? name : sandbox.name);
    const namedBot = nameOwner(name);
    const ownerBotId = remembered?.botId ?? fence?.ownerBotId ?? namedBot ?? null;
    // Only this installation's Boats are shown: remembered, fenced, scoped, or a known bot's legacy name.
    if (remembered === undefined && fence === undefined && kind !== "scoped" && namedBot === undefined) {
      return null;
    }
    const problems: string[] = [];
    if (!BOAT_ID.test(boxId)) problems.push(`boat.dev listed a malformed id — ${REPAIR}`);
    if (
      remembered !== undefined &&
      sandbox !== null &&
      sandbox.name !== null &&
      sandbox.name !== ctx.scopedName(remembered.botId) &&
      sandbox.name !== ctx.legacyName(remembered.botId)
    ) {
      problems.push(`this remembered cloud computer no longer has its deterministic name — ${REPAIR}`);
    }
    if (ownerBotId === null && fence === undefined) {
      problems.push(`no bot of this installation claims this cloud computer — ${REPAIR}`);
    }
    if (extra.fenceProblem !== undefined) problems.push(extra.fenceProblem);

    let state: InventoryItem["state"] = sandbox?.state ?? "unknown";
    if (fence !== undefined) state = fence.phase === "blocked" ? "deletion_blocked" : "removing";
    const naming: InventoryItem["naming"] =
      name === null
        ? "unnamed"
        : kind === "scoped"
          ? "scoped"
          : kind === "legacy" && namedBot !== undefined
            ? "legacy"
            : "other";
    const item: InventoryItem = {
      boxId,
      name,
      ownerBotId,
      state,
      available: problems.length === 0,
      ...(problems.length > 0 ? { problem: problems.join("; ") } : {}),
      naming,
      remembered: remembered !== undefined,
      ...(fence === undefined
        ? {}
        : {
            deletion: { phase: fence.phase, ...(fence.status === undefined ? {} : { status: fence.status }) },
          }),
    };
    return item;
  };
}

/** Two live Boats for one bot: neither can be trusted as "the" Boat until a person decides. */
export function markConflicts(
  items: InventoryItem[],
  others: (botId: string) => readonly string[] = () => [],
) {
  const perBot = new Map<string, string[]>();
  for (const item of items) {
    if (item.ownerBotId === null || item.deletion !== undefined) continue;
    perBot.set(item.ownerBotId, [...(perBot.get(item.ownerBotId) ?? []), item.boxId]);
  }
  return items.map((item) => {
    const botId = item.ownerBotId;
    if (botId === null || item.deletion !== undefined) return item;
    const claims = new Set([...(perBot.get(botId) ?? []), ...others(botId)]);
    const problem = `two cloud computers claim bot ${botId} — ${REPAIR}`;
    if (claims.size < 2 || item.problem?.includes(problem)) return item;
    return {
      ...item,
      available: false,
      problem: item.problem === undefined ? problem : `${item.problem}; ${problem}`,
    };
  });
}

/**
 * The other live Boats that claim each bot of a page but are not on it: its create rows' Boats and, once
 * the name sweep is complete, the Boats listed under its names (hints, each confirmed by a direct read).
 * Such Boats are rare; each is read once per page.
 */
async function otherClaims(
  ctx: Context,
  j: Journals,
  items: readonly InventoryItem[],
): Promise<(botId: string) => string[]> {
  const onPage = new Set(items.map((item) => item.boxId));
  const claims = new Map<string, string[]>();
  const sweepComplete = ctx.nameSweep.status().complete;
  for (const botId of new Set(items.flatMap((item) => (item.ownerBotId === null ? [] : [item.ownerBotId])))) {
    const names = [ctx.scopedName(botId), ctx.legacyName(botId)];
    const candidates = new Set([
      ...(j.boxesOf.get(botId) ?? []),
      ...(sweepComplete ? ctx.nameSweep.idsFor(names) : []),
    ]);
    const live: string[] = [];
    for (const boxId of candidates) {
      if (onPage.has(boxId) || j.fences.has(boxId)) continue;
      try {
        const boat = await ctx.client.getSandbox(boxId);
        ctx.nameSweep.observe(boxId, boat.name);
        if (j.rememberedBy.get(boxId)?.botId === botId || (boat.name !== null && names.includes(boat.name))) {
          live.push(boxId);
        }
      } catch (error) {
        // Gone (404/410) is no claim; a read that failed proves nothing either way: counted as a claim.
        if (classifyProviderError(error).kind === "absent") ctx.nameSweep.observe(boxId, null);
        else live.push(boxId);
      }
    }
    claims.set(botId, live);
  }
  return (botId) => claims.get(botId) ?? [];
}

/**
 * A page of the Boats the journals know, by id: each read directly (the list is eventually consistent, so
 * it proves nothing), each deletion fence polled once (a proven deletion hides the Boat), a remembered
 * Boat proven gone (404/410) retired.
 */
async function journalPage(
  ctx: Context,
  knownBotIds: () => readonly string[] | Promise<readonly string[]>,
  limit: number,
  after: string | undefined,
): Promise<{ items: InventoryItem[]; next: Position }> {
  const before = await readJournals(ctx);
  const ids = [...new Set([...before.rememberedBy.keys(), ...before.fences.keys()])]
    .filter((boxId) => after === undefined || boxId > after)
    .sort();
  const pageIds = ids.slice(0, limit);
  // Fences first: a reconcile may retire records (and their create rows), so the journals are read after.
  const hidden = new Set<string>();
  const fenceProblems = new Map<string, string>();
  for (const boxId of pageIds) {
    const record = before.fences.get(boxId);
    if (record === undefined) continue;
    try {
      if ((await reconcileRecord(ctx, record)) === "confirmed") hidden.add(boxId);
    } catch (error) {
      if (isLifecycleError(error) && error.code === "recovery_paused") throw error;
      fenceProblems.set(boxId, messageOf(error));
    }
  }
  const j = await readJournals(ctx);
  const describe = describer(ctx, j, attributor(ctx, [...j.botIds, ...(await knownBotIds())]));
  const items: InventoryItem[] = [];
  for (const boxId of pageIds) {
    if (hidden.has(boxId)) continue;
    const fenced = j.fences.has(boxId);
    if (!fenced && !j.rememberedBy.has(boxId)) continue; // retired meanwhile
    let sandbox: ListedSandbox | null = null;
    let unreadable: string | undefined;
    try {
      sandbox = await ctx.client.getSandbox(boxId);
    } catch (error) {
      const failure = classifyProviderError(error);
      if (failure.kind === "absent" && !fenced) {
        await finishDeletion(ctx, boxId);
        continue;
      }
      if (failure.kind !== "absent") unreadable = failure.message;
    }
    const fenceProblem = fenceProblems.get(boxId);
    const item = describe(sandbox, boxId, fenceProblem === undefined ? {} : { fenceProblem });
    if (item === null) continue;
    items.push(
      unreadable !== undefined && !fenced
        ? {
            ...item,
            available: false,
            problem: `could not read this remembered cloud computer (${unreadable}) — retry in a moment`,
          }
        : item,
    );
  }
  const last = pageIds.at(-1);
  return {
    items,
    next:
      ids.length > limit && last !== undefined ? { v: 1, journal: last } : { v: 1, at: null, after: null },
  };
}

/**
 * A page of boat.dev's list, from where the previous page stopped, reading at most INVENTORY_LIST_PAGES of
 * its pages: the Boats with this installation's names that no journal knows (the journal pages showed
 * those), each read directly before it is shown (the list lags: a Boat deleted a moment ago may still be
 * listed; only boat.dev's own 404/410 leaves it out).
 */
async function listPage(
  ctx: Context,
  knownBotIds: () => readonly string[] | Promise<readonly string[]>,
  limit: number,
  position: { at: string | null; after: string | null },
  signal: AbortSignal | undefined,
): Promise<{ items: InventoryItem[]; next: Position | null }> {
  const j = await readJournals(ctx);
  const nameOwner = attributor(ctx, [...j.botIds, ...(await knownBotIds())]);
  const describe = describer(ctx, j, nameOwner);
  const walk = walkSandboxes(ctx.client, position.at === null ? {} : { cursor: position.at });
  const items: InventoryItem[] = [];
  let skipUntil = position.after;
  for (let read = 0; read < INVENTORY_LIST_PAGES && !walk.complete; read += 1) {
    const at = walk.cursor ?? null;
    let page: ListedSandbox[];
    try {
      page = await walk.next(signal);
    } catch (error) {
      throw listFailed(error, walk.progress(), position.at !== null);
    }
    // Resuming inside a page: skip what the previous page looked at (all of it if that Boat is gone).
    let start = 0;
    if (skipUntil !== null) {
      const index = page.findIndex((boat) => boat.id === skipUntil);
      start = index + 1;
      skipUntil = null;
    }
    for (let i = start; i < page.length; i += 1) {
      const listed = page[i] as ListedSandbox;
      if (
        !j.rememberedBy.has(listed.id) &&
        !j.fences.has(listed.id) &&
        describe(listed, listed.id) !== null
      ) {
        // No journal vouches for this listed Boat: a direct read decides; only 404/410 hides it.
        let current: ListedSandbox = listed;
        try {
          current = await ctx.client.getSandbox(listed.id);
        } catch (error) {
          if (classifyProviderError(error).kind === "absent") continue;
        }
        ctx.nameSweep.observe(listed.id, current.name);
        const item = describe(current, listed.id);
        if (item !== null) items.push(item);
      }
      if (items.length === limit && i < page.length - 1)
        return { items, next: { v: 1, at, after: listed.id } };
    }
    if (items.length === limit) break;
  }
  return { items, next: walk.complete ? null : { v: 1, at: walk.cursor ?? null, after: null } };
}

function listFailed(error: unknown, progress: string, resumed: boolean): LifecycleError {
  if (isRefusedCursor(error) && resumed) {
    return new LifecycleError({
      code: "invalid_cursor",
      message:
        "boat.dev no longer accepts the position in its list this cursor holds; nothing was changed. Restart from the first page (omit the cursor).",
      cause: error,
    });
  }
  const loop = isBoatApiError(error) && error.code === "pagination_loop";
  const failure = loop ? null : classifyProviderError(error);
  // 503 whatever boat.dev answered: nothing was changed, and the same page can be asked again.
  if (failure?.kind === "transport" && failure.aborted) {
    return new LifecycleError({ code: "cancelled", message: "The request was cancelled.", cause: error });
  }
  const cause = (failure?.message ?? messageOf(error)).replace(/[.\s]+$/, "");
  return new LifecycleError({
    code: "provider_unavailable",
    status: 503,
    message: `The list of cloud computers is unavailable: ${cause} (boat.dev's list: ${progress} by this page). Nothing was changed; retrying the same page (the same cursor) continues from where it stopped — retry in a moment`,
    ...(failure?.kind === "api" && failure.retryAfterMs !== undefined
      ? { retryAfterMs: failure.retryAfterMs }
      : {}),
    cause: error,
  });
}

/**
 * Every page, for `inventory()`: the installation's Boats as one sanitized list, sorted by id. Two Boats
 * that claim one bot are marked on both, wherever they were listed.
 */
export async function buildInventory(
  ctx: Context,
  knownBotIds: () => readonly string[] | Promise<readonly string[]>,
): Promise<InventoryItem[]> {
  const all: InventoryItem[] = [];
  let cursor: string | undefined;
  for (;;) {
    const page = await buildInventoryPage(ctx, knownBotIds, {
      limit: INVENTORY_PAGE_MAX,
      ...(cursor === undefined ? {} : { cursor }),
    });
    all.push(...page.computers);
    if (page.nextCursor === null) break;
    cursor = page.nextCursor;
  }
  const byId = new Map(all.map((item) => [item.boxId, item]));
  return markConflicts([...byId.values()]).sort((a, b) =>
    a.boxId < b.boxId ? -1 : a.boxId > b.boxId ? 1 : 0,
  );
}
