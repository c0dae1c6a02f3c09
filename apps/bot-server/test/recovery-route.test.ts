/**
 * What a person must see and confirm: GET /v1/recovery lists every restore `drydock status` lists (a
 * finished-but-unarchived saga still holding the lock included), a failed restore names the operation to
 * act on, DELETE /v1/bots/:botId never deletes a live Boat without its name, and provider retries are
 * counted.
 */

import { spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import {
  cpSync,
  existsSync,
  linkSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmdirSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { type AddressInfo, createServer, type Socket } from "node:net";
import { join } from "node:path";
import { openBoatCreateJournal } from "@drydock/boat-create-journal";
import { openBoatDeleteJournal } from "@drydock/boat-delete-journal";
import { startBoatSimulator } from "@drydock/boat-provider/simulator";
import { createRestoreRecoveryController, sagaStateDir } from "@drydock/recovery-controller";
import {
  acquireWorkspaceLock,
  openCheckpointStore,
  openSagaStore,
  restoreCheckpoint,
} from "@drydock/restore-saga";
import { describe, expect, it, vi } from "vitest";
import { openBotRegistry } from "../src/bots.js";
import { loadConfig } from "../src/config.js";
import { type RunningServer, startServer } from "../src/server.js";
import { api, inProcessServer, spawnServer, tempDir } from "./helpers.js";

describe("a restore killed after `completed`, before its lock was released (server restarted)", () => {
  it("GET /v1/recovery lists it with its fenced command, and a new restore's 409 names it", async () => {
    const tmp = tempDir("recovery-done");
    const botId = "finisher";
    let server = await spawnServer(tmp.dir, {
      DRYDOCK_CRASH_POINT: "restore.after-completed",
      DRYDOCK_TOKEN: "t".repeat(32),
    });
    try {
      const call = api(server.url, server.token);
      expect((await call("POST", "/v1/bots", { name: "f", botId })).status).toBe(201);
      expect((await call("PUT", `/v1/bots/${botId}/files/a.txt`, "v1")).status).toBe(201);
      const checkpointId = (await call("POST", `/v1/bots/${botId}/checkpoints`)).json.checkpoint
        .checkpointId as string;
      expect((await call("PUT", `/v1/bots/${botId}/files/a.txt`, "v2")).status).toBe(201);
      await call("POST", `/v1/bots/${botId}/checkpoints/${checkpointId}/restore`).catch(() => undefined);
      expect((await server.exited).signal).toBe("SIGKILL");

      server = await spawnServer(tmp.dir, { DRYDOCK_TOKEN: "t".repeat(32) });
      const again = api(server.url, server.token);
      // A scrape counts the open item itself: an alert must not wait for someone to GET /v1/recovery.
      expect((await again("GET", "/metrics")).text).toMatch(/^drydock_recovery_items_open 1$/m);
      const recovery = (await again("GET", "/v1/recovery")).json;
      expect(recovery.open).toBe(1);
      expect(recovery.complete).toBe(true);
      expect(recovery.restores).toHaveLength(1);
      const [item] = recovery.restores;
      expect(item).toMatchObject({
        botId,
        phase: "completed",
        diagnostic: "terminal_unarchived",
        ownerAlive: false,
        next: "release",
        attention: true,
        problem: null,
      });
      // The same fence `drydock restores show` prints, from the recovery controller's preview.
      const preview = await createRestoreRecoveryController({
        dataDir: tmp.dir,
        workspaceRoot: join(tmp.dir, "workspaces", botId),
      }).preview(item.operationId);
      expect(item.command).toBe(
        `drydock --data-dir ${tmp.dir} restores release ${item.operationId} --expected-seq ${preview.fence.expectedSeq} --expected-hash ${preview.fence.expectedHash} --expected-owner-digest ${preview.fence.expectedOwnerDigest} --yes`,
      );
      expect(JSON.stringify(recovery)).not.toContain(server.token);
      const metrics = (await again("GET", "/metrics")).text;
      expect(metrics).toMatch(/^drydock_recovery_items_open 1$/m);

      // A new restore is blocked by the dead one's lock: the body says recovery is required and names it.
      const blocked = await again("POST", `/v1/bots/${botId}/checkpoints/${checkpointId}/restore`);
      expect(blocked.status).toBe(409);
      expect(blocked.json.error.code).toBe("recovery_required");
      expect(blocked.json.error.details).toEqual({
        recoveryRequired: true,
        operationId: item.operationId,
        blockingOperationId: item.operationId,
      });
    } finally {
      server.kill();
      tmp.cleanup();
    }
  });
});

let server: RunningServer;
const tmp = inProcessServer("recovery-route", (started) => {
  server = started;
});

async function armFault(rules: unknown[]): Promise<void> {
  const sim = server.simulator;
  if (!sim) throw new Error("the test server runs the embedded simulator");
  const armed = await fetch(`${sim.url}/_sim/faults`, {
    method: "POST",
    headers: { authorization: `Bearer ${sim.token}`, "content-type": "application/json" },
    body: JSON.stringify({ rules }),
  });
  expect(armed.status).toBe(200);
}

describe("GET /v1/recovery with more open restores than one page of the saga store", () => {
  it("lists every one of them (65 > the store's page of 64) and counts them all in the gauge", async () => {
    const call = api(server.url, server.token);
    expect((await call("POST", "/v1/bots", { name: "Many", botId: "many" })).status).toBe(201);
    const store = openSagaStore({
      stateDir: sagaStateDir(tmp.dir),
      workspaceRoot: join(tmp.dir, "workspaces", "many"),
    });
    const ids = Array.from({ length: 65 }, (_, i) => `op-${String(i).padStart(3, "0")}`);
    for (const id of ids) {
      await store.create(id, {
        kind: "checkpoint-restore",
        checkpointId: "ckpt-1",
        checkpointManifestDigest: `sha256:${"a".repeat(64)}`,
        actorPid: 2 ** 22 + 1,
      });
    }
    const res = await call("GET", "/v1/recovery");
    expect(res.status).toBe(200);
    const mine = (res.json.restores as { botId: string; operationId: string }[]).filter(
      (r) => r.botId === "many",
    );
    expect(mine.map((r) => r.operationId)).toEqual(ids);
    expect(res.json.open).toBeGreaterThanOrEqual(65);
    const gauge = /^drydock_recovery_items_open (\d+)$/m.exec((await call("GET", "/metrics")).text)?.[1];
    expect(Number(gauge)).toBe(res.json.open);
  });
});

describe("GET /v1/recovery when a journal cannot be read", () => {
  it("still answers 200 with the restores it can read, and names what it could not read", async () => {
    const call = api(server.url, server.token);
    const journal = join(tmp.dir, "box-create-requests.json");
    const original = existsSync(journal) ? readFileSync(journal) : null;
    writeFileSync(journal, "{ not json");
    try {
      const res = await call("GET", "/v1/recovery");
      expect(res.status).toBe(200);
      expect(res.json.complete).toBe(false);
      expect(res.json.unreadable).toEqual([expect.objectContaining({ area: "boats", subject: "journals" })]);
      expect(res.json.open).toBeGreaterThanOrEqual(1);
      expect(Array.isArray(res.json.restores)).toBe(true);
    } finally {
      if (original === null) rmSync(journal);
      else writeFileSync(journal, original);
    }
  });
});

describe("GET /v1/recovery when boat.dev cannot read a journaled Boat", () => {
  it("is incomplete and names the Boat, as drydock status is INCOMPLETE for it", async () => {
    const { call, boxId } = await botWithComputer("unread");
    expect((await call("GET", "/v1/recovery")).json.unreadable).toEqual([]);
    await armFault([{ action: "fail-before", method: "GET", path: `^/sandboxes/${boxId}$`, times: 1_000 }]);
    try {
      const res = await call("GET", "/v1/recovery");
      expect(res.status).toBe(200);
      expect(res.json.complete).toBe(false);
      expect(res.json.unreadable).toEqual([
        expect.objectContaining({
          area: "boats",
          subject: boxId,
          message: expect.stringContaining(`boat.dev could not read Boat ${boxId} (bot unread)`),
        }),
      ]);
      expect(res.json.open).toBeGreaterThanOrEqual(1);
    } finally {
      await fetch(`${server.simulator!.url}/_sim/faults`, {
        method: "DELETE",
        headers: { authorization: `Bearer ${server.simulator!.token}` },
      });
    }
  });
});

describe("a restore refused because another restore is running", () => {
  it("answers 409 WORKSPACE_LOCKED with recoveryRequired: false and the running operation's id", async () => {
    const call = api(server.url, server.token);
    expect((await call("POST", "/v1/bots", { name: "Held", botId: "held" })).status).toBe(201);
    expect((await call("PUT", "/v1/bots/held/files/a.txt", "x")).status).toBe(201);
    const checkpointId = (await call("POST", "/v1/bots/held/checkpoints")).json.checkpoint.checkpointId;
    const held = await acquireWorkspaceLock({
      dataDir: tmp.dir,
      workspaceRoot: join(tmp.dir, "workspaces", "held"),
      transactionId: "restore-running-elsewhere",
    });
    try {
      const res = await call("POST", `/v1/bots/held/checkpoints/${checkpointId}/restore`);
      expect(res.status).toBe(409);
      expect(res.json.error.code).toBe("workspace_locked");
      expect(res.json.error.details).toEqual({
        recoveryRequired: false,
        operationId: "restore-running-elsewhere",
        blockingOperationId: "restore-running-elsewhere",
      });
    } finally {
      held.release();
    }
    const missing = await call("POST", "/v1/bots/held/checkpoints/nope/restore");
    expect(missing.status).toBe(404);
    expect(missing.json.error.details).toEqual({ recoveryRequired: false });
  });
});

describe("DELETE /v1/bots/:botId while a restore of its workspace runs", () => {
  it("answers 409 restore_running with recoveryRequired: false (a wait, nothing for a person); the bot is kept", async () => {
    const call = api(server.url, server.token);
    expect((await call("POST", "/v1/bots", { name: "Busy", botId: "busy-restore" })).status).toBe(201);
    expect((await call("PUT", "/v1/bots/busy-restore/files/a.txt", "x")).status).toBe(201);
    const workspaceRoot = join(tmp.dir, "workspaces", "busy-restore");
    const store = openSagaStore({ stateDir: sagaStateDir(tmp.dir), workspaceRoot });
    const operationId = "restore-running-now";
    // A restore this (live) process runs: its saga past `locked`, the workspace lock held for it.
    const held = await acquireWorkspaceLock({ dataDir: tmp.dir, workspaceRoot, transactionId: operationId });
    try {
      const created = await store.create(operationId, {
        kind: "checkpoint-restore",
        checkpointId: "ckpt-1",
        checkpointManifestDigest: `sha256:${"a".repeat(64)}`,
        actorPid: process.pid,
      });
      await store.advance(operationId, {
        expectedSeq: created.seq,
        expectedHash: created.headHash,
        phase: "locked",
        evidence: { workspaceLockOwner: held.owner, lockOwnerDigest: held.ownerDigest },
      });
      const refused = await call("DELETE", "/v1/bots/busy-restore");
      expect(refused.status).toBe(409);
      expect(refused.json.error.code).toBe("restore_running");
      expect(refused.json.error.details).toEqual({ recoveryRequired: false, operationId });
      expect(refused.json.error.message).toContain(`(process ${process.pid}), so the bot was kept`);
      expect(refused.json.error.message).toContain("Retry once it has finished");
      expect((await call("GET", "/v1/bots/busy-restore")).status).toBe(200);
      // Its files are a mix until it ends: a read waits too, and says so.
      const read = await call("GET", "/v1/bots/busy-restore/files/a.txt");
      expect(read.status).toBe(409);
      expect(read.json.error.code).toBe("restore_running");
      expect(read.json.error.details).toEqual({ recoveryRequired: false, operationId });
      const write = await call("PUT", "/v1/bots/busy-restore/files/a.txt", "y");
      expect(write.status).toBe(409);
      expect(write.json.error.code).toBe("workspace_locked");
      expect(write.json.error.details).toEqual({ recoveryRequired: false, operationId });
      // It is no item for a person either.
      const item = (await call("GET", "/v1/recovery")).json.restores.find(
        (r: { operationId: string }) => r.operationId === operationId,
      );
      expect(item).toMatchObject({ attention: false, ownerAlive: true });
    } finally {
      held.release();
    }
  });
});

describe("DELETE /v1/bots/:botId while a restore of its workspace is starting (created, not yet locked)", () => {
  it("is a wait while the process that created it lives, and a person's once it is gone", async () => {
    const call = api(server.url, server.token);
    for (const [botId, actorPid, code] of [
      ["starting-live", process.pid, "restore_running"],
      ["starting-dead", deadPid(), "restore_unsettled"],
    ] as const) {
      expect((await call("POST", "/v1/bots", { name: botId, botId })).status).toBe(201);
      expect((await call("PUT", `/v1/bots/${botId}/files/a.txt`, "x")).status).toBe(201);
      const workspaceRoot = join(tmp.dir, "workspaces", botId);
      const store = openSagaStore({ stateDir: sagaStateDir(tmp.dir), workspaceRoot });
      // What a restore leaves between creating its saga and taking the workspace lock.
      await store.create(`restore-${botId}`, {
        kind: "checkpoint-restore",
        checkpointId: "ckpt-1",
        checkpointManifestDigest: `sha256:${"a".repeat(64)}`,
        actorPid,
      });
      const refused = await call("DELETE", `/v1/bots/${botId}`);
      expect(refused.status).toBe(409);
      expect(refused.json.error.code).toBe(code);
      expect(refused.json.error.details.recoveryRequired).toBe(code === "restore_unsettled");
      if (code === "restore_running")
        expect(refused.json.error.message).toContain(`(process ${process.pid})`);
      expect((await call("GET", `/v1/bots/${botId}`)).status).toBe(200);
    }
  });
});

function deadPid(): number {
  const child = spawnSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"], {
    encoding: "utf8",
  });
  return Number(child.stdout);
}

