import {
  type BoatDeleteJournal,
  type BoatDeleteJournalFile,
  type BoatDeletionRecord,
  BoatDeletionRecordSchema,
} from "@drydock/boat-delete-journal";
import {
  acceptStep,
  assertBoatId,
  assertBotId,
  blockStep,
  deletePaused,
  getOf,
  hasPendingForBot,
  invalidArgument,
  parseExpected,
  parseIdentity,
  parseOperation,
  prepareStep,
  restampStep,
  retireStep,
  type Step,
  snapshotOf,
} from "@drydock/boat-delete-journal/logic";
import { asJournalError, isStorageError } from "@drydock/storage";
import type { SqliteJournalOptions } from "./create-journal.js";
import type { SqliteHandle } from "./database.js";
import { type RowTableSpec, rowTable, type Stored } from "./rows.js";

type StoredFence = Stored<BoatDeletionRecord>;

/** The table's columns and row format (also used by importAll). */
export const DELETE_ROW_SPEC: RowTableSpec<BoatDeletionRecord> = {
  table: "delete_rows",
  countName: "delete",
  what: "deletion fence",
  key: (row) => row.boxId,
  schema: BoatDeletionRecordSchema,
  columns: ["box_id", "owner_bot_id", "operation_id"],
  values: (row) => ({
    box_id: row.boxId,
    owner_bot_id: row.ownerBotId,
    operation_id: row.operationId ?? null,
  }),
};

/**
 * The delete journal on SQLite: each method reads the fences its pure step needs (the Boat's fence, plus
 * any fence holding the receipt's operation id) and runs the step from `@drydock/boat-delete-journal/logic`
 * on them, writing the difference in the same transaction. The fence count (the file's 4,096 cap) is checked
 * by the backend against `maxRows`.
 */
export function sqliteDeleteJournal(
  handle: SqliteHandle,
  options: Omit<SqliteJournalOptions, "newKey">,
): BoatDeleteJournal {
  const { db } = handle;
  const byBoat = db.prepare("SELECT seq, row_json FROM delete_rows WHERE box_id = ? ORDER BY seq");
  const byBoatOrOperation = db.prepare(
    "SELECT seq, row_json FROM delete_rows WHERE box_id = ? OR operation_id = ? ORDER BY seq",
  );
  const byOwner = db.prepare(
    "SELECT seq, row_json FROM delete_rows WHERE owner_bot_id = ? ORDER BY seq LIMIT 1",
  );
  const all = db.prepare("SELECT seq, row_json FROM delete_rows ORDER BY seq");
  const table = rowTable<BoatDeletionRecord>(handle, DELETE_ROW_SPEC);
  const rows = table.rows;
  const docOf = (slice: StoredFence[]): BoatDeleteJournalFile => ({
    version: 1,
    records: slice.map((stored) => stored.row),
  });
  const applyDiff = (slice: StoredFence[], next: BoatDeletionRecord[], appendsLast: boolean) =>
    table.applyDiff(slice, next, appendsLast, (_row, replaces) => {
      // The file journal's rule: a new fence is refused when maxRows stand (a replaced blocked one is not new).
      if (!replaces && table.count() >= options.maxRows) throw deletePaused("full");
    });

  function run<R>(
    read: () => StoredFence[],
    step: (doc: BoatDeleteJournalFile, now: number) => Step<R>,
    appendsLast: boolean,
  ): R {
    options.live();
    try {
      return handle.write(() => {
        const slice = read();
        // The clock is read inside the transaction, so stamps follow the order in which writers held it.
        const result = step(docOf(slice), readClock(options.now));
        if (result.next !== undefined) applyDiff(slice, result.next.records, appendsLast);
        return result.result;
      });
    } catch (error) {
      throw isStorageError(error) ? asJournalError("delete", error) : error;
    }
  }

  function read<R>(select: () => StoredFence[], view: (doc: BoatDeleteJournalFile) => R): R {
    options.live();
    try {
      return handle.read(() => view(docOf(select())));
    } catch (error) {
      throw isStorageError(error) ? asJournalError("delete", error) : error;
    }
  }

  let peeked: { version: string; rows: readonly BoatDeletionRecord[] } | undefined;

  return {
    async prepareBoatDeletion(identity) {
      const target = parseIdentity(identity);
      return run(
        () => rows(byBoat, target.boxId),
        (doc, at) => prepareStep(doc, target, at),
        true,
      );
    },
    async prepareBoatDeletionOnce(identity) {
      const target = parseIdentity(identity);
      return run(
        () => rows(byBoat, target.boxId),
        (doc, at) => {
          const step = prepareStep(doc, target, at);
          return { ...step, result: { record: step.result, prepared: step.next !== undefined } };
        },
        true,
      );
    },
    async restampBoatDeletion(boxId, expected) {
      assertBoatId(boxId, "invalid cloud computer id for deletion");
      const fence = parseExpected(boxId, expected);
      return run(
        () => rows(byBoat, boxId),
        (doc, at) => restampStep(doc, boxId, fence, at),
        false,
      );
    },
    async markBoatDeletionAccepted(boxId, value) {
      assertBoatId(boxId, "invalid cloud computer id for deletion");
      const operation = parseOperation(boxId, value);
      if (operation.status === "blocked") {
        throw invalidArgument("blocked cloud computer deletion must use markBoatDeletionBlocked");
      }
      return run(
        () => rows(byBoatOrOperation, boxId, operation.id),
        (doc, at) => acceptStep(doc, boxId, operation, at),
        false,
      );
    },
    async markBoatDeletionBlocked(boxId, value) {
      assertBoatId(boxId, "invalid cloud computer id for deletion");
      const operation = value === undefined ? null : parseOperation(boxId, value, "blocked");
      return run(
        () => (operation === null ? rows(byBoat, boxId) : rows(byBoatOrOperation, boxId, operation.id)),
        (doc, at) => blockStep(doc, boxId, operation, at),
        false,
      );
    },
    async boatDeletionSnapshot() {
      return read(() => rows(all), snapshotOf);
    },
    async peekBoatDeletions() {
      options.live();
      let version: string;
      try {
        version = handle.version();
      } catch (error) {
        throw isStorageError(error) ? asJournalError("delete", error) : error;
      }
      if (peeked?.version === version) return peeked.rows;
      const fences = read(
        () => rows(all),
        (doc) => Object.freeze(doc.records.map((record) => Object.freeze(record))),
      );
      peeked = { version, rows: fences };
      return fences;
    },
    async getBoatDeletion(boxId) {
      assertBoatId(boxId, "invalid cloud computer id for deletion");
      return read(
        () => rows(byBoat, boxId),
        (doc) => getOf(doc, boxId),
      );
    },
    async hasPendingBoatDeletionForBot(botId) {
      assertBotId(botId, "invalid bot id for cloud computer deletion");
      return read(
        () => rows(byOwner, botId),
        (doc) => hasPendingForBot(doc, botId),
      );
    },
    async retireBoatDeletion(boxId) {
      assertBoatId(boxId, "invalid deleted cloud computer id");
      return run(
        () => rows(byBoat, boxId),
        (doc) => retireStep(doc, boxId),
        false,
      );
    },
  };
}

/** The file journal's clock rule (boat-delete-journal/src/journal.ts, not exported): positive safe integers. */
function readClock(now: () => number): number {
  const value = now();
  if (!Number.isSafeInteger(value) || value <= 0) {
    throw deletePaused("unavailable", new RangeError("the journal clock returned an invalid time"));
  }
  return value;
}
