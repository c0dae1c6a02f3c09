import {
  type BoatCreateJournal,
  type BoatCreateJournalFile,
  type BoatCreateRequest,
  BoatCreateRequestSchema,
  type BoatCreateView,
} from "@drydock/boat-create-journal";
import {
  adoptOnceStep,
  adoptStep,
  assertBoatId,
  assertBotId,
  assertRequestBody,
  beginStep,
  createPaused,
  discardStep,
  parseRequest,
  readClock,
  rememberStep,
  resolveStep,
  retireOnceStep,
  retireStep,
  rowFacts,
  type Step,
  snapshotOf,
  viewOf,
} from "@drydock/boat-create-journal/logic";
import { asJournalError, isStorageError } from "@drydock/storage";
import type { PgHandle, PgTx } from "./database.js";
import { rowTable, type Stored } from "./rows.js";

type StoredRow = Stored<BoatCreateRequest>;

export interface PgJournalOptions {
  newKey: () => string;
  maxRows: number;
  /** Throws STORAGE_CLOSED after close(). */
  live: () => void;
}

/** The create journal's table: its indexed columns and the row schema. */
export function createTable(where: string) {
  return rowTable<BoatCreateRequest>({
    table: "create_rows",
    stateName: "create",
    what: "create row",
    where,
    key: (row) => row.idempotencyKey,
    schema: BoatCreateRequestSchema,
    columns: ["bot_id", "request_body", "idempotency_key", "created_at", "box_id", "resolved"],
    values: (row) => [
      row.botId,
      row.requestBody,
      row.idempotencyKey,
      row.createdAt,
      row.boxId ?? null,
      row.resolved === true,
    ],
  });
}

/**
 * The create journal on PostgreSQL. Each method reads the slice of rows its pure step needs (the bot's rows,
 * the rows of a Boat id, a key's row), runs the step from `@drydock/boat-create-journal/logic` on a document
 * holding only that slice, and writes the difference in the same transaction, which holds the create
 * journal's advisory lock (so the slice and the row count cannot change under the step). The clock is the
 * database's, read inside that transaction.
 */
