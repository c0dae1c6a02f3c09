/**
 * `drydock instances list` and `drydock instances declare-dead` as real processes (the CLI bundled from its
 * sources) against real drydock-server processes on a real PostgreSQL: the list shows the server's instance,
 * its pid, its lease by the database's clock and its epoch; declare-dead is refused while the lease holds
 * (exit 5) and on a stale fence (exit 4), and applies once the server was paused (SIGSTOP) past its lease;
 * the resumed server cannot renew the dead row and re-registers with a greater epoch. On a file data
 * directory both commands refuse (exit 2). Every wait is for a condition, never a duration.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { type BoatSimulator, startBoatSimulator } from "@drydock/boat-provider/simulator";
import { openStorage } from "@drydock/storage";
import { openPostgresStorage, type PostgresStorage } from "@drydock/storage-postgres";
import { createDatabaseAt } from "@drydock/test-kit/postgres";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { EXIT_CODES } from "../src/index.js";
import { type RunResult, tempRoot } from "./harness.js";

const REPO_ROOT = fileURLToPath(new URL("../../..", import.meta.url));
const SERVER_MAIN = join(REPO_ROOT, "apps", "bot-server", "src", "main.ts");
const CLI_MAIN = join(REPO_ROOT, "apps", "recovery-cli", "src", "main.ts");
const SCHEMA = "cli_instances";

let url = "";
let password = "";
let sim: BoatSimulator;
let reader: PostgresStorage;
const root = tempRoot();
const children: ChildProcess[] = [];

beforeAll(async () => {
  url = await createDatabaseAt(inject("postgresUrl"), "inst");
  password = new URL(url).password;
  sim = await startBoatSimulator({ port: 0 });
  // The test's own reads of the instances (its waits); the commands under test run as processes.
  reader = await openPostgresStorage({ url, schema: SCHEMA, dataDir: join(root, "reader") });
});
afterAll(async () => {
  for (const child of children) {
    try {
      process.kill(-(child.pid as number), "SIGCONT");
      process.kill(-(child.pid as number), "SIGKILL");
    } catch {
      // gone
    }
  }
  await sim?.close();
  await reader?.close();
  rmSync(root, { recursive: true, force: true });
});

/** drydock-server (src/main.ts via tsx) on `dataDir` and the test database; resolves once it listens. */
async function startServer(dataDir: string): Promise<{ child: ChildProcess; output: () => string }> {
  const child = spawn(process.execPath, ["--conditions=@drydock/source", "--import", "tsx", SERVER_MAIN], {
    cwd: REPO_ROOT,
    env: {
      ...process.env,
      DRYDOCK_DATA_DIR: dataDir,
      DRYDOCK_STORAGE: url,
      DRYDOCK_POSTGRES_SCHEMA: SCHEMA,
      DRYDOCK_LEASE_TTL_MS: "1500",
      BOAT_API_URL: sim.apiUrl,
      BOAT_API_TOKEN: sim.token,
      PORT: "0",
      LOG_LEVEL: "warn",
    },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  children.push(child);
  let out = "";
  child.stdout?.on("data", (d: Buffer) => {
    out += d.toString();
  });
  child.stderr?.on("data", (d: Buffer) => {
    out += d.toString();
  });
  for (let i = 0; i < 1_200 && !/listening on/.test(out); i += 1) {
    if (child.exitCode !== null) throw new Error(`the server exited:\n${out}`);
    await sleep(50);
  }
  if (!/listening on/.test(out)) throw new Error(`the server did not start:\n${out}`);
  return { child, output: () => out };
}

/** `drydock` (src/main.ts via tsx) as a real process: its exit code and output. */
async function drydock(
  dataDir: string,
  args: string[],
  env: Record<string, string> | null = null,
): Promise<RunResult> {
  const child = spawn(
    process.execPath,
    ["--conditions=@drydock/source", "--import", "tsx", CLI_MAIN, "--data-dir", dataDir, ...args],
    {
      cwd: REPO_ROOT,
      env: {
        PATH: process.env.PATH ?? "",
        HOME: process.env.HOME ?? "/tmp",
        ...(env ?? { DRYDOCK_STORAGE: url, DRYDOCK_POSTGRES_SCHEMA: SCHEMA }),
      },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let stdout = "";
  let stderr = "";
  child.stdout?.on("data", (d: Buffer) => {
    stdout += d.toString();
  });
  child.stderr?.on("data", (d: Buffer) => {
    stderr += d.toString();
  });
  const [code, signal] = (await new Promise((resolve) => child.on("close", (c, s) => resolve([c, s])))) as [
    number | null,
    NodeJS.Signals | null,
  ];
  return { code, signal, stdout, stderr };
}

/** `drydock instances declare-dead <id> --expected-state <fence> --yes` (and `extra`), as a process. */
function declareDead(dataDir: string, id: string, fence: string, extra: string[] = []): Promise<RunResult> {
  return drydock(dataDir, ["instances", "declare-dead", id, "--expected-state", fence, "--yes", ...extra]);
}

interface Listed {
  id: string;
  pid: number;
  epoch: number;
  state: string;
  leaseLeftMs: number;
  holdsLease: boolean;
  fence: string;
}

async function listed(): Promise<Listed[]> {
  return (await reader.instances.list()).instances;
}

async function until(what: string, check: (rows: Listed[]) => boolean): Promise<Listed[]> {
  for (let i = 0; i < 1_200; i += 1) {
    const rows = await listed();
    if (check(rows)) return rows;
    await sleep(50);
  }
  throw new Error(`timed out waiting until ${what}: ${JSON.stringify(await listed())}`);
}

describe("drydock instances", () => {
  it("lists the servers' instances; declare-dead refused while the lease holds and on a stale fence, applied once it passed; the resumed server re-registers", async () => {
    const dataDir = join(root, "data");
    mkdirSync(dataDir);
    const server = await startServer(dataDir);
    const pid = server.child.pid as number;
    await until("the server is listed", (rows) => rows.some((r) => r.pid === pid));
    const json = await drydock(dataDir, ["instances", "list", "--json"]);
    expect(json.code, json.stderr).toBe(0);
    const mine = (JSON.parse(json.stdout).instances as Listed[]).find((r) => r.pid === pid);
    expect(mine).toMatchObject({ pid, state: "live", holdsLease: true });
    expect(mine?.leaseLeftMs).toBeGreaterThan(0);
    const human = await drydock(dataDir, ["instances", "list"]);
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toContain(mine?.id);
    expect(human.stdout).toMatch(/lease left/);
    expect(human.stdout + human.stderr).not.toContain(password);

    const id = mine?.id as string;
    // drydock status tells the same: this server holds a lease (boat.dev is not configured here: exit 6).
    const env = { DRYDOCK_STORAGE: url, DRYDOCK_POSTGRES_SCHEMA: SCHEMA };
    const serving = await drydock(dataDir, ["status", "--json"], env);
    expect(serving.code, serving.stderr).toBe(EXIT_CODES.PROVIDER_UNAVAILABLE);
    const servingInstances = JSON.parse(serving.stdout).instances;
    expect(servingInstances.serving).toEqual(expect.arrayContaining([expect.objectContaining({ id, pid })]));
    expect(servingInstances.lapsed.some((row: { id: string }) => row.id === id)).toBe(false);
    const servingHuman = await drydock(dataDir, ["status"], env);
    expect(servingHuman.stdout).toMatch(/instances: \d+ bot-server\(s\) hold a lease \(.*pid \d+/);
    const preview = await drydock(dataDir, ["instances", "declare-dead", id]);
    expect(preview.code, preview.stderr).toBe(0);
    expect(preview.stdout).toContain("Its lease still holds");
    const heldFence = (/--expected-state (\S+)/.exec(preview.stdout) as RegExpExecArray)[1] as string;
    const refused = await declareDead(dataDir, id, heldFence);
    expect(refused.code).toBe(EXIT_CODES.UNSAFE);
    expect(refused.stderr).toContain("still holds its lease");
    expect((await listed()).find((r) => r.id === id)?.state).toBe("live");

    process.kill(-pid, "SIGSTOP");
    const [lapsed] = await until("its lease has passed", (rows) =>
      rows.some((r) => r.id === id && r.leaseLeftMs <= 0),
    ).then((rows) => rows.filter((r) => r.id === id));
    const lapsedStatus = JSON.parse((await drydock(dataDir, ["status", "--json"], env)).stdout).instances;
    expect(lapsedStatus.lapsed).toEqual(expect.arrayContaining([expect.objectContaining({ id, pid })]));
    expect(lapsedStatus.serving.some((row: { id: string }) => row.id === id)).toBe(false);
    const stale = await declareDead(dataDir, id, heldFence);
    expect(stale.code).toBe(EXIT_CODES.STATE_CHANGED);
    const applied = await declareDead(dataDir, id, lapsed?.fence as string, ["--json"]);
    expect(applied.code, applied.stderr).toBe(0);
    expect(JSON.parse(applied.stdout)).toMatchObject({ changed: true, instance: { id, state: "dead" } });

    // Resumed, the server finds its row dead (no renewal), and registers again with a greater epoch.
    process.kill(-pid, "SIGCONT");
    const after = await until("a new live instance of the server", (rows) =>
      rows.some((r) => r.pid === pid && r.state === "live" && r.epoch > (mine?.epoch as number)),
    );
    expect(after.find((r) => r.id === id)?.state).toBe("dead");
    server.child.kill("SIGTERM");
  }, 180_000);

  it("on a file data directory both commands say instances exist only with postgres (exit 2)", async () => {
    const dataDir = join(root, "file-data");
    const bound = await openStorage({ dataDir, storage: "file" });
    await bound.meta.getOrCreate("environment-id", randomUUID);
    await bound.close();
    for (const args of [
      ["instances", "list"],
      ["instances", "declare-dead", "00000000-0000-4000-8000-000000000000"],
    ]) {
      const run = await drydock(dataDir, args, {});
      expect(run.code, run.stderr).toBe(EXIT_CODES.USAGE);
      expect(run.stderr).toContain("instances exist only with the postgres backend");
    }
  });
});
