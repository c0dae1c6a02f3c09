import { spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdirSync, readdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { hostname } from "node:os";
import { join } from "node:path";
import { openBoatCreateJournal } from "@drydock/boat-create-journal";
import { openBoatDeleteJournal } from "@drydock/boat-delete-journal";
import { createBoatLifecycle, DELETE_IN_FLIGHT_MS, scopedBoatName } from "@drydock/boat-lifecycle";
import { createBoatClient } from "@drydock/boat-provider";
import { type BoatSimulator, startBoatSimulator } from "@drydock/boat-provider/simulator";
import { acquireLockSync, createSystemIdentity } from "@drydock/file-lock";
import { CREATE_IN_FLIGHT_MS } from "@drydock/recovery-controller";
import {
  acquireWorkspaceLock,
  inspectWorkspaceLock,
  openCheckpointStore,
  openSagaStore,
  restoreCheckpoint,
  workspaceLockPath,
} from "@drydock/restore-saga";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type Built,
  buildBinaries,
  type RunResult,
  runProcess,
  snapshotTree,
  tempRoot,
  transcript,
  writeTree,
} from "./harness.js";

let bins: Built;
let sim: BoatSimulator;
let root: string;
/** Every secret any fixture wrote: lock tokens, idempotency keys, the provider token. */
const secrets = new Set<string>();

beforeAll(async () => {
  root = tempRoot();
  bins = await buildBinaries(join(root, "bin"));
  sim = await startBoatSimulator({ provisionMs: 0, deletionPolls: 1 });
  secrets.add(sim.token);
  // The killed processes are independent: run them at once so the suite stays inside its time budget.
  await Promise.all([
    killedRestore(D.completed(), "op-completed", "restore.after-completed"),
    killedRestore(D.mutation(), "op-mutation", "restore.after-entry-applied"),
    killedRestore(D.locked(), "op-locked", "restore.after-locked"),
    killedProvision(D.provision(), "bot-remembered", "provision.after-remember"),
    killedProvision(D.keyOnly(), "bot-keyonly", "provision.after-create-response"),
    killedDeletion(D.deletion()),
  ]);
}, 180_000);

afterAll(async () => {
  await sim?.close();
  if (root) rmSync(root, { recursive: true, force: true });
});

async function cli(args: readonly string[], env: Record<string, string> = {}): Promise<RunResult> {
  const result = await runProcess(bins.cli, args, env);
  transcript.push(result.stdout, result.stderr);
  return result;
}

/** Runs the command line the CLI printed, exactly as printed (it never contains a token). */
function argsOf(command: string): string[] {
  const parts = command.split(" ");
  expect(parts[0]).toBe("drydock");
  return parts.slice(1);
}

// biome-ignore lint/suspicious/noExplicitAny: parsed CLI output; every field used is asserted by the test.
type Parsed = Record<string, any>;

function jsonOut(result: RunResult): Parsed {
  return JSON.parse(result.stdout) as Parsed;
}

function jsonErr(result: RunResult): {
  ok: false;
  error: { code: string; message: string };
  exitCode: number;
} {
  return JSON.parse(result.stderr.trim().split("\n").at(-1)!);
}

interface DataDir {
  dataDir: string;
  workspace: string;
}

function dataDir(name: string): DataDir {
  const dir = join(root, name);
  const workspace = join(dir, "workspaces", "bot1");
  mkdirSync(workspace, { recursive: true });
  return { dataDir: dir, workspace };
}

/** One data directory per scenario, created on first use (in beforeAll) and shared with its test. */
const made = new Map<string, DataDir>();
const at = (name: string) => () => {
  if (!made.has(name)) made.set(name, dataDir(name));
  return made.get(name)!;
};
const D = {
  completed: at("completed"),
  mutation: at("mutation"),
  locked: at("locked"),
  provision: at("provision"),
  keyOnly: at("key-only"),
  deletion: at("deletion"),
};
const environmentIds = new Map<string, string>();
const deletedBoat: { boxId: string; name: string } = { boxId: "", name: "" };

async function killedProvision(d: DataDir, botId: string, point: string): Promise<void> {
  const environmentId = withEnvironmentId(d);
  environmentIds.set(d.dataDir, environmentId);
  // A bot server's data directory (workspaces/): it provisions only a bot its registry holds.
  writeFileSync(
    join(d.dataDir, "bots.json"),
    `${JSON.stringify({ version: 1, bots: [{ botId, name: botId, createdAt: Date.now() }] }, null, 2)}\n`,
  );
  await killedChild(
    {
      DRYDOCK_FLOW: "provision",
      DRYDOCK_DATA_DIR: d.dataDir,
      DRYDOCK_SIM_API_URL: sim.apiUrl,
      DRYDOCK_SIM_TOKEN: sim.token,
      DRYDOCK_ENV_ID: environmentId,
      DRYDOCK_BOT_ID: botId,
    },
    point,
  );
  harvestSecrets(d.dataDir);
}

async function killedDeletion(d: DataDir): Promise<void> {
  const environmentId = withEnvironmentId(d);
  const lifecycle = createBoatLifecycle({
    client: createBoatClient({ baseUrl: sim.apiUrl, token: sim.token }),
    createJournal: openBoatCreateJournal({ dataDir: d.dataDir }),
    deleteJournal: openBoatDeleteJournal({ dataDir: d.dataDir }),
    environmentId,
    sleep: async () => {},
  });
  const boat = await lifecycle.provision("bot-deleted");
  Object.assign(deletedBoat, { boxId: boat.boxId, name: boat.name });
  await killedChild(
    {
      DRYDOCK_FLOW: "delete",
      DRYDOCK_DATA_DIR: d.dataDir,
      DRYDOCK_SIM_API_URL: sim.apiUrl,
      DRYDOCK_SIM_TOKEN: sim.token,
      DRYDOCK_ENV_ID: environmentId,
      DRYDOCK_BOT_ID: "bot-deleted",
      DRYDOCK_BOX_ID: boat.boxId,
      DRYDOCK_CONFIRM_NAME: boat.name,
      // Killed a minute ago: past the window in which its DELETE could still be on the wire.
      DRYDOCK_AGO_MS: "60000",
    },
    "delete.after-prepare",
  );
  harvestSecrets(d.dataDir);
}

