import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { createServer, request as httpRequest, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { type BoatSimulator, startBoatSimulator } from "@drydock/boat-provider/simulator";
import { STORAGE_BINDING_FILE } from "@drydock/facts";
import { createDatabaseAt, type FaultProxy, startFaultProxy } from "@drydock/test-kit/postgres";
import { afterAll, beforeAll, inject } from "vitest";
import { loadConfig } from "../src/config.js";
import { type RunningServer, startServer } from "../src/server.js";

const HERE = dirname(fileURLToPath(import.meta.url));
export const REPO_ROOT = join(HERE, "..", "..", "..");
const ENTRY = join(HERE, "fixtures", "server-entry.ts");
/** The server with main.ts's signal handling and a GET /v1/computers that can be slowed or hung. */
export const SHUTDOWN_ENTRY = join(HERE, "fixtures", "shutdown-entry.ts");

/** The storage backends the server's suites run on (DRYDOCK_STORAGE). */
export const TEST_STORAGES = ["file", "sqlite"] as const;
export type TestStorage = (typeof TEST_STORAGES)[number];

/** The backends the end-to-end suite runs on: the two above, and postgres (a real PostgreSQL from test-kit). */
export type E2eStorage = TestStorage | "postgres";

/**
 * The environment that runs a server on `dir` with `storage`: DRYDOCK_STORAGE, and for postgres the URL of the
 * test file's database (DRYDOCK_TEST_POSTGRES_URL, set by `usePostgresDatabase`) and a schema of the directory's
 * own (DRYDOCK_POSTGRES_SCHEMA), so each data directory of a test has a store of its own.
 */
export function storageEnv(storage: E2eStorage, dir: string): Record<string, string> {
  if (storage !== "postgres") return { DRYDOCK_STORAGE: storage };
  const url = process.env.DRYDOCK_TEST_POSTGRES_URL;
  if (url === undefined)
    throw new Error("DRYDOCK_TEST_POSTGRES_URL is unset: call usePostgresDatabase() first");
  return { DRYDOCK_STORAGE: url, DRYDOCK_POSTGRES_SCHEMA: schemaOf(dir) };
}

/** A schema name of the directory's own (its path hashed). */
export function schemaOf(dir: string): string {
  return `d_${createHash("sha256").update(dir).digest("hex").slice(0, 24)}`;
}

// What the project's global setup provides (test-kit's postgres-global-setup declares it too; repeated here
// so that a project type-checking these helpers without that setup, the console's tests, knows the key).
declare module "vitest" {
  export interface ProvidedContext {
    postgresUrl: string;
  }
}

/**
 * A fresh database for this test file in the project's PostgreSQL cluster (the bot-server project's global
 * setup starts one), registered in a beforeAll; its URL in DRYDOCK_TEST_POSTGRES_URL (children inherit it).
 */
export function usePostgresDatabase(): () => string {
  let url = "";
  beforeAll(async () => {
    url = await createDatabaseAt(inject("postgresUrl"), "bs");
    process.env.DRYDOCK_TEST_POSTGRES_URL = url;
  });
  return () => url;
}

/**
 * For a file that runs real servers on postgres: a standalone simulator and test-kit's fault proxy in front of
 * the file's database (both started in a beforeAll), a temp directory, and the servers it spawns (push them to
 * `servers`), all stopped after the file: a SIGSTOPped server is resumed first, then killed.
 */
export function usePostgresServers(databaseUrl: () => string, label: string) {
  const fleet = {
    sim: undefined as unknown as BoatSimulator,
    proxy: undefined as unknown as FaultProxy,
    tmp: tempDir(label),
    servers: [] as ServerChild[],
  };
  beforeAll(async () => {
    fleet.sim = await startBoatSimulator({ port: 0 });
    fleet.proxy = await startFaultProxy(Number(new URL(databaseUrl()).port));
  });
  afterAll(async () => {
    for (const server of fleet.servers) {
      try {
        if (server.child.pid) process.kill(-server.child.pid, "SIGCONT");
      } catch {
        // gone
      }
      server.kill();
    }
    await fleet.proxy?.close();
    await fleet.sim?.close();
    fleet.tmp.cleanup();
  });
  return fleet;
}

/**
 * Binds `dir` to `storage` as a server's first start would (`<dir>/storage.json`), so files a test seeds
 * before that start (a bots.json, a journal) never bind it to `file` by their presence. Never rebinds.
 */
export function bindTestStorage(dir: string, storage: E2eStorage): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const path = join(dir, STORAGE_BINDING_FILE);
  if (!existsSync(path)) writeFileSync(path, JSON.stringify({ version: 1, kind: storage }), { mode: 0o600 });
}

