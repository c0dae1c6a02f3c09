/**
 * The fenced recovery actions over HTTP (routes/recovery-actions.ts): a preview returns the fence and the
 * exact CLI command, an apply takes that fence back and goes through the recovery controller as the CLI
 * does, and a fence that went stale is refused with 409 state_changed saying what moved. Restores killed
 * mid-way by a real SIGKILL (crash points), Boats left as a stopped server leaves them.
 */

import { existsSync } from "node:fs";
import { join } from "node:path";
import { openBoatCreateJournal } from "@drydock/boat-create-journal";
import { openBoatDeleteJournal } from "@drydock/boat-delete-journal";
import { createRestoreRecoveryController } from "@drydock/recovery-controller";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningServer } from "../src/server.js";
import { type Api, api, inProcessServer, type ServerChild, spawnServer, tempDir } from "./helpers.js";

const TOKEN = "k".repeat(32);
/** A read-only token (DRYDOCK_TOKENS `dash:read:…`) of the restarted server: it may look, never apply. */
const READER = "r".repeat(32);

/**
 * A bot `botId` whose restore the server was SIGKILLed in, at `point` (the server is started with the crash
 * point, the restore kills it, and the process is gone): the restore is then a recovery item.
 */
async function killRestoreAt(dataDir: string, botId: string, point: string): Promise<void> {
  const crashing = await spawnServer(dataDir, { DRYDOCK_CRASH_POINT: point, DRYDOCK_TOKEN: TOKEN });
  try {
    const call = api(crashing.url, crashing.token);
    expect((await call("POST", "/v1/bots", { name: botId, botId })).status).toBe(201);
    expect((await call("PUT", `/v1/bots/${botId}/files/a.txt`, "v1")).status).toBe(201);
    const checkpointId = (await call("POST", `/v1/bots/${botId}/checkpoints`)).json.checkpoint.checkpointId;
    expect((await call("PUT", `/v1/bots/${botId}/files/a.txt`, "v2")).status).toBe(201);
    await call("POST", `/v1/bots/${botId}/checkpoints/${checkpointId}/restore`).catch(() => undefined);
    expect((await crashing.exited).signal).toBe("SIGKILL");
  } finally {
    crashing.kill();
  }
}