/** Remembers every token and key on disk so the final scan can look for them in all output. */
function harvestSecrets(dir: string): void {
  const walk = (path: string): void => {
    for (const name of readdirSync(path, { withFileTypes: true })) {
      const full = join(path, name.name);
      if (name.isDirectory()) walk(full);
      else if (/\.lock$|box-create-requests\.json$/.test(name.name)) {
        const text = readFileSync(full, "utf8");
        for (const match of text.matchAll(/"(?:token|idempotencyKey)"\s*:\s*"([^"]+)"/g))
          secrets.add(match[1]!);
      }
    }
  };
  walk(dir);
}

async function killedChild(env: Record<string, string>, point: string): Promise<void> {
  const result = await runProcess(bins.child, [], { ...env, DRYDOCK_CRASH_POINT: point });
  // On failure, say how the child ended: its exit, signal and both streams.
  const ended = JSON.stringify({
    code: result.code,
    signal: result.signal,
    stderr: result.stderr.slice(0, 2000),
  });
  expect(result.stdout, ended).toContain(`crash ${point}`);
  expect(result.signal, ended).toBe("SIGKILL");
}

async function killedRestore(d: DataDir, operationId: string, point: string): Promise<string> {
  const checkpoints = openCheckpointStore({ dataDir: d.dataDir });
  writeTree(d.workspace, { "a.txt": "checkpointed a", "dir/b.txt": "checkpointed b" });
  const { checkpointId } = await checkpoints.createCheckpoint(d.workspace);
  writeTree(d.workspace, { "a.txt": "edited a", "dir/b.txt": "edited b", "new.txt": "added after" });
  await killedChild(
    {
      DRYDOCK_FLOW: "restore",
      DRYDOCK_DATA_DIR: d.dataDir,
      DRYDOCK_WORKSPACE: d.workspace,
      DRYDOCK_CHECKPOINT_ID: checkpointId,
      DRYDOCK_OPERATION_ID: operationId,
    },
    point,
  );
  harvestSecrets(d.dataDir);
  return checkpointId;
}

const store = (d: DataDir) =>
  openSagaStore({ stateDir: join(d.dataDir, "restore-sagas"), workspaceRoot: d.workspace });
const lockOwner = (d: DataDir) => inspectWorkspaceLock({ dataDir: d.dataDir, workspaceRoot: d.workspace });

function providerEnv(): Record<string, string> {
  return { BOAT_API_URL: sim.apiUrl, BOAT_API_TOKEN: sim.token };
}

function withEnvironmentId(d: DataDir): string {
  const id = randomUUID();
  writeFileSync(join(d.dataDir, "environment-id"), `${id}\n`);
  return id;
}

