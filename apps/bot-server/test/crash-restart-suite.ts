/**
 * SIGKILL of the real server process at lifecycle and restore crash points, then a restart on the same
 * data directory. The boat.dev simulator runs in this (the test) process, so its stats are the billing
 * truth across the server's death.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import {
  DELETE_IN_FLIGHT_MS,
  LIFECYCLE_CRASH_POINTS,
  type LifecycleCrashPoint,
} from "@drydock/boat-lifecycle";
import { type BoatSimulator, startBoatSimulator } from "@drydock/boat-provider/simulator";
import { createRestoreRecoveryController } from "@drydock/recovery-controller";
import { openStorage, type Storage, type WorkspaceStore } from "@drydock/storage";
import { type InstanceView, instancesOf, postgresBackend } from "@drydock/storage-postgres";
import { sqliteBackend } from "@drydock/storage-sqlite";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FILE_WRITE_CRASH_POINT } from "../src/app.js";
import { isWorkspaceTempName } from "../src/workspace-files.js";
import {
  type Api,
  api,
  type E2eStorage,
  type ServerChild,
  schemaOf,
  spawnServer,
  storageEnv,
  tempDir,
} from "./helpers.js";

/**
 * The instance lease of every server this suite starts on postgres (DRYDOCK_LEASE_TTL_MS, as the other
 * postgres server tests use): a killed server's lease lapses this long after its last renewal.
 */
const LEASE_TTL_MS = 1_500;

/**
 * The crash-restart suite on one storage backend (crash-restart.test.ts: file,
 * crash-restart-sqlite.test.ts: sqlite, crash-restart-postgres.test.ts: postgres): every server it spawns
 * runs with DRYDOCK_STORAGE set to it, and what the dead server left is read through that backend (on
 * postgres: the data directory's schema in the test file's database, through openStorage, never local files).
 */
