/**
 * The storage backends the crash sweep runs on, opened the one way both the test process and its children
 * open them: through @drydock/storage's `openStorage` (devDependencies only; the package's runtime never
 * imports storage). `backendInUse` reads what a data directory really holds, so a run that asked for one
 * backend and silently got another fails.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { CREATE_JOURNAL_FILE, DELETE_JOURNAL_FILE, STORAGE_BINDING_FILE } from "@drydock/facts";
import { openStorage, type Storage } from "@drydock/storage";
import { postgresBackend } from "@drydock/storage-postgres";
import { SQLITE_FILE, sqliteBackend } from "@drydock/storage-sqlite";

export const TEST_BACKENDS = ["file", "sqlite", "postgres"] as const;
export type TestBackend = (typeof TEST_BACKENDS)[number];

/** The env var a test sets for its children: which backend they open the journals with. */
export const TEST_STORAGE_ENV = "DRYDOCK_TEST_STORAGE";
/** And, for postgres, the URL of the run's own database (made by the harness in the project's cluster). */
export const TEST_POSTGRES_URL_ENV = "DRYDOCK_TEST_POSTGRES_URL";

export function parseTestBackend(value: string): TestBackend {
  if ((TEST_BACKENDS as readonly string[]).includes(value)) return value as TestBackend;
  throw new Error(
    `${TEST_STORAGE_ENV}=${JSON.stringify(value)}: expected one of ${TEST_BACKENDS.join(", ")}`,
  );
}

/**
 * `postgresUrl`: the run's database (postgres only). `now`: the test clock; on postgres it stands in for the
 * database's clock (every stamp and window), as it does for the other backends' stamps.
 */
export function openTestStorage(
  dataDir: string,
  backend: TestBackend,
  now?: () => number,
  postgresUrl?: string,
): Promise<Storage> {
  if (backend === "postgres" && postgresUrl === undefined) {
    throw new Error("openTestStorage: postgres needs the run's database URL");
  }
  return openStorage({
    dataDir,
    storage: backend === "postgres" ? postgresUrl : backend,
    backends: { sqlite: sqliteBackend, postgres: postgresBackend },
    ...(now === undefined ? {} : { now }),
  });
}

/** What the data directory shows: its storage.json binding and which backend's files exist. */
export function backendInUse(dataDir: string): {
  binding: string | null;
  sqliteFile: boolean;
  journalFiles: boolean;
} {
  const bindingPath = join(dataDir, STORAGE_BINDING_FILE);
  const binding = existsSync(bindingPath)
    ? (JSON.parse(readFileSync(bindingPath, "utf8")) as { kind: string }).kind
    : null;
  return {
    binding,
    sqliteFile: existsSync(join(dataDir, SQLITE_FILE)),
    journalFiles:
      existsSync(join(dataDir, CREATE_JOURNAL_FILE)) || existsSync(join(dataDir, DELETE_JOURNAL_FILE)),
  };
}
