// @drydock/test-kit (private): helpers the packages' tests share, so each suite does not grow its own copy.
import { spawn, spawnSync } from "node:child_process";

/** A pid that certainly belonged to a process which has exited and been reaped. */
export function deadPid(): number {
  const child = spawnSync(process.execPath, ["-e", ""]);
  if (typeof child.pid !== "number") throw new Error("could not spawn a process");
  return child.pid;
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
      // "close", not "exit": exit can come before the last lines are read, and a waiter would be told the
      // worker exited first although it printed what was awaited.
      child.on("close", (code, signal) => resolve({ code, signal, stderr }));
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

/**
 * Runs a fixture (as `spawnWorker`) until it prints a line `predicate` accepts, then SIGKILLs its process
 * group, as a power cut would stop it there; resolves with how it ended (the signal is SIGKILL unless it
 * exited first).
 */
export async function killWorkerAt(
  fixture: string,
  args: string[],
  predicate: (line: string) => boolean,
): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  const worker = spawnWorker(fixture, args);
  try {
    await worker.waitFor(predicate);
    worker.kill();
    const { code, signal } = await worker.exited;
    return { code, signal };
  } finally {
    worker.kill();
  }
}

/**
 * What a drydock journal answers for a file's bytes, given the original system's verdict on its text
 * (`seedVerdict`: "ok", "unreadable" or "invalid") and the rules drydock adds on top: bytes that are not
 * UTF-8 are unreadable (the original would read them as U+FFFD and write them back so); a repeated member
 * name (the original keeps one copy and writes back only it) and values nested deeper than `maxDepth` (no
 * update could write them back) are invalid; a numeric version above `knownVersion` is `newer(version)`
 * (a newer drydock wrote it: the original says invalid).
 */
export function journalVerdict(
  bytes: Uint8Array,
  seedVerdict: (text: string) => string,
  rules: { maxDepth: number; knownVersion: number; newer: (version: number) => string },
): string {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    return "unreadable";
  }
  const verdict = seedVerdict(text);
  if (verdict === "unreadable") return verdict;
  if (hasRepeatedMemberName(text) || nestingDepth(text) > rules.maxDepth) return "invalid";
  const raw: unknown = JSON.parse(text);
  const version =
    typeof raw === "object" && raw !== null ? (raw as { version?: unknown }).version : undefined;
  if (typeof version === "number" && Number.isSafeInteger(version) && version > rules.knownVersion) {
    return rules.newer(version);
  }
  return verdict;
}

/** How deep the values of a JSON text nest (a scalar is 0, `[]` and `{}` are 1), walked without recursion. */
export function nestingDepth(text: string): number {
  let deepest = 0;
  const pending: { value: unknown; depth: number }[] = [{ value: JSON.parse(text), depth: 0 }];
  while (pending.length > 0) {
    const { value, depth } = pending.pop() as { value: unknown; depth: number };
    if (value === null || typeof value !== "object") continue;
    deepest = Math.max(deepest, depth + 1);
    for (const child of Object.values(value)) pending.push({ value: child, depth: depth + 1 });
  }
  return deepest;
}

/**
 * Whether a JSON text (one JSON.parse accepts) repeats a member name within one object. An oracle for the
 * journals' refusal of such files, deliberately unlike their scanner: it counts the member names written
 * in the text and the members JSON.parse kept; a repeated name is the only way the two differ.
 */
export function hasRepeatedMemberName(text: string): boolean {
  const strings = /"(?:[^"\\]|\\.)*"/g;
  let written = 0;
  for (let match = strings.exec(text); match; match = strings.exec(text)) {
    if (/^[ \t\n\r]*:/.test(text.slice(strings.lastIndex, strings.lastIndex + 64))) written += 1;
  }
  let kept = 0;
  const pending: unknown[] = [JSON.parse(text)];
  while (pending.length > 0) {
    const value = pending.pop();
    if (Array.isArray(value)) pending.push(...value);
    else if (value !== null && typeof value === "object") {
      kept += Object.keys(value).length;
      pending.push(...Object.values(value));
    }
  }
  return written !== kept;
}

/**
 * Sets the boat.dev simulator's fault rules (POST /_sim/faults), or clears them all (an empty list:
 * DELETE /_sim/faults). `sim` is a running simulator (`startBoatSimulator`'s `url` and `token`).
 */
export async function simFaults(
  sim: { url: string; token: string },
  rules: readonly unknown[],
): Promise<void> {
  const response = await fetch(`${sim.url}/_sim/faults`, {
    method: rules.length === 0 ? "DELETE" : "POST",
    headers: { authorization: `Bearer ${sim.token}`, "content-type": "application/json" },
    ...(rules.length === 0 ? {} : { body: JSON.stringify({ rules }) }),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`the simulator refused the fault rules: ${response.status} ${text}`);
}
