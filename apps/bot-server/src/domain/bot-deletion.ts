import type { BoatCreateJournal } from "@drydock/boat-create-journal";
import type { BoatDeleteJournal } from "@drydock/boat-delete-journal";
import type { BoatLifecycle } from "@drydock/boat-lifecycle";
import type { FastifyBaseLogger } from "fastify";
import type { BotRegistry } from "../bots.js";
import type { ServerContext } from "../context.js";
import { HttpProblem } from "../http-errors.js";
import { unconfirmedFence } from "./computer-view.js";
import { refuseUnsettledRestores } from "./workspace-guards.js";

/** What deciding a bot's deletion after its Boat reads and acts on: the journals, the lifecycle, the bots. */
export interface BotDeletionContext {
  readonly createJournal: Pick<BoatCreateJournal, "boatCreateRecoverySnapshot" | "retireDeletedBoatCreate">;
  readonly deleteJournal: Pick<BoatDeleteJournal, "boatDeletionSnapshot" | "hasPendingBoatDeletionForBot">;
  readonly lifecycle: Pick<BoatLifecycle, "reconcileDeletion" | "deleteBoat" | "findBoat" | "boatNameFor">;
  readonly bots: Pick<BotRegistry, "remove">;
  /** The Boat journals' clock (a fence's in-flight window is judged on it). */
  now(): number;
}

/**
 * Removes a bot whose Boat is provably gone (deleting it first, with the person's confirmation), or throws
 * why it keeps it: a create unresolved, a deletion pending, blocked or unconfirmed, a live Boat without
 * confirmation. The caller marked the bot as being deleted.
 */
export async function removeBotAfterItsBoat(
  ctx: BotDeletionContext,
  botId: string,
  confirmName: string | undefined,
): Promise<void> {
  const creates = (await ctx.createJournal.boatCreateRecoverySnapshot()).filter((r) => r.botId === botId);
  if (creates.some((r) => !r.resolved)) {
    throw new HttpProblem(
      409,
      "create_unresolved",
      "Finish reconciling this bot's pending cloud computer creation before deleting it — check boat.dev, then retry the computer setup.",
    );
  }
  if (await ctx.deleteJournal.hasPendingBoatDeletionForBot(botId)) {
    await settlePendingDeletions(ctx, botId, confirmName);
  }
  // The bot's Boat must be provably gone before the bot goes: a bot deleted first would leave a billable
  // Boat nobody owns. findBoat reads the Boat its create row remembers directly, and otherwise lists
  // boat.dev for the bot's names: a Boat no journal knows (a data directory restored from an older
  // backup, a Boat made or renamed by hand) carries them too, and skipping the look for a bot without a
  // remembered Boat deleted such bots with their Boat still billed. Without boat.dev's answer the bot
  // stays (the provider error answers).
  const remembered = (await ctx.createJournal.boatCreateRecoverySnapshot()).filter(
    (r) => r.botId === botId && r.boxId !== undefined,
  );
  const boat = await ctx.lifecycle.findBoat(botId);
  if (!boat) {
    // Its remembered Boat is proven gone (findBoat read it directly: 404/410): the row goes too, or a new
    // bot under this id would be shown that Boat as its computer.
    for (const row of remembered) await ctx.createJournal.retireDeletedBoatCreate(row.boxId!);
  } else {
    // A live Boat is deleted only on the same confirmation DELETE /v1/bots/:botId/computer asks for; a
    // wrong name is refused by the lifecycle (confirmation_mismatch) before anything is sent.
    if (confirmName === undefined) {
      // The name the lifecycle compares confirmName with: the Boat's own, or for an unnamed Boat the
      // bot's scoped Boat name (deleteBoat falls back to it for a Boat of this bot).
      const name = boat.name ?? ctx.lifecycle.boatNameFor(botId);
      throw new HttpProblem(
        409,
        "confirmation_required",
        `This bot still has a cloud computer (${boat.boxId}, ${boat.name ? "named" : "unnamed; confirm it as"} '${name}'). Deleting the bot deletes it too: send { "confirmName": "${name}" }, or delete the computer first (DELETE /v1/bots/${botId}/computer). Nothing was deleted.`,
        { boxId: boat.boxId, name },
      );
    }
    const result = await ctx.lifecycle.deleteBoat({ boxId: boat.boxId, confirmName, ownerBotId: botId });
    if (result.pending) {
      throw new HttpProblem(
        409,
        "deletion_pending",
        "The cloud computer deletion has started but is still finishing. The bot was kept; retry in a moment.",
      );
    }
  }
  // The Boat is gone, and no restore is unsettled: the bot goes, then (the caller) its workspace is
  // retired (kept). A retirement that fails then (a live edit holds the workspace, a disk error) is said
  // so, and finished by DELETE /v1/bots/:botId again or when the id is taken again.
  await ctx.bots.remove(botId);
}

