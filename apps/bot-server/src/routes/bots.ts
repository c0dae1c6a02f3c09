import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import { z } from "zod";
import { BOT_ID } from "../bots.js";
import type { ServerContext } from "../context.js";
import { deleteBot } from "../domain/bot-deletion.js";
import { botView } from "../domain/computer-view.js";
import { BIDI_CONTROLS } from "../workspace-files.js";
import { decodeCursor, encodeCursor, NextCursor, PageQuery } from "./pagination.js";
import { BotIdParam, requireBot } from "./params.js";
import { answers, BotBody, ComputerBody, okBody } from "./schemas.js";

const CreateBotBody = z
  .object({
    name: z
      .string()
      .trim()
      .min(1, "must not be empty")
      .max(200)
      .refine((name) => !/[\u0000-\u001f\u007f-\u009f]/.test(name), "must not contain control characters")
      .refine((name) => !BIDI_CONTROLS.test(name), "must not contain bidirectional text control characters"),
    botId: z.string().regex(BOT_ID, "must be 1–120 letters, digits, '_' or '-'").optional(),
  })
  .strict();

/** Needed only while the bot has a live Boat (then it must name it); a bot without one takes no body. */
// `{}` is the same as no body: the route then answers 409 confirmation_required with the name to send.
const DeleteBotBody = z
  .object({ confirmName: z.string().min(1).max(100).optional() })
  .strict()
  .nullish();

function randomBotId(): string {
  return `bot_${crypto.randomUUID().replaceAll("-", "").slice(0, 16)}`;
}

/** POST /v1/bots */
const createBotSchema = {
  schema: {
    summary: "Create a bot",
    body: CreateBotBody,
    response: answers({ 201: okBody({ bot: BotBody }) }),
  },
};

/** GET /v1/bots */
const listBotsSchema = {
  schema: {
    summary: "List bots, each with its computer (one page, botId ascending)",
    querystring: PageQuery,
    response: answers({
      200: okBody({ bots: z.array(BotBody.extend({ computer: ComputerBody })), nextCursor: NextCursor }),
    }),
  },
};

/** GET /v1/bots/:botId */
const getBotSchema = {
  schema: {
    summary: "One bot and its computer",
    params: BotIdParam,
    response: answers({ 200: okBody({ bot: BotBody.extend({ computer: ComputerBody }) }) }),
  },
};

/** DELETE /v1/bots/:botId */
const deleteBotSchema = {
  schema: {
    summary: "Delete a bot once its Boat is provably gone",
    params: BotIdParam,
    body: DeleteBotBody,
    response: answers({
      200: okBody({ workspaceRetired: z.boolean(), warning: z.string().optional() }),
    }),
  },
};

/** A page of GET /v1/bots read from the registry and the journals, rendered (or re-sent) by the memo. */
async function renderPage(
  ctx: ServerContext,
  key: string,
  token: string | undefined,
  limit: number,
  cursor: string | undefined,
): Promise<Buffer> {
  const after = decodeCursor(cursor);
  const [page, journals] = await Promise.all([
    ctx.bots.page({ ...(after === undefined ? {} : { after }), limit }),
    ctx.readJournals(),
  ]);
  const now = ctx.now();
  return ctx.listing.body(
    key,
    token,
    page.bots,
    journals,
    ctx.exclusivity.version,
    now,
    (botId) => ctx.computerView(botId, journals, now),
    page.next === null ? null : encodeCursor(page.next),
  );
}

/** POST/GET /v1/bots, GET/DELETE /v1/bots/:botId. */
export const botRoutes: FastifyPluginAsyncZod<ServerContext> = async (app, ctx) => {
  app.post("/v1/bots", createBotSchema, async (request, reply) => {
    const botId = request.body.botId ?? randomBotId();
    // The id of a deleted bot whose workspace was never retired (a server before retirement existed, or a
    // deletion that stopped half-way): retired now, so the new bot starts empty.
    const bot = await ctx.exclusivity.run(botId, async () => {
      if (
        BOT_ID.test(botId) &&
        (await ctx.bots.get(botId)) === null &&
        (await ctx.workspace.hasData(botId))
      ) {
        await ctx.workspace.retire(botId, "create");
      }
      return ctx.bots.create({ botId, name: request.body.name });
    });
    await ctx.workspace.created(bot.botId);
    return reply.code(201).send({ ok: true, bot: botView(bot) });
  });

  // Re-sent from the listing memo while nothing it was rendered from changed (see ListingMemo): without
  // reading a row while the storage's change token stands still.
  // Pages are botId ascending and a cursor is the last botId answered: a bot that existed throughout is on
  // exactly one page whatever is created or deleted between pages (ids are unique and never reordered).
  // Not async: a page sent from the memo takes no promise, only one that is read and rendered does.
  app.get("/v1/bots", listBotsSchema, (request, reply) => {
    reply.type("application/json; charset=utf-8");
    const { limit, cursor } = request.query;
    // Only a cursor this server decoded and answered with is ever a key of a remembered page.
    const key = `${limit}:${cursor ?? ""}`;
    const token = ctx.changeToken();
    const fresh = ctx.listing.fresh(key, token, ctx.exclusivity.version, ctx.now());
    if (fresh !== undefined) {
      reply.send(fresh);
      return;
    }
    return renderPage(ctx, key, token, limit, cursor);
  });

  app.get("/v1/bots/:botId", getBotSchema, async (request) => {
    const bot = await requireBot(ctx, request.params.botId, { peek: true });
    return {
      ok: true,
      bot: { ...botView(bot), computer: ctx.computerView(bot.botId, await ctx.readJournals()) },
    };
  });

  app.delete("/v1/bots/:botId", deleteBotSchema, async (request) =>
    deleteBot(ctx, request.params.botId, request.body?.confirmName, request.log),
  );
};
