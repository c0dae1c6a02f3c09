/**
 * The four Boat recovery actions. Each re-reads the exact facts it depends on (journal rows, fence, a direct
 * GET of the Boat), recomputes the plan item's digest from them, and refuses when those moved since the
 * plan (STATE_CHANGED) or when the rules no longer allow the action.
 */
import { DELETE_IN_FLIGHT_MS, deletionInFlightLeftMs, isLifecycleError } from "@drydock/boat-lifecycle";
import { recoveryError } from "../errors.js";
import type { RecoveryDeletionRecord } from "../ports.js";
import type { BoatObservation } from "../schema.js";
import { BOAT_ID_PATTERN, BOT_ID_PATTERN, DIGEST_PATTERN, fenceInFlightLeftMs } from "../schema.js";
import {
  type BoatContext,
  type CreateRow,
  command,
  observeOrThrow,
  ownsName,
  type Registry,
  readRegistry,
  registrationOf,
} from "./context.js";
import { fenceDigest, renamedTo, rowOf } from "./facts.js";
import { createItem, fenceItem, unknownBoatItem } from "./plan.js";
import { adoptRefusal } from "./rules.js";
import type { BoatActionOptions, BoatActionResult } from "./types.js";

export function assertBotId(botId: unknown): asserts botId is string {
  if (typeof botId !== "string" || !BOT_ID_PATTERN.test(botId)) {
    throw recoveryError("INVALID_ARGUMENT", "The bot id must be 1-120 letters, digits, '_' or '-'.");
  }
}

export function assertBoxId(boxId: unknown): asserts boxId is string {
  if (typeof boxId !== "string" || !BOAT_ID_PATTERN.test(boxId)) {
    throw recoveryError("INVALID_ARGUMENT", "The Boat id must be bx_ followed by 8 characters.");
  }
}

/**
 * Refuses with STATE_CHANGED unless `expected` (when given) is `actual`. `actual` null: no plan item offers
 * the action for the state as it is now (it was applied already, or its record is gone), so no digest can
 * match; `moved` says what the state is instead.
 */
export function checkExpected(
  ctx: BoatContext,
  expected: string | undefined,
  actual: string | null,
  details: Record<string, string>,
  moved?: string,
): void {
  if (expected === undefined) return;
  if (!DIGEST_PATTERN.test(expected)) {
    throw recoveryError(
      "INVALID_ARGUMENT",
      "--expected-state must be the sha256:… digest printed by the preview.",
    );
  }
  if (expected !== actual) {
    throw recoveryError(
      "STATE_CHANGED",
      moved ??
        `The journal or boat.dev changed since the plan was made; nothing was changed. Run \`${command(ctx, "reconcile")}\` (or the command's preview) again.`,
      { ...details, expectedState: expected, ...(actual === null ? {} : { actualState: actual }) },
    );
  }
}

export async function adopt(
  ctx: BoatContext,
  botId: string,
  boxId: string,
  opts: BoatActionOptions = {},
): Promise<BoatActionResult> {
  assertBotId(botId);
  assertBoxId(boxId);
  const rows = await ctx.createJournal.boatCreateRecoverySnapshot();
  const fences = await ctx.deleteJournal.boatDeletionSnapshot();
  const registry = await readRegistry(ctx);
  const observation = await observeOrThrow(ctx, boxId);
  const at = ctx.now();
  const row = rows.find((candidate) => candidate.botId === botId);
  const ids = { botId, boxId };

  checkAdoptDigest(ctx, { botId, boxId, opts, rows, fences, registry, observation, at, row });

  // The same rules the plan applies before it prints an adopt command (adoptRefusal).
  const name = observation.kind === "present" ? observation.name : null;
  const refusal = adoptRefusal(ctx, botId, boxId, name, rows, fences, at, registry);
  if (refusal?.early) throw recoveryError("ACTION_NOT_ALLOWED", refusal.message, ids);
  if (observation.kind === "absent") {
    checkExpected(
      ctx,
      opts.expectedState,
      null,
      ids,
      `boat.dev has no Boat ${boxId} now (${observation.status}: deleted since the plan, or there never was one); nothing was changed. Run \`${command(ctx, "reconcile")}\` to see what is still open.`,
    );
    throw recoveryError(
      "NOT_FOUND",
      `boat.dev has no Boat ${boxId} (${observation.status}); nothing to adopt.`,
      ids,
    );
  }
  if (observation.kind !== "present")
    throw new Error("unreachable: observeOrThrow returns present or absent");
  if (row?.resolved && row.boxId === boxId) {
    return {
      ok: true,
      action: "adopt",
      botId,
      boxId,
      name: observation.name ?? "",
      renamed: false,
      alreadyAdopted: true,
    };
  }
  if (refusal) throw recoveryError("ACTION_NOT_ALLOWED", refusal.message, ids);
  let current = observation.name;
  let renamed = false;
  if (!ownsName(ctx, botId, current)) {
    // Only the remembered, unnamed Boat gets here (adoptRefusal): name it as provisioning would have.
    const after = await ctx.client.renameSandbox(boxId, ctx.lifecycle.boatNameFor(botId));
    current = after.name;
    renamed = true;
  }
  await recordAdoption(ctx, botId, boxId, row, opts);
  return { ok: true, action: "adopt", botId, boxId, name: current ?? "", renamed, alreadyAdopted: false };
}

