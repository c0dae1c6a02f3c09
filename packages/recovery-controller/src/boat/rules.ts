/** Why an adopt would be refused: the rule the Boat plan and the adopt action share. */
import type { RecoveryDeletionRecord } from "../ports.js";
import { keyWindowRefusal, registryUnreadableAdvice } from "./advice.js";
import {
  type BoatContext,
  type CreateRow,
  command,
  ownsName,
  type Registry,
  registrationOf,
} from "./context.js";
import { keyStillRetried } from "./window.js";

/**
 * Why `adopt(botId, boxId)` would refuse, from the same facts it re-reads; null when it would not. The
 * plan prints an adopt command only where this is null, so a printed command never merely refuses. `early`
 * refusals hold whether or not the Boat exists (adopt checks them before its existence).
 */
export function adoptRefusal(
  ctx: BoatContext,
  botId: string,
  boxId: string,
  name: string | null,
  rows: readonly CreateRow[],
  fences: readonly RecoveryDeletionRecord[],
  at: number,
  registry: Registry,
): { early: boolean; message: string } | null {
  const other = rows.find((candidate) => candidate.boxId === boxId && candidate.botId !== botId);
  if (other) {
    return {
      early: true,
      message: `Boat ${boxId} is remembered for bot ${other.botId}; it cannot be adopted by ${botId}.`,
    };
  }
  if (fences.some((record) => record.boxId === boxId || record.ownerBotId === botId)) {
    return {
      early: true,
      message: `A deletion fence stands for Boat ${boxId} or bot ${botId}; settle it first (\`${command(ctx, "deletions", "list")}\`).`,
    };
  }
  const row = rows.find((candidate) => candidate.botId === botId);
  if (row?.boxId === boxId && row.resolved) return null; // already this bot's Boat: nothing to refuse
  if (row?.boxId !== undefined && row.boxId !== boxId) {
    return {
      early: false,
      message: `Bot ${botId} already has Boat ${row.boxId} recorded; adopting ${boxId} would orphan it. Settle that one first.`,
    };
  }
  // A key still retried blocks adopting an unnamed Boat or one with the bot's name (a foreign name is
  // refused for its name, below).
  if (row !== undefined && keyStillRetried(row, at) && (name === null || ownsName(ctx, botId, name))) {
    return { early: false, message: keyWindowRefusal(ctx, row, boxId, name, at) };
  }
  // An unnamed Boat is only this bot's when the journal remembers its id for this bot: boat.dev answered
  // that bot's create with it. Anything else could be another bot's or another installation's.
  if (!ownsName(ctx, botId, name) && !(name === null && row?.boxId === boxId)) {
    return {
      early: false,
      message: `Boat ${boxId} is named ${name === null ? "nothing" : name}, not bot ${botId}'s name ${ctx.lifecycle.boatNameFor(botId)}; only a Boat with the bot's deterministic name (or its remembered, unnamed Boat) can be adopted.`,
    };
  }
  const registered = registrationOf(registry, botId);
  if (registered === false) {
    return {
      early: false,
      message: `Bot ${botId} is not registered (deleted, or never created here): adopting Boat ${boxId} would record a billed Boat for a bot that no tool uses or deletes. If the bot is still wanted, create it again under the same id (POST /v1/bots with botId "${botId}"), then run \`${command(ctx, "reconcile")}\` for the adopt command; if not, delete Boat ${boxId} in boat.dev.`,
    };
  }
  if (registered === "unknown") return { early: false, message: registryUnreadableAdvice(ctx, registry) };
  return null;
}
