import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { type BoatCreateJournal, isBoatCreateJournalError } from "@drydock/boat-create-journal";
import { type BoatDeleteJournal, isBoatDeleteJournalError } from "@drydock/boat-delete-journal";
import { createBoatLifecycle } from "@drydock/boat-lifecycle";
import { BOTS_FILE, CREATE_JOURNAL_FILE, DELETE_JOURNAL_FILE, WORKSPACES_DIR } from "@drydock/facts";
import {
  type BoatRecovery,
  createBoatRecovery,
  type PlanItem,
  planItemWaitMs,
} from "@drydock/recovery-controller";
import type { CommandContext } from "../context.js";
import { table } from "../render.js";
import { storageLocation } from "../storage.js";

/**
 * A journal whose refusals name its file: "recovery state is unreadable" alone does not tell an operator
 * which of the data directory's files to look at. The error stays the journal's own (same code, same exit).
 */
function namingFile<T extends object>(journal: T, file: string): T {
  return new Proxy(journal, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (typeof value !== "function") return value;
      return async (...args: unknown[]) => {
        try {
          return await value.apply(target, args);
        } catch (error) {
          if (
            (isBoatCreateJournalError(error) || isBoatDeleteJournalError(error)) &&
            !error.message.includes(file)
          ) {
            error.message = `${file}: ${error.message}`;
          }
          throw error;
        }
      };
    },
  });
}

/** The Boat journals of the data directory's storage, their refusals naming where they live. */
export async function journals(ctx: CommandContext): Promise<{
  createJournal: BoatCreateJournal;
  deleteJournal: BoatDeleteJournal;
}> {
  const storage = await ctx.storage();
  const where = (file: string) =>
    storage.kind === "file" ? path.join(ctx.dataDir, file) : storageLocation(storage);
  return {
    createJournal: namingFile(storage.createJournal, where(CREATE_JOURNAL_FILE)),
    deleteJournal: namingFile(storage.deleteJournal, where(DELETE_JOURNAL_FILE)),
  };
}

/**
 * The bot ids of the server's registry (`<dataDir>/bots.json`), read without its lock (the server replaces
 * it atomically). They tell whose deterministic name a Boat no journal knows carries, and whether the bot
 * of a recorded or adoptable Boat still exists. No file: no bots in a bot server's data directory, else no
 * registry at all (null; nothing is judged by it). A file that cannot be read or is not a registry this drydock reads throws: never taken
 * as "no bots" (the recovery then refuses to adopt and says it could not check).
 */
function registryBotIds(dataDir: string): string[] | null {
  const file = path.join(dataDir, BOTS_FILE);
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (error) {
    // No file in a bot server's data directory (it makes workspaces/ at every start) is a registry with no
    // bots, as the server reads it: the verdict is the same with or without the server (decision 22).
    // Elsewhere (a library user's directory) there is no registry, and nothing is judged by one.
    if ((error as NodeJS.ErrnoException).code === "ENOENT") {
      return existsSync(path.join(dataDir, WORKSPACES_DIR)) ? [] : null;
    }
    throw new Error(`${file} could not be read: ${(error as Error).message}`);
  }
  let doc: { version?: unknown; bots?: unknown };
  try {
    doc = JSON.parse(text) as { version?: unknown; bots?: unknown };
  } catch {
    throw new Error(`${file} is not valid JSON`);
  }
  if (doc === null || typeof doc !== "object" || doc.version !== 1 || !Array.isArray(doc.bots)) {
    throw new Error(
      typeof doc?.version === "number" && doc.version > 1
        ? `${file} is in a newer format (version ${doc.version}): upgrade this drydock`
        : `${file} is not a bot registry this drydock reads`,
    );
  }
  return doc.bots.map((bot: unknown) => {
    const botId = (bot as { botId?: unknown } | null)?.botId;
    if (typeof botId !== "string") throw new Error(`${file} holds a bot without a bot id`);
    return botId;
  });
}

/** Boat recovery wired to this data directory and provider. Needs the environment id and the provider. */
export async function boatRecovery(ctx: CommandContext): Promise<BoatRecovery> {
  const environmentId = await ctx.environmentId();
  const client = ctx.client();
  const { createJournal, deleteJournal } = await journals(ctx);
  const lifecycle = createBoatLifecycle({
    client,
    createJournal,
    deleteJournal,
    environmentId,
    now: ctx.now,
  });
  return createBoatRecovery({
    lifecycle,
    createJournal,
    deleteJournal,
    client,
    environmentId,
    now: ctx.now,
    commandPrefix: ctx.boatCommandPrefix,
    registeredBotIds: await registeredBotIds(ctx),
  });
}

/**
 * How the Boat recovery reads the registry's bot ids: on `file`, `bots.json` itself (the rules of
 * `registryBotIds`); on a row backend, the storage's registry (`storage.bots`), whose refusal the plan
 * reports as an unreadable registry (never taken as "no bots").
 */
async function registeredBotIds(ctx: CommandContext): Promise<() => Promise<string[] | null>> {
  const storage = await ctx.storage();
  if (storage.kind === "file") return async () => registryBotIds(ctx.dataDir);
  return async () => (await storage.bots.list({ peek: true })).map((bot) => bot.botId);
}

/** A printed boat.dev command line: the command, and what it needs besides as a shell comment. */
export function pasteLine(ctx: CommandContext, command: string): string {
  return ctx.providerNote === null ? command : `${command}  # ${ctx.providerNote}`;
}

/**
 * The `next` column: the action the item's command runs; `wait N s` for work in progress (a deletion whose
 * DELETE may still be on the wire, a create whose provisioning call may still run: no command yet, and
 * `status` counts it as in progress); `person` only for what needs someone by hand.
 */
function nextStep(item: PlanItem): string {
  if (item.action.name !== null) return item.action.name;
  const waitMs = planItemWaitMs(item);
  return waitMs > 0 ? `wait ${Math.ceil(waitMs / 1_000)} s` : "person";
}

export function planTable(ctx: CommandContext, items: readonly PlanItem[]): string {
  if (items.length === 0) return "";
  return (
    table(
      ["kind", "bot", "box", "boat.dev", "next"],
      items.map((item) => [
        item.kind,
        item.botId,
        item.boxId,
        item.facts.provider.kind === "present"
          ? (item.facts.provider.name ?? "unnamed")
          : item.facts.provider.kind === "absent"
            ? `gone (${item.facts.provider.status})`
            : item.facts.provider.kind,
        nextStep(item),
      ]),
      ctx.tty,
    ) +
    items
      .map(
        (item) =>
          `- ${item.summary}\n  ${item.action.command ? `→ ${pasteLine(ctx, item.action.command)}` : item.action.advice}\n`,
      )
      .join("")
  );
}
