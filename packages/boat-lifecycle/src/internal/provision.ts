import {
  type BoatCreateRequest,
  isBoatCreateJournalError,
  keyTrustDeadline,
} from "@drydock/boat-create-journal";
import type { Sandbox } from "@drydock/boat-provider";
import { isLifecycleError, LIFECYCLE_MESSAGES, LifecycleError, retryIn } from "../errors.js";
import { type Boat, CREATE_REQUEST_BODY } from "../schema.js";
import {
  type Context,
  cancelledError,
  classifyProviderError,
  fromJournalError,
  journal,
  messageOf,
  type ProviderFailure,
  providerError,
  throwIfAborted,
} from "./context.js";
import { deletionInFlightLeftMs, finishDeletion, reconcileRecord, requestDeletion } from "./deletion.js";
import {
  type CreateOutcome,
  freshBudget,
  isDefinitiveRefusal,
  MAX_RETRY_AFTER_MS,
  nextCreateRetry,
} from "./retry.js";

/** The exact bytes journaled with the key; boat.dev binds the key to the body, so they never change. */
export const CREATE_BODY_TEXT = JSON.stringify(CREATE_REQUEST_BODY);

export interface ProvisionResult {
  boxId: string;
  name: string;
  /** True only when this very call minted the key that created the Boat (it may clean it up). */
  createdThisAttempt: boolean;
}

function fenced(retryAfterMs?: number): LifecycleError {
  return new LifecycleError({
    code: "computer_deleting",
    message: LIFECYCLE_MESSAGES.computerDeleting,
    ...(retryAfterMs === undefined || retryAfterMs <= 0 ? {} : { retryAfterMs }),
  });
}

export async function assertNotFenced(ctx: Context, botId: string): Promise<void> {
  if (await journal(() => ctx.deleteJournal.hasPendingBoatDeletionForBot(botId))) throw fenced();
}

function priorDeletionFailed(boxId: string, error: LifecycleError): LifecycleError {
  return new LifecycleError({
    code: error.code,
    status: error.status,
    boxId,
    message: `${LIFECYCLE_MESSAGES.priorDeletionFailed(boxId)}: ${error.message}`,
    cause: error,
  });
}

/**
 * A bot whose previous Boat is fenced for deletion may not provision: each fence is reconciled (one poll),
 * a prepared or blocked one is sent again (not blind: no accepted operation is journaled for it), and the
 * call fails either way. If every deletion is now proven finished, the caller is told so and must retry
 * deliberately: one click never deletes and silently recreates.
 */
export async function finishPriorDeletion(ctx: Context, botId: string, resend = true): Promise<void> {
  const records = (await journal(() => ctx.deleteJournal.boatDeletionSnapshot())).filter(
    (record) => record.ownerBotId === botId,
  );
  if (records.length === 0) return;
  let allConfirmed = true;
  // The longest wait before a fence still in another caller's DELETE window may be retried.
  let inFlightMs = 0;
  for (const record of records) {
    let outcome = await reconcileRecord(ctx, record);
    if (outcome !== "confirmed") {
      const current = await journal(() => ctx.deleteJournal.getBoatDeletion(record.boxId));
      if (current !== null && current.phase !== "accepted") {
        // A young prepared fence is another caller's DELETE in flight: requestDeletion sends nothing for it.
        inFlightMs = Math.max(inFlightMs, deletionInFlightLeftMs(current, ctx.now()));
        // A caller that lets only a person re-send a deletion: the fence stays, nothing is sent.
        if (!resend) {
          allConfirmed = false;
          continue;
        }
        try {
          // The explicit retry of exactly the fence just read (prepared or blocked; never accepted).
          outcome = await requestDeletion(
            ctx,
            { boxId: current.boxId, name: current.name, ownerBotId: current.ownerBotId },
            current,
          );
        } catch (error) {
          // Only a "pending" outcome means the deletion is still running. A failure of the retry (lost
          // answer, invalid receipt, refusal that blocked the fence, journal or name problem) is told as
          // itself, naming the fence it concerns; anything else is a defect and propagates untouched.
          if (!isLifecycleError(error)) throw error;
          throw priorDeletionFailed(current.boxId, error);
        }
      }
    }
    if (outcome !== "confirmed") allConfirmed = false;
  }
  if (!allConfirmed) throw fenced(inFlightMs);
  throw new LifecycleError({
    code: "previous_deletion_finished",
    message: LIFECYCLE_MESSAGES.previousDeletionFinished,
  });
}

