import { randomBytes, randomUUID } from "node:crypto";
import {
  closeSync,
  fsyncSync,
  linkSync,
  mkdirSync,
  openSync,
  readFileSync,
  unlinkSync,
  writeSync,
} from "node:fs";
import { join } from "node:path";
import {
  CHECKPOINTS_DIR,
  EMBEDDED_PROVIDER_FILE,
  EMBEDDED_PROVIDER_LOCK_FILE,
  ENVIRONMENT_ID_FILE,
  LOCKS_DIR,
  RESTORE_SAGAS_DIR,
  SERVER_TOKEN_FILE,
  UUID_V4,
  WORKSPACES_DIR,
} from "@drydock/facts";
import {
  acquireLockSync,
  inspectLock,
  isLockError,
  judgeOwnerLiveness,
  type LockHandle,
} from "@drydock/file-lock";
import { writeFileAtomic } from "@drydock/json-journal";
import {
  PROVIDER_BINDING_FILE,
  providerIdentity,
  providerMismatch,
  readProviderBinding,
} from "@drydock/recovery-controller";
import { isStorageError, type Storage } from "@drydock/storage";
import { processAlive } from "./workspace-files.js";

const UUID = UUID_V4;
const TOKEN = /^[A-Za-z0-9_-]{16,512}$/;

export class DataDirError extends Error {
  override readonly name = "DataDirError";
}

/**
 * Writes `content` to `path` only if nothing is there yet, durably, and never half-visible: a flushed temp
 * is published with link(2), which fails with EEXIST when another process got there first. Returns what is
 * at `path` afterwards (ours or the winner's), so two servers starting together agree on one value.
 */
