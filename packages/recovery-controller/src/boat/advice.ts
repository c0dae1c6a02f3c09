/**
 * The words of the Boat plan's advice: what a person can do about a create key still retried, an unnamed
 * Boat, a registry that cannot be read. Texts only; the rules that decide when each applies are in
 * rules.ts and plan.ts.
 */
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
