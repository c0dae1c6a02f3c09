/**
 * The words of the Boat plan's advice: what a person can do about a create key still retried, an unnamed
 * Boat, a registry that cannot be read. Texts only; the rules that decide when each applies are in
 * rules.ts and plan.ts.
 */
import { DELETE_IN_FLIGHT_MS } from "@drydock/boat-lifecycle";
import type { RecoveryDeletionRecord } from "../ports.js";
import { type BoatContext, type CreateRow, command, type Registry } from "./context.js";
import { createWindowLeftMs, keyStillRetried } from "./window.js";

/** "3 h 12 min", "45 s": a wait as a person reads it. */
export function humanWait(ms: number): string {
  const seconds = Math.max(1, Math.ceil(ms / 1_000));
  if (seconds < 120) return `${seconds} s`;
  const minutes = Math.ceil(seconds / 60);
  if (minutes < 120) return `${minutes} min`;
  return `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}

/** Why nothing is adopted while the bot registry cannot be read. */
export function registryUnreadableAdvice(ctx: BoatContext, registry: Registry): string {
  const reason = registry.kind === "unreadable" ? ` (${registry.reason})` : "";
  return `The bot registry could not be read${reason}, so whether this bot still exists is unknown; nothing is adopted for a bot that may be deleted. Make the registry readable (\`bots.json\` in the data directory), then run \`${command(ctx, "reconcile")}\` again.`;
}

/** The refusal (and the way out) for a Boat the bot's still-retried create key blocks from adoption. */
export function keyWindowRefusal(
  ctx: BoatContext,
  row: CreateRow,
  boxId: string,
  name: string | null,
  at: number,
): string {
  const left = createWindowLeftMs(row, at);
  const started = new Date(row.createdAt).toISOString();
  const until = new Date(at + left).toISOString();
  const head = `Bot ${row.botId} has a create request (started ${started}) whose key drydock still retries for ${humanWait(left)}, until ${until} (boat.dev's 24-hour window less a 1-hour margin); adopting Boat ${boxId} now would drop that key, the only way to find a Boat created under it.`;
  if (name === null) {
    return `${head} Retry provisioning through the server instead (POST /v1/bots/${row.botId}/computer): it reuses the key, and if this Boat is the one the request created, boat.dev answers with it and drydock names and records it.`;
  }
  return `${head} Provisioning is paused as well while Boat ${boxId} carries the bot's name (a retry could bill a second Boat). Check boat.dev for an unnamed Boat created around ${started}: if there is one, two Boats exist for this bot; keep the one that holds its data, delete the other in boat.dev, then run \`${command(ctx, "reconcile")}\` again. If there is none, run \`${command(ctx, "reconcile")}\` again after ${until}: it then offers the adopt command for Boat ${boxId}.`;
}

/** What to do about an unnamed Boat while create requests without a Boat id exist. */
export function unnamedAdvice(
  ctx: BoatContext,
  keyOnly: readonly CreateRow[],
  at: number,
  pausedBy: ReadonlyMap<string, string>,
): string {
  const parts = keyOnly.map((row) => {
    const started = new Date(row.createdAt).toISOString();
    const named = pausedBy.get(row.botId);
    if (named !== undefined && keyStillRetried(row, at)) {
      return `If it is the Boat of bot ${row.botId}'s create request (started ${started}), two Boats exist for that bot, and provisioning it is paused while Boat ${named} carries its name: see the line for Boat ${named}.`;
    }
    return keyStillRetried(row, at)
      ? `If it is the Boat of bot ${row.botId}'s create request (started ${started}), retry provisioning through the server (POST /v1/bots/${row.botId}/computer): it reuses the request's key, boat.dev answers with the Boat that key created, and drydock names and records it. Leave its name as it is meanwhile: a Boat carrying the bot's name pauses provisioning.`
      : `If it is the Boat of bot ${row.botId}'s create request (started ${started}; its key is no longer sent), rename it to ${ctx.lifecycle.boatNameFor(row.botId)} in boat.dev, then run \`${command(ctx, "reconcile")}\` again: it offers the adopt command.`;
  });
  return `${parts.join(" ")} Otherwise leave it.`;
}

/** What a create row still inside its key's window asks of a person. */
export function inWindowSummary(botId: string, ageMs: number, inFlightLeftMs: number): string {
  return inFlightLeftMs > 0
    ? `Bot ${botId} has a create request started ${Math.round(ageMs / 1000)} s ago whose answer is not recorded yet: a provisioning call may still be running.`
    : `Bot ${botId} has a create request whose answer was never recorded; boat.dev may still own a Boat for its key, and nothing retries it by itself (unless a provisioning call for this bot is running right now, retry provisioning).`;
}

export function inWindowAdvice(botId: string): string {
  return `Retry provisioning through the server (POST /v1/bots/${botId}/computer) within the window: it reuses the same key and cannot create a second Boat.`;
}

/** A create row whose key is no longer sent: find its Boat by hand. */
export function expiredCreateAdvice(ctx: BoatContext, row: CreateRow): string {
  return `Look in boat.dev for an unnamed Boat created around ${new Date(row.createdAt).toISOString()}. If you find it, rename it to ${ctx.lifecycle.boatNameFor(row.botId)} and run \`${command(ctx, "creates", "adopt", row.botId, "<boxId>")}\`.`;
}

/** A Boat recorded for a bot that is not registered: create the bot again, or delete the Boat. */
export function unregisteredAdvice(ctx: BoatContext, row: CreateRow): string {
  return `If bot ${row.botId} is still wanted, create it again under the same id (POST /v1/bots with botId "${row.botId}"): the Boat is then its computer again${row.resolved ? "" : ` (run \`${command(ctx, "reconcile")}\` for the adopt command)`}. Otherwise delete Boat ${row.boxId} in boat.dev (check first that nothing on it is needed), then run \`${command(ctx, "reconcile")}\`: once boat.dev says the Boat is gone it prints the \`${command(ctx, "creates", "retire", row.botId)}\` command that retires this record.`;
}

/** A remembered Boat that carries a name not the bot's. */
export function foreignNameAdvice(ctx: BoatContext, botId: string): string {
  return `Check the Boat in boat.dev: rename it to ${ctx.lifecycle.boatNameFor(botId)} if it is this bot's, then run \`${command(ctx, "reconcile")}\` again.`;
}

/** A prepared fence stamped ahead of this clock: its DELETE counts as on the wire until the clock catches up. */
export function skewedFenceAdvice(ctx: BoatContext, record: RecoveryDeletionRecord, aheadMs: number): string {
  return `The deletion fence was stamped ${Math.ceil(aheadMs / 1000)} s ahead of this machine's clock, so its DELETE counts as still on the wire until this clock reaches ${new Date(record.updatedAt + DELETE_IN_FLIGHT_MS).toISOString()} (a retry before then is refused: it could be blind). Check the clocks of the machines that use this data directory; once they agree, run \`${command(ctx, "reconcile")}\` again.`;
}

/** A fence prepared moments ago: its DELETE may still be on the wire. */
export function inFlightFenceAdvice(ctx: BoatContext, inFlightLeftMs: number): string {
  return `The deletion was prepared ${Math.round((DELETE_IN_FLIGHT_MS - inFlightLeftMs) / 1000)} s ago and its DELETE may still be on the wire (a retry now would be blind, and is refused). Wait ${Math.ceil(inFlightLeftMs / 1000)} s, then run \`${command(ctx, "reconcile")}\` again.`;
}

/** A fenced Boat boat.dev shows under another name: its DELETE is not sent until a person settles that. */
export function renamedFenceAdvice(
  ctx: BoatContext,
  record: RecoveryDeletionRecord,
  renamed: string | null,
): string {
  return `boat.dev shows Boat ${record.boxId} named ${renamed === null ? "nothing (unnamed)" : renamed}, not the fenced ${record.name}, so drydock will not send its DELETE (it would delete something nobody confirmed). Rename it back to ${record.name} in boat.dev, or delete it there; then run \`${command(ctx, "reconcile")}\` again: it prints the command that finishes the fence (\`deletions retry\` once the name is back, \`deletions reconcile\` once boat.dev says the Boat is gone).`;
}

/** The bot-id part of this installation's deterministic name (`ogb-<scope>-<slug>-<hash>`), else null. */
function nameSlug(name: string): string | null {
  return /^ogb-[0-9a-f]{12}-([a-z0-9]{1,8})-[0-9a-f]{6}$/.exec(name)?.[1] ?? null;
}

/** A Boat with this installation's name that no known bot id matches: how to find its bot. */
export function unclaimedAdvice(ctx: BoatContext, boxId: string, name: string | null): string {
  const slug = name === null ? null : nameSlug(name);
  return `Its name is this installation's deterministic name for a bot${slug === null ? "" : ` whose id begins with "${slug}" (lower-cased, letters and digits only)`} that no journal or known bot matches. Run \`${command(ctx, "creates", "adopt", "<botId>", boxId)}\` with that bot's id: the preview checks the name and prints the command to paste. If no bot needs it, delete it in boat.dev.`;
}

/** A create key inside its window whose provisioning is refused while a Boat carries the bot's name. */
export function pausedProvisioningAdvice(botId: string, boxId: string): string {
  return `Provisioning bot ${botId} is paused while boat.dev has Boat ${boxId} carrying its name and this request is open, so retrying it would be refused. See the line for Boat ${boxId}.`;
}