export function crashRestartSuite(storage: E2eStorage): void {
  const onPostgres = storage === "postgres";

  /** The real server on this suite's backend (DRYDOCK_STORAGE), spawned as helpers.ts's spawnServer does. */
  function spawnOn(dataDir: string, env: Record<string, string> = {}): Promise<ServerChild> {
    return spawnServer(dataDir, {
      ...storageEnv(storage, dataDir),
      ...(onPostgres ? { DRYDOCK_LEASE_TTL_MS: String(LEASE_TTL_MS) } : {}),
      ...env,
    });
  }

  /** Runs `use` on the data directory's storage (this suite's backend), as a second process would, then closes it. */
  async function onStorage<T>(
    dataDir: string,
    use: (s: Storage) => Promise<T>,
    now?: () => number,
  ): Promise<T> {
    const opened = await openStorage({
      dataDir,
      storage: storageEnv(storage, dataDir).DRYDOCK_STORAGE as string,
      backends: { sqlite: sqliteBackend, postgres: postgresBackend },
      ...(now ? { now } : {}),
      ...(onPostgres ? { backendOptions: { schema: schemaOf(dataDir) } } : {}),
    });
    try {
      return await use(opened);
    } finally {
      await opened.close();
    }
  }

  let sim: BoatSimulator;
  beforeAll(async () => {
    sim = await startBoatSimulator({ port: 0 });
  });
  afterAll(async () => {
    await sim?.close();
  });

  function providerEnv(): Record<string, string> {
    return { BOAT_API_URL: sim.apiUrl, BOAT_API_TOKEN: sim.token };
  }

  /** The instances of the data directory's store (postgres), as `drydock instances list` reads them. */
  async function instancesOn(dataDir: string): Promise<InstanceView[]> {
    return onStorage(dataDir, async (s) => {
      const registry = instancesOf(s);
      if (registry === null) throw new Error("the store has no instance registry: is it postgres?");
      return (await registry.list()).instances;
    });
  }

  /**
   * On postgres, a restart is a new instance: the restarted server registered another id with a greater epoch
   * and holds its lease; the killed server's row is still there (nobody stopped it cleanly) and, with nobody
   * renewing it, only lapses. On file and sqlite there are no instances: nothing to check.
   */
  async function expectNewInstance(dataDir: string, killed: ServerChild, restarted: ServerChild) {
    if (!onPostgres) return;
    const instances = await instancesOn(dataDir);
    const old = instances.filter((i) => i.pid === killed.child.pid);
    const now = instances.filter((i) => i.pid === restarted.child.pid);
    expect(old, JSON.stringify(instances)).toHaveLength(1);
    expect(now, JSON.stringify(instances)).toHaveLength(1);
    expect(now[0]!.id).not.toBe(old[0]!.id);
    expect(now[0]!.epoch).toBeGreaterThan(old[0]!.epoch);
    expect(now[0]).toMatchObject({ state: "live", holdsLease: true });
    expect(old[0]!.state).not.toBe("stopped");
  }

  async function expectKilled(server: ServerChild, request: Promise<unknown>): Promise<void> {
    await request.then(
      () => undefined,
      () => undefined,
    );
    const exit = await server.exited;
    expect(exit.signal).toBe("SIGKILL");
  }

  const PROVISION_POINTS = [
    "provision.after-begin",
    "provision.after-create-response",
    "provision.after-remember",
    "provision.after-rename",
    "provision.after-resolve",
  ] as const;

  describe("server killed during a provision, restarted on the same data directory", () => {
    it.each(PROVISION_POINTS)(
      "at %s: exactly one Boat, the open item visible until the retry finishes it",
      async (point) => {
        const tmp = tempDir("crash-provision");
        const botId = `b-${point.replace(/[^a-z]/g, "").slice(-12)}`;
        const before = sim.stats().createsCommitted;
        let server = await spawnOn(tmp.dir, { ...providerEnv(), DRYDOCK_CRASH_POINT: point });
        try {
          const call = api(server.url, server.token);
          expect((await call("POST", "/v1/bots", { name: "crash", botId })).status).toBe(201);
          await expectKilled(server, call("POST", `/v1/bots/${botId}/computer`));

          const killed = server;
          server = await spawnOn(tmp.dir, providerEnv());
          await expectNewInstance(tmp.dir, killed, server);
          const again = api(server.url, server.token);
          const recovery = await again("GET", "/v1/recovery");
          expect(recovery.status, recovery.text).toBe(200);
          if (point !== "provision.after-resolve") {
            // An interrupted create is never hidden: the bot's computer needs attention until it is finished.
            const computer = await again("GET", `/v1/bots/${botId}/computer`);
            expect(computer.json.computer.status).toBe("needs_attention");
            expect(JSON.stringify(recovery.json)).toContain(botId);
          }
          const finished = await again("POST", `/v1/bots/${botId}/computer`);
          expect([200, 201]).toContain(finished.status);
          expect(finished.json.computer.status).toBe("ready");

          const stats = sim.stats();
          const name = finished.json.computer.name as string;
          expect(stats.createsCommitted - before).toBe(1);
          expect(stats.perName[name]).toBe(1);
          expect((await again("GET", `/v1/bots/${botId}/computer`)).json.computer.status).toBe("ready");
          expect((await again("GET", "/v1/recovery")).json.boats).toEqual([]);
        } finally {
          server.kill();
          tmp.cleanup();
        }
      },
    );
  });

  function snapshot(root: string): Record<string, string> {
    const out: Record<string, string> = {};
    const walk = (dir: string) => {
      for (const entry of readdirSync(dir, { withFileTypes: true })) {
        const p = join(dir, entry.name);
        if (entry.isDirectory()) walk(p);
        else out[relative(root, p)] = readFileSync(p, "utf8");
      }
    };
    try {
      if (statSync(root).isDirectory()) walk(root);
    } catch {
      // no workspace yet
    }
    return out;
  }

  /** The restore sweeps' workspace before its checkpoint: 20 files in three folders (20 acknowledged writes). */
  async function seedRestoreWorkspace(call: Api, botId: string): Promise<void> {
    for (let i = 0; i < 20; i++)
      expect((await call("PUT", `/v1/bots/${botId}/files/dir${i % 3}/f${i}.txt`, `old ${i}`)).status).toBe(
        201,
      );
  }

  /** The restore sweeps' changes after the checkpoint: 10 rewritten, 5 added, 3 deleted (18 acknowledged). */
  async function changeRestoreWorkspace(call: Api, botId: string): Promise<void> {
    for (let i = 0; i < 10; i++)
      expect((await call("PUT", `/v1/bots/${botId}/files/dir${i % 3}/f${i}.txt`, `new ${i}`)).status).toBe(
        201,
      );
    for (let i = 20; i < 25; i++)
      expect((await call("PUT", `/v1/bots/${botId}/files/extra/f${i}.txt`, `extra ${i}`)).status).toBe(201);
    for (let i = 15; i < 18; i++)
      expect((await call("DELETE", `/v1/bots/${botId}/files/dir${i % 3}/f${i}.txt`)).status).toBe(200);
  }

  const RESTORE_POINTS: [string, number][] = [
    ["restore.after-created", 1],
    ["restore.after-lock-acquired", 1],
    ["restore.after-intent-committed", 1],
    ["restore.after-safety-ready", 1],
    ["restore.after-mutation-started", 1],
    ["restore.after-entry-applied", 7],
    ["restore.after-workspace-applied", 1],
  ];

  // Not on postgres: this sweep's crash points are the local restore saga's (its lock, intent, safety copy and
  // per-entry steps on local files); a postgres restore is one transaction with no saga and nothing on the
  // host's disk. Its crash points there are the storage's own: the postgres describe below.
  if (storage !== "postgres")
    describe("server killed during a restore, restarted on the same data directory", () => {
      it.each(RESTORE_POINTS)(
        "at %s (#%i): the open item is visible and a fenced recovery leaves the workspace before or after",
        async (point, at) => {
          const tmp = tempDir("crash-restore");
          const botId = "restorer";
          const workspace = join(tmp.dir, "workspaces", botId);
          let server = await spawnOn(tmp.dir, {
            ...providerEnv(),
            DRYDOCK_CRASH_POINT: point,
            DRYDOCK_CRASH_AT: String(at),
          });
          try {
            const call = api(server.url, server.token);
            expect((await call("POST", "/v1/bots", { name: "r", botId })).status).toBe(201);
            await seedRestoreWorkspace(call, botId);
            const checkpoint = (await call("POST", `/v1/bots/${botId}/checkpoints`)).json.checkpoint
              .checkpointId as string;
            const afterState = snapshot(workspace);
            await changeRestoreWorkspace(call, botId);
            const beforeState = snapshot(workspace);
            expect(beforeState).not.toEqual(afterState);

            await expectKilled(server, call("POST", `/v1/bots/${botId}/checkpoints/${checkpoint}/restore`));

            server = await spawnOn(tmp.dir, providerEnv());
            const again = api(server.url, server.token);
            const recovery = (await again("GET", "/v1/recovery")).json;
            expect(recovery.restores).toHaveLength(1);
            const operationId = recovery.restores[0].operationId as string;
            expect(recovery.restores[0].botId).toBe(botId);

            if (point !== "restore.after-created") {
              // The dead restore still holds the workspace: no write can slip in before the fenced recovery.
              const write = await again("PUT", `/v1/bots/${botId}/files/dir0/f0.txt`, "sneaked in");
              expect(write.status).toBe(409);
              expect(write.json.error.code).toBe("recovery_required");
            }

            // The operator's path (what `drydock restores show` + the printed command do): preview, then apply the
            // one eligible action against exactly the previewed fence.
            const controller = createRestoreRecoveryController({
              dataDir: tmp.dir,
              workspaceRoot: workspace,
            });
            const preview = await controller.preview(operationId);
            const action = (["rollback", "abort", "release"] as const).find(
              (a) => preview.actions[a].eligible,
            );
            expect(action, JSON.stringify(preview.actions)).toBeDefined();
            const result =
              action === "abort"
                ? await controller.abort(operationId, { ...preview.fence, reason: "test: server killed" })
                : await controller[action as "rollback" | "release"](operationId, preview.fence);
            expect(result.ok).toBe(true);

            const final = snapshot(workspace);
            expect([beforeState, afterState]).toContainEqual(final);
            expect((await again("GET", "/v1/recovery")).json.restores).toEqual([]);
            // The workspace is usable again: a new restore runs to completion.
            const next = await again("POST", `/v1/bots/${botId}/checkpoints/${checkpoint}/restore`);
            expect(next.status).toBe(200);
            expect(snapshot(workspace)).toEqual(afterState);
          } finally {
            server.kill();
            tmp.cleanup();
          }
        },
      );
    });

  // Not on postgres: this scenario is about local files only (the write's temp beside the file and its
  // workspace lock file under <dataDir>/locks); on postgres a write is one transaction, killed at the
  // storage's crash points in the postgres describe below.
  if (storage !== "postgres")
    describe("server killed during a file write", () => {
      it("leaves its workspace lock and temp behind; the restart removes both, and the next write and restore run", async () => {
        const tmp = tempDir("crash-write");
        const botId = "writer";
        const workspace = join(tmp.dir, "workspaces", botId);
        const workspaceLocks = () =>
          readdirSync(join(tmp.dir, "locks")).filter((n) => /^ws-[0-9a-f]{64}\.lock$/.test(n));
        const temps = () =>
          Object.keys(snapshot(workspace)).filter((p) => isWorkspaceTempName(p.split("/").pop()!));
        // Killed at its second write: the first is acknowledged, the second is flushed to its temp, not renamed.
        let server = await spawnOn(tmp.dir, {
          ...providerEnv(),
          DRYDOCK_CRASH_POINT: FILE_WRITE_CRASH_POINT,
          DRYDOCK_CRASH_AT: "2",
        });
        try {
          const checkpointId = await checkpointThenKilledWrite(server, botId);

          // What the dead server left: the file as it was, its flushed temp, and its workspace lock.
          expect(readFileSync(join(workspace, "docs", "a.txt"), "utf8")).toBe("old");
          expect(temps()).toHaveLength(1);
          expect(workspaceLocks()).toHaveLength(1);
          const lock = JSON.parse(readFileSync(join(tmp.dir, "locks", workspaceLocks()[0]!), "utf8"));
          expect(lock.payload.transactionId).toMatch(/^file-write-/);

          server = await spawnOn(tmp.dir, providerEnv());
          const again = api(server.url, server.token);
          // The restart's startup removed the stopped write's lock and its temp: nothing lingers, nothing is open.
          expect(workspaceLocks()).toEqual([]);
          expect(temps()).toEqual([]);
          const recovery = await again("GET", "/v1/recovery");
          expect(recovery.status, recovery.text).toBe(200);
          expect(recovery.json.restores).toEqual([]);
          expect(recovery.json.open).toBe(0);

          await expectWriteThenRestore(again, botId, checkpointId);
          expect(snapshot(workspace)).toEqual({ "docs/a.txt": "old" });
          expect((await again("GET", "/v1/recovery")).json.restores).toEqual([]);
        } finally {
          server.kill();
          tmp.cleanup();
        }
      });
    });

  /**
   * On a fresh server with its crash point set: the bot `botId`, docs/a.txt written ("old") and checkpointed
   * (both acknowledged), then a second write of it ("interrupted") during which the server must die. The
   * checkpoint's id.
   */
  async function checkpointThenKilledWrite(server: ServerChild, botId: string): Promise<string> {
    const call = api(server.url, server.token);
    expect((await call("POST", "/v1/bots", { name: "w", botId })).status).toBe(201);
    expect((await call("PUT", `/v1/bots/${botId}/files/docs/a.txt`, "old")).status).toBe(201);
    const checkpoint = await call("POST", `/v1/bots/${botId}/checkpoints`);
    expect(checkpoint.status, checkpoint.text).toBe(201);
    await expectKilledWithin(server, call("PUT", `/v1/bots/${botId}/files/docs/a.txt`, "interrupted"));
    return checkpoint.json.checkpoint.checkpointId as string;
  }

  /** After a killed write: the next write of docs/a.txt is read back, and a restore of `checkpointId` answers 200. */
  async function expectWriteThenRestore(again: Api, botId: string, checkpointId: string): Promise<void> {
    const write = await again("PUT", `/v1/bots/${botId}/files/docs/a.txt`, "new");
    expect(write.status, write.text).toBe(201);
    expect((await again("GET", `/v1/bots/${botId}/files/docs/a.txt`)).text).toBe("new");
    const restore = await again("POST", `/v1/bots/${botId}/checkpoints/${checkpointId}/restore`);
    expect(restore.status, restore.text).toBe(200);
  }

  /** What the dead server left in the delete journal for the Boat (null: no fence). */
  type FenceOnDisk = {
    phase: "prepared" | "accepted" | "blocked";
    status: string | null;
    receipt: boolean;
  } | null;

  interface DeletionCase {
    point: LifecycleCrashPoint;
    /** The fence on disk right after the kill. */
    fence: FenceOnDisk;
    /** Whether the bot's create row (its ownership of the Boat) was still on disk. */
    createRow: boolean;
    /** DELETE requests boat.dev had received when the server died. */
    deletesAtKill: number;
    /** The restarted server's startup reconcile of the fence (null: no fence was left to reconcile). */
    startup: "pending" | "confirmed" | "blocked" | null;
    /** DELETE requests boat.dev received for the Boat in all, crash and restarts included. */
    deletesInAll: number;
    /** A prepared fence older than the in-flight window stands before the Delete (a crashed caller's). */
    oldFence?: true;
  }

  const DELETION_CASES: DeletionCase[] = [
    {
      point: "delete.after-prepare",
      fence: { phase: "prepared", status: null, receipt: false },
      createRow: true,
      deletesAtKill: 0,
      startup: "pending",
      deletesInAll: 1,
    },
    {
      // The Delete retries an old prepared fence: it re-stamps it, then dies before its DELETE leaves. The
      // fresh stamp makes the next callers wait out the window, then one retry sends the only DELETE.
      point: "delete.after-restamp",
      fence: { phase: "prepared", status: null, receipt: false },
      createRow: true,
      deletesAtKill: 0,
      startup: "pending",
      deletesInAll: 1,
      oldFence: true,
    },
    {
      // The journal cannot tell this from after-prepare (a prepared fence without a receipt), so once the
      // in-flight window is over the explicit retry sends DELETE again by design (crash.ts), and boat.dev
      // answers it with the operation already running: two DELETE requests, one deletion operation.
      point: "delete.after-delete-response",
      fence: { phase: "prepared", status: null, receipt: false },
      createRow: true,
      deletesAtKill: 1,
      startup: "pending",
      deletesInAll: 2,
    },
    {
      point: "delete.after-accepted",
      fence: { phase: "accepted", status: "pending", receipt: true },
      createRow: true,
      deletesAtKill: 1,
      startup: "pending",
      deletesInAll: 1,
    },
    {
      point: "delete.after-receipt-progress",
      fence: { phase: "accepted", status: "processing", receipt: true },
      createRow: true,
      deletesAtKill: 1,
      startup: "confirmed",
      deletesInAll: 1,
    },
    {
      point: "delete.after-receipt-completed",
      fence: { phase: "accepted", status: "completed", receipt: true },
      createRow: true,
      deletesAtKill: 1,
      startup: "confirmed",
      deletesInAll: 1,
    },
    {
      point: "delete.after-retire-create",
      fence: { phase: "accepted", status: "completed", receipt: true },
      createRow: false,
      deletesAtKill: 1,
      startup: "confirmed",
      deletesInAll: 1,
    },
    {
      point: "delete.after-retire-deletion",
      fence: null,
      createRow: false,
      deletesAtKill: 1,
      startup: null,
      deletesInAll: 1,
    },
    {
      // boat.dev refused the DELETE (409 sandbox_busy: nothing started). The person fixes the cause and
      // retries Delete: that is the second DELETE request, and the only one boat.dev accepted.
      point: "delete.after-blocked",
      fence: { phase: "blocked", status: "blocked", receipt: false },
      createRow: true,
      deletesAtKill: 1,
      startup: "blocked",
      deletesInAll: 2,
    },
  ];

  /** SIGKILLed at its crash point within `ms` (a point never reached fails here, not at the test timeout). */
  async function expectKilledWithin(
    server: ServerChild,
    request: Promise<unknown>,
    ms = 10_000,
  ): Promise<void> {
    await request.then(
      () => undefined,
      () => undefined,
    );
    let timer: NodeJS.Timeout | undefined;
    const exit = await Promise.race([
      server.exited,
      new Promise<"alive">((resolve) => {
        timer = setTimeout(() => resolve("alive"), ms);
      }),
    ]);
    clearTimeout(timer);
    expect(exit, `the server did not die at its crash point:\n${server.output()}`).not.toBe("alive");
    expect((exit as { signal: NodeJS.Signals | null }).signal).toBe("SIGKILL");
  }

  /** A simulator control call (`/_sim/...`), with the simulator's token. */
  async function simControl(boatDev: BoatSimulator, method: string, path: string, body?: unknown) {
    const res = await fetch(`${boatDev.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${boatDev.token}`, "content-type": "application/json" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    expect(res.status, `${method} ${path}`).toBe(200);
    // biome-ignore lint/suspicious/noExplicitAny: tests read response fields directly and assert on them.
    return (await res.json()) as any;
  }

  async function fenceOnDisk(dataDir: string, boxId: string): Promise<FenceOnDisk> {
    const records = await onStorage(dataDir, (s) => s.deleteJournal.peekBoatDeletions());
    const record = records.find((r) => r.boxId === boxId);
    return record === undefined
      ? null
      : { phase: record.phase, status: record.status ?? null, receipt: record.operationId !== undefined };
  }

  async function createRowOnDisk(dataDir: string, botId: string, boxId: string): Promise<boolean> {
    const rows = await onStorage(dataDir, (s) => s.createJournal.peekBoatCreates());
    return rows.some((row) => row.botId === botId && row.boxId === boxId);
  }

  /** GET /v1/recovery once the restarted server's startup reconcile has finished (its report is in it). */
  // biome-ignore lint/suspicious/noExplicitAny: tests read response fields directly and assert on them.
  async function recoveryAfterStartup(call: Api): Promise<any> {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const recovery = await call("GET", "/v1/recovery");
      expect(recovery.status, recovery.text).toBe(200);
      if (recovery.json.startup !== null) return recovery.json;
      expect(Date.now(), "startup recovery did not finish within 10 s").toBeLessThan(deadline);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /**
   * A deletion case's start: a boat.dev of its own (the only Boat it ever holds is this bot's, so its DELETE
   * counters are this Boat's: it counts every DELETE request it receives, refused or not, before anything
   * else), a temp data directory, and a server there (plus `crashEnv`: its crash point) with the bot `botId` and
   * its computer provisioned. On a failure of this setup, all of it is stopped and removed.
   */
  async function deletionSetup(label: string, botId: string, crashEnv: Record<string, string>) {
    const boatDev = await startBoatSimulator({ port: 0 });
    const tmp = tempDir(label);
    const env = { BOAT_API_URL: boatDev.apiUrl, BOAT_API_TOKEN: boatDev.token };
    let server: ServerChild | undefined;
    try {
      server = await spawnOn(tmp.dir, { ...env, ...crashEnv });
      const call = api(server.url, server.token);
      expect((await call("POST", "/v1/bots", { name: "deleter", botId })).status).toBe(201);
      const provisioned = await call("POST", `/v1/bots/${botId}/computer`);
      expect(provisioned.status, provisioned.text).toBe(201);
      const { boxId, name } = provisioned.json.computer as { boxId: string; name: string };
      return { boatDev, tmp, env, server, call, boxId, name };
    } catch (error) {
      server?.kill();
      tmp.cleanup();
      await boatDev.close();
      throw error;
    }
  }

  /**
   * boat.dev's truth after a deletion (`boatDev` held only this Boat): one Boat ever billed, gone now, one
   * deletion operation, `deletesInAll` DELETE requests; the fence and the create row retired in the storage.
   */
  async function expectBoatGoneOnce(
    boatDev: BoatSimulator,
    dataDir: string,
    botId: string,
    boxId: string,
    deletesInAll: number,
  ): Promise<void> {
    const stats = boatDev.stats();
    expect(stats.deleteRequests).toBe(deletesInAll);
    expect(stats.deletesAccepted).toBe(1);
    expect(stats.createsCommitted).toBe(1);
    expect(stats.createRequests).toBe(1);
    expect(stats.live).toBe(0);
    const sim = await simControl(boatDev, "GET", "/_sim/sandboxes");
    expect(sim.sandboxes.map((b: { id: string }) => b.id)).toEqual([boxId]);
    expect(sim.sandboxes[0].deletedAt).not.toBeNull();
    const operations = sim.operations.filter((op: { targetId: string }) => op.targetId === boxId);
    expect(operations.map((op: { status: string }) => op.status)).toEqual(["completed"]);
    expect(await fenceOnDisk(dataDir, boxId)).toBeNull();
    expect(await createRowOnDisk(dataDir, botId, boxId)).toBe(false);
  }

  describe("server killed during a deletion, restarted on the same data directory", () => {
    it("the sweep covers every deletion crash point", () => {
      expect(DELETION_CASES.map((c) => c.point).sort()).toEqual(
        LIFECYCLE_CRASH_POINTS.filter((p) => p.startsWith("delete.")).sort(),
      );
    });

    it.each(DELETION_CASES.map((c) => [c.point, c] as const))(
      "at %s: the fence survives and stays visible, the Boat ends gone, no blind second DELETE",
      async (_point, c) => {
        const botId = `d-${c.point.slice("delete.after-".length)}`;
        const setup = await deletionSetup("crash-delete", botId, {
          DRYDOCK_CRASH_POINT: c.point,
        });
        const { boatDev, tmp, env, call, boxId, name } = setup;
        let server = setup.server;
        try {
          const confirm = { confirmName: name };
          if (c.fence?.phase === "blocked") {
            // boat.dev will refuse the DELETE with 409 sandbox_busy (a 4xx refusal: the fence is blocked).
            await simControl(boatDev, "PATCH", `/_sim/sandboxes/${boxId}`, { busy: true });
          }
          if (c.oldFence) {
            await onStorage(
              tmp.dir,
              (s) => s.deleteJournal.prepareBoatDeletion({ boxId, name, ownerBotId: botId }),
              () => Date.now() - DELETE_IN_FLIGHT_MS - 1_000,
            );
          }
          await expectKilledWithin(server, call("DELETE", `/v1/bots/${botId}/computer`, confirm));

          // What the dead server left behind: boat.dev's truth, and the journals on disk.
          expect(boatDev.stats().deleteRequests).toBe(c.deletesAtKill);
          expect(await fenceOnDisk(tmp.dir, boxId)).toEqual(c.fence);
          expect(await createRowOnDisk(tmp.dir, botId, boxId)).toBe(c.createRow);

          const killed = server;
          server = await spawnOn(tmp.dir, env);
          await expectNewInstance(tmp.dir, killed, server);
          let again = api(server.url, server.token);
          let recovery = await recoveryAfterStartup(again);
          // The restarted server saw the fence and reconciled it (polls and reads only).
          expect(recovery.startup.deletions).toEqual(
            c.fence === null
              ? []
              : [{ boxId, ownerBotId: botId, phaseBefore: c.fence.phase, outcome: c.startup }],
          );
          // A restart, its reconcile and its views never send DELETE.
          expect(boatDev.stats().deleteRequests).toBe(c.deletesAtKill);

          if (c.startup === "confirmed" || c.startup === null) {
            // Finished (by the dead server, or by the restart's reconcile): nothing is left open, and the
            // interrupted Delete, sent again, finds no computer and sends nothing.
            expect((await again("GET", `/v1/bots/${botId}/computer`)).json.computer).toEqual({
              status: "none",
            });
            const repeat = await again("DELETE", `/v1/bots/${botId}/computer`, confirm);
            expect(repeat.status, repeat.text).toBe(404);
            expect(repeat.json.error.code).toBe("computer_not_found");
          } else {
            // The open deletion is visible, in the recovery report and on the bot's computer, until finished.
            const fence = c.fence as NonNullable<FenceOnDisk>;
            expect(recovery.boats).toHaveLength(1);
            let item = recovery.boats[0];
            expect(item).toMatchObject({ kind: "deletion_fence", botId, boxId, name });
            expect(item.facts.fencePhase).toBe(fence.phase);
            expect((await again("GET", `/v1/bots/${botId}/computer`)).json.computer).toMatchObject({
              status: c.startup === "blocked" ? "needs_attention" : "deleting",
              boxId,
              name,
            });

            if (fence.phase === "prepared") {
              // Inside the in-flight window: the DELETE may still be on the wire, so nothing is re-sent.
              expect(item.facts.inFlightLeftMs).toBeGreaterThan(0);
              expect(item.action.name).toBeNull();
              expect(item.action.advice).toContain("on the wire");
              const early = await again("DELETE", `/v1/bots/${botId}/computer`, confirm);
              expect(early.status, early.text).toBe(202);
              expect(early.json).toEqual({ ok: true, pending: true });
              expect(boatDev.stats().deleteRequests).toBe(c.deletesAtKill);
              expect((await again("GET", `/v1/bots/${botId}/computer`)).json.computer.status).toBe(
                "deleting",
              );

              // The same data directory, restarted with its clock past the window.
              server.kill();
              await server.exited;
              server = await spawnOn(tmp.dir, {
                ...env,
                DRYDOCK_TEST_CLOCK_OFFSET_MS: String(DELETE_IN_FLIGHT_MS + 1_000),
              });
              again = api(server.url, server.token);
              recovery = await recoveryAfterStartup(again);
              expect(recovery.boats).toHaveLength(1);
              item = recovery.boats[0];
              expect(item).toMatchObject({
                kind: "deletion_fence",
                boxId,
                facts: { fencePhase: "prepared" },
              });
              expect(item.facts.inFlightLeftMs).toBeUndefined();
              expect(item.action.name).toBe("retryDeletion");
              // Past the window on the server's clock (the one the lifecycle and the journals use): nothing
              // sends that DELETE any more, so the computer needs a person's Delete, as the plan says.
              expect((await again("GET", `/v1/bots/${botId}/computer`)).json.computer.status).toBe(
                "needs_attention",
              );
              expect(boatDev.stats().deleteRequests).toBe(c.deletesAtKill);
            }
            if (fence.phase === "blocked") {
              expect(item.attention).toBe(true);
              expect(item.action.name).toBe("retryDeletion");
              // The person fixes the cause in boat.dev, then retries Delete.
              await simControl(boatDev, "PATCH", `/_sim/sandboxes/${boxId}`, { busy: false });
            }

            const finished = await again("DELETE", `/v1/bots/${botId}/computer`, confirm);
            expect(finished.status, finished.text).toBe(200);
            expect(finished.json).toEqual({ ok: true });
            expect((await again("GET", `/v1/bots/${botId}/computer`)).json.computer).toEqual({
              status: "none",
            });
          }

          // boat.dev's truth: one Boat ever billed, gone now, one deletion operation, no blind second DELETE.
          await expectBoatGoneOnce(boatDev, tmp.dir, botId, boxId, c.deletesInAll);

          // Nothing is left for a person, and the bot itself can go (no DELETE is sent for it).
          const finalRecovery = (await again("GET", "/v1/recovery")).json;
          expect(finalRecovery.boats).toEqual([]);
          expect(finalRecovery.restores).toEqual([]);
          expect(finalRecovery.open).toBe(0);
          expect(finalRecovery.complete).toBe(true);
          const removed = await again("DELETE", `/v1/bots/${botId}`);
          expect(removed.status, removed.text).toBe(200);
          expect(boatDev.stats().deleteRequests).toBe(c.deletesInAll);
        } finally {
          server.kill();
          tmp.cleanup();
          await boatDev.close();
        }
      },
    );
  });

  /** The saga directories (active, not archived) of every workspace shard under `<dataDir>/restore-sagas`. */
  function activeSagaDirs(dataDir: string): string[] {
    const root = join(dataDir, "restore-sagas");
    const out: string[] = [];
    let shards: string[] = [];
    try {
      shards = readdirSync(root);
    } catch {
      return out;
    }
    for (const shard of shards) {
      for (const name of readdirSync(join(root, shard))) {
        if (!name.startsWith(".")) out.push(join(root, shard, name));
      }
    }
    return out;
  }

  // Not on postgres: the saga directory under <dataDir>/restore-sagas is local; postgres has no restore saga.
  if (storage !== "postgres")
    describe("server killed while creating a restore saga, restarted on the same data directory", () => {
      it("at saga.after-genesis-head: the unpublished saga settles itself (GET /v1/recovery empty) and a new restore runs", async () => {
        const tmp = tempDir("crash-saga-create");
        const botId = "creator";
        const workspace = join(tmp.dir, "workspaces", botId);
        let server = await spawnOn(tmp.dir, {
          ...providerEnv(),
          DRYDOCK_CRASH_POINT: "saga.after-genesis-head",
        });
        try {
          const call = api(server.url, server.token);
          expect((await call("POST", "/v1/bots", { name: "c", botId })).status).toBe(201);
          expect((await call("PUT", `/v1/bots/${botId}/files/a.txt`, "v1")).status).toBe(201);
          const checkpoint = (await call("POST", `/v1/bots/${botId}/checkpoints`)).json.checkpoint
            .checkpointId as string;
          const afterState = snapshot(workspace);
          expect((await call("PUT", `/v1/bots/${botId}/files/a.txt`, "v2")).status).toBe(201);
          const beforeState = snapshot(workspace);

          await expectKilled(server, call("POST", `/v1/bots/${botId}/checkpoints/${checkpoint}/restore`));
          // What the kill left: one saga directory holding only its unpublished genesis HEAD; the workspace as it was.
          const left = activeSagaDirs(tmp.dir);
          expect(left).toHaveLength(1);
          expect(readdirSync(left[0]!)).toEqual(["HEAD"]);
          expect(snapshot(workspace)).toEqual(beforeState);

          server = await spawnOn(tmp.dir, providerEnv());
          const again = api(server.url, server.token);
          // No manual step: the report removes what records no work, and nothing is open.
          const recovery = await recoveryAfterStartup(again);
          expect(recovery.restores).toEqual([]);
          expect(recovery.open).toBe(0);
          expect(recovery.complete).toBe(true);
          expect(activeSagaDirs(tmp.dir)).toEqual([]);
          expect((await again("GET", "/metrics")).text).toMatch(/^drydock_recovery_items_open 0$/m);

          // The workspace was never locked: writes and a new restore go through.
          expect((await again("PUT", `/v1/bots/${botId}/files/b.txt`, "new")).status).toBe(201);
          const next = await again("POST", `/v1/bots/${botId}/checkpoints/${checkpoint}/restore`);
          expect(next.status, next.text).toBe(200);
          expect(snapshot(workspace)).toEqual(afterState);
          expect((await again("GET", "/v1/recovery")).json).toMatchObject({ open: 0, restores: [] });
        } finally {
          server.kill();
          tmp.cleanup();
        }
      });
    });

  // ---- postgres only: the storage's own crash points (each step of a transaction: after BEGIN, before and
  // after COMMIT), stopping the one transaction of a given lock (DRYDOCK_CRASH_SCOPE) among the heartbeat's.
  if (storage === "postgres") postgresCrashPoints();

  function postgresCrashPoints(): void {
    const STORE_POINTS = ["postgres:after-begin", "postgres:before-commit", "postgres:after-commit"] as const;
    /** Whether the transaction killed at `point` is in the database after the restart. */
    const committed = (point: (typeof STORE_POINTS)[number]) => point === "postgres:after-commit";

    /** The workspace as the store holds it: its head's version, and every file's content. */
    async function workspaceOf(dataDir: string, botId: string) {
      return onStorage(dataDir, async (s) => {
        const ws = s.workspaces as WorkspaceStore;
        const head = await ws.head(botId);
        const files: Record<string, string> = {};
        for (const f of head.files)
          files[f.path] = Buffer.from((await ws.readFile(botId, f.path)).bytes).toString("utf8");
        return { version: head.version, files };
      });
    }

    /** The operation ids of the bot's recorded restores (ws_restores, the schema of the data directory). */
    async function restoresOf(dataDir: string, botId: string): Promise<string[]> {
      const client = new pg.Client({ connectionString: storageEnv(storage, dataDir).DRYDOCK_STORAGE });
      await client.connect();
      try {
        const { rows } = await client.query(
          `SELECT operation_id FROM ${schemaOf(dataDir)}.ws_restores WHERE bot_id = $1 ORDER BY started_at`,
          [botId],
        );
        return rows.map((r: { operation_id: string }) => r.operation_id);
      } finally {
        await client.end();
      }
    }

    /**
     * Waits (for the condition, bounded) until the killed server's lease has lapsed by the database's clock;
     * its row was never renewed after the kill (the lease end it had is the one it lapses at).
     */
    async function killedLeaseLapses(dataDir: string, killed: ServerChild): Promise<InstanceView> {
      const first = (await instancesOn(dataDir)).find((i) => i.pid === killed.child.pid);
      expect(first).toBeDefined();
      const deadline = Date.now() + 60_000;
      for (;;) {
        const row = (await instancesOn(dataDir)).find((i) => i.pid === killed.child.pid) as InstanceView;
        if (!row.holdsLease) {
          expect(row.leaseUntil).toBe(first!.leaseUntil);
          return row;
        }
        expect(Date.now(), "the killed server's lease did not lapse within 60 s").toBeLessThan(deadline);
        await new Promise((r) => setTimeout(r, 100));
      }
    }

    describe("server killed inside a restore's transaction (postgres), restarted on the same data directory", () => {
      it.each(STORE_POINTS)(
        "at %s: the head is the old manifest or the checkpoint's, never a mix; an answered restore stays recorded; acknowledged writes are there",
        async (point) => {
          const tmp = tempDir("crash-pg-restore");
          const botId = "pgrestorer";
          // The workspace's write transactions before the killed restore: 20 + 1 + 1 + 1 + 10 + 5 + 3 (below).
          const killedAt = 42;
          let server = await spawnOn(tmp.dir, {
            ...providerEnv(),
            DRYDOCK_CRASH_POINT: point,
            DRYDOCK_CRASH_SCOPE: `workspace:${botId}`,
            DRYDOCK_CRASH_AT: String(killedAt),
          });
          try {
            const call = api(server.url, server.token);
            expect((await call("POST", "/v1/bots", { name: "r", botId })).status).toBe(201);
            await seedRestoreWorkspace(call, botId);
            const made = await call("POST", `/v1/bots/${botId}/checkpoints`);
            expect(made.status, made.text).toBe(201);
            const checkpoint = made.json.checkpoint.checkpointId as string;
            const afterState = (await workspaceOf(tmp.dir, botId)).files;
            // A restore that answers 200 before the kill (it must be recorded after the restart).
            expect((await call("PUT", `/v1/bots/${botId}/files/scratch.txt`, "x")).status).toBe(201);
            const answered = await call("POST", `/v1/bots/${botId}/checkpoints/${checkpoint}/restore`);
            expect(answered.status, answered.text).toBe(200);
            const answeredId = answered.json.operationId as string;
            await changeRestoreWorkspace(call, botId);
            // Every write above was acknowledged: this is the head they made.
            const before = await workspaceOf(tmp.dir, botId);
            expect(before.files).not.toEqual(afterState);

            await expectKilledWithin(
              server,
              call("POST", `/v1/bots/${botId}/checkpoints/${checkpoint}/restore`),
            );
            // What the dead server left, read from the database: the whole old head or the whole restored one.
            const left = await workspaceOf(tmp.dir, botId);
            expect(left).toEqual(
              committed(point)
                ? { version: before.version + 1, files: afterState }
                : { version: before.version, files: before.files },
            );
            const recorded = await restoresOf(tmp.dir, botId);
            expect(recorded).toHaveLength(committed(point) ? 2 : 1);
            expect(recorded[0]).toBe(answeredId);

            const killed = server;
            server = await spawnOn(tmp.dir, providerEnv());
            await expectNewInstance(tmp.dir, killed, server);
            const again = api(server.url, server.token);
            // Nothing for a person: a restore is one transaction, there is no saga to settle.
            const recovery = await recoveryAfterStartup(again);
            expect(recovery).toMatchObject({ restores: [], open: 0, complete: true });
            // The answered restore is recorded and served; a committed killed one is too.
            const summary = await again("GET", `/v1/restores/${answeredId}`);
            expect(summary.status, summary.text).toBe(200);
            expect(summary.json.restore).toMatchObject({
              operationId: answeredId,
              phase: "completed",
              checkpointId: checkpoint,
            });
            for (const operationId of recorded)
              expect((await again("GET", `/v1/restores/${operationId}`)).status).toBe(200);
            for (const [path, content] of Object.entries(left.files))
              expect((await again("GET", `/v1/bots/${botId}/files/${path}`)).text).toBe(content);

            // The killed instance's lease lapses (nobody renews it); the new instance serves meanwhile and after.
            const lapsed = await killedLeaseLapses(tmp.dir, killed);
            expect(lapsed.holdsLease).toBe(false);
            expect((await again("PUT", `/v1/bots/${botId}/files/after.txt`, "after")).status).toBe(201);
            const next = await again("POST", `/v1/bots/${botId}/checkpoints/${checkpoint}/restore`);
            expect(next.status, next.text).toBe(200);
            expect(await workspaceOf(tmp.dir, botId)).toEqual({
              version: left.version + 2,
              files: afterState,
            });
          } finally {
            server.kill();
            tmp.cleanup();
          }
        },
      );
    });

    describe("server killed inside a file write's transaction (postgres), restarted on the same data directory", () => {
      it.each(STORE_POINTS)(
        "at %s: the acknowledged write is there, the killed one wholly or not at all; the next write and restore run",
        async (point) => {
          const tmp = tempDir("crash-pg-write");
          const botId = "pgwriter";
          // Killed in its third workspace transaction: a write and a checkpoint were acknowledged.
          let server = await spawnOn(tmp.dir, {
            ...providerEnv(),
            DRYDOCK_CRASH_POINT: point,
            DRYDOCK_CRASH_SCOPE: `workspace:${botId}`,
            DRYDOCK_CRASH_AT: "3",
          });
          try {
            const checkpointId = await checkpointThenKilledWrite(server, botId);

            expect(await workspaceOf(tmp.dir, botId)).toEqual({
              version: committed(point) ? 2 : 1,
              files: { "docs/a.txt": committed(point) ? "interrupted" : "old" },
            });

            const killed = server;
            server = await spawnOn(tmp.dir, providerEnv());
            await expectNewInstance(tmp.dir, killed, server);
            const again = api(server.url, server.token);
            const recovery = await recoveryAfterStartup(again);
            expect(recovery).toMatchObject({ restores: [], open: 0 });
            await expectWriteThenRestore(again, botId, checkpointId);
            expect((await workspaceOf(tmp.dir, botId)).files).toEqual({ "docs/a.txt": "old" });
          } finally {
            server.kill();
            tmp.cleanup();
          }
        },
      );
    });

    interface DeleteTransactionCase {
      point: (typeof STORE_POINTS)[number];
      /** Which transaction of the delete journal (DRYDOCK_CRASH_AT in the `delete` scope). */
      n: 1 | 2;
      /** The fence in the database right after the kill (null: none). */
      fence: FenceOnDisk;
      deletesAtKill: number;
      deletesInAll: number;
    }
    const DELETE_TRANSACTIONS: DeleteTransactionCase[] = [
      // The fence's prepare: not committed, so nothing was sent; committed, the DELETE had not left yet.
      { point: "postgres:after-begin", n: 1, fence: null, deletesAtKill: 0, deletesInAll: 1 },
      { point: "postgres:before-commit", n: 1, fence: null, deletesAtKill: 0, deletesInAll: 1 },
      {
        point: "postgres:after-commit",
        n: 1,
        fence: { phase: "prepared", status: null, receipt: false },
        deletesAtKill: 0,
        deletesInAll: 1,
      },
      // The receipt's: not committed, the fence stays prepared without a receipt, so the retry past the in-flight
      // window sends DELETE again by design (boat.dev answers it with the operation already running); committed,
      // the receipt is journaled and nothing is ever sent again.
      {
        point: "postgres:after-begin",
        n: 2,
        fence: { phase: "prepared", status: null, receipt: false },
        deletesAtKill: 1,
        deletesInAll: 2,
      },
      {
        point: "postgres:before-commit",
        n: 2,
        fence: { phase: "prepared", status: null, receipt: false },
        deletesAtKill: 1,
        deletesInAll: 2,
      },
      {
        point: "postgres:after-commit",
        n: 2,
        fence: { phase: "accepted", status: "pending", receipt: true },
        deletesAtKill: 1,
        deletesInAll: 1,
      },
    ];

    describe("server killed inside a delete journal transaction (postgres), restarted on the same data directory", () => {
      it.each(DELETE_TRANSACTIONS.map((c) => [c.point, c.n, c] as const))(
        "at %s (#%i of the delete journal): the fence is whole or absent, the Boat ends gone, one deletion operation",
        async (_point, _n, c) => {
          const botId = `d-${c.n}-${c.point.slice("postgres:".length)}`;
          const setup = await deletionSetup("crash-pg-delete", botId, {
            DRYDOCK_CRASH_POINT: c.point,
            DRYDOCK_CRASH_SCOPE: "delete",
            DRYDOCK_CRASH_AT: String(c.n),
          });
          const { boatDev, tmp, env, call, boxId, name } = setup;
          let server = setup.server;
          try {
            await expectKilledWithin(
              server,
              call("DELETE", `/v1/bots/${botId}/computer`, { confirmName: name }),
            );
            expect(boatDev.stats().deleteRequests).toBe(c.deletesAtKill);
            expect(await fenceOnDisk(tmp.dir, boxId)).toEqual(c.fence);

            // Restarted with its clock past the in-flight window (a prepared fence may be retried at once).
            const killed = server;
            server = await spawnOn(tmp.dir, {
              ...env,
              DRYDOCK_TEST_CLOCK_OFFSET_MS: String(DELETE_IN_FLIGHT_MS + 1_000),
            });
            await expectNewInstance(tmp.dir, killed, server);
            const again = api(server.url, server.token);
            await recoveryAfterStartup(again);
            // A restart, its reconcile and its views never send DELETE.
            expect(boatDev.stats().deleteRequests).toBe(c.deletesAtKill);
            const finished = await again("DELETE", `/v1/bots/${botId}/computer`, { confirmName: name });
            expect(finished.status, finished.text).toBe(200);
            expect((await again("GET", `/v1/bots/${botId}/computer`)).json.computer).toEqual({
              status: "none",
            });

            await expectBoatGoneOnce(boatDev, tmp.dir, botId, boxId, c.deletesInAll);
            const recovery = (await again("GET", "/v1/recovery")).json;
            expect(recovery).toMatchObject({ boats: [], restores: [], open: 0 });
          } finally {
            server.kill();
            tmp.cleanup();
            await boatDev.close();
          }
        },
      );
    });

    /** The create journal's transactions of a provision: its key (1), then the Boat's id remembered (2). */
    const CREATE_TRANSACTIONS = [1, 2] as const;

    describe("server killed inside a create journal transaction (postgres), restarted on the same data directory", () => {
      it.each(STORE_POINTS.flatMap((point) => CREATE_TRANSACTIONS.map((n) => [point, n] as const)))(
        "at %s (#%i of the create journal): exactly one Boat once the retry finishes, nothing left open",
        async (point, n) => {
          const tmp = tempDir("crash-pg-create");
          const botId = `c-${n}-${point.slice("postgres:".length)}`;
          const before = sim.stats().createsCommitted;
          let server = await spawnOn(tmp.dir, {
            ...providerEnv(),
            DRYDOCK_CRASH_POINT: point,
            DRYDOCK_CRASH_SCOPE: "create",
            DRYDOCK_CRASH_AT: String(n),
          });
          try {
            const call = api(server.url, server.token);
            expect((await call("POST", "/v1/bots", { name: "crash", botId })).status).toBe(201);
            await expectKilledWithin(server, call("POST", `/v1/bots/${botId}/computer`));
            // Where it stopped: no POST before the key is committed; one after.
            const rows = await onStorage(tmp.dir, (s) => s.createJournal.peekBoatCreates());
            expect(rows.filter((r) => r.botId === botId)).toHaveLength(n === 1 && !committed(point) ? 0 : 1);

            const killed = server;
            server = await spawnOn(tmp.dir, providerEnv());
            await expectNewInstance(tmp.dir, killed, server);
            const again = api(server.url, server.token);
            expect((await recoveryAfterStartup(again)).restores).toEqual([]);
            const finished = await again("POST", `/v1/bots/${botId}/computer`);
            expect([200, 201], finished.text).toContain(finished.status);
            expect(finished.json.computer.status).toBe("ready");
            const name = finished.json.computer.name as string;
            expect(sim.stats().createsCommitted - before).toBe(1);
            expect(sim.stats().perName[name]).toBe(1);
            const recovery = (await again("GET", "/v1/recovery")).json;
            expect(recovery.boats).toEqual([]);
            expect(recovery.open).toBe(0);
          } finally {
            server.kill();
            tmp.cleanup();
          }
        },
      );
    });
  }
}
