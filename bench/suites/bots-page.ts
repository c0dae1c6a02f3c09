/**
 * A page of GET /v1/bots with many bots registered (`--bots`, `--storage=file|sqlite`, `--seconds`), beside
 * a bare Fastify route sending the same bytes (bench/lib/get-compare.ts, shared with the server suite): the
 * first page and a page from the middle (a cursor), on the built server. 100,000 bots need the SQLite
 * registry (the file backend caps at 4,096).
 *
 * Seeding: one `storage.importAll` of the bots into the empty store (the contract's bulk import, on every
 * backend; the file backend refuses more than 4,096). The server must then list every seeded bot (all pages
 * are walked) before anything is timed.
 */
import { join } from "node:path";
import { openStorage, type Storage } from "@drydock/storage";
import { sqliteBackend } from "@drydock/storage-sqlite";
import { intOption, type SuiteOptions } from "../lib/args.js";
import { scratchDir } from "../lib/dirs.js";
import { describeEnvironment } from "../lib/env.js";
import { compareGet, comparisonRows, comparisonTable, type GetComparison } from "../lib/get-compare.js";
import type { SuiteResult } from "../lib/report.js";
import { type Backend, startBuiltServer } from "../lib/server-process.js";
import { fmtRatio } from "../lib/stats.js";

const botIdOf = (i: number) => `bench-${String(i).padStart(6, "0")}`;

/** Seeds `n` bots; answers how, for the notes. */
async function seed(dataDir: string, kind: Backend, n: number): Promise<string> {
  const storage: Storage = await openStorage({ dataDir, storage: kind, backends: { sqlite: sqliteBackend } });
  try {
    // One import into the empty store (the contract's importAll, what `storage migrate` uses): the rows are
    // the registry's own, read back through the server below.
    const t0 = performance.now();
    const now = Date.now();
    const bots = Array.from({ length: n }, (_, i) => ({
      botId: botIdOf(i),
      name: `bench ${i}`,
      createdAt: now,
    }));
    await storage.importAll({ creates: [], deletes: [], meta: {}, bots });
    return `seeded through the storage API (storage.importAll, one transaction) in ${((performance.now() - t0) / 1000).toFixed(1)} s`;
  } finally {
    await storage.close();
  }
}

/** Walks every page; answers how many bots the server lists. */
async function countListed(url: string, token: string): Promise<number> {
  let count = 0;
  let cursor: string | null = null;
  do {
    const query: string = cursor === null ? "" : `&cursor=${encodeURIComponent(cursor)}`;
    const res = await fetch(`${url}/v1/bots?limit=500${query}`, {
      headers: { authorization: `Bearer ${token}` },
    });
    if (res.status !== 200) throw new Error(`GET /v1/bots answered ${res.status}: ${await res.text()}`);
    const page = (await res.json()) as { bots: unknown[]; nextCursor: string | null };
    count += page.bots.length;
    cursor = page.nextCursor;
  } while (cursor !== null);
  return count;
}

export async function runBotsPage(opts: SuiteOptions): Promise<SuiteResult> {
  const kind = opts.options.storage ?? "file";
  if (kind !== "file" && kind !== "sqlite") throw new Error(`--storage=${kind}: expected file or sqlite`);
  const bots = intOption(opts.options, "bots", kind === "sqlite" ? 100_000 : opts.quick ? 1_000 : 4_000);
  const seconds = intOption(opts.options, "seconds", opts.quick ? 2 : 5);
  const { dir, cleanup } = scratchDir("bots-page");
  const environment = describeEnvironment(dir);
  const dataDir = join(dir, "data");
  try {
    const how = await seed(dataDir, kind, bots);
    const server = await startBuiltServer({ dataDir, storage: kind });
    try {
      const actual = server.backend();
      if (actual !== kind) {
        throw new Error(
          `the server ran on the ${actual} backend although DRYDOCK_STORAGE=${kind} (not honoured by this build): it would not list the seeded bots. Nothing was measured.`,
        );
      }
      const listed = await countListed(server.url, server.token);
      if (listed !== bots) {
        throw new Error(
          `the server lists ${listed} bots after ${bots} were seeded: the seed did not reach it`,
        );
      }
      const middle = encodeURIComponent(
        Buffer.from(JSON.stringify({ v: 1, after: botIdOf(Math.floor(bots / 2)) }), "utf8").toString(
          "base64url",
        ),
      );
      const pages: [string, string][] = [
        ["first page", "/v1/bots?limit=100"],
        ["a middle page (cursor)", `/v1/bots?limit=100&cursor=${middle}`],
      ];
      const results: GetComparison[] = [];
      for (const [, path] of pages) {
        results.push(
          await compareGet({
            serverUrl: server.url,
            path,
            token: server.token,
            seconds,
            serverPid: server.pid,
          }),
        );
      }
      const figures: Record<string, number> = { bots, seconds };
      results.forEach((r, i) => {
        figures[`page${i}_overheadRatio`] = r.overhead;
        figures[`page${i}_reqPerSec`] = r.server.reqPerSec;
        figures[`page${i}_bareReqPerSec`] = r.bare.reqPerSec;
        figures[`page${i}_bytes`] = r.bytes;
        if (r.cpuRatio !== null) figures[`page${i}_cpuRatio`] = r.cpuRatio;
      });
      return {
        id: "bots-page",
        title: `A page of GET /v1/bots with ${bots.toLocaleString("en-US")} bots registered (${kind} backend)`,
        environment,
        tables: [
          comparisonTable(
            `100 bots per page, autocannon 10 connections, 2 alternating rounds × ${seconds} s each, on loopback`,
            results.flatMap((r, i) => comparisonRows(r, `drydock, ${pages[i]?.[0]} (${r.bytes} bytes)`)),
          ),
        ],
        figures,
        notes: [
          `Target (issue 23): under 2× the bare route with 100,000 bots registered. This run: ${results.map((r, i) => `${pages[i]?.[0]} ${fmtRatio(r.overhead)}${r.cpuRatio === null ? "" : ` (CPU per request ${fmtRatio(r.cpuRatio)})`}`).join(", ")} at ${bots.toLocaleString("en-US")} bots on ${kind}.`,
          "CPU per request: each process's user + system time (/proc/<pid>/stat, all threads) over the timed rounds ÷ the requests it answered. It does not flatten when autocannon, one thread of the bench process, is what bounds the faster route, as the req/s ratio does.",
          `Bots ${how}; the built server (DRYDOCK_STORAGE=${kind}, the backend read back from the data directory) listed all ${bots} before timing. They have no computers (no journal rows): each row's computer is the "none" view.`,
        ],
      };
    } finally {
      await server.close();
    }
  } finally {
    cleanup();
  }
}
