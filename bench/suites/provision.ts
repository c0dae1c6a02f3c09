/**
 * Bots provisioned through the built server, `--concurrency` (16) in flight: POST /v1/bots then
 * POST /v1/bots/:id/computer, with the embedded boat.dev simulator, on each backend of
 * `--bots=file=4000,sqlite=10000` (a data directory of its own each, DRYDOCK_STORAGE set), and the simulator's
 * own share: the same number of create + rename calls straight to a standalone simulator (the built
 * drydock-boat-sim, with a state file as the embedded one keeps) at the same concurrency. Throughput is
 * reported per `--window` bots (500); the contenders take turns window by window (all processes stay up), so
 * the disk's drift weighs on each alike.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { join } from "node:path";
import { createBoatClient } from "@drydock/boat-provider";
import { intOption, type SuiteOptions } from "../lib/args.js";
import { scratchDir } from "../lib/dirs.js";
import { describeEnvironment } from "../lib/env.js";
import type { SuiteResult } from "../lib/report.js";
import { CREATE_BODY } from "../lib/rows.js";
import {
  type Backend,
  requireBuilt,
  type ServerProcess,
  SIMULATOR_BIN,
  startBuiltServer,
  stopChild,
  waitForLine,
} from "../lib/server-process.js";
import { fmtRatio } from "../lib/stats.js";

interface Window {
  from: number;
  to: number;
  ms: number;
  ok: number;
  failed: number;
  firstError: string | null;
}

interface Contender {
  /** Figure prefix: the requested backend, or "simulator". */
  key: string;
  label: string;
  bots: number;
  /** Provisions bots [from, to) with `concurrency` in flight. */
  window(from: number, to: number): Promise<Window>;
  windows: Window[];
  close(): Promise<void>;
}

/** Runs `op(i)` for every i in [from, to), `concurrency` at a time; an op's failure is counted, not thrown. */
async function drive(
  from: number,
  to: number,
  concurrency: number,
  op: (i: number) => Promise<void>,
): Promise<Window> {
  let next = from;
  let ok = 0;
  let failed = 0;
  let firstError: string | null = null;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: Math.min(concurrency, to - from) }, async () => {
      while (next < to) {
        const i = next++;
        try {
          await op(i);
          ok += 1;
        } catch (error) {
          failed += 1;
          firstError ??= `bot ${i}: ${(error as Error).message}`;
        }
      }
    }),
  );
  return { from, to, ms: performance.now() - t0, ok, failed, firstError };
}

async function expectStatus(res: Response, statuses: number[], what: string): Promise<void> {
  if (!statuses.includes(res.status)) {
    throw new Error(`${what} answered ${res.status}: ${(await res.text()).slice(0, 300)}`);
  }
}

function serverContender(server: ServerProcess, key: Backend, bots: number, concurrency: number): Contender {
  const auth = { authorization: `Bearer ${server.token}` };
  return {
    key,
    label: `server, ${key}`,
    bots,
    windows: [],
    window: (from, to) =>
      drive(from, to, concurrency, async (i) => {
        const botId = `bench-${String(i).padStart(6, "0")}`;
        await expectStatus(
          await fetch(`${server.url}/v1/bots`, {
            method: "POST",
            headers: { ...auth, "content-type": "application/json" },
            body: JSON.stringify({ name: `bench ${i}`, botId }),
          }),
          [201],
          `POST /v1/bots (${botId})`,
        );
        await expectStatus(
          await fetch(`${server.url}/v1/bots/${botId}/computer`, { method: "POST", headers: auth }),
          [201],
          `POST /v1/bots/${botId}/computer`,
        );
      }),
    close: () => server.close(),
  };
}

