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
  options: { claim?: boolean } = {},
): Promise<Storage> {
  if (options.claim !== true) return openUnclaimed(dataDir, requested, now);
  // STORAGE_IN_USE while a migration runs; released when the storage is closed.
  const claim = await claimDataDir(dataDir, { role: "cli", now });
  let storage: Storage;
  try {
    storage = await openUnclaimed(dataDir, requested, now);
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
): Promise<Storage> {
  const wanted = requestedKind(requested);
  const binding = await readStorageBinding(dataDir);
  if (binding === null) {
    // A directory no backend was ever bound to: nothing to read in a database, and the CLI never binds a
    // directory (it is read-only until --yes, and binding is the server's first start's job).
    if (wanted !== undefined && wanted !== "file") {
      throw new CliError(
        "NOT_FOUND",
        `The data directory ${dataDir} is not bound to the ${wanted} storage backend (it has no ${STORAGE_BINDING_FILE}${wanted === "sqlite" ? ` and no ${SQLITE_FILE}` : ""}): no drydock-server ever ran on it with DRYDOCK_STORAGE=${wanted}. Nothing was read or changed. Pass the right --data-dir, or drop --storage.`,
      );
    }
    return openFileStorage({ dataDir, now });
  }
  // Bound already: bindStorage only compares (and refuses a mismatch naming both and the migrate command).
  if (wanted !== undefined) await bindStorage(dataDir, wanted);
  return openStorage({ dataDir, storage: binding.kind, backends: { sqlite: sqliteBackend }, now });
}

/** `--storage` / DRYDOCK_STORAGE: file or sqlite (postgres is not wired into drydock yet). */
function requestedKind(value: string | undefined): StorageKind | undefined {
  if (value === undefined || value === "") return undefined;
  let kind: StorageKind;
  try {
    kind = parseStorageSetting(value).kind;
  } catch (error) {
    if (isStorageError(error)) throw new CliError("USAGE", `--storage / DRYDOCK_STORAGE: ${error.message}`);
    throw error;
  }
  if (kind === "postgres") {
    throw new CliError(
      "USAGE",
      "--storage / DRYDOCK_STORAGE: the postgres backend is not wired into drydock yet; use file or sqlite. Nothing was read.",
    );
  }
  return kind;
}

/** Where a storage keeps its state, as `drydock status` names it: `sqlite (<dataDir>/drydock.sqlite)`. */
export function storageLocation(storage: Pick<Storage, "kind" | "dataDir">): string {
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