/**
 * Mounts a tmpfs of `size` (e.g. "64k") at `dir`, to fill it for a REAL full disk. Needs root
 * (CAP_SYS_ADMIN): without it this throws (the test fails, never skips). `unmountTmpfs` undoes it.
 */
export function mountTmpfs(dir: string, size: string): void {
  mkdirSync(dir, { recursive: true });
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", `size=${size}`, "tmpfs", dir]);
  } catch (error) {
    throw new Error(
      `this test mounts a small tmpfs to fill it and needs root / CAP_SYS_ADMIN: ${String(error)}`,
    );
  }
}

export function unmountTmpfs(dir: string): void {
  execFileSync("umount", [dir]);
  rmSync(dir, { recursive: true, force: true });
}

export function tempDir(label: string): { dir: string; cleanup(): void } {
  const dir = mkdtempSync(join(tmpdir(), `drydock-${label}-`));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** The environment of a `drydock-server` on `dir` talking to the simulator `sim`, plus `env`. */
export function serverEnv(
  dir: string,
  sim: { apiUrl: string; token: string },
  env: Record<string, string> = {},
): Record<string, string> {
  return {
    ...(process.env as Record<string, string>),
    DRYDOCK_DATA_DIR: dir,
    PORT: "0",
    LOG_LEVEL: "warn",
    BOAT_API_URL: sim.apiUrl,
    BOAT_API_TOKEN: sim.token,
    ...env,
  };
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
export async function spawnServer(
  dataDir: string,
  env: Record<string, string> = {},
  options: { entry?: string } = {},
): Promise<ServerChild> {
  const entry = options.entry ?? ENTRY;
  const child = spawn(process.execPath, ["--conditions=@drydock/source", "--import", "tsx", entry], {
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
  /** More of the server's environment, e.g. DRYDOCK_STORAGE. */
  env: NodeJS.ProcessEnv = {},
): { dir: string; cleanup(): void } {
  const tmp = tempDir(label);
  let running: RunningServer | undefined;
  beforeAll(async () => {
    running = await startServer(
      loadConfig({ DRYDOCK_DATA_DIR: tmp.dir, PORT: "0", LOG_LEVEL: "silent", ...env }),
      { print: () => {} },
    );
    await running.startup;
    onStart(running);
  });
  afterAll(async () => {
    await running?.close();
    tmp.cleanup();
  });
  return tmp;
}

/**
 * Every file under `root`, keyed by its path relative to `root`, with its bytes in `encoding` (utf8 by
 * default; base64 compares binary files byte for byte). Names `skip` accepts are left out (with everything
 * below them); anything that is neither a file nor a directory is recorded as "<not a regular file>".
 * A missing `root` gives {}.
 */
export function snapshotTree(
  root: string,
  options: { encoding?: BufferEncoding; skip?: (name: string) => boolean } = {},
): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (options.skip?.(entry.name)) continue;
      const p = join(dir, entry.name);
      if (entry.isDirectory()) walk(p);
      else
        out[relative(root, p)] = entry.isFile()
          ? readFileSync(p, options.encoding ?? "utf8")
          : "<not a regular file>";
    }
  };
  try {
    if (statSync(root).isDirectory()) walk(root);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
  }
  return out;
}

/** One request that went through a recording proxy, as the proxy saw it. */
export interface RecordedCall {
  /** 1, 2, … in order of arrival. */
  seq: number;
  method: string;
  /** The request target as sent (path and query), e.g. `/api/v1/sandboxes/bx_…`. */
  path: string;
  /** The Idempotency-Key header, when one was sent. */
  idempotencyKey?: string;
  /** Date.now() when the request's headers arrived at the proxy. */
  arrivedAt: number;
  /** Date.now() when the target's answer (or its dropped connection) came back; unset while in flight. */
  doneAt?: number;
  /** The target's status; unset when the target dropped the connection. */
  status?: number;
  /** The target's body parsed as JSON (null when it is not JSON). */
  // biome-ignore lint/suspicious/noExplicitAny: tests read provider answers' fields directly.
  json?: any;
  /** Why the target gave no answer (its connection dropped), if so. */
  error?: string;
  /** The answer was written to the caller's connection (false: the target dropped it, or the caller was gone). */
  delivered: boolean;
  /** Free for the `onArrive` hook (e.g. which server process sent it). */
  tag?: unknown;
}

export interface RecordingProxy {
  /** The proxy's origin, `http://127.0.0.1:PORT`; paths are forwarded unchanged. */
  url: string;
  /** Every request so far, in order of arrival. */
  calls: RecordedCall[];
  /** Resolves once no forwarded request is still waiting for the target. */
  idle(): Promise<void>;
  close(): Promise<void>;
}

const HOP_BY_HOP = new Set(["connection", "keep-alive", "transfer-encoding", "content-length", "host"]);

function forwardableHeaders(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined && !HOP_BY_HOP.has(name)) out[name] = value;
  }
  return out;
}

