/**
 * The locks view and the housekeeping actions over HTTP: GET /v1/locks (what `drydock locks list` shows,
 * owners as digests, never tokens), GET|POST /v1/recovery/locks/gc (what `drydock locks gc` lists and
 * removes: only what file-lock and restore-saga judge garbage when it runs) and GET|POST
 * /v1/recovery/restores/purge (`drydock restores purge`, fenced by the digest of the previewed list).
 * Real garbage: candidates of exited processes, a kept owner file of this live process, locks stopped
 * workspace edits and restores left; real archived sagas of completed restores.
 */

import { spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdirSync, readdirSync, realpathSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { acquireLockSync, createSystemIdentity } from "@drydock/file-lock";
import { workspaceLockPath } from "@drydock/restore-saga";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Api, api, type ServerChild, spawnServer, tempDir } from "./helpers.js";

const TOKEN = "k".repeat(32);
const READER = "r".repeat(32);

const exitedPid = () => spawnSync(process.execPath, ["-e", ""]).pid as number;

describe("locks: the view and gc", () => {
  const tmp = tempDir("locks-routes");
  let server: ServerChild;
  let call: Api;
  let reader: Api;
  const secrets = new Set<string>();
  const rel = (path: string) => path.slice(tmp.dir.length + 1);

  beforeAll(async () => {
    server = await spawnServer(tmp.dir, { DRYDOCK_TOKEN: TOKEN, DRYDOCK_TOKENS: `dash:read:${READER}` });
    call = api(server.url, server.token);
    reader = api(server.url, READER);
    for (const botId of ["edit", "rest"]) {
      expect((await call("POST", "/v1/bots", { name: botId, botId })).status).toBe(201);
      expect((await call("PUT", `/v1/bots/${botId}/files/a.txt`, "v1")).status).toBe(201);
    }
  });
  afterAll(() => {
    server?.kill();
    tmp.cleanup();
  });

  /** A workspace lock owned by a process that has exited (this host, this boot): provably dead. */
  const deadWorkspaceLock = (botId: string, transactionId: string, purpose: string): string => {
    const token = randomUUID();
    secrets.add(token);
    const root = realpathSync(join(tmp.dir, "workspaces", botId));
    const path = workspaceLockPath(tmp.dir, root);
    const owner = {
      version: 1,
      pid: exitedPid(),
      token,
      createdAt: Date.now() - 1_000,
      host: hostname(),
      bootId: createSystemIdentity().bootId(),
      payload: { transactionId, workspaceRoot: root, purpose },
    };
    writeFileSync(path, `${JSON.stringify(owner)}\n`);
    return path;
  };

  it("lists a stopped edit's lock, a restore's dead lock, a kept owner file and a dead candidate; gc removes only the garbage", async () => {
    const editLock = deadWorkspaceLock("edit", "file-write-5e2a", "workspace-edit");
    const restoreLock = deadWorkspaceLock("rest", "op-stopped", "checkpoint-restore");
    const sagaLocks = join(tmp.dir, "restore-sagas", "workspace-0123", ".locks");
    mkdirSync(sagaLocks, { recursive: true });
    // This (live) process took and released a saga lock the way the store does: its owner file is kept.
    const kept = acquireLockSync(join(sagaLocks, "op-a.lock"), { reuseOwnerFile: true });
    kept.release();
    secrets.add(kept.owner.token);
    // A candidate of a process that has exited: garbage.
    const dead = exitedPid();
    const deadToken = randomUUID();
    secrets.add(deadToken);
    writeFileSync(
      join(sagaLocks, `op-b.lock.candidate-${dead}-${deadToken}`),
      `${JSON.stringify({ version: 1, pid: dead, token: deadToken, createdAt: Date.now() })}\n`,
    );

    const listed = await reader("GET", "/v1/locks");
    expect(listed.status).toBe(200);
    const row = (path: string) => listed.json.locks.find((entry: { path: string }) => entry.path === path);
    expect(row(rel(editLock))).toMatchObject({
      kind: "workspace",
      present: true,
      alive: false,
      purpose: "workspace-edit",
      transactionId: "file-write-5e2a",
      ownerDigest: expect.stringMatching(/^sha256:[0-9a-f]{64}$/),
    });
    expect(row(rel(editLock)).note).toContain("locks gc --yes");
    expect(row(rel(restoreLock))).toMatchObject({
      purpose: "checkpoint-restore",
      alive: false,
      transactionId: "op-stopped",
      note: null,
    });
    const sagaRel = "restore-sagas/workspace-0123/.locks";
    expect(row(`${sagaRel}/op-a.lock`)).toMatchObject({
      kind: "saga-state",
      present: false,
      leftovers: 0,
      kept: 1,
    });
    expect(row(`${sagaRel}/op-b.lock`)).toMatchObject({
      kind: "saga-state",
      present: false,
      leftovers: 1,
      kept: 0,
    });
    // Owners as digests only: no token (live or dead) in any answer.
    for (const secret of secrets) expect(listed.text).not.toContain(secret);

    const preview = await reader("GET", "/v1/recovery/locks/gc");
    expect(preview.status).toBe(200);
    expect(preview.json).toMatchObject({ preview: true, changed: false });
    expect(preview.json.command).toMatch(/ locks gc --yes$/);
    expect(preview.json.candidates).toEqual([
      rel(editLock),
      expect.stringMatching(new RegExp(`^${sagaRel}/op-b\\.lock\\.candidate-${dead}-sha256:[0-9a-f]{16}$`)),
    ]);
    for (const secret of secrets) expect(preview.text).not.toContain(secret);
    // The preview changed nothing.
    expect(readdirSync(sagaLocks).sort()).toEqual(
      [
        `op-a.lock.candidate-${process.pid}-${kept.owner.token}`,
        `op-b.lock.candidate-${dead}-${deadToken}`,
      ].sort(),
    );

    // A read-only token sees it all and can remove nothing.
    const refused = await reader("POST", "/v1/recovery/locks/gc", { confirm: true });
    expect(refused.status).toBe(403);
    expect(refused.json.error.code).toBe("forbidden");
    expect(readdirSync(sagaLocks)).toHaveLength(2);
    // A bare POST is no confirmation.
    expect((await call("POST", "/v1/recovery/locks/gc", {})).status).toBe(400);

    const gc = await call("POST", "/v1/recovery/locks/gc", { confirm: true });
    expect(gc.status).toBe(200);
    expect(gc.json).toEqual({ ok: true, removed: preview.json.candidates, kept: [] });
    // The kept owner file and the restore's dead lock (it waits for its fenced recovery) are untouched.
    expect(readdirSync(sagaLocks)).toEqual([`op-a.lock.candidate-${process.pid}-${kept.owner.token}`]);
    expect(readdirSync(join(tmp.dir, "locks")).filter((name) => name.startsWith("ws-"))).toEqual([
      rel(restoreLock).slice("locks/".length),
    ]);
    expect((await call("GET", "/v1/recovery/locks/gc")).json.candidates).toEqual([]);
  });

  it("a gc applied again once its garbage is gone removes nothing", async () => {
    const locks = join(tmp.dir, "locks");
    const dead = exitedPid();
    const token = randomUUID();
    const file = join(locks, `late.lock.candidate-${dead}-${token}`);
    writeFileSync(file, `${JSON.stringify({ version: 1, pid: dead, token, createdAt: Date.now() })}\n`);
    const listedNow = (await call("GET", "/v1/recovery/locks/gc")).json.candidates;
    expect(listedNow).toHaveLength(1);
    const first = await call("POST", "/v1/recovery/locks/gc", { confirm: true });
    expect(first.json.removed).toEqual(listedNow);
    const second = await call("POST", "/v1/recovery/locks/gc", { confirm: true });
    expect(second.json).toEqual({ ok: true, removed: [], kept: [] });
  });
});

