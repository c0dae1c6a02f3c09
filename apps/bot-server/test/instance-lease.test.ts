/**
 * A real drydock-server process on a real PostgreSQL (through test-kit's fault proxy) and a standalone
 * simulator: the server registers an instance with a lease; paused (SIGSTOP) past its lease and resumed,
 * it refuses the next provision with 503 `lease_lost` before any POST reaches boat.dev (the simulator's
 * stats; its first journal write is refused by the write fence, the database's lease having passed), then re-registers with a strictly greater epoch (the old row marked dead) and provisions again,
 * replaying the journaled key: one Boat. Every wait is for a condition (the database's clock, a row), never a
 * duration. The renewal after the resume is held on the proxy (blackhole on `UPDATE instances`) so the
 * provision is answered while the lease is still lost, whatever the machine's load.
 *
 * And the write fence: a server paused (it SIGSTOPs itself at a crash point) between boat.dev's answer to
 * its create POST and the journal write that records the Boat, resumed past its lease, has that write
 * refused inside its transaction (503 `lease_lost`, the create row unchanged) — the write carries the epoch
 * its call started with, whatever the heartbeat re-registers meanwhile; retried once it re-registered, the
 * journaled key is replayed: one Boat.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { api, schemaOf, spawnServer, usePostgresDatabase, usePostgresServers } from "./helpers.js";

const databaseUrl = usePostgresDatabase();
const fleet = usePostgresServers(databaseUrl, "instance-lease");
const { tmp, servers } = fleet;

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

async function createRows(schema: string): Promise<{ bot_id: string; box_id: string | null }[]> {
  const client = new pg.Client({ connectionString: databaseUrl() });
  await client.connect();
  try {
    return (await client.query(`SELECT bot_id, box_id, row_json FROM ${schema}.create_rows ORDER BY seq`))
      .rows as { bot_id: string; box_id: string | null }[];
  } finally {
    await client.end();
  }
}

/** A server on `url` (given as a file, as an operator would) with a 1.5 s lease, on the standalone simulator. */
async function leasedServer(name: string, url: string, env: Record<string, string> = {}) {
  const dir = join(tmp.dir, name);
  const schema = schemaOf(dir);
  const urlFile = join(tmp.dir, `${name}-storage-url`);
  writeFileSync(urlFile, url, { mode: 0o600 });
  const server = await spawnServer(dir, {
    DRYDOCK_STORAGE_FILE: urlFile,
    DRYDOCK_POSTGRES_SCHEMA: schema,
    DRYDOCK_LEASE_TTL_MS: "1500",
    BOAT_API_URL: fleet.sim.apiUrl,
    BOAT_API_TOKEN: fleet.sim.token,
    ...env,
  });
  servers.push(server);
  return { schema, server };
}

/**
 * A leased server that SIGSTOPs itself at `point`, a bot `botId`, and its provision in flight until the server
 * has stopped there (the provision's answer is `inFlight`).
 */
async function provisionPausedAt(name: string, url: string, point: string, botId: string) {
  const { schema, server } = await leasedServer(name, url, {
    DRYDOCK_CRASH_POINT: point,
    DRYDOCK_CRASH_SIGNAL: "SIGSTOP",
  });
  const pid = server.child.pid as number;
  const call = api(server.url, server.token);
  expect((await call("POST", "/v1/bots", { name: botId, botId })).status).toBe(201);
  const [first] = await until(schema, "the server is registered", (rows) => rows.some((r) => r.pid === pid));
  const inFlight = call("POST", `/v1/bots/${botId}/computer`);
  for (let i = 0; i < 1_200 && !stopped(pid); i += 1) await sleep(50);
  expect(stopped(pid)).toBe(true);
  return { schema, server, pid, call, first, inFlight };
}

/** Whether `pid` is stopped (SIGSTOP), from /proc. */
function stopped(pid: number): boolean {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  return stat.slice(stat.lastIndexOf(")") + 2).startsWith("T");
}

