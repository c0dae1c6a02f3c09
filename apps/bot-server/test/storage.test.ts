/**
 * The server on its storage backends, as an operator starts it (`drydock-server`, src/main.ts, a real
 * process): DRYDOCK_STORAGE selects the backend, the data directory stays bound to the first one, a damaged
 * database stops the start without being touched, and a database another process holds answers a typed,
 * retryable 503 until it is released. Its presence claim (issue #23): held while it runs, released on a
 * graceful stop; a start while `drydock storage migrate` holds the directory is refused before the store is
 * opened; a SIGKILLed server's claim does not block a migration (which removes it). On sqlite its bot
 * registry is the database's bots table, not a bots.json beside it.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, truncateSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { startBoatSimulator } from "@drydock/boat-provider/simulator";
import { acquireLock } from "@drydock/file-lock";
import { migrateLockPath, migrateStorage, openStorage } from "@drydock/storage";
import { sqliteBackend } from "@drydock/storage-sqlite";
import { freePort } from "@drydock/test-kit/postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  api,
  REPO_ROOT,
  type ServerChild,
  serverEnv,
  snapshotTree,
  spawnServer,
  tempDir,
} from "./helpers.js";

const MAIN = join(REPO_ROOT, "apps", "bot-server", "src", "main.ts");
const SQLITE_PACKAGE = join(REPO_ROOT, "packages", "storage-sqlite", "package.json");

let sim: Awaited<ReturnType<typeof startBoatSimulator>>;
beforeAll(async () => {
  sim = await startBoatSimulator({ port: 0 });
});
afterAll(async () => {
  await sim?.close();
});

function baseEnv(dir: string, env: Record<string, string> = {}): Record<string, string> {
  return serverEnv(dir, sim, env);
}

/** `drydock-server` on `dir` when its start is refused: its exit code and what it printed. */
function refusedStart(dir: string, env: Record<string, string>): { status: number | null; stderr: string } {
  const run = spawnSync(process.execPath, ["--conditions=@drydock/source", "--import", "tsx", MAIN], {
    cwd: REPO_ROOT,
    env: baseEnv(dir, env),
    encoding: "utf8",
    timeout: 60_000,
  });
  return { status: run.status, stderr: run.stderr };
}

/** `drydock-server` started on `dir`, then stopped (SIGTERM, as an operator stops it). */
async function startAndStop(dir: string, env: Record<string, string>): Promise<string> {
  const server = await spawnServer(dir, baseEnv(dir, env), { entry: MAIN });
  const banner = server.output();
  // Once it answers, main.ts has installed its signal handling (it does right after the start).
  expect((await api(server.url, null)("GET", "/healthz")).status).toBe(200);
  server.child.kill("SIGTERM");
  const exit = await server.exited;
  expect(exit.code).toBe(0);
  return banner;
}