/**
 * Refuses with STATE_CHANGED unless the fenced digest is the one the plan shows for this pair now: the
 * create row's item, or the unknown-Boat item (whose claimant is this bot exactly when the Boat carries its
 * deterministic name, as the plan attributes it).
 */
function checkAdoptDigest(
  ctx: BoatContext,
  facts: {
    botId: string;
    boxId: string;
    opts: BoatActionOptions;
    rows: readonly CreateRow[];
    fences: readonly RecoveryDeletionRecord[];
    registry: Registry;
    observation: BoatObservation;
    at: number;
    row: CreateRow | undefined;
  },
): void {
  const { botId, boxId, opts, rows, fences, registry, observation, at, row } = facts;
  const ids = { botId, boxId };
  const item =
    row !== undefined && row.boxId === boxId
      ? createItem(ctx, row, observation, at, registry)
      : observation.kind === "present"
        ? unknownBoatItem(
            ctx,
            { id: boxId, name: observation.name, state: observation.state },
            observation.name !== null ? "unknown_boat" : "unnamed_boat",
            observation.name !== null && ownsName(ctx, botId, observation.name) ? botId : null,
            rows,
            fences,
            at,
            registry,
          )
        : null;
  if (item) {
    checkExpected(
      ctx,
      opts.expectedState,
      item.stateDigest,
      ids,
      registrationOf(registry, botId) === false
        ? `Bot ${botId} is not registered now (deleted since the plan was made, or never created here); nothing was changed. Create the bot again first if it is still wanted (then \`${command(ctx, "reconcile")}\` prints the adopt), or delete Boat ${boxId} in boat.dev.`
        : undefined,
    );
  } else if (opts.expectedState !== undefined && row?.resolved === true && row.boxId === boxId) {
    // Already this bot's Boat: no plan item offers adopt for it, so no digest can match. A fenced command
    // re-sent after it applied (or after another adopted the Boat) is a moved state, never a silent 0.
    checkExpected(
      ctx,
      opts.expectedState,
      null,
      ids,
      `Boat ${boxId} is already bot ${botId}'s (adopted after the plan was made, by this command or another); nothing was changed. Run \`${command(ctx, "reconcile")}\` to see what is still open.`,
    );
  }
}

