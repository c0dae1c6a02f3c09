import { startServer } from "@drydock/bot-server";
import { scratchDir } from "../lib/dirs.js";
import { describeEnvironment } from "../lib/env.js";
import { compareGet, comparisonRows, comparisonTable, type GetComparison } from "../lib/get-compare.js";
import type { SuiteResult } from "../lib/report.js";
import { startBuiltServer } from "../lib/server-process.js";
import { fmtMs, summarize } from "../lib/stats.js";

/**
 * `bots` bots created, then provisioned at the same moment (each its own Boat, against the embedded
 * simulator), on a server in this process, closed after: the data directory keeps the bots and their Boats.
 */
async function provisionAll(dir: string, bots: number) {
  const server = await startServer(
    { dataDir: dir, host: "127.0.0.1", port: 0, logLevel: "silent", maxFileBytes: 8 * 1024 * 1024 },
    { print: () => {} },
  );
  try {
    await server.startup;
    const headers = { authorization: `Bearer ${server.token}`, "content-type": "application/json" };
    for (let i = 0; i < bots; i++) {
      const res = await fetch(`${server.url}/v1/bots`, {
        method: "POST",
        headers,
        body: JSON.stringify({ name: `bench ${i}`, botId: `bench-${i}` }),
      });
      if (res.status !== 201) throw new Error(`creating bot ${i}: ${res.status}`);
    }
    // N bots provisioned at the same moment, each its own Boat, against the embedded simulator.
    const latencies: number[] = [];
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: bots }, async (_, i) => {
        const s = performance.now();
        const res = await fetch(`${server.url}/v1/bots/bench-${i}/computer`, {
          method: "POST",
          headers: { authorization: headers.authorization },
        });
        latencies.push(performance.now() - s);
        if (res.status !== 201) throw new Error(`provisioning bot ${i}: ${res.status} ${await res.text()}`);
      }),
    );
    const totalMs = performance.now() - t0;
    const billed = server.simulator?.stats().createsCommitted ?? Number.NaN;
    const provision = summarize(latencies);
    return { totalMs, billed, provision };
  } finally {
    await server.close();
  }
}

export async function runServer(opts: { quick: boolean }): Promise<SuiteResult> {
  const { dir, cleanup } = scratchDir("server");
  const environment = describeEnvironment(dir);
  const bots = opts.quick ? 20 : 100;
  const seconds = opts.quick ? 2 : 5;
  try {
    const { totalMs, billed, provision } = await provisionAll(dir, bots);
    // GET /v1/bots (journals read, every bot's computer state) against a bare Fastify route that returns the
    // same bytes: the difference is drydock's per-request work (auth, journals, schema). On the built server
    // in a process of its own, on the same data directory, as the bare route has one: in this process it
    // would share a thread with autocannon.
    const get = await compareOnBuiltServer(dir, bots, seconds);
    return {
      id: "server",
      title: "Bot server: concurrent provisioning and GET throughput",
      environment,
      tables: [
        {
          title: `${bots} bots provisioned concurrently (embedded boat.dev simulator on loopback)`,
          columns: ["bots", "total ms", "p50 ms", "p99 ms", "Boats billed"],
          rows: [
            [
              String(bots),
              totalMs.toFixed(0),
              fmtMs(provision.p50Ms),
              fmtMs(provision.p99Ms),
              String(billed),
            ],
          ],
        },
        comparisonTable(
          `GET /v1/bots with ${bots} bots, autocannon 10 connections, 2 alternating rounds × ${seconds} s each, on loopback`,
          comparisonRows(get),
        ),
      ],
      figures: {
        provisionBots: bots,
        provisionTotalMs: totalMs,
        provisionP99Ms: provision.p99Ms,
        boatsBilled: billed,
        getBotsReqPerSec: get.server.reqPerSec,
        bareReqPerSec: get.bare.reqPerSec,
        getBotsOverheadRatio: get.overhead,
        ...(get.cpuRatio === null ? {} : { getBotsCpuRatio: get.cpuRatio }),
      },
      notes: [
        "Overhead = bare route's requests/s ÷ the server's; target under 2×. CPU per request: each process's user + system time (/proc/<pid>/stat) over the timed rounds ÷ its requests; where autocannon (one thread of the bench process) bounds both routes, the req/s ratio reads near 1× and only the CPU ratio shows drydock's own work.",
        "Each GET /v1/bots asks the file backend's change token (one stat of bots.json and of each journal: their identities, trusted once older than 2 s, as json-journal's peek does) and re-sends the page's remembered bytes while it, the busy bots and the 24-hour instants are unchanged; the built server (node apps/bot-server/dist/main.js, LOG_LEVEL=silent) and the bare route each run in a process of their own, on the data directory the provisioning above left.",
      ],
    };
  } finally {
    cleanup();
  }
}

/** The GET comparison against the built server started on `dataDir`, once it lists every bot with a Boat. */
async function compareOnBuiltServer(dataDir: string, bots: number, seconds: number): Promise<GetComparison> {
  const built = await startBuiltServer({ dataDir, storage: "file" });
  try {
    const res = await fetch(`${built.url}/v1/bots?limit=500`, {
      headers: { authorization: `Bearer ${built.token}` },
    });
    const page = (await res.json()) as { bots?: { computer?: { status?: string } }[] };
    const ready = page.bots?.filter((b) => b.computer?.status === "ready").length ?? 0;
    if (res.status !== 200 || ready !== bots) {
      throw new Error(
        `the built server lists ${ready} bots with a ready computer (status ${res.status}) after ${bots} were provisioned: nothing was measured`,
      );
    }
    return await compareGet({
      serverUrl: built.url,
      path: "/v1/bots",
      token: built.token,
      seconds,
      serverPid: built.pid,
    });
  } finally {
    await built.close();
  }
}
