import { randomUUID } from "node:crypto";
import { join } from "node:path";
import { BOTS_FILE } from "@drydock/facts";
import type { FileOps } from "@drydock/file-lock";
import { isNotDamaged, NEWER_FORMAT, openJsonJournal, TRANSIENTLY_UNREADABLE } from "@drydock/json-journal";
import { z } from "zod";
import { checkBotInput, checkPageInput } from "../bot-input.js";
import {
  botExists,
  byBotId,
  markMethods,
  newBot,
  tooManyBots,
  withMark,
  withoutMarks,
} from "../bot-rules.js";
import { type Bot, type BotReadOptions, type BotRegistryStore, BotSchema, MAX_FILE_BOTS } from "../bots.js";
import { osFailure, StorageError, type StorageErrorCode, unpublishedOsCause } from "../errors.js";
import { readRetired, retiredError } from "../retired.js";

/** `<dataDir>/bots.json`: exactly the document the bot server has always written. */
export const BotsFileSchema = z.looseObject({
  version: z.literal(1),
  bots: z.array(BotSchema).max(MAX_FILE_BOTS),
});
export type BotsFile = z.infer<typeof BotsFileSchema>;

function checkBots(doc: BotsFile): string | null {
  const seen = new Set<string>();
  for (const b of doc.bots) {
    if (seen.has(b.botId)) return "invalid";
    seen.add(b.botId);
  }
  return null;
}

/** Which StorageError code a json-journal state detail is: only bytes that fail their checks are CORRUPT. */
function codeOf(detail: string): { code: StorageErrorCode; retryable: boolean } {
  if (detail.startsWith(NEWER_FORMAT)) return { code: "STORAGE_NEWER", retryable: false };
  if (detail.startsWith("locked by another")) return { code: "STORAGE_BUSY", retryable: true };
  if (detail.startsWith(TRANSIENTLY_UNREADABLE)) return { code: "STORAGE_UNAVAILABLE", retryable: true };
  if (isNotDamaged(detail)) return { code: "STORAGE_UNAVAILABLE", retryable: true };
  if (detail === "invalid" || detail === "unreadable" || detail.startsWith("lock is invalid"))
    return { code: "STORAGE_CORRUPT", retryable: false };
  return { code: "STORAGE_UNAVAILABLE", retryable: false };
}

/**
 * The registry's storage faults, in the words the bot server has always used (json-journal's detail; a full
 * disk says what happened and never "repair"). A file retired by a migration says where its state went.
 */
export function botsStateError(file: string, detail: string, cause?: unknown): StorageError {
  if (detail === "invalid") {
    const marker = readRetired(file);
    if (marker !== null) return retiredError(file, marker);
  }
  // A write or read the OS refused (full disk, read-only, …) is "unavailable" to json-journal: say what happened.
  const errno = detail === "unavailable" || detail === "unreadable" ? unpublishedOsCause(cause) : undefined;
  if (errno !== undefined)
    return osFailure(errno, `the bot registry ${file} (bots cannot be changed)`, cause);
  return new StorageError({
    ...codeOf(detail),
    message: isNotDamaged(detail)
      ? `Bots cannot be changed: the bot registry ${file} is ${detail}.`
      : `The bot registry ${file} is ${detail}, so bots cannot be changed. Repair or restore it before retrying; drydock never overwrites a file it could not read.`,
    cause,
  });
}

export interface FileBotRegistryOptions {
  now?: () => number;
  fs?: FileOps;
  lockWaitMs?: number;
}

/** The file backend's registry document, for the backend's export, import and retirement. */
export function openBotsDocument(dataDir: string, options: FileBotRegistryOptions = {}) {
  const file = join(dataDir, BOTS_FILE);
  return openJsonJournal<BotsFile>({
    file,
    schema: BotsFileSchema,
    empty: () => ({ version: 1, bots: [] }),
    check: checkBots,
    stateError: (detail, cause) => botsStateError(file, detail, cause),
    lock: {
      label: "drydock bot registry",
      ...(options.fs ? { fs: options.fs } : {}),
      ...(options.lockWaitMs === undefined ? {} : { waitMs: options.lockWaitMs }),
    },
    ...(options.fs ? { fs: options.fs } : {}),
  });
}

/**
 * The `file` backend's bot registry: `<dataDir>/bots.json` (+ `bots.lock`), a locked, schema-checked JSON
 * journal of at most 4,096 bots. Synchronous to open (the bot server opens it at start).
 */
export function openFileBotRegistry(dataDir: string, options: FileBotRegistryOptions = {}): BotRegistryStore {
  const now = options.now ?? Date.now;
  const journal = openBotsDocument(dataDir, options);
  // This registry (one per server): tells its own leftover marks from other servers' (which may share its
  // process, as in tests, or its pid after a restart).
  const instance = randomUUID();
  /** Removes exactly these marks (by id) from the bot, if they are still there. */
  const dropMarks = (botId: string, ids: readonly string[]) =>
    journal.update((doc) => {
      const bot = doc.bots.find((b) => b.botId === botId);
      const next = bot === undefined ? null : withoutMarks(bot, ids);
      if (next === null) return { result: undefined };
      return {
        next: { ...doc, bots: doc.bots.map((b) => (b.botId === botId ? next : b)) },
        result: undefined,
      };
    });
  // `read` hands out a private copy and `peek` a frozen one, so the rows need no further copying.
  const read = (options?: BotReadOptions) => (options?.peek === true ? journal.peek() : journal.read());
  return {
    async list(options) {
      return (await read(options)).bots;
    },
    async page(input) {
      const { after, limit } = checkPageInput(input);
      const sorted = [...(await journal.peek()).bots].sort(byBotId);
      const rest = after === undefined ? sorted : sorted.filter((b) => b.botId > after);
      const bots = rest.slice(0, limit);
      const last = bots.at(-1);
      return { bots, next: rest.length > limit && last !== undefined ? last.botId : null };
    },
    async count() {
      return (await journal.peek()).bots.length;
    },
    async get(botId, options) {
      return (await read(options)).bots.find((b) => b.botId === botId) ?? null;
    },
    async create(input) {
      const { botId, name } = checkBotInput(input);
      return journal.update((doc) => {
        if (doc.bots.some((b) => b.botId === botId)) throw botExists(botId);
        if (doc.bots.length >= MAX_FILE_BOTS) throw tooManyBots(MAX_FILE_BOTS);
        const bot = newBot(botId, name, now());
        return { next: { ...doc, bots: [...doc.bots, bot] }, result: bot };
      });
    },
    markDeleting(botId) {
      return journal.update((doc) => {
        const bot = doc.bots.find((b) => b.botId === botId);
        if (bot === undefined) return { result: null };
        const marked = withMark(bot, instance, now());
        const bots = doc.bots.map((b): Bot => (b.botId === botId ? marked.bot : b));
        return { next: { ...doc, bots }, result: marked.mark };
      });
    },
    ...markMethods(instance, dropMarks),
    remove(botId) {
      return journal.update((doc) => {
        const bots = doc.bots.filter((b) => b.botId !== botId);
        return bots.length === doc.bots.length
          ? { result: undefined }
          : { next: { ...doc, bots }, result: undefined };
      });
    },
  };
}
