import { spawn } from "node:child_process";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import {
  inspectWorkspaceLock,
  isAbortable,
  isSagaError,
  openCheckpointStore,
  openSagaStore,
  rollbackFromSafetyCheckpoint,
  type SagaError,
  type SagaState,
  type SagaStore,
  takeoverWorkspaceLock,
} from "../src/index.js";

export function makeTempDir(prefix: string): string {
  return fs.realpathSync(fs.mkdtempSync(join(tmpdir(), `rs-${prefix}-`)));
}

export function removeDir(dir: string): void {
  fs.rmSync(dir, { recursive: true, force: true });
}

/** Writes files (content string) and directories (value null) under root. */
export function writeTree(root: string, entries: Record<string, string | null>): void {
  for (const [rel, content] of Object.entries(entries)) {
    const abs = join(root, rel);
    if (content === null) fs.mkdirSync(abs, { recursive: true });
    else {
      fs.mkdirSync(dirname(abs), { recursive: true });
      fs.writeFileSync(abs, content);
    }
  }
}

/** Every entry under root: path → "dir <mode>" | "file <mode> <base64>" | "link <target>". */
export function snapshotTree(root: string): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (rel: string): void => {
    for (const name of fs.readdirSync(rel === "" ? root : join(root, rel)).sort()) {
      const path = rel === "" ? name : `${rel}/${name}`;
      const abs = join(root, path);
      const stat = fs.lstatSync(abs);
      const mode = (stat.mode & 0o7777).toString(8);
      if (stat.isSymbolicLink()) out.set(path, `link ${fs.readlinkSync(abs)}`);
      else if (stat.isDirectory()) {
        out.set(path, `dir ${mode}`);
        walk(path);
      } else out.set(path, `file ${mode} ${fs.readFileSync(abs).toString("base64")}`);
    }
  };
  walk("");
  return out;
}

export function sameTree(a: Map<string, string>, b: Map<string, string>): boolean {
  if (a.size !== b.size) return false;
  for (const [key, value] of a) if (b.get(key) !== value) return false;
  return true;
}

/** A pid that belonged to a process this test spawned and reaped: provably dead now. */
export async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ["-e", ""], { stdio: "ignore" });
  const pid = child.pid!;
  await new Promise<void>((done) => child.on("exit", () => done()));
  return pid;
}

/** A liveness probe that reports every process dead (as kill(pid, 0) answering ESRCH). */
export const everyoneDead = (): boolean => {
  throw Object.assign(new Error("ESRCH"), { code: "ESRCH" });
};

export function sagaStoreFor(dataDir: string, workspaceRoot: string): SagaStore {
  return openSagaStore({ stateDir: join(dataDir, "restore-sagas"), workspaceRoot });
}

/**
 * A workspace with a "before" state and a checkpoint of an "after" state (a few files changed, removed
 * and added, a directory added and one removed). The blob store also holds the before-state's content
 * (a user checkpoint of it), so the restore's safety checkpoint deduplicates.
 */
export async function makeRestoreFixture(
  base: string,
  size: number,
  options: { durable?: boolean } = {},
): Promise<{
  dataDir: string;
  workspace: string;
  checkpointId: string;
  before: Map<string, string>;
  after: Map<string, string>;
}> {
  const dataDir = join(base, "data");
  const workspace = join(base, "workspace");
  fs.mkdirSync(workspace, { recursive: true });
  const checkpoints = openCheckpointStore({ dataDir, durable: options.durable ?? false });
  const after: Record<string, string | null> = { "new-dir": null, "new-dir/inside.txt": "added dir file" };
  for (let i = 0; i < size; i += 1) after[`d${i % 7}/f${i}.txt`] = `after ${i} ${"x".repeat(i % 13)}`;
  writeTree(workspace, after);
  fs.chmodSync(join(workspace, "d1"), 0o750);
  const { checkpointId } = await checkpoints.createCheckpoint(workspace);
  const afterSnapshot = snapshotTree(workspace);
  fs.rmSync(join(workspace, "new-dir"), { recursive: true });
  fs.chmodSync(join(workspace, "d1"), 0o755);
  for (let i = 0; i < size; i += 1) {
    const path = join(workspace, `d${i % 7}/f${i}.txt`);
    if (i % 3 === 0) fs.writeFileSync(path, `before ${i}`);
    else if (i % 11 === 0) fs.rmSync(path);
    else if (i % 17 === 0) fs.chmodSync(path, 0o600);
  }
  writeTree(workspace, { "only-before.txt": "remove me", "old-dir/a.txt": "a", "old-dir/deep/b.txt": "b" });
  await checkpoints.createCheckpoint(workspace);
  return { dataDir, workspace, checkpointId, before: snapshotTree(workspace), after: afterSnapshot };
}

