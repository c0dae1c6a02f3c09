import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import * as fs from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { inspectWorkspaceLock, RESTORE_CRASH_POINTS } from "../src/index.js";
import {
  makeRestoreFixture,
  makeTempDir,
  type RecoveryOutcome,
  recoverRestore,
  removeDir,
  sameTree,
  snapshotTree,
} from "./helpers.js";

const FIXTURE = fileURLToPath(new URL("./fixtures/restore-child.ts", import.meta.url));
const PACKAGE_DIR = fileURLToPath(new URL("..", import.meta.url));
const FILES = 200;

/** What recovery may find after a kill at each named point (the phase is a durable lower bound). */
const EXPECTED: Record<string, readonly RecoveryOutcome[]> = {
  "saga.after-genesis-head": ["none"],
  "saga.after-event-published": ["aborted"],
  "saga.after-head-published": ["aborted"],
  "restore.after-created": ["aborted"],
  "restore.after-lock-acquired": ["aborted"],
  "restore.after-locked": ["aborted"],
  "restore.after-prepared": ["aborted"],
  "restore.after-intent-committed": ["aborted"],
  "checkpoint.after-blobs": ["aborted"],
  "checkpoint.after-manifest": ["aborted"],
  "restore.after-safety-checkpoint": ["aborted"],
  "restore.after-safety-ready": ["aborted"],
  "restore.after-mutation-started": ["rolled_back"],
  "restore.after-entry-applied": ["rolled_back"],
  "restore.after-workspace-applied": ["rolled_back"],
  "restore.after-completed": ["released"],
  "restore.after-release": ["released"],
  "saga.after-archive-rename": ["archived"],
  "restore.after-archive": ["archived"],
};

// Every point of a forward restore, plus later occurrences of the repeating ones. A random kill moment
// (ms after "go") is added for a few more runs.
const SWEEP: { point: string; expected: readonly RecoveryOutcome[] | null; killAfterMs?: number }[] = [
  ...RESTORE_CRASH_POINTS.filter((point) => point !== "rollback.after-entry-applied").map((point) => ({
    point,
    expected: EXPECTED[point] ?? null,
  })),
  { point: "saga.after-event-published#4", expected: ["aborted"] },
  { point: "restore.after-entry-applied#60", expected: ["rolled_back"] },
  ...[300, 1200].map((killAfterMs) => ({
    point: "",
    expected: null,
    killAfterMs: killAfterMs + Math.floor(Math.random() * 400),
  })),
];

interface Child {
  proc: ChildProcessWithoutNullStreams;
  ready: Promise<void>;
  exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  output: () => string;
}

function spawnChild(args: string[], point: string): Child {
  const proc = spawn(
    process.execPath,
    ["--conditions=@drydock/source", "--import", "tsx", FIXTURE, ...args],
    {
      cwd: PACKAGE_DIR,
      detached: true,
      env: { ...process.env, DRYDOCK_CRASH_POINT: point },
      stdio: ["pipe", "pipe", "pipe"],
    },
  );
  // A child killed before it read "go" must not crash the test with EPIPE.
  proc.stdin.on("error", () => {});
  let out = "";
  let err = "";
  const ready = new Promise<void>((resolve, reject) => {
    proc.stdout.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes("ready\n")) resolve();
    });
    proc.stderr.on("data", (chunk: Buffer) => {
      err += chunk.toString();
    });
    proc.on("exit", () => reject(new Error(`child exited before ready: ${err.slice(0, 2000)}`)));
  });
  ready.catch(() => {});
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    proc.on("exit", (code, signal) => resolve({ code, signal })),
  );
  return { proc, ready, exit, output: () => `${out}${err}` };
}

function killGroup(child: Child): void {
  try {
    process.kill(-child.proc.pid!, "SIGKILL");
  } catch {
    // Already gone.
  }
}

/** Every file (not directory) under the data directory's staging area. */
function stagedFiles(dataDir: string): string[] {
  const staging = join(dataDir, "restore-staging");
  if (!fs.existsSync(staging)) return [];
  return fs
    .readdirSync(staging, { recursive: true })
    .map(String)
    .filter((rel) => !fs.statSync(join(staging, rel)).isDirectory());
}

