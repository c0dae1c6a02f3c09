import { DELETE_JOURNAL_FILE, DELETE_JOURNAL_LOCK_FILE } from "@drydock/facts";
import type { FileOps, LockOptions } from "@drydock/file-lock";
import { type DeepReadonly, openJournalShell } from "@drydock/json-journal";
import { deletePaused, invalidArgument, isBoatDeleteJournalError } from "./errors.js";
import { assertBoatId, assertBotId, parseExpected, parseIdentity, parseOperation } from "./internal/args.js";
import { checkDeleteJournal } from "./internal/check.js";
import {
  acceptStep,
  blockStep,
  getOf,
  hasPendingForBot,
  prepareStep,
  restampStep,
  retireStep,
  type Step,
  snapshotOf,
} from "./internal/logic.js";
import {
  type BoatDeleteJournalFile,
  BoatDeleteJournalFileSchema,
  type BoatDeletionIdentity,
  type BoatDeletionRecord,
} from "./schema.js";

export { DELETE_JOURNAL_FILE, DELETE_JOURNAL_LOCK_FILE };

export interface OpenBoatDeleteJournalOptions {
  /** Directory holding the journal (created 0700 on first use). */
  dataDir: string;
  /** Wall clock, ms since the epoch (default Date.now). Stamps requestedAt / updatedAt. */
  now?: () => number;
  /** Passed to the journal's file lock (wait, label, liveness probe, ...). */
  lock?: LockOptions;
  /** File system seam (default the real one), used for the journal and, unless `lock.fs` is set, its lock. */
  fs?: FileOps;
}

export interface BoatDeleteJournal {
  /** Write the immutable target before DELETE is sent; in-flight work wins, a blocked fence is retried. */
  prepareBoatDeletion(identity: BoatDeletionIdentity): Promise<BoatDeletionRecord>;
  /**
   * `prepareBoatDeletion` that also says whether this very call wrote the prepared fence (`prepared`: none
   * or a blocked one stood) or handed back one that already stood, decided in the same transaction: the
   * caller may send DELETE on its own fence, and no other process can slip a fence in between.
   */
  prepareBoatDeletionOnce(
    identity: BoatDeletionIdentity,
  ): Promise<{ record: BoatDeletionRecord; prepared: boolean }>;
  /**
   * Re-stamps a prepared fence (`updatedAt = max(now, updatedAt + 1)`) right before DELETE is sent again
   * under it, so the in-flight window runs again from this DELETE. Compare-and-set: only when the fence on
   * disk is exactly `expected` (every field equal) and prepared; otherwise nothing is written and the fence
   * as it stands (or `null`) comes back with `restamped: false` — the caller must not send. Of two callers
   * holding the same copy, exactly one re-stamps.
   */
  restampBoatDeletion(
    boxId: string,
    expected: BoatDeletionRecord,
  ): Promise<{ record: BoatDeletionRecord | null; restamped: boolean }>;
  /** Bind boat.dev's receipt (pending, processing or completed) to the fence; statuses only move forward. */
  markBoatDeletionAccepted(boxId: string, operation: unknown): Promise<BoatDeletionRecord>;
  /** Keep the fence but mark it blocked, with or without a (blocked) receipt. */
  markBoatDeletionBlocked(boxId: string, operation?: unknown): Promise<BoatDeletionRecord>;
  /** Copies of every fence. */
  boatDeletionSnapshot(): Promise<BoatDeletionRecord[]>;
  /**
   * Every fence, read without the lock (json-journal's `peek`): never waits for a writer, but may show a
   * fence whose write is not yet durable. Deeply frozen, and the very same array for as long as the file is
   * unchanged, so a view can memoize what it derives by identity. For views (listings, dashboards) only;
   * every decision goes through the methods above.
   */
  peekBoatDeletions(): Promise<readonly DeepReadonly<BoatDeletionRecord>[]>;
  getBoatDeletion(boxId: string): Promise<BoatDeletionRecord | null>;
  /** Whether any fence (whatever its phase) belongs to the bot. */
  hasPendingBoatDeletionForBot(botId: string): Promise<boolean>;
  /** Only after a direct absence or a completed target-bound operation proves the Boat is gone. Idempotent. */
  retireBoatDeletion(boxId: string): Promise<void>;
}

