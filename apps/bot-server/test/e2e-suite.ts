import { spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { type AddressInfo, createServer } from "node:net";
import { join } from "node:path";
import { LifecycleError } from "@drydock/boat-lifecycle";
import { createBoatClient } from "@drydock/boat-provider";
import { startBoatSimulator } from "@drydock/boat-provider/simulator";
import { acquireWorkspaceLock } from "@drydock/restore-saga";
import { redactUrl as redactPostgresUrl } from "@drydock/storage-postgres";
import { SQLITE_FILE } from "@drydock/storage-sqlite";
import Database from "better-sqlite3";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../src/config.js";
import { toHttpError } from "../src/http-errors.js";
import { openServerStorage, type RunningServer, startServer } from "../src/server.js";
import { api, bindTestStorage, type E2eStorage, schemaOf, storageEnv, tempDir } from "./helpers.js";

/**
 * The server's end-to-end suite, run on each storage backend (e2e.test.ts: file, e2e-sqlite.test.ts:
 * sqlite, e2e-postgres.test.ts: postgres): the same walk-through, starts, refusals and probes, with DRYDOCK_STORAGE set.
 */
export function e2eSuite(storage: E2eStorage): void {
  let server: RunningServer;
  let banner: string[];
  const tmp = tempDir(`e2e-${storage}`);

  beforeAll(async () => {
    banner = [];
    server = await startServer(
      loadConfig({
        DRYDOCK_DATA_DIR: tmp.dir,
        PORT: "0",
        LOG_LEVEL: "silent",
        ...storageEnv(storage, tmp.dir),
      }),
      {
        print: (line) => banner.push(line),
      },
    );
    await server.startup;
  });

  afterAll(async () => {
    await server?.close();
    tmp.cleanup();
  });

  /** A test server's configuration on `dir`: the embedded simulator, or `sim` as a real provider. */
  function configFor(dir: string, sim?: { apiUrl: string; token: string }): ReturnType<typeof loadConfig> {
    // Bound as its first start would bind it: files a test seeds before that start never bind it to `file`.
    bindTestStorage(dir, storage);
    return loadConfig({
      DRYDOCK_DATA_DIR: dir,
      ...storageEnv(storage, dir),
      PORT: "0",
      LOG_LEVEL: "silent",
      ...(sim ? { BOAT_API_URL: sim.apiUrl, BOAT_API_TOKEN: sim.token } : {}),
    });
  }

  /** Registers `botId` behind the server's back, as another server on the same store would. */
  async function takeBotId(dir: string, botId: string): Promise<void> {
    // The registry is the storage's (bots.json, or the bots table of sqlite or postgres): opened as the
    // server opens it.
    const store = await openServerStorage(configFor(dir));
    try {
      await store.bots.create({ botId, name: botId });
    } finally {
      await store.close();
    }
  }

  /** Damages the bot registry `dir`'s server will read: bots.json on file, a bot row that is not JSON else. */
  async function breakBotRegistry(dir: string): Promise<void> {
    if (storage === "file") {
      writeFileSync(join(dir, "bots.json"), "{ not json");
      return;
    }
    // Created (and migrated) as the server's first start would, then a row that is not JSON.
    await (await openServerStorage(configFor(dir))).close();
    if (storage === "sqlite") {
      const db = new Database(join(dir, SQLITE_FILE));
      try {
        db.prepare(
          "INSERT INTO bots (bot_id, name, created_at, row_json) VALUES ('old', 'Old', 1, '{ not json')",
        ).run();
      } finally {
        db.close();
      }
      return;
    }
    const env = storageEnv(storage, dir);
    const client = new pg.Client({ connectionString: env.DRYDOCK_STORAGE });
    await client.connect();
    try {
      await client.query(`SET search_path = ${env.DRYDOCK_POSTGRES_SCHEMA}`);
      await client.query("INSERT INTO bots (bot_id, row_json) VALUES ('old', '{ not json')");
    } finally {
      await client.end();
    }
  }

  /** The error a start refuses with, or null when it started (then it is closed again). */
  async function refusedStart(config: ReturnType<typeof loadConfig>): Promise<Error | null> {
    try {
      const started = await startServer(config, { print: () => {} });
      await started.close();
      return null;
    } catch (error) {
      return error as Error;
    }
  }

  describe("embedded defaults", () => {
    it("generates a 0600 server token and says where the data, the token and the embedded provider are", () => {
      const tokenFile = join(tmp.dir, "server-token");
      expect(statSync(tokenFile).mode & 0o777).toBe(0o600);
      const text = banner.join("\n");
      expect(text).toContain(`data directory: ${tmp.dir}`);
      expect(text).toContain(
        storage === "sqlite"
          ? `storage:        sqlite (${join(tmp.dir, "drydock.sqlite")})`
          : storage === "postgres"
            ? `storage:        postgres (${redactPostgresUrl(process.env.DRYDOCK_TEST_POSTGRES_URL ?? "")}, schema ${schemaOf(tmp.dir)}; workspaces in the database too)`
            : `storage:        file (${tmp.dir}, one JSON file per journal)`,
      );
      // The database's password is never printed (the banner shows it as ***).
      const password = new URL(process.env.DRYDOCK_TEST_POSTGRES_URL ?? "postgres://x@y/z").password;
      if (storage === "postgres") {
        expect(password.length).toBeGreaterThan(0);
        expect(text).not.toContain(password);
      }
      expect(server.storage.kind).toBe(storage);
      // The journals live where the backend keeps them, and nowhere else.
      expect(existsSync(join(tmp.dir, "drydock.sqlite"))).toBe(storage === "sqlite");
      expect(text).toContain(tokenFile);
      expect(text).toMatch(/embedded simulator at http:\/\/127\.0\.0\.1:\d+\/api\/v1/);
      expect(text).not.toContain(server.token);
      expect(server.provider.embedded).toBe(true);
    });

    it("leaves the embedded provider's address and token (0600) for drydock, and they reach it", async () => {
      const file = join(tmp.dir, "embedded-boat-dev.json");
      expect(statSync(file).mode & 0o777).toBe(0o600);
      expect(banner.join("\n")).toContain(`address and token in ${file}`);
      const saved = JSON.parse(readFileSync(file, "utf8"));
      expect(saved).toMatchObject({ version: 1, serverPid: process.pid });
      const client = createBoatClient({ baseUrl: saved.apiUrl, token: saved.token });
      expect(Array.isArray((await client.listSandboxes()).sandboxes)).toBe(true);
    });
  });

  describe("the embedded provider file", () => {
    it("goes with the server that wrote it, and a server with a real provider removes a stale one", async () => {
      const own = tempDir("embedded-file");
      const file = join(own.dir, "embedded-boat-dev.json");
      try {
        const embedded = await startServer(configFor(own.dir), { print: () => {} });
        await embedded.startup;
        expect(existsSync(file)).toBe(true);
        await embedded.close();
        expect(existsSync(file)).toBe(false);

        // Left by an earlier embedded run (as a SIGKILLed server leaves it), then the server restarts against a
        // real provider: the file would send drydock to a simulator that is gone.
        writeFileSync(
          file,
          JSON.stringify({
            version: 1,
            apiUrl: "http://127.0.0.1:9/api/v1",
            token: "x",
            serverPid: 2 ** 22 + 1,
          }),
          { mode: 0o600 },
        );
        const sim = await startBoatSimulator({ port: 0 });
        // The operator moves the directory to the real provider (everything open was settled first).
        writeFileSync(join(own.dir, "boat-provider"), `${sim.apiUrl}\n`);
        const real = await startServer(configFor(own.dir, sim), { print: () => {} });
        await real.startup;
        expect(existsSync(file)).toBe(false);
        await real.close();
        await sim.close();
      } finally {
        own.cleanup();
      }
    });
  });

  describe("one data directory, one boat.dev", () => {
    it("a server for another provider than the one the directory is bound to refuses to start, and says how to move it", async () => {
      const own = tempDir("provider-binding");
      const sim = await startBoatSimulator({ port: 0 });
      const embeddedConfig = configFor(own.dir);
      const realConfig = configFor(own.dir, sim);
      try {
        // First start: bound to the embedded simulator.
        const embedded = await startServer(embeddedConfig, { print: () => {} });
        await embedded.startup;
        expect(readFileSync(join(own.dir, "boat-provider"), "utf8").trim()).toBe("embedded");
        // A real provider alongside it, or after it, is refused before anything is touched.
        for (let round = 0; round < 2; round++) {
          const refused = await refusedStart(realConfig);
          expect(refused?.message).toMatch(
            /journals describe the Boats of the bot server's embedded simulator, not of boat\.dev at http:\/\/127\.0\.0\.1:\d+\/api\/v1.*stop every server on this directory, then replace the line in .*boat-provider with http:\/\/127\.0\.0\.1:\d+\/api\/v1 \(without quotes\)/,
          );
          if (round === 0) await embedded.close();
        }
        expect(sim.stats().createsCommitted).toBe(0);

        // Bound to the real one (rebound by hand): now the embedded simulator is the stranger.
        writeFileSync(join(own.dir, "boat-provider"), `${sim.apiUrl}\n`);
        const real = await startServer(realConfig, { print: () => {} });
        await real.startup;
        const again = await refusedStart(embeddedConfig);
        expect(again?.message).toMatch(
          /describe the Boats of boat\.dev at .*, not of the bot server's embedded simulator/,
        );
        await real.close();
      } finally {
        await sim.close();
        own.cleanup();
      }
    });

    it("a directory from before the binding is bound by its next start, whatever it held (its history cannot be told)", async () => {
      const own = tempDir("provider-binding-legacy");
      const sim = await startBoatSimulator({ port: 0 });
      // It ran the embedded simulator once, then moved to a real provider, as older versions allowed.
      writeFileSync(join(own.dir, "boat-simulator.json"), "{}\n");
      try {
        const config = configFor(own.dir, sim);
        expect(await refusedStart(config)).toBeNull();
        expect(readFileSync(join(own.dir, "boat-provider"), "utf8").trim()).toBe(sim.apiUrl);
        // Quotes typed around the line by hand are not part of it.
        writeFileSync(join(own.dir, "boat-provider"), `"${sim.apiUrl}"\n`);
        expect(await refusedStart(config)).toBeNull();
      } finally {
        await sim.close();
        own.cleanup();
      }
    });

    it("a rebind written while the simulator's server still runs is refused: a running simulator is a provider in use", async () => {
      const own = tempDir("provider-rebind-early");
      const sim = await startBoatSimulator({ port: 0 });
      try {
        const embedded = await startServer(configFor(own.dir), {
          print: () => {},
        });
        await embedded.startup;
        writeFileSync(join(own.dir, "boat-provider"), `${sim.apiUrl}\n`);
        const refused = await refusedStart(configFor(own.dir, sim));
        expect(refused?.message).toMatch(
          new RegExp(
            `\\(pid ${process.pid}\\) runs the embedded boat\\.dev simulator .* Stop that server first`,
          ),
        );
        await embedded.close();
      } finally {
        await sim.close();
        own.cleanup();
      }
    });
  });

  describe("one embedded simulator per data directory", () => {
    it("refuses a second server on the directory while the first runs it, and leaves the first's file alone", async () => {
      const own = tempDir("embedded-twice");
      const file = join(own.dir, "embedded-boat-dev.json");
      const config = configFor(own.dir);
      try {
        const first = await startServer(config, { print: () => {} });
        await first.startup;
        const written = readFileSync(file, "utf8");
        const second = await refusedStart(config);
        expect(second?.message).toMatch(
          new RegExp(
            `another drydock server \\(pid ${process.pid}\\) is running on .* with the embedded boat\\.dev simulator`,
          ),
        );
        expect(second?.message).toMatch(/BOAT_API_URL/);
        // Nothing of the first was touched: its simulator still answers, its file is as it wrote it.
        expect(readFileSync(file, "utf8")).toBe(written);
        const call = api(first.url, first.token);
        expect((await call("POST", "/v1/bots", { name: "One", botId: "one" })).status).toBe(201);
        expect((await call("POST", "/v1/bots/one/computer")).status).toBe(201);
        await first.close();

        // Once it is gone, the next server starts, with the same Boats.
        const next = await startServer(config, { print: () => {} });
        await next.startup;
        expect((await api(next.url, next.token)("POST", "/v1/bots/one/computer")).status).toBe(200);
        expect(next.simulator?.stats().createsCommitted).toBe(1);
        await next.close();
      } finally {
        own.cleanup();
      }
    });
  });

  describe("a start that fails part-way", () => {
    it("gives back the simulator, its lock and its file: the next start on the directory goes ahead", async () => {
      const own = tempDir("start-fails");
      const blocker = createServer();
      await new Promise<void>((resolve) => blocker.listen(0, "127.0.0.1", resolve));
      const taken = (blocker.address() as AddressInfo).port;
      try {
        const failed = (await refusedStart(
          loadConfig({
            DRYDOCK_DATA_DIR: own.dir,
            ...storageEnv(storage, own.dir),
            PORT: String(taken),
            HOST: "127.0.0.1",
            LOG_LEVEL: "silent",
          }),
        )) as NodeJS.ErrnoException | null;
        expect(failed?.code).toBe("EADDRINUSE");
        expect(existsSync(join(own.dir, "embedded-boat-dev.json"))).toBe(false);
        const next = await startServer(configFor(own.dir), {
          print: () => {},
        });
        await next.startup;
        expect(next.provider.embedded).toBe(true);
        await next.close();
      } finally {
        await new Promise((resolve) => blocker.close(resolve));
        own.cleanup();
      }
    });
  });

  describe("a deleted bot's workspace whose retirement did not finish", () => {
    it("is open in GET /v1/recovery until it is finished, and the next start finishes it", async () => {
      const own = tempDir("retire-unfinished");
      const config = configFor(own.dir);
      try {
        let server = await startServer(config, { print: () => {} });
        await server.startup;
        let call = api(server.url, server.token);
        expect((await call("POST", "/v1/bots", { name: "Lea", botId: "lea" })).status).toBe(201);
        expect((await call("PUT", "/v1/bots/lea/files/notes.txt", "kept")).status).toBe(201);
        // Retiring cannot run: where the retired files go is taken by a file.
        writeFileSync(join(own.dir, "workspaces", ".retired"), "in the way\n");
        if (storage === "postgres") {
          // On postgres the retirement is one transaction in the database: nothing on this disk stands in
          // its way, it never stays unfinished, and the id taken again starts empty.
          expect((await call("DELETE", "/v1/bots/lea")).json).toEqual({ ok: true, workspaceRetired: true });
          const recovery = (await call("GET", "/v1/recovery")).json;
          expect(recovery).toMatchObject({ retirements: [], open: 0 });
          expect((await call("POST", "/v1/bots", { name: "Lea", botId: "lea" })).status).toBe(201);
          expect((await call("GET", "/v1/bots/lea/files/notes.txt")).status).toBe(404);
          await server.close();
          return;
        }
        const deleted = await call("DELETE", "/v1/bots/lea");
        expect(deleted.json).toMatchObject({ ok: true, workspaceRetired: false });
        const recovery = (await call("GET", "/v1/recovery")).json;
        expect(recovery.retirements).toEqual([
          { botId: "lea", message: expect.stringContaining("send DELETE /v1/bots/lea to finish it") },
        ]);
        expect(recovery.open).toBe(1);
        expect((await call("GET", "/metrics")).text).toMatch(/^drydock_recovery_items_open 1$/m);
        await server.close();

        // Once the way is clear, the next start finishes it (in the background, once it is up).
        rmSync(join(own.dir, "workspaces", ".retired"));
        server = await startServer(config, { print: () => {} });
        await server.startup;
        call = api(server.url, server.token);
        let after = (await call("GET", "/v1/recovery")).json;
        for (let i = 0; i < 50 && after.retirements.length > 0; i++) {
          await new Promise((resolve) => setTimeout(resolve, 100));
          after = (await call("GET", "/v1/recovery")).json;
        }
        expect(after.retirements).toEqual([]);
        expect(after.open).toBe(0);
        expect(existsSync(join(own.dir, "workspaces", "lea"))).toBe(false);
        const retired = readdirSync(join(own.dir, "workspaces", ".retired"));
        expect(retired).toHaveLength(1);
        expect(readFileSync(join(own.dir, "workspaces", ".retired", retired[0]!, "notes.txt"), "utf8")).toBe(
          "kept",
        );
        await server.close();
      } finally {
        own.cleanup();
      }
    });
  });

  describe("finishing retirements at start", () => {
    it("never retires a workspace whose bot id was taken again meanwhile, and lists no empty directory", async () => {
      const own = tempDir("retire-recheck");
      const config = configFor(own.dir);
      const workspace = join(own.dir, "workspaces", "zed");
      mkdirSync(workspace, { recursive: true });
      writeFileSync(join(workspace, "work.txt"), "the new bot's");
      mkdirSync(join(own.dir, "workspaces", "empty"), { recursive: true });
      // A live edit holds zed's workspace, so the start's retirement waits for it.
      const edit = await acquireWorkspaceLock({
        dataDir: own.dir,
        workspaceRoot: realpathSync(workspace),
        transactionId: "edit-held",
        purpose: "workspace-edit",
      });
      let server: RunningServer | null = null;
      try {
        server = await startServer(config, { print: () => {} });
        await server.startup;
        const call = api(server.url, server.token);
        const listed = (await call("GET", "/v1/recovery")).json.retirements;
        // On postgres a directory under workspaces/ is no bot's workspace (they are in the database).
        expect(listed.map((r: { botId: string }) => r.botId)).toEqual(storage === "postgres" ? [] : ["zed"]);
        // Meanwhile the id is taken again (as another server on the directory would), then the edit ends.
        await takeBotId(own.dir, "zed");
        edit.release();
        await new Promise((resolve) => setTimeout(resolve, 2_500));
        expect(readFileSync(join(workspace, "work.txt"), "utf8")).toBe("the new bot's");
        expect(existsSync(join(own.dir, "workspaces", ".retired"))).toBe(false);
        expect((await call("GET", "/v1/recovery")).json.retirements).toEqual([]);
      } finally {
        await server?.close();
        own.cleanup();
      }
    });

    it("an unreadable bot registry makes GET /v1/recovery incomplete, never a failure, and the server still starts", async () => {
      const own = tempDir("retire-registry-unreadable");
      const config = configFor(own.dir);
      mkdirSync(join(own.dir, "workspaces", "old"), { recursive: true });
      writeFileSync(join(own.dir, "workspaces", "old", "a.txt"), "a");
      await breakBotRegistry(own.dir);
      const server = await startServer(config, { print: () => {} });
      try {
        await server.startup;
        const answer = await api(server.url, server.token)("GET", "/v1/recovery");
        expect(answer.status).toBe(200);
        expect(answer.json.complete).toBe(false);
        expect(answer.json.unreadable).toEqual(
          expect.arrayContaining([expect.objectContaining({ area: "bots", subject: "bot registry" })]),
        );
        expect(readFileSync(join(own.dir, "workspaces", "old", "a.txt"), "utf8")).toBe("a");
      } finally {
        await server.close();
        own.cleanup();
      }
    });
  });

  describe("lock leftovers of killed processes", () => {
    it("are removed at start: a dead process's candidate goes, a live one's stays", async () => {
      const own = tempDir("lock-leftovers");
      const locks = join(own.dir, "locks");
      mkdirSync(locks, { recursive: true, mode: 0o700 });
      // A process that has exited: spawned, reaped, so its pid is free.
      const dead = spawnSync(process.execPath, ["-e", ""]).pid;
      const owner = (pid: number) =>
        `${JSON.stringify({ version: 1, pid, token: randomUUID(), createdAt: Date.now() - 60_000 })}\n`;
      const deadCandidate = join(locks, `registry.lock.candidate-${dead}-${randomUUID()}`);
      const liveCandidate = join(locks, `registry.lock.candidate-${process.pid}-${randomUUID()}`);
      writeFileSync(deadCandidate, owner(dead), { mode: 0o600 });
      writeFileSync(liveCandidate, owner(process.pid), { mode: 0o600 });
      // And beside a journal's lock, in the data directory itself.
      const deadJournalCandidate = join(
        own.dir,
        `box-create-requests.lock.candidate-${dead}-${randomUUID()}`,
      );
      writeFileSync(deadJournalCandidate, owner(dead), { mode: 0o600 });
      try {
        const server = await startServer(configFor(own.dir), { print: () => {} });
        await server.startup;
        expect(existsSync(deadCandidate)).toBe(false);
        expect(existsSync(deadJournalCandidate)).toBe(false);
        expect(existsSync(liveCandidate)).toBe(true);
        await server.close();
      } finally {
        own.cleanup();
      }
    });
  });

  describe("walk-through: bot, computer, file, checkpoint, restore, delete", () => {
    it("runs the README's curl walk-through end to end over HTTP", async () => {
      const call = api(server.url, server.token);
      const bot = await call("POST", "/v1/bots", { name: "Ada", botId: "ada" });
      expect(bot.status).toBe(201);
      expect(bot.json.bot).toMatchObject({ botId: "ada", name: "Ada" });

      const created = await call("POST", "/v1/bots/ada/computer");
      expect(created.status).toBe(201);
      expect(created.json.computer).toMatchObject({ status: "ready", createdThisAttempt: true });
      const { boxId, name } = created.json.computer;
      expect(boxId).toMatch(/^bx_[23456789abcdefghjkmnpqrstuvwxyz]{8}$/);

      // Provisioning again is idempotent: the same Boat, no second create.
      const again = await call("POST", "/v1/bots/ada/computer");
      expect(again.status).toBe(200);
      expect(again.json.computer).toMatchObject({ boxId, createdThisAttempt: false });

      expect((await call("PUT", "/v1/bots/ada/files/notes/plan.md", "version one")).status).toBe(201);
      const checkpoint = await call("POST", "/v1/bots/ada/checkpoints");
      expect(checkpoint.status).toBe(201);
      const { checkpointId } = checkpoint.json.checkpoint;
      expect(
        (await call("GET", "/v1/bots/ada/checkpoints")).json.checkpoints.map(
          (c: { checkpointId: string }) => c.checkpointId,
        ),
      ).toContain(checkpointId);

      expect((await call("PUT", "/v1/bots/ada/files/notes/plan.md", "version two")).status).toBe(201);
      expect((await call("PUT", "/v1/bots/ada/files/scratch.txt", "added after the checkpoint")).status).toBe(
        201,
      );

      const restore = await call("POST", `/v1/bots/ada/checkpoints/${checkpointId}/restore`);
      expect(restore.status).toBe(200);
      expect(restore.json.phase).toBe("completed");
      expect((await call("GET", "/v1/bots/ada/files/notes/plan.md")).text).toBe("version one");
      expect((await call("GET", "/v1/bots/ada/files/scratch.txt")).status).toBe(404);

      const saga = await call("GET", `/v1/restores/${restore.json.operationId}`);
      expect(saga.status).toBe(200);
      expect(saga.json.restore.events.map((e: { phase: string }) => e.phase)).toEqual(
        storage === "postgres"
          ? // On postgres a restore is one transaction (decision 0031): created and completed at once.
            ["created", "completed"]
          : [
              "created",
              "locked",
              "prepared",
              "intent_committed",
              "safety_ready",
              "mutation_started",
              "workspace_applied",
              "completed",
            ],
      );

      const computers = await call("GET", "/v1/computers");
      expect(computers.json.computers.map((c: { boxId: string }) => c.boxId)).toEqual([boxId]);
      expect(JSON.stringify(computers.json)).not.toMatch(
        /idempotencyKey|requestBody|[0-9a-f]{8}-[0-9a-f]{4}-4/,
      );

      const wrong = await call("DELETE", "/v1/bots/ada/computer", { confirmName: "not-its-name" });
      expect(wrong.status).toBe(409);
      expect(wrong.json.error.code).toBe("confirmation_mismatch");

      const deleted = await call("DELETE", "/v1/bots/ada/computer", { confirmName: name });
      expect(deleted.status).toBe(200);
      expect(deleted.json).toEqual({ ok: true });
      expect((await call("GET", "/v1/bots/ada/computer")).json.computer).toEqual({ status: "none" });
      expect((await call("GET", "/v1/recovery")).json.open).toBe(0);

      // The billing truth: one Boat was ever created for this bot, and none is left running.
      const stats = server.simulator?.stats();
      expect(stats?.createsCommitted).toBe(1);
      expect(stats?.live).toBe(0);

      expect((await call("DELETE", "/v1/bots/ada")).status).toBe(200);
      expect((await call("GET", "/v1/bots/ada")).status).toBe(404);
    });
  });

  describe("workspace writes respect the workspace lock", () => {
    it("refuses to write, delete or checkpoint while a restore holds the workspace (409), then works again", async () => {
      const call = api(server.url, server.token);
      expect((await call("POST", "/v1/bots", { name: "Locked", botId: "locked" })).status).toBe(201);
      expect((await call("PUT", "/v1/bots/locked/files/a.txt", "before")).status).toBe(201);
      // On postgres nothing makes the directory (the workspace is in the database): made for the lock.
      if (storage === "postgres") mkdirSync(join(tmp.dir, "workspaces", "locked"), { recursive: true });
      // A live holder (this test process) of the bot's workspace lock, as a running restore would be.
      const held = await acquireWorkspaceLock({
        dataDir: tmp.dir,
        workspaceRoot: join(tmp.dir, "workspaces", "locked"),
        transactionId: "restore-held-by-test",
      });
      try {
        if (storage === "postgres") {
          // The workspace is not on this host's disk: a local lock plays no part (each change is one
          // compare-and-set in the database), so the write, the delete and the checkpoint go through.
          expect((await call("PUT", "/v1/bots/locked/files/a.txt", "during")).status).toBe(201);
          expect((await call("GET", "/v1/bots/locked/files/a.txt")).text).toBe("during");
          expect((await call("POST", "/v1/bots/locked/checkpoints")).status).toBe(201);
          expect((await call("DELETE", "/v1/bots/locked/files/a.txt")).status).toBe(200);
          expect((await call("GET", "/v1/bots/locked/files/a.txt")).status).toBe(404);
        } else {
          const write = await call("PUT", "/v1/bots/locked/files/a.txt", "during");
          expect(write.status).toBe(409);
          expect(write.json.error.code).toBe("workspace_locked");
          expect((await call("DELETE", "/v1/bots/locked/files/a.txt")).status).toBe(409);
          expect((await call("POST", "/v1/bots/locked/checkpoints")).status).toBe(409);
          // A read waits too: the files are a mix of before and after while a restore runs.
          const read = await call("GET", "/v1/bots/locked/files/a.txt");
          expect(read.status).toBe(409);
          expect(read.json.error.code).toBe("restore_running");
        }
      } finally {
        held.release();
      }
      expect((await call("PUT", "/v1/bots/locked/files/a.txt", "after")).status).toBe(201);
      expect((await call("GET", "/v1/bots/locked/files/a.txt")).text).toBe("after");
    });
  });

  describe("boat.dev's Retry-After reaches the caller", () => {
    it("a create boat.dev rate limits for an hour answers 429 with Retry-After: 3600 and says the wait", async () => {
      const call = api(server.url, server.token);
      const sim = server.simulator;
      if (!sim) throw new Error("the test server runs the embedded simulator");
      expect((await call("POST", "/v1/bots", { name: "Rae", botId: "rae" })).status).toBe(201);
      const rules = [{ method: "POST", path: "^/sandboxes$", action: "rate-limit", retryAfterS: 3600 }];
      const armed = await fetch(`${sim.url}/_sim/faults`, {
        method: "POST",
        headers: { authorization: `Bearer ${sim.token}`, "content-type": "application/json" },
        body: JSON.stringify({ rules }),
      });
      expect(armed.status).toBe(200);
      const limited = await call("POST", "/v1/bots/rae/computer");
      expect(limited.status).toBe(429);
      expect(limited.headers.get("retry-after")).toBe("3600");
      expect(limited.json.error.code).toBe("provider_refused");
      expect(limited.json.error.message).toContain("retry in 60 minutes");
      // Once boat.dev lets it through, the same request finishes; answers without a wait carry no header.
      const created = await call("POST", "/v1/bots/rae/computer");
      expect(created.status).toBe(200);
      expect(created.headers.get("retry-after")).toBeNull();
    });

    it("whole seconds, rounded up, only for a lifecycle error that carries a wait", () => {
      const wait = (retryAfterMs?: number) =>
        toHttpError(
          new LifecycleError({
            code: "provider_unavailable",
            status: 502,
            message: "m",
            ...(retryAfterMs === undefined ? {} : { retryAfterMs }),
          }),
        ).retryAfterS;
      expect([wait(1_500), wait(1_000), wait(0), wait()]).toEqual([2, 1, 0, undefined]);
    });
  });

  describe("auth", () => {
    // /readyz and /metrics are no longer here: probes and scrapes need no API token (issue 25); their own
    // rules (open, or DRYDOCK_METRICS_TOKEN) are tested in operations.test.ts.
    const routes: [string, string][] = [
      ["POST", "/v1/bots"],
      ["GET", "/v1/bots"],
      ["GET", "/v1/bots/x"],
      ["DELETE", "/v1/bots/x"],
      ["GET", "/v1/bots/x/computer"],
      ["POST", "/v1/bots/x/computer"],
      ["DELETE", "/v1/bots/x/computer"],
      ["GET", "/v1/computers"],
      ["PUT", "/v1/bots/x/files/a.txt"],
      ["GET", "/v1/bots/x/files/a.txt"],
      ["DELETE", "/v1/bots/x/files/a.txt"],
      ["POST", "/v1/bots/x/checkpoints"],
      ["GET", "/v1/bots/x/checkpoints"],
      ["POST", "/v1/bots/x/checkpoints/c1/restore"],
      ["GET", "/v1/restores/op1"],
      ["GET", "/v1/recovery"],
    ];

    it.each(routes)("%s %s answers 401 without a token and with a wrong one", async (method, path) => {
      const none = await api(server.url, null)(method, path);
      expect(none.status).toBe(401);
      expect(none.json.error.code).toBe("unauthorized");
      const wrong = await api(server.url, `${server.token}x`)(method, path);
      expect(wrong.status).toBe(401);
    });

    it("an unknown route answers 404 route_not_found, distinct from a package's not_found (a missing saga, a checkpoint)", async () => {
      const res = await api(server.url, server.token)("GET", "/v1/no-such-thing");
      expect(res.status).toBe(404);
      expect(res.json.error.code).toBe("route_not_found");
      expect(res.json.error.message).toBe("No route GET /v1/no-such-thing.");
    });

    it("GET /healthz needs no token", async () => {
      const res = await api(server.url, null)("GET", "/healthz");
      expect(res.status).toBe(200);
      expect(res.json).toEqual({ ok: true });
    });

    // Changed by issue 25: the provider is no longer one of the checks (it is reported in `provider`, never
    // failing the probe), and /readyz needs no token. A slow boat.dev is tested in operations.test.ts.
    it("GET /readyz reports every check ready on a healthy installation, and boat.dev reachable", async () => {
      const res = await api(server.url, null)("GET", "/readyz");
      expect(res.status).toBe(200);
      expect(Object.keys(res.json.checks).sort()).toEqual([
        "bots",
        "createJournal",
        "dataDir",
        "deleteJournal",
        "storage",
      ]);
      expect(res.json.provider).toEqual({ reachable: true, checkedAt: expect.any(String) });
    });

    it("GET /metrics serves Prometheus text with request and provider counters", async () => {
      const res = await api(server.url, server.token)("GET", "/metrics");
      expect(res.status).toBe(200);
      expect(res.text).toContain("drydock_http_requests_total");
      expect(res.text).toContain("drydock_provider_calls_total");
      expect(res.text).toContain("drydock_recovery_items_open");
      // Each journal's cap is its backend's: the file backend's 4,096 rows, sqlite's 1,000,000 by default.
      const cap = storage === "file" ? 4_096 : 1_000_000;
      expect(res.text).toContain(`drydock_journal_capacity{journal="create"} ${cap}`);
      expect(res.text).toContain(`drydock_journal_capacity{journal="delete"} ${cap}`);
      expect(res.text).toContain('drydock_journal_capacity{journal="bots"} 4096');
    });

    it("GET /metrics counts every answered request by method, route and status, and observes its duration", async () => {
      const call = api(server.url, server.token);
      const sample = async (series: string): Promise<number> => {
        const text = (await call("GET", "/metrics")).text;
        const line = text.split("\n").find((l) => l.startsWith(`${series} `));
        return line === undefined ? 0 : Number(line.slice(series.length + 1));
      };
      const ok = 'drydock_http_requests_total{method="GET",route="/v1/bots/:botId",status="200"}';
      const missing = 'drydock_http_requests_total{method="GET",route="/v1/bots/:botId",status="404"}';
      const observed = 'drydock_http_request_duration_seconds_count{route="/v1/bots/:botId"}';
      await call("POST", "/v1/bots", { name: "Counted", botId: "counted" });
      const before = {
        ok: await sample(ok),
        missing: await sample(missing),
        observed: await sample(observed),
      };
      for (let i = 0; i < 3; i++) expect((await call("GET", "/v1/bots/counted")).status).toBe(200);
      expect((await call("GET", "/v1/bots/nobody-here")).status).toBe(404);
      expect(await sample(ok)).toBe(before.ok + 3);
      expect(await sample(missing)).toBe(before.missing + 1);
      expect(await sample(observed)).toBe(before.observed + 4);
      // Counted once: a second scrape adds nothing that was not answered since.
      expect(await sample(ok)).toBe(before.ok + 3);
    });
  });
}
