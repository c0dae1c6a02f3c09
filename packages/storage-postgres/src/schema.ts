/**
 * The database's schema, one migration per version (index 0 takes version 0 to 1, …), applied at open under
 * `pg_advisory_lock`, each in its own transaction with its `schema_version` bump; never edited once
 * released — a change is a new migration.
 *
 * It mirrors storage-sqlite's schema: the journals' load-time invariants (`check.ts`) are constraints, so even
 * a bug cannot write a second key: unique idempotency key, unique (bot, body), one Boat per bot (a partial
 * unique index), one fence per Boat, unique operation id. `seq` is the journal's order; `row_json` is the row
 * exactly as the journal holds it (kept as text so member order and unknown members survive byte for byte),
 * the other columns are its indexed facts. `journal_state` holds each journal's row count (kept by triggers)
 * and a version bumped by every write (the peeks' memo key). `ops` holds the result of each recent mutating
 * call by its call id, so a COMMIT whose answer was lost is resolved by reading it (see README).
 */
export const MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE create_rows (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    bot_id TEXT NOT NULL,
    request_body TEXT NOT NULL,
    idempotency_key TEXT NOT NULL UNIQUE,
    created_at DOUBLE PRECISION NOT NULL CHECK (created_at > 0),
    box_id TEXT,
    resolved BOOLEAN NOT NULL,
    row_json TEXT NOT NULL,
    CHECK (NOT resolved OR box_id IS NOT NULL),
    UNIQUE (bot_id, request_body)
  );
  CREATE UNIQUE INDEX create_one_boat_per_bot ON create_rows (bot_id) WHERE box_id IS NOT NULL;
  CREATE INDEX create_by_box ON create_rows (box_id) WHERE box_id IS NOT NULL;
  CREATE TABLE delete_rows (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    box_id TEXT NOT NULL UNIQUE,
    owner_bot_id TEXT,
    operation_id TEXT UNIQUE,
    row_json TEXT NOT NULL
  );
  CREATE INDEX delete_by_owner ON delete_rows (owner_bot_id);
  CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
  CREATE TABLE bots (
    seq BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
    bot_id TEXT COLLATE "C" PRIMARY KEY,
    row_json TEXT NOT NULL
  );
  CREATE TABLE journal_state (
    name TEXT PRIMARY KEY,
    n BIGINT NOT NULL CHECK (n >= 0),
    version BIGINT NOT NULL
  );
  INSERT INTO journal_state (name, n, version) VALUES ('create', 0, 0), ('delete', 0, 0), ('bots', 0, 0);
  CREATE FUNCTION journal_count() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
  BEGIN
    IF TG_OP = 'INSERT' THEN
      UPDATE journal_state SET n = n + 1 WHERE name = TG_ARGV[0];
    ELSE
      UPDATE journal_state SET n = n - 1 WHERE name = TG_ARGV[0];
    END IF;
    RETURN NULL;
  END $$;
  -- (The function keeps the schema it was created in: a session with another search_path counts right too.)
  CREATE TRIGGER create_rows_count AFTER INSERT OR DELETE ON create_rows
    FOR EACH ROW EXECUTE FUNCTION journal_count('create');
  CREATE TRIGGER delete_rows_count AFTER INSERT OR DELETE ON delete_rows
    FOR EACH ROW EXECUTE FUNCTION journal_count('delete');
  CREATE TRIGGER bots_count AFTER INSERT OR DELETE ON bots
    FOR EACH ROW EXECUTE FUNCTION journal_count('bots');
  CREATE TABLE ops (
    call_id UUID PRIMARY KEY,
    at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    result_json TEXT NOT NULL
  );
  CREATE INDEX ops_by_age ON ops (at);
  `,
  // 1 → 2: server instances with leases judged by the database's clock, and epochs that only increase.
  `
  CREATE SEQUENCE instance_epochs AS BIGINT MINVALUE 1 NO CYCLE;
  CREATE TABLE instances (
    id UUID PRIMARY KEY,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL CHECK (pid > 0),
    started_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    lease_until TIMESTAMPTZ NOT NULL,
    epoch BIGINT NOT NULL UNIQUE DEFAULT nextval('instance_epochs'),
    state TEXT NOT NULL CHECK (state IN ('live', 'dead', 'stopped'))
  );
  `,
  // 2 → 3: workspaces (issue 24, shape 1): content-addressed blobs, one versioned head manifest per bot (every
  // write, delete and restore compares-and-sets its version), checkpoints (a head's manifest at a version) and
  // restores (recorded by operation id in the transaction that applied them). Manifests are jsonb arrays of
  // restore-saga's file entries, sorted by path. Blobs are never deleted in this slice (no GC yet).
  `
  CREATE TABLE ws_blobs (
    sha256 TEXT COLLATE "C" PRIMARY KEY CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    size BIGINT NOT NULL CHECK (size >= 0),
    bytes BYTEA NOT NULL,
    CHECK (octet_length(bytes) = size)
  );
  CREATE TABLE ws_heads (
    bot_id TEXT COLLATE "C" PRIMARY KEY,
    version BIGINT NOT NULL CHECK (version >= 1),
    manifest JSONB NOT NULL CHECK (jsonb_typeof(manifest) = 'array'),
    updated_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
  );
  CREATE TABLE ws_checkpoints (
    checkpoint_id TEXT COLLATE "C" PRIMARY KEY,
    bot_id TEXT COLLATE "C" NOT NULL,
    version BIGINT NOT NULL CHECK (version >= 0),
    manifest JSONB NOT NULL CHECK (jsonb_typeof(manifest) = 'array'),
    created_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
  );
  CREATE INDEX ws_checkpoints_by_bot ON ws_checkpoints (bot_id, created_at);
  CREATE TABLE ws_restores (
    operation_id TEXT COLLATE "C" PRIMARY KEY,
    bot_id TEXT COLLATE "C" NOT NULL,
    checkpoint_id TEXT COLLATE "C" NOT NULL REFERENCES ws_checkpoints (checkpoint_id),
    from_version BIGINT NOT NULL CHECK (from_version >= 0),
    to_version BIGINT NOT NULL CHECK (to_version = from_version + 1),
    state TEXT NOT NULL CHECK (state IN ('completed')),
    started_at TIMESTAMPTZ NOT NULL,
    completed_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
  );
  `,
];

/** The schema version this drydock writes; a database at a higher one was written by a newer drydock. */
export const SCHEMA_VERSION = MIGRATIONS.length;
