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
  type CreateContext,
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
import type { SqliteHandle } from "./database.js";
import { type RowTableSpec, rowTable, type Stored } from "./rows.js";

type StoredRow = Stored<BoatCreateRequest>;

export interface SqliteJournalOptions {
  now: () => number;
  newKey: () => string;
  maxRows: number;
  /** Throws STORAGE_CLOSED after close(). */
  live: () => void;
}

/** The table's columns and row format (also used by importAll). */
export const CREATE_ROW_SPEC: RowTableSpec<BoatCreateRequest> = {
  table: "create_rows",
  countName: "create",
  what: "create row",
  key: (row) => row.idempotencyKey,
  schema: BoatCreateRequestSchema,
  columns: ["bot_id", "request_body", "idempotency_key", "created_at", "box_id", "resolved"],
  values: (row) => ({
    bot_id: row.botId,
    request_body: row.requestBody,
    idempotency_key: row.idempotencyKey,
    created_at: row.createdAt,
    box_id: row.boxId ?? null,
    resolved: row.resolved === true ? 1 : 0,
  }),
};

/**
 * The create journal on SQLite. Each method reads the slice of rows its pure step needs (the bot's rows,
 * the rows of a Boat id, a key's row), runs the step from `@drydock/boat-create-journal/logic` on a document
 * holding only that slice, and writes the difference in the same BEGIN IMMEDIATE transaction. The steps
 * touch only the rows of their slice, so the result equals the step on the whole journal; the one thing a
 * slice cannot see is the total row count, which the backend checks itself against `maxRows` (no 4,096 cap).
 */
export function sqliteCreateJournal(handle: SqliteHandle, options: SqliteJournalOptions): BoatCreateJournal {
  const { db } = handle;
  const byBot = db.prepare("SELECT seq, row_json FROM create_rows WHERE bot_id = ? ORDER BY seq");
  const byBotOrBoat = db.prepare(
    "SELECT seq, row_json FROM create_rows WHERE bot_id = ? OR box_id = ? ORDER BY seq",
  );
  const byBoat = db.prepare("SELECT seq, row_json FROM create_rows WHERE box_id = ? ORDER BY seq");
  const byKey = db.prepare("SELECT seq, row_json FROM create_rows WHERE idempotency_key = ? ORDER BY seq");
  const all = db.prepare("SELECT seq, row_json FROM create_rows ORDER BY seq");
  const table = rowTable<BoatCreateRequest>(handle, CREATE_ROW_SPEC);
  const rows = table.rows;
  const docOf = (slice: StoredRow[]): BoatCreateJournalFile => ({
    version: 1,
    requests: slice.map((stored) => stored.row),
  });
  const applyDiff = (slice: StoredRow[], next: BoatCreateRequest[], appendsLast: boolean) =>
    table.applyDiff(slice, next, appendsLast, () => {
      // Counted after the step's removals, so this is the file journal's rule exactly: begin refuses when
      // the journal holds maxRows rows, adopt when the rows it keeps (all but the bot's) are maxRows.
      if (table.count() >= options.maxRows) throw createPaused("full");
    });

  /** One transaction: read the slice, run the pure step on it, write the difference. */
  function run<R>(
    read: () => StoredRow[],
    step: (doc: BoatCreateJournalFile) => Step<R>,
    appendsLast: boolean,
  ): R {
    options.live();
    try {
      return handle.write(() => {
        const slice = read();
        const result = step(docOf(slice));
        if (result.next !== undefined) applyDiff(slice, result.next.requests, appendsLast);
        return result.result;
      });
    } catch (error) {
      throw isStorageError(error) ? asJournalError("create", error) : error;
    }
  }

  function readAll<R>(view: (slice: StoredRow[]) => R, read: () => StoredRow[] = () => rows(all)): R {
    options.live();
    try {
      return handle.read(() => view(read()));
    } catch (error) {
      throw isStorageError(error) ? asJournalError("create", error) : error;
    }
  }

  const context = (): CreateContext => ({ now: readClock(options.now), newKey: options.newKey });
  let peeked: { version: string; rows: readonly BoatCreateView[] } | undefined;

  return {
    async beginBoatCreate(botId, requestBody) {
      assertBotId(botId, "invalid bot id for cloud computer creation");
      assertRequestBody(requestBody);
      return run(
        () => rows(byBot, botId),
        (doc) => beginStep(doc, botId, requestBody, context()),
        true,
      );
    },
    async rememberCreatedBoat(request, boxId) {
      assertBoatId(boxId, "boat.dev returned an invalid cloud computer id");
      const held = parseRequest(request);
      return run(
        () => rows(byBot, held.botId),
        (doc) => rememberStep(doc, held, boxId),
        true,
      );
    },
    async resolveBoatCreate(request) {
      const held = parseRequest(request);
      return run(
        () => rows(byBot, held.botId),
        (doc) => resolveStep(doc, held),
        false,
      );
    },
    async boatCreateRecoverySnapshot() {
      const at = readClock(options.now);
      return readAll((slice) => snapshotOf(docOf(slice), at));
    },
    async boatCreateRowsOf(botId) {
      assertBotId(botId, "invalid bot id");
      const at = readClock(options.now);
      return readAll(
        (slice) => snapshotOf(docOf(slice), at),
        () => rows(byBot, botId),
      );
    },
    async peekBoatCreates() {
      options.live();
      let version: string;
      try {
        version = handle.version();
      } catch (error) {
        throw isStorageError(error) ? asJournalError("create", error) : error;
      }
      if (peeked?.version === version) return peeked.rows;
      const views = readAll((slice) =>
        Object.freeze(slice.map((stored) => Object.freeze(viewOf(stored.row)))),
      );
      peeked = { version, rows: views };
      return views;
    },
    async adoptResolvedBoat(botId, boxId) {
      assertBotId(botId, "invalid bot id for cloud computer ownership");
      assertBoatId(boxId, "invalid cloud computer id for ownership");
      return run(
        () => rows(byBotOrBoat, botId, boxId),
        (doc) => adoptStep(doc, botId, boxId, context()),
        true,
      );
    },
    async adoptResolvedBoatOnce(botId, boxId, expected) {
      assertBotId(botId, "invalid bot id for cloud computer ownership");
      assertBoatId(boxId, "invalid cloud computer id for ownership");
      const facts = expected === null ? null : rowFacts(expected, botId);
      return run(
        () => rows(byBotOrBoat, botId, boxId),
        // The clock is read inside the transaction, as the file journal reads it inside its lock.
        (doc) => adoptOnceStep(doc, botId, boxId, facts, context()),
        true,
      );
    },
    async retireDeletedBoatCreate(boxId) {
      assertBoatId(boxId, "invalid deleted cloud computer id");
      return run(
        () => rows(byBoat, boxId),
        (doc) => retireStep(doc, boxId),
        false,
      );
    },
    async retireDeletedBoatCreateOnce(expected) {
      const facts = rowFacts(expected, expected?.botId);
      assertBoatId(facts.boxId, "invalid deleted cloud computer id");
      return run(
        () => rows(byBot, facts.botId),
        (doc) => retireOnceStep(doc, facts),
        false,
      );
    },
    async discardBoatCreate(request) {
      const held = parseRequest(request);
      return run(
        () => rows(byKey, held.idempotencyKey),
        (doc) => discardStep(doc, held),
        false,
      );
    },
  };
}
