import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { BENCH_ROOT, REPO_ROOT, scratchDir } from "../lib/dirs.js";
import { describeEnvironment } from "../lib/env.js";
import { type LockImpl, makeLocker } from "../lib/lock-impls.js";
import type { SuiteResult, Table } from "../lib/report.js";
import { fmtMs, fmtRatio, jainIndex, summarize, timeAsync, timeSync } from "../lib/stats.js";
import { measureFloor } from "./floor.js";

interface WorkerResult {
  pid: number;
  count: number;
  waitsMs: number[];
}

async function contended(impl: LockImpl, processes: number, durationMs: number): Promise<WorkerResult[]> {
  const { dir, cleanup } = scratchDir(`lock-${impl}-${processes}`);
  const lockPath = join(dir, "contended.lock");
  const goFile = join(dir, "go");
  const children = Array.from({ length: processes }, () =>
    spawn(
      process.execPath,
      [
        "--conditions=@drydock/source",
        "--import",
        "tsx",
        join(BENCH_ROOT, "workers", "lock-worker.ts"),
        impl,
        lockPath,
        goFile,
        String(durationMs),
      ],
      { cwd: REPO_ROOT, stdio: ["ignore", "pipe", "inherit"], detached: true },
    ),
  );
  try {
    const results = children.map(
      (child) =>
        new Promise<WorkerResult>((resolve, reject) => {
          const lines = createInterface({ input: child.stdout! });
          let ready = false;
          lines.on("line", (line) => {
            if (!ready && line === "ready") {
              ready = true;
              readyCount += 1;
              if (readyCount === processes) writeFileSync(goFile, "go");
              return;
            }
            try {
              resolve(JSON.parse(line) as WorkerResult);
            } catch (error) {
              reject(error);
            }
          });
          child.on("exit", (code) => {
            if (code !== 0) reject(new Error(`${impl} worker exited with ${code}`));
          });
        }),
    );
    let readyCount = 0;
    const bound = setTimeout(() => {
      for (const c of children) if (c.pid) process.kill(-c.pid, "SIGKILL");
    }, durationMs + 60_000);
    try {
      return await Promise.all(results);
    } finally {
      clearTimeout(bound);
    }
  } finally {
    for (const c of children) {
      try {
        if (c.pid && c.exitCode === null) process.kill(-c.pid, "SIGKILL");
      } catch {
        // already gone
      }
    }
    cleanup();
  }
}

export async function runLock(opts: { quick: boolean }): Promise<SuiteResult> {
  const iterations = opts.quick ? 300 : 3000;
  const durationMs = opts.quick ? 1500 : 5000;
  const { floor } = measureFloor(iterations);
  const { dir, cleanup } = scratchDir("lock-uncontended");
  const environment = describeEnvironment(dir);
  const uncontended: Record<string, number[]> = {};
  try {
    for (const impl of [
      "drydock-sync",
      "drydock-reuse-sync",
      "proper-lockfile-sync",
      "lockfile-sync",
    ] as const) {
      const locker = makeLocker(impl, join(dir, `${impl}.lock`));
      uncontended[impl] = timeSync(() => (locker.acquire() as () => void)(), iterations);
    }
    for (const impl of ["drydock", "drydock-reuse", "proper-lockfile", "lockfile"] as const) {
      const locker = makeLocker(impl, join(dir, `${impl}.lock`));
      uncontended[impl] = await timeAsync(async () => {
        await (await locker.acquire())();
      }, iterations);
    }
  } finally {
    cleanup();
  }
  const p50 = (k: string) => summarize(uncontended[k] ?? []).p50Ms;
  const uncontendedTable: Table = {
    title: `Uncontended acquire + release, ${iterations} iterations (p50 ratios: vs drydock's own path ÷ peer, and ÷ floor)`,
    columns: [
      "lock",
      "p50 ms",
      "p99 ms",
      "max ms",
      "drydock ÷ this",
      "÷ link floor (no fsync)",
      "÷ link floor (fsync)",
    ],
    rows: Object.keys(uncontended).map((k) => {
      const s = summarize(uncontended[k] ?? []);
      const mine = k.endsWith("-sync") ? p50("drydock-sync") : p50("drydock");
      return [
        k,
        fmtMs(s.p50Ms),
        fmtMs(s.p99Ms),
        fmtMs(s.maxMs),
        k.startsWith("drydock") ? "—" : fmtRatio(mine / s.p50Ms),
        fmtRatio(s.p50Ms / floor.linkLockMs),
        fmtRatio(s.p50Ms / floor.linkLockFsyncMs),
      ];
    }),
  };
  const figures: Record<string, number> = {
    floorLinkLockP50Ms: floor.linkLockMs,
    floorLinkLockFsyncP50Ms: floor.linkLockFsyncMs,
    uncontendedDrydockAsyncP50Ms: p50("drydock"),
    uncontendedDrydockSyncP50Ms: p50("drydock-sync"),
    uncontendedDrydockReuseAsyncP50Ms: p50("drydock-reuse"),
    uncontendedDrydockReuseSyncP50Ms: p50("drydock-reuse-sync"),
    uncontendedProperLockfileP50Ms: p50("proper-lockfile"),
    uncontendedLockfileP50Ms: p50("lockfile"),
  };
  const contendedRows: string[][] = [];
  for (const n of opts.quick ? [2, 4] : [2, 4, 8]) {
    for (const impl of ["drydock", "proper-lockfile", "lockfile"] as const) {
      const workers = await contended(impl, n, durationMs);
      const all = workers.flatMap((w) => w.waitsMs);
      const s = summarize(all);
      const throughput = all.length / (durationMs / 1000);
      figures[`contended${n}_${impl}_opsPerSec`] = throughput;
      figures[`contended${n}_${impl}_p99WaitMs`] = s.p99Ms;
      contendedRows.push([
        `${impl} × ${n}`,
        throughput.toFixed(0),
        fmtMs(s.p50Ms),
        fmtMs(s.p99Ms),
        fmtMs(s.maxMs),
        jainIndex(workers.map((w) => w.count)).toFixed(3),
        `${Math.min(...workers.map((w) => w.count))}–${Math.max(...workers.map((w) => w.count))}`,
      ]);
    }
  }
  return {
    id: "lock",
    title: "Lock: @drydock/file-lock vs proper-lockfile 4.1.2 and lockfile 1.0.4",
    environment,
    tables: [
      uncontendedTable,
      {
        title: `Contended: N processes loop acquire/release on one lock for ${durationMs} ms (empty critical section)`,
        columns: [
          "lock × processes",
          "sections/s",
          "wait p50 ms",
          "wait p99 ms",
          "wait max ms",
          "Jain fairness",
          "per-process sections",
        ],
        rows: contendedRows,
      },
    ],
    figures,
    notes: [
      "Retry settings: drydock retryMs 20 (jittered backoff from ~1 ms); proper-lockfile retries 3,000 (≈60 s) with minTimeout 1, maxTimeout 20, factor 1.5; lockfile pollPeriod 10 ms (no backoff).",
      "proper-lockfile's and lockfile's sync APIs cannot wait, so they appear uncontended only.",
      "Link floor: candidate write + link + unlink of the same bytes with raw fs calls (with and without fsync of the candidate).",
      "drydock-reuse rows: the same lock with reuseOwnerFile (restore-saga's state locks use it): the owner file kept from the last release is linked again, so no file is created or freed; it beats the link floor, which writes a new file every time.",
    ],
  };
}