interface Located {
  boat: Boat;
  /** The create journal holds a resolved ownership row for exactly this Boat. */
  resolved: boolean;
}

function isOwnName(ctx: Context, botId: string, name: string | null): name is string {
  return name !== null && (name === ctx.scopedName(botId) || name === ctx.legacyName(botId));
}

function toBoat(
  ctx: Context,
  botId: string,
  sandbox: { id: string; name: string | null; state: Boat["state"] },
) {
  return {
    boxId: sandbox.id,
    name: sandbox.name,
    state: sandbox.state,
    ownerBotId: botId,
    legacyName: sandbox.name !== null && sandbox.name === ctx.legacyName(botId),
  } satisfies Boat;
}

/**
 * The index's Boats under the bot's two names, each confirmed by a direct read, because the index is a
 * list's view and the list lags: a Boat gone (404/410) or renamed since is corrected in the index and
 * skipped; a Boat in the `error` state is skipped (as the list walk did before). Two Boats left:
 * `inventory_conflict`, nothing adopted.
 */
async function confirmNamedHits(ctx: Context, botId: string, signal?: AbortSignal): Promise<Sandbox | null> {
  const live: Sandbox[] = [];
  for (const id of ctx.nameSweep.idsFor([ctx.scopedName(botId), ctx.legacyName(botId)])) {
    let sandbox: Sandbox;
    try {
      sandbox = await ctx.client.getSandbox(id, { signal });
    } catch (error) {
      const failure = classifyProviderError(error);
      if (failure.kind === "absent") {
        ctx.nameSweep.observe(id, null); // a deleted Boat (ours, say) the index still held
        continue;
      }
      throw providerError("Could not read this bot's cloud computer", failure, id);
    }
    if (!isOwnName(ctx, botId, sandbox.name)) {
      ctx.nameSweep.observe(id, sandbox.name); // renamed away since it was listed
      continue;
    }
    if (sandbox.state !== "error") live.push(sandbox);
  }
  if (live.length > 1) {
    throw new LifecycleError({
      code: "inventory_conflict",
      message: `Two cloud computers carry this bot's name (${live
        .map((sandbox) => sandbox.id)
        .sort()
        .join(", ")}) — repair it in boat.dev before continuing`,
    });
  }
  return live[0] ?? null;
}

/**
 * Finds the bot's Boat: first the id the create journal remembers (a direct, authoritative read), then
 * the name sweep's index of boat.dev's list by exact deterministic (or legacy) name, each hit confirmed
 * by a direct read, because the list lags: it may still show a deleted Boat and may not show a new one
 * yet. A hit the journal does not know is adopted, so the Boat is durably owned from then on.
 */