describe("restores purge", () => {
  const tmp = tempDir("purge-routes");
  let server: ServerChild;
  let call: Api;
  let reader: Api;

  /** A completed (so archived) restore of `botId`: its operation id. */
  const completedRestore = async (botId: string): Promise<string> => {
    const checkpointId = (await call("POST", `/v1/bots/${botId}/checkpoints`)).json.checkpoint.checkpointId;
    expect((await call("PUT", `/v1/bots/${botId}/files/a.txt`, "v2")).status).toBe(201);
    const restored = await call("POST", `/v1/bots/${botId}/checkpoints/${checkpointId}/restore`);
    expect(restored.status).toBe(200);
    return restored.json.operationId;
  };

  beforeAll(async () => {
    server = await spawnServer(tmp.dir, { DRYDOCK_TOKEN: TOKEN, DRYDOCK_TOKENS: `dash:read:${READER}` });
    call = api(server.url, server.token);
    reader = api(server.url, READER);
    expect((await call("POST", "/v1/bots", { name: "p", botId: "p" })).status).toBe(201);
    expect((await call("PUT", "/v1/bots/p/files/a.txt", "v1")).status).toBe(201);
  });
  afterAll(() => {
    server?.kill();
    tmp.cleanup();
  });

  it("previews the archives old enough, refuses a read token and a stale list, then purges exactly the previewed ones", async () => {
    const first = await completedRestore("p");
    // Nothing finished 30 days ago (the CLI's default).
    const none = await reader("GET", "/v1/recovery/restores/purge");
    expect(none.status).toBe(200);
    expect(none.json).toMatchObject({ preview: true, changed: false, candidates: [], kept: [] });

    const preview = await reader("GET", "/v1/recovery/restores/purge?olderThanDays=0");
    expect(preview.status).toBe(200);
    expect(preview.json.candidates).toEqual([
      expect.objectContaining({ botId: "p", operationId: first, phase: "completed" }),
    ]);
    expect(preview.json.command).toBe(
      `${preview.json.command.split(" restores ")[0]} restores purge --older-than-days 0 --expected-state ${preview.json.stateDigest} --yes`,
    );
    const body = { olderThanDays: 0, expectedState: preview.json.stateDigest };

    const refused = await reader("POST", "/v1/recovery/restores/purge", body);
    expect(refused.status).toBe(403);
    expect(refused.json.error.code).toBe("forbidden");

    // Another archive appears after the preview: the list moved, nothing is purged.
    const second = await completedRestore("p");
    const stale = await call("POST", "/v1/recovery/restores/purge", body);
    expect(stale.status).toBe(409);
    expect(stale.json.error.code).toBe("state_changed");
    expect(stale.json.error.message).toContain("not the ones previewed (now 2); nothing was purged");
    const again = await call("GET", "/v1/recovery/restores/purge?olderThanDays=0");
    expect(again.json.candidates.map((c: { operationId: string }) => c.operationId).sort()).toEqual(
      [first, second].sort(),
    );

    const purged = await call("POST", "/v1/recovery/restores/purge", {
      olderThanDays: 0,
      expectedState: again.json.stateDigest,
    });
    expect(purged.status).toBe(200);
    expect(purged.json.purged.map((c: { operationId: string }) => c.operationId).sort()).toEqual(
      [first, second].sort(),
    );
    expect((await call("GET", "/v1/recovery/restores/purge?olderThanDays=0")).json.candidates).toEqual([]);
    // The same fence again: the list is empty now, so it no longer matches.
    expect(
      (
        await call("POST", "/v1/recovery/restores/purge", {
          olderThanDays: 0,
          expectedState: again.json.stateDigest,
        })
      ).status,
    ).toBe(409);
  });
});