export function pgCreateJournal(handle: PgHandle, options: PgJournalOptions): BoatCreateJournal {
  const table = createTable(handle.where);
  const byBot = (botId: string) => (tx: PgTx) => table.select(tx, "bot_id = $1", [botId]);
  const docOf = (slice: StoredRow[]): BoatCreateJournalFile => ({
    version: 1,
    requests: slice.map((stored) => stored.row),
  });

  /** One transaction: read the slice, run the pure step on it, write the difference. */
  async function run<R>(
    read: (tx: PgTx) => Promise<StoredRow[]>,
    step: (doc: BoatCreateJournalFile, now: () => number) => Step<R>,
    appendsLast: boolean,
  ): Promise<R> {
    options.live();
    try {
      return await handle.write("create", async (tx) => {
        const slice = await read(tx);
        const result = step(docOf(slice), () => tx.now);
        if (result.next !== undefined) {
          await table.applyDiff(tx, slice, result.next.requests, appendsLast, async () => {
            // Counted after the step's removals: the file journal's rule exactly (begin refuses when the
            // journal holds maxRows rows, adopt when the rows it keeps are maxRows).
            if ((await table.count(tx)) >= options.maxRows) throw createPaused("full");
          });
        }
        return result.result;
      });
    } catch (error) {
      throw isStorageError(error) ? asJournalError("create", error) : error;
    }
  }

  async function readAll<R>(
    view: (slice: StoredRow[], now: number) => R,
    read: (tx: PgTx) => Promise<StoredRow[]> = (tx) => table.all(tx),
  ): Promise<R> {
    options.live();
    try {
      return await handle.read(async (tx) => view(await read(tx), tx.now));
    } catch (error) {
      throw isStorageError(error) ? asJournalError("create", error) : error;
    }
  }

  const context = (now: () => number) => ({ now: readClock(now), newKey: options.newKey });
  let peeked: { version: string; rows: readonly BoatCreateView[] } | undefined;

  return {
    async beginBoatCreate(botId, requestBody) {
      assertBotId(botId, "invalid bot id for cloud computer creation");
      assertRequestBody(requestBody);
      return run(byBot(botId), (doc, now) => beginStep(doc, botId, requestBody, context(now)), true);
    },
    async rememberCreatedBoat(request, boxId) {
      assertBoatId(boxId, "boat.dev returned an invalid cloud computer id");
      const held = parseRequest(request);
      return run(byBot(held.botId), (doc) => rememberStep(doc, held, boxId), true);
    },
    async resolveBoatCreate(request) {
      const held = parseRequest(request);
      return run(byBot(held.botId), (doc) => resolveStep(doc, held), false);
    },
    async boatCreateRecoverySnapshot() {
      return readAll((slice, now) =>
        snapshotOf(
          docOf(slice),
          readClock(() => now),
        ),
      );
    },
    async boatCreateRowsOf(botId) {
      assertBotId(botId, "invalid bot id");
      return readAll(
        (slice, now) =>
          snapshotOf(
            docOf(slice),
            readClock(() => now),
          ),
        byBot(botId),
      );
    },
    async peekBoatCreates() {
      options.live();
      let version: string;
      try {
        version = await handle.read((tx) => table.version(tx));
      } catch (error) {
        throw isStorageError(error) ? asJournalError("create", error) : error;
      }
      if (peeked?.version === version) return peeked.rows;
      // Read with the version in one snapshot, so the memo never pairs a version with other rows.
      const fresh = await readAllVersioned();
      peeked = fresh;
      return fresh.rows;
    },
    async adoptResolvedBoat(botId, boxId) {
      assertBotId(botId, "invalid bot id for cloud computer ownership");
      assertBoatId(boxId, "invalid cloud computer id for ownership");
      return run(
        (tx) => table.select(tx, "bot_id = $1 OR box_id = $2", [botId, boxId]),
        (doc, now) => adoptStep(doc, botId, boxId, context(now)),
        true,
      );
    },
    async adoptResolvedBoatOnce(botId, boxId, expected) {
      assertBotId(botId, "invalid bot id for cloud computer ownership");
      assertBoatId(boxId, "invalid cloud computer id for ownership");
      const facts = expected === null ? null : rowFacts(expected, botId);
      return run(
        (tx) => table.select(tx, "bot_id = $1 OR box_id = $2", [botId, boxId]),
        (doc, now) => adoptOnceStep(doc, botId, boxId, facts, context(now)),
        true,
      );
    },
    async retireDeletedBoatCreate(boxId) {
      assertBoatId(boxId, "invalid deleted cloud computer id");
      return run(
        (tx) => table.select(tx, "box_id = $1", [boxId]),
        (doc) => retireStep(doc, boxId),
        false,
      );
    },
    async retireDeletedBoatCreateOnce(expected) {
      const facts = rowFacts(expected, expected?.botId);
      assertBoatId(facts.boxId, "invalid deleted cloud computer id");
      return run(byBot(facts.botId), (doc) => retireOnceStep(doc, facts), false);
    },
    async discardBoatCreate(request) {
      const held = parseRequest(request);
      return run(
        (tx) => table.select(tx, "idempotency_key = $1", [held.idempotencyKey]),
        (doc) => discardStep(doc, held),
        false,
      );
    },
  };

  async function readAllVersioned(): Promise<{ version: string; rows: readonly BoatCreateView[] }> {
    try {
      return await handle.read(async (tx) => ({
        version: await table.version(tx),
        rows: Object.freeze((await table.all(tx)).map((stored) => Object.freeze(viewOf(stored.row)))),
      }));
    } catch (error) {
      throw isStorageError(error) ? asJournalError("create", error) : error;
    }
  }
}
