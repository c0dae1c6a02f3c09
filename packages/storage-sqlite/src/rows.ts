import { corruptFailure } from "@drydock/storage";
import type { SqliteHandle } from "./database.js";

/** A row as read: its place in the journal (`seq`) and the row exactly as the journal holds it. */
export interface Stored<Row> {
  seq: number;
  row: Row;
}

export interface RowTableSpec<Row> {
  /** The table (`create_rows`, `delete_rows`) and its name in `row_counts`. */
  table: string;
  countName: string;
  /** "create row", "deletion fence": names a damaged row in errors. */
  what: string;
  /** The row's identity within a step (idempotency key, Boat id): unique by the journal's invariants. */
  key: (row: Row) => string;
  /** The journal's row schema; a stored row that fails it is damage. */
  schema: { safeParse(value: unknown): { success: true; data: Row } | { success: false } };
  /** The indexed columns (beside `seq` and `row_json`) and their values for a row. */
  columns: readonly string[];
  values: (row: Row) => Record<string, unknown>;
}

export interface RowTable<Row> {
  /** Runs a `SELECT seq, row_json … ORDER BY seq` and parses each row. */
  rows(statement: { all(...params: unknown[]): unknown[] }, ...params: unknown[]): Stored<Row>[];
  /** Rows in the table now (kept by triggers: O(1)). */
  count(): number;
  /**
   * Writes `next` (a step's rows for `slice`) over `slice`. Rows of `next` keep their place (updated where
   * changed); rows gone are deleted. With `appendsLast`, the step put its last row at the end of the journal
   * (`[...others, row]`), so that row gets the next `seq`, as it gets the last place in the file;
   * `beforeAppend` runs first (after the removals), for the cap.
   */
  applyDiff(
    slice: Stored<Row>[],
    next: Row[],
    appendsLast: boolean,
    beforeAppend: (row: Row, replaces: boolean) => void,
  ): void;
}

/** The statements and the diff every journal table shares. */
export function rowTable<Row>(handle: SqliteHandle, spec: RowTableSpec<Row>): RowTable<Row> {
  const { db } = handle;
  const names = [...spec.columns, "row_json"];
  const count = db.prepare(`SELECT n FROM row_counts WHERE name = '${spec.countName}'`).pluck();
  const remove = db.prepare(`DELETE FROM ${spec.table} WHERE seq = ?`);
  const insert = db.prepare(
    `INSERT INTO ${spec.table} (${names.join(", ")}) VALUES (${names.map((n) => `@${n}`).join(", ")})`,
  );
  const update = db.prepare(
    `UPDATE ${spec.table} SET ${names.map((n) => `${n} = @${n}`).join(", ")} WHERE seq = @seq`,
  );
  const params = (row: Row) => ({ ...spec.values(row), row_json: JSON.stringify(row) });

  const parse = (raw: { seq: number; row_json: string }): Stored<Row> => {
    let value: unknown;
    try {
      value = JSON.parse(raw.row_json);
    } catch (error) {
      throw corruptFailure(handle.path, `${spec.what} ${raw.seq} is not JSON`, error);
    }
    const parsed = spec.schema.safeParse(value);
    if (!parsed.success)
      throw corruptFailure(handle.path, `${spec.what} ${raw.seq} breaks the journal's format`);
    return { seq: raw.seq, row: parsed.data };
  };

  return {
    rows: (statement, ...values) =>
      (statement.all(...values) as { seq: number; row_json: string }[]).map(parse),
    count: () => count.get() as number,
    applyDiff(slice, next, appendsLast, beforeAppend) {
      const last = appendsLast ? next.at(-1) : undefined;
      const inPlace = appendsLast ? next.slice(0, -1) : next;
      const kept = new Map(inPlace.map((row) => [spec.key(row), row]));
      const before = new Set(slice.map((stored) => spec.key(stored.row)));
      // Removals first, so the unique constraints never see a row and its replacement at once.
      for (const stored of slice) if (!kept.has(spec.key(stored.row))) remove.run(stored.seq);
      for (const stored of slice) {
        const row = kept.get(spec.key(stored.row));
        if (row !== undefined && JSON.stringify(row) !== JSON.stringify(stored.row)) {
          update.run({ ...params(row), seq: stored.seq });
        }
      }
      for (const row of inPlace) if (!before.has(spec.key(row))) insert.run(params(row));
      if (last !== undefined) {
        beforeAppend(last, before.has(spec.key(last)));
        insert.run(params(last));
      }
    },
  };
}
