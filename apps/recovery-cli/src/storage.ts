import { readFileSync } from "node:fs";
import path from "node:path";
import { ENVIRONMENT_ID_FILE, STORAGE_BINDING_FILE } from "@drydock/facts";
import {
  bindStorage,
  claimDataDir,
  isStorageError,
  openFileStorage,
  openStorage,
  parseStorageSetting,
  readStorageBinding,
  type Storage,
  type StorageKind,
} from "@drydock/storage";
import { instancesOf, postgresBackend } from "@drydock/storage-postgres";
import { SQLITE_FILE, sqliteBackend } from "@drydock/storage-sqlite";
import { CliError } from "./errors.js";

/**
 * Which storage backend a command reads and writes: `--storage`, else DRYDOCK_STORAGE, else the data
 * directory's binding (`storage.json`, or `file` for a directory the file backend wrote), so an operator never
 * repeats what the server was started with. A choice that disagrees with the binding is refused with the
 * binding's own message (STORAGE_BACKEND_MISMATCH: both backends and the migrate command); nothing is written.
 */
export async function openCliStorage(
  dataDir: string,
  requested: string | undefined,
  now: () => number,
  options: { claim?: boolean; postgresSchema?: string | undefined } = {},
): Promise<Storage> {
  if (options.claim !== true) return openUnclaimed(dataDir, requested, now, options.postgresSchema);
  // STORAGE_IN_USE while a migration runs; released when the storage is closed.
  const claim = await claimDataDir(dataDir, { role: "cli", now });
  let storage: Storage;
  try {
    storage = await openUnclaimed(dataDir, requested, now, options.postgresSchema);
  } catch (error) {
    claim.release();
    throw error;
  }
  return {
    ...storage,
    kind: storage.kind,
    dataDir: storage.dataDir,
    async close() {
      try {
        await storage.close();
      } finally {
        claim.release();
      }
    },
  };
}

async function openUnclaimed(
  dataDir: string,
  requested: string | undefined,
  now: () => number,
  postgresSchema: string | undefined,
): Promise<Storage> {
  const setting = requestedSetting(requested);
  const wanted = setting?.kind;
  const binding = await readStorageBinding(dataDir);
  if (binding === null) {
    // A directory no backend was ever bound to: nothing to read in a database, and the CLI never binds a
    // directory (it is read-only until --yes, and binding is the server's first start's job).
    if (wanted !== undefined && wanted !== "file") {
      throw new CliError(
        "NOT_FOUND",
        `The data directory ${dataDir} is not bound to the ${wanted} storage backend (it has no ${STORAGE_BINDING_FILE}${wanted === "sqlite" ? ` and no ${SQLITE_FILE}` : ""}): no drydock-server ever ran on it with DRYDOCK_STORAGE=${wanted === "postgres" ? "postgres://…" : wanted}. Nothing was read or changed. Pass the right --data-dir, or drop --storage.`,
      );
    }
    return openFileStorage({ dataDir, now });
  }
  // Bound already: bindStorage only compares (and refuses a mismatch naming both and the migrate command).
  if (wanted !== undefined) await bindStorage(dataDir, wanted);
  if (binding.kind === "postgres" && setting?.url === undefined) {
    // The binding names the backend only: the URL holds a password and is never written to the directory.
    throw new CliError(
      "USAGE",
      `The data directory ${dataDir} is bound to the postgres storage backend, and its database URL is not stored there. Pass --storage postgres://… or set DRYDOCK_STORAGE (or DRYDOCK_STORAGE_FILE, a file holding the URL) as the server has it. Nothing was read or changed.`,
    );
  }
  if (binding.kind === "postgres") {
    // No `now`: every stamp and window of a postgres store is the database's clock, as the server's store
    // has it. This host's clock (a test's, or an operator's machine that is minutes off) must never stamp
    // the rows a fenced action writes, nor judge their windows inside the store.
    return openStorage({
      dataDir,
      storage: setting?.url as string,
      backends: { postgres: postgresBackend },
      ...(postgresSchema !== undefined ? { backendOptions: { schema: postgresSchema } } : {}),
    });
  }
  return openStorage({ dataDir, storage: binding.kind, backends: { sqlite: sqliteBackend }, now });
}