/** A new bot `botId` with a computer, on the shared test server: its simulator, and the Boat's id and name. */
async function botWithComputer(botId: string) {
  const call = api(server.url, server.token);
  const sim = server.simulator;
  if (!sim) throw new Error("the test server runs the embedded simulator");
  expect((await call("POST", "/v1/bots", { name: botId, botId })).status).toBe(201);
  const created = await call("POST", `/v1/bots/${botId}/computer`);
  expect(created.status).toBe(201);
  const { boxId, name } = created.json.computer as { boxId: string; name: string };
  return { call, sim, boxId, name };
}

/** DELETE /v1/bots/:botId with the Boat's name: one DELETE sent, the Boat gone, then the bot. */
async function deleteBotConfirmed(
  { call, sim, name }: Awaited<ReturnType<typeof botWithComputer>>,
  botId: string,
  before: ReturnType<NonNullable<RunningServer["simulator"]>["stats"]>,
): Promise<void> {
  const confirmed = await call("DELETE", `/v1/bots/${botId}`, { confirmName: name });
  expect(confirmed.status).toBe(200);
  expect(sim.stats().deleteRequests).toBe(before.deleteRequests + 1);
  expect(sim.stats().live).toBe(before.live - 1);
  expect((await call("GET", `/v1/bots/${botId}`)).status).toBe(404);
}

