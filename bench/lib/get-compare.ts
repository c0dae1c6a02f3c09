/**
 * A GET route of the server against a bare Fastify route sending the same bytes (same content type), with
 * autocannon on loopback: bounded (10 connections, `seconds` per round), after an untimed second of each, and
 * interleaved (bare, server, bare, server …), so a drifting machine weighs on both alike. The difference is drydock's per-request work.
 *
 * The bare route runs in a process of its own (bench/workers/bare-route.ts), as the server does: in the
 * bench's own process it would share one thread with autocannon, which capped it and flattered the ratio.
 */
import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import autocannon from "autocannon";
import { BENCH_ROOT, REPO_ROOT, scratchDir } from "./dirs.js";
import type { Table } from "./report.js";
import { stopChild, waitForLine } from "./server-process.js";
import { fmtRatio } from "./stats.js";

export interface GetComparison {
  path: string;
  bytes: number;
  bare: { reqPerSec: number; p50Ms: number; p99Ms: number };
  server: { reqPerSec: number; p50Ms: number; p99Ms: number };
  /** bare req/s ÷ server req/s (target under 2×). */
  overhead: number;
}

async function load(url: string, token: string, seconds: number): Promise<autocannon.Result> {
  const result = await autocannon({
    url,
    connections: 10,
    duration: seconds,
    headers: { authorization: `Bearer ${token}` },
  });
  // A figure from failing requests would measure the error path: refuse it.
  if (result.non2xx > 0 || result.errors > 0 || result.timeouts > 0) {
    throw new Error(
      `GET ${url} under load: ${result.non2xx} non-2xx answers, ${result.errors} errors, ${result.timeouts} timeouts — the figure would not measure the route`,
    );
  }
  return result;
}

export async function compareGet(options: {
  serverUrl: string;
  /** Path and query, e.g. `/v1/bots?limit=100`. */
  path: string;
  token: string;
  seconds: number;
  rounds?: number;
}): Promise<GetComparison> {
  const { serverUrl, path, token, seconds } = options;
  const sample = await fetch(`${serverUrl}${path}`, { headers: { authorization: `Bearer ${token}` } });
  if (sample.status !== 200) throw new Error(`GET ${path} answered ${sample.status}: ${await sample.text()}`);
  const contentType = sample.headers.get("content-type") ?? "application/json";
  const body = Buffer.from(await sample.arrayBuffer());
  const { dir, cleanup } = scratchDir("bare-route");
  const bodyFile = join(dir, "body");
  writeFileSync(bodyFile, body);
  const bare = spawn(
    process.execPath,
    [
      "--import",
      "tsx",
      join(BENCH_ROOT, "workers", "bare-route.ts"),
      new URL(path, "http://x").pathname,
      contentType,
      bodyFile,
    ],
    { cwd: REPO_ROOT, stdio: ["ignore", "pipe", "pipe"] },
  );
  try {
    const bareUrl = (await waitForLine(bare, /listening (http:\/\/\S+)/, "the bare route"))[1];
    // One untimed second of each first: both run their route's code hot (JIT-compiled) when timing starts.
    await load(`${bareUrl}${path}`, token, 1);
    await load(`${serverUrl}${path}`, token, 1);
    const rounds: { bare: autocannon.Result[]; server: autocannon.Result[] } = { bare: [], server: [] };
    for (let round = 0; round < (options.rounds ?? 2); round++) {
      rounds.bare.push(await load(`${bareUrl}${path}`, token, seconds));
      rounds.server.push(await load(`${serverUrl}${path}`, token, seconds));
    }
    const mean = (results: autocannon.Result[], pick: (r: autocannon.Result) => number) =>
      results.reduce((sum, r) => sum + pick(r), 0) / results.length;
    const summary = (results: autocannon.Result[]) => ({
      reqPerSec: mean(results, (r) => r.requests.average),
      p50Ms: mean(results, (r) => r.latency.p50),
      p99Ms: mean(results, (r) => r.latency.p99),
    });
    const bareSummary = summary(rounds.bare);
    const serverSummary = summary(rounds.server);
    return {
      path,
      bytes: body.length,
      bare: bareSummary,
      server: serverSummary,
      overhead: bareSummary.reqPerSec / serverSummary.reqPerSec,
    };
  } finally {
    await stopChild(bare);
    cleanup();
  }
}

/** The bare row and the server row of one comparison, in the suites' table format. */
export function comparisonRows(c: GetComparison, label = "drydock bot server"): string[][] {
  return [
    [
      "bare Fastify route, same body",
      c.bare.reqPerSec.toFixed(0),
      String(c.bare.p50Ms),
      String(c.bare.p99Ms),
      "—",
    ],
    [
      label,
      c.server.reqPerSec.toFixed(0),
      String(c.server.p50Ms),
      String(c.server.p99Ms),
      fmtRatio(c.overhead),
    ],
  ];
}

export function comparisonTable(title: string, rows: string[][]): Table {
  return {
    title,
    columns: ["server", "req/s", "latency p50 ms", "latency p99 ms", "bare ÷ drydock (overhead)"],
    rows,
  };
}
