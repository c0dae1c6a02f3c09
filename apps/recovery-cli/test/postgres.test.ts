/**
 * `drydock` on the postgres backend (a real PostgreSQL: the project's global setup starts one cluster, this
 * file gets a database): `status` and `creates list` read the rows a store in the database holds, the URL
 * comes from --storage, DRYDOCK_STORAGE or DRYDOCK_STORAGE_FILE (the binding never holds it), and its
 * password is never printed. A CLI host whose clock is an hour off stamps nothing with it (the database's clock
 * rules), and the commands of local files (locks list/gc, restores list) answer on a postgres-bound directory
 * with or without the URL. In-process `main` with buffer streams.
 */
import { spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { createBoatLifecycle, scopedBoatName } from "@drydock/boat-lifecycle";
import { createBoatClient } from "@drydock/boat-provider";
import { startBoatSimulator } from "@drydock/boat-provider/simulator";
import { openSagaStore } from "@drydock/restore-saga";
import { openStorage, type Storage } from "@drydock/storage";
import { postgresBackend } from "@drydock/storage-postgres";
import { createDatabaseAt } from "@drydock/test-kit/postgres";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { bufferIo, EXIT_CODES, main } from "../src/index.js";
import { runMain } from "./harness.js";

const dirs: string[] = [];
const opens: Storage[] = [];
let url = "";
let password = "";
let sim: Awaited<ReturnType<typeof startBoatSimulator>>;
beforeAll(async () => {
  url = await createDatabaseAt(inject("postgresUrl"), "cli");
  password = new URL(url).password;
  sim = await startBoatSimulator({ port: 0 });
});
afterAll(async () => {
  await sim?.close();
  for (const opened of opens) await opened.close();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

const BODY = JSON.stringify({ ttlSeconds: 28_800, noEnv: true });

/** A data directory bound to postgres (schema `schema`), with an environment id and create rows for `bots`. */
async function postgresDir(schema: string, bots: readonly string[]) {
  const dir = mkdtempSync(join(tmpdir(), "drydock-cli-postgres-"));
  dirs.push(dir);
  const storage = await openStorage({
    dataDir: dir,
    storage: url,
    backends: { postgres: postgresBackend },
    backendOptions: { schema },
  });
  opens.push(storage);
  const environmentId = await storage.meta.getOrCreate("environment-id", randomUUID);
  for (const botId of bots) await storage.createJournal.beginBoatCreate(botId, BODY);
  return { dir, storage, environmentId };
}

const cli = runMain;

const HOUR = 3_600_000;

/** `drydock` with the URL and `schema`, on a host whose clock is an hour ahead of every other here (the database's too). */
function skewedCli(schema: string) {
  const env = {
    DRYDOCK_STORAGE: url,
    DRYDOCK_POSTGRES_SCHEMA: schema,
    BOAT_API_URL: sim.apiUrl,
    BOAT_API_TOKEN: sim.token,
  };
  return async (args: readonly string[]) => {
    const io = bufferIo();
    const code = await main(args, { io, env, now: () => Date.now() + HOUR });
    return { code, out: io.out(), err: io.err() };
  };
}

describe("drydock on postgres", () => {
  it("status and creates list read the database's rows; the banner-like lines show the URL with its password as ***", async () => {
    expect(password.length).toBeGreaterThan(0);
    const { dir, environmentId } = await postgresDir("cli_a", ["ada", "bob"]);
    const env = { DRYDOCK_POSTGRES_SCHEMA: "cli_a", BOAT_API_URL: sim.apiUrl, BOAT_API_TOKEN: sim.token };
    const listed = await cli(["creates", "list", "--data-dir", dir, "--storage", url, "--json"], env);
    expect(listed.code, listed.err).toBe(0);
    const rows = JSON.parse(listed.out).creates;
    expect(rows.map((row: { botId: string }) => row.botId)).toEqual(["ada", "bob"]);
    expect(rows[0].expectedName).toBe(scopedBoatName(environmentId, "ada"));

    const status = await cli(["status", "--data-dir", dir, "--json"], { ...env, DRYDOCK_STORAGE: url });
    expect(status.code, status.err).toBe(0);
    const report = JSON.parse(status.out);
    expect(report.storage.kind).toBe("postgres");
    expect(report.storage.location).toContain("(schema cli_a)");
    expect(report.storage.location).toContain(`${new URL(url).username}:***@`);
    const human = await cli(["status", "--data-dir", dir], { ...env, DRYDOCK_STORAGE: url });
    expect(human.code, human.err).toBe(0);
    expect(human.out).toMatch(/storage: .*postgres/);
    for (const run of [listed, status, human]) expect(run.out + run.err).not.toContain(password);
  });

  it("DRYDOCK_STORAGE_FILE holds the URL; a postgres directory with no URL, or with both variables, is a usage error that reads nothing", async () => {
    const { dir } = await postgresDir("cli_b", ["cy"]);
    const file = join(dir, "..", `${dir.split("/").pop()}-url`);
    writeFileSync(file, `${url}\n`, { mode: 0o600 });
    dirs.push(file);
    const env = { DRYDOCK_POSTGRES_SCHEMA: "cli_b" };
    const viaFile = await cli(["creates", "list", "--data-dir", dir, "--json"], {
      ...env,
      DRYDOCK_STORAGE_FILE: file,
    });
    expect(viaFile.code, viaFile.err).toBe(0);
    expect(JSON.parse(viaFile.out).creates.map((r: { botId: string }) => r.botId)).toEqual(["cy"]);

    const noUrl = await cli(["creates", "list", "--data-dir", dir], env);
    expect(noUrl.code).toBe(EXIT_CODES.USAGE);
    expect(noUrl.err).toContain(
      "is bound to the postgres storage backend, and its database URL is not stored there",
    );
    const both = await cli(["creates", "list", "--data-dir", dir], {
      ...env,
      DRYDOCK_STORAGE: url,
      DRYDOCK_STORAGE_FILE: file,
    });
    expect(both.code).toBe(EXIT_CODES.USAGE);
    expect(both.err).toContain("set DRYDOCK_STORAGE or DRYDOCK_STORAGE_FILE, not both");
  });

  it("a postgres URL for a directory bound to file is refused with the binding's message, never echoing the password", async () => {
    const dir = mkdtempSync(join(tmpdir(), "drydock-cli-file-"));
    dirs.push(dir);
    await (await openStorage({ dataDir: dir, storage: "file" })).close();
    const run = await cli(["status", "--data-dir", dir, "--storage", url]);
    expect(run.code).toBe(EXIT_CODES.USAGE);
    expect(run.err).toMatch(/bound to .*file/);
    expect(run.err).not.toContain(password);
  });

  it("a CLI whose host clock is an hour off stamps and judges by the database's clock: instances list, and the rows a fenced adopt writes", async () => {
    const { dir, storage, environmentId } = await postgresDir("cli_clock", []);
    await storage.bots.create({ botId: "dee", name: "Dee" });
    const skewed = skewedCli("cli_clock");
    const listed = await skewed(["instances", "list", "--data-dir", dir, "--json"]);
    expect(listed.code, listed.err).toBe(0);
    // Within half an hour of real time (the machine is loaded: never a tighter bound), an hour from the host's.
    expect(Math.abs(Date.parse(JSON.parse(listed.out).databaseNow) - Date.now())).toBeLessThan(HOUR / 2);

    // A Boat named for dee, adopted by the fenced command: the row's stamps are the database's.
    const client = createBoatClient({ baseUrl: sim.apiUrl, token: sim.token });
    const { sandbox } = await client.createSandbox(
      { ttlSeconds: 600, noEnv: true },
      { idempotencyKey: randomUUID() },
    );
    await client.renameSandbox(sandbox.id, scopedBoatName(environmentId, "dee"));
    const preview = await skewed(["creates", "adopt", "dee", sandbox.id, "--data-dir", dir]);
    expect(preview.code, preview.err).toBe(0);
    const command = preview.out
      .split("\n")
      .map((line) => line.trim())
      .find((line) => line.startsWith("drydock ") && line.includes("--expected-state"));
    expect(command, preview.out).toBeDefined();
    const applied = await skewed((command as string).split(" ").slice(1));
    expect(applied.code, applied.err).toBe(0);
    const [row] = (await storage.exportAll()).creates.filter((r) => r.botId === "dee");
    expect(row?.boxId).toBe(sandbox.id);
    for (const stamp of Object.entries(row ?? {}).filter(([key]) => key.endsWith("At"))) {
      expect(Math.abs(Number(stamp[1]) - Date.now()), stamp[0]).toBeLessThan(HOUR / 2);
    }
  });

  it("a CLI whose host clock is an hour ahead judges a fence prepared just now as in flight: no retry is offered, and the retry is refused without a DELETE", async () => {
    const { dir, storage, environmentId } = await postgresDir("cli_window", []);
    const skewed = skewedCli("cli_window");
    // A server's Boat whose deletion it prepared just now (database time): its DELETE may be on the wire.
    const client = createBoatClient({ baseUrl: sim.apiUrl, token: sim.token });
    const { createJournal, deleteJournal } = storage;
    const boat = await createBoatLifecycle({ client, createJournal, deleteJournal, environmentId }).provision(
      "eve",
    );
    await deleteJournal.prepareBoatDeletion({ boxId: boat.boxId, name: boat.name, ownerBotId: "eve" });

    const listed = await skewed(["deletions", "list", "--data-dir", dir, "--json"]);
    expect(listed.code, listed.err).toBe(0);
    const [row] = JSON.parse(listed.out).deletions;
    expect(row.inFlightLeftMs).toBeGreaterThan(0);
    expect(row.ageMs).toBeLessThan(HOUR / 2);
    const planned = await skewed(["reconcile", "--data-dir", dir, "--json"]);
    expect(planned.code, planned.err).toBe(0);
    const item = JSON.parse(planned.out).plan.items.find((i: { boxId?: string }) => i.boxId === boat.boxId);
    expect(item.action.command ?? null).toBeNull();
    const deletes = sim.stats().deleteRequests;
    const retry = await skewed([
      "deletions",
      "retry",
      boat.boxId,
      "--expected-state",
      item.stateDigest,
      "--yes",
      "--data-dir",
      dir,
    ]);
    expect(retry.code, retry.out + retry.err).toBe(EXIT_CODES.UNSAFE);
    expect(retry.err).toMatch(
      /was prepared \d+ s ago, so its DELETE may still be on the wire; .* Nothing was sent/,
    );
    expect(sim.stats().deleteRequests).toBe(deletes);
  });

  it("storage migrate on a postgres-bound directory: a preview and a stale fence change nothing (the binding and the rows stay)", async () => {
    const { dir, storage } = await postgresDir("cli_migrate", ["fay"]);
    const before = JSON.stringify(await storage.exportAll());
    const binding = readFileSync(join(dir, "storage.json"), "utf8");
    const env = { DRYDOCK_STORAGE: url, DRYDOCK_POSTGRES_SCHEMA: "cli_migrate" };
    for (const to of ["sqlite", "file"]) {
      const preview = await cli(["storage", "migrate", "--to", to, "--data-dir", dir], env);
      expect(preview.code, preview.out + preview.err).toBe(EXIT_CODES.OK);
      expect(preview.out).toContain(`from postgres postgres://`);
      expect(preview.out).toContain("Nothing was changed.");
      const stale = ["--yes", "--expected-state", `sha256:${"0".repeat(64)}`];
      const run = await cli(["storage", "migrate", "--to", to, ...stale, "--data-dir", dir], env);
      expect(run.code, run.out + run.err).toBe(EXIT_CODES.STATE_CHANGED);
      expect(run.err).toContain("Nothing was changed.");
      expect(preview.out + preview.err + run.out + run.err).not.toContain(password);
    }
    const same = await cli(["storage", "migrate", "--to", "postgres", "--data-dir", dir], env);
    expect(same.code, same.out + same.err).toBe(EXIT_CODES.OK);
    expect(same.out).toContain("already bound to postgres");
    expect(readFileSync(join(dir, "storage.json"), "utf8")).toBe(binding);
    expect(JSON.stringify(await storage.exportAll())).toBe(before);
  });

  it("locks list/gc and restores list of a postgres-bound directory read its local files, with the URL given or not", async () => {
    const { dir } = await postgresDir("cli_local", []);
    // A restore saga (local files: a workspace's restores live beside it) and a dead process's candidate.
    const workspaceRoot = join(dir, "workspaces", "bot-local");
    mkdirSync(workspaceRoot, { recursive: true });
    const store = openSagaStore({ stateDir: join(dir, "restore-sagas"), workspaceRoot });
    await store.create("op-local", {
      kind: "checkpoint-restore",
      checkpointId: "cp-1",
      checkpointManifestDigest: `sha256:${"b".repeat(64)}`,
      actorPid: spawnSync(process.execPath, ["-e", ""]).pid as number,
    });
    const locks = join(store.shardDir, ".locks");
    const shard = relative(dir, store.shardDir);
    /** A candidate file of a process that has exited, beside the saga's locks: provable garbage. */
    const deadCandidate = () => {
      const dead = spawnSync(process.execPath, ["-e", ""]).pid as number;
      const token = randomUUID();
      const name = `op-gone.lock.candidate-${dead}-${token}`;
      writeFileSync(
        join(locks, name),
        `${JSON.stringify({ version: 1, pid: dead, token, createdAt: Date.now() })}\n`,
      );
      return name;
    };
    const runs: Awaited<ReturnType<typeof cli>>[] = [];
    const envs: Record<string, string>[] = [
      { DRYDOCK_STORAGE: url, DRYDOCK_POSTGRES_SCHEMA: "cli_local" },
      {},
    ];
    for (const env of envs) {
      // Before restores list: its saga store's lock takes reaps a dead candidate of the shard's locks.
      const candidate = deadCandidate();
      const listed = await cli(["locks", "list", "--data-dir", dir, "--json"], env);
      expect(listed.code, listed.err).toBe(0);
      expect(
        JSON.parse(listed.out).locks.find(
          (row: { path: string }) => row.path === `${shard}/.locks/op-gone.lock`,
        ),
      ).toMatchObject({ kind: "saga-state", leftovers: 1 });
      const preview = await cli(["locks", "gc", "--data-dir", dir, "--json"], env);
      expect(preview.code, preview.err).toBe(0);
      expect(JSON.parse(preview.out).candidates).toEqual([`${shard}/.locks/${candidate}`]);
      expect(readdirSync(locks)).toContain(candidate);
      const gc = await cli(["locks", "gc", "--data-dir", dir, "--yes", "--json"], env);
      expect(gc.code, gc.err).toBe(0);
      expect(JSON.parse(gc.out).removed).toEqual([`${shard}/.locks/${candidate}`]);
      expect(readdirSync(locks)).not.toContain(candidate);
      const restores = await cli(["restores", "list", "--data-dir", dir, "--json"], env);
      expect(restores.code, restores.err).toBe(0);
      expect(JSON.parse(restores.out).restores.map((r: { operationId: string }) => r.operationId)).toEqual([
        "op-local",
      ]);
      runs.push(listed, preview, gc, restores);
    }
    for (const run of runs) expect(run.out + run.err).not.toContain(password);
  });
});
