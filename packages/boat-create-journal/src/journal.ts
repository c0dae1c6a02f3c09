import { randomUUID } from "node:crypto";
import { CREATE_JOURNAL_FILE, CREATE_JOURNAL_LOCK_FILE } from "@drydock/facts";
import type { FileOps, LockOptions } from "@drydock/file-lock";
import { openJournalShell } from "@drydock/json-journal";
import { createPaused, invalidArgument, isBoatCreateJournalError } from "./errors.js";
import {
  assertBoatId,
  assertBotId,
  assertRequestBody,
  parseRequest,
  readClock,
  rowFacts,
} from "./internal/args.js";
import { checkCreateJournal } from "./internal/check.js";
import {
  adoptOnceStep,
  adoptStep,
  type BoatCreateRowFacts,
  beginStep,
  type CreateContext,
  discardStep,
  rememberStep,
  resolveStep,
  retireOnceStep,
  retireStep,
  type Step,
  snapshotOf,
  viewOf,
} from "./internal/logic.js";
import {
  type BoatCreateAttempt,
  type BoatCreateJournalFile,
  BoatCreateJournalFileSchema,
  type BoatCreateRecoveryEntry,
  type BoatCreateRequest,
  type BoatCreateView,
} from "./schema.js";

export { CREATE_JOURNAL_FILE, CREATE_JOURNAL_LOCK_FILE };

export interface OpenBoatCreateJournalOptions {
  /** Directory holding the journal (created 0700 on first write). */
  dataDir: string;
  /** Wall clock, ms since the epoch (default Date.now). Stamps new keys and decides the 24-hour window. */
  now?: () => number;
  /** Passed to the journal's file lock (wait, label, liveness probe, ...). */
  lock?: LockOptions;
  /** File system seam (default the real one), used for the journal and its lock. */
  fs?: FileOps;
  /** Mints idempotency keys (default crypto.randomUUID). Must return lower-case UUID v4 strings. */
  newKey?: () => string;
}

export interface BoatCreateJournal {
  /** Recorded before the request leaves the process; a known Boat wins over a changed body, never a second create. */
  beginBoatCreate(botId: string, requestBody: string): Promise<BoatCreateAttempt>;
  /** Persist the Boat id boat.dev returned, before renaming it. */
  rememberCreatedBoat(request: BoatCreateRequest, boxId: string): Promise<BoatCreateRequest>;
  /** Only after the deterministic rename succeeded. */
  resolveBoatCreate(request: BoatCreateRequest): Promise<BoatCreateRequest>;
  /** Sanitised rows: never a key or a request body. */
  boatCreateRecoverySnapshot(): Promise<BoatCreateRecoveryEntry[]>;
  /**
   * The sanitised rows of one bot, exactly as `boatCreateRecoverySnapshot()` lists them (read under the same
   * rules). What a provision's lookup needs: a row backend reads only that bot's rows through an index, so
   * its cost does not grow with the journal.
   */
  boatCreateRowsOf(botId: string): Promise<BoatCreateRecoveryEntry[]>;
  /**
   * The same sanitised rows without `ageMs`, read without the lock (json-journal's `peek`): never waits
   * for a writer, but may show a row whose write is not yet durable. Frozen, and the very same array for as
   * long as the file is unchanged, so a view can memoize what it derives by identity. For views (listings,
   * dashboards) only; every decision goes through the methods above.
   */
  peekBoatCreates(): Promise<readonly BoatCreateView[]>;
  /** Record a Boat found by its deterministic (legacy) name as the bot's resolved Boat. */
  adoptResolvedBoat(botId: string, boxId: string): Promise<void>;
  /**
   * `adoptResolvedBoat` as a compare-and-set: only while the bot's row is still exactly `expected` (a
   * snapshot row's facts; null: the bot has no row). True when this call recorded the Boat; false when the
   * row moved or the Boat was already recorded (nothing written). Of two callers adopting from the same
   * reading, exactly one gets true.
   */
  adoptResolvedBoatOnce(botId: string, boxId: string, expected: BoatCreateRowFacts | null): Promise<boolean>;
  /** Only for a Boat the provider confirmed deleted. */
  retireDeletedBoatCreate(boxId: string): Promise<void>;
  /**
   * `retireDeletedBoatCreate` for exactly the row a caller read (a snapshot row's facts, with its Boat id):
   * true when this call removed it, false when it is gone or differs (nothing written). Of two callers
   * retiring the same reading, exactly one gets true. Only for a Boat the provider confirmed deleted.
   */
  retireDeletedBoatCreateOnce(expected: BoatCreateRowFacts): Promise<boolean>;
  /** Only when the request provably created nothing. */
  discardBoatCreate(request: BoatCreateRequest): Promise<void>;
}

