import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "vitest";
import { isJournalStateError } from "../src/index.js";

/** A fresh `<tmp>/data` path (not yet created) and a cleanup for it. */
export function tempDataDir(): { root: string; dataDir: string; cleanup: () => void } {
  const root = mkdtempSync(join(tmpdir(), "drydock-bdj-"));
  return { root, dataDir: join(root, "data"), cleanup: () => rmSync(root, { recursive: true, force: true }) };
}

/** A pid that certainly belonged to a process which has exited and been reaped. */
export function deadPid(): number {
  const child = spawnSync(process.execPath, ["-e", ""]);
  if (typeof child.pid !== "number") throw new Error("could not spawn a process");
  return child.pid;
}

/** Awaits a refusal and returns it, failing the test on success or on another error class. */
export async function refusal(promise: Promise<unknown>) {
  try {
    await promise;
  } catch (error) {
    if (isJournalStateError(error)) return error;
    throw error;
  }
  throw new Error("expected a JournalStateError");
}

export async function expectPaused(promise: Promise<unknown>, detail: string): Promise<void> {
  const error = await refusal(promise);
  expect({ code: error.code, status: error.status, detail: error.detail }).toEqual({
    code: "BOAT_DELETE_PAUSED",
    status: 503,
    detail,
  });
  expect(error.message).toBe(
    `Cloud computer deletion is paused because its recovery state is ${detail}. ` +
      "Check the Boat provider before repairing drydock's local state.",
  );
}

export interface Worker {
  lines: string[];
  waitFor(predicate: (line: string) => boolean): Promise<string>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }>;
  kill(): void;
}

/** Runs a TypeScript fixture in its own process group through tsx, with the package sources. */
export function spawnWorker(fixture: string, args: string[]): Worker {
  const child = spawn(
    process.execPath,
    ["--conditions=@drydock/source", "--import", "tsx", fixture, ...args],
    {
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  const lines: string[] = [];
  const waiters: { predicate: (line: string) => boolean; resolve: (line: string) => void }[] = [];
  let buffer = "";
  let stderr = "";
  child.stdout.setEncoding("utf8");
  child.stderr.setEncoding("utf8");
  child.stdout.on("data", (chunk: string) => {
    buffer += chunk;
    let newline = buffer.indexOf("\n");
    while (newline >= 0) {
      const line = buffer.slice(0, newline);
      buffer = buffer.slice(newline + 1);
      lines.push(line);
      for (const waiter of [...waiters]) {
        if (waiter.predicate(line)) {
          waiters.splice(waiters.indexOf(waiter), 1);
          waiter.resolve(line);
        }
      }
      newline = buffer.indexOf("\n");
    }
  });
  child.stderr.on("data", (chunk: string) => {
    stderr += chunk;
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }>(
    (resolve) => {
      child.on("exit", (code, signal) => resolve({ code, signal, stderr }));
    },
  );
  return {
    lines,
    exited,
    waitFor(predicate) {
      const found = lines.find(predicate);
      if (found !== undefined) return Promise.resolve(found);
      return new Promise<string>((resolve, reject) => {
        waiters.push({ predicate, resolve });
        // A hang guard, not a timing assertion.
        void exited.then(({ code, stderr: err }) =>
          reject(new Error(`worker exited (${code}) first: ${err}`)),
        );
      });
    },
    kill() {
      if (child.pid !== undefined && child.exitCode === null && child.signalCode === null) {
        try {
          process.kill(-child.pid, "SIGKILL");
        } catch {
          // Already gone.
        }
      }
    },
  };
}