export async function locate(ctx: Context, botId: string, signal?: AbortSignal): Promise<Located | null> {
  const rows = await journal(() => ctx.createJournal.boatCreateRowsOf(botId));
  const remembered = rows.find((row) => row.boxId !== undefined);
  if (remembered?.boxId !== undefined) {
    try {
      const sandbox = await ctx.client.getSandbox(remembered.boxId, { signal });
      if (sandbox.name !== null && !isOwnName(ctx, botId, sandbox.name)) {
        throw new LifecycleError({
          code: "name_mismatch",
          boxId: sandbox.id,
          message:
            "This bot's remembered cloud computer no longer has its deterministic name — repair it in boat.dev before continuing",
        });
      }
      ctx.nameSweep.observe(sandbox.id, sandbox.name);
      return { boat: toBoat(ctx, botId, sandbox), resolved: remembered.resolved };
    } catch (error) {
      if (isLifecycleError(error)) throw error;
      const failure = classifyProviderError(error);
      // A remembered Boat that is gone: provisioning's begin step discards the stale row.
      if (failure.kind !== "absent") {
        throw providerError("Could not read this bot's cloud computer", failure, remembered.boxId);
      }
    }
  }

  // Not remembered: the bot's names in the name sweep's index (complete, or completed here within its
  // inline page budget; an incomplete listing never proves absence, so it throws instead).
  await ctx.nameSweep.ensureComplete(signal);
  const confirmed = await confirmNamedHits(ctx, botId, signal);
  if (confirmed === null) return null;

  if (rows.some((row) => row.boxId === undefined)) {
    // A key-only row means a create with an unknown outcome is still open for this bot; adopting the
    // named Boat would drop that key, and with it the only way to find a Boat it may have created.
    throw new LifecycleError({
      code: "recovery_paused",
      boxId: confirmed.id,
      message:
        "Cloud computer creation is paused: boat.dev has a computer named for this bot while an earlier create request is still unreconciled. Check boat.dev before repairing drydock's local state.",
    });
  }
  await journal(() => ctx.createJournal.adoptResolvedBoat(botId, confirmed.id));
  // Crash window: the adopted row is durable; a crash here leaves a resolved row, which is the goal.
  ctx.crash.point("provision.after-adopt");
  ctx.logger.info?.("boat adopted by name", {
    botId,
    boxId: confirmed.id,
    legacy: confirmed.name !== ctx.scopedName(botId),
  });
  return { boat: toBoat(ctx, botId, confirmed), resolved: true };
}

function createOutcomeOf(failure: ProviderFailure): CreateOutcome {
  switch (failure.kind) {
    case "transport":
      return { kind: "transport" };
    case "absent":
      return { kind: "refused", status: failure.status, code: "not_found" };
    case "api":
      if (failure.status >= 500) {
        return { kind: "server-error", status: failure.status, retryAfterMs: failure.retryAfterMs };
      }
      if (failure.status === 409 && failure.code === "idempotency_in_progress") {
        return { kind: "in-progress", retryAfterMs: failure.retryAfterMs };
      }
      if (failure.status === 429) return { kind: "rate-limited", retryAfterMs: failure.retryAfterMs };
      return { kind: "refused", status: failure.status, code: failure.code };
  }
}

/**
 * POSTs the create with the journaled key until boat.dev answers with an id or the retry budget is spent
 * (the original create flow's step 4). Every retry reuses the key. The key is discarded only on a definitive
 * refusal when no attempt of this call could have committed anything; everything ambiguous keeps it, so
 * the next provision replays the same request instead of billing a second Boat.
 */
async function postWithKey(
  ctx: Context,
  request: BoatCreateRequest,
  startedNow: boolean,
  signal?: AbortSignal,
): Promise<string> {
  const budget = freshBudget();
  // A resumed key (journaled by an earlier call or process) may already have created a Boat: its earlier
  // attempts are unknown here, so a refusal now proves nothing about them (seed: a resumed key never
  // authorizes cleanup, and never a fresh key either).
  let mayHaveCommitted = !startedNow;
  for (;;) {
    throwIfAborted(signal);
    if (ctx.now() >= keyTrustDeadline(request.createdAt)) {
      // Checked before every POST, since waits and timeouts add up: boat.dev may forget the key before
      // this request arrives, and a forgotten key creates a second Boat. The key stays journaled (never a
      // new one); only a person can reconcile it.
      throw new LifecycleError({ code: "recovery_paused", message: LIFECYCLE_MESSAGES.createKeyNearExpiry });
    }
    // The caller's gate (a lapsed instance lease): what it throws leaves the key journaled, nothing sent.
    ctx.beforeSideEffect({ kind: "create", botId: request.botId });
    let failure: ProviderFailure;
    try {
      const { sandbox } = await ctx.client.createSandbox(CREATE_REQUEST_BODY, {
        idempotencyKey: request.idempotencyKey,
        ...(signal === undefined ? {} : { signal }),
      });
      return sandbox.id;
    } catch (error) {
      failure = classifyProviderError(error);
    }
    if (failure.kind === "transport" && failure.aborted) throw cancelledError();
    const outcome = createOutcomeOf(failure);
    if (
      (failure.kind === "transport" && failure.committed) ||
      outcome.kind === "server-error" ||
      outcome.kind === "in-progress"
    ) {
      mayHaveCommitted = true;
    }
    const decision = nextCreateRetry(outcome, budget);
    if (decision.retry) {
      ctx.logger.warn?.("boat create retried with the same key", {
        botId: request.botId,
        outcome: outcome.kind,
      });
      try {
        ctx.onCreateRetry({ botId: request.botId, outcome: outcome.kind });
      } catch {
        // An observer (a metric) must never change what provisioning does.
      }
      if (decision.waitMs > 0) await ctx.sleep(decision.waitMs, signal);
      continue;
    }
    throw await finalCreateFailure(ctx, request, failure, outcome, mayHaveCommitted);
  }
}

