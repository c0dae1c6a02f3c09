import { startServer } from "@drydock/bot-server";
import { scratchDir } from "../lib/dirs.js";
import { describeEnvironment } from "../lib/env.js";
import { compareGet, comparisonRows, comparisonTable } from "../lib/get-compare.js";
import type { SuiteResult } from "../lib/report.js";
import { fmtMs, summarize } from "../lib/stats.js";

export async function runServer(opts: { quick: boolean }): Promise<SuiteResult> {
  const { dir, cleanup } = scratchDir("server");
  const environment = describeEnvironment(dir);
  const bots = opts.quick ? 20 : 100;
  const seconds = opts.quick ? 2 : 5;
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

    // GET /v1/bots (journals read, every bot's computer state) against a bare Fastify route that returns the
    // same bytes: the difference is drydock's per-request work (auth, journals, schema).
    const get = await compareGet({ serverUrl: server.url, path: "/v1/bots", token: server.token, seconds });
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
      },
      notes: [
        "Overhead = bare route's requests/s ÷ the server's; target under 2×.",
        "Each GET /v1/bots asks the file backend's change token (one stat of bots.json and of each journal: their identities, trusted once older than 2 s, as json-journal's peek does) and re-sends the page's remembered bytes while it, the busy bots and the 24-hour instants are unchanged; the bare route runs in a process of its own, as the server does.",
      ],
    };
  } finally {
    await server.close();
    cleanup();
  }
}
