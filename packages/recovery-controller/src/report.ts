import { readdirSync, readFileSync, statSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { isLockError } from "@drydock/file-lock";
import {
  isSagaError,
  openSagaStore,
  type PendingDiagnostic,
  type PendingList,
  type SagaStore,
} from "@drydock/restore-saga";
import { sagaStateDir } from "./defaults.js";
import { createRestoreRecoveryController } from "./restore.js";
import type { PlanItem, RestoreActionName, RestorePreview } from "./schema.js";

/**
 * What needs a person, gathered the one way both the operator CLI (`drydock status`, `restores list`) and
 * the bot server (`GET /v1/recovery`) report it, so the two can never disagree on what is open or on the
 * command to paste.
 */

export { drydockCommandPrefix, shellQuote } from "./internal/command.js";

/** The exact command that applies `action` against the fence `preview` showed. */
export function restoreCommand(prefix: string, action: RestoreActionName, preview: RestorePreview): string {
  const { fence } = preview;
  return [
    prefix,
    "restores",
    action,
    preview.saga.operationId,
    "--expected-seq",
    String(fence.expectedSeq),
    "--expected-hash",
    fence.expectedHash,
    "--expected-owner-digest",
    fence.expectedOwnerDigest ?? "none",
    "--yes",
  ].join(" ");
}

/**
 * Whether a Boat plan item needs a person. A deletion boat.dev accepted and is still working on, a deletion
 * prepared moments ago whose DELETE may still be on the wire, and a create started moments ago whose
 * provisioning call may still be running (`inFlightLeftMs`: no command, the item says how long to wait) are
 * work in progress; everything else the plan lists is not. A create inside boat.dev's 24-hour window that
 * nothing is retrying any more needs a person (retry provisioning): the server does not retry by itself.
 */
export function planItemNeedsAttention(item: PlanItem): boolean {
  const inProgress =
    (item.kind === "deletion_fence" &&
      item.facts.fencePhase === "accepted" &&
      item.facts.fenceStatus !== "completed") ||
    planItemWaitMs(item) > 0;
  return !inProgress;
}

/**
 * How long a plan item asks to wait before its action can be offered, in ms; 0 when it does not. Today: a
 * deletion fence prepared inside boat-lifecycle's in-flight window, whose Boat exists (no command: a retry
 * now would be blind; reconciling again after the wait offers it).
 */
export function planItemWaitMs(item: PlanItem): number {
  const left =
    item.kind === "deletion_fence" || item.kind === "create_in_window"
      ? item.facts.inFlightLeftMs
      : undefined;
  return item.action.command === null && typeof left === "number" && left > 0 ? left : 0;
}

/** `<dataDir>/workspaces/<botId>` directories that exist, sorted by bot id (a deleted bot's too). */
export function listWorkspaces(dataDir: string): { botId: string; root: string }[] {
  const dir = join(dataDir, "workspaces");
  let names: string[];
  try {
    names = readdirSync(dir).sort();
  } catch {
    return [];
  }
  const out: { botId: string; root: string }[] = [];
  for (const botId of names) {
    // `.retired/` holds deleted bots' retired workspaces (the bot server's), never a bot's own.
    if (botId.startsWith(".")) continue;
    const root = join(dir, botId);
    try {
      if (statSync(root).isDirectory()) out.push({ botId, root });
    } catch {
      // Vanished since the listing.
    }
  }
  return out;
}

/** Every pending saga of one workspace, page by page (bounded: 64 pages of 64, then `truncated`). */
export async function allPending(store: SagaStore): Promise<PendingList> {
  const merged: PendingList = { items: [], diagnostics: [], nextCursor: null, truncated: false };
  let after: string | undefined;
  for (let page = 0; page < 64; page += 1) {
    const list = await store.listPending({ ...(after === undefined ? {} : { after }), limit: 64 });
    merged.items.push(...list.items);
    merged.diagnostics.push(...list.diagnostics);
    if (list.nextCursor === null) return merged;
    after = list.nextCursor;
  }
  merged.truncated = true;
  return merged;
}

/** One restore that needs (or may need) a person, as `drydock restores list` shows it. Redacted. */
export interface RestoreReportItem {
  botId: string;
  operationId: string;
  phase: string;
  basePhase: string | null;
  seq: number;
  updatedAt: string | null;
  /** Liveness of the workspace lock's owner; null when no owner holds it (or it could not be read). */
  ownerAlive: boolean | null;
  /**
   * The fenced action to take (the preview's `recommended`: the first eligible of abort, release, complete,
   * rollback), or null (running, or it needs inspection).
   */
  next: RestoreActionName | null;
  /** The exact command that applies `next` against the previewed fence, or null. */
  command: string | null;
  /** Why the saga could not be previewed (corrupt, busy), or null. */
  problem: string | null;
  /** What the store's pending listing said of it when it is not a plain pending saga, or null. */
  diagnostic: PendingDiagnostic["status"] | null;
  /**
   * false only for work in progress (`inProgress`). True for a restore whose live owner gave up on it
   * (`retainedByLiveOwner`), and for every saga that could not be read for a reason that does not settle by
   * itself (corrupt, an unreadable lock file: `problem` says what to do).
   */
  attention: boolean;
  /**
   * Work in progress that settles by itself, so a report should be looked at again rather than called
   * settled: a restore whose owner is still running; a saga another live process holds just now (`busy`: a
   * server still creating it, or writing its next event); one that settled, or turned out never published,
   * between the listing and its preview; an unpublished saga directory the next report removes. Never true
   * together with `attention`.
   */
  inProgress: boolean;
  /**
   * The restore failed in a process that is still running (a bot server) and keeps the workspace lock for
   * recovery (phase `recovery_required`): that process will not settle it, and a recovery may take its lock
   * over only once it is gone. Stop or restart it, then settle the restore. Its pid, else null.
   */
  retainedByLiveOwner: { pid: number } | null;
  /**
   * A restore whose owner runs but whose saga has not moved for `RESTORE_STALLED_MS` (30 minutes): its
   * process may be stuck (or have failed without being able to journal it). How long, in ms; else null.
   * It needs a person to look (`attention`), though nothing is certain: a very large restore may be slow.
   */
  stalledForMs: number | null;
}

/** How long a restore whose owner runs may go without a new saga event before the report asks a person. */
export const RESTORE_STALLED_MS = 30 * 60_000;

/** A workspace whose sagas could not be listed: the report is incomplete there. */
export interface RestoreReportGap {
  botId: string;
  /** What went wrong, for a person. */
  message: string;
  /** The failure itself (never sent to a client as is); absent when the listing was only cut short. */
  error?: unknown;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * A saga directory whose create died before publishing its first event: it records no work (no restore ran
 * under it, no lock was taken for it, no file changed), and the store's listing removes it itself. It is
 * listed only when that removal could not be made just now: another process held the saga shard (settles
 * itself on the next report, nothing for a person), or the removal failed (the disk needs a look). It has no
 * fenced action (there is nothing to fence: no event); the next report retries the removal.
 */
function orphanItem(
  botId: string,
  operationId: string,
  code: string | null,
  stateDir: string,
): RestoreReportItem {
  const busy = code === "LOCK_FAILED";
  return {
    botId,
    operationId,
    phase: "unpublished",
    basePhase: null,
    seq: 0,
    updatedAt: null,
    ownerAlive: null,
    next: null,
    command: null,
    problem: `its create stopped before publishing its first event, so no restore ran under it (nothing was locked or changed); removing its directory ${
      busy
        ? "waits for another drydock process that holds the saga store just now: the next report removes it"
        : `failed just now (${code ?? "unknown error"}): the next report retries; if this persists, check the disk and permissions of ${stateDir}`
    }`,
    diagnostic: "orphan_unpublished",
    attention: !busy,
    inProgress: busy,
    retainedByLiveOwner: null,
    stalledForMs: null,
  };
}

/**
 * Why a listed saga's preview failed, when that failure is work in progress rather than a problem: null for
 * a problem (corrupt, an unreadable or invalid lock file, a failed read), which keeps its own message and
 * needs a person.
 *  - NOT_FOUND: between the listing and the preview the saga was archived and purged, or it is a directory
 *    whose create has not published its first event (no restore ran under it, nothing was locked or
 *    changed; the next listing removes it once its creator is gone). It used to fall through to the archive
 *    and read "No archived restore saga … exists", marked as needing a person.
 *  - LOCK_FAILED because a live process held the saga's lock for the whole wait, or other calls of this
 *    process did (both carry file-lock's LOCK_TIMEOUT as the cause): a server creating the saga or writing
 *    its next event. The listing calls it `busy`. A lock file that is unreadable or invalid, a process-level
 *    errno (EMFILE, …), any other lock failure is a problem, not this: it keeps its message.
 */
function settlingReason(error: unknown): string | null {
  if (!isSagaError(error)) return null;
  if (error.code === "NOT_FOUND") {
    return "it changed while this report was made: it settled since the listing, or its create has not published its first event yet (no restore ran under it, nothing was locked or changed). Nothing to do: look again";
  }
  if (error.code === "LOCK_FAILED") {
    const cause = (error as { cause?: unknown }).cause;
    if (isLockError(cause) && cause.code === "LOCK_TIMEOUT") {
      return "another drydock process is writing this restore's saga just now (a restore being created or moving on), so it could not be read: in progress. Look again";
    }
  }
  return null;
}

/**
 * A listed saga whose preview showed work in progress (see `settlingReason`); `problem` says which. Also the
 * base of an item whose preview failed otherwise (the caller sets its problem and attention).
 */
function settlingItem(
  botId: string,
  operationId: string,
  item: PendingList["items"][number] | undefined,
  diagnostic: PendingDiagnostic["status"] | null,
): RestoreReportItem {
  return {
    botId,
    operationId,
    phase: item?.phase ?? "unknown",
    basePhase: item?.basePhase ?? null,
    seq: item?.seq ?? 0,
    updatedAt: item?.updatedAt ?? null,
    ownerAlive: null,
    next: null,
    command: null,
    problem: null,
    diagnostic,
    attention: false,
    inProgress: true,
    retainedByLiveOwner: null,
    stalledForMs: null,
  };
}

/**
 * Every restore of a data directory that a person may have to settle: each workspace's pending sagas (all
 * pages) and the store's diagnostics (a finished saga not archived yet still holds its lock; a corrupt or
 * busy one needs a look), each previewed by the restore recovery controller with the fenced command for its
 * one eligible action. A workspace that cannot be listed becomes a gap; the others are still reported.
 */
export async function reportRestores(options: {
  dataDir: string;
  /** Start of every printed command, e.g. `drydockCommandPrefix(dataDir)`. */
  commandPrefix: string;
  /** The clock a saga's last event is aged with (`stalledForMs`); default `Date.now`. */
  now?: () => number;
  /**
   * Test seam: called once a workspace's sagas are listed, before any of them is previewed (to settle or
   * release a saga in between, as another process may).
   */
  afterListing?: (botId: string) => void | Promise<void>;
}): Promise<{ restores: RestoreReportItem[]; gaps: RestoreReportGap[] }> {
  const { dataDir, commandPrefix } = options;
  const now = options.now ?? Date.now;
  const restores: RestoreReportItem[] = [];
  const gaps: RestoreReportGap[] = [];
  // The shard of every workspace at its path now; null once one could not be opened (its gap says so).
  let shards: Set<string> | null = new Set();
  for (const { botId, root } of listWorkspaces(dataDir)) {
    let pending: PendingList;
    try {
      const store = openSagaStore({ stateDir: sagaStateDir(dataDir), workspaceRoot: root });
      shards?.add(basename(store.shardDir));
      pending = await allPending(store);
    } catch (error) {
      shards = null;
      gaps.push({
        botId,
        message: `the restores of bot ${botId} could not be listed: ${messageOf(error)}`,
        error,
      });
      continue;
    }
    if (pending.truncated) {
      gaps.push({
        botId,
        message: `bot ${botId} has more pending restores than one report lists (${pending.items.length + pending.diagnostics.length} shown)`,
      });
    }
    await options.afterListing?.(botId);
    const controller = createRestoreRecoveryController({ dataDir, workspaceRoot: root, commandPrefix });
    const listed = new Map(pending.items.map((item) => [item.operationId, item]));
    const diagnostics = new Map(pending.diagnostics.map((d) => [d.operationId, d]));
    for (const operationId of [...new Set([...listed.keys(), ...diagnostics.keys()])].sort()) {
      const item = listed.get(operationId);
      const found = diagnostics.get(operationId);
      const diagnostic = found?.status ?? null;
      if (item === undefined && found?.status === "orphan_unpublished") {
        restores.push(orphanItem(botId, operationId, found.code, sagaStateDir(dataDir)));
        continue;
      }
      try {
        const preview = await controller.preview(operationId);
        const next = preview.recommended;
        const ownerAlive = preview.owner?.alive ?? null;
        // A live owner that wrote recovery_required retained the lock and stopped: no progress will come.
        const retainedByLiveOwner =
          ownerAlive === true && preview.owner && preview.saga.phase === "recovery_required"
            ? { pid: preview.owner.pid }
            : null;
        const lastAt = Date.parse(preview.saga.events.at(-1)?.timestamp ?? "");
        const quietMs = Number.isFinite(lastAt) ? now() - lastAt : 0;
        const stalledForMs =
          ownerAlive === true && retainedByLiveOwner === null && quietMs > RESTORE_STALLED_MS
            ? quietMs
            : null;
        if (preview.saga.archived && preview.owner === null && preview.tornLock === null && next === null) {
          // Archived since the listing, its lock let go: settled, nothing left for anyone.
          restores.push({
            ...settlingItem(botId, operationId, item, diagnostic),
            phase: preview.saga.phase,
            basePhase: preview.saga.basePhase,
            seq: preview.saga.seq,
            problem: "it ended and was archived while this report was made: settled, nothing to do",
          });
          continue;
        }
        const attention = ownerAlive !== true || retainedByLiveOwner !== null || stalledForMs !== null;
        restores.push({
          botId,
          operationId,
          phase: preview.saga.phase,
          basePhase: preview.saga.basePhase,
          seq: preview.saga.seq,
          updatedAt: item?.updatedAt ?? preview.saga.events.at(-1)?.timestamp ?? null,
          ownerAlive,
          next,
          command: next === null ? null : restoreCommand(commandPrefix, next, preview),
          problem: null,
          diagnostic,
          attention,
          inProgress: !attention,
          retainedByLiveOwner,
          stalledForMs,
        });
      } catch (error) {
        const settling = settlingReason(error);
        if (settling !== null) {
          restores.push({ ...settlingItem(botId, operationId, item, diagnostic), problem: settling });
          continue;
        }
        // Not work in progress: a person must look (the same facts, the error as the problem).
        restores.push({
          ...settlingItem(botId, operationId, item, diagnostic),
          problem: messageOf(error),
          attention: true,
          inProgress: false,
        });
      }
    }
  }
  if (shards !== null) gaps.push(...strayShardGaps(dataDir, shards));
  return { restores, gaps };
}

/**
 * Saga shards of `restore-sagas/` that belong to no workspace of this data directory at its path now, yet
 * hold sagas that have not been archived. A shard is named after its workspace's real path, so a data
 * directory moved or copied elsewhere (a backup restored to a new path) leaves every shard behind its old
 * path: a restore stopped half-way would then show nowhere, and its workspace read as settled. Each such
 * shard is a gap naming the sagas and the path they were recorded for (read from the first event, which no
 * report here can verify or settle); only what a person can do helps: settle them where they were.
 */
function strayShardGaps(dataDir: string, known: ReadonlySet<string>): RestoreReportGap[] {
  const stateDir = sagaStateDir(dataDir);
  let names: string[];
  try {
    names = readdirSync(stateDir).sort();
  } catch {
    return [];
  }
  const gaps: RestoreReportGap[] = [];
  for (const name of names) {
    if (!/^workspace-[0-9a-f]{32}$/.test(name) || known.has(name)) continue;
    let sagas: string[];
    try {
      sagas = readdirSync(join(stateDir, name))
        .filter((entry) => !entry.startsWith("."))
        .sort();
    } catch (error) {
      gaps.push({
        botId: "(unknown)",
        message: `the restore saga shard ${join(stateDir, name)} belongs to no workspace here and could not be listed (${messageOf(error)})`,
        error,
      });
      continue;
    }
    if (sagas.length === 0) continue;
    const recorded = recordedWorkspace(join(stateDir, name), sagas);
    const botId =
      recorded !== null && basename(dirname(recorded)) === "workspaces" ? basename(recorded) : "(unknown)";
    gaps.push({
      botId,
      message: `restore saga(s) ${sagas.join(", ")} in ${join(stateDir, name)} were recorded for the workspace at ${recorded ?? "(unreadable)"}, which is not where this data directory's workspaces are now: was the data directory moved or copied? They may record a half-restored workspace, and nothing here can verify or settle them. Put the data directory back where it was and settle them there (drydock status), then move it again`,
    });
  }
  return gaps;
}

/**
 * The gaps `reportRestores` reports for saga shards of no current workspace (a data directory moved or
 * copied with a restore unsettled), each naming the bot whose workspace the sagas were recorded for (or
 * "(unknown)"), for a caller that must refuse that bot's workspace meanwhile (the bot server, at its start:
 * a data directory is moved only while nothing runs on it). Null when a workspace's shard could not be
 * determined (its workspace cannot be resolved): then which shards are stray is unknown.
 */
export function strayRestoreShards(dataDir: string): RestoreReportGap[] | null {
  const known = new Set<string>();
  for (const { root } of listWorkspaces(dataDir)) {
    try {
      known.add(basename(openSagaStore({ stateDir: sagaStateDir(dataDir), workspaceRoot: root }).shardDir));
    } catch {
      return null;
    }
  }
  return strayShardGaps(dataDir, known);
}

/** The workspace path the first event of one of `sagas` names, or null when none can be read. */
function recordedWorkspace(shard: string, sagas: readonly string[]): string | null {
  for (const saga of sagas) {
    try {
      const first = readdirSync(join(shard, saga)).find((file) => /^000001-created\.json$/.test(file));
      if (first === undefined) continue;
      const event = JSON.parse(readFileSync(join(shard, saga, first), "utf8")) as {
        evidence?: { workspaceRoot?: unknown };
      };
      const root = event.evidence?.workspaceRoot;
      if (typeof root === "string") return root;
    } catch {
      // Unreadable: the next saga may tell.
    }
  }
  return null;
}
