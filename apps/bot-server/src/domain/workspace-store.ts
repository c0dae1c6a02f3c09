import { createHash, randomUUID } from "node:crypto";
import {
  isWorkspaceError,
  type WorkspaceRestore,
  type WorkspaceStore,
  type WorkspaceWriteOptions,
} from "@drydock/storage";
import type { Bot, BotRegistry } from "../bots.js";
import { HttpProblem } from "../http-errors.js";
import type { WorkspaceBackend } from "./workspace-backend.js";

/**
 * How many times a change is tried again when another change to the same workspace came between the read
 * of its head and its compare-and-set (each try re-reads the head and re-checks the bot).
 */
export const STORE_CHANGE_ATTEMPTS = 8;

const iso = (ms: number) => new Date(ms).toISOString();

/** A recorded restore as GET /v1/restores/:operationId shows it: the saga view's fields, one transaction. */
function restoreView(restore: WorkspaceRestore) {
  const events = [
    { seq: 1, phase: "created", timestamp: iso(restore.startedAt) },
    { seq: 2, phase: restore.state, timestamp: iso(restore.completedAt) },
  ];
  return {
    operationId: restore.operationId,
    phase: restore.state,
    basePhase: restore.state,
    seq: events.length,
    // There is no hash-chained log: the digest of the record the transaction wrote stands in for its head.
    headHash: `sha256:${createHash("sha256").update(JSON.stringify(restore)).digest("hex")}`,
    terminal: true,
    archived: false,
    checkpointId: restore.checkpointId,
    fromVersion: restore.fromVersion,
    toVersion: restore.toVersion,
    events,
  };
}

/**
 * The workspaces of the storage itself (postgres, decision 0031): nothing on local disk, any server reaches
 * any bot. A change reads the head's version, checks that the bot it was asked for is still the registry's
 * (the store does not know the registry), then compares-and-sets on that version: a bot deleted (its
 * workspace retired, which moves the head) or a concurrent change in between makes the compare-and-set fail
 * with nothing changed, and the change is tried again from the head's read. Every write is fenced by this
 * server's instance epoch inside its transaction (a server whose lease was lost changes nothing: 503
 * lease_lost). A restore is one transaction: it is never half applied and never needs a person.
 */
export function storeWorkspaces(
  store: WorkspaceStore,
  ctx: { readonly bots: Pick<BotRegistry, "get"> },
): WorkspaceBackend {
  async function onCurrentBot<T>(
    bot: Readonly<Bot>,
    change: (options: WorkspaceWriteOptions) => Promise<T>,
  ): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      const { version } = await store.head(bot.botId);
      const current = await ctx.bots.get(bot.botId);
      if (current?.createdAt !== bot.createdAt) {
        throw new HttpProblem(
          404,
          "bot_not_found",
          `No bot with id '${bot.botId}' (it was deleted meanwhile); nothing was changed.`,
        );
      }
      try {
        return await change({ expectedVersion: version });
      } catch (error) {
        const raced = isWorkspaceError(error) && error.code === "WORKSPACE_VERSION_CONFLICT";
        if (!raced || attempt >= STORE_CHANGE_ATTEMPTS) throw error;
      }
    }
  }

  const requireBot = async (botId: string): Promise<Readonly<Bot>> => {
    const bot = await ctx.bots.get(botId);
    if (!bot) throw new HttpProblem(404, "bot_not_found", `No bot with id '${botId}'.`);
    return bot;
  };

  return {
    kind: "store",
    async writeFile(bot, path, bytes) {
      const written = await onCurrentBot(bot, (options) => store.writeFile(bot.botId, path, bytes, options));
      return { bytes: written.file.size };
    },
    async readFile(botId, path) {
      return Buffer.from((await store.readFile(botId, path)).bytes);
    },
    async deleteFile(bot, path) {
      await onCurrentBot(bot, (options) => store.deleteFile(bot.botId, path, options));
    },
    async createCheckpoint(bot) {
      const checkpointId = `ckpt-${randomUUID()}`;
      const created = await onCurrentBot(bot, (options) =>
        store.checkpoint(bot.botId, checkpointId, options),
      );
      return { checkpointId: created.checkpointId, files: created.files, bytes: created.bytes };
    },
    async listCheckpoints(botId) {
      return (await store.listCheckpoints(botId)).map((c) => ({
        checkpointId: c.checkpointId,
        createdAt: iso(c.createdAt),
        kind: "user",
        files: c.files,
        bytes: c.bytes,
      }));
    },
    async restore(botId, checkpointId) {
      const bot = await requireBot(botId);
      if ((await store.getCheckpoint(botId, checkpointId)) === null) {
        throw new HttpProblem(404, "checkpoint_not_found", `This bot has no checkpoint '${checkpointId}'.`);
      }
      // One id for every try: a try whose compare-and-set failed recorded nothing under it.
      const operationId = `restore-${randomUUID()}`;
      const done = await onCurrentBot(bot, (options) =>
        store.restore(botId, checkpointId, operationId, options),
      );
      return { ok: true, operationId: done.operationId, phase: done.state, warning: null };
    },
    async findRestore(operationId) {
      const found = await store.getRestore(operationId);
      return found === null ? null : { botId: found.botId, restore: restoreView(found) };
    },
    async hasData(botId) {
      const head = await store.head(botId);
      return head.files.length > 0 || (await store.listCheckpoints(botId)).length > 0;
    },
    async created() {
      // Nothing to make: a bot's head is created by its first change.
    },
    async retire(botId, intent) {
      // A deleted bot's workspace only: if the id was taken again meanwhile, the workspace is that bot's.
      if (intent === "retire-deleted" && (await ctx.bots.get(botId)) !== null) return;
      await store.retireWorkspace(botId);
    },
    async unfinishedRetirements() {
      // A retirement is one transaction: it happened whole or not at all. One that failed (the database
      // unreachable) is not found from here: the store lists no heads; DELETE or a create under the id
      // retires it (see the README).
      return [];
    },
  };
}