/** The standalone simulator (built bin, state file like the embedded one), driven with create + rename. */
async function simulatorContender(dir: string, bots: number, concurrency: number): Promise<Contender> {
  requireBuilt(SIMULATOR_BIN);
  const child: ChildProcess = spawn(
    process.execPath,
    [SIMULATOR_BIN, "--port", "0", "--state-file", join(dir, "boat-simulator.json")],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  let match: RegExpMatchArray;
  try {
    match = await waitForLine(child, /BOAT_API_URL=(\S+)\nBOAT_API_TOKEN=(\S+)\n/, "drydock-boat-sim");
  } catch (error) {
    await stopChild(child);
    throw error;
  }
  const client = createBoatClient({ baseUrl: match[1] as string, token: match[2] as string });
  return {
    key: "simulator",
    label: "simulator alone (create + rename)",
    bots,
    windows: [],
    window: (from, to) =>
      drive(from, to, concurrency, async (i) => {
        const { sandbox } = await client.createSandbox(CREATE_BODY, { idempotencyKey: randomUUID() });
        await client.renameSandbox(sandbox.id, `drydock-bench-${i}`);
      }),
    close: () => stopChild(child),
  };
}

/** `file=4000,sqlite=10000` → [["file", 4000], ["sqlite", 10000]]. */
function parseBots(raw: string): [Backend, number][] {
  const pairs = raw.split(",").map((part) => {
    const [kind, count] = part.split("=");
    const n = Number(count?.replaceAll("_", ""));
    if ((kind !== "file" && kind !== "sqlite") || !Number.isSafeInteger(n) || n < 1) {
      throw new Error(
        `--bots=${raw}: expected <file|sqlite>=<count>[,…], e.g. --bots=file=4000,sqlite=10000`,
      );
    }
    return [kind, n] as [Backend, number];
  });
  return pairs;
}

const rate = (windows: readonly Window[]) =>
  windows.reduce((s, w) => s + w.ok, 0) / (windows.reduce((s, w) => s + w.ms, 0) / 1000);
const msOf = (windows: readonly Window[]) => windows.reduce((s, w) => s + w.ms, 0);

export async function runProvision(opts: SuiteOptions): Promise<SuiteResult> {
  const spec = parseBots(
    opts.options.bots ?? (opts.quick ? "file=300,sqlite=300" : "file=4000,sqlite=10000"),
  );
  const windowSize = intOption(opts.options, "window", opts.quick ? 100 : 500);
  const concurrency = intOption(opts.options, "concurrency", 16);
  const { dir, cleanup } = scratchDir("provision");
  const environment = describeEnvironment(dir);
  const contenders: Contender[] = [];
  const notes: string[] = [];
  try {
    const servers: { contender: Contender; server: ServerProcess; requested: Backend }[] = [];
    for (const [requested, bots] of spec) {
      const dataDir = join(dir, `data-${requested}`);
      const server = await startBuiltServer({ dataDir, storage: requested });
      const contender = serverContender(server, requested, bots, concurrency);
      contenders.push(contender);
      servers.push({ contender, server, requested });
    }
    const simBots = Math.max(...spec.map(([, n]) => n));
    const simulator = await simulatorContender(dir, simBots, concurrency);
    contenders.push(simulator);

    // Window by window, each contender in turn (the order reversed every other window).
    for (let w = 0, from = 0; from < simBots; w++, from += windowSize) {
      const order = w % 2 === 0 ? contenders : [...contenders].reverse();
      for (const c of order) {
        if (from >= c.bots) continue;
        const result = await c.window(from, Math.min(c.bots, from + windowSize));
        c.windows.push(result);
        console.log(
          `  ${c.label}: bots ${result.from}–${result.to - 1} in ${result.ms.toFixed(0)} ms (${result.ok} ok, ${result.failed} failed)`,
        );
      }
    }

    // The backend each server really used, and the billing truth of each embedded simulator.
    for (const { contender, server, requested } of servers) {
      const actual = server.backend();
      if (actual !== requested) {
        contender.label = `server, ${requested} requested — ran on ${actual}`;
        notes.push(
          `DRYDOCK_STORAGE=${requested} was not honoured by this build (the data directory holds the ${actual} backend): that row measures ${actual}.`,
        );
      }
      const stats = await server.simulatorStats();
      const ok = contender.windows.reduce((s, w) => s + w.ok, 0);
      if (stats.createsCommitted > contender.bots) {
        throw new Error(
          `${contender.label}: the embedded simulator billed ${stats.createsCommitted} Boats for ${contender.bots} bots — more than one Boat per bot`,
        );
      }
      notes.push(
        `${contender.label}: ${ok} of ${contender.bots} provisions answered 201; the embedded simulator billed ${stats.createsCommitted} Boats (${stats.live} live).`,
      );
    }

    // First and last `span` bots: 1,000 when there are at least 2,000, else one window.
    const span = (n: number) => (n >= 2_000 ? 1_000 : Math.min(windowSize, n));
    const head = (c: Contender, upTo: number) => c.windows.filter((w) => w.to <= upTo);
    const tail = (c: Contender) => c.windows.filter((w) => w.from >= c.bots - span(c.bots));
    const common = Math.min(4_000, ...spec.map(([, n]) => n));
    const figures: Record<string, number> = { concurrency, windowSize, commonBots: common };
    const summaryRows: string[][] = [];
    for (const c of contenders) {
      const key = c.key;
      const first = rate(head(c, span(c.bots)));
      const last = rate(tail(c));
      const failed = c.windows.reduce((s, w) => s + w.failed, 0);
      figures[`${key}_bots`] = c.bots;
      figures[`${key}_firstPerSec`] = first;
      figures[`${key}_lastPerSec`] = last;
      figures[`${key}_firstOverLast`] = first / last;
      figures[`${key}_commonPerSec`] = rate(head(c, common));
      figures[`${key}_failed`] = failed;
      summaryRows.push([
        c.label,
        String(c.bots),
        (msOf(c.windows) / 1000).toFixed(1),
        rate(head(c, common)).toFixed(1),
        first.toFixed(1),
        last.toFixed(1),
        fmtRatio(first / last),
        String(failed),
      ]);
    }
    const sim = contenders[contenders.length - 1] as Contender;
    const shareRows = servers.map(({ contender }) => {
      const serverMs = msOf(head(contender, common));
      const simMs = msOf(head(sim, common));
      figures[`${contender.key}_simulatorShare`] = simMs / serverMs;
      return [
        contender.label,
        (serverMs / 1000).toFixed(1),
        (simMs / 1000).toFixed(1),
        `${((100 * simMs) / serverMs).toFixed(0)}%`,
      ];
    });
    const honoured = servers.every(({ server, requested }) => server.backend() === requested);
    if (!honoured) {
      notes.unshift("SQLite ÷ file: not measured (the sqlite row did not run on SQLite).");
    } else if (figures.sqlite_commonPerSec !== undefined && figures.file_commonPerSec !== undefined) {
      figures.sqliteOverFile = figures.sqlite_commonPerSec / figures.file_commonPerSec;
      notes.unshift(
        `SQLite ÷ file throughput over the first ${common} bots: ${fmtRatio(figures.sqliteOverFile)} (target ≥ 5×).`,
      );
    }
    notes.unshift(
      "Targets (issue 23): SQLite ≥ 5× the file backend's throughput over the first 4,000 bots; SQLite's last 1,000 within 1.3× of its first 1,000 (first ÷ last ≤ 1.3×).",
    );
    notes.push(
      "Each provision is POST /v1/bots then POST /v1/bots/:id/computer (201 each) against the built server (node apps/bot-server/dist/main.js, LOG_LEVEL=silent) and its embedded simulator; a failed provision is counted, not retried, and the first error of each window is listed below. Per-second figures count the provisions that answered 201.",
      "Simulator alone: the built drydock-boat-sim with a state file (as the embedded one keeps) driven with createSandbox + renameSandbox at the same concurrency, no listing; its share is its time ÷ the server's for the same bots.",
    );
    const windowRows = contenders.flatMap((c) =>
      c.windows.map((w) => [
        c.label,
        `${w.from}–${w.to - 1}`,
        (w.ok / (w.ms / 1000)).toFixed(1),
        String(w.failed),
        w.firstError ? w.firstError.slice(0, 320).replaceAll("|", "\\|") : "",
      ]),
    );
    return {
      id: "provision",
      title: "Provisioning through the server: throughput per backend, and the simulator's share",
      environment,
      tables: [
        {
          title: `Bots provisioned ${concurrency} at a time (first/last: ${span(simBots) === 1_000 ? "1,000" : "one window of"} bots)`,
          columns: [
            "contender",
            "bots",
            "total s",
            `per s, first ${common}`,
            "per s, first",
            "per s, last",
            "first ÷ last",
            "failed",
          ],
          rows: summaryRows,
        },
        {
          title: `The simulator's share over the first ${common} bots`,
          columns: ["server", "server s", "simulator alone s", "share"],
          rows: shareRows,
        },
        {
          title: `Per window of ${windowSize} bots`,
          columns: ["contender", "bots", "per s", "failed", "first error"],
          rows: windowRows,
        },
      ],
      figures,
      notes,
    };
  } finally {
    for (const c of contenders) await c.close();
    cleanup();
  }
}
