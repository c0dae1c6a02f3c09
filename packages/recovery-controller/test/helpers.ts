import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { BoatClient } from "@drydock/boat-provider";
import {
  acquireWorkspaceLock,
  type HeldWorkspaceLock,
  openCheckpointStore,
  openSagaStore,
  type SagaState,
  type SagaStore,
} from "@drydock/restore-saga";

const here = dirname(fileURLToPath(import.meta.url));
const PACKAGE_DIR = join(here, "..");
export const RESTORE_CHILD = join(here, "fixtures", "restore-child.ts");
export const ROLLBACK_CHILD = join(here, "fixtures", "rollback-child.ts");

export const dead = (): boolean => false;
export const H = (c: string): string => `sha256:${c.repeat(64)}`;

export interface Sandbox {
  dataDir: string;
  workspace: string;
  store: SagaStore;
  cleanup(): void;
}

export function sandbox(): Sandbox {
  const root = mkdtempSync(join(tmpdir(), "drydock-recovery-"));
  const dataDir = join(root, "data");
  const workspace = join(dataDir, "workspaces", "bot1");
  mkdirSync(workspace, { recursive: true });
  const store = openSagaStore({ stateDir: join(dataDir, "restore-sagas"), workspaceRoot: workspace });
  return { dataDir, workspace, store, cleanup: () => rmSync(root, { recursive: true, force: true }) };
}

/** Takes the workspace lock for `operationId` and never releases it: what a SIGKILLed holder leaves. */
export async function abandonedLock(box: Sandbox, operationId: string): Promise<HeldWorkspaceLock> {
  return acquireWorkspaceLock({
    dataDir: box.dataDir,
    workspaceRoot: box.workspace,
    transactionId: operationId,
  });
}

export async function advance(
  store: SagaStore,
  saga: SagaState,
  phase: string,
  evidence: Record<string, unknown>,
): Promise<SagaState> {
  return store.advance(saga.operationId, {
    expectedSeq: saga.seq,
    expectedHash: saga.headHash,
    phase: phase as never,
    evidence,
  });
}

export async function createdSaga(box: Sandbox, operationId: string, actorPid = 999_999): Promise<SagaState> {
  return box.store.create(operationId, {
    kind: "checkpoint-restore",
    checkpointId: "cp-1",
    checkpointManifestDigest: H("a"),
    actorPid,
  });
}

/** created → locked with an abandoned (dead once probes say so) workspace lock. */
export async function lockedSaga(
  box: Sandbox,
  operationId: string,
): Promise<{ saga: SagaState; held: HeldWorkspaceLock }> {
  const created = await createdSaga(box, operationId);
  const held = await abandonedLock(box, operationId);
  const saga = await advance(box.store, created, "locked", {
    workspaceLockOwner: held.owner,
    lockOwnerDigest: held.ownerDigest,
  });
  return { saga, held };
}

/** A zero-target restore that reached `completed` while still holding its lock (killed before release). */
export async function completedSaga(
  box: Sandbox,
  operationId: string,
): Promise<{ saga: SagaState; held: HeldWorkspaceLock }> {
  let { saga, held } = await lockedSaga(box, operationId);
  saga = await advance(box.store, saga, "prepared", { prestateDigest: H("b"), targetCount: 0 });
  saga = await advance(box.store, saga, "intent_committed", {
    intentCommitDigest: H("c"),
    authority: "operation",
  });
  saga = await advance(box.store, saga, "workspace_applied", { appliedCount: 0, poststateDigest: H("b") });
  saga = await advance(box.store, saga, "completed", { resultDigest: H("d") });
  return { saga, held };
}

/** Every file under `root` with its bytes, for exact before/after comparisons. */
export function snapshotTree(root: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (dir: string, prefix: string): void => {
    for (const name of readdirSync(dir).sort()) {
      const full = join(dir, name);
      const rel = prefix ? `${prefix}/${name}` : name;
      if (statSync(full).isDirectory()) {
        out[`${rel}/`] = "";
        walk(full, rel);
      } else out[rel] = readFileSync(full, "utf8");
    }
  };
  walk(root, "");
  return out;
}

