// Each test file gets a fresh database in the project's cluster (global-setup.ts), and stores in it that are
// closed (and their data directories removed) after each test.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { createDatabaseAt, type FaultProxy, startFaultProxy } from "@drydock/test-kit/postgres";
import { afterAll, afterEach, beforeAll, inject } from "vitest";
import {
  type InstanceRegistry,
  openPostgresStorage,
  type PostgresStorage,
  type PostgresStorageOptions,
} from "../src/index.js";

/** Creates a fresh database for this test file; sets DRYDOCK_TEST_POSTGRES_URL for the fixture and workers. */
export async function freshDatabase(): Promise<string> {
  const url = await createDatabaseAt(inject("postgresUrl"));
  process.env.DRYDOCK_TEST_POSTGRES_URL = url;
  return url;
}

/**
 * Registers the file's database (beforeAll) and the after-each cleanups; `open` makes a store in a schema of
 * its own (named `<prefix>_<pid>_<n>`) with `defaults` under `extra`.
 */
export function useStores(prefix: string, defaults: Partial<PostgresStorageOptions> = {}) {
  let url = "";
  let schemas = 0;
  const cleanups: (() => Promise<unknown> | unknown)[] = [];
  beforeAll(async () => {
    url = await freshDatabase();
  });
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });
  const later = (cleanup: () => Promise<unknown> | unknown) => {
    cleanups.push(cleanup);
  };
  const dataDir = () => {
    const root = mkdtempSync(join(tmpdir(), `drydock-pg-${prefix}-`));
    later(() => rmSync(root, { recursive: true, force: true }));
    return join(root, "data");
  };
  return {
    url: () => url,
    later,
    dataDir,
    schema: () => `${prefix}_${process.pid}_${++schemas}`,
    async open(extra: Partial<PostgresStorageOptions> = {}): Promise<PostgresStorage> {
      const storage = await openPostgresStorage({
        url,
        dataDir: dataDir(),
        schema: `${prefix}_${process.pid}_${++schemas}`,
        ...defaults,
        ...extra,
      });
      later(() => storage.close());
      return storage;
    },
  };
}

/** What `call` rejects with (a test fails when it resolves). */
export async function refusal(call: () => Promise<unknown>): Promise<unknown> {
  return call().then(
    () => {
      throw new Error("expected a refusal");
    },
    (error: unknown) => error,
  );
}

/** Waits until the database's clock says `id`'s lease has passed (bounded: a hang guard, not a duration). */
export async function untilExpired(instances: InstanceRegistry, id: string): Promise<void> {
  for (let i = 0; i < 600; i += 1) {
    const found = (await instances.list()).instances.find((row) => row.id === id);
    if (found !== undefined && found.leaseLeftMs <= 0) return;
    await sleep(20);
  }
  throw new Error(`the lease of ${id} did not pass within the bound`);
}

/**
 * A fault proxy in front of the project's cluster for the enclosing describe (started before its tests,
 * closed after them, set back to "pass" after each test). The returned object forwards to it.
 */
export function useFaultProxy(): Omit<FaultProxy, "close"> {
  let proxy: FaultProxy | undefined;
  const started = () => {
    if (proxy === undefined) throw new Error("the fault proxy is used outside its describe's tests");
    return proxy;
  };
  beforeAll(async () => {
    proxy = await startFaultProxy(inject("postgresPort"));
  });
  afterAll(async () => {
    await proxy?.close();
  });
  afterEach(() => {
    proxy?.set({ kind: "pass" });
  });
  return {
    url: (target) => started().url(target),
    set: (mode) => started().set(mode),
    get port() {
      return started().port;
    },
    get commits() {
      return started().commits;
    },
  };
}
