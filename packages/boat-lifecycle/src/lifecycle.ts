import { KEY_RETENTION_MS, keyTrustDeadline } from "@drydock/boat-create-journal";
import type { BoatDeletionRecord } from "@drydock/boat-delete-journal";
import { type CrashHook, noCrash } from "./crash.js";
import { LIFECYCLE_MESSAGES, LifecycleError } from "./errors.js";
import {
  type Context,
  classifyProviderError,
  journal,
  type LifecycleClient,
  type LifecycleCreateJournal,
  type LifecycleDeleteJournal,
  type LifecycleLogger,
  messageOf,
  providerError,
  realSleep,
  type Sleep,
} from "./internal/context.js";
import { finishDeletion, reconcileRecord, requestDeletion, sameFence } from "./internal/deletion.js";
import {
  buildInventory,
  buildInventoryPage,
  type InventoryPage,
  type InventoryPageOptions,
} from "./internal/inventory.js";
import {
  createNameSweep,
  type NameSweepOptions,
  type NameSweepStatus,
  resolveNameSweepOptions,
} from "./internal/name-sweep.js";
import {
  assertNotFenced,
  createAndName,
  finishPriorDeletion,
  locate,
  type ProvisionResult,
} from "./internal/provision.js";
import { legacyBoatName, scopedBoatName } from "./names.js";
import {
  BOAT_ID,
  BOT_ID,
  type Boat,
  boatNameSchema,
  type DeletionOutcome,
  type InventoryItem,
  type RecoveryReport,
} from "./schema.js";

/** boat.dev keeps an Idempotency-Key for 24 hours; past that a retry could bill a second Boat. */
export const CREATE_KEY_RETENTION_MS = KEY_RETENTION_MS;

export interface BoatLifecycleOptions {
  client: LifecycleClient;
  createJournal: LifecycleCreateJournal;
  deleteJournal: LifecycleDeleteJournal;
  /** This installation's id (`<dataDir>/environment-id`); scopes every Boat name. */
  environmentId: string;
  now?: () => number;
  /** Every wait (create backoff, deletion polls) goes through it, so tests can make them instant. */
  sleep?: Sleep;
  logger?: LifecycleLogger;
  /**
   * Called each time a create is sent again with the same idempotency key (after a lost answer, a 5xx, a
   * 429 or an in-progress answer), e.g. to count retries in a metric. An observer only: what it throws is
   * ignored, and it cannot change the decision.
   */
  onCreateRetry?: (info: { botId: string; outcome: string }) => void;
  /** Test-only crash hook (see `LIFECYCLE_CRASH_POINTS`); production passes nothing. */
  crash?: CrashHook;
  /**
   * Bot ids this installation knows (its registry). Only used by the inventory to attribute legacy
   * (pre-scope) names that no journal remembers; the journals' bots are always known. Asked once per page.
   */
  knownBotIds?: () => readonly string[] | Promise<readonly string[]>;
  /**
   * The name sweep: the one walk of boat.dev's list behind the deterministic-name lookup (see the
   * README, "The name sweep"). `recoverAtStartup()` starts it in the background; a lookup that finds it
   * incomplete reads up to `inlinePages` pages itself, then answers `name_sweep_incomplete`.
   */
  nameSweep?: NameSweepOptions;
  /**
   * Called right before each provider call that bills or deletes (every create POST, retries included, and
   * every DELETE), with what it is about to send. What it throws propagates unchanged and that call is not
   * sent (a journaled create key stays for the next provision to replay; a deletion fence stays prepared).
   * A server whose instance lease has lapsed refuses here (bot-server's `lease_lost`).
   */
  beforeSideEffect?: (effect: SideEffect) => void;
  /**
   * Provisions of one bot may run at once in several processes this lifecycle cannot serialize (several
   * bot-server hosts on one PostgreSQL store): a create key this call minted may meanwhile have been resumed
   * by another process that is about to send it. Then a key is never discarded, not after boat.dev's
   * definitive refusal nor when the caller withdraws: a discarded key resumed elsewhere would create a Boat
   * no journal holds, for a bot that may be deleted by then. The key is kept (the next provision resumes
   * it, at most one Boat) and a bot deletion waits until it is settled. Default false: one process serializes
   * a bot's provisions (the bot server's per-bot exclusivity), so a key minted by this call is its alone.
   */
  keysSharedAcrossProcesses?: boolean;
}

