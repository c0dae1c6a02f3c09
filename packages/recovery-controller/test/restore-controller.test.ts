import { rmSync } from "node:fs";
import { join } from "node:path";
import { inspectWorkspaceLock, isSagaError, SagaError } from "@drydock/restore-saga";
import { afterEach, describe, expect, it } from "vitest";
import {
  createRestoreRecoveryController,
  defaultRestorePorts,
  isRecoveryError,
  type RecoverySagaStore,
} from "../src/index.js";
import {
  advance,
  checkpoint,
  completedSaga,
  createdSaga,
  dead,
  H,
  killedRestore,
  lockedSaga,
  type Sandbox,
  sandbox,
  snapshotTree,
  writeTree,
} from "./helpers.js";

let box: Sandbox;
afterEach(() => box?.cleanup());

function controller(extra: { store?: RecoverySagaStore; isProcessAlive?: (pid: number) => boolean } = {}) {
  const ports = defaultRestorePorts({
    dataDir: box.dataDir,
    workspaceRoot: box.workspace,
    isProcessAlive: dead,
  });
  return createRestoreRecoveryController({
    dataDir: box.dataDir,
    workspaceRoot: box.workspace,
    isProcessAlive: extra.isProcessAlive ?? dead,
    store: extra.store ?? ports.store,
    lock: ports.lock,
    rollback: ports.rollback,
  });
}

const owner = () => inspectWorkspaceLock({ dataDir: box.dataDir, workspaceRoot: box.workspace });

async function rejection(promise: Promise<unknown>): Promise<Record<string, unknown>> {
  try {
    await promise;
  } catch (error) {
    return error as Record<string, unknown>;
  }
  throw new Error("expected a rejection");
}