describe("restores killed mid-way (before any file changed), after a restart", () => {
  const tmp = tempDir("recovery-actions");
  let server: ServerChild;
  let call: Api;
  const items = new Map<string, { operationId: string; command: string }>();

  beforeAll(async () => {
    await killRestoreAt(tmp.dir, "alpha", "restore.after-locked");
    await killRestoreAt(tmp.dir, "beta", "restore.after-locked");
    server = await spawnServer(tmp.dir, { DRYDOCK_TOKEN: TOKEN, DRYDOCK_TOKENS: `dash:read:${READER}` });
    call = api(server.url, server.token);
    const recovery = (await call("GET", "/v1/recovery")).json;
    for (const item of recovery.restores) items.set(item.botId, item);
  });
  afterAll(() => {
    server?.kill();
    tmp.cleanup();
  });

  it("GET …/restores/:id shows the timeline, the dead owner, a verified chain and the same command as /v1/recovery", async () => {
    const { operationId, command } = items.get("alpha")!;
    expect(command).toContain(`restores abort ${operationId}`);
    const res = await call("GET", `/v1/recovery/restores/${operationId}`);
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ ok: true, botId: "alpha", chain: "verified" });
    expect(res.json.restore.saga.phase).toBe("locked");
    expect(res.json.restore.saga.events.map((e: { phase: string }) => e.phase)).toEqual([
      "created",
      "locked",
    ]);
    expect(res.json.restore.owner).toMatchObject({ alive: false });
    expect(res.json.restore.recommended).toBe("abort");
    expect(res.json.commands.abort).toBe(command);
    expect(res.json.commands.release).toBeNull();
    expect(JSON.stringify(res.json)).not.toContain(TOKEN);
  });

  it("refuses to apply without the token or with a wrong one, and changes nothing", async () => {
    const { operationId } = items.get("alpha")!;
    const preview = (await call("GET", `/v1/recovery/restores/${operationId}/abort`)).json;
    for (const token of [null, "w".repeat(32)]) {
      const refused = await api(server.url, token)("POST", `/v1/recovery/restores/${operationId}/abort`, {
        fence: preview.fence,
      });
      expect(refused.status).toBe(401);
      expect(refused.json.error.code).toBe("unauthorized");
    }
    // Previews need the token too: they show the fence.
    expect((await api(server.url, null)("GET", `/v1/recovery/restores/${operationId}/abort`)).status).toBe(
      401,
    );
    const again = (await call("GET", `/v1/recovery/restores/${operationId}/abort`)).json;
    expect(again.fence).toEqual(preview.fence);
  });

  it("a read token sees the previews but is refused 403 forbidden on every apply, and nothing changes", async () => {
    const { operationId } = items.get("alpha")!;
    const reader = api(server.url, READER);
    const detail = await reader("GET", `/v1/recovery/restores/${operationId}`);
    expect(detail.status).toBe(200);
    expect(detail.json.restore.saga.phase).toBe("locked");
    // A Boat item too: a DELETE a stopped server left on the wire (prepared, no receipt, 31 s ago).
    expect((await call("POST", "/v1/bots", { name: "rory", botId: "rory" })).status).toBe(201);
    const computer = (await call("POST", "/v1/bots/rory/computer")).json.computer;
    await openBoatDeleteJournal({ dataDir: tmp.dir, now: () => Date.now() - 31_000 }).prepareBoatDeletion({
      boxId: computer.boxId,
      name: computer.name,
      ownerBotId: "rory",
    });
    const boatPreview = await reader("GET", `/v1/recovery/boats/retryDeletion?boxId=${computer.boxId}`);
    expect(boatPreview.status, JSON.stringify(boatPreview.json)).toBe(200);
    expect(boatPreview.json.eligible).toBe(true);
    const deletionsBefore = await openBoatDeleteJournal({ dataDir: tmp.dir }).boatDeletionSnapshot();

    for (const action of ["abort", "release", "complete", "rollback"]) {
      const preview = await reader("GET", `/v1/recovery/restores/${operationId}/${action}`);
      expect(preview.status, action).toBe(200);
      const refused = await reader("POST", `/v1/recovery/restores/${operationId}/${action}`, {
        fence: preview.json.fence,
      });
      expect(refused.status, action).toBe(403);
      expect(refused.json.error.code).toBe("forbidden");
    }
    for (const [action, target] of [
      ["adopt", { botId: "rory", boxId: computer.boxId }],
      ["retireCreate", { botId: "rory" }],
      ["reconcileDeletion", { boxId: computer.boxId }],
      ["retryDeletion", { boxId: computer.boxId }],
    ] as const) {
      const refused = await reader("POST", `/v1/recovery/boats/${action}`, {
        ...target,
        expectedState: boatPreview.json.expectedState,
      });
      expect(refused.status, action).toBe(403);
      expect(refused.json.error.code).toBe("forbidden");
    }

    // Nothing moved: the same saga (events, fence, owner), the same deletion fence and Boat state.
    expect((await reader("GET", `/v1/recovery/restores/${operationId}`)).json).toEqual(detail.json);
    expect(await openBoatDeleteJournal({ dataDir: tmp.dir }).boatDeletionSnapshot()).toEqual(deletionsBefore);
    expect((await reader("GET", `/v1/recovery/boats/retryDeletion?boxId=${computer.boxId}`)).json).toEqual(
      boatPreview.json,
    );
  });

  it("refuses an action that is not eligible (409 action_not_eligible) and a malformed fence (400)", async () => {
    const { operationId } = items.get("alpha")!;
    const preview = (await call("GET", `/v1/recovery/restores/${operationId}/release`)).json;
    expect(preview).toMatchObject({ eligible: false, command: null });
    expect(preview.blockers.length).toBeGreaterThan(0);
    const refused = await call("POST", `/v1/recovery/restores/${operationId}/release`, {
      fence: preview.fence,
    });
    expect(refused.status).toBe(409);
    expect(refused.json.error.code).toBe("action_not_eligible");
    const malformed = await call("POST", `/v1/recovery/restores/${operationId}/abort`, {
      fence: { ...preview.fence, expectedHash: "nope" },
    });
    expect(malformed.status).toBe(400);
    expect(malformed.json.error.code).toBe("invalid_request");
    expect((await call("GET", "/v1/recovery/restores/no-such-op/abort")).json.error.code).toBe(
      "restore_not_found",
    );
    expect((await call("GET", `/v1/recovery/restores/${operationId}/explode`)).status).toBe(400);
  });

  it("preview → apply aborts the restore through the recovery controller, and the item is gone", async () => {
    const { operationId, command } = items.get("alpha")!;
    const preview = await call("GET", `/v1/recovery/restores/${operationId}/abort`);
    expect(preview.status).toBe(200);
    expect(preview.json).toMatchObject({ ok: true, preview: true, changed: false, eligible: true, command });
    // The fence is the one `drydock restores show` prints.
    const fromController = await createRestoreRecoveryController({
      dataDir: tmp.dir,
      workspaceRoot: join(tmp.dir, "workspaces", "alpha"),
    }).preview(operationId);
    expect(preview.json.fence).toEqual(fromController.fence);
    expect(command).toContain(`--expected-seq ${fromController.fence.expectedSeq}`);

    const applied = await call("POST", `/v1/recovery/restores/${operationId}/abort`, {
      fence: preview.json.fence,
      reason: "console test",
    });
    expect(applied.status, JSON.stringify(applied.json)).toBe(200);
    expect(applied.json).toMatchObject({
      ok: true,
      action: "abort",
      operationId,
      phase: "aborted",
      archived: true,
    });
    const left = (await call("GET", "/v1/recovery")).json.restores.map((r: { botId: string }) => r.botId);
    expect(left).toEqual(["beta"]);
    // The workspace is usable again: the aborted restore released its lock.
    expect((await call("PUT", "/v1/bots/alpha/files/b.txt", "after")).status).toBe(201);

    // The same fence again is stale: the saga moved on (aborted), and the answer says how.
    const twice = await call("POST", `/v1/recovery/restores/${operationId}/abort`, {
      fence: preview.json.fence,
    });
    expect(twice.status).toBe(409);
    expect(twice.json.error.code).toBe("state_changed");
    expect(twice.json.error.message).toMatch(
      new RegExp(
        `^Restore ${operationId} is no longer in the state you previewed \\(its seq is \\d+, not ${preview.json.fence.expectedSeq}; its head hash differs`,
      ),
    );
  });

  it("a preview that went stale (another operator settled it meanwhile) is refused: 409 state_changed", async () => {
    const { operationId } = items.get("beta")!;
    const preview = (await call("GET", `/v1/recovery/restores/${operationId}/abort`)).json;
    expect(preview.eligible).toBe(true);
    // Someone else (the CLI) aborts it between this preview and its apply.
    const controller = createRestoreRecoveryController({
      dataDir: tmp.dir,
      workspaceRoot: join(tmp.dir, "workspaces", "beta"),
    });
    const settled = await controller.abort(operationId, (await controller.preview(operationId)).fence);
    expect(settled.phase).toBe("aborted");
    const stale = await call("POST", `/v1/recovery/restores/${operationId}/abort`, { fence: preview.fence });
    expect(stale.status).toBe(409);
    expect(stale.json.error).toMatchObject({
      code: "state_changed",
      details: { operationId, expected: preview.fence, actual: { expectedSeq: settled.seq } },
    });
    expect(stale.json.error.message).toContain(`its seq is ${settled.seq}, not ${preview.fence.expectedSeq}`);
    expect(stale.json.error.message).toContain("nothing was changed");
    expect((await call("GET", "/v1/recovery")).json.restores).toEqual([]);
  });
});