/**
 * Opens the create journal of `dataDir`. Nothing is read or created until the first call; every call takes
 * the cross-process lock, re-reads (or proves unchanged) the file, validates it whole, decides, writes
 * atomically if needed and releases. Two processes on one data directory always agree.
 */
export function openBoatCreateJournal(options: OpenBoatCreateJournalOptions): BoatCreateJournal {
  if (typeof options?.dataDir !== "string" || options.dataDir.length === 0) {
    throw invalidArgument("openBoatCreateJournal needs a dataDir (a non-empty path)");
  }
  const now = options.now ?? Date.now;
  const newKey = options.newKey ?? randomUUID;
  // Every escape becomes the journal's own error (json-journal's shell, shared with the delete journal).
  const journal = openJournalShell<BoatCreateJournalFile>({
    dataDir: options.dataDir,
    file: CREATE_JOURNAL_FILE,
    lockFile: CREATE_JOURNAL_LOCK_FILE,
    schema: BoatCreateJournalFileSchema,
    empty: () => ({ version: 1, requests: [] }),
    check: checkCreateJournal,
    paused: createPaused,
    isOwn: isBoatCreateJournalError,
    ...(options.lock ? { lock: options.lock } : {}),
    ...(options.fs ? { fs: options.fs } : {}),
  });

  // peekBoatCreates' rows per peeked document: json-journal hands out one frozen object per unchanged file.
  const views = new WeakMap<object, readonly BoatCreateView[]>();

  /** The clock is read once per call, inside the lock, so the decision and the stamp agree. */
  const context = (): CreateContext => ({ now: readClock(now), newKey });

  const update = <R>(step: (doc: BoatCreateJournalFile) => Step<R>): Promise<R> => journal.update(step);

  return {
    async beginBoatCreate(botId, requestBody) {
      assertBotId(botId, "invalid bot id for cloud computer creation");
      assertRequestBody(requestBody);
      return update((doc) => beginStep(doc, botId, requestBody, context()));
    },
    async rememberCreatedBoat(request, boxId) {
      assertBoatId(boxId, "boat.dev returned an invalid cloud computer id");
      const held = parseRequest(request);
      return update((doc) => rememberStep(doc, held, boxId));
    },
    async resolveBoatCreate(request) {
      const held = parseRequest(request);
      return update((doc) => resolveStep(doc, held));
    },
    async boatCreateRecoverySnapshot() {
      return journal.read((doc) => snapshotOf(doc, readClock(now)));
    },
    async boatCreateRowsOf(botId) {
      assertBotId(botId, "invalid bot id");
      return journal.read((doc) =>
        snapshotOf({ ...doc, requests: doc.requests.filter((r) => r.botId === botId) }, readClock(now)),
      );
    },
    async peekBoatCreates() {
      return journal.peek((doc) => {
        let rows = views.get(doc);
        if (rows === undefined) {
          rows = Object.freeze(doc.requests.map((request) => Object.freeze(viewOf(request))));
          views.set(doc, rows);
        }
        return rows;
      });
    },
    async adoptResolvedBoat(botId, boxId) {
      assertBotId(botId, "invalid bot id for cloud computer ownership");
      assertBoatId(boxId, "invalid cloud computer id for ownership");
      return update((doc) => adoptStep(doc, botId, boxId, context()));
    },
    async adoptResolvedBoatOnce(botId, boxId, expected) {
      assertBotId(botId, "invalid bot id for cloud computer ownership");
      assertBoatId(boxId, "invalid cloud computer id for ownership");
      const facts = expected === null ? null : rowFacts(expected, botId);
      return update((doc) => adoptOnceStep(doc, botId, boxId, facts, context()));
    },
    async retireDeletedBoatCreate(boxId) {
      assertBoatId(boxId, "invalid deleted cloud computer id");
      return update((doc) => retireStep(doc, boxId));
    },
    async retireDeletedBoatCreateOnce(expected) {
      const facts = rowFacts(expected, expected?.botId);
      assertBoatId(facts.boxId, "invalid deleted cloud computer id");
      return update((doc) => retireOnceStep(doc, facts));
    },
    async discardBoatCreate(request) {
      const held = parseRequest(request);
      return update((doc) => discardStep(doc, held));
    },
  };
}
