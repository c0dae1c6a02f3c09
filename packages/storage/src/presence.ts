import { randomBytes } from "node:crypto";
import { promises as fsp, readFileSync, unlinkSync } from "node:fs";
import { join } from "node:path";
import { LOCKS_DIR } from "@drydock/facts";
import { inspectLock, judgeOwnerLiveness, type ProcessClaim } from "@drydock/file-lock";
import { writeFileAtomic } from "@drydock/json-journal";
import { thisProcess } from "./bot-rules.js";
import { StorageError } from "./errors.js";
import { osOrUnknown } from "./file/meta.js";

/**
 * Who is using a data directory, so `migrateStorage` can be offline. A drydock process (the server, the
 * CLI) claims the directory for as long as it runs: `claimDataDir` writes a claim file under
 * `<dataDir>/locks/` naming this process (file-lock's process identity, judged with `judgeOwnerLiveness`), and
 * `release()` removes it. A migration takes the exclusive lock `<dataDir>/locks/storage-migrate.lock`, then
 * lists the claims. Each side writes first, then checks the other, so whichever comes second sees the
 * first: a process never starts during a migration, and a migration never starts under a live process.
 * A claim whose process is proven dead (SIGKILLed, crashed) is removed by the next migration.
 */

export const MIGRATE_LOCK_FILE = "storage-migrate.lock";
const CLAIM = /^claim-[a-z0-9-]{1,40}-[0-9]+-[0-9a-f]{12}\.json$/;

export interface DataDirClaim {
  /** Removes this process's claim. Idempotent. */
  release(): void;
  /** The claim file. */
  readonly path: string;
}

export interface ClaimRecord extends ProcessClaim {
  version: 1;
  role: string;
  since: number;
}

export function migrateLockPath(dataDir: string): string {
  return join(dataDir, LOCKS_DIR, MIGRATE_LOCK_FILE);
}

/** The live migration holding the data directory, or null. A lock whose owner is proven dead holds nothing. */
export function liveMigration(dataDir: string): ProcessClaim | null {
  const owner = inspectLock(migrateLockPath(dataDir));
  if (owner === null || judgeOwnerLiveness(owner) === "dead") return null;
  return owner;
}

/**
 * Claims the data directory for this process (`role`: "server", "cli", …). Refuses with STORAGE_IN_USE —
 * having removed its claim again — while a live `drydock storage migrate` holds it.
 */
export async function claimDataDir(
  dataDir: string,
  options: { role: string; now?: () => number },
): Promise<DataDirClaim> {
  const role = options.role;
  if (typeof role !== "string" || !/^[a-z0-9-]{1,40}$/.test(role)) {
    throw new StorageError({
      code: "STORAGE_INVALID_ARGUMENT",
      message: "claimDataDir needs a role of 1 to 40 lower-case letters, digits or dashes",
    });
  }
  const dir = join(dataDir, LOCKS_DIR);
  const path = join(dir, `claim-${role}-${process.pid}-${randomBytes(6).toString("hex")}.json`);
  const record: ClaimRecord = { version: 1, role, since: (options.now ?? Date.now)(), ...thisProcess() };
  try {
    await fsp.mkdir(dir, { recursive: true, mode: 0o700 });
    writeFileAtomic(path, `${JSON.stringify(record)}\n`, { mode: 0o600 });
  } catch (error) {
    throw osOrUnknown(error, path);
  }
  const release = () => {
    try {
      unlinkSync(path);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw osOrUnknown(error, path);
    }
  };
  let migration: ProcessClaim | null;
  try {
    migration = liveMigration(dataDir);
  } catch (error) {
    release();
    throw error;
  }
  if (migration !== null) {
    release();
    throw new StorageError({
      code: "STORAGE_IN_USE",
      message: `A storage migration (pid ${migration.pid}) is moving the state of ${dataDir}, so this ${role} did not start and changed nothing. Wait for \`drydock storage migrate\` to finish, then start again with the backend it moved to.`,
    });
  }
  return { path, release };
}

/** The claims under `<dataDir>/locks/`, each with its liveness. Unreadable claims count as live (fail closed). */
export async function listClaims(
  dataDir: string,
): Promise<{ path: string; claim: ClaimRecord | null; liveness: "alive" | "dead" | "unverifiable" }[]> {
  const dir = join(dataDir, LOCKS_DIR);
  let names: string[];
  try {
    names = await fsp.readdir(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw osOrUnknown(error, dir);
  }
  const out: { path: string; claim: ClaimRecord | null; liveness: "alive" | "dead" | "unverifiable" }[] = [];
  for (const name of names.filter((n) => CLAIM.test(n)).sort()) {
    const path = join(dir, name);
    let claim: ClaimRecord | null = null;
    try {
      const value = JSON.parse(readFileSync(path, "utf8")) as ClaimRecord;
      if (value?.version === 1 && Number.isSafeInteger(value.pid) && value.pid > 0) claim = value;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") continue;
    }
    out.push({ path, claim, liveness: claim === null ? "unverifiable" : judgeOwnerLiveness(claim) });
  }
  return out;
}
