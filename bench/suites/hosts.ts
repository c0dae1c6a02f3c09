/**
 * Several hosts on one PostgreSQL (issue 24): the built bot server (`apps/bot-server/dist/main.js`) as two or
 * three processes on one schema of an embedded PostgreSQL (fsync on), each with its own data directory and
 * instance lease, all talking to one standalone simulator (the built drydock-boat-sim).
 *
 * (a) Failover, per `--ttls` (1000,2000,4000 ms of DRYDOCK_LEASE_TTL_MS), `--samples` (3) times each: server A
 *     provisions a bot, then starts provisioning a second one whose create POST boat.dev holds (a `delay`
 *     fault), and is SIGKILLed while that create is in flight. From the kill, server B is polled (every 25 ms)
 *     until it serves the first bot (GET computer: ready) and until it provisions the second one (its
 *     create row, left in flight by A). Reported beside the moment A's lease passed by the database's clock.
 * (b) Provisioning `--bots` (1000) bots, `--concurrency` (16) in flight (POST /v1/bots, then
 *     POST /v1/bots/:id/computer): through three servers round-robin, and through one, each on a fresh schema
 *     of the same PostgreSQL against the same simulator, half by half in the order three, one, one, three. On a two-core machine three server processes share
 *     the same two cores with PostgreSQL and the simulator: this shows the overhead of more processes on one
 *     database, not how hosts scale.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { openPostgresStorage } from "@drydock/storage-postgres";
import { startPostgres } from "@drydock/test-kit/postgres";
import { intList, intOption, type SuiteOptions } from "../lib/args.js";
import { scratchDir } from "../lib/dirs.js";
import { describeEnvironment } from "../lib/env.js";
import type { SuiteResult } from "../lib/report.js";
import { requireBuilt, SERVER_MAIN, SIMULATOR_BIN, stopChild, waitForLine } from "../lib/server-process.js";
import { fmtRatio, summarize } from "../lib/stats.js";

const TOKEN = "bench-hosts-token-0123456789";
/** Every wait of this suite is bounded by this; a failover slower than it fails the suite. */
const BOUND_MS = 180_000;
/** How long boat.dev holds A's in-flight create (a delay fault) around A's SIGKILL. */
const HOLD_MS = 3_000;

/** The fields of the server's answers this suite reads. */
type Answer = { computer?: { status?: string; name?: string }; error?: { code?: string } } | null;

interface Host {
  url: string;
  child: ChildProcess;
  close(): Promise<void>;
}

interface Simulator {
  apiUrl: string;
  origin: string;
  token: string;
  close(): Promise<void>;
}

