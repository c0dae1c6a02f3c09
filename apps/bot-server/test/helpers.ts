import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll } from "vitest";
import { loadConfig } from "../src/config.js";
import { type RunningServer, startServer } from "../src/server.js";

const HERE = dirname(fileURLToPath(import.meta.url));
export const REPO_ROOT = join(HERE, "..", "..", "..");
const ENTRY = join(HERE, "fixtures", "server-entry.ts");

export function tempDir(label: string): { dir: string; cleanup(): void } {
  const dir = mkdtempSync(join(tmpdir(), `drydock-${label}-`));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

export interface ServerChild {
  child: ChildProcess;
  url: string;
  token: string;
  output(): string;
  /** Resolves with the exit code or signal once the process has ended. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  kill(): void;
}

/** Spawns the real server (via tsx on sources) in its own process group and waits for its banner. */
export async function spawnServer(dataDir: string, env: Record<string, string> = {}): Promise<ServerChild> {
  const child = spawn(process.execPath, ["--conditions=@drydock/source", "--import", "tsx", ENTRY], {
    cwd: REPO_ROOT,
    env: { ...process.env, DRYDOCK_DATA_DIR: dataDir, PORT: "0", LOG_LEVEL: "warn", ...env },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  let out = "";
  child.stdout?.on("data", (d: Buffer) => {
    out += d.toString();
  });
  child.stderr?.on("data", (d: Buffer) => {
    out += d.toString();
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on("exit", (code, signal) => resolve({ code, signal })),
  );
  const kill = () => {
    try {
      if (child.pid && child.exitCode === null && child.signalCode === null)
        process.kill(-child.pid, "SIGKILL");
    } catch {
      // already gone
    }
  };
  const deadline = Date.now() + 30_000;
  while (!/listening on (http:\/\/\S+)/.test(out)) {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(`server exited before listening:\n${out}`);
    if (Date.now() > deadline) {
      kill();
      throw new Error(`server did not start within 30 s:\n${out}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  const url = (/listening on (http:\/\/\S+)/.exec(out) as RegExpExecArray)[1] as string;
  const token = env.DRYDOCK_TOKEN ?? readFileSync(join(dataDir, "server-token"), "utf8").trim();
  return { child, url, token, output: () => out, exited, kill };
}

export type Api = (
  method: string,
  path: string,
  body?: unknown,
  headers?: Record<string, string>,
) => Promise<{
  status: number;
  // biome-ignore lint/suspicious/noExplicitAny: tests read response fields directly and assert on them.
  json: any;
  text: string;
  headers: Headers;
}>;

export function api(url: string, token: string | null): Api {
  return async (method, path, body, headers = {}) => {
    const init: RequestInit = {
      method,
      headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...headers },
    };
    if (body instanceof Uint8Array || typeof body === "string") {
      init.body = body;
      (init.headers as Record<string, string>)["content-type"] ??= "application/octet-stream";
    } else if (body !== undefined) {
      init.body = JSON.stringify(body);
      (init.headers as Record<string, string>)["content-type"] = "application/json";
    }
    const res = await fetch(`${url}${path}`, init);
    const text = await res.text();
    let json: unknown = null;
    try {
      json = JSON.parse(text);
    } catch {
      // binary or empty body
    }
    return { status: res.status, json, text, headers: res.headers };
  };
}

/**
 * A server in this process on a fresh data directory for the whole test file (started before its tests,
 * closed and removed after them); `onStart` receives it. Returns the data directory.
 */
export function inProcessServer(
  label: string,
  onStart: (server: RunningServer) => void,
): { dir: string; cleanup(): void } {
  const tmp = tempDir(label);
  let running: RunningServer | undefined;
  beforeAll(async () => {
    running = await startServer(loadConfig({ DRYDOCK_DATA_DIR: tmp.dir, PORT: "0", LOG_LEVEL: "silent" }), {
      print: () => {},
    });
    await running.startup;
    onStart(running);
  });
  afterAll(async () => {
    await running?.close();
    tmp.cleanup();
  });
  return tmp;
}