describe("DRYDOCK_STORAGE", () => {
  it("never prints a postgres URL's password: a mistyped scheme (exit 2), an unreachable server from DRYDOCK_STORAGE_FILE (exit 1); an unknown value names what is accepted", async () => {
    const tmp = tempDir("storage-config");
    try {
      const typo = refusedStart(tmp.dir, {
        DRYDOCK_STORAGE: "postgress://admin:s3cret-pw@db.internal/drydock",
      });
      expect(typo.status).toBe(2);
      expect(typo.stderr).toContain('unknown storage "postgress://***@db.internal/drydock"');
      expect(typo.stderr).not.toContain("s3cret-pw");
      // Nothing listens on the port: the start stops naming the server, the password as ***.
      const port = await freePort();
      const urlFile = join(tmp.dir, "storage-url");
      writeFileSync(urlFile, `postgres://admin:s3cret-pw@127.0.0.1:${port}/drydock\n`, { mode: 0o600 });
      const unreachable = refusedStart(join(tmp.dir, "data"), { DRYDOCK_STORAGE_FILE: urlFile });
      expect(unreachable.status).toBe(1);
      expect(unreachable.stderr).toContain(`postgres://admin:***@127.0.0.1:${port}/drydock`);
      expect(unreachable.stderr).toContain("ECONNREFUSED");
      expect(unreachable.stderr).not.toContain("s3cret-pw");
      const both = refusedStart(tmp.dir, { DRYDOCK_STORAGE: "sqlite", DRYDOCK_STORAGE_FILE: urlFile });
      expect(both.status).toBe(2);
      expect(both.stderr).toContain("set DRYDOCK_STORAGE or DRYDOCK_STORAGE_FILE, not both");
      const schemaAlone = refusedStart(tmp.dir, { DRYDOCK_STORAGE: "sqlite", DRYDOCK_POSTGRES_SCHEMA: "x" });
      expect(schemaAlone.status).toBe(2);
      expect(schemaAlone.stderr).toContain(
        "DRYDOCK_POSTGRES_SCHEMA: set only with DRYDOCK_STORAGE=postgres://",
      );
      const unknown = refusedStart(tmp.dir, { DRYDOCK_STORAGE: "mysql" });
      expect(unknown.status).toBe(2);
      expect(unknown.stderr).toContain(
        'unknown storage "mysql" (expected file, sqlite, or a postgres:// URL)',
      );
    } finally {
      tmp.cleanup();
    }
  });

  for (const [first, second] of [
    ["sqlite", "file"],
    ["file", "sqlite"],
  ] as const) {
    it(`a directory started with ${first} refuses to start with ${second} (exit 1), naming both and the migrate command`, async () => {
      const tmp = tempDir(`storage-bound-${first}`);
      try {
        const banner = await startAndStop(tmp.dir, { DRYDOCK_STORAGE: first });
        // The storage was closed on shutdown: SQLite's last connection, closed, folds its WAL back and
        // removes it (a process that exits without closing leaves it).
        if (first === "sqlite") expect(existsSync(join(tmp.dir, "drydock.sqlite-wal"))).toBe(false);
        expect(banner).toContain(
          first === "sqlite"
            ? `storage:        sqlite (${join(tmp.dir, "drydock.sqlite")})`
            : `storage:        file (${tmp.dir}`,
        );
        const refused = refusedStart(tmp.dir, { DRYDOCK_STORAGE: second });
        expect(refused.status).toBe(1);
        expect(refused.stderr).toContain(
          `drydock-server: could not start: The data directory ${tmp.dir} is bound to the ${first} storage backend, but ${second} was asked for. Nothing was changed.`,
        );
        expect(refused.stderr).toContain(`Start with DRYDOCK_STORAGE=${first}`);
        expect(refused.stderr).toContain(
          `drydock storage migrate --data-dir ${JSON.stringify(tmp.dir)} --to ${second}`,
        );
        // The default (no DRYDOCK_STORAGE) is file: a sqlite directory refuses it the same way.
        if (first === "sqlite") expect(refusedStart(tmp.dir, {}).status).toBe(1);
        // The bound backend still starts.
        await startAndStop(tmp.dir, { DRYDOCK_STORAGE: first });
      } finally {
        tmp.cleanup();
      }
    });
  }

  it("the environment id is the one the file backend keeps in <dataDir>/environment-id, never regenerated, and a bad one is refused", async () => {
    const tmp = tempDir("storage-envid");
    try {
      await startAndStop(tmp.dir, {});
      const path = join(tmp.dir, "environment-id");
      const id = readFileSync(path, "utf8");
      expect(id).toMatch(/^[0-9a-f-]{36}\n$/);
      await startAndStop(tmp.dir, {});
      expect(readFileSync(path, "utf8")).toBe(id);
      writeFileSync(path, "not-a-uuid\n");
      const refused = refusedStart(tmp.dir, {});
      expect(refused.status).toBe(1);
      expect(refused.stderr).toContain(
        `the environment id at ${path} is not valid; restore it from a backup (drydock never replaces it).`,
      );
      expect(readFileSync(path, "utf8")).toBe("not-a-uuid\n");
    } finally {
      tmp.cleanup();
    }
  });
});

describe("a damaged drydock.sqlite", () => {
  for (const [how, damage] of [
    ["truncated", (path: string) => truncateSync(path, 4096 + 100)],
    ["overwritten with garbage", (path: string) => writeFileSync(path, Buffer.alloc(8192, 0x5a))],
  ] as const) {
    it(`${how}: the server refuses to start (exit 1) with STORAGE_CORRUPT's message, and the file's bytes are unchanged`, async () => {
      const tmp = tempDir("storage-corrupt");
      try {
        await startAndStop(tmp.dir, { DRYDOCK_STORAGE: "sqlite" });
        const path = join(tmp.dir, "drydock.sqlite");
        damage(path);
        const bytes = readFileSync(path);
        for (let attempt = 0; attempt < 2; attempt += 1) {
          const refused = refusedStart(tmp.dir, { DRYDOCK_STORAGE: "sqlite" });
          expect(refused.status).toBe(1);
          expect(refused.stderr).toContain(`drydock-server: could not start: ${path} is damaged (`);
          expect(refused.stderr).toContain(
            "so drydock will not use it and has not changed it. Restore it from a backup; drydock never recreates it over the damaged file.",
          );
          // Never recreated over, not even by the second attempt.
          expect(readFileSync(path).equals(bytes)).toBe(true);
        }
      } finally {
        tmp.cleanup();
      }
    });
  }
});