async function closedPortUrl(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}/api/v1`;
}

describe("drydock against data left by killed processes", () => {
  it("a restore killed after completion: show prints the fence, release without --yes changes nothing, the printed command releases", async () => {
    const d = D.completed();
    expect(lockOwner(d)).not.toBeNull();

    const shown = await cli(["restores", "show", "op-completed", "--data-dir", d.dataDir, "--json"]);
    expect(shown.code).toBe(0);
    const show = jsonOut(shown);
    expect(show.restore.saga.phase).toBe("completed");
    expect(show.restore.fence.expectedOwnerDigest).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(show.commands.release).toContain(`--expected-seq ${show.restore.fence.expectedSeq}`);
    expect(show.commands.abort).toBeNull();

    const before = snapshotTree(d.dataDir);
    const preview = await cli(["restores", "release", "op-completed", "--data-dir", d.dataDir]);
    expect(preview.code).toBe(0);
    expect(preview.stdout).toContain(show.commands.release);
    expect(snapshotTree(d.dataDir)).toEqual(before);

    const applied = await cli(argsOf(show.commands.release));
    expect(applied.code).toBe(0);
    expect(applied.stdout).toContain("completed");
    expect(lockOwner(d)).toBeNull();
    const archived = await store(d).loadArchived("op-completed");
    expect(archived.phase).toBe("completed");

    // Once archived it can be purged: a preview that lists it and changes nothing, then --yes.
    const recent = jsonOut(await cli(["restores", "purge", "--data-dir", d.dataDir, "--json"]));
    expect(recent.candidates).toEqual([]);
    const beforePurge = snapshotTree(d.dataDir);
    const purgePreview = await cli(["restores", "purge", "--older-than-days", "0", "--data-dir", d.dataDir]);
    expect(purgePreview.code).toBe(0);
    expect(purgePreview.stdout).toContain("op-completed");
    expect(purgePreview.stdout).toMatch(
      /restores purge --older-than-days 0 --expected-state sha256:[0-9a-f]{64} --yes/,
    );
    const previewed = jsonOut(
      await cli(["restores", "purge", "--older-than-days", "0", "--data-dir", d.dataDir, "--json"]),
    );
    // The fence is the list: --yes alone, or the digest of another list (the 30-day one, empty), purge nothing.
    const [unfenced, otherList] = await Promise.all([
      cli(["restores", "purge", "--older-than-days", "0", "--yes", "--data-dir", d.dataDir, "--json"]),
      cli([
        "restores",
        "purge",
        "--older-than-days",
        "0",
        "--expected-state",
        recent.stateDigest,
        "--yes",
        "--data-dir",
        d.dataDir,
        "--json",
      ]),
    ]);
    expect(unfenced.code).toBe(2);
    expect(jsonErr(unfenced).error.code).toBe("usage");
    expect(otherList.code).toBe(4);
    expect(jsonErr(otherList).error.code).toBe("fence_mismatch");
    expect(snapshotTree(d.dataDir)).toEqual(beforePurge);
    const purged = await cli([...argsOf(previewed.command), "--json"]);
    expect(purged.code).toBe(0);
    expect(jsonOut(purged).purged).toEqual([
      expect.objectContaining({
        operationId: "op-completed",
        seq: archived.seq,
        headHash: archived.headHash,
      }),
    ]);
    await expect(store(d).loadArchived("op-completed")).rejects.toMatchObject({ code: "NOT_FOUND" });
    expect(await store(d).listArchived()).toEqual([]);
    const bad = await cli(["restores", "purge", "--older-than-days", "soon", "--data-dir", d.dataDir]);
    expect(bad.code).not.toBe(0);
  });

  it("the read-only commands change no file: the killed process's lock candidates and an unpublished saga directory are reported, never reaped", async () => {
    const d = D.mutation();
    const sagaRoot = join(d.dataDir, "restore-sagas");
    // What the SIGKILLed restore left beside the saga store's locks: candidate owner files of its dead pid.
    const candidates = listFiles(sagaRoot).filter((path) => /\.lock\.candidate-[0-9]+-/.test(path));
    expect(candidates.length).toBeGreaterThan(0);
    // And a saga directory whose create never published an event (a create killed before its first event).
    const shard = readdirSync(sagaRoot, { withFileTypes: true }).find(
      (entry) => entry.isDirectory() && entry.name.startsWith("workspace-"),
    )!;
    const orphan = join(sagaRoot, shard.name, "op-unpublished");
    mkdirSync(orphan);
    const before = snapshotTree(d.dataDir);
    for (const args of [
      ["restores", "list"],
      ["restores", "list", "--json"],
      ["restores", "show", "op-mutation"],
      ["status"],
      ["status", "--json"],
      ["locks", "list"],
    ]) {
      const result = await cli([...args, "--data-dir", d.dataDir]);
      expect(result.code, `${args.join(" ")}: ${result.stderr}`).not.toBe(2);
      expect(snapshotTree(d.dataDir), args.join(" ")).toEqual(before);
    }
    const listed = jsonOut(await cli(["restores", "list", "--data-dir", d.dataDir, "--json"]));
    const unpublished = listed.restores.find((r: Parsed) => r.operationId === "op-unpublished");
    expect(unpublished?.problem).toMatch(/leaves its directory as it is/);
    // The rest of this file expects the directory as the kill left it.
    rmSync(orphan, { recursive: true });
  });

  it("a restore killed mid-mutation: a stale fence exits 4, abort is refused with 5, both change nothing; the printed rollback restores the workspace", async () => {
    const d = D.mutation();
    const shown = jsonOut(await cli(["restores", "show", "op-mutation", "--data-dir", d.dataDir, "--json"]));
    expect(shown.restore.saga.basePhase).toBe("mutation_started");
    expect(shown.commands.rollback).not.toBeNull();
    const fence = shown.restore.fence;
    const before = snapshotTree(d.dataDir);

    const otherOwner = `sha256:${"0".repeat(64)}`;
    const [stale, refused, wrongOwner] = await Promise.all([
      cli([
        ...argsOf(shown.commands.rollback).map((arg) =>
          arg === String(fence.expectedSeq) ? String(fence.expectedSeq - 1) : arg,
        ),
        "--json",
      ]),
      cli([...argsOf(shown.commands.rollback.replace(" rollback ", " abort "))]),
      cli(argsOf(shown.commands.rollback.replace(fence.expectedOwnerDigest, otherOwner))),
    ]);
    expect(stale.code).toBe(4);
    expect(jsonErr(stale)).toMatchObject({ ok: false, error: { code: "fence_mismatch" }, exitCode: 4 });
    expect(jsonErr(stale).error.message).toContain(
      `its seq is ${fence.expectedSeq}, not ${fence.expectedSeq - 1}`,
    );
    // The part that differs is named: here the owner, not the seq the operator gave right.
    expect(wrongOwner.code).toBe(4);
    expect(wrongOwner.stderr).toContain(
      `its workspace lock owner is ${fence.expectedOwnerDigest}, not ${otherOwner}`,
    );
    expect(wrongOwner.stderr).not.toContain("its seq is");
    expect(refused.code).toBe(5);
    expect(refused.stderr).toContain("abort is not possible");
    expect(snapshotTree(d.dataDir)).toEqual(before);

    const applied = await cli([...argsOf(shown.commands.rollback), "--json"]);
    expect(applied.code).toBe(0);
    expect(jsonOut(applied)).toMatchObject({
      ok: true,
      action: "rollback",
      phase: "rolled_back",
      archived: true,
    });
    expect(snapshotTree(d.workspace)).toEqual({
      "a.txt": "edited a",
      "dir/": "",
      "dir/b.txt": "edited b",
      "new.txt": "added after",
    });
    expect(lockOwner(d)).toBeNull();
  });

  it("a restore killed after taking its lock: abort needs --yes and the fence; the printed abort settles it", async () => {
    const d = D.locked();
    const shown = jsonOut(await cli(["restores", "show", "op-locked", "--data-dir", d.dataDir, "--json"]));
    expect(shown.restore.actions.abort.eligible).toBe(true);
    const before = snapshotTree(d.dataDir);

    const [noYes, noFence, missing, listed, locks, gc] = await Promise.all([
      cli(["restores", "abort", "op-locked", "--data-dir", d.dataDir, "--reason", "test", "--json"]),
      cli(["restores", "abort", "op-locked", "--data-dir", d.dataDir, "--yes", "--json"]),
      cli(["restores", "show", "op-nope", "--data-dir", d.dataDir, "--json"]),
      cli(["restores", "list", "--data-dir", d.dataDir, "--json"]),
      cli(["locks", "list", "--data-dir", d.dataDir, "--json"]),
      cli(["locks", "gc", "--data-dir", d.dataDir, "--json"]),
    ]);
    expect(jsonOut(listed).restores).toEqual([
      expect.objectContaining({
        operationId: "op-locked",
        phase: "locked",
        next: "abort",
        command: shown.commands.abort,
      }),
    ]);
    const workspaceLock = jsonOut(locks).locks.find((row: { kind: string }) => row.kind === "workspace");
    expect(workspaceLock).toMatchObject({
      present: true,
      alive: false,
      transactionId: "op-locked",
      ownerDigest: shown.restore.fence.expectedOwnerDigest,
    });
    expect(jsonOut(gc)).toMatchObject({ preview: true, changed: false });
    expect(noYes.code).toBe(0);
    expect(jsonOut(noYes)).toMatchObject({
      preview: true,
      changed: false,
      eligible: true,
      command: shown.commands.abort,
    });
    expect(missing.code).toBe(3);
    expect(jsonErr(missing).error.code).toBe("not_found");
    expect(noFence.code).toBe(2);
    expect(jsonErr(noFence).error.code).toBe("usage");
    expect(snapshotTree(d.dataDir)).toEqual(before);

    const applied = await cli([...argsOf(shown.commands.abort), "--reason", "operator test"]);
    expect(applied.code).toBe(0);
    const archived = await store(d).loadArchived("op-locked");
    expect(archived.events.map((event) => event.phase)).toEqual([
      "created",
      "locked",
      "recovery_required",
      "recovery_started",
      "aborted",
    ]);
    expect(snapshotTree(d.workspace)["a.txt"]).toBe("edited a");

    // A corrupt workspace lock is a failure (exit 1) and is left byte-for-byte as it is.
    const lockPath = workspaceLockPath(d.dataDir, realpathSync(d.workspace));
    writeFileSync(lockPath, "{ not json");
    const corrupt = await cli(["restores", "show", "op-locked", "--data-dir", d.dataDir]);
    expect(corrupt.code).toBe(1);
    expect(readFileSync(lockPath, "utf8")).toBe("{ not json");
    rmSync(lockPath);
  });

  it("a provision killed after remembering its Boat: reconcile plans adopt; a Boat changed since the plan exits 4; the new plan's command adopts", async () => {
    const d = D.provision();
    const environmentId = environmentIds.get(d.dataDir)!;
    const [listedRun, planRun] = await Promise.all([
      cli(["creates", "list", "--data-dir", d.dataDir, "--json"]),
      cli(["reconcile", "--data-dir", d.dataDir, "--json"], providerEnv()),
    ]);
    const listed = jsonOut(listedRun);
    const row = listed.creates.find((candidate: { botId: string }) => candidate.botId === "bot-remembered");
    expect(row).toMatchObject({
      resolved: false,
      expired: false,
      expectedName: scopedBoatName(environmentId, "bot-remembered"),
    });
    const boxId = row.boxId as string;
    expect(boxId).toMatch(/^bx_/);

    const plan = jsonOut(planRun);
    const item = plan.plan.items.find((candidate: { boxId: string }) => candidate.boxId === boxId);
    expect(item).toMatchObject({ kind: "create_unresolved", action: { name: "adopt" } });
    const journal = join(d.dataDir, "box-create-requests.json");
    const journalBefore = readFileSync(journal, "utf8");

    const preview = await cli(
      ["creates", "adopt", "bot-remembered", boxId, "--data-dir", d.dataDir],
      providerEnv(),
    );
    expect(preview.code).toBe(0);
    expect(preview.stdout).toContain(item.action.command);
    expect(readFileSync(journal, "utf8")).toBe(journalBefore);

    // Someone names the Boat in boat.dev meanwhile: the planned state is gone.
    await createBoatClient({ baseUrl: sim.apiUrl, token: sim.token }).renameSandbox(
      boxId,
      scopedBoatName(environmentId, "bot-remembered"),
    );
    const [stale, replannedRun] = await Promise.all([
      cli([...argsOf(item.action.command), "--json"], providerEnv()),
      cli(["reconcile", "--data-dir", d.dataDir, "--json"], providerEnv()),
    ]);
    expect(stale.code).toBe(4);
    expect(jsonErr(stale).error.code).toBe("state_changed");
    expect(readFileSync(journal, "utf8")).toBe(journalBefore);

    const replanned = jsonOut(replannedRun);
    const fresh = replanned.plan.items.find((candidate: { boxId: string }) => candidate.boxId === boxId);
    expect(fresh.stateDigest).not.toBe(item.stateDigest);
    const adopted = await cli([...argsOf(fresh.action.command), "--json"], providerEnv());
    expect(adopted.code).toBe(0);
    expect(jsonOut(adopted)).toMatchObject({ ok: true, action: "adopt", botId: "bot-remembered", boxId });
    const snapshot = await openBoatCreateJournal({ dataDir: d.dataDir }).boatCreateRecoverySnapshot();
    expect(snapshot).toEqual([expect.objectContaining({ botId: "bot-remembered", boxId, resolved: true })]);
  });

  it("a provision killed before its answer was journaled: status reports it (exit 6 without boat.dev); retiring is refused (5); an unreachable provider exits 6", async () => {
    const d = D.keyOnly();
    const journal = join(d.dataDir, "box-create-requests.json");
    // Killed seconds ago: its provisioning call may still be running, for all drydock can tell (no pid is
    // journaled), so it is work in progress with a wait, not yet a person's.
    // Without boat.dev the verdict is never OK: INCOMPLETE (exit 6), with the wait.
    const fresh = await cli(["status", "--data-dir", d.dataDir]);
    expect(fresh.code).toBe(6);
    expect(fresh.stdout).toContain("create request started moments ago");
    expect(fresh.stdout.trim().split("\n").at(-1)).toMatch(
      /^INCOMPLETE: nothing needs a person in the journals, restores and locks, but boat\.dev was not checked: set BOAT_API_URL .* 1 item\(s\) are still in progress/,
    );
    // Past the in-flight window (the row aged by hand), nothing retries it by itself: a person must.
    const rows = JSON.parse(readFileSync(journal, "utf8"));
    for (const row of rows.requests) row.createdAt -= CREATE_IN_FLIGHT_MS + 1_000;
    writeFileSync(journal, `${JSON.stringify(rows, null, 2)}\n`);
    const before = readFileSync(journal, "utf8");
    const closed = await closedPortUrl();
    secrets.add("tok-closed-port-0123456789");
    const plan = jsonOut(await cli(["reconcile", "--data-dir", d.dataDir, "--json"], providerEnv()));
    const item = plan.plan.items.find((candidate: Parsed) => candidate.botId === "bot-keyonly");
    expect(item.stateDigest).toMatch(/^sha256:[0-9a-f]{64}$/);
    const [status, retire, down, statusDown] = await Promise.all([
      cli(["status", "--data-dir", d.dataDir]),
      cli(
        [
          "creates",
          "retire",
          "bot-keyonly",
          "--expected-state",
          item.stateDigest,
          "--data-dir",
          d.dataDir,
          "--yes",
          "--json",
        ],
        providerEnv(),
      ),
      cli([
        "creates",
        "adopt",
        "bot-keyonly",
        "bx_22222222",
        "--expected-state",
        item.stateDigest,
        "--data-dir",
        d.dataDir,
        "--yes",
        "--provider-url",
        closed,
        "--provider-token",
        "tok-closed-port-0123456789",
        "--json",
      ]),
      cli(["status", "--data-dir", d.dataDir, "--json"], { BOAT_API_URL: closed, BOAT_API_TOKEN: sim.token }),
    ]);
    expect(status.code).toBe(6);
    expect(status.stdout).toContain("bot-keyonly");
    expect(status.stdout).toContain("nothing retries it by itself: unless a provisioning call");
    expect(status.stdout.trim().split("\n").at(-1)).toMatch(/^ATTENTION: 1 item/);

    expect(retire.code).toBe(5);
    expect(jsonErr(retire).error.code).toBe("action_not_allowed");
    expect(down.code).toBe(6);
    expect(jsonErr(down).error.code).toBe("transport_connect_failed");
    expect(readFileSync(journal, "utf8")).toBe(before);
    expect(statusDown.code).toBe(6);
    expect(jsonOut(statusDown).verdict).toMatch(/^INCOMPLETE/);
  });

  it("a deletion killed after its fence: --yes without the plan's fence is a usage error that sends nothing; the plan's retry command re-sends DELETE and the fence is settled", async () => {
    const d = D.deletion();
    const boat = deletedBoat;
    const [fencesRun, planRun] = await Promise.all([
      cli(["deletions", "list", "--data-dir", d.dataDir, "--json"]),
      cli(["reconcile", "--data-dir", d.dataDir, "--json"], providerEnv()),
    ]);
    const fences = jsonOut(fencesRun);
    expect(fences.deletions).toEqual([expect.objectContaining({ boxId: boat.boxId, phase: "prepared" })]);
    const plan = jsonOut(planRun);
    const item = plan.plan.items.find((candidate: { kind: string }) => candidate.kind === "deletion_fence");
    expect(item.action.name).toBe("retryDeletion");

    // Every Boat action needs the fence its preview printed: without it nothing is sent or written.
    const journalFile = join(d.dataDir, "box-delete-requests.json");
    const journalBefore = readFileSync(journalFile, "utf8");
    const deletesBefore = sim.stats().deleteRequests;
    const unfenced = await Promise.all(
      [
        ["deletions", "retry", boat.boxId],
        ["deletions", "reconcile", boat.boxId],
        ["creates", "retire", "bot-deleted"],
        ["creates", "adopt", "bot-deleted", boat.boxId],
      ].map((command) => cli([...command, "--data-dir", d.dataDir, "--yes", "--json"], providerEnv())),
    );
    for (const run of unfenced) {
      expect(run.code).toBe(2);
      expect(jsonErr(run).error).toMatchObject({
        code: "usage",
        message: expect.stringContaining("--expected-state"),
      });
    }
    expect(sim.stats().deleteRequests).toBe(deletesBefore);
    expect(readFileSync(journalFile, "utf8")).toBe(journalBefore);
    // A fenced command whose record is not there is a moved state (exit 4, the controller's own code), as a
    // lifted deletion fence is: "not found" (3) is a preview's answer, never a fenced command's (one rule for
    // a command pasted after it applied; the controller's NOT_FOUND → 3 mapping is checked in main.test.ts).
    const missing = await cli(
      [
        "creates",
        "retire",
        "bot-nobody",
        "--expected-state",
        `sha256:${"0".repeat(64)}`,
        "--data-dir",
        d.dataDir,
        "--yes",
        "--json",
      ],
      providerEnv(),
    );
    expect(missing.code).toBe(4);
    expect(jsonErr(missing).error).toMatchObject({
      code: "state_changed",
      message: expect.stringContaining("no record for bot bot-nobody now"),
    });

    const applied = await cli([...argsOf(item.action.command), "--json"], providerEnv());
    expect(applied.code).toBe(0);
    expect(jsonOut(applied)).toMatchObject({ ok: true, action: "retryDeletion", boxId: boat.boxId });
    const after = await openBoatDeleteJournal({ dataDir: d.dataDir }).boatDeletionSnapshot();
    expect(after.every((record) => record.phase === "accepted")).toBe(true);
    if (after.length > 0) {
      // boat.dev accepted the DELETE but had not finished when the retry stopped polling: the new plan's
      // reconcile command (with the fence it printed) finishes it.
      const replanned = jsonOut(await cli(["reconcile", "--data-dir", d.dataDir, "--json"], providerEnv()));
      const next = replanned.plan.items.find((candidate: Parsed) => candidate.kind === "deletion_fence");
      expect(next.action.name).toBe("reconcileDeletion");
      const reconciled = await cli([...argsOf(next.action.command), "--json"], providerEnv());
      expect(reconciled.code).toBe(0);
    }
    expect(await openBoatDeleteJournal({ dataDir: d.dataDir }).boatDeletionSnapshot()).toEqual([]);
    expect(await openBoatCreateJournal({ dataDir: d.dataDir }).boatCreateRecoverySnapshot()).toEqual([]);
  });

  it("locks list tells a running process's kept owner file from garbage, and gc removes only the garbage", async () => {
    const d = dataDir("kept-owners");
    const locks = join(d.dataDir, "restore-sagas", "workspace-0123", ".locks");
    mkdirSync(locks, { recursive: true });
    // This (live) process took and released a saga lock the way the store does: its owner file is kept.
    const kept = acquireLockSync(join(locks, "op-a.lock"), { reuseOwnerFile: true });
    kept.release();
    // A candidate of a process that has exited: garbage.
    const dead = spawnSync(process.execPath, ["-e", ""]).pid!;
    const deadToken = randomUUID();
    writeFileSync(
      join(locks, `op-b.lock.candidate-${dead}-${deadToken}`),
      `${JSON.stringify({ version: 1, pid: dead, token: deadToken, createdAt: Date.now() })}\n`,
    );

    const listed = jsonOut(await cli(["locks", "list", "--data-dir", d.dataDir, "--json"]));
    const row = (name: string) =>
      listed.locks.find((entry: { path: string }) => entry.path.endsWith(`/.locks/${name}`));
    expect(row("op-a.lock")).toMatchObject({ kind: "saga-state", present: false, leftovers: 0, kept: 1 });
    expect(row("op-b.lock")).toMatchObject({ kind: "saga-state", present: false, leftovers: 1, kept: 0 });

    const preview = await cli(["locks", "gc", "--data-dir", d.dataDir, "--json"]);
    expect(jsonOut(preview).candidates).toEqual([
      `restore-sagas/workspace-0123/.locks/op-b.lock.candidate-${dead}-${deadToken}`,
    ]);
    // The kept file's name holds the token this process publishes next: never printed.
    expect(preview.stdout).not.toContain(kept.owner.token);
    const gc = jsonOut(await cli(["locks", "gc", "--data-dir", d.dataDir, "--yes", "--json"]));
    expect(gc.removed).toEqual([
      `restore-sagas/workspace-0123/.locks/op-b.lock.candidate-${dead}-${deadToken}`,
    ]);
    expect(readdirSync(locks)).toEqual([`op-a.lock.candidate-${process.pid}-${kept.owner.token}`]);
  });

  it("a lock a stopped workspace edit left: list and status say what it is, gc removes it and never a restore's", async () => {
    const d = dataDir("stopped-edit");
    const restoreWorkspace = join(d.dataDir, "workspaces", "bot2");
    mkdirSync(restoreWorkspace, { recursive: true });
    mkdirSync(join(d.dataDir, "locks"), { recursive: true });
    const identity = createSystemIdentity();
    /** An owner file of a process that has exited (this host, this boot): provably dead. */
    const deadOwner = (workspace: string, transactionId: string, purpose: string): string => {
      const token = randomUUID();
      secrets.add(token);
      const root = realpathSync(workspace);
      const path = workspaceLockPath(d.dataDir, root);
      const owner = {
        version: 1,
        pid: spawnSync(process.execPath, ["-e", ""]).pid!,
        token,
        createdAt: Date.now() - 1_000,
        host: hostname(),
        bootId: identity.bootId(),
        payload: { transactionId, workspaceRoot: root, purpose },
      };
      writeFileSync(path, `${JSON.stringify(owner)}\n`);
      return path;
    };
    const editLock = deadOwner(d.workspace, "file-write-5e2a", "workspace-edit");
    const restoreLock = deadOwner(restoreWorkspace, "op-stopped", "checkpoint-restore");
    const restoreBytes = readFileSync(restoreLock, "utf8");
    const rel = (path: string) => path.slice(d.dataDir.length + 1);

    const listed = jsonOut(await cli(["locks", "list", "--data-dir", d.dataDir, "--json"]));
    const row = (path: string) => listed.locks.find((entry: { path: string }) => entry.path === rel(path));
    expect(row(editLock)).toMatchObject({
      kind: "workspace",
      alive: false,
      purpose: "workspace-edit",
      transactionId: "file-write-5e2a",
    });
    expect(row(editLock).note).toContain("left by a stopped file write, deletion or checkpoint");
    expect(row(editLock).note).toContain("locks gc --yes");
    expect(row(restoreLock)).toMatchObject({ purpose: "checkpoint-restore", note: null });
    const human = await cli(["locks", "list", "--data-dir", d.dataDir]);
    expect(human.stdout).toContain("(edit) file-write-5e2a");

    const findings = jsonOut(await cli(["status", "--data-dir", d.dataDir, "--json"])).findings;
    expect(findings).toContainEqual(
      expect.objectContaining({
        area: "lock",
        attention: false,
        subject: rel(editLock),
        command: expect.stringMatching(/ locks gc --yes$/),
      }),
    );

    const preview = jsonOut(await cli(["locks", "gc", "--data-dir", d.dataDir, "--json"]));
    expect(preview.candidates).toEqual([rel(editLock)]);
    const gc = jsonOut(await cli(["locks", "gc", "--data-dir", d.dataDir, "--yes", "--json"]));
    expect(gc.removed).toEqual([rel(editLock)]);
    expect(readdirSync(join(d.dataDir, "locks")).filter((name) => name.startsWith("ws-"))).toEqual([
      rel(restoreLock).slice("locks/".length),
    ]);
    expect(readFileSync(restoreLock, "utf8")).toBe(restoreBytes);
  });

  it("a restore with nothing to change killed after workspace_applied: show recommends complete, status prints it, the printed command completes it and frees the workspace", async () => {
    const d = dataDir("zero-target");
    writeTree(d.workspace, { "a.txt": "same", "dir/b.txt": "same b" });
    const { checkpointId } = await openCheckpointStore({ dataDir: d.dataDir }).createCheckpoint(d.workspace);
    await killedChild(
      {
        DRYDOCK_FLOW: "restore",
        DRYDOCK_DATA_DIR: d.dataDir,
        DRYDOCK_WORKSPACE: d.workspace,
        DRYDOCK_CHECKPOINT_ID: checkpointId,
        DRYDOCK_OPERATION_ID: "op-zero",
      },
      "restore.after-workspace-applied",
    );
    harvestSecrets(d.dataDir);
    const workspaceBefore = snapshotTree(d.workspace);

    const shown = jsonOut(await cli(["restores", "show", "op-zero", "--data-dir", d.dataDir, "--json"]));
    expect(shown.restore.saga.phase).toBe("workspace_applied");
    expect(shown.restore.recommended).toBe("complete");
    expect(shown.commands).toMatchObject({ abort: null, release: null, rollback: null });
    expect(shown.commands.complete).toBe(
      `drydock --data-dir ${d.dataDir} restores complete op-zero --expected-seq ${shown.restore.fence.expectedSeq} --expected-hash ${shown.restore.fence.expectedHash} --expected-owner-digest ${shown.restore.fence.expectedOwnerDigest} --yes`,
    );
    const status = await cli(["status", "--data-dir", d.dataDir]);
    expect(status.code).toBe(6); // boat.dev not configured here: INCOMPLETE besides the attention item
    expect(status.stdout).toContain(shown.commands.complete);

    const before = snapshotTree(d.dataDir);
    const preview = await cli(["restores", "complete", "op-zero", "--data-dir", d.dataDir]);
    expect(preview.code).toBe(0);
    expect(preview.stdout).toContain(shown.commands.complete);
    expect(snapshotTree(d.dataDir)).toEqual(before);

    const applied = await cli([...argsOf(shown.commands.complete), "--json"]);
    expect(applied.code).toBe(0);
    expect(jsonOut(applied)).toMatchObject({
      ok: true,
      action: "complete",
      phase: "completed",
      archived: true,
    });
    expect(lockOwner(d)).toBeNull();
    expect(snapshotTree(d.workspace)).toEqual(workspaceBefore);
    const archived = await store(d).loadArchived("op-zero");
    expect(archived.events.map((event) => event.phase).slice(-3)).toEqual([
      "recovery_required",
      "recovery_started",
      "completed",
    ]);
    const after = await cli(["status", "--data-dir", d.dataDir]);
    expect(after.stdout).not.toContain("op-zero");
  });

  it("without boat.dev, status applies the plan's in-flight window to a prepared deletion, then asks for a person", async () => {
    const d = dataDir("fence-fresh");
    await openBoatDeleteJournal({ dataDir: d.dataDir }).prepareBoatDeletion({
      boxId: "bx_23456789",
      name: "drydock-fresh",
      ownerBotId: "bot1",
    });
    const fresh = await cli(["status", "--data-dir", d.dataDir]);
    expect(fresh.code).toBe(6);
    expect(fresh.stdout.trim().split("\n").at(-1)).toMatch(
      /^INCOMPLETE: nothing needs a person in the journals, restores and locks, but boat\.dev was not checked: .* 1 item\(s\) are still in progress/,
    );
    const file = join(d.dataDir, "box-delete-requests.json");
    const journal = JSON.parse(readFileSync(file, "utf8"));
    for (const record of journal.records) {
      record.requestedAt -= DELETE_IN_FLIGHT_MS + 1_000;
      record.updatedAt -= DELETE_IN_FLIGHT_MS + 1_000;
    }
    writeFileSync(file, `${JSON.stringify(journal, null, 2)}\n`);
    const stale = await cli(["status", "--data-dir", d.dataDir]);
    expect(stale.stdout.trim().split("\n").at(-1)).toMatch(/^ATTENTION: 1 item/);
    expect(stale.stdout).toContain(
      "INCOMPLETE: boat.dev was not checked: set BOAT_API_URL and BOAT_API_TOKEN",
    );
    // A fence stamped an hour ahead of this clock is clock skew, a person's, never an hour-long "wait".
    const skewed = dataDir("fence-skewed");
    await openBoatDeleteJournal({
      dataDir: skewed.dataDir,
      now: () => Date.now() + 3_600_000,
    }).prepareBoatDeletion({
      boxId: "bx_34567892",
      name: "drydock-skewed",
      ownerBotId: "bot1",
    });
    const ahead = await cli(["status", "--data-dir", skewed.dataDir]);
    expect(ahead.stdout.trim().split("\n").at(-1)).toMatch(/^ATTENTION: 1 item/);
    // A directory the embedded simulator served: what is missing is its server, and the verdict says so.
    writeFileSync(join(d.dataDir, "boat-simulator.json"), "{}\n");
    const embedded = await cli(["status", "--data-dir", d.dataDir]);
    expect(embedded.stdout).toContain(
      "uses the bot server's embedded simulator, which runs only with its server: start the bot server on it",
    );
  });

  it("a restore whose live owner has not moved its saga for over half an hour: status asks a person to check that process", async () => {
    const d = dataDir("quiet-live");
    // Its events were written 31 minutes ago (the store's clock), by this running process, which still
    // holds the workspace lock.
    const old = openSagaStore({
      stateDir: join(d.dataDir, "restore-sagas"),
      workspaceRoot: realpathSync(d.workspace),
      now: () => Date.now() - 31 * 60_000,
    });
    const created = await old.create("op-quiet-live", {
      kind: "checkpoint-restore",
      checkpointId: "cp-1",
      checkpointManifestDigest: `sha256:${"a".repeat(64)}`,
      actorPid: process.pid,
    });
    const held = await acquireWorkspaceLock({
      dataDir: d.dataDir,
      workspaceRoot: d.workspace,
      transactionId: "op-quiet-live",
    });
    try {
      await old.advance("op-quiet-live", {
        expectedSeq: created.seq,
        expectedHash: created.headHash,
        phase: "locked",
        evidence: { workspaceLockOwner: held.owner, lockOwnerDigest: held.ownerDigest },
      });
      const status = await cli(["status", "--data-dir", d.dataDir]);
      expect(status.stdout).toContain("but its saga has not moved for 31 min");
      expect(status.stdout).toContain(`drydock --data-dir ${d.dataDir} restores show op-quiet-live`);
      expect(status.stdout.trim().split("\n").at(-1)).toMatch(/^ATTENTION: 1 item/);
      const listed = await cli(["restores", "list", "--data-dir", d.dataDir]);
      expect(listed.stdout).toContain("no progress for 31 min: check its process");
    } finally {
      held.release();
    }
  });

  it("a restore that failed in a process that runs on: status says a person must stop that process, never OK", async () => {
    const d = dataDir("kept-by-live");
    writeTree(d.workspace, { "a.txt": "old" });
    const { checkpointId } = await openCheckpointStore({ dataDir: d.dataDir }).createCheckpoint(d.workspace);
    writeTree(d.workspace, { "a.txt": "new" });
    // This test's process plays the bot server: the restore fails after its first change and keeps the lock.
    await expect(
      restoreCheckpoint({
        dataDir: d.dataDir,
        workspaceRoot: d.workspace,
        checkpointId,
        operationId: "op-kept-live",
        crash: {
          point(name: string) {
            if (name === "restore.after-mutation-started") throw new Error("test: injected failure");
          },
        },
      }),
    ).rejects.toMatchObject({ code: "RECOVERY_REQUIRED" });
    const status = await cli(["status", "--data-dir", d.dataDir]);
    expect(status.code).toBe(6); // boat.dev not configured here: INCOMPLETE besides the attention item
    expect(status.stdout).toContain(
      `failed in process ${process.pid}, which is still running and keeps the workspace lock for recovery`,
    );
    expect(status.stdout).toContain(`drydock --data-dir ${d.dataDir} restores show op-kept-live`);
    expect(status.stdout.trim().split("\n").at(-1)).toMatch(/^ATTENTION: 1 item/);
    const listed = await cli(["restores", "list", "--data-dir", d.dataDir]);
    expect(listed.stdout).toContain(`stop process ${process.pid} first`);
  });

  it("a restore killed mid-mutation whose lock was removed by hand: show prints the rollback with --expected-owner-digest none, and the printed command rolls it back", async () => {
    const d = dataDir("lock-removed");
    await killedRestore(d, "op-nolock", "restore.after-entry-applied");
    rmSync(workspaceLockPath(d.dataDir, realpathSync(d.workspace)));

    const shown = jsonOut(await cli(["restores", "show", "op-nolock", "--data-dir", d.dataDir, "--json"]));
    expect(shown.restore.owner).toBeNull();
    expect(shown.restore.recommended).toBe("rollback");
    expect(shown.commands.rollback).toContain("--expected-owner-digest none --yes");
    const listed = jsonOut(await cli(["restores", "list", "--data-dir", d.dataDir, "--json"]));
    expect(listed.restores).toEqual([
      expect.objectContaining({
        operationId: "op-nolock",
        next: "rollback",
        command: shown.commands.rollback,
      }),
    ]);

    const applied = await cli(argsOf(shown.commands.rollback));
    expect(applied.code).toBe(0);
    expect(snapshotTree(d.workspace)).toEqual({
      "a.txt": "edited a",
      "dir/": "",
      "dir/b.txt": "edited b",
      "new.txt": "added after",
    });
    expect(lockOwner(d)).toBeNull();
    expect((await store(d).loadArchived("op-nolock")).phase).toBe("rolled_back");
  });

  it("an unreadable lock: --expected-owner-digest accepts torn:sha256:…, and a lock changed in this boot is never taken over", async () => {
    const d = dataDir("lock-unreadable");
    await killedRestore(d, "op-torn", "restore.after-entry-applied");
    const lock = workspaceLockPath(d.dataDir, realpathSync(d.workspace));
    writeFileSync(lock, "");
    const shown = await cli(["restores", "show", "op-torn", "--data-dir", d.dataDir, "--json"]);
    // Written in this boot (no reboot happened here): not torn by a power loss, so a person's step.
    expect(shown.code).toBe(1);
    expect(jsonErr(shown).error.message).toContain("after this machine booted");
    expect(jsonErr(shown).error.message).toContain("--expected-owner-digest none");
    const saga = await store(d).load("op-torn");
    const fence = ["--expected-seq", String(saga.seq), "--expected-hash", saga.headHash];
    const torn = await cli([
      "restores",
      "rollback",
      "op-torn",
      ...fence,
      "--expected-owner-digest",
      `torn:sha256:${"0".repeat(64)}`,
      "--yes",
      "--data-dir",
      d.dataDir,
      "--json",
    ]);
    // The format is accepted (not a usage error); the fresh preview then refuses the unreadable lock.
    expect(torn.code).toBe(1);
    expect(jsonErr(torn).error.code).toBe("lock_failed");
    const malformed = await cli([
      "restores",
      "rollback",
      "op-torn",
      ...fence,
      "--expected-owner-digest",
      "torn:sha256:zz",
      "--yes",
      "--data-dir",
      d.dataDir,
      "--json",
    ]);
    expect(malformed.code).toBe(2);
    expect(readFileSync(lock, "utf8")).toBe("");
    expect((await store(d).load("op-torn")).seq).toBe(saga.seq);
  });

  it("restores purge with an empty --older-than-days is a usage error (exit 2), not 0 days", async () => {
    const d = dataDir("purge-empty");
    const before = snapshotTree(d.dataDir);
    const [empty, blank] = await Promise.all([
      cli(["restores", "purge", "--older-than-days", "", "--data-dir", d.dataDir, "--json"]),
      cli(["restores", "purge", "--older-than-days", " ", "--data-dir", d.dataDir, "--json"]),
    ]);
    for (const result of [empty, blank]) {
      expect(result.code).toBe(2);
      expect(jsonErr(result).error.code).toBe("usage");
    }
    expect(snapshotTree(d.dataDir)).toEqual(before);
  });

  it("usage errors exit 2 with the JSON error on stderr", async () => {
    const [unknown, badSeq] = await Promise.all([
      cli(["restores", "frobnicate", "--json"]),
      cli([
        "restores",
        "abort",
        "op-x",
        "--expected-seq",
        "x",
        "--expected-hash",
        "h",
        "--expected-owner-digest",
        "none",
        "--yes",
        "--data-dir",
        dataDir("usage").dataDir,
      ]),
    ]);
    expect(unknown.code).toBe(2);
    expect(jsonErr(unknown)).toMatchObject({ ok: false, error: { code: "usage" }, exitCode: 2 });
    expect(unknown.stdout).toBe("");
    expect(badSeq.code).toBe(2);
  });

  it("never prints an idempotency key, a bearer token or a lock token", () => {
    expect(transcript.length).toBeGreaterThan(20);
    expect(secrets.size).toBeGreaterThan(3);
    const everything = transcript.join("\n");
    for (const secret of secrets)
      expect(everything.includes(secret), `secret leaked: ${secret.slice(0, 4)}…`).toBe(false);
  });
});

/** Every file under `dir` (recursively), as full paths. */
function listFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath, entry.name));
}