describe("a server paused past its lease", () => {
  it("refuses the next provision with lease_lost before any POST, then re-registers with a greater epoch and provisions once", async () => {
    // The URL (with its password) is given as a file, as an operator would; through the fault fleet.proxy.
    const { schema, server } = await leasedServer("data", fleet.proxy.url(databaseUrl()));
    const pid = server.child.pid as number;
    // The instance line follows the banner's listening line (it may arrive in a later chunk of output).
    for (let i = 0; i < 200 && !server.output().includes("instance:"); i += 1) await sleep(25);
    expect(server.output()).toMatch(
      /instance: +[0-9a-f-]{36} \(epoch \d+; lease 1500 ms, renewed every 500 ms\)/,
    );
    expect(server.output()).not.toContain(new URL(databaseUrl()).password);
    const call = api(server.url, server.token);
    expect((await call("POST", "/v1/bots", { name: "Ada", botId: "ada" })).status).toBe(201);
    expect((await call("POST", "/v1/bots", { name: "Bob", botId: "bob" })).status).toBe(201);
    // The gate is open while the lease is renewed: a provision POSTs.
    expect((await call("POST", "/v1/bots/ada/computer")).status).toBe(201);
    expect(fleet.sim.stats().createRequests).toBe(1);
    const [first] = await until(schema, "the server is registered", (rows) =>
      rows.some((r) => r.pid === pid),
    );
    expect(first).toMatchObject({ pid, state: "live" });

    process.kill(-pid, "SIGSTOP");
    await until(schema, "its lease has passed by the database's clock", (rows) =>
      rows.every((r) => r.state !== "live" || r.expired),
    );
    // Its renewal after the resume is held (the connection blackholed), so the lease stays lost meanwhile.
    fleet.proxy.set({ kind: "blackhole-on", match: "UPDATE instances" });
    process.kill(-pid, "SIGCONT");
    const refused = await call("POST", "/v1/bots/bob/computer");
    expect(refused.status).toBe(503);
    expect(refused.json.error.code).toBe("lease_lost");
    // Refused at its first journal write (the create key's), by the fence: the database's lease has passed.
    expect(refused.json.error.message).toContain("no longer holds its lease");
    expect(refused.json.error.message).toContain("Nothing was written.");
    expect(fleet.sim.stats().createRequests).toBe(1);
    // Nothing was written for bob: no create key.
    expect((await createRows(schema)).map((r) => r.bot_id)).toEqual(["ada"]);

    // Let the held renewal fail (its connection reset); the next beat finds the lease gone and re-registers.
    fleet.proxy.set({ kind: "reset" });
    fleet.proxy.set({ kind: "pass" });
    const rows = await until(schema, "a new epoch is live", (all) =>
      all.some((r) => r.pid === pid && r.state === "live" && Number(r.epoch) > Number(first?.epoch)),
    );
    expect(rows.find((r) => r.id === first?.id)?.state).toBe("dead");
    const epochs = rows.map((r) => Number(r.epoch));
    expect(epochs).toEqual([...epochs].sort((a, b) => a - b));

    // Served again: the refused call journaled nothing, so this is bob's first create (201), one Boat for
    // bob. (The row is visible a moment before the server's own register call returns: a lease_lost until
    // then is waited out.)
    let again = await call("POST", "/v1/bots/bob/computer");
    for (let i = 0; i < 100 && again.status === 503 && again.json.error.code === "lease_lost"; i += 1) {
      await sleep(50);
      again = await call("POST", "/v1/bots/bob/computer");
    }
    expect(again.status).toBe(201);
    expect(fleet.sim.stats()).toMatchObject({ createRequests: 2, live: 2 });
    expect((await createRows(schema)).map((r) => r.bot_id)).toEqual(["ada", "bob"]);
    server.child.kill("SIGTERM");
    await server.exited;
    // A clean stop marks the instance stopped.
    await until(schema, "the instance is stopped", (all) =>
      all.some((r) => r.pid === pid && r.state === "stopped"),
    );
  }, 180_000);

  it("a journal write in flight when it was paused is refused by the fence (lease_lost, nothing written); retried after it re-registered: one Boat", async () => {
    const { createRequests: startedBefore, live: liveBefore } = fleet.sim.stats();
    // It stops itself once boat.dev has answered the create, before the journal records the Boat.
    const { schema, server, pid, call, first, inFlight } = await provisionPausedAt(
      "data-fence",
      databaseUrl(),
      "provision.after-create-response",
      "cy",
    );
    expect(fleet.sim.stats().createRequests).toBe(startedBefore + 1);
    await until(schema, "its lease has passed by the database's clock", (rows) =>
      rows.every((r) => r.state !== "live" || r.expired),
    );
    const before = await createRows(schema);
    expect(before).toMatchObject([{ bot_id: "cy", box_id: null }]);

    process.kill(-pid, "SIGCONT");
    const refused = await inFlight;
    expect(refused.status).toBe(503);
    expect(refused.json.error.code).toBe("lease_lost");
    expect(refused.json.error.message).toContain(`instance ${first?.id} (epoch ${first?.epoch})`);
    expect(refused.json.error.message).toContain("Nothing was written.");
    expect(await createRows(schema)).toEqual(before);

    // It re-registers with a greater epoch; the retry replays the journaled key: the same Boat, one Boat.
    await until(schema, "a new epoch is live", (all) =>
      all.some((r) => r.pid === pid && r.state === "live" && Number(r.epoch) > Number(first?.epoch)),
    );
    let again = await call("POST", "/v1/bots/cy/computer");
    for (let i = 0; i < 100 && again.status === 503 && again.json.error.code === "lease_lost"; i += 1) {
      await sleep(50);
      again = await call("POST", "/v1/bots/cy/computer");
    }
    expect([200, 201]).toContain(again.status);
    const rows = await createRows(schema);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ bot_id: "cy", box_id: expect.stringMatching(/^bx_/) });
    expect(fleet.sim.stats().live).toBe(liveBefore + 1);
    server.child.kill("SIGTERM");
    await server.exited;
  }, 180_000);

  it("a request that began before the pause never continues under the new epoch: resumed after the re-registration, it starts no side effect", async () => {
    const { createRequests: startedBefore, live: liveBefore } = fleet.sim.stats();
    // It stops itself once the create key is journaled, before it asks whether the bot is still wanted.
    const { schema, server, pid, call, first, inFlight } = await provisionPausedAt(
      "data-scope",
      fleet.proxy.url(databaseUrl()),
      "provision.after-begin",
      "dee",
    );
    await until(schema, "its lease has passed by the database's clock", (rows) =>
      rows.every((r) => r.state !== "live" || r.expired),
    );
    // Resumed, the request's next read (is the bot still wanted?) is held on the proxy until the server has
    // re-registered, so it goes on only under the new epoch.
    fleet.proxy.set({ kind: "blackhole-on", match: "FROM bots WHERE bot_id" });
    process.kill(-pid, "SIGCONT");
    await until(schema, "a new epoch is live", (all) =>
      all.some((r) => r.pid === pid && r.state === "live" && Number(r.epoch) > Number(first?.epoch)),
    );
    for (let i = 0; i < 1_200 && !server.output().includes("re-registered with a new epoch"); i += 1) {
      await sleep(25);
    }
    expect(server.output()).toContain("re-registered with a new epoch");
    fleet.proxy.set({ kind: "reset" });
    fleet.proxy.set({ kind: "pass" });
    const refused = await inFlight;
    expect(refused.status).toBe(503);
    expect(refused.json.error.code).toBe("lease_lost");
    expect(refused.json.error.message).toContain(`began under this server's instance epoch ${first?.epoch}`);
    expect(fleet.sim.stats().createRequests).toBe(startedBefore);
    expect(await createRows(schema)).toMatchObject([{ bot_id: "dee", box_id: null }]);

    // A new request runs under the new epoch: the journaled key is sent, one Boat.
    const again = await call("POST", "/v1/bots/dee/computer");
    expect(again.status).toBe(200);
    expect(fleet.sim.stats().live).toBe(liveBefore + 1);
    server.child.kill("SIGTERM");
    await server.exited;
  }, 180_000);
});
