import { checkImport, notEmptyFailure, type StorageExport } from "@drydock/storage";
import { CREATE_ROW_SPEC } from "./create-journal.js";
import type { SqliteHandle } from "./database.js";
import { DELETE_ROW_SPEC } from "./delete-journal.js";
import { rowTable } from "./rows.js";

/** importAll: the whole export in one BEGIN IMMEDIATE transaction, into a database that holds nothing. */
export function importInto(
  handle: SqliteHandle,
  data: StorageExport,
  limits: { maxRows: number; maxBots: number },
): void {
  const checked = checkImport(data, limits);
  const { db } = handle;
  const creates = rowTable(handle, CREATE_ROW_SPEC);
  const deletes = rowTable(handle, DELETE_ROW_SPEC);
  const insertBot = db.prepare(
    "INSERT INTO bots (bot_id, name, created_at, row_json) VALUES (@bot_id, @name, @created_at, @row_json)",
  );
  const insertMeta = db.prepare("INSERT INTO meta (key, value) VALUES (?, ?)");
  handle.write(() => {
    const held = db
      .prepare(
        "SELECT (SELECT COUNT(*) FROM create_rows) + (SELECT COUNT(*) FROM delete_rows) + (SELECT COUNT(*) FROM bots) + (SELECT COUNT(*) FROM meta)",
      )
      .pluck()
      .get() as number;
    if (held > 0) throw notEmptyFailure(handle.path, `${held} rows`);
    // In the journals' order: each row gets the next seq, as it had its place in the file.
    creates.applyDiff([], checked.creates, false, () => {});
    deletes.applyDiff([], checked.deletes, false, () => {});
    // botId order: the export's; list() then follows it too.
    for (const bot of checked.bots) {
      insertBot.run({
        bot_id: bot.botId,
        name: bot.name,
        created_at: bot.createdAt,
        row_json: JSON.stringify(bot),
      });
    }
    for (const [key, value] of Object.entries(checked.meta)) insertMeta.run(key, value);
  });
}
