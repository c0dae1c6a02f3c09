/**
 * A real drydock-server process on a real PostgreSQL (through test-kit's fault proxy) and a standalone
 * simulator: the server registers an instance with a lease; paused (SIGSTOP) past its lease and resumed,
 * it refuses the next provision with 503 `lease_lost` before any POST reaches boat.dev (the simulator's
 * stats), then re-registers with a strictly greater epoch (the old row marked dead) and provisions again,
 * replaying the journaled key: one Boat. Every wait is for a condition (the database's clock, a row), never a
 * duration. The renewal after the resume is held on the proxy (blackhole on `UPDATE instances`) so the
 * provision is answered while the lease is still lost, whatever the machine's load.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { type BoatSimulator, startBoatSimulator } from "@drydock/boat-provider/simulator";
import { type FaultProxy, startFaultProxy } from "@drydock/test-kit/postgres";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, type ServerChild, schemaOf, spawnServer, tempDir, usePostgresDatabase } from "./helpers.js";

const databaseUrl = usePostgresDatabase();
let sim: BoatSimulator;
let proxy: FaultProxy;
const tmp = tempDir("instance-lease");
const servers: ServerChild[] = [];

beforeAll(async () => {
  sim = await startBoatSimulator({ port: 0 });
  proxy = await startFaultProxy(Number(new URL(databaseUrl()).port));
});
afterAll(async () => {
  for (const server of servers) {
    try {
      if (server.child.pid) process.kill(-server.child.pid, "SIGCONT");
    } catch {
      // gone
    }
    server.kill();
  }
  await proxy?.close();
  await sim?.close();
  tmp.cleanup();
});

interface Row {
  id: string;
  pid: number;
  epoch: string;
  state: string;
  expired: boolean;
}

async function instanceRows(schema: string): Promise<Row[]> {
  const client = new pg.Client({ connectionString: databaseUrl() });
  await client.connect();
  try {
    return (
      await client.query(
        `SELECT id::text, pid, epoch::text, state, lease_until <= clock_timestamp() AS expired FROM ${schema}.instances ORDER BY epoch`,
      )
    ).rows as Row[];
  } finally {
    await client.end();
  }
}

/** Polls the instances table until `check` holds (bounded: a broken server fails the test, never hangs it). */
async function until(schema: string, what: string, check: (rows: Row[]) => boolean): Promise<Row[]> {
  for (let i = 0; i < 1_200; i += 1) {
    const rows = await instanceRows(schema);
    if (check(rows)) return rows;
    await sleep(50);
  }
  throw new Error(`timed out waiting until ${what}: ${JSON.stringify(await instanceRows(schema))}`);
}

describe("a server paused past its lease", () => {
  it("refuses the next provision with lease_lost before any POST, then re-registers with a greater epoch and provisions once", async () => {
    const dir = join(tmp.dir, "data");
    const schema = schemaOf(dir);
    // The URL (with its password) is given as a file, as an operator would.
    const urlFile = join(tmp.dir, "storage-url");
    writeFileSync(urlFile, proxy.url(databaseUrl()), { mode: 0o600 });
    const server = await spawnServer(dir, {
      DRYDOCK_STORAGE_FILE: urlFile,
      DRYDOCK_POSTGRES_SCHEMA: schema,
      DRYDOCK_LEASE_TTL_MS: "1500",
      BOAT_API_URL: sim.apiUrl,
      BOAT_API_TOKEN: sim.token,
    });
    servers.push(server);
    const pid = server.child.pid as number;
    expect(server.output()).toMatch(
      /instance: +[0-9a-f-]{36} \(epoch \d+; lease 1500 ms, renewed every 500 ms\)/,
    );
    expect(server.output()).not.toContain(new URL(databaseUrl()).password);
    const call = api(server.url, server.token);
    expect((await call("POST", "/v1/bots", { name: "Ada", botId: "ada" })).status).toBe(201);
    expect((await call("POST", "/v1/bots", { name: "Bob", botId: "bob" })).status).toBe(201);
    // The gate is open while the lease is renewed: a provision POSTs.
    expect((await call("POST", "/v1/bots/ada/computer")).status).toBe(201);
    expect(sim.stats().createRequests).toBe(1);
    const [first] = await until(schema, "the server is registered", (rows) =>
      rows.some((r) => r.pid === pid),
    );
    expect(first).toMatchObject({ pid, state: "live" });

    process.kill(-pid, "SIGSTOP");
    await until(schema, "its lease has passed by the database's clock", (rows) =>
      rows.every((r) => r.state !== "live" || r.expired),
    );
    // Its renewal after the resume is held (the connection blackholed), so the lease stays lost meanwhile.
    proxy.set({ kind: "blackhole-on", match: "UPDATE instances" });
    process.kill(-pid, "SIGCONT");
    const refused = await call("POST", "/v1/bots/bob/computer");
    expect(refused.status).toBe(503);
    expect(refused.json.error.code).toBe("lease_lost");
    expect(refused.json.error.message).toContain("starts no side effect");
    expect(sim.stats().createRequests).toBe(1);

    // Let the held renewal fail (its connection reset); the next beat finds the lease gone and re-registers.
    proxy.set({ kind: "reset" });
    proxy.set({ kind: "pass" });
    const rows = await until(schema, "a new epoch is live", (all) =>
      all.some((r) => r.pid === pid && r.state === "live" && Number(r.epoch) > Number(first?.epoch)),
    );
    expect(rows.find((r) => r.id === first?.id)?.state).toBe("dead");
    const epochs = rows.map((r) => Number(r.epoch));
    expect(epochs).toEqual([...epochs].sort((a, b) => a - b));

    // Served again: the journaled key is replayed (200: not a new key), one Boat for bob. (The row is visible
    // a moment before the server's own register call returns: a lease_lost until then is waited out.)
    let again = await call("POST", "/v1/bots/bob/computer");
    for (let i = 0; i < 100 && again.status === 503 && again.json.error.code === "lease_lost"; i += 1) {
      await sleep(50);
      again = await call("POST", "/v1/bots/bob/computer");
    }
    expect(again.status).toBe(200);
    expect(sim.stats()).toMatchObject({ createRequests: 2, live: 2 });
    server.child.kill("SIGTERM");
    await server.exited;
    // A clean stop marks the instance stopped.
    await until(schema, "the instance is stopped", (all) =>
      all.some((r) => r.pid === pid && r.state === "stopped"),
    );
  }, 180_000);
});