/** A provider call that bills or deletes, as `beforeSideEffect` is told of it. */
export type SideEffect = { kind: "create"; botId: string } | { kind: "delete"; boxId: string };

export interface DeleteBoatInput {
  boxId: string;
  /** Must equal the Boat's current name, read fresh from boat.dev: the person saw what they delete. */
  confirmName: string;
  /** The bot that owns the Boat; null only to retry an existing ownerless fence. */
  ownerBotId: string | null;
  /**
   * The fence (prepared or blocked) the caller read and means to retry, exactly: a fenced operator action
   * applied against the state its preview showed. With it the retry is a compare-and-set on that fence:
   * unless this very call re-sends DELETE under exactly it, nothing is sent or written and deleteBoat
   * throws `confirmation_mismatch` — the fence changed or is gone since it was read (another caller
   * retried, reconciled or settled it), or another retry of the same fence won its re-stamp. Without it,
   * such a call reports the deletion as it stands (pending or done), as before.
   */
  expectedFence?: BoatDeletionRecord;
}

export interface ProvisionOptions {
  signal?: AbortSignal;
  /**
   * Asked once the create's key is journaled and before the create is sent to boat.dev (each time one is
   * about to be sent): whether the Boat is still wanted. No: nothing is sent, a key this call minted is
   * discarded, and provision fails with `provision_withdrawn`. A caller that removes what owns the Boat
   * (a bot registry, say) marks the owner first and then reads the create journal; this check, made after
   * the key is journaled, then sees the mark, or the removal sees the key: never neither.
   */
  stillWanted?: () => boolean | Promise<boolean>;
  /**
   * Whether a prepared or blocked deletion fence of the bot's previous Boat is sent again before creating
   * (default true: provisioning after a crash finishes the deletion). False: nothing is sent, and provision
   * fails `computer_deleting` while such a fence stands; a caller that lets only a person re-send a
   * deletion (the bot server, which asks for the Boat's name) decides it in the same call that reads it.
   */
  resendDeletions?: boolean;
}

export interface BoatLifecycle {
  boatNameFor(botId: string): string;
  /** The pre-scope name a Boat of this bot may still carry (recognised and adopted, never created). */
  legacyBoatNameFor(botId: string): string;
  provision(botId: string, options?: ProvisionOptions): Promise<ProvisionResult>;
  findBoat(botId: string): Promise<Boat | null>;
  deleteBoat(input: DeleteBoatInput): Promise<{ ok: true; pending?: true }>;
  reconcileDeletion(boxId: string): Promise<DeletionOutcome>;
  /**
   * One page of the installation's Boats (sanitized), its cost bounded whatever the account's size: first
   * the Boats the journals know, by id, each read directly; then boat.dev's list, from where the previous
   * page stopped and at most `INVENTORY_LIST_PAGES` of its pages per call, for the Boats with this
   * installation's names that no journal knows. A page may hold fewer than `limit` Boats (even none) while
   * `nextCursor` is not null. A Boat that exists throughout the listing, and whose journal facts do not
   * change meanwhile, is on exactly one page. A failed list page is `provider_unavailable` (nothing changed;
   * the same cursor retries it); a cursor that is not one of these is `invalid_cursor` (start again).
   */
  inventoryPage(options?: InventoryPageOptions): Promise<InventoryPage>;
  /** Every page of `inventoryPage`, as one list sorted by id: O(this installation's Boats) reads. */
  inventory(): Promise<InventoryItem[]>;
  /** Startup reconciliation; it also starts the background name sweep (unless `nameSweep.background` is false). */
  recoverAtStartup(): Promise<RecoveryReport>;
  /** Where the name sweep stands: complete or not, pages and Boats read, Boats kept under our names. */
  nameSweepStatus(): NameSweepStatus;
  /** Stops the background name sweep (its cursor and index stay; a later lookup continues inline). */
  close(): void;
}