async function finalCreateFailure(
  ctx: Context,
  request: BoatCreateRequest,
  failure: ProviderFailure,
  outcome: CreateOutcome,
  mayHaveCommitted: boolean,
): Promise<LifecycleError> {
  if (failure.kind === "transport") {
    return new LifecycleError({
      code: "provider_unavailable",
      status: 503,
      // "Nothing was created" only when no attempt under this key (of this call, or of an earlier one
      // for a resumed key) could have committed: an earlier lost answer may hide a Boat.
      message: mayHaveCommitted
        ? LIFECYCLE_MESSAGES.createUnconfirmed
        : "boat.dev could not be reached, so no cloud computer was created — retry in a moment",
    });
  }
  const retryAfterMs = failure.kind === "api" ? failure.retryAfterMs : undefined;
  const wait = retryAfterMs === undefined ? {} : { retryAfterMs };
  // The original messages already say "a moment"; a longer wait boat.dev asked for is said instead.
  const waitNote =
    retryAfterMs !== undefined && retryAfterMs > MAX_RETRY_AFTER_MS ? ` — ${retryIn(retryAfterMs)}` : "";
  if (outcome.kind === "server-error") {
    return new LifecycleError({
      ...wait,
      code: "provider_unavailable",
      status: 502,
      message: `boat.dev could not create the cloud computer: ${failure.message.replace(/[.\s]+$/, "")}. Its request was kept, so retrying reuses it and cannot create a second computer${waitNote}`,
    });
  }
  if (outcome.kind === "in-progress") {
    return new LifecycleError({
      ...wait,
      code: "create_in_progress",
      message: `${LIFECYCLE_MESSAGES.createInProgress}${waitNote}`,
    });
  }
  const status = failure.kind === "api" || failure.kind === "absent" ? failure.status : 400;
  if (outcome.kind === "refused" && isDefinitiveRefusal(status)) {
    // The key is kept when an earlier attempt under it (in this call, or in an earlier call or process)
    // had an unknown outcome, so a Boat may exist under it: a fresh key could bill a second one.
    const kept = new LifecycleError({
      code: "provider_refused",
      status,
      message: LIFECYCLE_MESSAGES.createRefusedKept(failure.message),
    });
    if (mayHaveCommitted) return kept;
    // Another process sharing the storage may have resumed this key and be about to send it: dropping the
    // key now would let that request create a Boat no journal holds (seen across hosts in the chaos test).
    if (ctx.keysShared) {
      return new LifecycleError({
        code: "provider_refused",
        status,
        message: LIFECYCLE_MESSAGES.createRefusedShared(failure.message),
      });
    }
    // Only boat.dev's own refusal (its error envelope) proves the request created nothing. A 4xx page
    // without the envelope (a proxy's or a WAF's, `http_error`) may stand in for an answer boat.dev gave
    // after committing: the key is kept, so a retry reuses it.
    if (failure.kind === "api" && failure.code === "http_error") return kept;
    // boat.dev refused this exact request, the key was minted by this very call and no attempt of it
    // could have committed: nothing under the key can exist, so a later provision may start afresh.
    // Unless another process resumed the key meanwhile and remembered a Boat under it: the journal then
    // refuses the discard (out of date), and everything is kept.
    try {
      await ctx.createJournal.discardBoatCreate(request);
    } catch (error) {
      if (isBoatCreateJournalError(error) && error.detail === "out of date") return kept;
      throw fromJournalError(error);
    }
    // Crash window: the key is gone; nothing was created under it, so there is nothing to recover.
    ctx.crash.point("provision.after-discard");
  }
  return new LifecycleError({
    ...wait,
    code: "provider_refused",
    status,
    message:
      status === 429
        ? `boat.dev is rate limiting requests: ${failure.message} — ${retryIn(retryAfterMs)}`
        : `boat.dev refused to create the cloud computer: ${failure.message}`,
  });
}