/**
 * How far the database's clock is ahead of `hostNow` (ms; 0 for file and sqlite, whose stamps are this host's
 * clock): one read of the database's time, against the middle of this host's clock around it.
 */
export async function databaseClockOffset(storage: Storage, hostNow: () => number): Promise<number> {
  const instances = instancesOf(storage);
  if (instances === null) return 0;
  const before = hostNow();
  const { now } = await instances.list();
  return Math.round(now - (before + hostNow()) / 2);
}

/** `--storage` / DRYDOCK_STORAGE: file, sqlite or a postgres:// URL (its password is never printed). */
function requestedSetting(value: string | undefined): { kind: StorageKind; url?: string } | undefined {
  if (value === undefined || value === "") return undefined;
  try {
    return parseStorageSetting(value);
  } catch (error) {
    if (isStorageError(error)) throw new CliError("USAGE", `--storage / DRYDOCK_STORAGE: ${error.message}`);
    throw error;
  }
}

/**
 * The storage setting from the environment: DRYDOCK_STORAGE, or the content (trimmed) of the file
 * DRYDOCK_STORAGE_FILE names (for a postgres URL, which holds a password); both set is a USAGE error.
 */
export function storageSettingFromEnv(env: Readonly<Record<string, string | undefined>>): string | undefined {
  const direct = env.DRYDOCK_STORAGE === "" ? undefined : env.DRYDOCK_STORAGE;
  const file = env.DRYDOCK_STORAGE_FILE === "" ? undefined : env.DRYDOCK_STORAGE_FILE;
  if (file === undefined) return direct;
  if (direct !== undefined) {
    throw new CliError("USAGE", "set DRYDOCK_STORAGE or DRYDOCK_STORAGE_FILE, not both. Nothing was read.");
  }
  try {
    return readFileSync(file, "utf8").trim();
  } catch (error) {
    const e = error as NodeJS.ErrnoException;
    throw new CliError(
      "USAGE",
      `DRYDOCK_STORAGE_FILE: cannot read ${file}: ${e.code ?? e.message}. Nothing was read.`,
      error,
    );
  }
}

/** Where a storage keeps its state, as `drydock status` names it: `sqlite (<dataDir>/drydock.sqlite)`. */
export function storageLocation(storage: Pick<Storage, "kind" | "dataDir">): string {
  if (storage.kind === "postgres") {
    const where = (storage as { where?: unknown }).where;
    return `${typeof where === "string" ? where : "PostgreSQL"}; workspaces and restore sagas in ${storage.dataDir}`;
  }
  return storage.kind === "sqlite"
    ? path.join(storage.dataDir, SQLITE_FILE)
    : `${storage.dataDir}, one JSON file per journal`;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * The installation's environment id from the storage's meta (on the file backend `<dataDir>/environment-id`);
 * throws ENVIRONMENT_ID_MISSING when the server never wrote it or it is not a UUID. Never minted here.
 */
export async function readEnvironmentId(storage: Storage): Promise<string> {
  const where =
    storage.kind === "file"
      ? path.join(storage.dataDir, ENVIRONMENT_ID_FILE)
      : `${storageLocation(storage)} (meta ${ENVIRONMENT_ID_FILE})`;
  const notUuid = (cause?: unknown) =>
    new CliError(
      "ENVIRONMENT_ID_MISSING",
      `${where} does not hold a UUID, so this installation's Boat names cannot be computed. Restore it from a backup; do not invent a new id (Boats are named after it).`,
      cause,
    );
  const missing = (cause?: unknown) =>
    new CliError(
      "ENVIRONMENT_ID_MISSING",
      `${where} is missing or unreadable, so this installation's Boat names cannot be computed. ` +
        "Start drydock-server once with this data directory (it writes the file), or pass the right --data-dir.",
      cause,
    );
  let value: string | null;
  try {
    value = await storage.meta.get(ENVIRONMENT_ID_FILE);
  } catch (error) {
    if (isStorageError(error) && error.code === "STORAGE_CORRUPT") throw notUuid(error);
    if (isStorageError(error) && error.code === "STORAGE_UNAVAILABLE") throw missing(error);
    throw error;
  }
  if (value === null) throw missing();
  if (!UUID.test(value)) throw notUuid();
  return value;
}