describe("restore kill loop", () => {
  let base: string;
  let template: string;
  let runDir: string;
  let after: Map<string, string>;
  let checkpointId: string;
  const children: Child[] = [];

  beforeAll(async () => {
    base = makeTempDir("kill");
    runDir = join(base, "run");
    template = join(base, "template");
    // The fixture is built AT the run path (manifests record the workspace root), then kept as a template
    // that every run copies back into place.
    const fixture = await makeRestoreFixture(runDir, FILES);
    after = fixture.after;
    checkpointId = fixture.checkpointId;
    fs.cpSync(join(runDir, "workspace"), join(template, "workspace"), { recursive: true });
  });

  afterAll(() => {
    for (const child of children) killGroup(child);
    removeDir(base);
  });

  it("leaves the workspace before or after, and the chain verified, whatever moment the restore is killed", async () => {
    const workspace = join(runDir, "workspace");
    const dataDir = join(runDir, "data");
    const before = snapshotTree(workspace);
    const tally: Record<string, number> = {};
    // Children load (tsx) a few runs ahead, so their start-up overlaps earlier runs. Each run restores
    // under its own operation id into the same data directory; the workspace is reset from the template
    // only when a run left it in its "after" state.
    const queue: Child[] = [];
    const fill = (from: number): void => {
      while (queue.length < 3 && from + queue.length < SWEEP.length) {
        const index = from + queue.length;
        const child = spawnChild([dataDir, workspace, checkpointId, `kill-${index}`], SWEEP[index]!.point);
        children.push(child);
        queue.push(child);
      }
    };
    for (let index = 0; index < SWEEP.length; index += 1) {
      const run = SWEEP[index]!;
      fill(index);
      const child = queue.shift()!;
      await child.ready;
      fill(index + 1);
      child.proc.stdin.write("go\n");
      let timer: NodeJS.Timeout | undefined;
      if (run.killAfterMs !== undefined) timer = setTimeout(() => killGroup(child), run.killAfterMs);
      // Hang guard only: a run that neither finishes nor dies is killed and fails below.
      const guard = setTimeout(() => killGroup(child), 30_000);
      const exit = await child.exit;
      clearTimeout(guard);
      if (timer) clearTimeout(timer);
      const label = `${run.point || `random ${run.killAfterMs} ms`} (${child.output().slice(0, 300)})`;
      if (run.point !== "") expect(exit.signal, label).toBe("SIGKILL");
      else expect(exit.signal === "SIGKILL" || exit.code === 0, label).toBe(true);

      const operationId = `kill-${index}`;
      const recovered = await recoverRestore({ dataDir, workspaceRoot: workspace, operationId });
      tally[recovered.outcome] = (tally[recovered.outcome] ?? 0) + 1;
      if (run.expected) expect(run.expected, label).toContain(recovered.outcome);
      const now = snapshotTree(workspace);
      const completed = recovered.saga?.phase === "completed";
      expect(
        sameTree(now, completed ? after : before),
        `${label}: workspace is ${completed ? "after" : "before"}`,
      ).toBe(true);
      expect(inspectWorkspaceLock({ dataDir, workspaceRoot: workspace }), label).toBeNull();
      // Files the killed apply staged are never promoted, and never pile up: recovery removes them.
      expect(stagedFiles(dataDir), label).toEqual([]);
      if (recovered.saga) {
        expect(recovered.saga.archived, label).toBe(true);
        expect(recovered.saga.terminal, label).toBe(true);
      }
      if (completed) {
        removeDir(workspace);
        fs.cpSync(join(template, "workspace"), workspace, { recursive: true });
        expect(sameTree(snapshotTree(workspace), before)).toBe(true);
      }
    }
    // The sweep really visited both sides of the mutation boundary.
    expect(tally.aborted ?? 0).toBeGreaterThan(5);
    expect(tally.rolled_back ?? 0).toBeGreaterThan(3);
  }, 120_000);
});
