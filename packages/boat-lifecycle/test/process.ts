import { type ChildProcess, spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
export const CHILD = join(here, "fixtures", "lifecycle-child.ts");
const PACKAGE_DIR = join(here, "..");

export interface ChildRun {
  child: ChildProcess;
  /** Resolves when the child printed "ready" (gated runs). */
  ready: Promise<void>;
  done: Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }>;
  kill(): void;
}

/** Spawns the lifecycle child in its own process group (so a kill reaches everything it started). */
export function runChild(env: Record<string, string>): ChildRun {
  const child = spawn(process.execPath, ["--conditions=@drydock/source", "--import", "tsx", CHILD], {
    cwd: PACKAGE_DIR,
    env: { ...process.env, ...env },
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  let markReady: () => void = () => {};
  const ready = new Promise<void>((resolve) => {
    markReady = resolve;
  });
  child.stdout?.on("data", (chunk: Buffer) => {
    stdout += chunk.toString("utf8");
    if (stdout.split("\n").includes("ready")) markReady();
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString("utf8");
  });
  const done = new Promise<{
    code: number | null;
    signal: NodeJS.Signals | null;
    stdout: string;
    stderr: string;
  }>((resolve) => {
    // "close", not "exit": exit may fire before the last stdout chunk (the crash line written right
    // before SIGKILL) has been read from the pipe; close fires once the pipes are drained.
    child.on("close", (code, signal) => {
      resolve({ code, signal, stdout, stderr });
    });
  });
  return {
    child,
    ready,
    done,
    kill() {
      if (child.pid !== undefined && child.exitCode === null && child.signalCode === null) {
        try {
          process.kill(-child.pid, "SIGKILL");
        } catch {
          // already gone
        }
      }
    },
  };
}

/** The child's final JSON line, if it finished. */
export function resultOf(
  stdout: string,
): { ok: boolean; result?: unknown; error?: { code?: string; message?: string } } | null {
  const line = stdout
    .trim()
    .split("\n")
    .reverse()
    .find((candidate) => candidate.startsWith("{"));
  return line === undefined ? null : JSON.parse(line);
}