function createOnce(path: string, content: string, valid: RegExp, what: string): string {
  const tmp = `${path}.${process.pid}.${randomBytes(6).toString("hex")}.tmp`;
  const fd = openSync(tmp, "wx", 0o600);
  try {
    writeSync(fd, `${content}\n`);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  try {
    linkSync(tmp, path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
  } finally {
    unlinkSync(tmp);
  }
  const dirFd = openSync(join(path, ".."), "r");
  try {
    fsyncSync(dirFd);
  } finally {
    closeSync(dirFd);
  }
  return readValid(path, valid, what) as string;
}

function readValid(path: string, valid: RegExp, what: string): string | null {
  let raw: string;
  try {
    raw = readFileSync(path, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw new DataDirError(`cannot read ${what} at ${path}: ${(error as Error).message}`);
  }
  const value = raw.trim();
  if (!valid.test(value)) {
    // Never regenerate: a new environment id would rename every Boat this installation owns.
    throw new DataDirError(
      `${what} at ${path} is not valid; restore it from a backup (drydock never replaces it).`,
    );
  }
  return value;
}

export function ensureDataDir(dataDir: string): void {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  for (const sub of [WORKSPACES_DIR, CHECKPOINTS_DIR, RESTORE_SAGAS_DIR, LOCKS_DIR]) {
    mkdirSync(join(dataDir, sub), { recursive: true, mode: 0o700 });
  }
}

/**
 * The installation's id: scopes Boat names so two installations sharing a boat.dev account never collide.
 * Kept in the storage's meta singletons (`environment-id`: on the file backend the very file the seeds
 * wrote, `<dataDir>/environment-id`): minted once (first writer wins), never regenerated, and a stored value
 * that is not a UUID is refused, never replaced (a new id would rename every Boat this installation owns).
 */
export async function loadEnvironmentId(
  storage: Pick<Storage, "meta" | "kind" | "dataDir">,
): Promise<string> {
  const where =
    storage.kind === "file"
      ? join(storage.dataDir, ENVIRONMENT_ID_FILE)
      : `${storage.dataDir} (the ${storage.kind} storage's meta ${ENVIRONMENT_ID_FILE})`;
  let value: string;
  try {
    value = await storage.meta.getOrCreate(ENVIRONMENT_ID_FILE, randomUUID);
  } catch (error) {
    // Bytes that are not a value at all: the same refusal as a value that is not a UUID.
    if (isStorageError(error) && error.code === "STORAGE_CORRUPT") throw invalidEnvironmentId(where, error);
    throw error;
  }
  if (!UUID.test(value)) throw invalidEnvironmentId(where);
  return value;
}

function invalidEnvironmentId(where: string, cause?: unknown): DataDirError {
  return new DataDirError(
    `the environment id at ${where} is not valid; restore it from a backup (drydock never replaces it).`,
    cause === undefined ? undefined : { cause },
  );
}

/** The bearer token clients must send when DRYDOCK_TOKEN is not configured. */
export function loadServerToken(dataDir: string): { token: string; path: string } {
  const path = join(dataDir, SERVER_TOKEN_FILE);
  const token =
    readValid(path, TOKEN, "the server token") ??
    createOnce(path, randomBytes(32).toString("base64url"), TOKEN, "the server token");
  return { token, path };
}

/** Where a server running the embedded boat.dev twin leaves its address and token for the CLI. */
export { EMBEDDED_PROVIDER_FILE };

const EMBEDDED_SIMULATOR_LOCK = EMBEDDED_PROVIDER_LOCK_FILE;

/**
 * The holder of the embedded simulator's lock while it may still run (`{}` when the lock cannot be judged:
 * fail closed), or null when no simulator runs on the directory.
 */
function embeddedSimulatorOwner(dataDir: string): { pid?: number } | null {
  try {
    const owner = inspectLock(join(dataDir, EMBEDDED_SIMULATOR_LOCK));
    if (owner === null || judgeOwnerLiveness(owner) === "dead") return null;
    return { pid: owner.pid };
  } catch {
    return {};
  }
}

/**
 * Held by the one server of a data directory that runs the embedded simulator, for as long as it runs
 * (a killed server's lock is reaped by the next start: its owner is provably dead). Two servers would run
 * two simulators over one state file: not one boat.dev but two, each unaware of the other's Boats, so a bot
 * could get a Boat from each. The second is refused before it starts a simulator; with a real provider
 * (BOAT_API_URL), any number of servers share one data directory, the journals serializing them.
 */
export function holdEmbeddedSimulator(dataDir: string): LockHandle {
  const path = join(dataDir, EMBEDDED_SIMULATOR_LOCK);
  try {
    return acquireLockSync(path, { waitMs: 0, label: "drydock server" });
  } catch (error) {
    if (isLockError(error) && error.code === "LOCK_TIMEOUT") {
      const pid = error.owner?.pid;
      throw new DataDirError(
        `another drydock server${pid === undefined ? "" : ` (pid ${pid})`} is running on ${dataDir} with the embedded boat.dev simulator. A second one would start a second, separate simulator over the same state, which is not one boat.dev: a bot could get two Boats. Stop that server first, use another DRYDOCK_DATA_DIR, or point every server at one provider with BOAT_API_URL and BOAT_API_TOKEN.`,
      );
    }
    throw new DataDirError(
      `the embedded boat.dev simulator's lock ${path} could not be taken: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
}

/**
 * Writes `<dataDir>/embedded-boat-dev.json` (0600, atomically): the embedded simulator's API URL and token,
 * which change on every start. `drydock` reads it when no provider is configured, so the commands it prints
 * for Boats can run against the same twin the server uses; without it they could never reach it.
 */
export function saveEmbeddedProvider(dataDir: string, provider: { apiUrl: string; token: string }): void {
  const path = join(dataDir, EMBEDDED_PROVIDER_FILE);
  const body = { version: 1, apiUrl: provider.apiUrl, token: provider.token, serverPid: process.pid };
  writeFileAtomic(path, `${JSON.stringify(body, null, 2)}\n`, { mode: 0o600, durable: true });
}

/**
 * Removes `embedded-boat-dev.json` if this process wrote it (or a server that has exited did), so drydock
 * never reads the address of a simulator that is gone; a file another live server wrote is left to it.
 * Best effort: a file that cannot be read or removed stays, and drydock then checks its writer itself.
 */
export function removeEmbeddedProvider(dataDir: string): void {
  const path = join(dataDir, EMBEDDED_PROVIDER_FILE);
  try {
    const { serverPid } = JSON.parse(readFileSync(path, "utf8")) as { serverPid?: unknown };
    if (typeof serverPid === "number" && serverPid !== process.pid && processAlive(serverPid)) return;
    unlinkSync(path);
  } catch {
    // Absent, unreadable or already gone: nothing to do.
  }
}

const PROVIDER_LINE = /^(embedded|https?:\/\/\S+)$/;

/**
 * Binds the data directory to `identity` on its first start (recovery-controller's `providerMismatch` says
 * why one directory must stay with one boat.dev), or refuses a start whose provider is not the bound one.
 */
export function bindProvider(dataDir: string, identity: string): void {
  const mismatch = providerMismatch(dataDir, identity);
  if (mismatch !== null) throw new DataDirError(mismatch);
  // The file can be rewritten while a server of the old provider still runs (a rebind done too early): a
  // running embedded simulator is a provider in use, whatever the file says.
  const running = identity === "embedded" ? null : embeddedSimulatorOwner(dataDir);
  if (running !== null) {
    throw new DataDirError(
      `a drydock server${running.pid === undefined ? "" : ` (pid ${running.pid})`} runs the embedded boat.dev simulator on ${dataDir}, so this directory's Boats are the simulator's while it runs; a server for boat.dev at ${identity} would mix two providers' Boats. Stop that server first (and settle what is open against the simulator before moving the directory).`,
    );
  }
  if (readProviderBinding(dataDir) === null) {
    const bound = createOnce(
      join(dataDir, PROVIDER_BINDING_FILE),
      identity,
      PROVIDER_LINE,
      "the provider binding",
    );
    // Two first starts at once with different providers: the one that lost the race refuses now.
    if (providerIdentity(bound === "embedded" ? null : bound) !== identity) {
      throw new DataDirError(
        providerMismatch(dataDir, identity) ?? "the data directory was bound to another provider",
      );
    }
  }
}

/**
 * The storage meta key holding the boat.dev every host of a postgres installation uses: the create journal,
 * the deletion fences and the Boat names are shared by all hosts, so they must all talk to one boat.dev.
 */
export const SHARED_PROVIDER_KEY = "provider-identity";

/**
 * On a store several hosts share (postgres), binds it to one boat.dev, first writer wins, as `bindProvider`
 * binds a data directory: a host configured for another boat.dev is refused at start, before it creates or
 * deletes anything. The embedded simulator (`identity` "embedded") never binds the store, since it belongs
 * to one server and its data directory (whose own binding is then what a move to a real boat.dev edits); it
 * is refused once the store is bound to a real boat.dev.
 */
export async function bindSharedProvider(
  storage: Pick<Storage, "meta"> & { where: string },
  identity: string,
): Promise<void> {
  const bound =
    identity === "embedded"
      ? await storage.meta.get(SHARED_PROVIDER_KEY)
      : await storage.meta.getOrCreate(SHARED_PROVIDER_KEY, () => identity);
  if (bound === null || bound === identity) return;
  const name = (id: string) => (id === "embedded" ? "this server's embedded simulator" : `boat.dev at ${id}`);
  throw new DataDirError(
    `The shared store ${storage.where} describes the Boats of ${name(bound)}, but this server is configured for ${name(identity)}. Every server of one installation shares its create keys, deletion fences and Boat names, so all of them must use the same boat.dev (an embedded simulator belongs to one server and cannot be shared). Set BOAT_API_URL and BOAT_API_TOKEN to ${bound} on this server (BOAT_API_IDENTITY=${bound} if it reaches that boat.dev through another address), or give it another database or DRYDOCK_POSTGRES_SCHEMA. Nothing was created or changed.`,
  );
}