describe("Boat actions", () => {
  let server: RunningServer;
  const tmp = inProcessServer("boat-actions", (started) => {
    server = started;
  });

  async function botWithComputer(botId: string) {
    const call = api(server.url, server.token);
    expect((await call("POST", "/v1/bots", { name: botId, botId })).status).toBe(201);
    const created = await call("POST", `/v1/bots/${botId}/computer`);
    expect(created.status).toBe(201);
    return { call, ...(created.json.computer as { boxId: string; name: string }) };
  }

  it("retryDeletion: a DELETE a stopped server never saw confirmed is previewed with its fence and applied once", async () => {
    const { call, boxId, name } = await botWithComputer("rex");
    // As a server SIGKILLed while its DELETE was on the wire leaves it: prepared, no receipt, 31 s ago.
    await openBoatDeleteJournal({ dataDir: tmp.dir, now: () => Date.now() - 31_000 }).prepareBoatDeletion({
      boxId,
      name,
      ownerBotId: "rex",
    });
    const before = server.simulator!.stats().deleteRequests;
    const preview = await call("GET", `/v1/recovery/boats/retryDeletion?boxId=${boxId}`);
    expect(preview.status, JSON.stringify(preview.json)).toBe(200);
    expect(preview.json).toMatchObject({ ok: true, preview: true, changed: false, eligible: true, boxId });
    expect(preview.json.expectedState).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(preview.json.command).toContain(`--expected-state ${preview.json.expectedState}`);
    expect(preview.json.command).toBe(preview.json.item.action.command);
    expect(server.simulator!.stats().deleteRequests).toBe(before);

    const wrong = await call("POST", "/v1/recovery/boats/retryDeletion", {
      boxId,
      expectedState: `sha256:${"0".repeat(64)}`,
    });
    expect(wrong.status).toBe(409);
    expect(wrong.json.error.code).toBe("state_changed");
    expect(server.simulator!.stats().deleteRequests).toBe(before);
    const noToken = await api(server.url, null)("POST", "/v1/recovery/boats/retryDeletion", {
      boxId,
      expectedState: preview.json.expectedState,
    });
    expect(noToken.status).toBe(401);
    expect(server.simulator!.stats().deleteRequests).toBe(before);

    const applied = await call("POST", "/v1/recovery/boats/retryDeletion", {
      boxId,
      expectedState: preview.json.expectedState,
    });
    expect(applied.status, JSON.stringify(applied.json)).toBe(200);
    expect(applied.json).toMatchObject({ ok: true, action: "retryDeletion", boxId });
    expect(server.simulator!.stats().deleteRequests).toBe(before + 1);
    // The same preview applied again is stale: never a second blind DELETE.
    const again = await call("POST", "/v1/recovery/boats/retryDeletion", {
      boxId,
      expectedState: preview.json.expectedState,
    });
    expect(again.status).toBe(409);
    expect(again.json.error.code).toBe("state_changed");
    expect(server.simulator!.stats().deleteRequests).toBe(before + 1);
  });

  it("adopt: a Boat carrying the bot's name that no journal knows is adopted against its previewed state", async () => {
    const { call, boxId } = await botWithComputer("fay");
    // The journal forgot the Boat (a data directory restored from an older backup).
    await openBoatCreateJournal({ dataDir: tmp.dir }).retireDeletedBoatCreate(boxId);
    const preview = await call("GET", `/v1/recovery/boats/adopt?botId=fay&boxId=${boxId}`);
    expect(preview.status, JSON.stringify(preview.json)).toBe(200);
    expect(preview.json).toMatchObject({ eligible: true, botId: "fay", boxId });
    expect(preview.json.item.kind).toBe("unknown_boat");
    const applied = await call("POST", "/v1/recovery/boats/adopt", {
      botId: "fay",
      boxId,
      expectedState: preview.json.expectedState,
    });
    expect(applied.status, JSON.stringify(applied.json)).toBe(200);
    expect(applied.json).toMatchObject({
      ok: true,
      action: "adopt",
      botId: "fay",
      boxId,
      alreadyAdopted: false,
    });
    expect((await call("GET", "/v1/bots/fay/computer")).json.computer).toMatchObject({
      status: "ready",
      boxId,
    });
    // Nothing left to adopt: the preview says what the plan says instead, or that it knows nothing of it.
    const after = await call("GET", `/v1/recovery/boats/adopt?botId=fay&boxId=${boxId}`);
    expect(after.status).toBe(404);
    expect(after.json.error.code).toBe("not_found");
  });

  it("names what an action needs (400) and what the plan does not know (404)", async () => {
    const call = api(server.url, server.token);
    const missing = await call("GET", "/v1/recovery/boats/adopt?botId=fay");
    expect(missing.status).toBe(400);
    expect(missing.json.error).toMatchObject({ code: "invalid_request", message: "adopt needs boxId." });
    const unknown = await call("GET", "/v1/recovery/boats/reconcileDeletion?boxId=bx_22222222");
    expect(unknown.status).toBe(404);
    expect(unknown.json.error.code).toBe("not_found");
    expect(existsSync(tmp.dir)).toBe(true);
  });
});
