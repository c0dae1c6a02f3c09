/**
 * Workspaces on PostgreSQL through real servers (issue 24, decision 0031): two drydock-server PROCESSES on one
 * PostgreSQL schema, each with its OWN data directory, serve the same bots' files. A file written through A
 * is read through B; A killed (SIGKILL), the acknowledged write is still read through B; a checkpoint made
 * through B is restored through A (restarted) and read back through B; and a write through a server whose
 * instance lease was lost is refused (503 lease_lost) with nothing changed. Nothing of a workspace is on
 * either host's disk. Every wait is for a condition (a row, a stopped process), never a duration.
 */
import { existsSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { api, schemaOf, spawnServer, usePostgresDatabase, usePostgresServers } from "./helpers.js";

const databaseUrl = usePostgresDatabase();
const fleet = usePostgresServers(databaseUrl, "ws-postgres");
const { tmp, servers } = fleet;

/** A server on its own data directory `name`, on the shared schema `schema` (through `url`). */
async function serverOn(name: string, schema: string, url: string, env: Record<string, string> = {}) {
  const dir = join(tmp.dir, name);
  const urlFile = join(tmp.dir, `${name}-storage-url`);
  writeFileSync(urlFile, url, { mode: 0o600 });
  const server = await spawnServer(dir, {
    DRYDOCK_STORAGE_FILE: urlFile,
    DRYDOCK_POSTGRES_SCHEMA: schema,
    BOAT_API_URL: fleet.sim.apiUrl,
    BOAT_API_TOKEN: fleet.sim.token,
    // One token for every server, as a fleet behind one address would have.
    DRYDOCK_TOKEN: "fleet-token-0123456789abcdef",
    ...env,
  });
  servers.push(server);
  return { dir, server, call: api(server.url, server.token) };
}

async function query<T>(sql: string, params: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: databaseUrl() });
  await client.connect();
  try {
    return (await client.query(sql, params)).rows as T[];
  } finally {
    await client.end();
  }
}

/**
 * Nothing of any bot's workspace is on this host's disk: no file under the workspaces, no checkpoint, no
 * restore saga (the directories a start makes stay empty).
 */
function noLocalWorkspaceFiles(dir: string): void {
  for (const part of ["workspaces", "checkpoints", "restore-sagas"]) {
    const at = join(dir, part);
    if (existsSync(at)) expect({ [part]: readdirSync(at, { recursive: true }) }).toEqual({ [part]: [] });
  }
}