/** Records the Boat as the bot's, once: a compare-and-set on the row the action read when the journal can. */
async function recordAdoption(
  ctx: BoatContext,
  botId: string,
  boxId: string,
  row: CreateRow | undefined,
  opts: BoatActionOptions,
): Promise<void> {
  const ids = { botId, boxId };
  if (ctx.createJournal.adoptResolvedBoatOnce !== undefined) {
    // Compare-and-set on the row this action read (and its digest covered): of two identical pastes at
    // once exactly one records the Boat; the other changed nothing and says what it found.
    if (
      !(await ctx.createJournal.adoptResolvedBoatOnce(botId, boxId, row === undefined ? null : rowOf(row)))
    ) {
      const recorded = (await ctx.createJournal.boatCreateRecoverySnapshot()).find((c) => c.botId === botId);
      throw recoveryError(
        "STATE_CHANGED",
        recorded?.resolved === true && recorded.boxId === boxId
          ? `Boat ${boxId} is already bot ${botId}'s (adopted while this command ran, by another); nothing was changed. Run \`${command(ctx, "reconcile")}\` to see what is still open.`
          : `Bot ${botId}'s create record changed while this command ran (${recorded === undefined ? "it has none now" : `it now records ${recorded.boxId ?? "no Boat id"}${recorded.resolved ? ", resolved" : ""}`}); nothing was recorded. Run \`${command(ctx, "reconcile")}\` again.`,
        { ...ids, ...(opts.expectedState === undefined ? {} : { expectedState: opts.expectedState }) },
      );
    }
  } else {
    await ctx.createJournal.adoptResolvedBoat(botId, boxId);
  }
}

export async function retireCreate(
  ctx: BoatContext,
  botId: string,
  opts: BoatActionOptions = {},
): Promise<BoatActionResult> {
  assertBotId(botId);
  const rows = await ctx.createJournal.boatCreateRecoverySnapshot();
  const row = rows.find((candidate) => candidate.botId === botId);
  if (!row) {
    // A fenced command names a record the plan showed: gone now is a moved state (retired already, by this
    // command or another), as for a deletion fence lifted since (exit 4, not "not found").
    checkExpected(
      ctx,
      opts.expectedState,
      null,
      { botId },
      `The create journal has no record for bot ${botId} now (retired since the plan, or there never was one); nothing was changed. Run \`${command(ctx, "reconcile")}\` to see what is still open.`,
    );
    throw recoveryError("NOT_FOUND", `The create journal has no record for bot ${botId}.`, { botId });
  }
  const boxId = row.boxId;
  const registry = await readRegistry(ctx);
  if (boxId === undefined) {
    checkExpected(
      ctx,
      opts.expectedState,
      createItem(ctx, row, { kind: "not_checked" }, ctx.now(), registry)!.stateDigest,
      { botId },
    );
    throw recoveryError(
      "ACTION_NOT_ALLOWED",
      `Bot ${botId}'s create request has no recorded Boat id, so boat.dev cannot prove that no Boat exists for it. Look for an unnamed Boat in boat.dev (see \`${command(ctx, "creates", "list")}\`).`,
      { botId },
    );
  }
  const fence = await ctx.deleteJournal.getBoatDeletion(boxId);
  const observation = await observeOrThrow(ctx, boxId);
  const item = createItem(ctx, row, observation, ctx.now(), registry);
  if (item) checkExpected(ctx, opts.expectedState, item.stateDigest, { botId, boxId });
  if (fence) {
    throw recoveryError(
      "ACTION_NOT_ALLOWED",
      `Boat ${boxId} has a deletion fence; the deletion retires the create record itself (\`${command(ctx, "deletions", "reconcile", boxId)}\`).`,
      { botId, boxId },
    );
  }
  if (observation.kind !== "absent") {
    throw recoveryError(
      "ACTION_NOT_ALLOWED",
      `Boat ${boxId} still exists at boat.dev; retiring its record would orphan it. Adopt it or delete it instead.`,
      { botId, boxId },
    );
  }
  if (ctx.createJournal.retireDeletedBoatCreateOnce !== undefined) {
    // Compare-and-set on the row this action read: of two identical pastes at once exactly one retires
    // it; the other changed nothing (STATE_CHANGED), never a second success for one retirement.
    if (!(await ctx.createJournal.retireDeletedBoatCreateOnce(rowOf(row)))) {
      throw recoveryError(
        "STATE_CHANGED",
        `The create journal's record for bot ${botId} changed while this command ran (retired by another command, or replaced); nothing was changed. Run \`${command(ctx, "reconcile")}\` to see what is still open.`,
        {
          botId,
          boxId,
          ...(opts.expectedState === undefined ? {} : { expectedState: opts.expectedState }),
        },
      );
    }
  } else {
    await ctx.createJournal.retireDeletedBoatCreate(boxId);
  }
  return { ok: true, action: "retireCreate", botId, boxId, proof: observation.status };
}

