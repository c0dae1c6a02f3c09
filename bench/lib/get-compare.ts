/**
 * A GET route of the server against a bare Fastify route sending the same bytes (same content type), with
 * autocannon on loopback: bounded (10 connections, `seconds` per round), after an untimed second of each, and
 * interleaved (bare, server, bare, server …), so a drifting machine weighs on both alike. The difference is drydock's per-request work.
 * Besides req/s, each side's CPU time per request (its process's /proc/<pid>/stat over the timed rounds):
 * when autocannon is what bounds the faster route, the req/s ratio flattens towards 1× and the CPU ratio does not.
 *
 * The bare route runs in a process of its own (bench/workers/bare-route.ts), as the server does: in the
 * bench's own process it would share one thread with autocannon, which capped it and flattered the ratio.
 */
import { spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import autocannon from "autocannon";
import { BENCH_ROOT, REPO_ROOT, scratchDir } from "./dirs.js";
import type { Table } from "./report.js";
import { stopChild, waitForLine } from "./server-process.js";
import { fmtRatio } from "./stats.js";

interface Side {
  reqPerSec: number;
  p50Ms: number;
  p99Ms: number;
  /** The process's CPU time (user + system, all threads) per request over the timed rounds; null off Linux. */
  cpuUsPerRequest: number | null;
}

export interface GetComparison {
  path: string;
  bytes: number;
  bare: Side;
  server: Side;
  /** bare req/s ÷ server req/s (target under 2×). */
  overhead: number;
  /**
   * server CPU per request ÷ bare CPU per request. Unlike the req/s ratio it does not flatten when autocannon
   * (one thread of the bench process) is what bounds the faster route; null when either was not measured.
   */
  cpuRatio: number | null;
}

/**
 * A process's CPU time so far in clock ticks (utime + stime of /proc/<pid>/stat, every thread), or null where
 * there is no /proc. USER_HZ is 100 on Linux: a tick is 10 ms.
 */
function cpuTicks(pid: number | undefined): number | null {
  if (pid === undefined) return null;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // After the command name (in parentheses, which may hold spaces): state is field 3, utime 14, stime 15.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return null;
  }
}
const US_PER_TICK = 10_000;

/** One timed round against `pid`'s route: autocannon's result and the CPU ticks the process spent in it. */
async function timedRound(url: string, token: string, seconds: number, pid: number | undefined) {
  const before = cpuTicks(pid);
  const result = await load(url, token, seconds);
  const after = cpuTicks(pid);
  return { result, ticks: before === null || after === null ? null : after - before };
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
  /** The server's process, for its CPU per request (omit for a server in the bench's own process). */
  serverPid?: number;
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
    type Round = Awaited<ReturnType<typeof timedRound>>;
    const rounds: { bare: Round[]; server: Round[] } = { bare: [], server: [] };
    for (let round = 0; round < (options.rounds ?? 2); round++) {
      rounds.bare.push(await timedRound(`${bareUrl}${path}`, token, seconds, bare.pid));
      rounds.server.push(await timedRound(`${serverUrl}${path}`, token, seconds, options.serverPid));
    }
    const mean = (results: Round[], pick: (r: autocannon.Result) => number) =>
      results.reduce((sum, r) => sum + pick(r.result), 0) / results.length;
    const summary = (results: Round[]): Side => {
      const requests = results.reduce((sum, r) => sum + r.result.requests.total, 0);
      const ticks = results.every((r) => r.ticks !== null)
        ? results.reduce((sum, r) => sum + (r.ticks as number), 0)
        : null;
      return {
        reqPerSec: mean(results, (r) => r.requests.average),
        p50Ms: mean(results, (r) => r.latency.p50),
        p99Ms: mean(results, (r) => r.latency.p99),
        cpuUsPerRequest: ticks === null || requests === 0 ? null : (ticks * US_PER_TICK) / requests,
      };
    };
    const bareSummary = summary(rounds.bare);
    const serverSummary = summary(rounds.server);
    return {
      path,
      bytes: body.length,
      bare: bareSummary,
      server: serverSummary,
      overhead: bareSummary.reqPerSec / serverSummary.reqPerSec,
      cpuRatio:
        bareSummary.cpuUsPerRequest === null || serverSummary.cpuUsPerRequest === null
          ? null
          : serverSummary.cpuUsPerRequest / bareSummary.cpuUsPerRequest,
    };
  } finally {
    await stopChild(bare);
    cleanup();
  }
}

/** The bare row and the server row of one comparison, in the suites' table format. */
export function comparisonRows(c: GetComparison, label = "drydock bot server"): string[][] {
  const cpu = (side: Side) => (side.cpuUsPerRequest === null ? "—" : side.cpuUsPerRequest.toFixed(1));
  return [
    [
      "bare Fastify route, same body",
      c.bare.reqPerSec.toFixed(0),
      String(c.bare.p50Ms),
      String(c.bare.p99Ms),
      cpu(c.bare),
      "—",
      "—",
    ],
    [
      label,
      c.server.reqPerSec.toFixed(0),
      String(c.server.p50Ms),
      String(c.server.p99Ms),
      cpu(c.server),
      fmtRatio(c.overhead),
      c.cpuRatio === null ? "—" : fmtRatio(c.cpuRatio),
    ],
  ];
}

export function comparisonTable(title: string, rows: string[][]): Table {
  return {
    title,
    columns: [
      "server",
      "req/s",
      "latency p50 ms",
      "latency p99 ms",
      "CPU µs per request",
      "bare ÷ drydock req/s (overhead)",
      "drydock ÷ bare CPU",
    ],
    rows,
  };
}
