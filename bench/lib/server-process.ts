/**
 * The built bot server as a child process (`node apps/bot-server/dist/main.js`), the way an operator runs it:
 * its own data directory, port 0, the embedded boat.dev simulator, and DRYDOCK_STORAGE when a backend is
 * asked for. What it really stored into is read back from the data directory, never assumed.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "./dirs.js";

export const SERVER_MAIN = join(REPO_ROOT, "apps", "bot-server", "dist", "main.js");
export const SIMULATOR_BIN = join(REPO_ROOT, "packages", "boat-provider", "dist", "bin.js");

export type Backend = "file" | "sqlite";

export interface ServerProcess {
  url: string;
  token: string;
  pid: number;
  /** The backend the data directory holds after start (storage.json's kind, else drydock.sqlite's presence). */
  backend(): Backend;
  /** The embedded simulator's billing truth (GET /_sim/stats). */
  simulatorStats(): Promise<{ createsCommitted: number; live: number }>;
  close(): Promise<void>;
}

export function requireBuilt(path: string): void {
  if (!existsSync(path)) {
    throw new Error(
      `${path} is missing: this suite runs the built code. Run \`pnpm build\` (or \`pnpm exec turbo run build --filter=@drydock/bot-server...\`) first.`,
    );
  }
}

/** Resolves with the first match of `pattern` on the child's stdout; rejects if it exits or `ms` pass first. */
export function waitForLine(
  child: ChildProcess,
  pattern: RegExp,
  what: string,
  ms = 120_000,
): Promise<RegExpMatchArray> {
  let stdout = "";
  let stderr = "";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => fail(`did not print its address within ${ms} ms`), ms);
    const fail = (why: string) => {
      clearTimeout(timer);
      reject(new Error(`${what} ${why}; stdout: ${stdout.slice(-2000)} stderr: ${stderr.slice(-2000)}`));
    };
    child.stderr?.on("data", (chunk: Buffer) => {
      stderr += chunk.toString("utf8");
    });
    child.stdout?.on("data", (chunk: Buffer) => {
      stdout += chunk.toString("utf8");
      const match = stdout.match(pattern);
      if (match) {
        clearTimeout(timer);
        resolve(match);
      }
    });
    child.once("exit", (code, signal) => fail(`exited (code ${code}, signal ${signal}) before it was ready`));
  });
}

/** SIGTERM, then waits for the exit (SIGKILL after `ms`). */
export async function stopChild(child: ChildProcess, ms = 30_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), ms);
  await exited;
  clearTimeout(timer);
}

export async function startBuiltServer(options: {
  dataDir: string;
  storage?: Backend;
}): Promise<ServerProcess> {
  requireBuilt(SERVER_MAIN);
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    DRYDOCK_DATA_DIR: options.dataDir,
    HOST: "127.0.0.1",
    PORT: "0",
    LOG_LEVEL: "silent",
    ...(options.storage ? { DRYDOCK_STORAGE: options.storage } : {}),
  };
  const child = spawn(process.execPath, [SERVER_MAIN], { env, stdio: ["ignore", "pipe", "pipe"] });
  let match: RegExpMatchArray;
  try {
    match = await waitForLine(child, /listening on (http:\/\/\S+)/, "the bot server");
  } catch (error) {
    await stopChild(child);
    throw error;
  }
  const url = (match[1] as string).replace(/\/$/, "");
  const token = readFileSync(join(options.dataDir, "server-token"), "utf8").trim();
  const { dataDir } = options;
  return {
    url,
    token,
    pid: child.pid as number,
    backend() {
      const binding = join(dataDir, "storage.json");
      if (existsSync(binding)) {
        const kind = (JSON.parse(readFileSync(binding, "utf8")) as { kind?: unknown }).kind;
        if (kind === "file" || kind === "sqlite") return kind;
      }
      return existsSync(join(dataDir, "drydock.sqlite")) ? "sqlite" : "file";
    },
    async simulatorStats() {
      const provider = JSON.parse(readFileSync(join(dataDir, "embedded-boat-dev.json"), "utf8")) as {
        apiUrl: string;
        token: string;
      };
      const res = await fetch(`${new URL(provider.apiUrl).origin}/_sim/stats`, {
        headers: { authorization: `Bearer ${provider.token}` },
      });
      if (!res.ok) throw new Error(`the embedded simulator's /_sim/stats answered ${res.status}`);
      return (await res.json()) as { createsCommitted: number; live: number };
    },
    close: () => stopChild(child),
  };
}
