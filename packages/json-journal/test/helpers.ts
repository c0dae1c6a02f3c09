import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), "fixtures");

/** A fresh private directory; remove it with `rmSync(dir, { recursive: true, force: true })`. */
export function makeTempDir(): string {
  return mkdtempSync(join(tmpdir(), "drydock-json-journal-"));
}

export function removeDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}

/** Temporary files of writeFileAtomic left in `dir` (hidden `.…tmp` names). */
export function tempsIn(dir: string): string[] {
  return readdirSync(dir).filter((name) => name.endsWith(".tmp"));
}

/** A pid that certainly belonged to a process that has exited and been reaped (never a magic number). */
export function deadPid(): number {
  const child = spawnSync(process.execPath, ["-e", ""]);
  if (typeof child.pid !== "number" || child.status !== 0)
    throw new Error("could not spawn a short-lived child");
  return child.pid;
}

/** Runs a TypeScript fixture through tsx with the sources of @drydock/* packages, in its own group. */
export function spawnFixture(name: string, args: string[]): ChildProcess {
  return spawn(
    process.execPath,
    ["--conditions=@drydock/source", "--import", "tsx", join(FIXTURES, name), ...args],
    {
      cwd: dirname(FIXTURES),
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
}

/** Kills the child's whole process group; ignores a group that is already gone. */
export function killGroup(child: ChildProcess): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, "SIGKILL");
  } catch {
    // Already exited and reaped.
  }
}

/** Resolves when the child has exited (with its code and signal). */
export function exited(child: ChildProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  if (child.exitCode !== null || child.signalCode !== null) {
    return Promise.resolve({ code: child.exitCode, signal: child.signalCode });
  }
  return new Promise((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })));
}

/** Resolves when the child prints `line` on stdout; rejects if it exits first. */
export function waitForLine(child: ChildProcess, line: string): Promise<void> {
  return new Promise((resolve, reject) => {
    let buffer = "";
    let stderr = "";
    const onData = (chunk: Buffer) => {
      buffer += chunk.toString("utf8");
      if (buffer.split("\n").includes(line)) {
        child.stdout?.off("data", onData);
        resolve();
      }
    };
    child.stdout?.on("data", onData);
    child.stderr?.on("data", (chunk: Buffer) => {
      stderr += chunk.toString("utf8");
    });
    child.once("exit", (code, signal) =>
      reject(
        new Error(`fixture exited (${code ?? signal}) before printing "${line}": ${stderr.slice(0, 2000)}`),
      ),
    );
  });
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
