import { randomUUID } from "node:crypto";
import { createSystemIdentity, judgeOwnerLiveness } from "@drydock/file-lock";
import {
  type Bot,
  BotRegistryError,
  type BotRegistryStore,
  type DeletionMark,
  type MarkVerdict,
} from "./bots.js";

/**
 * The bot registry's rules, shared by every backend: each backend reads the bot's row, runs one of these pure
 * steps, and writes the result in one transaction. The refusals keep the bot server's wording.
 */

/** A DELETE's marks per bot at most (the schema's bound). */
export const MAX_DELETION_MARKS = 64;

export function botExists(botId: string): BotRegistryError {
  return new BotRegistryError("BOT_EXISTS", `A bot with id '${botId}' already exists.`);
}

export function tooManyBots(limit: number): BotRegistryError {
  return new BotRegistryError(
    "TOO_MANY_BOTS",
    `This installation already has ${limit} bots; delete one first.`,
  );
}

const identity = createSystemIdentity();

/** This process as file-lock records a lock's owner, so its liveness can be judged the same way. */
export function thisProcess(): DeletionMark["by"] {
  const host = identity.hostname();
  const bootId = identity.bootId();
  const startTime = identity.processStartTime(process.pid);
  const pidNamespace = identity.pidNamespace?.();
  return {
    pid: process.pid,
    ...(host === undefined ? {} : { host }),
    ...(bootId === undefined ? {} : { bootId }),
    ...(startTime === undefined ? {} : { startTime }),
    ...(pidNamespace === undefined ? {} : { pidNamespace }),
  };
}

/** A new bot row. */
export function newBot(botId: string, name: string, now: number): Bot {
  return { botId, name, createdAt: now };
}

/**
 * The bot with this registry's new mark added. A server runs one DELETE per bot at a time, so an own mark
 * already there is a leftover and is replaced. BOT_BUSY past 64 marks. `writer`: the fenced writer's
 * instance (postgres), recorded so the mark is judged by its lease, never by pid.
 */
export function withMark(
  bot: Readonly<Bot>,
  instance: string,
  now: number,
  writer?: { id: string; epoch: number } | null,
): { bot: Bot; mark: DeletionMark } {
  const mark: DeletionMark = {
    id: randomUUID(),
    instance,
    since: now,
    by: thisProcess(),
    ...(writer ? { writer: { id: writer.id, epoch: writer.epoch } } : {}),
  };
  const kept = (bot.deletions ?? []).filter((m) => m.instance !== instance);
  if (kept.length >= MAX_DELETION_MARKS) {
    throw new BotRegistryError("BOT_BUSY", "Too many deletions of this bot are under way.");
  }
  return { bot: { ...bot, deletions: [...kept, mark] }, mark };
}

/** The bot without the marks whose ids are given, or null when none of them is there (nothing to write). */
export function withoutMarks(bot: Readonly<Bot>, ids: readonly string[]): Bot | null {
  const kept = (bot.deletions ?? []).filter((m) => !ids.includes(m.id));
  if (kept.length === (bot.deletions ?? []).length) return null;
  const { deletions: _all, ...rest } = bot;
  return kept.length === 0 ? rest : { ...rest, deletions: kept };
}

/** Whether a mark's process is proven dead (file-lock's judgement: another host's is never "dead"). */
export function processGone(mark: DeletionMark): boolean {
  return judgeOwnerLiveness(mark.by) === "dead";
}

/**
 * `liveMarks` of the contract: a mark is abandoned when it is this idle registry's own, or when `gone` says
 * so (by default: its process is proven dead, file-lock's judgement; a backend with instances passes its own).
 */
export function judgeMarks(
  bot: Readonly<Bot>,
  instance: string,
  options: { ownIdle: boolean },
  gone: (mark: DeletionMark) => boolean = processGone,
): MarkVerdict {
  const live: DeletionMark[] = [];
  const abandoned: DeletionMark[] = [];
  for (const mark of bot.deletions ?? []) {
    const abandon = (options.ownIdle && mark.instance === instance) || gone(mark);
    (abandon ? abandoned : live).push(mark);
  }
  return { live, abandoned };
}

/** botId ascending, as `page()` and the export order them (bot ids are ASCII: code-unit order is byte order). */
export function byBotId(a: { botId: string }, b: { botId: string }): number {
  return a.botId < b.botId ? -1 : a.botId > b.botId ? 1 : 0;
}

/** The three mark methods every backend shares, given its `dropMarks(botId, ids)` (one transaction). */
export function markMethods(
  instance: string,
  dropMarks: (botId: string, ids: readonly string[]) => Promise<void>,
): Pick<BotRegistryStore, "unmarkDeleting" | "dropAbandonedMarks" | "liveMarks"> {
  return {
    unmarkDeleting: (botId, mark) => dropMarks(botId, [mark.id]),
    dropAbandonedMarks: (botId, marks) =>
      dropMarks(
        botId,
        marks.map((m) => m.id),
      ),
    liveMarks: async (bot, options) => judgeMarks(bot, instance, options),
  };
}