describe("DELETE /v1/bots/:botId while the bot has a live Boat", () => {
  it("refuses without { confirmName } or with a wrong one, sending no DELETE to boat.dev; deletes with it", async () => {
    const made = await botWithComputer("live");
    const { call, sim, boxId } = made;
    const before = sim.stats();

    const bare = await call("DELETE", "/v1/bots/live");
    expect(bare.status).toBe(409);
    expect(bare.json.error.code).toBe("confirmation_required");
    expect(bare.json.error.message).toContain("confirmName");
    expect(bare.json.error.message).toContain("/v1/bots/live/computer");
    const wrong = await call("DELETE", "/v1/bots/live", { confirmName: "not-its-name" });
    expect(wrong.status).toBe(409);
    expect(wrong.json.error.code).toBe("confirmation_mismatch");
    expect(sim.stats().deleteRequests).toBe(before.deleteRequests);
    expect(sim.stats().live).toBe(before.live);
    expect((await call("GET", "/v1/bots/live")).status).toBe(200);
    expect((await call("GET", "/v1/bots/live/computer")).json.computer).toMatchObject({
      status: "ready",
      boxId,
    });

    await deleteBotConfirmed(made, "live", before);
  });

  it("a deletion boat.dev refused (sandbox_busy) is 409 deletion_blocked with the way out, never 'still finishing'", async () => {
    const { call, sim, boxId, name } = await botWithComputer("busy");
    const setBusy = (busy: boolean) =>
      fetch(`${sim.url}/_sim/sandboxes/${boxId}`, {
        method: "PATCH",
        headers: { authorization: `Bearer ${sim.token}`, "content-type": "application/json" },
        body: JSON.stringify({ busy }),
      });
    expect((await setBusy(true)).ok).toBe(true);
    expect((await call("DELETE", "/v1/bots/busy/computer", { confirmName: name })).status).toBe(409);
    expect((await setBusy(false)).ok).toBe(true);
    for (let i = 0; i < 2; i += 1) {
      const answer = await call("DELETE", "/v1/bots/busy", { confirmName: name });
      expect(answer.status).toBe(409);
      expect(answer.json.error.code).toBe("deletion_blocked");
      expect(answer.json.error.message).toContain("/v1/bots/busy/computer");
      expect(answer.json.error.message).not.toMatch(/still finishing/);
    }
    // The way out it names works: retry the computer's deletion, then delete the bot.
    expect((await call("DELETE", "/v1/bots/busy/computer", { confirmName: name })).status).toBe(200);
    expect((await call("DELETE", "/v1/bots/busy")).status).toBe(200);
    expect((await call("GET", "/v1/bots/busy")).status).toBe(404);
  });

  it("finds a live Boat carrying the bot's name that no journal knows, and deletes the bot only with it confirmed", async () => {
    // The journal forgot the Boat (a data directory restored from an older backup): boat.dev still bills
    // it, under the bot's deterministic name.
    const made = await botWithComputer("fay");
    const { call, sim, boxId, name } = made;
    await openBoatCreateJournal({ dataDir: tmp.dir }).retireDeletedBoatCreate(boxId);
    const before = sim.stats();

    const bare = await call("DELETE", "/v1/bots/fay");
    expect(bare.status).toBe(409);
    expect(bare.json.error.code).toBe("confirmation_required");
    expect(bare.json.error.details).toEqual({ boxId, name });
    expect(sim.stats().deleteRequests).toBe(before.deleteRequests);
    expect((await call("GET", "/v1/bots/fay")).status).toBe(200);

    await deleteBotConfirmed(made, "fay", before);
  });

  it("keeps a bot without a remembered Boat while boat.dev cannot be asked for one (503), and deletes it after", async () => {
    // Whether boat.dev holds a Boat under the bot's names is known once the name sweep (decision 0029)
    // has read boat.dev's list to the end: a server whose list fails from its start cannot know it.
    const own = tempDir("gil");
    const sim = await startBoatSimulator({ provisionMs: 0 });
    const listFails = {
      action: "fail-before",
      method: "GET",
      path: "^/sandboxes$",
      status: 503,
      times: 1_000,
    };
    const faults = (method: string, body?: unknown) =>
      fetch(`${sim.url}/_sim/faults`, {
        method,
        headers: { authorization: `Bearer ${sim.token}`, "content-type": "application/json" },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    expect((await faults("POST", { rules: [listFails] })).status).toBe(200);
    const gilServer = await startServer(
      loadConfig({
        DRYDOCK_DATA_DIR: own.dir,
        PORT: "0",
        LOG_LEVEL: "silent",
        BOAT_API_URL: sim.apiUrl,
        BOAT_API_TOKEN: sim.token,
      }),
      { print: () => {} },
    );
    try {
      await gilServer.startup;
      const call = api(gilServer.url, gilServer.token);
      expect((await call("POST", "/v1/bots", { name: "Gil", botId: "gil" })).status).toBe(201);
      const refused = await call("DELETE", "/v1/bots/gil");
      expect(refused.status).toBe(503);
      expect(refused.json.error.message).toContain("a retry continues from where it stopped");
      expect((await call("GET", "/v1/bots/gil")).status).toBe(200);
      expect((await faults("DELETE")).status).toBe(200);
      expect((await call("DELETE", "/v1/bots/gil")).status).toBe(200);
      expect((await call("GET", "/v1/bots/gil")).status).toBe(404);
    } finally {
      await gilServer.close();
      await sim.close();
      own.cleanup();
    }
  });

  it("deletes a bot that never had a Boat without any body", async () => {
    const call = api(server.url, server.token);
    expect((await call("POST", "/v1/bots", { name: "Bare", botId: "bare" })).status).toBe(201);
    expect((await call("DELETE", "/v1/bots/bare")).status).toBe(200);
    expect((await call("GET", "/v1/bots/bare")).status).toBe(404);
  });
});

describe("POST /v1/bots/:botId/computer while the previous Boat's deletion needs a person", () => {
  it("sends no DELETE of its own: 409 names the Boat and the Delete to send (blocked, or never confirmed)", async () => {
    const call = api(server.url, server.token);
    const sim = server.simulator!;
    expect((await call("POST", "/v1/bots", { name: "Kay", botId: "kay" })).status).toBe(201);
    const boat = (await call("POST", "/v1/bots/kay/computer")).json.computer;
    await armFault([{ action: "block-deletion", times: 1 }]);
    const blocked = await call("DELETE", "/v1/bots/kay/computer", { confirmName: boat.name });
    expect(blocked.status).toBe(409);
    expect(blocked.json.error.code).toBe("deletion_blocked");
    const before = sim.stats();
    const refused = await call("POST", "/v1/bots/kay/computer");
    expect(refused.status).toBe(409);
    expect(refused.json.error.code).toBe("deletion_blocked");
    expect(refused.json.error.details).toEqual({ boxId: boat.boxId, name: boat.name });
    expect(refused.json.error.message).toContain(
      `DELETE /v1/bots/kay/computer with { "confirmName": "${boat.name}" }`,
    );
    expect(sim.stats().deleteRequests).toBe(before.deleteRequests);
    expect(sim.stats().live).toBe(before.live);
    // The way it names: the Delete, with the name; then the create makes a new computer.
    expect((await call("DELETE", "/v1/bots/kay/computer", { confirmName: boat.name })).status).toBe(200);
    const again = await call("POST", "/v1/bots/kay/computer");
    expect(again.status).toBe(201);
    expect(again.json.computer.boxId).not.toBe(boat.boxId);

    // A deletion a stopped server never saw confirmed (prepared 31 s ago): the same, as confirmation_required.
    const second = again.json.computer;
    await openBoatDeleteJournal({ dataDir: tmp.dir, now: () => Date.now() - 31_000 }).prepareBoatDeletion({
      boxId: second.boxId,
      name: second.name,
      ownerBotId: "kay",
    });
    const deletesBefore = sim.stats().deleteRequests;
    const asked = await call("POST", "/v1/bots/kay/computer");
    expect(asked.status).toBe(409);
    expect(asked.json.error.code).toBe("confirmation_required");
    expect(asked.json.error.details).toEqual({ boxId: second.boxId, name: second.name });
    expect(sim.stats().deleteRequests).toBe(deletesBefore);
    expect((await call("DELETE", "/v1/bots/kay/computer", { confirmName: second.name })).status).toBe(200);
  });
});

describe("POST /v1/bots/:botId/computer with a deletion fence crossing its in-flight window meanwhile", () => {
  it("sends no DELETE even when the fence ages past the window while the create reads boat.dev", async () => {
    const call = api(server.url, server.token);
    const sim = server.simulator!;
    expect((await call("POST", "/v1/bots", { name: "Tic", botId: "tic" })).status).toBe(201);
    const boat = (await call("POST", "/v1/bots/tic/computer")).json.computer;
    // Prepared 29 s ago: inside the 30 s window when the create checks it, past it once boat.dev's slow read
    // of the Boat (1.5 s) has answered.
    await openBoatDeleteJournal({ dataDir: tmp.dir, now: () => Date.now() - 29_000 }).prepareBoatDeletion({
      boxId: boat.boxId,
      name: boat.name,
      ownerBotId: "tic",
    });
    await armFault([
      { method: "GET", path: `^/sandboxes/${boat.boxId}$`, action: "delay", ms: 1_500, times: 2 },
    ]);
    const before = sim.stats().deleteRequests;
    const answer = await call("POST", "/v1/bots/tic/computer");
    expect(answer.status, JSON.stringify(answer.json)).toBe(409);
    expect(["computer_deleting", "confirmation_required"]).toContain(answer.json.error.code);
    expect(sim.stats().deleteRequests).toBe(before);
    // The person's Delete, with the name, finishes it.
    expect((await call("DELETE", "/v1/bots/tic/computer", { confirmName: boat.name })).status).toBe(200);
  });
});

describe("a deletion whose DELETE boat.dev never confirmed, left by a stopped server", () => {
  it("the computer needs attention, DELETE of the bot asks for the name, and with it sends the DELETE again", async () => {
    const call = api(server.url, server.token);
    expect((await call("POST", "/v1/bots", { name: "Rex", botId: "rex" })).status).toBe(201);
    const boat = (await call("POST", "/v1/bots/rex/computer")).json.computer;
    // As a server SIGKILLed while its DELETE was on the wire leaves it: prepared, no receipt, 31 s ago.
    await openBoatDeleteJournal({ dataDir: tmp.dir, now: () => Date.now() - 31_000 }).prepareBoatDeletion({
      boxId: boat.boxId,
      name: boat.name,
      ownerBotId: "rex",
    });
    const view = (await call("GET", "/v1/bots/rex/computer")).json.computer;
    expect(view).toMatchObject({ status: "needs_attention", boxId: boat.boxId });
    expect(view.problem).toContain(`DELETE /v1/bots/rex/computer with { "confirmName": "${boat.name}" }`);
    const before = server.simulator!.stats().deleteRequests;

    // No body and an empty one are the same question: which name?
    for (const body of [undefined, {}]) {
      const asked = await call("DELETE", "/v1/bots/rex", body);
      expect(asked.status).toBe(409);
      expect(asked.json.error.code).toBe("confirmation_required");
      expect(asked.json.error.details).toEqual({ boxId: boat.boxId, name: boat.name });
    }
    expect(server.simulator!.stats().deleteRequests).toBe(before);

    const deleted = await call("DELETE", "/v1/bots/rex", { confirmName: boat.name });
    expect(deleted.status).toBe(200);
    expect(deleted.json).toMatchObject({ ok: true, workspaceRetired: true });
    expect(server.simulator!.stats().deleteRequests).toBe(before + 1);
    expect((await call("GET", "/v1/bots/rex")).status).toBe(404);
  });
});

describe("drydock_provider_retries_total", () => {
  it("counts a create retried with the same key after boat.dev answered 503", async () => {
    const call = api(server.url, server.token);
    const retries = async () => {
      const text = (await call("GET", "/metrics")).text;
      return Number(/^drydock_provider_retries_total (\d+)$/m.exec(text)?.[1]);
    };
    const before = await retries();
    expect((await call("POST", "/v1/bots", { name: "Retry", botId: "retry" })).status).toBe(201);
    await armFault([{ action: "fail-before", method: "POST", path: "/sandboxes$", status: 503, times: 1 }]);
    const created = await call("POST", "/v1/bots/retry/computer");
    expect(created.status).toBe(201);
    expect(server.simulator?.stats().createsCommitted).toBeGreaterThan(0);
    expect(await retries()).toBe(before + 1);
  });
});

/**
 * A server whose restores fail at `point` (in this process, once armed) after a bot `botId` got a file
 * "a.txt" written twice with a checkpoint in between: the restore of `checkpointId` is then ready to fail.
 */
async function serverWithFailingRestore(label: string, botId: string, point: string) {
  return serverWithRestoreHook(label, botId, (name) => {
    if (name === point) throw new Error("test: injected failure");
  });
}

/** The same server and bot, with `hook` called at every restore crash point once armed. */
async function serverWithRestoreHook(
  label: string,
  botId: string,
  hook: (point: string, dataDir: string) => void,
) {
  const dir = tempDir(label);
  let armed = false;
  const server = await startServer(
    loadConfig({ DRYDOCK_DATA_DIR: dir.dir, PORT: "0", LOG_LEVEL: "silent" }),
    {
      print: () => {},
      crash: {
        restore: {
          point(name: string) {
            if (armed) hook(name, dir.dir);
          },
        },
      },
    },
  );
  await server.startup;
  const call = api(server.url, server.token);
  expect((await call("POST", "/v1/bots", { name: botId, botId })).status).toBe(201);
  expect((await call("PUT", `/v1/bots/${botId}/files/a.txt`, "v1")).status).toBe(201);
  const checkpointId = (await call("POST", `/v1/bots/${botId}/checkpoints`)).json.checkpoint.checkpointId;
  expect((await call("PUT", `/v1/bots/${botId}/files/a.txt`, "v2")).status).toBe(201);
  armed = true;
  return {
    dir,
    call,
    checkpointId: checkpointId as string,
    async close() {
      await server.close();
      dir.cleanup();
    },
  };
}

describe("a restore that fails after its intent in this process", () => {
  it("answers 503 restore_recovery_required with recoveryRequired: true and its own operation id", async () => {
    const failing = await serverWithFailingRestore(
      "recovery-failed",
      "fails",
      "restore.after-intent-committed",
    );
    const { call, checkpointId } = failing;
    try {
      const res = await call("POST", `/v1/bots/fails/checkpoints/${checkpointId}/restore`);
      expect(res.status).toBe(503);
      expect(res.json.error.code).toBe("restore_recovery_required");
      expect(res.json.error.details.recoveryRequired).toBe(true);
      const { operationId } = res.json.error.details;
      expect(operationId).toMatch(/^restore-/);
      // The command names this data directory, so pasting it reads this installation.
      expect(res.json.error.message).toContain(`drydock --data-dir <dataDir> restores show ${operationId}`);
      // The same operation is what GET /v1/recovery lists for a person: this server keeps its lock and will
      // not settle it, so it needs one (it is no "work in progress").
      const recovery = (await call("GET", "/v1/recovery")).json;
      const listed = recovery.restores;
      expect(listed.map((r: { operationId: string }) => r.operationId)).toEqual([operationId]);
      expect(listed[0]).toMatchObject({ attention: true, retainedByLiveOwner: { pid: process.pid } });
      expect(recovery.open).toBe(1);

      // The bot cannot be deleted from under its half-restored workspace: the restore, and the fenced
      // recovery that settles it, would vanish from GET /v1/restores/:id with the bot.
      const refused = await call("DELETE", "/v1/bots/fails");
      expect(refused.status).toBe(409);
      expect(refused.json.error.code).toBe("restore_unsettled");
      expect(refused.json.error.details).toMatchObject({ recoveryRequired: true, operationId });
      expect(refused.json.error.message).toContain(
        `drydock --data-dir <dataDir> restores show ${operationId}`,
      );
      expect((await call("GET", "/v1/bots/fails")).status).toBe(200);
      expect((await call("GET", `/v1/restores/${operationId}`)).json.restore.operationId).toBe(operationId);
      // Nor are its files served as if nothing were wrong: they may be half restored.
      const read = await call("GET", "/v1/bots/fails/files/a.txt");
      expect(read.status).toBe(409);
      expect(read.json.error.code).toBe("restore_unsettled");
      expect(read.json.error.details).toEqual({ recoveryRequired: true, operationId });
      expect(read.json.error.message).toContain(`restores show ${operationId}`);
      // An edit is refused by the restore's lock: named the same way, with the restore to act on.
      const write = await call("PUT", "/v1/bots/fails/files/a.txt", "v3");
      expect(write.status).toBe(409);
      expect(write.json.error.details).toMatchObject({ recoveryRequired: true, operationId });
      expect(write.json.error.message).toContain(`restores show ${operationId}`);
    } finally {
      await failing.close();
    }
  });
});

describe("a restore stopped half-way whose workspace lock is gone", () => {
  it("refuses file writes, deletions and checkpoints with 409 restore_unsettled: the saga is the evidence", async () => {
    const failing = await serverWithFailingRestore(
      "recovery-lockless",
      "lockless",
      "restore.after-mutation-started",
    );
    const { call, checkpointId, dir } = failing;
    try {
      const res = await call("POST", `/v1/bots/lockless/checkpoints/${checkpointId}/restore`);
      expect(res.json.error.code).toBe("restore_recovery_required");
      const { operationId } = res.json.error.details;
      // The lock the failed restore kept is lost (removed by hand, or with a disk).
      const locks = join(dir.dir, "locks");
      const lockFiles = readdirSync(locks).filter((name) => /^ws-[0-9a-f]{64}\.lock$/.test(name));
      expect(lockFiles).toHaveLength(1);
      rmSync(join(locks, lockFiles[0]!));

      for (const [method, path, body] of [
        ["PUT", "/v1/bots/lockless/files/a.txt", "written after the stop"],
        ["PUT", "/v1/bots/lockless/files/new.txt", "new"],
        ["DELETE", "/v1/bots/lockless/files/a.txt", undefined],
        ["POST", "/v1/bots/lockless/checkpoints", undefined],
      ] as const) {
        const refused = await call(method, path, body);
        expect(refused.status, `${method} ${path}`).toBe(409);
        expect(refused.json.error.code).toBe("restore_unsettled");
        expect(refused.json.error.details).toMatchObject({ recoveryRequired: true, operationId });
        expect(refused.json.error.message).toContain("so nothing was changed");
      }
      // Reads too: the saga is the evidence that the files may be half restored.
      const read = await call("GET", "/v1/bots/lockless/files/a.txt");
      expect(read.status).toBe(409);
      expect(read.json.error.code).toBe("restore_unsettled");
      expect(read.json.error.details).toMatchObject({ recoveryRequired: true, operationId });
      expect(read.json.error.message).toContain("so nothing was read");
      expect(readFileSync(join(dir.dir, "workspaces", "lockless", "a.txt"), "utf8")).toBe("v2");
      expect(existsSync(join(dir.dir, "workspaces", "lockless", "new.txt"))).toBe(false);
    } finally {
      await failing.close();
    }
  });
});

describe("a restore with nothing to change killed after `workspace_applied` (server restarted)", () => {
  it("GET /v1/recovery offers the fenced `complete`, and that command settles it", async () => {
    const tmp = tempDir("recovery-complete");
    const botId = "zero";
    let server = await spawnServer(tmp.dir, {
      DRYDOCK_CRASH_POINT: "restore.after-workspace-applied",
      DRYDOCK_TOKEN: "z".repeat(32),
    });
    try {
      const call = api(server.url, server.token);
      expect((await call("POST", "/v1/bots", { name: "z", botId })).status).toBe(201);
      expect((await call("PUT", `/v1/bots/${botId}/files/a.txt`, "same")).status).toBe(201);
      const checkpointId = (await call("POST", `/v1/bots/${botId}/checkpoints`)).json.checkpoint
        .checkpointId as string;
      await call("POST", `/v1/bots/${botId}/checkpoints/${checkpointId}/restore`).catch(() => undefined);
      expect((await server.exited).signal).toBe("SIGKILL");

      server = await spawnServer(tmp.dir, { DRYDOCK_TOKEN: "z".repeat(32) });
      const again = api(server.url, server.token);
      const recovery = (await again("GET", "/v1/recovery")).json;
      expect(recovery.restores).toHaveLength(1);
      const [item] = recovery.restores;
      expect(item).toMatchObject({
        botId,
        phase: "workspace_applied",
        ownerAlive: false,
        next: "complete",
        attention: true,
        problem: null,
      });
      const controller = createRestoreRecoveryController({
        dataDir: tmp.dir,
        workspaceRoot: join(tmp.dir, "workspaces", botId),
      });
      const preview = await controller.preview(item.operationId);
      expect(item.command).toBe(
        `drydock --data-dir ${tmp.dir} restores complete ${item.operationId} --expected-seq ${preview.fence.expectedSeq} --expected-hash ${preview.fence.expectedHash} --expected-owner-digest ${preview.fence.expectedOwnerDigest} --yes`,
      );
      expect(await controller.complete(item.operationId, preview.fence)).toMatchObject({
        phase: "completed",
        archived: true,
      });
      expect((await again("GET", "/v1/recovery")).json.restores).toEqual([]);
      const next = await again("POST", `/v1/bots/${botId}/checkpoints/${checkpointId}/restore`);
      expect(next.status).toBe(200);
    } finally {
      server.kill();
      tmp.cleanup();
    }
  });
});

describe("a deleted bot's id", () => {
  it("retires the old bot's workspace and checkpoints (kept), so a new bot under the id starts empty", async () => {
    const dir = tempDir("deleted-bot");
    const start = () =>
      startServer(loadConfig({ DRYDOCK_DATA_DIR: dir.dir, PORT: "0", LOG_LEVEL: "silent" }), {
        print: () => {},
      });
    let server = await start();
    try {
      await server.startup;
      let call = api(server.url, server.token);
      expect((await call("POST", "/v1/bots", { name: "Old", botId: "reused" })).status).toBe(201);
      expect((await call("PUT", "/v1/bots/reused/files/secret.txt", "old bot's")).status).toBe(201);
      const checkpointId = (await call("POST", "/v1/bots/reused/checkpoints")).json.checkpoint.checkpointId;
      expect((await call("PUT", "/v1/bots/reused/files/secret.txt", "changed")).status).toBe(201);
      const restored = await call("POST", `/v1/bots/reused/checkpoints/${checkpointId}/restore`);
      expect(restored.status).toBe(200);
      // A settled restore does not hold the deletion back.
      expect((await call("DELETE", "/v1/bots/reused")).status).toBe(200);
      expect((await call("GET", "/v1/bots/reused")).status).toBe(404);

      // Kept, out of the way: the files under workspaces/.retired/, the two manifests (the checkpoint and
      // the restore's safety checkpoint) under checkpoints/retired/.
      const retiredDir = join(dir.dir, "workspaces", ".retired");
      const [moved, ...more] = readdirSync(retiredDir);
      expect(more).toEqual([]);
      expect(moved).toMatch(/^reused\.\d+\.[0-9a-f]{8}$/);
      expect(readFileSync(join(retiredDir, moved as string, "secret.txt"), "utf8")).toBe("old bot's");
      expect(existsSync(join(dir.dir, "workspaces", "reused"))).toBe(false);
      expect(readdirSync(join(dir.dir, "checkpoints", "retired"))).toHaveLength(2);
      // Its workspace is gone, so its settled restores are no longer served (they stay in the saga store).
      expect((await call("GET", `/v1/restores/${restored.json.operationId}`)).status).toBe(404);

      // Its restore sagas went with it, kept under restore-sagas/.retired/.
      const shards = readdirSync(join(dir.dir, "restore-sagas", ".retired"));
      expect(shards).toHaveLength(1);
      expect(shards[0]).toMatch(/^workspace-[0-9a-f]{32}\.\d+\.[0-9a-f]{8}$/);

      // A new bot under the old id starts empty: no file, no checkpoint, the old one cannot be restored,
      // and the old bot's restore is not listed as the new one's.
      expect((await call("POST", "/v1/bots", { name: "New", botId: "reused" })).status).toBe(201);
      expect((await call("GET", `/v1/restores/${restored.json.operationId}`)).status).toBe(404);
      expect((await call("GET", "/v1/bots/reused/files/secret.txt")).status).toBe(404);
      expect((await call("GET", "/v1/bots/reused/checkpoints")).json.checkpoints).toEqual([]);
      expect((await call("POST", `/v1/bots/reused/checkpoints/${checkpointId}/restore`)).status).toBe(404);

      // Leftovers of a deleted bot that were never retired (an older server; its directory even removed by
      // hand): the checkpoint is found by the path and retired when the id is taken again.
      expect((await call("POST", "/v1/bots", { name: "Legacy", botId: "legacy" })).status).toBe(201);
      expect((await call("PUT", "/v1/bots/legacy/files/k.txt", "legacy data")).status).toBe(201);
      const legacyCheckpoint = (await call("POST", "/v1/bots/legacy/checkpoints")).json.checkpoint
        .checkpointId;
      await server.close();
      const registry = JSON.parse(readFileSync(join(dir.dir, "bots.json"), "utf8"));
      registry.bots = registry.bots.filter((bot: { botId: string }) => bot.botId !== "legacy");
      writeFileSync(join(dir.dir, "bots.json"), `${JSON.stringify(registry, null, 2)}\n`);
      rmSync(join(dir.dir, "workspaces", "legacy"), { recursive: true });
      server = await start();
      await server.startup;
      call = api(server.url, server.token);
      expect((await call("POST", "/v1/bots", { name: "Legacy again", botId: "legacy" })).status).toBe(201);
      expect((await call("GET", "/v1/bots/legacy/checkpoints")).json.checkpoints).toEqual([]);
      expect((await call("POST", `/v1/bots/legacy/checkpoints/${legacyCheckpoint}/restore`)).status).toBe(
        404,
      );
      expect(readdirSync(join(dir.dir, "checkpoints", "retired"))).toContain(`${legacyCheckpoint}.json`);

      // A retirement that cannot run when the bot is deleted (a live edit holds the workspace) does not keep
      // the bot: it is finished when the id is taken again.
      expect((await call("POST", "/v1/bots", { name: "Busy", botId: "busy" })).status).toBe(201);
      expect((await call("PUT", "/v1/bots/busy/files/b.txt", "busy bot's")).status).toBe(201);
      const edit = await acquireWorkspaceLock({
        dataDir: dir.dir,
        workspaceRoot: join(dir.dir, "workspaces", "busy"),
        transactionId: "file-write-held-by-test",
        purpose: "workspace-edit",
      });
      try {
        const deleted = await call("DELETE", "/v1/bots/busy");
        expect(deleted.status).toBe(200);
        expect(deleted.json).toMatchObject({ ok: true, workspaceRetired: false });
        expect(deleted.json.warning).toMatch(
          /could not be retired yet.*DELETE \/v1\/bots\/busy is sent again/,
        );
        expect(deleted.json.warning).not.toContain(dir.dir);
      } finally {
        edit.release();
      }
      expect((await call("GET", "/v1/bots/busy")).status).toBe(404);
      expect(readFileSync(join(dir.dir, "workspaces", "busy", "b.txt"), "utf8")).toBe("busy bot's");
      // Sent again (a generated id is never taken again), DELETE finishes the retirement.
      expect((await call("DELETE", "/v1/bots/busy")).json).toEqual({ ok: true, workspaceRetired: true });
      expect(existsSync(join(dir.dir, "workspaces", "busy"))).toBe(false);
      expect((await call("DELETE", "/v1/bots/busy")).status).toBe(404);
      expect((await call("POST", "/v1/bots", { name: "Busy again", botId: "busy" })).status).toBe(201);
      expect((await call("GET", "/v1/bots/busy/files/b.txt")).status).toBe(404);

      // A retirement that stops after its first steps (here the checkpoints cannot be retired: a directory
      // sits where the first manifest would be) leaves leftovers the next DELETE finishes; the sagas, moved first,
      // never stop verifying against the recreated directory.
      expect((await call("POST", "/v1/bots", { name: "Cut", botId: "cut" })).status).toBe(201);
      expect((await call("PUT", "/v1/bots/cut/files/c.txt", "cut bot's")).status).toBe(201);
      const cutCheckpoint = (await call("POST", "/v1/bots/cut/checkpoints")).json.checkpoint.checkpointId;
      expect((await call("PUT", "/v1/bots/cut/files/c.txt", "changed")).status).toBe(201);
      expect((await call("POST", `/v1/bots/cut/checkpoints/${cutCheckpoint}/restore`)).status).toBe(200);
      // An ended restore whose archiving failed (a warning, not an error): it stays in the shard, bound to
      // the workspace directory it ran on.
      const shardStore = openSagaStore({
        stateDir: join(dir.dir, "restore-sagas"),
        workspaceRoot: join(dir.dir, "workspaces", "cut"),
      });
      const unarchived = `restore-${randomUUID()}`;
      const created = await shardStore.create(unarchived, {
        kind: "checkpoint-restore",
        checkpointId: cutCheckpoint,
        checkpointManifestDigest: `sha256:${"a".repeat(64)}`,
        actorPid: process.pid,
      });
      await shardStore.advance(unarchived, {
        expectedSeq: created.seq,
        expectedHash: created.headHash,
        phase: "aborted",
        evidence: { recoveryAction: "abort-before-lock", reason: "test: ended, not archived" },
      });
      const blocker = join(dir.dir, "checkpoints", "manifests", "ckpt--blocker.json");
      mkdirSync(blocker);
      const cut = await call("DELETE", "/v1/bots/cut");
      expect(cut.json).toMatchObject({ ok: true, workspaceRetired: false });
      rmdirSync(blocker);
      expect((await call("DELETE", "/v1/bots/cut")).json).toEqual({ ok: true, workspaceRetired: true });
      expect((await call("POST", "/v1/bots", { name: "Cut again", botId: "cut" })).status).toBe(201);
      expect((await call("GET", "/v1/bots/cut/checkpoints")).json.checkpoints).toEqual([]);

      // Cut short with only a checkpoint left that does not verify (a backup tool hard-linked its manifest):
      // it is never listed, yet it names the path and would be listed for the next bot once the link goes,
      // so the retry still sees it and retires it.
      expect((await call("POST", "/v1/bots", { name: "Linked", botId: "linked" })).status).toBe(201);
      expect((await call("PUT", "/v1/bots/linked/files/l.txt", "linked bot's")).status).toBe(201);
      const linkedCheckpoint = (await call("POST", "/v1/bots/linked/checkpoints")).json.checkpoint
        .checkpointId;
      const manifest = join(dir.dir, "checkpoints", "manifests", `${linkedCheckpoint}.json`);
      const backup = join(dir.dir, "backup-of-manifest.json");
      linkSync(manifest, backup);
      mkdirSync(blocker);
      const linkedCut = await call("DELETE", "/v1/bots/linked");
      expect(linkedCut.json).toMatchObject({ ok: true, workspaceRetired: false });
      rmdirSync(blocker);
      expect((await call("DELETE", "/v1/bots/linked")).json).toEqual({ ok: true, workspaceRetired: true });
      rmSync(backup);
      expect((await call("POST", "/v1/bots", { name: "Linked again", botId: "linked" })).status).toBe(201);
      expect((await call("GET", "/v1/bots/linked/checkpoints")).json.checkpoints).toEqual([]);
      expect((await call("POST", `/v1/bots/linked/checkpoints/${linkedCheckpoint}/restore`)).status).toBe(
        404,
      );
      expect(
        readdirSync(join(dir.dir, "workspaces", ".retired")).filter((name) => name.startsWith("busy.")),
      ).toHaveLength(1);

      // An edit that checked its bot, then waited for the workspace lock while the bot was deleted, does not
      // land in the deleted bot's workspace (nor, had the id been taken again, in the new bot's).
      expect((await call("POST", "/v1/bots", { name: "Late", botId: "late" })).status).toBe(201);
      expect((await call("PUT", "/v1/bots/late/files/first.txt", "first")).status).toBe(201);
      const hold = await acquireWorkspaceLock({
        dataDir: dir.dir,
        workspaceRoot: join(dir.dir, "workspaces", "late"),
        transactionId: "file-write-held-by-test-2",
        purpose: "workspace-edit",
      });
      let late: Promise<{ status: number; json: { error?: { code: string } } }>;
      let deleting: Promise<{ status: number }>;
      try {
        late = call("PUT", "/v1/bots/late/files/late.txt", "late write");
        await new Promise((resolve) => setTimeout(resolve, 200)); // the PUT is waiting for the lock now
        deleting = call("DELETE", "/v1/bots/late");
        // The bot goes first (its retirement then waits for the same lock).
        for (let i = 0; i < 50 && (await call("GET", "/v1/bots/late")).status !== 404; i += 1) {
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
      } finally {
        hold.release();
      }
      expect((await deleting).status).toBe(200);
      const answered = await late;
      expect(answered.status).toBe(404);
      expect(answered.json.error?.code).toBe("bot_not_found");
      expect(existsSync(join(dir.dir, "workspaces", "late", "late.txt"))).toBe(false);

      // A bot that never had data leaves nothing behind, not even an empty saga shard.
      const shardsBefore = readdirSync(join(dir.dir, "restore-sagas", ".retired")).length;
      expect((await call("POST", "/v1/bots", { name: "Empty", botId: "empty" })).status).toBe(201);
      expect((await call("DELETE", "/v1/bots/empty")).status).toBe(200);
      expect(existsSync(join(dir.dir, "workspaces", "empty"))).toBe(false);
      expect(readdirSync(join(dir.dir, "restore-sagas", ".retired"))).toHaveLength(shardsBefore);
      expect(
        readdirSync(join(dir.dir, "workspaces", ".retired")).some((name) => name.startsWith("empty.")),
      ).toBe(false);
    } finally {
      await server.close();
      dir.cleanup();
    }
  });
});

describe("/metrics while boat.dev does not answer", () => {
  it("answers within seconds with the last count, and scrapes share one recount (one connection to boat.dev)", async () => {
    const connections: Socket[] = [];
    const blackhole = createServer((socket) => {
      connections.push(socket); // accepted, never answered
    });
    await new Promise<void>((resolve) => blackhole.listen(0, "127.0.0.1", resolve));
    const port = (blackhole.address() as AddressInfo).port;
    const dir = tempDir("metrics-blackhole");
    const server = await startServer(
      loadConfig({
        DRYDOCK_DATA_DIR: dir.dir,
        PORT: "0",
        LOG_LEVEL: "silent",
        BOAT_API_URL: `http://127.0.0.1:${port}/api/v1`,
        BOAT_API_TOKEN: "t".repeat(32),
      }),
      { print: () => {} },
    );
    try {
      const call = api(server.url, server.token);
      // The name sweep's first list page (started by the startup recovery) holds one connection of its
      // own (decision 0029); the scrapes' share is counted from there.
      await vi.waitFor(() => expect(connections.length).toBe(1), { timeout: 5_000 });
      const before = connections.length;
      const started = performance.now();
      const scrapes = await Promise.all([
        call("GET", "/metrics"),
        call("GET", "/metrics"),
        call("GET", "/metrics"),
      ]);
      const took = performance.now() - started;
      for (const scrape of scrapes) {
        expect(scrape.status).toBe(200);
        expect(scrape.text).toMatch(/^drydock_recovery_items_open \d+$/m);
      }
      // The client's own timeout is 10 s: the scrapes did not wait for it.
      expect(took).toBeLessThan(6_000);
      expect(connections.length - before).toBeLessThanOrEqual(1);
      // A scrape right after starts no second recount while the first still hangs.
      expect((await call("GET", "/metrics")).status).toBe(200);
      expect(connections.length - before).toBeLessThanOrEqual(1);
    } finally {
      for (const socket of connections) socket.destroy();
      await server.close();
      await new Promise<void>((resolve) => blackhole.close(() => resolve()));
      dir.cleanup();
    }
  }, 30_000);
});

describe("the routes judge a fence's in-flight window on the Boat journals' clock, as the lifecycle does", () => {
  it("a fence 31 s old on that clock is unconfirmed for the view and the create, whatever the machine's clock says", async () => {
    const own = tempDir("boat-clock");
    // The journals' and lifecycle's clock runs a minute ahead of the machine's.
    const ahead = () => Date.now() + 60_000;
    const clocked = await startServer(
      loadConfig({ DRYDOCK_DATA_DIR: own.dir, PORT: "0", LOG_LEVEL: "silent" }),
      { print: () => {}, now: ahead },
    );
    try {
      await clocked.startup;
      const call = api(clocked.url, clocked.token);
      expect((await call("POST", "/v1/bots", { name: "Zed", botId: "zed" })).status).toBe(201);
      const boat = (await call("POST", "/v1/bots/zed/computer")).json.computer;
      await openBoatDeleteJournal({ dataDir: own.dir, now: () => ahead() - 31_000 }).prepareBoatDeletion({
        boxId: boat.boxId,
        name: boat.name,
        ownerBotId: "zed",
      });
      // On the machine's clock that fence was stamped 29 s in the future: "young". On the Boat clock it is
      // 31 s old: nothing sends its DELETE any more, a person's Delete must.
      const view = (await call("GET", "/v1/bots/zed/computer")).json.computer;
      expect(view).toMatchObject({ status: "needs_attention", boxId: boat.boxId, name: boat.name });
      const asked = await call("POST", "/v1/bots/zed/computer");
      expect(asked.status).toBe(409);
      expect(asked.json.error.code).toBe("confirmation_required");
    } finally {
      await clocked.close();
      own.cleanup();
    }
  });
});

describe("a data directory copied elsewhere while a restore had not settled", () => {
  it("the server on the copy refuses that bot's workspace (reads, edits, restores): restore_unsettled", async () => {
    const original = tempDir("stray-original");
    const copy = tempDir("stray-copy");
    try {
      // A half-restored workspace: a restore failed after its first change, in this (live) process.
      await openBotRegistry(original.dir).create({ botId: "bob", name: "Bob" });
      const ws = join(original.dir, "workspaces", "bob");
      mkdirSync(ws, { recursive: true });
      for (let i = 0; i < 5; i++) writeFileSync(join(ws, `f${i}.txt`), `v1 ${i}`);
      const { checkpointId } = await openCheckpointStore({ dataDir: original.dir }).createCheckpoint(ws);
      for (let i = 0; i < 5; i++) writeFileSync(join(ws, `f${i}.txt`), `v2 ${i}`);
      await expect(
        restoreCheckpoint({
          dataDir: original.dir,
          workspaceRoot: ws,
          checkpointId,
          crash: {
            point(name: string) {
              if (name === "restore.after-mutation-started") throw new Error("test: stopped half-way");
            },
          },
        }),
      ).rejects.toMatchObject({ code: "RECOVERY_REQUIRED" });
      cpSync(original.dir, copy.dir, { recursive: true });

      const server = await startServer(
        loadConfig({ DRYDOCK_DATA_DIR: copy.dir, PORT: "0", LOG_LEVEL: "silent" }),
        { print: () => {} },
      );
      try {
        await server.startup;
        const call = api(server.url, server.token);
        for (const [method, path, body] of [
          ["GET", "/v1/bots/bob/files/f0.txt", undefined],
          ["PUT", "/v1/bots/bob/files/f0.txt", "edited"],
          ["POST", "/v1/bots/bob/checkpoints", undefined],
          ["POST", `/v1/bots/bob/checkpoints/${checkpointId}/restore`, undefined],
        ] as const) {
          const refused = await call(method, path, body);
          expect(refused.status, `${method} ${path}: ${refused.text}`).toBe(409);
          expect(refused.json.error.code).toBe("restore_unsettled");
          expect(refused.json.error.details).toMatchObject({ recoveryRequired: true });
          expect(refused.json.error.message).toContain("moved or copied");
        }
        // Nothing was written into the copy's workspace.
        expect(readFileSync(join(copy.dir, "workspaces", "bob", "f0.txt"), "utf8")).not.toBe("edited");
        // And GET /v1/recovery reports it.
        const recovery = (await call("GET", "/v1/recovery")).json;
        expect(recovery.complete).toBe(false);
        expect(recovery.unreadable).toEqual([
          expect.objectContaining({
            area: "restores",
            subject: "bob",
            message: expect.stringContaining("moved or copied"),
          }),
        ]);
      } finally {
        await server.close();
      }
    } finally {
      original.cleanup();
      copy.cleanup();
    }
  });
});

describe("a restore whose bot is deleted and created again (by another server) while it starts", () => {
  it("answers 404 bot_not_found and restores nothing into the new bot's workspace", async () => {
    let replaced = false;
    const { call, checkpointId, close } = await serverWithRestoreHook(
      "restore-replaced-bot",
      "reborn",
      (point, dataDir) => {
        if (point !== "restore.after-created" || replaced) return;
        replaced = true;
        // What another server's DELETE /v1/bots/:botId and POST /v1/bots leave in the registry once the
        // checkpoint is read and before the restore holds the workspace: the id names a new bot.
        const file = join(dataDir, "bots.json");
        const doc = JSON.parse(readFileSync(file, "utf8"));
        for (const bot of doc.bots) if (bot.botId === "reborn") bot.createdAt += 1;
        writeFileSync(file, `${JSON.stringify(doc, null, 2)}\n`);
      },
    );
    try {
      const refused = await call("POST", `/v1/bots/reborn/checkpoints/${checkpointId}/restore`);
      expect(replaced).toBe(true);
      expect(refused.status).toBe(404);
      expect(refused.json.error.code).toBe("bot_not_found");
      expect(refused.json.error.message).toContain("nothing was restored");
      // The workspace still holds what was written after the checkpoint ("v1" is the checkpoint's).
      expect((await call("GET", "/v1/bots/reborn/files/a.txt")).text).toBe("v2");
      // Nothing is left to settle: the restore was aborted before its intent, its lock released.
      expect((await call("GET", "/v1/recovery")).json.open).toBe(0);
      expect((await call("PUT", "/v1/bots/reborn/files/other.txt", "x")).status).toBe(201);
    } finally {
      await close();
    }
  });
});
