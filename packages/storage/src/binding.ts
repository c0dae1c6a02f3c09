import { promises as fsp } from "node:fs";
import { join } from "node:path";
import {
  BOTS_FILE,
  CREATE_JOURNAL_FILE,
  DELETE_JOURNAL_FILE,
  ENVIRONMENT_ID_FILE,
  STORAGE_BINDING_FILE,
} from "@drydock/facts";
import { STORAGE_KINDS, type StorageKind } from "./contract.js";
import { corruptFailure, StorageError } from "./errors.js";
import { createOnce, osOrUnknown } from "./file/meta.js";

/**
 * A data directory is bound to one storage backend on first start, like its provider binding: the
 * coordination state lives in exactly one place, so starting it with another backend (which would see an
 * empty store and mint new keys, a new environment id, a second Boat) is refused. The binding is
 * `<dataDir>/storage.json`, `{"version":1,"kind":"file"|"sqlite"|"postgres"}`, created once with link(2).
 *
 * A directory with no binding but with files the `file` backend (or the seeds) wrote is bound to `file`:
 * every installation before the binding existed used it.
 */

export interface StorageBinding {
  kind: StorageKind;
}

const FILE_BACKEND_MARKERS = [BOTS_FILE, CREATE_JOURNAL_FILE, DELETE_JOURNAL_FILE, ENVIRONMENT_ID_FILE];

function bindingPath(dataDir: string): string {
  return join(dataDir, STORAGE_BINDING_FILE);
}

function parseBinding(path: string, raw: string): StorageBinding {
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch (error) {
    throw corruptFailure(path, "not JSON", error);
  }
  const { version, kind } = (value ?? {}) as { version?: unknown; kind?: unknown };
  if (version !== 1) {
    throw new StorageError({
      code: "STORAGE_NEWER",
      message: `${path} has version ${JSON.stringify(version)}, which this drydock does not know (it writes version 1). Nothing was changed. Run the drydock that wrote it, or upgrade.`,
    });
  }
  if (typeof kind !== "string" || !(STORAGE_KINDS as readonly string[]).includes(kind)) {
    throw corruptFailure(path, `names the unknown backend ${JSON.stringify(kind)}`);
  }
  return { kind: kind as StorageKind };
}

/** The backend the data directory is bound to: its binding file, `file` by its files, or null (a new one). */
export async function readStorageBinding(dataDir: string): Promise<StorageBinding | null> {
  const path = bindingPath(dataDir);
  try {
    return parseBinding(path, await fsp.readFile(path, "utf8"));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw osOrUnknown(error, path);
  }
  for (const name of FILE_BACKEND_MARKERS) {
    try {
      await fsp.lstat(join(dataDir, name));
      return { kind: "file" };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw osOrUnknown(error, join(dataDir, name));
    }
  }
  return null;
}

/** The command that moves a data directory's state to another backend (`drydock storage migrate`). */
export function migrateCommand(dataDir: string, to: StorageKind): string {
  return `drydock storage migrate --data-dir ${JSON.stringify(dataDir)} --to ${to}`;
}

/**
 * Binds the data directory to `kind` on its first start, or checks that it is bound to `kind`. Two processes
 * starting together agree (first writer wins). A mismatch is STORAGE_BACKEND_MISMATCH naming both backends
 * and the migrate command; nothing is written.
 */
export async function bindStorage(dataDir: string, kind: StorageKind): Promise<StorageBinding> {
  const existing = await readStorageBinding(dataDir);
  if (existing === null) {
    const path = bindingPath(dataDir);
    try {
      await fsp.mkdir(dataDir, { recursive: true, mode: 0o700 });
      await createOnce(path, JSON.stringify({ version: 1, kind }));
    } catch (error) {
      throw osOrUnknown(error, path);
    }
    return bindStorage(dataDir, kind);
  }
  if (existing.kind !== kind) {
    throw new StorageError({
      code: "STORAGE_BACKEND_MISMATCH",
      message: `The data directory ${dataDir} is bound to the ${existing.kind} storage backend, but ${kind} was asked for. Nothing was changed. Start with DRYDOCK_STORAGE=${existing.kind}, or stop every drydock process using it and move its state with: ${migrateCommand(dataDir, kind)}`,
    });
  }
  return existing;
}