/** The fence for `boxId`, or the refusal when none stands (STATE_CHANGED when a fenced command named it). */
export async function fenceRecord(
  ctx: BoatContext,
  boxId: string,
  opts: BoatActionOptions,
): Promise<RecoveryDeletionRecord> {
  assertBoxId(boxId);
  const record = await ctx.deleteJournal.getBoatDeletion(boxId);
  if (!record) {
    if (opts.expectedState !== undefined) {
      throw recoveryError(
        "STATE_CHANGED",
        `No deletion fence stands for Boat ${boxId} (settled since the plan, or there never was one); nothing was changed.`,
        {
          boxId,
        },
      );
    }
    throw recoveryError("NOT_FOUND", `No deletion fence stands for Boat ${boxId}.`, { boxId });
  }
  return record;
}

/**
 * One reconcile of a fence: a direct read of the Boat that must succeed (a provider failure passes through
 * unchanged, journals untouched: a Boat drydock could not see is never reported "pending"), then the
 * lifecycle's poll of the fence's operation and its own direct read, which finish the fence on proof.
 * What is left is said plainly, with the next step for the fence as it stands now (the plan's action).
 */
export async function reconcileDeletion(
  ctx: BoatContext,
  boxId: string,
  opts: BoatActionOptions = {},
): Promise<BoatActionResult> {
  const fence = await fenceRecord(ctx, boxId, opts);
  const observation = await observeOrThrow(ctx, boxId);
  checkExpected(ctx, opts.expectedState, fenceDigest(fence, observation), { boxId });
  const base = { ok: true, action: "reconcileDeletion", boxId } as const;
  let outcome: "confirmed" | "pending" | "blocked";
  try {
    outcome = await ctx.lifecycle.reconcileDeletion(boxId);
  } catch (error) {
    // The lifecycle refuses a Boat renamed since its fence (it reads, writes nothing, and throws): the
    // rename is what this read saw too, so say it, with the plan's way out, instead of a bare refusal.
    const renamed = renamedTo(fence, observation);
    if (renamed === undefined || !isLifecycleError(error) || error.code !== "name_mismatch") throw error;
    const record = (await ctx.deleteJournal.getBoatDeletion(boxId)) ?? fence;
    return {
      ...base,
      outcome:
        record.phase === "accepted" ? "pending" : record.phase === "blocked" ? "blocked" : "not_running",
      message: `boat.dev shows Boat ${boxId} named ${renamed ?? "nothing"}, not ${record.name} as its fence recorded, so drydock neither finishes nor re-sends its deletion${record.phase === "accepted" ? " (boat.dev accepted it and has not finished it)" : ""}; nothing was changed.`,
      next: fenceItem(ctx, record, observation, ctx.now()).action,
    };
  }
  if (outcome === "confirmed") {
    return {
      ...base,
      outcome,
      message: `boat.dev proved Boat ${boxId} deleted; its deletion fence is lifted.`,
      next: null,
    };
  }
  const record = await ctx.deleteJournal.getBoatDeletion(boxId);
  if (record === null) {
    // Another process finished the deletion between the poll and this read.
    return {
      ...base,
      outcome: "confirmed",
      message: `The deletion fence for ${boxId} is gone: the deletion was finished meanwhile.`,
      next: null,
    };
  }
  const next = fenceItem(ctx, record, observation, ctx.now()).action;
  if (record.phase === "blocked") {
    return {
      ...base,
      outcome: "blocked",
      message: `boat.dev blocked the deletion of ${boxId}; its fence stays until a retry is accepted.`,
      next,
    };
  }
  if (observation.kind !== "present") {
    // Our read proved it gone, but the lifecycle's own reads did not get that far: the fence stays.
    return {
      ...base,
      outcome: "pending",
      message: `boat.dev answered that Boat ${boxId} is gone, but the fence could not be lifted in this run; reconcile it again.`,
      next,
    };
  }
  if (record.phase === "accepted") {
    return {
      ...base,
      outcome: "pending",
      message: `boat.dev accepted the deletion of ${boxId} and has not finished it (${record.status ?? "pending"}); its fence stays until boat.dev proves the Boat gone.`,
      next,
    };
  }
  const renamed = renamedTo(record, observation);
  if (next.name === null && renamed !== undefined && fenceInFlightLeftMs(record, ctx.now()) === 0) {
    return {
      ...base,
      outcome: "not_running",
      message: `No deletion of ${boxId} is running that drydock knows of, and none will be sent: boat.dev shows the Boat named ${renamed ?? "nothing"}, not ${record.name} as its fence recorded.`,
      next,
    };
  }
  if (next.name === null) {
    // Prepared moments ago: its DELETE (another process's, perhaps) may still be on the wire.
    return {
      ...base,
      outcome: "pending",
      message: `The deletion of ${boxId} was prepared moments ago and its DELETE may still be on the wire; nothing was sent.`,
      next,
    };
  }
  return {
    ...base,
    outcome: "not_running",
    message: `No deletion of ${boxId} is running that drydock knows of: the Boat still exists and boat.dev never confirmed a DELETE for it (the fence is prepared, without a receipt), so reconciling again will not move it. \`deletions retry\` does: it sends DELETE again, which boat.dev answers with the running operation if an earlier one did arrive.`,
    next,
  };
}