/** Each deletion fence of the bot reconciled to confirmed, or the reason the bot is kept thrown. */
async function settlePendingDeletions(
  ctx: BotDeletionContext,
  botId: string,
  confirmName: string | undefined,
): Promise<void> {
  for (const record of (await ctx.deleteJournal.boatDeletionSnapshot()).filter(
    (r) => r.ownerBotId === botId,
  )) {
    let outcome = await ctx.lifecycle.reconcileDeletion(record.boxId);
    if (outcome === "pending" && unconfirmedFence([record], ctx.now())) {
      // Its DELETE was never confirmed and nothing sends it now: reconciling never moves it. The
      // person's confirmation sends it again (the lifecycle re-checks the Boat and its name first).
      if (confirmName === undefined) {
        throw new HttpProblem(
          409,
          "confirmation_required",
          `This bot's cloud computer (${record.boxId}, '${record.name}') was being deleted, but boat.dev never confirmed the deletion and nothing is sending it now. Deleting the bot sends it again: send { "confirmName": "${record.name}" } (or delete the computer first: DELETE /v1/bots/${botId}/computer). Nothing was deleted.`,
          { boxId: record.boxId, name: record.name },
        );
      }
      const resent = await ctx.lifecycle.deleteBoat({ boxId: record.boxId, confirmName, ownerBotId: botId });
      outcome = resent.pending ? "pending" : "confirmed";
    }
    if (outcome === "blocked") {
      // Reconciling a blocked fence never moves it: only a new DELETE does, which the person asks for.
      throw new HttpProblem(
        409,
        "deletion_blocked",
        `boat.dev did not delete this bot's cloud computer (${record.boxId}); the bot was kept. Check boat.dev, then retry the deletion with DELETE /v1/bots/${botId}/computer and { "confirmName": "${record.name}" } before deleting the bot.`,
        { boxId: record.boxId, name: record.name },
      );
    }
    if (outcome !== "confirmed") {
      throw new HttpProblem(
        409,
        "deletion_pending",
        `The cloud computer deletion has started but is still finishing. The bot was kept; retry in a moment. If it stays pending, check GET /v1/bots/${botId}/computer.`,
        { boxId: record.boxId },
      );
    }
  }
}

/** What DELETE /v1/bots/:botId answers when the bot (or only its leftover workspace) is gone. */
export type BotDeletion =
  | { ok: true; workspaceRetired: true }
  | { ok: true; workspaceRetired: false; warning: string };

/**
 * Deletes a bot after its Boat, then retires its workspace; or, for a bot already deleted whose workspace
 * could not be retired when it went, retries that retirement (so a generated id, never taken again, is
 * not left with its data in place). Throws 404 `bot_not_found` when neither the bot nor any of its data is
 * there, and every refusal of `removeBotAfterItsBoat` (the bot is kept then, its own deletion mark
 * removed).
 */
export async function deleteBot(
  ctx: ServerContext,
  botId: string,
  confirmName: string | undefined,
  log: Pick<FastifyBaseLogger, "warn">,
): Promise<BotDeletion> {
  if ((await ctx.bots.get(botId)) === null) {
    if (!(await ctx.workspace.hasData(botId)))
      throw new HttpProblem(404, "bot_not_found", `No bot with id '${botId}'.`);
    return ctx.exclusivity.run(botId, async () => {
      await ctx.workspace.retire(botId, "retire-deleted");
      return { ok: true, workspaceRetired: true } as const;
    });
  }
  return ctx.exclusivity.run(botId, async (): Promise<BotDeletion> => {
    await refuseUnsettledRestores(ctx, botId, "delete");
    // Marked before the create journal is read: a computer create in another process asks after
    // journaling its key whether the bot is still wanted, so it sees this mark (and sends nothing), or
    // the reads below see its key. Cleared again when the bot is kept.
    const mark = await ctx.bots.markDeleting(botId);
    if (mark === null) throw new HttpProblem(404, "bot_not_found", `No bot with id '${botId}'.`);
    try {
      await removeBotAfterItsBoat(ctx, botId, confirmName);
    } catch (error) {
      // Only this deletion's own mark: other DELETEs under way keep theirs.
      await ctx.bots
        .unmarkDeleting(botId, mark)
        .catch((unmark: unknown) =>
          log.warn(
            { err: unmark, botId },
            "the bot was kept, but its deletion mark could not be removed; the next computer create of this bot on this server removes it",
          ),
        );
      throw error;
    }
    try {
      await ctx.workspace.retire(botId, "retire-deleted");
    } catch (error) {
      log.warn({ err: error, botId }, "the deleted bot's workspace could not be retired yet");
      return {
        ok: true,
        workspaceRetired: false,
        warning: `The bot was deleted, but its workspace could not be retired yet (${ctx.scrubPaths(error instanceof Error ? error.message : String(error))}); the retirement is unfinished (anything already moved is under workspaces/.retired/ and restore-sagas/.retired/ of the data directory, the rest is where it was) until DELETE /v1/bots/${botId} is sent again or the id is taken again.`,
      };
    }
    return { ok: true, workspaceRetired: true };
  });
}
