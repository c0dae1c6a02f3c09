import { corruptFailure } from "@drydock/storage";
import type { PgTx } from "./database.js";

/** A row as read: its place in the journal (`seq`) and the row exactly as the journal holds it. */
export interface Stored<Row> {
  seq: string;
  row: Row;
}

export interface RowTableSpec<Row> {
  /** The table (`create_rows`, `delete_rows`) and its name in `journal_state`. */
  table: string;
  stateName: string;
  /** "create row", "deletion fence": names a damaged row in errors. */
  what: string;
  /** Where the table lives, for messages. */
  where: string;
  /** The row's identity within a step (idempotency key, Boat id): unique by the journal's invariants. */
  key: (row: Row) => string;
  /** The journal's row schema; a stored row that fails it is damage. */
  schema: { safeParse(value: unknown): { success: true; data: Row } | { success: false } };
  /** The indexed columns (beside `seq` and `row_json`) and their values for a row, in that order. */
  columns: readonly string[];
  values: (row: Row) => unknown[];
}

export interface RowTable<Row> {
  /** Rows matching `where` (a SQL condition over `$1…`), in journal order. */
  select(tx: PgTx, where: string, params: unknown[]): Promise<Stored<Row>[]>;
  /** Every row, in journal order. */
  all(tx: PgTx): Promise<Stored<Row>[]>;
  /** Appends `row` at the end of the journal (the next `seq`). */
  insert(tx: PgTx, row: Row): Promise<void>;
  /** Rows in the table now (kept by triggers: O(1)). */
  count(tx: PgTx): Promise<number>;
  /** Changes whenever a write changed this table (the peeks' memo key). */
  version(tx: PgTx): Promise<string>;
  /**
   * Writes `next` (a step's rows for `slice`) over `slice`: removals first (so the unique constraints never
   * see a row and its replacement at once), then updates in place, inserts, and, with `appendsLast`, the
   * step's last row at the end of the journal (the next `seq`) after `beforeAppend` (the cap) approves it.
   */
  applyDiff(
    tx: PgTx,
    slice: Stored<Row>[],
    next: Row[],
    appendsLast: boolean,
    beforeAppend: (row: Row, replaces: boolean) => Promise<void>,
  ): Promise<void>;
}

/** The statements and the diff every journal table shares (the async twin of storage-sqlite's rows.ts). */
export function rowTable<Row>(spec: RowTableSpec<Row>): RowTable<Row> {
  const names = [...spec.columns, "row_json"];
  const insertSql = `INSERT INTO ${spec.table} (${names.join(", ")}) VALUES (${names.map((_, i) => `$${i + 1}`).join(", ")})`;
  const updateSql = `UPDATE ${spec.table} SET ${names.map((n, i) => `${n} = $${i + 1}`).join(", ")} WHERE seq = $${names.length + 1}`;
  const params = (row: Row) => [...spec.values(row), JSON.stringify(row)];
  const parse = (raw: { seq: string; row_json: string }): Stored<Row> => {
    let value: unknown;
    try {
      value = JSON.parse(raw.row_json);
    } catch (error) {
      throw corruptFailure(spec.where, `${spec.what} ${raw.seq} is not JSON`, error);
    }
    const parsed = spec.schema.safeParse(value);
    if (!parsed.success)
      throw corruptFailure(spec.where, `${spec.what} ${raw.seq} breaks the journal's format`);
    return { seq: raw.seq, row: parsed.data };
  };
  const select = async (tx: PgTx, where: string, values: unknown[]) =>
    (
      await tx.query<{ seq: string; row_json: string }>(
        // Ordered by the table's bigint column: a bare `ORDER BY seq` names the text alias, and "10" < "9".
        `SELECT seq::text AS seq, row_json FROM ${spec.table} WHERE ${where} ORDER BY ${spec.table}.seq`,
        values,
      )
    ).map(parse);
  const state = async (tx: PgTx) =>
    (
      await tx.query<{ n: string; version: string }>("SELECT n, version FROM journal_state WHERE name = $1", [
        spec.stateName,
      ])
    )[0] ?? { n: "0", version: "0" };

  const insert = async (tx: PgTx, row: Row) => {
    await tx.query(insertSql, params(row));
  };
  return {
    select,
    insert,
    all: (tx) => select(tx, "TRUE", []),
    count: async (tx) => Number((await state(tx)).n),
    version: async (tx) => (await state(tx)).version,
    async applyDiff(tx, slice, next, appendsLast, beforeAppend) {
      const last = appendsLast ? next.at(-1) : undefined;
      const inPlace = appendsLast ? next.slice(0, -1) : next;
      const kept = new Map(inPlace.map((row) => [spec.key(row), row]));
      const before = new Set(slice.map((stored) => spec.key(stored.row)));
      const gone = slice.filter((stored) => !kept.has(spec.key(stored.row))).map((stored) => stored.seq);
      if (gone.length > 0) await tx.query(`DELETE FROM ${spec.table} WHERE seq = ANY($1::bigint[])`, [gone]);
      for (const stored of slice) {
        const row = kept.get(spec.key(stored.row));
        if (row !== undefined && JSON.stringify(row) !== JSON.stringify(stored.row)) {
          await tx.query(updateSql, [...params(row), stored.seq]);
        }
      }
      for (const row of inPlace) if (!before.has(spec.key(row))) await insert(tx, row);
      if (last !== undefined) {
        await beforeAppend(last, before.has(spec.key(last)));
        await insert(tx, last);
      }
      tx.touch(spec.stateName);
    },
  };
}
