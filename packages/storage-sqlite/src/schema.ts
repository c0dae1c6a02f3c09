/**
 * The database's schema, one migration per version (index 0 takes version 0 to 1, …). Applied in one
 * transaction at open; never edited once released — a change is a new migration.
 *
 * The journals' load-time invariants (`check.ts`) are constraints here, so even a bug cannot write a second
 * key: unique idempotency key, unique (bot, body), one Boat per bot (a partial unique index), one fence per
 * Boat, unique operation id. `seq` is the journal's order (a row appended by a step gets the next one).
 * `row_json` is the row exactly as the journal holds it (unknown members too, in their order); the other
 * columns are its indexed facts.
 */
export const MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE create_rows (
    seq INTEGER PRIMARY KEY,
    bot_id TEXT NOT NULL,
    request_body TEXT NOT NULL,
    idempotency_key TEXT NOT NULL UNIQUE,
    created_at REAL NOT NULL CHECK (created_at > 0),
    box_id TEXT,
    resolved INTEGER NOT NULL CHECK (resolved IN (0, 1)),
    row_json TEXT NOT NULL,
    CHECK (resolved = 0 OR box_id IS NOT NULL),
    UNIQUE (bot_id, request_body)
  );
  CREATE UNIQUE INDEX create_one_boat_per_bot ON create_rows (bot_id) WHERE box_id IS NOT NULL;
  CREATE INDEX create_by_box ON create_rows (box_id) WHERE box_id IS NOT NULL;
  CREATE TABLE delete_rows (
    seq INTEGER PRIMARY KEY,
    box_id TEXT NOT NULL UNIQUE,
    owner_bot_id TEXT,
    operation_id TEXT UNIQUE,
    row_json TEXT NOT NULL
  );
  CREATE INDEX delete_by_owner ON delete_rows (owner_bot_id);
  CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
  CREATE TABLE row_counts (name TEXT PRIMARY KEY, n INTEGER NOT NULL CHECK (n >= 0));
  INSERT INTO row_counts (name, n) VALUES ('create', 0), ('delete', 0);
  CREATE TRIGGER create_rows_ins AFTER INSERT ON create_rows BEGIN UPDATE row_counts SET n = n + 1 WHERE name = 'create'; END;
  CREATE TRIGGER create_rows_del AFTER DELETE ON create_rows BEGIN UPDATE row_counts SET n = n - 1 WHERE name = 'create'; END;
  CREATE TRIGGER delete_rows_ins AFTER INSERT ON delete_rows BEGIN UPDATE row_counts SET n = n + 1 WHERE name = 'delete'; END;
  CREATE TRIGGER delete_rows_del AFTER DELETE ON delete_rows BEGIN UPDATE row_counts SET n = n - 1 WHERE name = 'delete'; END;
  `,
  // 2: the bot registry (one row per bot; `row_json` is the bot exactly as the registry holds it, deletion
  // marks included; the rowid keeps creation order for list()), and the retirement row a migration away
  // from this database writes (any row there: every open refuses, naming where the state went).
  `
  CREATE TABLE bots (
    bot_id TEXT PRIMARY KEY,
    name TEXT NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    created_at INTEGER NOT NULL CHECK (created_at > 0),
    row_json TEXT NOT NULL
  );
  CREATE TABLE retired (to_kind TEXT NOT NULL, at INTEGER NOT NULL);
  `,
  // 3: workspaces held by the store (as on postgres): blobs by sha256, one head per bot (version and its
  // manifest as JSON), checkpoints (a recorded manifest; bot_id is a retired name after retireWorkspace) and
  // restores, recorded in the transaction that applied them.
  `
  CREATE TABLE ws_blobs (sha256 TEXT PRIMARY KEY, size INTEGER NOT NULL CHECK (size >= 0), bytes BLOB NOT NULL);
  CREATE TABLE ws_heads (
    bot_id TEXT PRIMARY KEY,
    version INTEGER NOT NULL CHECK (version >= 1),
    manifest TEXT NOT NULL
  );
  CREATE TABLE ws_checkpoints (
    checkpoint_id TEXT PRIMARY KEY,
    bot_id TEXT NOT NULL,
    version INTEGER NOT NULL CHECK (version >= 0),
    manifest TEXT NOT NULL,
    created_at INTEGER NOT NULL
  );
  CREATE INDEX ws_checkpoints_by_bot ON ws_checkpoints (bot_id);
  CREATE TABLE ws_restores (
    operation_id TEXT PRIMARY KEY,
    bot_id TEXT NOT NULL,
    checkpoint_id TEXT NOT NULL,
    from_version INTEGER NOT NULL,
    to_version INTEGER NOT NULL,
    started_at INTEGER NOT NULL,
    completed_at INTEGER NOT NULL
  );
  CREATE INDEX ws_restores_by_bot ON ws_restores (bot_id);
  `,
];