/** A process holding `<dir>/drydock.sqlite`'s write lock (BEGIN IMMEDIATE) until told to release it. */
async function holdDatabase(dir: string): Promise<{ release(): Promise<void>; child: ChildProcess }> {
  const script = `
    const Database = require("node:module").createRequire(${JSON.stringify(SQLITE_PACKAGE)})("better-sqlite3");
    const db = new Database(${JSON.stringify(join(dir, "drydock.sqlite"))});
    db.exec("BEGIN IMMEDIATE");
    process.stdout.write("held\\n");
    process.stdin.once("data", () => { db.exec("COMMIT"); db.close(); process.stdout.write("released\\n"); process.exit(0); });
  `;
  const child = spawn(process.execPath, ["-e", script], { stdio: ["pipe", "pipe", "inherit"] });
  let out = "";
  const said = (word: string) =>
    new Promise<void>((resolve, reject) => {
      const check = () => {
        if (out.includes(word)) resolve();
      };
      child.stdout?.on("data", (d: Buffer) => {
        out += d.toString();
        check();
      });
      child.once("exit", (code) => {
        if (!out.includes(word)) reject(new Error(`the holder exited (${code}) before saying ${word}`));
      });
      check();
    });
  await said("held");
  return {
    child,
    async release() {
      const done = said("released");
      child.stdin?.write("release\n");
      await done;
    },
  };
}

describe("a drydock.sqlite held busy by another process", () => {
  it("past the busy wait a provision answers 503 storage_busy with Retry-After and nothing was created; once released it succeeds", async () => {
    const tmp = tempDir("storage-busy");
    let server: ServerChild | null = null;
    let holder: Awaited<ReturnType<typeof holdDatabase>> | null = null;
    try {
      server = await spawnServer(
        tmp.dir,
        baseEnv(tmp.dir, { DRYDOCK_STORAGE: "sqlite", DRYDOCK_SQLITE_BUSY_TIMEOUT_MS: "200" }),
        { entry: MAIN },
      );
      const call = api(server.url, server.token);
      expect((await call("POST", "/v1/bots", { name: "Busy", botId: "busy" })).status).toBe(201);
      const before = sim.stats().createsCommitted;

      holder = await holdDatabase(tmp.dir);
      const refused = await call("POST", "/v1/bots/busy/computer");
      expect(refused.status, refused.text).toBe(503);
      expect(refused.json.error.code).toBe("storage_busy");
      expect(refused.json.error.message).toMatch(
        /<dataDir>\/drydock\.sqlite was busy \(another drydock process held it\) for longer than 200 ms\. Nothing was changed\. Retry in a moment\./,
      );
      expect(refused.headers.get("retry-after")).toBe("1");
      expect(sim.stats().createsCommitted).toBe(before);
      // Readers are not blocked by a writer (WAL): the probe still reads the store.
      const ready = await api(server.url, null)("GET", "/readyz");
      expect(ready.json.checks.storage).toEqual({ ok: true });

      await holder.release();
      holder = null;
      const created = await call("POST", "/v1/bots/busy/computer");
      expect(created.status, created.text).toBe(201);
      expect(sim.stats().createsCommitted - before).toBe(1);
    } finally {
      holder?.child.kill("SIGKILL");
      server?.kill();
      tmp.cleanup();
    }
  });
});

/** The presence claims under `<dir>/locks/`. */
function claims(dir: string): string[] {
  try {
    return readdirSync(join(dir, "locks")).filter((name) => name.startsWith("claim-"));
  } catch {
    return [];
  }
}

/** A started server: it answers, so main.ts has installed its signal handling. */
async function started(dir: string, env: Record<string, string> = {}) {
  const server = await spawnServer(dir, baseEnv(dir, env), { entry: MAIN });
  expect((await api(server.url, null)("GET", "/healthz")).status).toBe(200);
  return server;
}

