import { isLifecycleError, type ProvisionResult } from "@drydock/boat-lifecycle";
import type { FastifyBaseLogger } from "fastify";
import type { Bot } from "../bots.js";
import type { ServerContext } from "../context.js";
import { HttpProblem } from "../http-errors.js";
import { unconfirmedFence } from "./computer-view.js";

type Log = Pick<FastifyBaseLogger, "info">;

/**
 * A create never re-sends a deletion the person has not confirmed again: while the bot's previous Boat is
 * fenced for a deletion boat.dev refused (blocked) or never confirmed (prepared, nothing sending it), the
 * lifecycle would send that DELETE again before it creates. The computer's Delete does that, with the
 * Boat's name, as DELETE /v1/bots/:botId does; a create only waits for one that is running.
 */
export async function refuseUnsettledFence(
  ctx: Pick<ServerContext, "deleteJournal" | "now">,
  botId: string,
): Promise<void> {
  const fences = (await ctx.deleteJournal.boatDeletionSnapshot()).filter((r) => r.ownerBotId === botId);
  const blocked = fences.find((r) => r.phase === "blocked");
  const fence = blocked ?? unconfirmedFence(fences, ctx.now());
  if (fence === undefined) return;
  throw new HttpProblem(
    409,
    blocked ? "deletion_blocked" : "confirmation_required",
    `This bot's previous cloud computer (${fence.boxId}, '${fence.name}') ${
      blocked
        ? "was not deleted: boat.dev refused or lost the deletion"
        : "was being deleted, but boat.dev never confirmed it and nothing is sending it now"
    }, and a new computer is created only once it is gone. Delete it first: DELETE /v1/bots/${botId}/computer with { "confirmName": "${fence.name}" }, then create the computer again. Nothing was sent to boat.dev.`,
    { boxId: fence.boxId, name: fence.name },
  );
}

/**
 * A bot being deleted (a DELETE /v1/bots/:botId under way marked it) gets no new computer. Marks whose
 * process is proven dead (a server killed in its DELETE; on postgres: whose instance holds no lease by the
 * database's clock, whatever its pid), and this process's leftovers (only called while
 * this process holds the bot's exclusivity, so no DELETE of it runs here), are no deletion under way:
 * they are removed, and the bot is still wanted. Throws 409 `bot_deleting` while any other stands.
 */
export async function refuseDeleting(
  ctx: Pick<ServerContext, "bots">,
  bot: Readonly<Bot>,
  log: Log,
): Promise<void> {
  const { live, abandoned } = await ctx.bots.liveMarks(bot, { ownIdle: true });
  if (abandoned.length > 0) {
    await ctx.bots.dropAbandonedMarks(bot.botId, abandoned);
    log.info(
      { botId: bot.botId, markedBy: abandoned.map((m) => m.by.pid) },
      "removed the deletion marks of DELETEs that are no longer running",
    );
  }
  const first = live[0];
  if (first === undefined) return;
  throw new HttpProblem(
    409,
    "bot_deleting",
    `This bot is being deleted (since ${new Date(first.since).toISOString()}, by ${first.writer ? `server instance ${first.writer.id} (epoch ${first.writer.epoch}), whose lease still holds` : `process ${first.by.pid}, which still runs`}), so no computer is created for it; nothing was sent to boat.dev. Retry once that deletion has ended.`,
  );
}

/**
 * Creates the bot's computer (or finishes its earlier create), under this server's exclusivity for the
 * bot: only then is a mark of its own a leftover (no DELETE of the bot runs here), never the mark of its
 * own DELETE still running.
 */
export function provisionComputer(ctx: ServerContext, botId: string, log: Log): Promise<ProvisionResult> {
  return ctx.exclusivity.run(botId, async () => {
    const bot = await ctx.bots.get(botId);
    if (bot === null) throw new HttpProblem(404, "bot_not_found", `No bot with id '${botId}'.`);
    await refuseDeleting(ctx, bot, log);
    await refuseUnsettledFence(ctx, botId);
    try {
      // Asked once the create's key is journaled, before it is sent: a DELETE of the bot (in any process)
      // marks it before reading the create journal, so one of the two always sees the other.
      return await ctx.lifecycle.provision(botId, {
        stillWanted: async () => {
          const bot = await ctx.bots.get(botId);
          if (bot === null) return false;
          try {
            await refuseDeleting(ctx, bot, log);
            return true;
          } catch {
            return false;
          }
        },
        // Never the lifecycle's own re-send of a prior deletion: only the person's Delete, with the name.
        // Decided where the fence is read, so no check made before can go stale.
        resendDeletions: false,
      });
    } catch (error) {
      if (isLifecycleError(error) && error.code === "computer_deleting") {
        // A refused or unconfirmed deletion stands: say which, and the Delete that finishes it.
        await refuseUnsettledFence(ctx, botId);
      }
      if (isLifecycleError(error) && error.code === "provision_withdrawn") {
        const bot = await ctx.bots.get(botId);
        if (bot === null) throw new HttpProblem(404, "bot_not_found", `No bot with id '${botId}'.`);
        await refuseDeleting(ctx, bot, log);
        // Marked when asked, and no more now (that deletion kept the bot, or its server was killed).
        throw new HttpProblem(
          409,
          "bot_deleting",
          "A deletion of this bot was under way when its computer was about to be created, so nothing was sent to boat.dev. Retry.",
        );
      }
      throw error;
    }
  });
}

/** Deletes the bot's computer: the Boat its deletion fence, its create row or boat.dev names, in that order. */
export function deleteComputer(
  ctx: ServerContext,
  botId: string,
  confirmName: string,
): ReturnType<ServerContext["lifecycle"]["deleteBoat"]> {
  return ctx.exclusivity.run(botId, async () => {
    const deletion = (await ctx.deleteJournal.boatDeletionSnapshot()).find((r) => r.ownerBotId === botId);
    const boxId =
      deletion?.boxId ??
      (await ctx.createJournal.boatCreateRecoverySnapshot()).find((r) => r.botId === botId && r.boxId)
        ?.boxId ??
      (await ctx.lifecycle.findBoat(botId))?.boxId;
    if (!boxId) throw new HttpProblem(404, "computer_not_found", "This bot has no cloud computer.");
    return ctx.lifecycle.deleteBoat({ boxId, confirmName, ownerBotId: botId });
  });
}