function invalid(message: string): LifecycleError {
  return new LifecycleError({ code: "invalid_argument", message });
}

function assertBotId(botId: unknown): asserts botId is string {
  if (typeof botId !== "string" || !BOT_ID.test(botId)) {
    throw invalid("invalid bot id: use 1–120 letters, digits, '_' or '-'");
  }
}

function assertBoxId(boxId: unknown): asserts boxId is string {
  if (typeof boxId !== "string" || !BOAT_ID.test(boxId)) {
    throw invalid("invalid cloud computer id: expected bx_ followed by 8 characters");
  }
}

export function createBoatLifecycle(options: BoatLifecycleOptions): BoatLifecycle {
  const { environmentId } = options;
  if (typeof environmentId !== "string" || environmentId.length === 0 || environmentId.length > 200) {
    throw invalid("environmentId must be a non-empty string (the installation's environment id)");
  }
  const scopedNames = new Map<string, string>();
  const sweepOptions = resolveNameSweepOptions(options.nameSweep);
  const logger = options.logger ?? {};
  const sleep = options.sleep ?? realSleep;
  const nameSweep = createNameSweep({ client: options.client, environmentId, logger, sleep }, sweepOptions);
  const ctx: Context = {
    client: options.client,
    createJournal: options.createJournal,
    deleteJournal: options.deleteJournal,
    environmentId,
    now: options.now ?? Date.now,
    sleep,
    logger,
    onCreateRetry: options.onCreateRetry ?? (() => {}),
    crash: options.crash ?? noCrash,
    beforeSideEffect: options.beforeSideEffect ?? (() => {}),
    keysShared: options.keysSharedAcrossProcesses === true,
    scopedName: (botId) => {
      // Two SHA-256 per name; a listing asks for every bot's name on every request, so names are kept
      // (a pure function of the bot id; bounded, and simply recomputed after a reset).
      let name = scopedNames.get(botId);
      if (name === undefined) {
        if (scopedNames.size >= 4096) scopedNames.clear();
        name = scopedBoatName(environmentId, botId);
        scopedNames.set(botId, name);
      }
      return name;
    },
    legacyName: legacyBoatName,
    nameSweep,
  };

  // One lifecycle call per bot at a time in this process. Across processes the journals serialise the
  // durable steps and boat.dev's idempotency key makes concurrent creates converge on one Boat; this
  // mutex only gives the server its immediate 409 instead of two interleaved flows for one bot.
  const busy = new Set<string>();
  async function exclusive<T>(key: string, fn: () => Promise<T>): Promise<T> {
    if (busy.has(key)) throw new LifecycleError({ code: "bot_busy", message: LIFECYCLE_MESSAGES.botBusy });
    busy.add(key);
    try {
      return await fn();
    } finally {
      busy.delete(key);
    }
  }

  async function provision(botId: string, opts: ProvisionOptions = {}): Promise<ProvisionResult> {
    assertBotId(botId);
    return exclusive(`bot:${botId}`, async () => {
      await finishPriorDeletion(ctx, botId, opts.resendDeletions ?? true);
      const found = await locate(ctx, botId, opts.signal);
      if (found?.resolved && found.boat.name !== null) {
        return { boxId: found.boat.boxId, name: found.boat.name, createdThisAttempt: false };
      }
      // Re-check the fence right before the key is journaled: a Delete may have started meanwhile.
      await assertNotFenced(ctx, botId);
      return createAndName(ctx, botId, opts.signal, opts.stillWanted);
    });
  }

  async function findBoat(botId: string): Promise<Boat | null> {
    assertBotId(botId);
    await assertNotFenced(ctx, botId);
    const found = await locate(ctx, botId);
    return found === null ? null : found.boat;
  }

  async function deleteBoat(input: DeleteBoatInput): Promise<{ ok: true; pending?: true }> {
    const { boxId, confirmName, ownerBotId } = input ?? ({} as DeleteBoatInput);
    assertBoxId(boxId);
    if (!boatNameSchema.safeParse(confirmName).success) {
      throw invalid("confirmName must be the cloud computer's name (1–100 characters, no line breaks)");
    }
    if (ownerBotId !== null) assertBotId(ownerBotId);
    const expected = input.expectedFence;
    if (
      expected !== undefined &&
      (typeof expected !== "object" || expected === null || expected.boxId !== boxId)
    ) {
      throw invalid("expectedFence must be the deletion fence of this cloud computer, as read");
    }
    /** The retry of exactly `expected` cannot happen: the fence moved (or another retry won). */
    const fenceChanged = () =>
      new LifecycleError({
        code: "confirmation_mismatch",
        boxId,
        message: LIFECYCLE_MESSAGES.fenceChanged(boxId),
      });
    return exclusive(ownerBotId === null ? `box:${boxId}` : `bot:${ownerBotId}`, async () => {
      const existing = await journal(() => ctx.deleteJournal.getBoatDeletion(boxId));
      if (expected !== undefined && (existing === null || !sameFence(existing, expected)))
        throw fenceChanged();
      // The fence this Delete deliberately retries (prepared or blocked), if one stood when it was read.
      let retryOf: BoatDeletionRecord | undefined;
      if (existing !== null) {
        if (existing.ownerBotId !== ownerBotId) {
          throw new LifecycleError({
            code: "confirmation_mismatch",
            boxId,
            message: LIFECYCLE_MESSAGES.confirmationMismatch,
          });
        }
        const outcome = await reconcileRecord(ctx, existing);
        if (outcome === "confirmed") return { ok: true };
        const current = await journal(() => ctx.deleteJournal.getBoatDeletion(boxId));
        // Reconciling it moved it (or someone else did): not the fence the caller means to retry.
        if (expected !== undefined && (current === null || !sameFence(current, expected)))
          throw fenceChanged();
        // An accepted operation is still running at boat.dev: a second DELETE would be blind.
        if (current?.phase === "accepted") return { ok: true, pending: true };
        retryOf = current ?? undefined;
      }

      const remembered =
        ownerBotId !== null &&
        (await journal(() => ctx.createJournal.boatCreateRowsOf(ownerBotId))).some(
          (row) => row.boxId === boxId,
        );
      const notOurs = () =>
        new LifecycleError({
          code: "not_found",
          boxId,
          message:
            "That cloud computer does not belong to this bot in this drydock installation, so nothing was deleted — refresh and try again",
        });

      // Fresh revalidation against boat.dev: the person confirms the name the Boat carries now.
      let fresh: { id: string; name: string | null };
      try {
        fresh = await ctx.client.getSandbox(boxId);
      } catch (error) {
        const failure = classifyProviderError(error);
        if (failure.kind === "absent") {
          // Proven gone: the delete is idempotent. A retry after a crash that finished the deletion
          // (records already retired) must answer ok, so an absent id is ok even when nothing here knows it.
          await finishDeletion(ctx, boxId);
          return { ok: true };
        }
        throw providerError("Could not read the cloud computer before deleting it", failure, boxId);
      }
      const ownName =
        ownerBotId !== null &&
        fresh.name !== null &&
        (fresh.name === ctx.scopedName(ownerBotId) || fresh.name === ctx.legacyName(ownerBotId));
      if (!remembered && !ownName && existing === null) throw notOurs();
      const currentName =
        fresh.name ?? existing?.name ?? (ownerBotId === null ? null : ctx.scopedName(ownerBotId));
      if (currentName === null || confirmName !== currentName) {
        throw new LifecycleError({
          code: "confirmation_mismatch",
          boxId,
          message: LIFECYCLE_MESSAGES.confirmationMismatch,
        });
      }
      const outcome = await requestDeletion(
        ctx,
        { boxId, name: currentName, ownerBotId },
        retryOf,
        expected === undefined ? undefined : fenceChanged,
      );
      if (outcome === "confirmed") return { ok: true };
      if (outcome === "pending") return { ok: true, pending: true };
      throw new LifecycleError({
        code: "deletion_blocked",
        boxId,
        message: LIFECYCLE_MESSAGES.deletionBlocked(boxId),
      });
    });
  }

  async function reconcileDeletion(boxId: string): Promise<DeletionOutcome> {
    assertBoxId(boxId);
    const record = await journal(() => ctx.deleteJournal.getBoatDeletion(boxId));
    if (record === null) {
      throw new LifecycleError({
        code: "not_found",
        boxId,
        message: `No deletion of ${boxId} is being reconciled`,
      });
    }
    return reconcileRecord(ctx, record);
  }

  const knownBotIds = options.knownBotIds ?? (() => []);
  const inventoryPage = (pageOptions?: InventoryPageOptions) =>
    buildInventoryPage(ctx, knownBotIds, pageOptions);
  const inventory = () => buildInventory(ctx, knownBotIds);

  /**
   * Startup reconciliation. It polls every deletion fence once (retiring the ones proven finished) and
   * reports unresolved creates with their age against boat.dev's 24-hour key window. It never creates,
   * never renames and never sends DELETE: those need a caller's intent (provision, Delete).
   */
  async function recoverAtStartup(): Promise<RecoveryReport> {
    const report: RecoveryReport = { deletions: [], unresolvedCreates: [], journalErrors: [] };
    try {
      const records = await journal(() => ctx.deleteJournal.boatDeletionSnapshot());
      for (const record of records) {
        try {
          const outcome = await reconcileRecord(ctx, record);
          report.deletions.push({
            boxId: record.boxId,
            ownerBotId: record.ownerBotId,
            phaseBefore: record.phase,
            outcome,
          });
        } catch (error) {
          report.deletions.push({
            boxId: record.boxId,
            ownerBotId: record.ownerBotId,
            phaseBefore: record.phase,
            outcome: "error",
            error: messageOf(error),
          });
        }
      }
    } catch (error) {
      report.journalErrors.push(messageOf(error));
    }
    try {
      const now = ctx.now();
      for (const row of await journal(() => ctx.createJournal.boatCreateRecoverySnapshot())) {
        if (row.resolved) continue;
        const retryWindowLeftMs = Math.max(0, keyTrustDeadline(row.createdAt) - now);
        report.unresolvedCreates.push({
          botId: row.botId,
          ...(row.boxId === undefined ? {} : { boxId: row.boxId }),
          ageMs: Math.max(0, now - row.createdAt),
          retryWindowLeftMs,
          // Only a key-only row depends on its key: a row with a Boat id is finished by a direct read.
          expired: row.boxId === undefined && retryWindowLeftMs === 0,
        });
      }
    } catch (error) {
      report.journalErrors.push(messageOf(error));
    }
    // The name sweep starts here, not at creation: the server calls this once when it starts, while the
    // CLI's one-shot commands (and callers that never provision) send no list request they do not need.
    // Not while a journal is unreadable: provisioning refuses anyway, and a paused installation sends
    // nothing to boat.dev (a lookup after the repair reads the list inline).
    if (sweepOptions.background && report.journalErrors.length === 0) nameSweep.startBackground();
    ctx.logger.info?.("boat recovery at startup", {
      deletions: report.deletions.length,
      unresolvedCreates: report.unresolvedCreates.length,
    });
    return report;
  }

  return {
    boatNameFor: (botId) => {
      // A name already computed was computed for a valid id: skip the check (listings ask once per bot).
      const known = scopedNames.get(botId);
      if (known !== undefined) return known;
      assertBotId(botId);
      return ctx.scopedName(botId);
    },
    legacyBoatNameFor: (botId) => {
      assertBotId(botId);
      return ctx.legacyName(botId);
    },
    provision,
    findBoat,
    deleteBoat,
    reconcileDeletion,
    inventoryPage,
    inventory,
    recoverAtStartup,
    nameSweepStatus: () => nameSweep.status(),
    close: () => nameSweep.stop(),
  };
}