export async function retryDeletion(
  ctx: BoatContext,
  boxId: string,
  opts: BoatActionOptions = {},
): Promise<BoatActionResult> {
  const record = await fenceRecord(ctx, boxId, opts);
  if (opts.expectedState !== undefined) {
    // The digest covers the name boat.dev shows: a command printed before a rename is stale after it.
    checkExpected(ctx, opts.expectedState, fenceDigest(record, await observeOrThrow(ctx, boxId)), { boxId });
  }
  if (record.phase === "accepted") {
    throw recoveryError(
      "ACTION_NOT_ALLOWED",
      `boat.dev accepted the deletion of ${boxId} (${record.status ?? "pending"}); a second DELETE would be blind. Reconcile it instead: \`${command(ctx, "deletions", "reconcile", boxId)}\`.`,
      { boxId },
    );
  }
  // A fence prepared moments ago may have its DELETE still on the wire (another process's): a retry now
  // would be blind, and the lifecycle would send nothing anyway. Said plainly, with the wait.
  const inFlightMs = deletionInFlightLeftMs(record, ctx.now());
  if (inFlightMs > 0) {
    throw recoveryError(
      "ACTION_NOT_ALLOWED",
      `The deletion of ${boxId} was prepared ${Math.round((DELETE_IN_FLIGHT_MS - inFlightMs) / 1000)} s ago, so its DELETE may still be on the wire; a second one now would be blind. Nothing was sent. Retry in ${Math.ceil(inFlightMs / 1000)} s.`,
      { boxId },
    );
  }
  // The fence's recorded name is the confirmation: the lifecycle re-reads the Boat and refuses if it was
  // renamed since (the person would be deleting something they did not see).
  let result: { ok: true; pending?: true };
  try {
    result = await ctx.lifecycle.deleteBoat({
      boxId,
      confirmName: record.name,
      ownerBotId: record.ownerBotId,
      // A fenced retry is a compare-and-set on exactly the fence its digest covered: another retry (or
      // anything else) that moved it first makes this one send nothing and say so (STATE_CHANGED).
      ...(opts.expectedState === undefined ? {} : { expectedFence: record }),
    });
  } catch (error) {
    if (
      opts.expectedState === undefined ||
      !isLifecycleError(error) ||
      error.code !== "confirmation_mismatch"
    ) {
      throw error;
    }
    const current = await ctx.deleteJournal.getBoatDeletion(boxId);
    throw recoveryError(
      "STATE_CHANGED",
      `The deletion of ${boxId} changed while this command ran (another \`deletions retry\` or a Delete re-sent or settled it, or the Boat was renamed): ${current === null ? "no deletion fence stands now" : `its fence is ${current.phase}${current.status ? `/${current.status}` : ""} now`}; this command sent nothing. Run \`${command(ctx, "reconcile")}\` to see what is still open.`,
      { boxId, expectedState: opts.expectedState },
    );
  }
  return { ok: true, action: "retryDeletion", boxId, pending: result.pending === true };
}
