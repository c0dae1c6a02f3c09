import { isBoatApiError, isRefusedCursor, walkSandboxes } from "@drydock/boat-provider";
import { isLifecycleError, LIFECYCLE_MESSAGES, LifecycleError } from "../errors.js";
import { classifyName } from "../names.js";
import { cancelledError, classifyProviderError, type SweepContext } from "./context.js";

/**
 * The name sweep: one complete walk of boat.dev's list, started after this lifecycle was created, that
 * keeps only the names that are ours (scoped to this environment, or legacy-shaped) with their Boat ids.
 *
 * Why one walk is enough: every Boat this installation creates goes through the create journal (key
 * durable before the POST, id recorded, rename after), so a Boat carrying one of our names that the
 * journal does not know predates this lifecycle (a lost or retired row, a restored backup, a pre-scope
 * Boat). A complete walk that started afterwards has seen every such Boat; from then on our names only
 * appear through our own journal, which `locate()` reads first. See docs/decisions (the name sweep).
 *
 * The cursor is kept after each page, so a failed page is read again from where it stopped, never from
 * the start. Memory is O(our Boats) (plus one cursor per page read, to refuse a list that loops).
 */

export interface NameSweepOptions {
  /**
   * Pages a lookup (provision, findBoat) reads itself when the sweep is not complete yet, before it
   * answers `name_sweep_incomplete` (default 10; 0: only the background sweep reads the list, or one
   * page per lookup while the background sweep is not running).
   */
  inlinePages?: number;
  /** Boats per list page (1–200, default 200: boat.dev's largest page). */
  pageSize?: number;
  /** Whether `recoverAtStartup()` starts the background sweep (default true). */
  background?: boolean;
  /** Background pace: the wait between two pages (default 50 ms). */
  pageIntervalMs?: number;
  /** Background: the first wait after a failed page, doubled per failure up to `retryMaxMs` (default 1 s). */
  retryBaseMs?: number;
  /** Background: the longest wait after failed pages (default 60 s); boat.dev's longer Retry-After wins. */
  retryMaxMs?: number;
}

export interface NameSweepStatus {
  /** True once the walk reached the list's last page: lookups are then O(1) and list nothing. */
  complete: boolean;
  /** Pages read so far (a failed page is not counted, and is read again). */
  pagesRead: number;
  /** Boats seen on those pages (foreign ones included; only ours are kept). */
  boatsSeen: number;
  /** Boat ids kept under one of our names. */
  indexed: number;
  /** Whether the background sweep is running. */
  running: boolean;
}

export interface ResolvedNameSweepOptions {
  inlinePages: number;
  pageSize: number;
  background: boolean;
  pageIntervalMs: number;
  retryBaseMs: number;
  retryMaxMs: number;
}

function count(name: string, value: unknown, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > max) {
    throw new LifecycleError({
      code: "invalid_argument",
      message: `nameSweep.${name} must be an integer from ${min} to ${max}`,
    });
  }
  return value;
}

export function resolveNameSweepOptions(options: NameSweepOptions = {}): ResolvedNameSweepOptions {
  if (options.background !== undefined && typeof options.background !== "boolean") {
    throw new LifecycleError({ code: "invalid_argument", message: "nameSweep.background must be a boolean" });
  }
  return {
    inlinePages: count("inlinePages", options.inlinePages, 10, 0, 100_000),
    pageSize: count("pageSize", options.pageSize, 200, 1, 200),
    background: options.background ?? true,
    pageIntervalMs: count("pageIntervalMs", options.pageIntervalMs, 50, 0, 3_600_000),
    retryBaseMs: count("retryBaseMs", options.retryBaseMs, 1_000, 0, 3_600_000),
    retryMaxMs: count("retryMaxMs", options.retryMaxMs, 60_000, 0, 3_600_000),
  };
}

export interface NameSweep {
  status(): NameSweepStatus;
  /**
   * Makes sure the sweep is complete, reading at most `inlinePages` more pages itself. Throws
   * `name_sweep_incomplete` (the list is longer) or `provider_unavailable` (a page failed); either way
   * the cursor is kept and nothing else changed.
   */
  ensureComplete(signal?: AbortSignal): Promise<void>;
  /** The Boat ids listed under any of these names (only meaningful once complete). */
  idsFor(names: readonly string[]): string[];
  /**
   * A direct read (or this lifecycle's own rename) showed the Boat carrying `name`, or gone (`null`): the
   * index follows it. Boats the journal knows are kept too, so a row lost while the process runs (a
   * restored backup, a row retired by hand) still leaves the Boat findable by name.
   */
  observe(boxId: string, name: string | null): void;
  /** Starts the background walk (idempotent; nothing once complete). */
  startBackground(): void;
  /** Stops the background walk (a page in flight finishes or fails; the cursor stays). */
  stop(): void;
}