/** Renames with one retry on an ambiguous outcome: a PATCH to the same name is idempotent. */
async function renameOnce(ctx: Context, boxId: string, name: string, signal?: AbortSignal): Promise<void> {
  for (let attempt = 0; ; attempt += 1) {
    try {
      await ctx.client.renameSandbox(boxId, name, signal === undefined ? undefined : { signal });
      return;
    } catch (error) {
      const failure = classifyProviderError(error);
      const ambiguous =
        (failure.kind === "transport" && !failure.aborted) ||
        (failure.kind === "api" && failure.status >= 500);
      if (ambiguous && attempt === 0) continue;
      throw providerError("boat naming failed", failure, boxId);
    }
  }
}

/**
 * Cleanup of a Boat this very attempt created and could not finish (create step 7). A recovered Boat is never
 * passed here: it may hold a user's data from an earlier run.
 */
async function cleanupCreated(
  ctx: Context,
  botId: string,
  boxId: string,
  original: LifecycleError,
): Promise<LifecycleError> {
  let name = ctx.scopedName(botId);
  try {
    const sandbox = await ctx.client.getSandbox(boxId);
    name = sandbox.name ?? name;
  } catch (error) {
    if (classifyProviderError(error).kind === "absent") {
      await finishDeletion(ctx, boxId);
      return original;
    }
    // Unknown identity: the fence takes the name this attempt wanted to give it.
  }
  let outcome: Awaited<ReturnType<typeof requestDeletion>>;
  try {
    outcome = await requestDeletion(ctx, { boxId, name, ownerBotId: botId });
  } catch (error) {
    return new LifecycleError({
      code: "cleanup_unconfirmed",
      boxId,
      message: LIFECYCLE_MESSAGES.cleanupFailed(original.message, messageOf(error), boxId),
      cause: original,
    });
  }
  if (outcome === "confirmed") return original;
  return new LifecycleError({
    code: "cleanup_unconfirmed",
    boxId,
    message:
      outcome === "pending"
        ? LIFECYCLE_MESSAGES.cleanupPending(original.message, boxId)
        : LIFECYCLE_MESSAGES.cleanupFailed(original.message, "the deletion operation is blocked", boxId),
    cause: original,
  });
}

function asLifecycleError(error: unknown): LifecycleError {
  if (isLifecycleError(error)) return error;
  return new LifecycleError({
    code: "provider_unavailable",
    message: `Provisioning failed unexpectedly: ${messageOf(error)}`,
    cause: error,
  });
}