describe("two servers on one PostgreSQL, each with its own data directory", () => {
  it("a file written through A is read through B, still after A is SIGKILLed; a checkpoint made through B is restored through A (restarted) and read back through B", async () => {
    const schema = schemaOf(join(tmp.dir, "fleet"));
    const a = await serverOn("a", schema, databaseUrl());
    const b = await serverOn("b", schema, databaseUrl());
    expect((await a.call("POST", "/v1/bots", { name: "Ada", botId: "ada" })).status).toBe(201);

    const written = await a.call("PUT", "/v1/bots/ada/files/notes/plan.txt", "written through A");
    expect(written.status).toBe(201);
    expect(written.json).toEqual({ ok: true, path: "notes/plan.txt", bytes: 17 });
    const readB = await b.call("GET", "/v1/bots/ada/files/notes/plan.txt");
    expect(readB.status).toBe(200);
    expect(readB.text).toBe("written through A");
    noLocalWorkspaceFiles(a.dir);

    // A is lost with everything on its host but its data directory; the acknowledged write is not.
    a.server.kill();
    expect((await a.server.exited).signal).toBe("SIGKILL");
    expect((await b.call("GET", "/v1/bots/ada/files/notes/plan.txt")).text).toBe("written through A");

    // A checkpoint through B, then a change through B.
    const made = await b.call("POST", "/v1/bots/ada/checkpoints");
    expect(made.status).toBe(201);
    const checkpointId = made.json.checkpoint.checkpointId as string;
    expect(made.json.checkpoint).toMatchObject({ files: 1, bytes: 17 });
    expect((await b.call("PUT", "/v1/bots/ada/files/notes/plan.txt", "changed through B")).status).toBe(201);
    expect((await b.call("PUT", "/v1/bots/ada/files/extra.txt", "added through B")).status).toBe(201);

    // A again (a new process on the same data directory) restores it.
    const a2 = await serverOn("a", schema, databaseUrl());
    const listed = await a2.call("GET", "/v1/bots/ada/checkpoints");
    expect(listed.json.checkpoints.map((c: { checkpointId: string }) => c.checkpointId)).toEqual([
      checkpointId,
    ]);
    const restored = await a2.call("POST", `/v1/bots/ada/checkpoints/${checkpointId}/restore`);
    expect(restored.status).toBe(200);
    expect(restored.json).toMatchObject({ ok: true, phase: "completed", warning: null });
    const operationId = restored.json.operationId as string;

    expect((await b.call("GET", "/v1/bots/ada/files/notes/plan.txt")).text).toBe("written through A");
    const gone = await b.call("GET", "/v1/bots/ada/files/extra.txt");
    expect(gone.status).toBe(404);
    expect(gone.json.error.code).toBe("file_not_found");
    const summary = await b.call("GET", `/v1/restores/${operationId}`);
    expect(summary.status).toBe(200);
    expect(summary.json).toMatchObject({
      ok: true,
      botId: "ada",
      restore: { operationId, phase: "completed", checkpointId },
    });
    // No restore saga on either host: the restore was one transaction, nothing for a person.
    expect((await b.call("GET", "/v1/recovery")).json).toMatchObject({ restores: [], retirements: [] });
    noLocalWorkspaceFiles(a.dir);
    noLocalWorkspaceFiles(b.dir);

    // A bot deleted through A has its workspace retired: the id taken again through B starts empty.
    const deleted = await a2.call("DELETE", "/v1/bots/ada");
    expect(deleted.json).toMatchObject({ ok: true, workspaceRetired: true });
    expect((await b.call("POST", "/v1/bots", { name: "Ada again", botId: "ada" })).status).toBe(201);
    expect((await b.call("GET", "/v1/bots/ada/files/notes/plan.txt")).status).toBe(404);
    expect((await b.call("GET", "/v1/bots/ada/checkpoints")).json.checkpoints).toEqual([]);
    expect((await b.call("GET", `/v1/restores/${operationId}`)).status).toBe(404);
    // A workspace is never served for a bot the registry does not have.
    const nobody = await b.call("PUT", "/v1/bots/nobody/files/a.txt", "x");
    expect(nobody.status).toBe(404);
    expect(nobody.json.error.code).toBe("bot_not_found");
    expect(await query(`SELECT 1 FROM ${schema}.ws_heads WHERE bot_id = 'nobody'`)).toEqual([]);
  }, 180_000);

  it("a write through a server whose lease was lost is refused (503 lease_lost) and changes nothing", async () => {
    const schema = schemaOf(join(tmp.dir, "fenced"));
    // Z reaches the database through the fault proxy, with a short lease.
    const z = await serverOn("z", schema, fleet.proxy.url(databaseUrl()), { DRYDOCK_LEASE_TTL_MS: "1500" });
    const y = await serverOn("y", schema, databaseUrl());
    expect((await z.call("POST", "/v1/bots", { name: "Bea", botId: "bea" })).status).toBe(201);
    expect((await z.call("PUT", "/v1/bots/bea/files/a.txt", "before")).status).toBe(201);
    const made = await z.call("POST", "/v1/bots/bea/checkpoints");
    expect(made.status).toBe(201);
    const head = () =>
      query<{ version: number; manifest: unknown }>(
        `SELECT version::float8 AS version, manifest FROM ${schema}.ws_heads WHERE bot_id = 'bea'`,
      );
    const before = await head();
    expect(before).toHaveLength(1);

    const pid = z.server.child.pid as number;
    process.kill(-pid, "SIGSTOP");
    for (let i = 0; i < 1_200; i += 1) {
      const rows = await query<{ expired: boolean }>(
        `SELECT lease_until <= clock_timestamp() AS expired FROM ${schema}.instances WHERE pid = $1 AND state = 'live'`,
        [pid],
      );
      if (rows.every((r) => r.expired)) break;
      await sleep(50);
    }
    // Its renewal after the resume is held (blackholed), so the lease stays lost while it answers.
    fleet.proxy.set({ kind: "blackhole-on", match: "UPDATE instances" });
    process.kill(-pid, "SIGCONT");

    const refused = await z.call("PUT", "/v1/bots/bea/files/a.txt", "by a zombie");
    expect(refused.status).toBe(503);
    expect(refused.json.error.code).toBe("lease_lost");
    const deleteRefused = await z.call("DELETE", "/v1/bots/bea/files/a.txt");
    expect(deleteRefused.status).toBe(503);
    expect(deleteRefused.json.error.code).toBe("lease_lost");
    const restoreRefused = await z.call(
      "POST",
      `/v1/bots/bea/checkpoints/${made.json.checkpoint.checkpointId}/restore`,
    );
    expect(restoreRefused.status).toBe(503);
    expect(restoreRefused.json.error.code).toBe("lease_lost");

    // Nothing changed: the head is where it was, and the live server reads the file as it was.
    expect(await head()).toEqual(before);
    expect(await query(`SELECT 1 FROM ${schema}.ws_restores`)).toEqual([]);
    expect((await y.call("GET", "/v1/bots/bea/files/a.txt")).text).toBe("before");
    fleet.proxy.set({ kind: "reset" });
    fleet.proxy.set({ kind: "pass" });
  }, 180_000);

  it("every server of one store uses one boat.dev: another provider, or a second embedded simulator, is refused at start", async () => {
    const schema = schemaOf(join(tmp.dir, "one-provider"));
    const first = await serverOn("p1", schema, databaseUrl());
    expect((await first.call("POST", "/v1/bots", { name: "Pat", botId: "pat" })).status).toBe(201);
    // Another boat.dev (its URL differs; nothing needs to answer there: the refusal comes first).
    await expect(
      serverOn("p2", schema, databaseUrl(), { BOAT_API_URL: "http://127.0.0.1:9/api/v1" }),
    ).rejects.toThrow(/all of them must use the same boat\.dev[\s\S]*Nothing was created or changed/);
    // The embedded simulator belongs to one server: never shared through a store.
    const embedded = { BOAT_API_URL: "", BOAT_API_TOKEN: "" };
    await expect(serverOn("p3", schema, databaseUrl(), embedded)).rejects.toThrow(
      /an embedded simulator belongs to one server/,
    );
    // One boat.dev behind another address (a per-host proxy) is named alike with BOAT_API_IDENTITY.
    const bound = new URL(fleet.sim.apiUrl);
    const alias = await serverOn("p4", schema, databaseUrl(), {
      BOAT_API_URL: `http://localhost:${bound.port}${bound.pathname}`,
      BOAT_API_IDENTITY: `${bound.protocol}//${bound.host}${bound.pathname.replace(/\/+$/, "")}`,
    });
    expect((await alias.call("GET", "/v1/bots/pat")).status).toBe(200);
  }, 180_000);
});
