import { z } from "zod";
import { BOT_ID, type Bot } from "../bots.js";
import type { ServerContext } from "../context.js";
import { HttpProblem } from "../http-errors.js";

/** The `:botId` of every per-bot route. */
export const BotIdParam = z.object({
  botId: z.string().regex(BOT_ID, "must be 1–120 letters, digits, '_' or '-'"),
});

/** `peek` for read-only routes: a view need not wait for a writer (see json-journal's `peek`). */
export async function requireBot(
  ctx: Pick<ServerContext, "bots">,
  botId: string,
  options?: { peek: true },
): Promise<Readonly<Bot>> {
  const bot = await ctx.bots.get(botId, options);
  if (!bot) throw new HttpProblem(404, "bot_not_found", `No bot with id '${botId}'.`);
  return bot;
}