export type RecoveryOutcome = "none" | "archived" | "released" | "aborted" | "rolled_back";

/**
 * Settles a restore that stopped anywhere, the way the recovery controller will: nothing to do when no
 * saga was published; release a finished one; abort one that never mutated (lock-free from `created`,
 * otherwise through a takeover of its exact dead owner); roll back one that did, through the safety
 * checkpoint. Returns what it did and the (verified, archived) saga.
 */
export async function recoverRestore(options: {
  dataDir: string;
  workspaceRoot: string;
  operationId: string;
  isProcessAlive?: (pid: number) => boolean;
}): Promise<{ outcome: RecoveryOutcome; saga: SagaState | null }> {
  const { dataDir, workspaceRoot, operationId } = options;
  const store = sagaStoreFor(dataDir, workspaceRoot);
  const lockOptions = {
    dataDir,
    workspaceRoot,
    transactionId: operationId,
    ...(options.isProcessAlive ? { isProcessAlive: options.isProcessAlive } : {}),
  };
  const owner = inspectWorkspaceLock({ dataDir, workspaceRoot });
  const ownOwner = owner && owner.payload.transactionId === operationId ? owner : null;
  if (owner && !ownOwner) throw new Error(`a foreign lock owner is on disk: ${owner.payload.transactionId}`);

  let saga: SagaState;
  try {
    saga = await store.load(operationId);
  } catch (error) {
    if (!isSagaError(error) || error.code !== "NOT_FOUND") throw error;
    if (ownOwner) throw new Error("a lock owner exists for a saga that is not active");
    try {
      return { outcome: "archived", saga: await store.loadArchived(operationId) };
    } catch (archivedError) {
      if (isSagaError(archivedError) && archivedError.code === "NOT_FOUND")
        return { outcome: "none", saga: null };
      throw archivedError;
    }
  }
  const archive = async (state: SagaState): Promise<SagaState> => {
    await store.archiveTerminal(operationId, { expectedSeq: state.seq, expectedHash: state.headHash });
    return store.loadArchived(operationId);
  };

  if (saga.terminal) {
    if (ownOwner) (await takeoverWorkspaceLock({ ...lockOptions, expectedOwner: ownOwner })).release();
    return { outcome: "released", saga: await archive(saga) };
  }
  if (isAbortable(saga)) {
    if (!ownOwner) {
      if (saga.phase !== "created") throw new Error(`no lock owner for a ${saga.phase} saga`);
      const aborted = await store.advance(operationId, {
        expectedSeq: saga.seq,
        expectedHash: saga.headHash,
        phase: "aborted",
        evidence: { recoveryAction: "abort-before-lock", reason: "test recovery" },
      });
      return { outcome: "aborted", saga: await archive(aborted) };
    }
    const lease = await takeoverWorkspaceLock({ ...lockOptions, expectedOwner: ownOwner });
    let state = saga;
    const next = async (phase: "recovery_required" | "recovery_started" | "aborted", evidence: object) => {
      state = await store.advance(operationId, {
        expectedSeq: state.seq,
        expectedHash: state.headHash,
        phase,
        evidence: evidence as Record<string, unknown>,
      });
    };
    if (state.phase !== "recovery_required") {
      await next("recovery_required", { reason: "test recovery", errorCode: "TEST_ABORT" });
    }
    await next("recovery_started", {
      workspaceLockOwner: lease.owner,
      lockOwnerDigest: lease.ownerDigest,
      recoveryAction: "abort-pre-intent",
    });
    await next("aborted", { recoveryAction: "abort-pre-intent", reason: "test recovery" });
    lease.release();
    return { outcome: "aborted", saga: await archive(state) };
  }
  if (!ownOwner) throw new Error(`no lock owner for a ${saga.phase} saga`);
  const lease = await takeoverWorkspaceLock({ ...lockOptions, expectedOwner: ownOwner });
  const rolled = await rollbackFromSafetyCheckpoint({
    dataDir,
    workspaceRoot,
    operationId,
    fence: { expectedSeq: saga.seq, expectedHash: saga.headHash },
    lease,
    durable: false,
  });
  lease.release();
  return { outcome: "rolled_back", saga: await archive(rolled) };
}

/** Files whose name looks like a temporary or quarantine file of any writer. */
export function strayFiles(root: string): string[] {
  return [...snapshotTree(root).keys()].filter((path) =>
    /(^|\/)\.[^/]*\.tmp$|quarantine|\.candidate-/.test(path),
  );
}

/** The SagaError a promise rejects with; fails the test if it resolves or rejects with anything else. */
export async function rejection(promise: Promise<unknown>): Promise<SagaError> {
  try {
    await promise;
  } catch (error) {
    if (isSagaError(error)) return error;
    throw error;
  }
  throw new Error("expected a SagaError");
}
