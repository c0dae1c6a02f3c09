/**
 * SIGKILL of the real server process at lifecycle and restore crash points, then a restart on the same
 * data directory. The boat.dev simulator runs in this (the test) process, so its stats are the billing
 * truth across the server's death.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { type BoatSimulator, startBoatSimulator } from "@drydock/boat-provider/simulator";
import { createRestoreRecoveryController } from "@drydock/recovery-controller";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, type ServerChild, spawnServer, tempDir } from "./helpers.js";

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
      let server = await spawnServer(tmp.dir, { ...providerEnv(), DRYDOCK_CRASH_POINT: point });
      try {
        const call = api(server.url, server.token);
        expect((await call("POST", "/v1/bots", { name: "crash", botId })).status).toBe(201);
        await expectKilled(server, call("POST", `/v1/bots/${botId}/computer`));

        server = await spawnServer(tmp.dir, providerEnv());
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

const RESTORE_POINTS: [string, number][] = [
  ["restore.after-created", 1],
  ["restore.after-lock-acquired", 1],
  ["restore.after-intent-committed", 1],
  ["restore.after-safety-ready", 1],
  ["restore.after-mutation-started", 1],
  ["restore.after-entry-applied", 7],
  ["restore.after-workspace-applied", 1],
];

describe("server killed during a restore, restarted on the same data directory", () => {
  it.each(RESTORE_POINTS)(
    "at %s (#%i): the open item is visible and a fenced recovery leaves the workspace before or after",
    async (point, at) => {
      const tmp = tempDir("crash-restore");
      const botId = "restorer";
      const workspace = join(tmp.dir, "workspaces", botId);
      let server = await spawnServer(tmp.dir, {
        ...providerEnv(),
        DRYDOCK_CRASH_POINT: point,
        DRYDOCK_CRASH_AT: String(at),
      });
      try {
        const call = api(server.url, server.token);
        expect((await call("POST", "/v1/bots", { name: "r", botId })).status).toBe(201);
        for (let i = 0; i < 20; i++)
          expect(
            (await call("PUT", `/v1/bots/${botId}/files/dir${i % 3}/f${i}.txt`, `old ${i}`)).status,
          ).toBe(201);
        const checkpoint = (await call("POST", `/v1/bots/${botId}/checkpoints`)).json.checkpoint
          .checkpointId as string;
        const afterState = snapshot(workspace);
        for (let i = 0; i < 10; i++)
          await call("PUT", `/v1/bots/${botId}/files/dir${i % 3}/f${i}.txt`, `new ${i}`);
        for (let i = 20; i < 25; i++)
          await call("PUT", `/v1/bots/${botId}/files/extra/f${i}.txt`, `extra ${i}`);
        for (let i = 15; i < 18; i++) await call("DELETE", `/v1/bots/${botId}/files/dir${i % 3}/f${i}.txt`);
        const beforeState = snapshot(workspace);
        expect(beforeState).not.toEqual(afterState);

        await expectKilled(server, call("POST", `/v1/bots/${botId}/checkpoints/${checkpoint}/restore`));

        server = await spawnServer(tmp.dir, providerEnv());
        const again = api(server.url, server.token);
        const recovery = (await again("GET", "/v1/recovery")).json;
        expect(recovery.restores).toHaveLength(1);
        const operationId = recovery.restores[0].operationId as string;
        expect(recovery.restores[0].botId).toBe(botId);

        if (point !== "restore.after-created") {
          // The dead restore still holds the workspace: no write can slip in before the fenced recovery.
          const write = await again("PUT", `/v1/bots/${botId}/files/dir0/f0.txt`, "sneaked in");
          expect(write.status).toBe(409);
          expect(write.json.error.code).toBe("RECOVERY_REQUIRED");
        }

        // The operator's path (what `drydock restores show` + the printed command do): preview, then apply the
        // one eligible action against exactly the previewed fence.
        const controller = createRestoreRecoveryController({ dataDir: tmp.dir, workspaceRoot: workspace });
        const preview = await controller.preview(operationId);
        const action = (["rollback", "abort", "release"] as const).find((a) => preview.actions[a].eligible);
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