describe("the server's presence claim", () => {
  it("exists while the server runs (naming its pid and role) and is gone after SIGTERM", async () => {
    const tmp = tempDir("presence-claim");
    const server = await started(tmp.dir);
    try {
      const held = claims(tmp.dir);
      expect(held).toEqual([
        expect.stringMatching(new RegExp(`^claim-server-${server.child.pid}-[0-9a-f]{12}\\.json$`)),
      ]);
      const record = JSON.parse(readFileSync(join(tmp.dir, "locks", held[0] as string), "utf8"));
      expect(record).toMatchObject({ version: 1, role: "server", pid: server.child.pid });
      server.child.kill("SIGTERM");
      expect(await server.exited).toEqual({ code: 0, signal: null });
      expect(claims(tmp.dir)).toEqual([]);
    } finally {
      server.kill();
      tmp.cleanup();
    }
  });

  it("a start while a migration holds the directory is refused (exit 1, STORAGE_IN_USE's message) and changes nothing", async () => {
    const tmp = tempDir("presence-migrating");
    try {
      // A directory a server ran on, then the lock `drydock storage migrate` takes, held by this (live) process.
      const first = await started(tmp.dir);
      first.child.kill("SIGTERM");
      expect((await first.exited).code).toBe(0);
      mkdirSync(join(tmp.dir, "locks"), { recursive: true });
      const lock = await acquireLock(migrateLockPath(tmp.dir), { label: "drydock storage migrate" });
      try {
        const before = snapshotTree(tmp.dir);
        const refused = refusedStart(tmp.dir, {});
        expect(refused.status, refused.stderr).toBe(1);
        expect(refused.stderr).toContain(
          `drydock-server: could not start: A storage migration (pid ${process.pid}) is moving the state of ${tmp.dir}, so this server did not start and changed nothing.`,
        );
        expect(refused.stderr).toContain("Wait for `drydock storage migrate` to finish");
        // Its claim was taken back, and nothing else was written.
        expect(claims(tmp.dir)).toEqual([]);
        expect(snapshotTree(tmp.dir)).toEqual(before);
      } finally {
        lock.release();
      }
      // Once the migration is done, the server starts.
      const again = await started(tmp.dir);
      again.child.kill("SIGTERM");
      expect((await again.exited).code).toBe(0);
    } finally {
      tmp.cleanup();
    }
  });

  it("a SIGKILLed server's claim stays behind but does not block a migration, which removes it", async () => {
    const tmp = tempDir("presence-killed");
    try {
      const server = await started(tmp.dir);
      const call = api(server.url, server.token);
      expect((await call("POST", "/v1/bots", { name: "Ada", botId: "ada" })).status).toBe(201);
      // While it runs, the migration is refused, naming it.
      await expect(
        migrateStorage({ dataDir: tmp.dir, to: "sqlite", backends: { sqlite: sqliteBackend } }),
      ).rejects.toMatchObject({
        code: "STORAGE_IN_USE",
        message: expect.stringContaining(`in use by server pid ${server.child.pid}`),
      });
      process.kill(-(server.child.pid as number), "SIGKILL");
      expect((await server.exited).signal).toBe("SIGKILL");
      expect(claims(tmp.dir)).toHaveLength(1);

      const result = await migrateStorage({
        dataDir: tmp.dir,
        to: "sqlite",
        backends: { sqlite: sqliteBackend },
      });
      expect(result).toMatchObject({ from: "file", to: "sqlite", outcome: "migrated" });
      expect(claims(tmp.dir)).toEqual([]);
      const storage = await openStorage({
        dataDir: tmp.dir,
        storage: "sqlite",
        backends: { sqlite: sqliteBackend },
      });
      try {
        expect((await storage.bots.list()).map((bot) => bot.botId)).toEqual(["ada"]);
      } finally {
        await storage.close();
      }
    } finally {
      tmp.cleanup();
    }
  });
});

describe("the bot registry on sqlite", () => {
  it("is the database's bots table: a bot created through the API is in storage.bots, and no bots.json exists", async () => {
    const tmp = tempDir("presence-registry");
    try {
      const server = await started(tmp.dir, { DRYDOCK_STORAGE: "sqlite" });
      const call = api(server.url, server.token);
      expect((await call("POST", "/v1/bots", { name: "Ada", botId: "ada" })).status).toBe(201);
      expect((await call("POST", "/v1/bots", { name: "Bob", botId: "bob" })).status).toBe(201);
      expect(existsSync(join(tmp.dir, "bots.json"))).toBe(false);
      server.child.kill("SIGTERM");
      expect((await server.exited).code).toBe(0);

      expect(existsSync(join(tmp.dir, "bots.json"))).toBe(false);
      const storage = await openStorage({
        dataDir: tmp.dir,
        storage: "sqlite",
        backends: { sqlite: sqliteBackend },
      });
      try {
        const bots = await storage.bots.list();
        expect(bots.map((bot) => [bot.botId, bot.name])).toEqual([
          ["ada", "Ada"],
          ["bob", "Bob"],
        ]);
        // And the other way: a bot written to the table is the one the server lists.
        await storage.bots.create({ botId: "carol", name: "Carol" });
      } finally {
        await storage.close();
      }
      const again = await started(tmp.dir, { DRYDOCK_STORAGE: "sqlite" });
      try {
        const listed = await api(again.url, again.token)("GET", "/v1/bots");
        expect(listed.status).toBe(200);
        expect(JSON.stringify(listed.json)).toContain('"carol"');
      } finally {
        again.child.kill("SIGTERM");
        await again.exited;
      }
      expect(existsSync(join(tmp.dir, "bots.json"))).toBe(false);
    } finally {
      tmp.cleanup();
    }
  });
});