/** Create steps 3–7: begin (journal the key), create or recover, remember, rename, resolve. */
export async function createAndName(
  ctx: Context,
  botId: string,
  signal?: AbortSignal,
  stillWanted?: () => boolean | Promise<boolean>,
): Promise<ProvisionResult> {
  const desired = ctx.scopedName(botId);
  let attempt = await journal(() => ctx.createJournal.beginBoatCreate(botId, CREATE_BODY_TEXT));
  // Crash window: the key is durable, the POST may or may not have left. Recovery POSTs again with the
  // SAME key (boat.dev keeps it 24 h), which replays the first Boat instead of billing a second.
  ctx.crash.point("provision.after-begin");

  let boxId: string | undefined;
  let currentName: string | null = null;
  if (attempt.request.boxId !== undefined) {
    try {
      const sandbox = await ctx.client.getSandbox(attempt.request.boxId, { signal });
      boxId = sandbox.id;
      currentName = sandbox.name;
    } catch (error) {
      const failure = classifyProviderError(error);
      if (failure.kind !== "absent") {
        throw providerError(
          "Could not read this bot's remembered cloud computer",
          failure,
          attempt.request.boxId,
        );
      }
      // The remembered Boat is proven gone (and no fence covers it): its row is stale. Start over.
      await journal(() => ctx.createJournal.discardBoatCreate(attempt.request));
      // Crash window: the stale row is gone and no key is journaled; the Boat it named is proven absent,
      // so the next provision simply begins afresh.
      ctx.crash.point("provision.after-discard-stale");
      attempt = await journal(() => ctx.createJournal.beginBoatCreate(botId, CREATE_BODY_TEXT));
      ctx.crash.point("provision.after-begin");
    }
  }

  const { startedNow } = attempt;
  let request = attempt.request;
  if (boxId === undefined) {
    if (request.boxId !== undefined) {
      // A concurrent process remembered a Boat between our discard and begin: use it, never POST.
      boxId = request.boxId;
    } else {
      // Asked after the key is journaled: a caller removing the owner marked it first, so either this
      // sees the mark or the removal sees the key. A key minted here was never sent: it goes.
      if (stillWanted !== undefined && !(await stillWanted())) {
        // Unless another process may have resumed it (keysShared): then it is kept, as after a refusal.
        const discard = startedNow && !ctx.keysShared;
        if (discard) await journal(() => ctx.createJournal.discardBoatCreate(request));
        throw new LifecycleError({
          code: "provision_withdrawn",
          message: discard
            ? LIFECYCLE_MESSAGES.provisionWithdrawn
            : LIFECYCLE_MESSAGES.provisionWithdrawnKept,
        });
      }
      boxId = await postWithKey(ctx, request, startedNow, signal);
      // Crash window: boat.dev committed the Boat but its id is not journaled. Recovery retries with the
      // SAME key and gets the same id back (Idempotent-Replayed).
      ctx.crash.point("provision.after-create-response");
      request = await journal(() => ctx.createJournal.rememberCreatedBoat(request, boxId as string));
      // Crash window: the id is journaled, the Boat is unnamed; recovery reads it directly and names it.
      ctx.crash.point("provision.after-remember");
      ctx.logger.info?.("boat created", { botId, boxId });
    }
  }

  try {
    throwIfAborted(signal);
    // A Boat already carrying one of this bot's names (a legacy-named one, say) keeps it: renaming could
    // collide with what an older installation expects to find.
    if (!isOwnName(ctx, botId, currentName)) {
      await renameOnce(ctx, boxId, desired, signal);
      currentName = desired;
      ctx.nameSweep.observe(boxId, desired);
      // Crash window: named but not resolved; recovery finds it by id (journal) or by name and resolves it.
      ctx.crash.point("provision.after-rename");
    }
    if (request.resolved !== true) {
      request = await journal(() => ctx.createJournal.resolveBoatCreate(request));
      // Crash window: resolved; the bot owns the Boat durably.
      ctx.crash.point("provision.after-resolve");
    }
  } catch (error) {
    const failure = asLifecycleError(error);
    if (!startedNow) throw failure;
    throw await cleanupCreated(ctx, botId, boxId, failure);
  }
  // Another process may have fenced this Boat for cleanup while we named it: never hand out a Boat
  // that is being deleted.
  await assertNotFenced(ctx, botId);
  return { boxId, name: currentName ?? desired, createdThisAttempt: startedNow };
}