export function createNameSweep(ctx: SweepContext, options: ResolvedNameSweepOptions): NameSweep {
  const byName = new Map<string, Set<string>>();
  const nameOf = new Map<string, string>();
  // The walking and cursor keeping are boat-provider's walkSandboxes (shared with the inventory and the
  // recovery plan); the sweep keeps only our names of each page.
  const list = walkSandboxes(ctx.client, { pageSize: options.pageSize });
  // One page at a time: the background walk and a lookup share the cursor.
  let queue: Promise<unknown> = Promise.resolve();
  let background: AbortController | null = null;

  function keep(boxId: string, name: string | null): void {
    const previous = nameOf.get(boxId);
    if (previous !== undefined && previous !== name) {
      const ids = byName.get(previous);
      ids?.delete(boxId);
      if (ids?.size === 0) byName.delete(previous);
      nameOf.delete(boxId);
    }
    if (name === null || classifyName(ctx.environmentId, name) === "foreign") return;
    let ids = byName.get(name);
    if (ids === undefined) {
      ids = new Set();
      byName.set(name, ids);
    }
    ids.add(boxId);
    nameOf.set(boxId, name);
  }

  const progress = () => list.progress();

  function pageFailed(error: unknown, next = "a retry continues from where it stopped"): LifecycleError {
    const failure = classifyProviderError(error);
    if (failure.kind === "transport" && failure.aborted) return cancelledError(error);
    return new LifecycleError({
      code: "provider_unavailable",
      status: 503,
      message: `${LIFECYCLE_MESSAGES.listUnavailable} (${failure.message.replace(/[.\s]+$/, "")}). drydock reads that list once to make sure no computer already carries this bot's name: ${progress()}; ${next}`,
      ...(failure.kind === "api" && failure.retryAfterMs !== undefined
        ? { retryAfterMs: failure.retryAfterMs }
        : {}),
      cause: error,
    });
  }

  async function readPage(signal?: AbortSignal): Promise<void> {
    if (list.complete) return;
    const restartable = list.cursor !== undefined;
    let sandboxes: Awaited<ReturnType<typeof list.next>>;
    try {
      sandboxes = await list.next(signal);
    } catch (error) {
      if (isBoatApiError(error) && error.code === "pagination_loop") {
        throw new LifecycleError({
          code: "provider_unavailable",
          status: 502,
          message: `${LIFECYCLE_MESSAGES.listUnavailable} (boat.dev handed back a list cursor it had already given, so its list cannot be read to the end). drydock reads that list once to make sure no computer already carries this bot's name: ${progress()}; a retry reads that page again`,
        });
      }
      if (!restartable || !isRefusedCursor(error)) throw pageFailed(error);
      // boat.dev no longer accepts the saved position (the API does not say a cursor can expire, but
      // nothing else could move the walk forward): the walk starts again from the first page. The index
      // is kept: its entries are hints that a direct read confirms anyway.
      ctx.logger.warn?.("boat name sweep cursor refused; the list is read again from its start", {});
      throw pageFailed(
        error,
        "boat.dev refused the saved position in its list, so a retry reads it again from the start",
      );
    }
    // The walk counted the page only once it was whole: the index follows it.
    for (const sandbox of sandboxes) keep(sandbox.id, sandbox.name);
    if (list.complete) {
      ctx.logger.info?.("boat name sweep complete", {
        pages: list.pagesRead,
        boats: list.boatsSeen,
        ours: nameOf.size,
      });
    }
  }

  function step(signal?: AbortSignal): Promise<void> {
    const run = queue.then(() => readPage(signal));
    queue = run.catch(() => {});
    return run;
  }

  async function ensureComplete(signal?: AbortSignal): Promise<void> {
    // With no inline budget, the background walk reads; if it is not running (never started, stopped),
    // a lookup reads one page itself, so that every retry still moves the sweep forward.
    const budget = options.inlinePages > 0 || background !== null ? options.inlinePages : 1;
    for (let read = 0; !list.complete && read < budget; read += 1) await step(signal);
    // A page the background walk was reading when the budget ran out may have finished the sweep.
    if (!list.complete) await queue;
    if (list.complete) return;
    throw new LifecycleError({
      code: "name_sweep_incomplete",
      retryAfterMs: 1_000,
      message: LIFECYCLE_MESSAGES.nameSweepIncomplete(progress()),
    });
  }

  async function walkInBackground(signal: AbortSignal): Promise<void> {
    let failures = 0;
    while (!list.complete && !signal.aborted) {
      let wait = options.pageIntervalMs;
      try {
        await step(signal);
        failures = 0;
      } catch (error) {
        if (signal.aborted) return;
        failures += 1;
        const retryAfterMs = isLifecycleError(error) ? (error.retryAfterMs ?? 0) : 0;
        wait = Math.max(
          retryAfterMs,
          Math.min(options.retryMaxMs, options.retryBaseMs * 2 ** Math.min(failures - 1, 30)),
        );
        ctx.logger.warn?.("boat name sweep page failed; it will be read again", {
          pages: list.pagesRead,
          failures,
          waitMs: wait,
        });
      }
      if (list.complete) return;
      try {
        await ctx.sleep(wait, signal);
      } catch {
        return; // stopped
      }
    }
  }

  return {
    status: () => ({
      complete: list.complete,
      pagesRead: list.pagesRead,
      boatsSeen: list.boatsSeen,
      indexed: nameOf.size,
      running: background !== null,
    }),
    ensureComplete,
    idsFor: (names) => [...new Set(names.flatMap((name) => [...(byName.get(name) ?? [])]))].sort(),
    observe: keep,
    startBackground() {
      if (list.complete || background !== null) return;
      const controller = new AbortController();
      background = controller;
      void walkInBackground(controller.signal).finally(() => {
        if (background === controller) background = null;
      });
    },
    stop() {
      background?.abort();
      background = null;
    },
  };
}
