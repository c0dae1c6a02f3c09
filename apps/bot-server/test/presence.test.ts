/**
 * The server's presence claim on its data directory (issue #23), as an operator starts and stops
 * `drydock-server` (src/main.ts, a real process): it claims the directory while it runs and releases the
 * claim on a graceful stop; a start while `drydock storage migrate` holds the directory is refused before the
 * store is opened; a claim left by a SIGKILLed server does not block a migration (the migration removes it).
 * And on sqlite the server's bot registry is the database's bots table, not a bots.json beside it.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { startBoatSimulator } from "@drydock/boat-provider/simulator";
import { acquireLock } from "@drydock/file-lock";
import { migrateLockPath, migrateStorage, openStorage } from "@drydock/storage";
import { sqliteBackend } from "@drydock/storage-sqlite";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, REPO_ROOT, snapshotTree, spawnServer, tempDir } from "./helpers.js";

const MAIN = join(REPO_ROOT, "apps", "bot-server", "src", "main.ts");

let sim: Awaited<ReturnType<typeof startBoatSimulator>>;
beforeAll(async () => {
  sim = await startBoatSimulator({ port: 0 });
});
afterAll(async () => {
  await sim?.close();
});

function baseEnv(dir: string, env: Record<string, string> = {}): Record<string, string> {
  return {
    ...(process.env as Record<string, string>),
    DRYDOCK_DATA_DIR: dir,
    PORT: "0",
    LOG_LEVEL: "warn",
    BOAT_API_URL: sim.apiUrl,
    BOAT_API_TOKEN: sim.token,
    ...env,
  };
}

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
        const refused = spawnSync(
          process.execPath,
          ["--conditions=@drydock/source", "--import", "tsx", MAIN],
          {
            cwd: REPO_ROOT,
            env: baseEnv(tmp.dir),
            encoding: "utf8",
            timeout: 60_000,
          },
        );
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