export function writeTree(root: string, files: Record<string, string>): void {
  for (const [rel, content] of Object.entries(files)) {
    mkdirSync(dirname(join(root, rel)), { recursive: true });
    writeFileSync(join(root, rel), content);
  }
}

export async function checkpoint(box: Sandbox): Promise<string> {
  const created = await openCheckpointStore({ dataDir: box.dataDir }).createCheckpoint(box.workspace);
  return created.checkpointId;
}

/** Runs the restore child until it SIGKILLs itself at `crashPoint` (hang guard: 30 s). */
export async function killedRestore(
  box: Sandbox,
  checkpointId: string,
  operationId: string,
  crashPoint: string,
  occurrence = 1,
): Promise<{ signal: NodeJS.Signals | null; stdout: string; pid: number }> {
  return runUntilCrash(
    RESTORE_CHILD,
    {
      DRYDOCK_DATA_DIR: box.dataDir,
      DRYDOCK_WORKSPACE: box.workspace,
      DRYDOCK_CHECKPOINT_ID: checkpointId,
      DRYDOCK_OPERATION_ID: operationId,
    },
    crashPoint,
    occurrence,
  );
}

/**
 * Runs the rollback child (an operator's preview + rollback through the controller, in its own process)
 * until it SIGKILLs itself at the `occurrence`-th `crashPoint` (hang guard: 30 s).
 */
export async function killedRollback(
  box: Sandbox,
  operationId: string,
  crashPoint: string,
  occurrence = 1,
): Promise<{ signal: NodeJS.Signals | null; stdout: string; pid: number }> {
  return runUntilCrash(
    ROLLBACK_CHILD,
    { DRYDOCK_DATA_DIR: box.dataDir, DRYDOCK_WORKSPACE: box.workspace, DRYDOCK_OPERATION_ID: operationId },
    crashPoint,
    occurrence,
  );
}

/** Runs a crash-test child to its self-inflicted SIGKILL; fails if it never reached the point. */
async function runUntilCrash(
  fixture: string,
  env: Record<string, string>,
  crashPoint: string,
  occurrence: number,
): Promise<{ signal: NodeJS.Signals | null; stdout: string; pid: number }> {
  const child = spawn(process.execPath, ["--conditions=@drydock/source", "--import", "tsx", fixture], {
    cwd: PACKAGE_DIR,
    env: {
      ...process.env,
      ...env,
      DRYDOCK_CRASH_POINT: crashPoint,
      DRYDOCK_CRASH_OCCURRENCE: String(occurrence),
    },
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    stdout += chunk.toString("utf8");
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString("utf8");
  });
  const timer = setTimeout(() => {
    try {
      process.kill(-child.pid!, "SIGKILL");
    } catch {}
  }, 30_000);
  try {
    const signal = await new Promise<NodeJS.Signals | null>((resolve) => {
      // "close", not "exit": exit can come before the child's last output is read.
      child.on("close", (_code, sig) => resolve(sig));
    });
    if (!stdout.includes(`crash ${crashPoint}`)) {
      throw new Error(
        `the child ${basename(fixture)} did not reach ${crashPoint}#${occurrence}: ${stdout} ${stderr}`,
      );
    }
    return { signal, stdout, pid: child.pid! };
  } finally {
    clearTimeout(timer);
    try {
      process.kill(-child.pid!, "SIGKILL");
    } catch {}
  }
}

/** A file's text, or null when it cannot be read (a journal not written yet). */
export function readOr(file: string): string | null {
  try {
    return readFileSync(file, "utf8");
  } catch {
    return null;
  }
}

/** What `promise` rejects with; fails when it resolves. */
export async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected a rejection");
}

/** A Boat made at boat.dev behind drydock's back, named `name` (or left unnamed). */
export async function namedBoat(
  client: { createSandbox: BoatClient["createSandbox"]; renameSandbox: BoatClient["renameSandbox"] },
  name: string | null,
): Promise<string> {
  const { sandbox } = await client.createSandbox(
    { ttlSeconds: 600, noEnv: true },
    { idempotencyKey: randomUUID() },
  );
  if (name !== null) await client.renameSandbox(sandbox.id, name);
  return sandbox.id;
}