/**
 * A loopback HTTP proxy in front of `target` (an origin, e.g. the boat.dev simulator's `url`) that records
 * every request: when it arrived, when the target answered, what it answered and whether that answer reached
 * the caller. A request is forwarded whole once its body has arrived and is always run to the end at the
 * target, even if the caller dies meanwhile (as the real provider would), so `doneAt` is when the target
 * finished with it. A connection the target drops is dropped towards the caller too. `onArrive` runs
 * synchronously when a request's headers arrive, before anything is forwarded; `beforeForward`, when given,
 * is awaited once the body has arrived and before it is forwarded (its failure is ignored).
 */
export async function startRecordingProxy(
  target: string,
  options: {
    onArrive?: (call: RecordedCall) => void;
    /** Awaited before the request is forwarded (e.g. to read a database as it stood when the call left). */
    beforeForward?: (call: RecordedCall) => Promise<void>;
  } = {},
): Promise<RecordingProxy> {
  const origin = new URL(target);
  const calls: RecordedCall[] = [];
  let inFlight = 0;
  let waiters: (() => void)[] = [];
  const settle = () => {
    inFlight -= 1;
    if (inFlight === 0) {
      for (const wake of waiters) wake();
      waiters = [];
    }
  };
  const server = createServer((req, res) => {
    const key = req.headers["idempotency-key"];
    const call: RecordedCall = {
      seq: calls.length + 1,
      method: req.method ?? "GET",
      path: req.url ?? "/",
      ...(typeof key === "string" ? { idempotencyKey: key } : {}),
      arrivedAt: Date.now(),
      delivered: false,
    };
    calls.push(call);
    options.onArrive?.(call);
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("error", () => {
      // The caller died while sending: nothing is forwarded (see 'end').
    });
    req.on("end", async () => {
      const body = Buffer.concat(chunks);
      inFlight += 1;
      await options.beforeForward?.(call).catch(() => {});
      const upstream = httpRequest(
        {
          host: origin.hostname,
          port: origin.port,
          method: call.method,
          path: call.path,
          headers: { ...forwardableHeaders(req.headers), "content-length": String(body.length) },
          agent: false,
        },
        (answer) => {
          const parts: Buffer[] = [];
          answer.on("data", (chunk: Buffer) => parts.push(chunk));
          answer.on("error", (error) => {
            if (call.doneAt !== undefined) return;
            call.error = error.message;
            call.doneAt = Date.now();
            req.socket.destroy();
            settle();
          });
          answer.on("end", () => {
            const text = Buffer.concat(parts);
            call.status = answer.statusCode ?? 0;
            call.doneAt = Date.now();
            try {
              call.json = JSON.parse(text.toString("utf8"));
            } catch {
              call.json = null;
            }
            settle();
            if (res.destroyed || req.socket.destroyed) return;
            res.writeHead(call.status, {
              ...forwardableHeaders(answer.headers),
              "content-length": String(text.length),
            });
            res.end(text, () => {
              call.delivered = true;
            });
          });
        },
      );
      upstream.on("error", (error) => {
        if (call.doneAt !== undefined) return;
        call.error = error.message;
        call.doneAt = Date.now();
        req.socket.destroy();
        settle();
      });
      upstream.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    calls,
    idle: () => (inFlight === 0 ? Promise.resolve() : new Promise<void>((wake) => waiters.push(wake))),
    async close() {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}
