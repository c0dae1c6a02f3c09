import { realpathSync } from "node:fs";
import type { BoatCreateJournal } from "@drydock/boat-create-journal";
import type { BoatDeleteJournal } from "@drydock/boat-delete-journal";
import type { BoatLifecycle, RecoveryReport } from "@drydock/boat-lifecycle";
import type { BoatClient } from "@drydock/boat-provider";
import type { CrashHook } from "@drydock/restore-saga";
import { workspacesOf } from "@drydock/storage";
import { staticTokens, type TokenSource } from "./auth.js";
import type { BotRegistry } from "./bots.js";
import type { RecoverySource, ServerDeps } from "./deps.js";
import { type ComputerView, computerView, type Journals, journalReader } from "./domain/computer-view.js";
import { BotExclusivity } from "./domain/exclusive.js";
import { ListingMemo } from "./domain/listing-memo.js";
import { localWorkspaces, type WorkspaceBackend } from "./domain/workspace-backend.js";
import { storeWorkspaces } from "./domain/workspace-store.js";
import { openWorkspaceContext, type WorkspaceContext } from "./domain/workspaces.js";
import type { Metrics } from "./metrics.js";
import { drydockCommandPrefix } from "./recovery.js";

/** The open-items gauge of /metrics: when it was last counted and the recount under way, if any. */
export interface RecoveryGauge {
  /** When the open-items gauge was last computed (performance.now()), or null before the first time. */
  countedAt: number | null;
  /** The recount a scrape started and has not finished, shared by the scrapes that come meanwhile. */
  recount: Promise<void> | null;
}

/**
 * Everything the route plugins and the domain modules share, built once by `buildServer`: the server's
 * dependencies, where workspaces are, and the little state one process keeps (which bots are busy, the
 * last journal index and listing, the recovery gauge). Each route plugin is registered with it as its
 * options (`app.register(plugin, ctx)`); each domain function takes the part of it that it needs.
 */
export type ServerContext = WorkspaceContext & {
  readonly token: string;
  /** Every accepted token and its role. */
  readonly auth: TokenSource;
  /** Unset: GET /metrics is open. */
  readonly metricsToken: string | undefined;
  readonly maxFileBytes: number;
  readonly bots: BotRegistry;
  readonly lifecycle: BoatLifecycle;
  readonly createJournal: BoatCreateJournal;
  readonly deleteJournal: BoatDeleteJournal;
  /** See ServerDeps.storage. */
  readonly storage: ServerDeps["storage"];
  /** Where bots' workspaces live: local files, or the storage's WorkspaceStore (postgres). */
  readonly workspace: WorkspaceBackend;
  readonly client: BoatClient;
  readonly metrics: Metrics;
  readonly recovery: RecoverySource;
  readonly startupReport: () => RecoveryReport | null;
  readonly restoreCrash: CrashHook | undefined;
  /** The Boat journals' clock (ServerDeps.now), read at each call. */
  now(): number;
  /** The `drydock` command naming this data directory, as `drydock status` prints it. */
  commandPrefix(): string;
  readonly exclusivity: BotExclusivity;
  /** Both journals, indexed by bot (see `journalReader`). */
  readJournals(): Promise<Journals>;
  /** The bot's computer as the journals and this process's busy bots show it. */
  computerView(botId: string, journals: Journals, now?: number): ComputerView;
  readonly listing: ListingMemo;
  /**
   * The storage's change token (Storage.changeToken) now, or undefined when it offers none or could not
   * tell (the caller then reads the rows, which report the fault as a read does).
   */
  changeToken(): string | undefined;
  readonly recoveryGauge: RecoveryGauge;
};

/** Replaces the data directory (as configured and as resolved) in a message with `<dataDir>`. */
export function pathScrubber(dataDir: string): (message: string) => string {
  return (message) => {
    let out = message;
    const roots = [dataDir];
    try {
      roots.push(realpathSync(dataDir));
    } catch {
      // Unresolvable: the configured spelling is all there is to elide.
    }
    for (const root of roots.sort((a, b) => b.length - a.length)) {
      if (root.length > 1) out = out.replaceAll(root, "<dataDir>");
    }
    return out;
  };
}

export function createServerContext(deps: ServerDeps): ServerContext {
  const workspaces = openWorkspaceContext(deps.dataDir, pathScrubber(deps.dataDir));
  // Read at each call (a test that fakes Date sees its time when no clock was given).
  const now = (): number => (deps.now ? deps.now() : Date.now());
  const commandPrefix = () => drydockCommandPrefix(deps.dataDir);
  const exclusivity = new BotExclusivity();
  deps.metrics.journals.sources = {
    createRows: async () => (await deps.createJournal.peekBoatCreates()).length,
    deleteRows: async () => (await deps.deleteJournal.peekBoatDeletions()).length,
    bots: async () => (await deps.bots.list({ peek: true })).length,
  };
  const ctx: ServerContext = {
    ...workspaces,
    token: deps.token,
    auth: deps.tokens ?? staticTokens([{ name: "default", role: "admin", token: deps.token }]),
    metricsToken: deps.metricsToken,
    maxFileBytes: deps.maxFileBytes,
    bots: deps.bots,
    lifecycle: deps.lifecycle,
    createJournal: deps.createJournal,
    deleteJournal: deps.deleteJournal,
    storage: deps.storage,
    client: deps.client,
    metrics: deps.metrics,
    recovery: deps.recovery,
    startupReport: deps.startupReport,
    restoreCrash: deps.restoreCrash,
    now,
    commandPrefix,
    exclusivity,
    readJournals: journalReader(deps.createJournal, deps.deleteJournal),
    computerView: (botId, journals, at = now()) =>
      computerView(botId, journals, {
        now: at,
        busy: exclusivity.has(botId),
        boatName: () => deps.lifecycle.boatNameFor(botId),
        commandPrefix,
      }),
    listing: new ListingMemo(),
    changeToken: () => {
      try {
        return deps.storage?.changeToken?.();
      } catch {
        return undefined;
      }
    },
    recoveryGauge: { countedAt: null, recount: null },
    // Replaced below: the local backend needs the whole context it is part of.
    workspace: undefined as unknown as WorkspaceBackend,
  };
  // Chosen once, by the storage's kind (workspacesOf): the store's workspaces on postgres; local files under
  // the restore saga on file and sqlite, whose store-held workspaces the server does not use (STORAGE.md).
  const store = deps.storage === undefined ? null : workspacesOf(deps.storage);
  (ctx as { workspace: WorkspaceBackend }).workspace =
    store === null ? localWorkspaces(ctx) : storeWorkspaces(store, { bots: deps.bots });
  return ctx;
}