describe("restore recovery controller", () => {
  it("takes over one exact dead owner, journals recovery, aborts, releases, and archives", async () => {
    box = sandbox();
    await lockedSaga(box, "op-abort");
    const recovery = controller();
    const { fence } = await recovery.preview("op-abort");
    expect(fence.expectedOwnerDigest).toMatch(/^sha256:/);

    const result = await recovery.abort("op-abort", { ...fence, reason: "operator test" });

    expect(result).toMatchObject({
      ok: true,
      action: "abort",
      phase: "aborted",
      archived: true,
      alreadyArchived: false,
      reconciledFromError: false,
      warning: null,
    });
    expect(owner()).toBeNull();
    const archived = await box.store.loadArchived("op-abort");
    expect(archived.events.map((event) => [event.seq, event.phase])).toEqual([
      [1, "created"],
      [2, "locked"],
      [3, "recovery_required"],
      [4, "recovery_started"],
      [5, "aborted"],
    ]);
    expect(archived.events[4]?.evidence).toEqual({
      recoveryAction: "abort-pre-intent",
      reason: "operator test",
    });
  });

  it("CAS-aborts created state only after proving its initiator stopped and no owner published", async () => {
    box = sandbox();
    await createdSaga(box, "op-created");
    const recovery = controller();
    const { fence } = await recovery.preview("op-created");
    expect(fence.expectedOwnerDigest).toBeNull();

    const result = await recovery.abort("op-created", { ...fence });

    expect(result).toMatchObject({ ok: true, phase: "aborted", seq: 2, archived: true });
    expect(owner()).toBeNull();
    const archived = await box.store.loadArchived("op-created");
    expect(archived.events.map((event) => event.phase)).toEqual(["created", "aborted"]);
    expect(archived.events[1]?.evidence.recoveryAction).toBe("abort-before-lock");
  });

  it("refuses a lock-free created abort while its durable initiator may still be live", async () => {
    box = sandbox();
    await createdSaga(box, "op-live", 4242);
    const recovery = controller({ isProcessAlive: (pid) => pid === 4242 });
    const { fence } = await recovery.preview("op-live");

    const error = await rejection(recovery.abort("op-live", { ...fence }));

    expect(isRecoveryError(error)).toBe(true);
    expect(error.code).toBe("OWNER_CONFLICT");
    expect((error.details as Record<string, unknown>).actorPid).toBe(4242);
    const saga = await box.store.load("op-live");
    expect([saga.phase, saga.seq]).toEqual(["created", 1]);
  });

  it("rejects stale saga or owner authority before replacing the retained owner", async () => {
    box = sandbox();
    await lockedSaga(box, "op-stale");
    const recovery = controller();
    const { fence } = await recovery.preview("op-stale");
    const before = owner();

    const stale = await rejection(
      recovery.abort("op-stale", { ...fence, expectedSeq: fence.expectedSeq + 1 }),
    );
    expect(stale.code).toBe("SAGA_CONFLICT");
    expect(stale.details).toMatchObject({ expectedSeq: 3, actualSeq: 2 });

    const wrongOwner = await rejection(recovery.abort("op-stale", { ...fence, expectedOwnerDigest: H("e") }));
    expect(wrongOwner.code).toBe("OWNER_CONFLICT");

    expect(owner()).toEqual(before);
    expect((await box.store.load("op-stale")).seq).toBe(2);
  });

  // drydock deviates from seed 004 here on purpose (see docs/ARCHITECTURE.md): with no session outside the
  // workspace, every phase before mutation_started leaves the workspace provably untouched, so an abort
  // through the fenced takeover is safe, and refusing would leave such a restore with no way out.
  it.each(["prepared", "intent_committed", "safety_ready"])(
    "aborts a restore stopped at %s (before any file changed) through the fenced takeover, workspace untouched",
    async (phase) => {
      box = sandbox();
      writeTree(box.workspace, { "keep.txt": "untouched", "dir/a.txt": "a" });
      const before = snapshotTree(box.workspace);
      let { saga } = await lockedSaga(box, "op-intent");
      saga = await advance(box.store, saga, "prepared", { prestateDigest: H("b"), targetCount: 1 });
      if (phase !== "prepared") {
        saga = await advance(box.store, saga, "intent_committed", {
          intentCommitDigest: H("c"),
          authority: "operation",
        });
      }
      if (phase === "safety_ready") {
        saga = await advance(box.store, saga, "safety_ready", {
          safetyCheckpointId: "ckpt-safety",
          safetyManifestDigest: H("d"),
          coverage: "full",
        });
      }
      const recovery = controller();
      const preview = await recovery.preview("op-intent");
      expect(preview.actions.abort.eligible).toBe(true);
      expect(preview.actions.rollback.eligible).toBe(false);

      const result = await recovery.abort("op-intent", {
        ...preview.fence,
        reason: "killed before mutation",
      });

      expect(result).toMatchObject({ ok: true, action: "abort", phase: "aborted", archived: true });
      expect(owner()).toBeNull();
      expect(snapshotTree(box.workspace)).toEqual(before);
      const archived = await box.store.loadArchived("op-intent");
      expect(archived.events.map((event) => event.phase).slice(-3)).toEqual([
        "recovery_required",
        "recovery_started",
        "aborted",
      ]);
    },
  );

  it("refuses to abort a restore that reached mutation_started (files may have changed): roll it back instead", async () => {
    box = sandbox();
    let { saga } = await lockedSaga(box, "op-mutating");
    saga = await advance(box.store, saga, "prepared", { prestateDigest: H("b"), targetCount: 1 });
    saga = await advance(box.store, saga, "intent_committed", {
      intentCommitDigest: H("c"),
      authority: "operation",
    });
    saga = await advance(box.store, saga, "safety_ready", {
      safetyCheckpointId: "ckpt-safety",
      safetyManifestDigest: H("d"),
      coverage: "full",
    });
    saga = await advance(box.store, saga, "mutation_started", { targetCount: 1, coverage: "full" });
    const recovery = controller();
    const preview = await recovery.preview("op-mutating");
    expect(preview.actions.abort.eligible).toBe(false);
    expect(preview.actions.abort.blockers[0]).toContain("roll it back instead");
    const before = owner();

    const error = await rejection(recovery.abort("op-mutating", { ...preview.fence }));

    expect(error.code).toBe("ACTION_NOT_ALLOWED");
    expect((error.details as Record<string, unknown>).basePhase).toBe("mutation_started");
    expect(owner()).toEqual(before);
    expect((await box.store.load("op-mutating")).phase).toBe("mutation_started");
  });

  it("journals recovery_required and retains the replacement owner when abort settlement fails", async () => {
    box = sandbox();
    await lockedSaga(box, "op-fail");
    const real = defaultRestorePorts({ dataDir: box.dataDir, workspaceRoot: box.workspace }).store;
    const injected = new Error("injected: the aborted write failed");
    const failing: RecoverySagaStore = {
      load: (id) => real.load(id),
      loadArchived: (id) => real.loadArchived(id),
      archiveTerminal: (id, fence) => real.archiveTerminal(id, fence),
      advance: (id, input) =>
        input.phase === "aborted" ? Promise.reject(injected) : real.advance(id, input),
    };
    const recovery = controller({ store: failing });
    const { fence } = await recovery.preview("op-fail");
    const before = owner()!;

    const error = await rejection(recovery.abort("op-fail", { ...fence }));

    expect(isSagaError(error)).toBe(true);
    expect((error as unknown as SagaError).details.workspaceLockRetained).toBe(true);
    expect(error.recoveryRequired).toBe(true);
    expect(error.recoverySagaPhase).toBe("recovery_required");
    expect(error.recoveryCause).toBe(injected);
    const after = owner()!;
    expect(after.payload.transactionId).toBe("op-fail");
    expect(after.token).not.toBe(before.token);
    expect(after.pid).toBe(process.pid);
    const saga = await box.store.load("op-fail");
    expect(saga.events.map((event) => event.phase)).toEqual([
      "created",
      "locked",
      "recovery_required",
      "recovery_started",
      "recovery_required",
    ]);
  });

  it("takes over a crashed recovery attempt through recovery_required before starting a new one", async () => {
    box = sandbox();
    let { saga, held } = await lockedSaga(box, "op-again");
    saga = await advance(box.store, saga, "recovery_required", { reason: "first attempt", errorCode: "X" });
    // A first recovery took the lock over and died right after journaling recovery_started.
    const { takeoverWorkspaceLock } = await import("@drydock/restore-saga");
    const second = await takeoverWorkspaceLock({
      dataDir: box.dataDir,
      workspaceRoot: box.workspace,
      transactionId: "op-again",
      expectedOwner: held.owner,
      isProcessAlive: dead,
    });
    saga = await advance(box.store, saga, "recovery_started", {
      workspaceLockOwner: second.owner,
      lockOwnerDigest: second.ownerDigest,
      recoveryAction: "abort-pre-intent",
    });
    held = second;
    const recovery = controller();
    const { fence } = await recovery.preview("op-again");
    expect(fence.expectedOwnerDigest).toBe(held.ownerDigest);

    const result = await recovery.abort("op-again", { ...fence });

    expect(result).toMatchObject({ phase: "aborted", seq: 7, archived: true });
    const archived = await box.store.loadArchived("op-again");
    expect(archived.events.slice(4).map((event) => [event.seq, event.phase])).toEqual([
      [5, "recovery_required"],
      [6, "recovery_started"],
      [7, "aborted"],
    ]);
  });

  it("releases only an exact terminal retained owner and archives afterward", async () => {
    box = sandbox();
    await completedSaga(box, "op-done");
    const recovery = controller();
    const { fence, actions } = await recovery.preview("op-done");
    expect(actions.release.eligible).toBe(true);

    const result = await recovery.release("op-done", fence);

    expect(result).toMatchObject({
      action: "release",
      phase: "completed",
      archived: true,
      alreadyArchived: false,
    });
    expect(owner()).toBeNull();
    const again = await recovery.release("op-done", { ...fence, expectedOwnerDigest: null });
    expect(again).toMatchObject({ archived: true, alreadyArchived: true, phase: "completed" });
  });

  it("releases and archives a terminal saga whose workspace lock is already absent", async () => {
    box = sandbox();
    const { held } = await completedSaga(box, "op-unlocked");
    held.release();
    const recovery = controller();
    const { fence } = await recovery.preview("op-unlocked");
    expect(fence.expectedOwnerDigest).toBeNull();

    const result = await recovery.release("op-unlocked", fence);

    expect(result).toMatchObject({ ok: true, action: "release", archived: true, alreadyArchived: false });
    expect((await box.store.loadArchived("op-unlocked")).phase).toBe("completed");
  });

  it("does not release a nonterminal saga", async () => {
    box = sandbox();
    await lockedSaga(box, "op-running");
    const recovery = controller();
    const { fence } = await recovery.preview("op-running");
    const before = owner();

    const error = await rejection(recovery.release("op-running", fence));

    expect(error.code).toBe("ACTION_NOT_ALLOWED");
    expect(owner()).toEqual(before);
    expect((await box.store.load("op-running")).phase).toBe("locked");
  });

  it("reports archival failure without turning a completed abort into a false failure", async () => {
    box = sandbox();
    await lockedSaga(box, "op-archive");
    const real = defaultRestorePorts({ dataDir: box.dataDir, workspaceRoot: box.workspace }).store;
    const failing: RecoverySagaStore = {
      load: (id) => real.load(id),
      loadArchived: (id) => real.loadArchived(id),
      advance: (id, input) => real.advance(id, input),
      archiveTerminal: () =>
        Promise.reject(
          new SagaError({
            code: "WRITE_FAILED",
            commitState: "archive_not_committed",
            message: "injected EIO",
          }),
        ),
    };
    const recovery = controller({ store: failing });
    const { fence } = await recovery.preview("op-archive");

    const result = await recovery.abort("op-archive", { ...fence });

    expect(result).toMatchObject({ ok: true, phase: "aborted", archived: false, alreadyArchived: false });
    expect(result.warning).toEqual({
      code: "WRITE_FAILED",
      message: "injected EIO",
      commitState: "archive_not_committed",
    });
    expect((await box.store.load("op-archive")).phase).toBe("aborted");
    expect(owner()).toBeNull();
  });

  it("rolls a restore killed mid-mutation back to its safety checkpoint", async () => {
    box = sandbox();
    writeTree(box.workspace, { "a.txt": "old a", "keep/b.txt": "old b" });
    const target = await checkpoint(box);
    writeTree(box.workspace, {
      "a.txt": "new a",
      "added.txt": "added",
      "keep/b.txt": "new b",
      "c/d.txt": "d",
    });
    const before = snapshotTree(box.workspace);
    await killedRestore(box, target, "op-rollback", "restore.after-entry-applied");
    expect(snapshotTree(box.workspace)).not.toEqual(before);

    const recovery = createRestoreRecoveryController({ dataDir: box.dataDir, workspaceRoot: box.workspace });
    const preview = await recovery.preview("op-rollback");
    expect(preview.saga.basePhase).toBe("mutation_started");
    expect(preview.owner?.alive).toBe(false);
    expect(preview.actions.rollback).toEqual({ eligible: true, blockers: [] });
    expect(preview.actions.abort.eligible).toBe(false);

    const result = await recovery.rollback("op-rollback", preview.fence);

    expect(result).toMatchObject({ ok: true, action: "rollback", phase: "rolled_back", archived: true });
    expect(snapshotTree(box.workspace)).toEqual(before);
    expect(owner()).toBeNull();
    const archived = await box.store.loadArchived("op-rollback");
    expect(archived.events.map((event) => event.phase).slice(-6)).toEqual([
      "recovery_required",
      "recovery_started",
      "rollback_prepared",
      "rollback_started",
      "workspace_rolled_back",
      "rolled_back",
    ]);
  });

  it("does not roll back over a file written since inside a directory the restore created: not eligible, nothing changed", async () => {
    box = sandbox();
    writeTree(box.workspace, { "a.txt": "old a", "nd/x.txt": "x" });
    const target = await checkpoint(box);
    rmSync(join(box.workspace, "nd"), { recursive: true });
    writeTree(box.workspace, { "a.txt": "new a" });
    // The plan's first change is `mkdir nd`; the restore dies right after it.
    await killedRestore(box, target, "op-blocked", "restore.after-entry-applied");
    writeTree(box.workspace, { "nd/mine.txt": "written while the restore waited" });
    const stopped = snapshotTree(box.workspace);
    const ownerBefore = owner();

    const recovery = createRestoreRecoveryController({ dataDir: box.dataDir, workspaceRoot: box.workspace });
    const preview = await recovery.preview("op-blocked");
    expect(preview.actions.rollback.eligible).toBe(false);
    expect(preview.actions.rollback.blockers.join(" ")).toContain("nd/mine.txt");
    const seq = preview.saga.seq;

    await expect(recovery.rollback("op-blocked", preview.fence)).rejects.toMatchObject({
      code: "ACTION_NOT_ALLOWED",
    });
    expect(snapshotTree(box.workspace)).toEqual(stopped);
    expect((await box.store.load("op-blocked")).seq).toBe(seq);
    expect(owner()).toEqual(ownerBefore);
  });

  it("refuses malformed fences before reading anything", async () => {
    box = sandbox();
    await lockedSaga(box, "op-fence");
    const recovery = controller();
    for (const bad of [
      { expectedSeq: 0, expectedHash: H("a"), expectedOwnerDigest: null },
      { expectedSeq: 2, expectedHash: "sha256:zz", expectedOwnerDigest: null },
      { expectedSeq: 2, expectedHash: H("a") },
    ]) {
      const error = await rejection(recovery.abort("op-fence", bad));
      expect(error.code).toBe("INVALID_ARGUMENT");
    }
    expect((await box.store.load("op-fence")).seq).toBe(2);
  });
});
