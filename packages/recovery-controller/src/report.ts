import { readdirSync, readFileSync, statSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { WORKSPACES_DIR } from "@drydock/facts";
import { isLockError } from "@drydock/file-lock";
import {
  isSagaError,
  openSagaStore,
  type PendingDiagnostic,
  type PendingList,
  type SagaStore,
} from "@drydock/restore-saga";
import { z } from "zod";
import { sagaStateDir } from "./defaults.js";
import { createRestoreRecoveryController, type RestoreRecoveryController } from "./restore.js";
import {
  type BoatPlan,
  type PlanItem,
  type RestoreActionName,
  RestoreActionNameSchema,
  type RestorePreview,
} from "./schema.js";

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
  const dir = join(dataDir, WORKSPACES_DIR);
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

type PendingDiagnosticStatus = PendingDiagnostic["status"];

/** Every status of restore-saga's pending listing (`PendingDiagnostic["status"]`), checked both ways below. */
const PENDING_DIAGNOSTIC_STATUSES = [
  "terminal_unarchived",
  "orphan_unpublished",
  "busy",
  "head_unsettled",
  "corrupt",
] as const satisfies readonly PendingDiagnosticStatus[];

/**
 * `RestoreReportItem` as a schema, for a caller that documents or checks the report (the bot server's
 * `GET /v1/recovery` in its OpenAPI document). The compile-time checks below keep the two equal: a field
 * added, removed or retyped in one and not the other fails the type check.
 */
export const RestoreReportItemSchema = z.object({
  botId: z.string(),
  operationId: z.string(),
  phase: z.string(),
  basePhase: z.string().nullable(),
  seq: z.int().min(0),
  updatedAt: z.string().nullable(),
  ownerAlive: z.boolean().nullable(),
  next: RestoreActionNameSchema.nullable(),
  command: z.string().nullable(),
  problem: z.string().nullable(),
  diagnostic: z.enum(PENDING_DIAGNOSTIC_STATUSES).nullable(),
  attention: z.boolean(),
  inProgress: z.boolean(),
  retainedByLiveOwner: z.object({ pid: z.int() }).nullable(),
  stalledForMs: z.number().nullable(),
});
// Compile-time only: the schema's output and RestoreReportItem are the same type, and the enum names every
// pending-listing status.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const _itemMatchesSchema: Same<z.infer<typeof RestoreReportItemSchema>, RestoreReportItem> = true;
const _everyStatusListed: Same<(typeof PENDING_DIAGNOSTIC_STATUSES)[number], PendingDiagnosticStatus> = true;

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
  readOnly = false,
): RestoreReportItem {
  const busy = code === "LOCK_FAILED";
  if (readOnly) {
    return {
      ...orphanItem(botId, operationId, null, stateDir),
      problem:
        "its create stopped before publishing its first event, so no restore ran under it (nothing was locked or changed); this read-only listing leaves its directory as it is: the bot server's recovery report (GET /v1/recovery, and its start) removes it",
      attention: false,
      inProgress: false,
    };
  }
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

/** One saga as the listing named it: its bot, its id, its pending item (if listed), the listing's diagnostic. */
interface ListedSaga {
  botId: string;
  operationId: string;
  item: PendingList["items"][number] | undefined;
  diagnostic: PendingDiagnostic["status"] | null;
}

/**
 * One listed saga previewed by the restore recovery controller: its fenced command for the one eligible
 * action, whether its owner runs (work in progress), kept the lock after failing, or stalled; settled or in
 * progress when the preview says so (`settlingReason`); a problem for a person otherwise.
 */
async function previewedItem(
  listed: ListedSaga,
  controller: RestoreRecoveryController,
  commandPrefix: string,
  now: () => number,
): Promise<RestoreReportItem> {
  const { botId, operationId, item, diagnostic } = listed;
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
      ownerAlive === true && retainedByLiveOwner === null && quietMs > RESTORE_STALLED_MS ? quietMs : null;
    if (preview.saga.archived && preview.owner === null && preview.tornLock === null && next === null) {
      // Archived since the listing, its lock let go: settled, nothing left for anyone.
      return {
        ...settlingItem(botId, operationId, item, diagnostic),
        phase: preview.saga.phase,
        basePhase: preview.saga.basePhase,
        seq: preview.saga.seq,
        problem: "it ended and was archived while this report was made: settled, nothing to do",
      };
    }
    const attention = ownerAlive !== true || retainedByLiveOwner !== null || stalledForMs !== null;
    return {
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
    };
  } catch (error) {
    const settling = settlingReason(error);
    if (settling !== null)
      return { ...settlingItem(botId, operationId, item, diagnostic), problem: settling };
    // Not work in progress: a person must look (the same facts, the error as the problem).
    return {
      ...settlingItem(botId, operationId, item, diagnostic),
      problem: messageOf(error),
      attention: true,
      inProgress: false,
    };
  }
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
  /**
   * Change no file (read-only commands: `drydock restores list`, `status`): the saga stores are opened
   * `readOnly`, so a dead process's lock files stay and an unpublished saga directory is reported, not
   * removed. Without it (the bot server's report) those are tidied as they are found.
   */
  readOnly?: boolean;
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
      const store = openSagaStore({
        stateDir: sagaStateDir(dataDir),
        workspaceRoot: root,
        ...(options.readOnly ? { readOnly: true } : {}),
      });
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
    const controller = createRestoreRecoveryController({
      dataDir,
      workspaceRoot: root,
      commandPrefix,
      ...(options.readOnly ? { readOnly: true } : {}),
    });
    const listed = new Map(pending.items.map((item) => [item.operationId, item]));
    const diagnostics = new Map(pending.diagnostics.map((d) => [d.operationId, d]));
    for (const operationId of [...new Set([...listed.keys(), ...diagnostics.keys()])].sort()) {
      const item = listed.get(operationId);
      const found = diagnostics.get(operationId);
      if (item === undefined && found?.status === "orphan_unpublished") {
        restores.push(orphanItem(botId, operationId, found.code, sagaStateDir(dataDir), options.readOnly));
        continue;
      }
      const listing = { botId, operationId, item, diagnostic: found?.status ?? null };
      restores.push(await previewedItem(listing, controller, commandPrefix, now));
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
      recorded !== null && basename(dirname(recorded)) === WORKSPACES_DIR ? basename(recorded) : "(unknown)";
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

// --- The one "needs a person" report -------------------------------------------------------------------

/**
 * One thing the report lists, with the facts it came from (`kind`) and the report's one rule about it: whether
 * a person must act, whether it is work in progress that asks to look again, and the command that acts on it.
 * A caller renders it (the CLI as a line of `drydock status`, the server as JSON); it never decides these.
 */
export type NeedsPersonItem = NeedsPersonSource & NeedsPersonTallied;

/** The facts an item of the report comes from. */
export type NeedsPersonSource =
  /** A restore that needs (or may need) a person, from `reportRestores`. */
  | { kind: "restore"; restore: RestoreReportItem }
  /** A workspace whose restores could not be listed (or only in part): the report is incomplete there. */
  | { kind: "restores_unlisted"; gap: RestoreReportGap }
  /**
   * The bot registry could not be read (the Boat plan's `registryError`): whether the bots of recorded Boats
   * still exist was not checked, and nothing is offered for adoption.
   */
  | { kind: "registry_unreadable"; error: string }
  /** The Boat plan could not be made at all (the journals, the environment id): `error` is what it threw. */
  | { kind: "plan_failed"; error: unknown }
  /** A Boat plan item. */
  | { kind: "boat"; item: PlanItem };

/** How an item (the report's, or one a caller adds) counts towards the verdict. */
export interface NeedsPersonTallied {
  /** true: a person must act; false: informational, or work in progress. */
  attention: boolean;
  /**
   * Work in progress that settles by itself and asks to look again: after `waitMs` when it says, else shortly
   * (a restore whose process still runs, a saga another process is writing just now). Never with `attention`.
   */
  lookAgain: boolean;
  /** How long (ms) before looking again offers its command; 0 when it asks for no wait. */
  waitMs: number;
  /** The command that acts on it, or null (then a person reads the message and settles it by hand). */
  command: string | null;
}

/** What the report could not look at: while any is listed, the answer is incomplete (never "OK"). */
export type NeedsPersonUnchecked =
  /** No boat.dev was given: a Boat no journal knows (still billed) shows only in its list. */
  | { kind: "provider_unconfigured" }
  /** boat.dev could not be listed: Boats no journal knows were not looked for. */
  | { kind: "provider_unlisted"; error: string | null }
  /** A Boat the journals know whose own read failed: what is said of it is unverified. */
  | { kind: "boat_unread"; boxId: string; botId: string | null; reason: string };

/** The counts and the one-word verdict of a report (or of a report and the items a caller adds). */
export interface NeedsPersonTally {
  /** Items that need a person. */
  attention: number;
  /** Of those, the ones with no command to run. */
  commandless: number;
  /** Items of work in progress that ask to look again. */
  lookAgain: number;
  /** The longest wait any of them asks for, in ms (0: none asks for one). */
  waitMs: number;
  /** `incomplete` while anything could not be looked at; else `attention` while one needs a person; else `ok`. */
  verdict: "ok" | "attention" | "incomplete";
}

/** Everything that needs a person in a data directory, as both `drydock status` and `GET /v1/recovery` show it. */
export interface NeedsPersonReport {
  /** In order: restores, unlisted workspaces, the registry or plan failure, then the Boat plan's items. */
  items: NeedsPersonItem[];
  /** What could not be looked at, in order: boat.dev unconfigured or unlisted, then each unread Boat. */
  unchecked: NeedsPersonUnchecked[];
  /** Whether boat.dev was listed and every Boat the journals know was read. */
  providerChecked: boolean;
  tally: NeedsPersonTally;
}

/** The counts and verdict of `entries` (a report's items, and any a caller adds) and what was not looked at. */
export function tallyNeedsPerson(
  entries: readonly NeedsPersonTallied[],
  unchecked: readonly NeedsPersonUnchecked[],
): NeedsPersonTally {
  const attention = entries.filter((entry) => entry.attention).length;
  const waiting = entries.filter((entry) => entry.lookAgain);
  return {
    attention,
    commandless: entries.filter((entry) => entry.attention && entry.command === null).length,
    lookAgain: waiting.length,
    waitMs: Math.max(0, ...waiting.map((entry) => entry.waitMs)),
    verdict: unchecked.length > 0 ? "incomplete" : attention > 0 ? "attention" : "ok",
  };
}

/**
 * The command a restore item is acted on with: its fenced action's command; `restores show` for one that
 * needs a person without one (stopped with nothing eligible, failed in a live process that keeps its lock,
 * stalled); none for work in progress or for one that could not be read (its `problem` says what to do).
 */
function restoreItemCommand(restore: RestoreReportItem, commandPrefix: string): string | null {
  if (restore.problem !== null || !restore.attention) return null;
  const show = `${commandPrefix} restores show ${restore.operationId}`;
  if (restore.retainedByLiveOwner !== null || restore.stalledForMs !== null) return show;
  return restore.command ?? show;
}

function restoreItems(
  restores: readonly RestoreReportItem[],
  gaps: readonly RestoreReportGap[],
  commandPrefix: string,
): NeedsPersonItem[] {
  return [
    ...restores.map(
      (restore): NeedsPersonItem => ({
        kind: "restore",
        restore,
        attention: restore.attention,
        lookAgain: restore.inProgress,
        waitMs: 0,
        command: restoreItemCommand(restore, commandPrefix),
      }),
    ),
    // A workspace whose restores could not be listed (or only in part) needs a person, naming the bot.
    ...gaps.map(
      (gap): NeedsPersonItem => ({
        kind: "restores_unlisted",
        gap,
        attention: true,
        lookAgain: false,
        waitMs: 0,
        command: null,
      }),
    ),
  ];
}

/** The Boat plan's part of the report: its items by the plan's one rule, and what it could not look at. */
function planPart(plan: BoatPlan): { items: NeedsPersonItem[]; unchecked: NeedsPersonUnchecked[] } {
  const items: NeedsPersonItem[] = [];
  if (plan.registryError !== undefined) {
    // Whether recorded Boats' bots still exist was not checked: a billed Boat of a deleted bot hides here.
    items.push({
      kind: "registry_unreadable",
      error: plan.registryError,
      attention: true,
      lookAgain: false,
      waitMs: 0,
      command: null,
    });
  }
  for (const item of plan.items) {
    const waitMs = planItemWaitMs(item);
    items.push({
      kind: "boat",
      item,
      attention: planItemNeedsAttention(item),
      lookAgain: waitMs > 0,
      waitMs,
      command: item.action.command,
    });
  }
  // A Boat the journals know whose own read failed is unverified, like a list that failed: never OK.
  const unchecked: NeedsPersonUnchecked[] = [
    ...(plan.providerListed ? [] : [{ kind: "provider_unlisted" as const, error: plan.providerError }]),
    ...plan.unreadBoats.map((boat) => ({ kind: "boat_unread" as const, ...boat })),
  ];
  return { items, unchecked };
}

/** The Boat plan as the report receives it: made, failed (what it threw), or not asked (no boat.dev given). */
export type NeedsPersonPlan = { made: BoatPlan } | { failed: unknown } | null;

/**
 * The report from what was read, a pure function of plain values: the restores and the workspaces that
 * could not be listed (`reportRestores`'s answer), then the Boat plan's items (or why there is no plan),
 * each with the report's rule (needs a person, work in progress, the command), what could not be looked
 * at, and the tally with its verdict.
 */
export function needsPersonReport(input: {
  restores: readonly RestoreReportItem[];
  gaps: readonly RestoreReportGap[];
  plan: NeedsPersonPlan;
  /** Start of every printed command, e.g. `drydockCommandPrefix(dataDir)`. */
  commandPrefix: string;
}): NeedsPersonReport {
  const items = restoreItems(input.restores, input.gaps, input.commandPrefix);
  const unchecked: NeedsPersonUnchecked[] = [];
  let providerChecked = false;
  if (input.plan === null) {
    unchecked.push({ kind: "provider_unconfigured" });
  } else if ("failed" in input.plan) {
    items.push({
      kind: "plan_failed",
      error: input.plan.failed,
      attention: true,
      lookAgain: false,
      waitMs: 0,
      command: null,
    });
  } else {
    const part = planPart(input.plan.made);
    items.push(...part.items);
    unchecked.push(...part.unchecked);
    providerChecked = part.unchecked.length === 0;
  }
  return { items, unchecked, providerChecked, tally: tallyNeedsPerson(items, unchecked) };
}

/**
 * What needs a person in a data directory, built the one way both `drydock status` and `GET /v1/recovery`
 * render it: every restore (`reportRestores`), then the Boat plan, put together by `needsPersonReport`.
 * Never throws for what it reads: a failure is an item or an unchecked fact (a plan that throws is a
 * `plan_failed` item carrying the error). The restores are read before the plan.
 */
export async function reportNeedsPerson(options: {
  dataDir: string;
  /** Start of every printed command, e.g. `drydockCommandPrefix(dataDir)`. */
  commandPrefix: string;
  /** The Boat recovery plan against boat.dev, or null when no boat.dev was given (then `provider_unconfigured`). */
  plan: (() => Promise<BoatPlan>) | null;
  /** As `reportRestores`'s. */
  now?: () => number;
  /** The restores to report; default `reportRestores` of this data directory (a seam for a caller's own). */
  restores?: () => Promise<{ restores: RestoreReportItem[]; gaps: RestoreReportGap[] }>;
}): Promise<NeedsPersonReport> {
  const { dataDir, commandPrefix } = options;
  const found = await (
    options.restores ??
    (() =>
      reportRestores({ dataDir, commandPrefix, ...(options.now === undefined ? {} : { now: options.now }) }))
  )();
  let plan: NeedsPersonPlan = null;
  if (options.plan !== null) {
    try {
      plan = { made: await options.plan() };
    } catch (error) {
      plan = { failed: error };
    }
  }
  return needsPersonReport({ restores: found.restores, gaps: found.gaps, plan, commandPrefix });
}
