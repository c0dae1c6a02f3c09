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
import type { PgJournalOptions } from "./create-journal.js";
import type { PgHandle, PgTx } from "./database.js";
import { rowTable, type Stored } from "./rows.js";

type StoredFence = Stored<BoatDeletionRecord>;

/** The delete journal's table: its indexed columns and the row schema. */
export function deleteTable(where: string) {
  return rowTable<BoatDeletionRecord>({
    table: "delete_rows",
    stateName: "delete",
    what: "deletion fence",
    where,
    key: (row) => row.boxId,
    schema: BoatDeletionRecordSchema,
    columns: ["box_id", "owner_bot_id", "operation_id"],
    values: (row) => [row.boxId, row.ownerBotId, row.operationId ?? null],
  });
}

/**
 * The delete journal on PostgreSQL: each method reads the fences its pure step needs (the Boat's fence, plus
 * any fence holding the receipt's operation id) and runs the step from `@drydock/boat-delete-journal/logic`
 * on them with the database's clock, writing the difference in the same transaction (which holds the delete
 * journal's advisory lock). The fence count is checked against `maxRows`.
 */
export function pgDeleteJournal(
  handle: PgHandle,
  options: Omit<PgJournalOptions, "newKey">,
): BoatDeleteJournal {
  const table = deleteTable(handle.where);
  const byBoat = (boxId: string) => (tx: PgTx) => table.select(tx, "box_id = $1", [boxId]);
  const byBoatOrOperation = (boxId: string, operationId: string) => (tx: PgTx) =>
    table.select(tx, "box_id = $1 OR operation_id = $2", [boxId, operationId]);
  const docOf = (slice: StoredFence[]): BoatDeleteJournalFile => ({
    version: 1,
    records: slice.map((stored) => stored.row),
  });

  async function run<R>(
    read: (tx: PgTx) => Promise<StoredFence[]>,
    step: (doc: BoatDeleteJournalFile, now: number) => Step<R>,
    appendsLast: boolean,
  ): Promise<R> {
    options.live();
    try {
      return await handle.write("delete", async (tx) => {
        const slice = await read(tx);
        // The clock is read inside the transaction, so stamps follow the order in which writers held it.
        const result = step(docOf(slice), readClock(tx.now));
        if (result.next !== undefined) {
          await table.applyDiff(tx, slice, result.next.records, appendsLast, async (_row, replaces) => {
            // The file journal's rule: a new fence is refused when maxRows stand (a replaced one is not new).
            if (!replaces && (await table.count(tx)) >= options.maxRows) throw deletePaused("full");
          });
        }
        return result.result;
      });
    } catch (error) {
      throw isStorageError(error) ? asJournalError("delete", error) : error;
    }
  }

  async function read<R>(
    select: (tx: PgTx) => Promise<StoredFence[]>,
    view: (doc: BoatDeleteJournalFile) => R,
  ): Promise<R> {
    options.live();
    try {
      return await handle.read(async (tx) => view(docOf(await select(tx))));
    } catch (error) {
      throw isStorageError(error) ? asJournalError("delete", error) : error;
    }
  }

  let peeked: { version: string; rows: readonly BoatDeletionRecord[] } | undefined;

  return {
    async prepareBoatDeletion(identity) {
      const target = parseIdentity(identity);
      return run(byBoat(target.boxId), (doc, at) => prepareStep(doc, target, at), true);
    },
    async prepareBoatDeletionOnce(identity) {
      const target = parseIdentity(identity);
      return run(
        byBoat(target.boxId),
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
      return run(byBoat(boxId), (doc, at) => restampStep(doc, boxId, fence, at), false);
    },
    async markBoatDeletionAccepted(boxId, value) {
      assertBoatId(boxId, "invalid cloud computer id for deletion");
      const operation = parseOperation(boxId, value);
      if (operation.status === "blocked") {
        throw invalidArgument("blocked cloud computer deletion must use markBoatDeletionBlocked");
      }
      return run(
        byBoatOrOperation(boxId, operation.id),
        (doc, at) => acceptStep(doc, boxId, operation, at),
        false,
      );
    },
    async markBoatDeletionBlocked(boxId, value) {
      assertBoatId(boxId, "invalid cloud computer id for deletion");
      const operation = value === undefined ? null : parseOperation(boxId, value, "blocked");
      return run(
        operation === null ? byBoat(boxId) : byBoatOrOperation(boxId, operation.id),
        (doc, at) => blockStep(doc, boxId, operation, at),
        false,
      );
    },
    async boatDeletionSnapshot() {
      return read((tx) => table.all(tx), snapshotOf);
    },
    async peekBoatDeletions() {
      options.live();
      try {
        const version = await handle.read((tx) => table.version(tx));
        if (peeked?.version === version) return peeked.rows;
        peeked = await handle.read(async (tx) => ({
          version: await table.version(tx),
          rows: Object.freeze((await table.all(tx)).map((stored) => Object.freeze(stored.row))),
        }));
        return peeked.rows;
      } catch (error) {
        throw isStorageError(error) ? asJournalError("delete", error) : error;
      }
    },
    async getBoatDeletion(boxId) {
      assertBoatId(boxId, "invalid cloud computer id for deletion");
      return read(byBoat(boxId), (doc) => getOf(doc, boxId));
    },
    async hasPendingBoatDeletionForBot(botId) {
      assertBotId(botId, "invalid bot id for cloud computer deletion");
      return read(
        (tx) => table.select(tx, "seq = (SELECT min(seq) FROM delete_rows WHERE owner_bot_id = $1)", [botId]),
        (doc) => hasPendingForBot(doc, botId),
      );
    },
    async retireBoatDeletion(boxId) {
      assertBoatId(boxId, "invalid deleted cloud computer id");
      return run(byBoat(boxId), (doc) => retireStep(doc, boxId), false);
    },
  };
}

/** The file journal's clock rule (boat-delete-journal/src/journal.ts, not exported): positive safe integers. */
function readClock(value: number): number {
  if (!Number.isSafeInteger(value) || value <= 0) {
    throw deletePaused("unavailable", new RangeError("the journal clock returned an invalid time"));
  }
  return value;
}
