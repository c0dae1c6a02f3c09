/**
 * The names inside a drydock data directory (`DRYDOCK_DATA_DIR`), each defined once. They are part of the
 * on-disk format: renaming one orphans what an older drydock wrote, so they never change.
 */

/** The bots the server knows: `{ version, bots: [...] }`. */
export const BOTS_FILE = "bots.json";

/** The create journal (idempotency keys, at most one Boat per bot), byte-compatible with seed 000. */
export const CREATE_JOURNAL_FILE = "box-create-requests.json";
/** The create journal's cross-process lock. */
export const CREATE_JOURNAL_LOCK_FILE = "box-create-requests.lock";

/** The delete journal (deletion fences and their receipts), byte-compatible with seed 001. */
export const DELETE_JOURNAL_FILE = "box-delete-requests.json";
/** The delete journal's cross-process lock. */
export const DELETE_JOURNAL_LOCK_FILE = "box-delete-requests.lock";

/** Directory of the restore sagas (one shard per workspace). */
export const RESTORE_SAGAS_DIR = "restore-sagas";
/** Directory of the checkpoint store (manifests and objects). */
export const CHECKPOINTS_DIR = "checkpoints";
/** Directory where a restore stages files before it swaps them in. */
export const RESTORE_STAGING_DIR = "restore-staging";
/** Directory of the bots' workspaces, one per bot id. */
export const WORKSPACES_DIR = "workspaces";
/** Directory of the workspace and registry locks. */
export const LOCKS_DIR = "locks";

/** The installation's id (a UUID v4): scopes Boat names. Never regenerated once written. */
export const ENVIRONMENT_ID_FILE = "environment-id";
/** The bearer token clients must send when `DRYDOCK_TOKEN` is not configured. */
export const SERVER_TOKEN_FILE = "server-token";
/** Which Boat provider (origin, account) this data directory is bound to. */
export const PROVIDER_BINDING_FILE = "boat-provider";
/** Where a server running the embedded boat.dev twin leaves its address and token for the CLI. */
export const EMBEDDED_PROVIDER_FILE = "embedded-boat-dev.json";
/** The embedded boat.dev twin's lock: held while a simulator runs on the directory. */
export const EMBEDDED_PROVIDER_LOCK_FILE = "embedded-boat-dev.lock";

/**
 * Which storage backend the data directory is bound to (`{"version":1,"kind":"file"|"sqlite"|"postgres"}`),
 * written on first start: starting it with another backend refuses and names `drydock storage migrate`.
 */
export const STORAGE_BINDING_FILE = "storage.json";