/**
 * Opens the delete journal of `dataDir`. Nothing is read or written until the first call; every call takes
 * the cross-process lock, re-reads (or proves unchanged) the file, validates it whole, decides, writes
 * atomically if needed and releases.
 */
export function openBoatDeleteJournal(options: OpenBoatDeleteJournalOptions): BoatDeleteJournal {
  if (typeof options?.dataDir !== "string" || options.dataDir.length === 0) {
    throw invalidArgument("openBoatDeleteJournal needs a dataDir (a non-empty path)");
  }
  const now = options.now ?? Date.now;
  // Every escape becomes the journal's own error (json-journal's shell, shared with the create journal).
  const journal = openJournalShell<BoatDeleteJournalFile>({
    dataDir: options.dataDir,
    file: DELETE_JOURNAL_FILE,
    lockFile: DELETE_JOURNAL_LOCK_FILE,
    schema: BoatDeleteJournalFileSchema,
    empty: () => ({ version: 1, records: [] }),
    check: checkDeleteJournal,
    paused: deletePaused,
    isOwn: isBoatDeleteJournalError,
    ...(options.lock ? { lock: options.lock } : {}),
    ...(options.fs ? { fs: options.fs } : {}),
  });

  // The clock is read inside the lock, so stamps follow the order in which writers held it.
  const update = <R>(step: (doc: BoatDeleteJournalFile, now: number) => Step<R>): Promise<R> =>
    journal.update((doc) => step(doc, readClock(now)));
  const read = <R>(view: (doc: BoatDeleteJournalFile) => R): Promise<R> => journal.read(view);

  return {
    async prepareBoatDeletion(identity) {
      const target = parseIdentity(identity);
      return update((doc, at) => prepareStep(doc, target, at));
    },
    async prepareBoatDeletionOnce(identity) {
      const target = parseIdentity(identity);
      return update((doc, at) => {
        const step = prepareStep(doc, target, at);
        return { ...step, result: { record: step.result, prepared: step.next !== undefined } };
      });
    },
    async restampBoatDeletion(boxId, expected) {
      assertBoatId(boxId, "invalid cloud computer id for deletion");
      const fence = parseExpected(boxId, expected);
      return update((doc, at) => restampStep(doc, boxId, fence, at));
    },
    async markBoatDeletionAccepted(boxId, value) {
      assertBoatId(boxId, "invalid cloud computer id for deletion");
      const operation = parseOperation(boxId, value);
      if (operation.status === "blocked") {
        throw invalidArgument("blocked cloud computer deletion must use markBoatDeletionBlocked");
      }
      return update((doc, at) => acceptStep(doc, boxId, operation, at));
    },
    async markBoatDeletionBlocked(boxId, value) {
      assertBoatId(boxId, "invalid cloud computer id for deletion");
      // Bare (no receipt) when DELETE itself was refused; a receipt must say blocked.
      const operation = value === undefined ? null : parseOperation(boxId, value, "blocked");
      return update((doc, at) => blockStep(doc, boxId, operation, at));
    },
    async boatDeletionSnapshot() {
      return read((doc) => snapshotOf(doc));
    },
    async peekBoatDeletions() {
      return journal.peek((doc) => doc.records);
    },
    async getBoatDeletion(boxId) {
      assertBoatId(boxId, "invalid cloud computer id for deletion");
      return read((doc) => getOf(doc, boxId));
    },
    async hasPendingBoatDeletionForBot(botId) {
      assertBotId(botId, "invalid bot id for cloud computer deletion");
      return read((doc) => hasPendingForBot(doc, botId));
    },
    async retireBoatDeletion(boxId) {
      assertBoatId(boxId, "invalid deleted cloud computer id");
      return update((doc) => retireStep(doc, boxId));
    },
  };
}

/** Stamps must be positive safe integers, or the journal would write a file it refuses to load. */
function readClock(now: () => number): number {
  const value = now();
  if (!Number.isSafeInteger(value) || value <= 0) {
    throw deletePaused("unavailable", new RangeError("the journal clock returned an invalid time"));
  }
  return value;
}
