import { BoatCreateJournalFileSchema } from "@drydock/boat-create-journal";
import { checkCreateJournal } from "@drydock/boat-create-journal/logic";
import { BoatDeleteJournalFileSchema } from "@drydock/boat-delete-journal";
import { checkDeleteJournal } from "@drydock/boat-delete-journal/logic";
import {
  assertMetaKey,
  BotSchema,
  META_VALUE,
  notEmptyFailure,
  StorageError,
  type StorageExport,
} from "@drydock/storage";
import { CREATE_ROW_SPEC } from "./create-journal.js";
import type { SqliteHandle } from "./database.js";
import { DELETE_ROW_SPEC } from "./delete-journal.js";
import { rowTable } from "./rows.js";

function bad(what: string): StorageError {
  return new StorageError({
    code: "STORAGE_INVALID_ARGUMENT",
    message: `importAll was given ${what}; nothing was imported`,
  });
}

/** The export, checked whole with the journals' own schemas and invariants before anything is written. */
function checkExport(data: StorageExport, limits: { maxRows: number; maxBots: number }): void {
  if (typeof data !== "object" || data === null) throw bad("no export");
  const creates = BoatCreateJournalFileSchema.safeParse({ version: 1, requests: data.creates });
  if (!creates.success || checkCreateJournal(creates.data) !== null)
    throw bad("a create journal that breaks its format");
  const deletes = BoatDeleteJournalFileSchema.safeParse({ version: 1, records: data.deletes });
  if (!deletes.success || checkDeleteJournal(deletes.data) !== null)
    throw bad("a delete journal that breaks its format");
  if (!Array.isArray(data.bots) || !data.bots.every((b) => BotSchema.safeParse(b).success))
    throw bad("a bot registry that breaks its format");
  if (new Set(data.bots.map((b) => b.botId)).size !== data.bots.length)
    throw bad("a bot registry with a bot twice");
  if (data.creates.length > limits.maxRows || data.deletes.length > limits.maxRows)
    throw bad("more rows than maxRows");
  if (data.bots.length > limits.maxBots) throw bad("more bots than maxBots");
  for (const [key, value] of Object.entries(data.meta ?? {})) {
    assertMetaKey(key);
    if (typeof value !== "string" || !META_VALUE.test(value)) throw bad(`an invalid value for ${key}`);
  }
}

/** importAll: the whole export in one BEGIN IMMEDIATE transaction, into a database that holds nothing. */
export function importInto(
  handle: SqliteHandle,
  data: StorageExport,
  limits: { maxRows: number; maxBots: number },
): void {
  checkExport(data, limits);
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
    creates.applyDiff([], data.creates, false, () => {});
    deletes.applyDiff([], data.deletes, false, () => {});
    // botId order: the export's; list() then follows it too.
    for (const bot of data.bots) {
      insertBot.run({
        bot_id: bot.botId,
        name: bot.name,
        created_at: bot.createdAt,
        row_json: JSON.stringify(bot),
      });
    }
    for (const [key, value] of Object.entries(data.meta)) insertMeta.run(key, value);
  });
}