async function startSimulator(): Promise<Simulator> {
  requireBuilt(SIMULATOR_BIN);
  const child = spawn(process.execPath, [SIMULATOR_BIN, "--port", "0"], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  const match = await waitForLine(child, /BOAT_API_URL=(\S+)\nBOAT_API_TOKEN=(\S+)\n/, "drydock-boat-sim");
  const apiUrl = match[1] as string;
  return { apiUrl, origin: new URL(apiUrl).origin, token: match[2] as string, close: () => stopChild(child) };
}

async function simControl(sim: Simulator, method: string, path: string, body?: unknown): Promise<unknown> {
  const res = await request(sim.origin, sim.token, method, path, body);
  if (res.status !== 200) throw new Error(`simulator ${method} ${path} answered ${res.status}: ${res.text}`);
  return JSON.parse(res.text);
}

/** One JSON request with a bearer token: the status and the body's text. */
async function request(
  origin: string,
  token: string,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; text: string }> {
  const res = await fetch(`${origin}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { "content-type": "application/json" }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, text: await res.text() };
}

/** The built server on `dataDir`, on `schema` of the database at `url`, against the simulator. */
async function startHost(
  dataDir: string,
  url: string,
  schema: string,
  sim: Simulator,
  ttlMs: number,
): Promise<Host> {
  requireBuilt(SERVER_MAIN);
  mkdirSync(dataDir, { recursive: true });
  const child = spawn(process.execPath, [SERVER_MAIN], {
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      DRYDOCK_DATA_DIR: dataDir,
      HOST: "127.0.0.1",
      PORT: "0",
      LOG_LEVEL: "silent",
      DRYDOCK_STORAGE: url,
      DRYDOCK_POSTGRES_SCHEMA: schema,
      DRYDOCK_LEASE_TTL_MS: String(ttlMs),
      DRYDOCK_TOKEN: TOKEN,
      BOAT_API_URL: sim.apiUrl,
      BOAT_API_TOKEN: sim.token,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const match = await waitForLine(child, /listening on (http:\/\/\S+)/, "the bot server");
  // The backend the data directory is really bound to, read back (never assumed).
  const kind = (JSON.parse(readFileSync(join(dataDir, "storage.json"), "utf8")) as { kind?: string }).kind;
  if (kind !== "postgres") {
    await stopChild(child);
    throw new Error(
      `the server on ${dataDir} was asked for postgres but its data directory is bound to ${kind}`,
    );
  }
  return { url: (match[1] as string).replace(/\/$/, ""), child, close: () => stopChild(child) };
}

async function call(
  host: Host,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; json: Answer }> {
  const { status, text } = await request(host.url, TOKEN, method, path, body);
  let json: Answer = null;
  try {
    json = JSON.parse(text) as Answer;
  } catch {
    // not JSON
  }
  return { status, json };
}

async function must(
  host: Host,
  method: string,
  path: string,
  statuses: number[],
  body?: unknown,
): Promise<Answer> {
  const res = await call(host, method, path, body);
  if (!statuses.includes(res.status))
    throw new Error(`${method} ${path} answered ${res.status}: ${JSON.stringify(res.json).slice(0, 300)}`);
  return res.json;
}

/** Polls `probe` every 25 ms until it is true; the ms from `t0` (performance.now) until then. */
async function msUntil(t0: number, what: string, probe: () => Promise<boolean>): Promise<number> {
  for (;;) {
    if (await probe()) return performance.now() - t0;
    if (performance.now() - t0 > BOUND_MS) throw new Error(`${what} did not happen within ${BOUND_MS} ms`);
    await sleep(25);
  }
}

interface FailoverSample {
  ttlMs: number;
  /** From A's SIGKILL until its lease had passed by the database's clock (its leaseUntil − kill time). */
  leasePassedMs: number;
  /** From A's SIGKILL until B answered the provisioned bot's computer as ready. */
  servesReadyMs: number;
  /** From A's SIGKILL until B provisioned the bot whose create A left in flight. */
  finishesInFlightMs: number;
  /** Create requests boat.dev received for that bot from A's held one on (A's, and B's under the same key). */
  createRequests: number;
  /** B's answers while it could not finish that create yet (code → count). */
  waits: Record<string, number>;
}

async function failoverSample(
  dir: string,
  url: string,
  sim: Simulator,
  ttlMs: number,
  n: number,
): Promise<FailoverSample> {
  const schema = `failover_${ttlMs}_${n}`;
  const a = await startHost(join(dir, `${schema}-a`), url, schema, sim, ttlMs);
  const b = await startHost(join(dir, `${schema}-b`), url, schema, sim, ttlMs);
  const reader = await openPostgresStorage({ url, schema, dataDir: join(dir, `${schema}-reader`) });
  try {
    await must(a, "POST", "/v1/bots", [201], { name: "ready", botId: "ready" });
    await must(a, "POST", "/v1/bots/ready/computer", [201]);
    await must(a, "POST", "/v1/bots", [201], { name: "in flight", botId: "inflight" });
    // boat.dev holds A's next create (the key reserved, nothing committed) long enough to kill A inside it.
    await simControl(sim, "POST", "/_sim/faults", {
      rules: [{ action: "delay", method: "POST", path: "^/sandboxes$", ms: HOLD_MS, times: 1 }],
    });
    const before = ((await simControl(sim, "GET", "/_sim/stats")) as { createRequests: number })
      .createRequests;
    const pending = call(a, "POST", "/v1/bots/inflight/computer").catch(() => null);
    await msUntil(performance.now(), "A's create reaching boat.dev", async () => {
      const stats = (await simControl(sim, "GET", "/_sim/stats")) as { createRequests: number };
      return stats.createRequests > before;
    });
    const pid = a.child.pid as number;
    const lease = (await reader.instances.list()).instances.find((i) => i.pid === pid && i.state === "live");
    if (lease === undefined) throw new Error("server A holds no live instance");
    const killedAtWall = Date.now();
    const t0 = performance.now();
    a.child.kill("SIGKILL");
    await pending;
    const servesReadyMs = await msUntil(t0, "B serving the ready bot", async () => {
      const res = await call(b, "GET", "/v1/bots/ready/computer");
      return res.status === 200 && res.json?.computer?.status === "ready";
    });
    const waits: Record<string, number> = {};
    let name: string | undefined;
    const finishesInFlightMs = await msUntil(t0, "B provisioning the bot A left in flight", async () => {
      const res = await call(b, "POST", "/v1/bots/inflight/computer");
      name = res.json?.computer?.name;
      if (res.status === 200 || res.status === 201) return true;
      const code = `${res.status} ${res.json?.error?.code ?? ""}`.trim();
      waits[code] = (waits[code] ?? 0) + 1;
      return false;
    });
    // The truth at boat.dev: one Boat for the bot A left in flight, and how many create requests reached it.
    const { sandboxes } = (await simControl(sim, "GET", "/_sim/sandboxes")) as {
      sandboxes: { name: string | null }[];
    };
    const boats = sandboxes.filter((boat) => boat.name === name).length;
    if (boats !== 1)
      throw new Error(`boat.dev created ${boats} Boats named ${name} for the bot A left in flight`);
    const after = ((await simControl(sim, "GET", "/_sim/stats")) as { createRequests: number })
      .createRequests;
    return {
      ttlMs,
      createRequests: after - before,
      leasePassedMs: Math.max(0, lease.leaseUntil - killedAtWall),
      servesReadyMs,
      finishesInFlightMs,
      waits,
    };
  } finally {
    await reader.close();
    await b.close();
    await a.close();
    await simControl(sim, "DELETE", "/_sim/faults");
  }
}

/** Provisions bots [from, count) with `concurrency` in flight, bot i through hosts[i % hosts.length]; bots/s. */
async function provisionThrough(
  hosts: Host[],
  from: number,
  count: number,
  concurrency: number,
): Promise<{ ms: number; failed: number }> {
  let next = from;
  let failed = 0;
  let firstError: string | null = null;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        const i = next++;
        const host = hosts[i % hosts.length] as Host;
        const botId = `bench-${String(i).padStart(6, "0")}`;
        try {
          await must(host, "POST", "/v1/bots", [201], { name: botId, botId });
          await must(host, "POST", `/v1/bots/${botId}/computer`, [201]);
        } catch (error) {
          failed += 1;
          firstError ??= (error as Error).message;
        }
      }
    }),
  );
  const ms = performance.now() - t0;
  if (failed > 0) throw new Error(`${failed} of ${count} provisions failed; the first: ${firstError}`);
  return { ms, failed };
}

export async function runHosts(opts: SuiteOptions): Promise<SuiteResult> {
  const ttls = intList(opts.options, "ttls", opts.quick ? [1_000, 2_000] : [1_000, 2_000, 4_000]);
  const samples = intOption(opts.options, "samples", opts.quick ? 1 : 3);
  const bots = intOption(opts.options, "bots", opts.quick ? 200 : 1_000);
  const concurrency = intOption(opts.options, "concurrency", 16);
  const { dir, cleanup } = scratchDir("hosts");
  const environment = describeEnvironment(dir);
  const pg = await startPostgres();
  const sim = await startSimulator();
  const figures: Record<string, number> = {};
  const notes: string[] = [];
  try {
    const url = await pg.createDatabase("hosts");
    const failover: FailoverSample[] = [];
    for (const ttl of ttls) {
      for (let n = 0; n < samples; n++) {
        const sample = await failoverSample(dir, url, sim, ttl, n);
        console.log(`  failover, TTL ${ttl} ms: ${JSON.stringify(sample)}`);
        failover.push(sample);
      }
    }
    const failoverRows = ttls.map((ttl) => {
      const of = failover.filter((s) => s.ttlMs === ttl);
      const med = (pick: (s: FailoverSample) => number) => summarize(of.map(pick)).p50Ms;
      const lease = med((s) => s.leasePassedMs);
      const ready = med((s) => s.servesReadyMs);
      const inFlight = med((s) => s.finishesInFlightMs);
      figures[`failover.ttl${ttl}.leasePassedMs`] = Math.round(lease);
      figures[`failover.ttl${ttl}.servesReadyMs`] = Math.round(ready);
      figures[`failover.ttl${ttl}.finishesInFlightMs`] = Math.round(inFlight);
      const waits = new Map<string, number>();
      for (const s of of)
        for (const [code, k] of Object.entries(s.waits)) waits.set(code, (waits.get(code) ?? 0) + k);
      return [
        `${ttl}`,
        `${of.length}`,
        `${Math.round(lease)}`,
        `${Math.round(ready)}`,
        `${Math.round(inFlight)}`,
        fmtRatio(inFlight / ttl),
        `${Math.max(...of.map((x) => x.createRequests))}`,
        [...waits].map(([code, k]) => `${code} ×${k}`).join(", ") || "none",
      ];
    });

    // Both set-ups stay up; each provisions its first half, then its second, in the order 3, 1, 1, 3 (ABBA),
    // so warm-up and the machine's drift weigh on both alike.
    const setups = new Map<number, Host[]>();
    const runs: { label: string; servers: number; ms: number }[] = [];
    try {
      for (const servers of [3, 1]) {
        const schema = `provision_${servers}`;
        const hosts: Host[] = [];
        setups.set(servers, hosts);
        for (let i = 0; i < servers; i++)
          hosts.push(await startHost(join(dir, `${schema}-${i}`), url, schema, sim, 15_000));
        runs.push({
          label: servers === 1 ? "one server" : `${servers} servers, round-robin`,
          servers,
          ms: 0,
        });
      }
      const half = Math.floor(bots / 2);
      for (const [servers, from, to] of [
        [3, 0, half],
        [1, 0, half],
        [1, half, bots],
        [3, half, bots],
      ] as const) {
        const { ms } = await provisionThrough(setups.get(servers) as Host[], from, to, concurrency);
        (runs.find((r) => r.servers === servers) as (typeof runs)[number]).ms += ms;
        console.log(
          `  provisioning bots ${from}–${to - 1} through ${servers} server(s): ${ms.toFixed(0)} ms`,
        );
      }
    } finally {
      for (const hosts of setups.values()) for (const host of hosts) await host.close();
    }
    // Every bot billed exactly one Boat (the simulator's truth for both set-ups: two Boats per bot id).
    const stats = (await simControl(sim, "GET", "/_sim/stats")) as { perName: Record<string, number> };
    const twice = Object.entries(stats.perName).filter(([, n]) => n > 1);
    if (twice.length > 0)
      throw new Error(
        `boat.dev holds more than one live Boat for a name: ${JSON.stringify(twice.slice(0, 5))}`,
      );
    const rate = (ms: number) => bots / (ms / 1000);
    const one = runs.find((r) => r.servers === 1) as (typeof runs)[number];
    const three = runs.find((r) => r.servers === 3) as (typeof runs)[number];
    figures["provision.oneServer.botsPerS"] = Math.round(rate(one.ms) * 10) / 10;
    figures["provision.threeServers.botsPerS"] = Math.round(rate(three.ms) * 10) / 10;
    figures["provision.threeOverOne"] = Math.round((rate(three.ms) / rate(one.ms)) * 100) / 100;

    notes.push(
      `Failover: A is SIGKILLed while boat.dev holds its create (a ${HOLD_MS} ms delay fault: the key reserved, nothing committed). B serves a bot whose state is settled in PostgreSQL at once. B's provision of the bot A left in flight answers once boat.dev has finished A's held create, with exactly one Boat for that bot (checked each sample; the create requests column counts A's and B's, which reuse the journaled key), so it follows the provider's hold, not A's lease. Nothing B does waits for A's lease to pass: the lease bounds only how long a paused or cut-off A could still start a side effect itself (after that it answers 503 lease_lost), so failover time does not grow with the TTL.`,
      `Provisioning: ${bots} bots, ${concurrency} in flight, each bot created and provisioned through the same server; three servers round-robin against one, each on a fresh schema of the same PostgreSQL, with the same standalone simulator; halves in the order three, one, one, three, and no name with two live Boats at the end.`,
      `This machine has ${environment.cores} cores shared by PostgreSQL, the simulator, the servers and the load generator: three servers here measure the overhead of more processes on one database, not how hosts scale (each host of a real deployment brings its own CPU).`,
    );
    return {
      id: "hosts",
      title:
        "Several hosts on one PostgreSQL: failover after a SIGKILL, and provisioning through three servers",
      environment,
      tables: [
        {
          title: `Failover: from server A's SIGKILL until server B serves its bots (median of ${samples} per TTL; boat.dev holds A's last create ${HOLD_MS} ms)`,
          columns: [
            "lease TTL (ms)",
            "samples",
            "A's lease passed (ms after the kill, database clock)",
            "B serves a provisioned bot (ms)",
            "B finishes the create A left in flight (ms)",
            "in-flight finish ÷ TTL",
            "create requests at boat.dev for that bot (max; one Boat each time)",
            "B's answers before it succeeded",
          ],
          rows: failoverRows,
        },
        {
          title: `Provisioning ${bots} bots, ${concurrency} in flight, through three servers and through one`,
          columns: ["servers", "time (s)", "bots/s", "÷ one server"],
          rows: runs.map((r) => [
            r.label,
            (r.ms / 1000).toFixed(1),
            rate(r.ms).toFixed(1),
            fmtRatio(rate(r.ms) / rate(one.ms)),
          ]),
        },
      ],
      figures,
      notes,
    };
  } finally {
    await sim.close();
    await pg.stop();
    cleanup();
  }
}
