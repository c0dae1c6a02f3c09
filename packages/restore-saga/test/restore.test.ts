import * as fs from "node:fs";
import { join } from "node:path";
import { type FileOps, failNthCall, nodeFileOps } from "@drydock/file-lock";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  acquireWorkspaceLock,
  inspectWorkspaceLock,
  openCheckpointStore,
  type RestoreOptions,
  restoreCheckpoint,
  rollbackBlockers,
  type SagaError,
  workspaceLockPath,
} from "../src/index.js";
import {
  everyoneDead,
  makeRestoreFixture,
  makeTempDir,
  recoverRestore,
  rejection,
  removeDir,
  sagaStoreFor,
  sameTree,
  snapshotTree,
  strayFiles,
  writeTree,
} from "./helpers.js";

let base: string;
let fixture: Awaited<ReturnType<typeof makeRestoreFixture>>;

beforeEach(async () => {
  base = makeTempDir("restore");
  fixture = await makeRestoreFixture(base, 24);
});

afterEach(() => {
  removeDir(base);
});

function options(extra: Partial<RestoreOptions> = {}): RestoreOptions {
  return {
    dataDir: fixture.dataDir,
    workspaceRoot: fixture.workspace,
    checkpointId: fixture.checkpointId,
    durable: false,
    ...extra,
  };
}

/** Recovery of `operationId` as an operator would run it, its owner declared dead. */
function recover(operationId: string) {
  return recoverRestore({
    dataDir: fixture.dataDir,
    workspaceRoot: fixture.workspace,
    operationId,
    isProcessAlive: everyoneDead,
  });
}

const FORWARD = [
  "created",
  "locked",
  "prepared",
  "intent_committed",
  "safety_ready",
  "mutation_started",
  "workspace_applied",
  "completed",
];

describe("restoreCheckpoint", () => {
  it("walks created → … → completed, makes the workspace equal the checkpoint exactly, releases and archives", async () => {
    const result = await restoreCheckpoint(options({ operationId: "op-ok" }));
    expect(result).toMatchObject({
      operationId: "op-ok",
      phase: "completed",
      seq: 8,
      archived: true,
      warning: null,
    });
    expect(result.targetCount).toBeGreaterThan(10);
    expect(sameTree(snapshotTree(fixture.workspace), fixture.after)).toBe(true);
    expect(strayFiles(fixture.workspace)).toEqual([]);
    // One staging directory per workspace, left empty.
    const staging = join(fixture.dataDir, "restore-staging");
    expect(fs.readdirSync(staging, { recursive: true }).map(String)).toEqual(fs.readdirSync(staging));
    expect(fs.readdirSync(join(staging, fs.readdirSync(staging)[0]!))).toEqual([]);
    expect(inspectWorkspaceLock({ dataDir: fixture.dataDir, workspaceRoot: fixture.workspace })).toBeNull();
    const saga = await sagaStoreFor(fixture.dataDir, fixture.workspace).loadArchived("op-ok");
    expect(saga.events.map((event) => event.phase)).toEqual(FORWARD);
    expect(saga.headHash).toBe(result.headHash);
    // The safety checkpoint recorded in the saga holds the workspace as it was before.
    const safetyId = saga.events[4]!.evidence.safetyCheckpointId as string;
    const safety = await openCheckpointStore({ dataDir: fixture.dataDir }).readManifest(safetyId);
    expect(safety.kind).toBe("safety");
    expect(safety.files).toBe(
      [...fixture.before.values()].filter((value) => value.startsWith("file")).length,
    );
  });

  it("asks confirmWorkspace under the lock before `locked`: a reason aborts it, nothing changed; null lets it run", async () => {
    let heldDuringCheck: unknown = null;
    const refused = await rejection(
      restoreCheckpoint(
        options({
          operationId: "op-replaced",
          confirmWorkspace: () => {
            heldDuringCheck = inspectWorkspaceLock({
              dataDir: fixture.dataDir,
              workspaceRoot: fixture.workspace,
            });
            return "its bot was deleted and created again";
          },
        }),
      ),
    );
    expect(heldDuringCheck).toMatchObject({ payload: { transactionId: "op-replaced" } });
    expect(refused).toMatchObject({ code: "WORKSPACE_MISMATCH" });
    expect(refused.message).toBe(
      "Restore op-replaced was refused before it changed anything: its bot was deleted and created again",
    );
    expect(sameTree(snapshotTree(fixture.workspace), fixture.before)).toBe(true);
    expect(inspectWorkspaceLock({ dataDir: fixture.dataDir, workspaceRoot: fixture.workspace })).toBeNull();
    const saga = await sagaStoreFor(fixture.dataDir, fixture.workspace).loadArchived("op-replaced");
    expect(saga.events.map((event) => event.phase)).toEqual(["created", "aborted"]);

    const confirmed = await restoreCheckpoint(
      options({ operationId: "op-confirmed", confirmWorkspace: async () => null }),
    );
    expect(confirmed.phase).toBe("completed");
    expect(sameTree(snapshotTree(fixture.workspace), fixture.after)).toBe(true);
  });

  it("holds each file it replaces open across the rename, closes it behind, and leaks no descriptor", async () => {
    const inWorkspace = (path: unknown) => String(path).startsWith(`${fixture.workspace}/`);
    const held = new Map<number, string>();
    const log: string[] = [];
    const spy: FileOps = {
      ...nodeFileOps,
      openSync: (...args: Parameters<FileOps["openSync"]>) => {
        const fd = nodeFileOps.openSync(...args);
        const [path, flags] = args;
        if (
          inWorkspace(path) &&
          flags === (fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK)
        ) {
          held.set(fd, String(path));
          log.push(`hold ${path}`);
        }
        return fd;
      },
      renameSync: (from, to) => {
        nodeFileOps.renameSync(from, to);
        if (inWorkspace(to)) log.push(`rename ${to}`);
      },
      close: ((fd: number, done: (error: NodeJS.ErrnoException | null) => void) => {
        if (held.has(fd)) log.push(`close ${held.get(fd)}`);
        nodeFileOps.close(fd, done);
      }) as FileOps["close"],
    };
    const openFds = () => fs.readdirSync("/proc/self/fd").length;
    const before = openFds();
    await restoreCheckpoint(options({ operationId: "op-held", fs: spy }));
    expect(sameTree(snapshotTree(fixture.workspace), fixture.after)).toBe(true);
    expect(openFds()).toBe(before);
    // Every file whose content the restore replaced: held, then renamed over, then closed (asynchronously).
    const replaced = [...fixture.before.entries()]
      .filter(
        ([path, value]) =>
          value.startsWith("file") &&
          fixture.after.get(path)?.startsWith("file") &&
          fixture.after.get(path) !== value,
      )
      .map(([path]) => join(fixture.workspace, path));
    expect(replaced.length).toBeGreaterThan(5);
    for (const path of replaced) {
      const order = [`hold ${path}`, `rename ${path}`, `close ${path}`].map((line) => log.indexOf(line));
      expect(
        order.every((index) => index >= 0),
        path,
      ).toBe(true);
      expect([...order].sort((a, b) => a - b)).toEqual(order);
    }
  });

  it("sweeps what a dead apply staged for this workspace, and nothing else", async () => {
    // A first restore creates the workspace's staging directory; then plant what a killed apply leaves.
    await restoreCheckpoint(options({ operationId: "op-first" }));
    const staging = join(fixture.dataDir, "restore-staging");
    const mine = join(staging, fs.readdirSync(staging)[0]!);
    const deadTemp = join(mine, ".f1.txt.4242.0123456789abcdef.tmp");
    fs.writeFileSync(deadTemp, "half a file");
    fs.writeFileSync(join(mine, "not-a-temp"), "kept");
    // Another workspace's staging directory is not this restore's to touch.
    const other = join(staging, "workspace-0000");
    fs.mkdirSync(other);
    fs.writeFileSync(join(other, ".f2.txt.4242.0123456789abcdef.tmp"), "theirs");
    writeTree(fixture.workspace, { "changed.txt": "changed" });

    await restoreCheckpoint(options({ operationId: "op-second" }));

    expect(fs.existsSync(deadTemp)).toBe(false);
    expect(fs.readdirSync(mine)).toEqual(["not-a-temp"]);
    expect(fs.readdirSync(other)).toEqual([".f2.txt.4242.0123456789abcdef.tmp"]);
  });

  it("skips the safety checkpoint only when nothing needs to change", async () => {
    await restoreCheckpoint(options());
    const result = await restoreCheckpoint(options({ operationId: "op-noop" }));
    expect(result.targetCount).toBe(0);
    const saga = await sagaStoreFor(fixture.dataDir, fixture.workspace).loadArchived("op-noop");
    expect(saga.events.map((event) => event.phase)).toEqual([
      "created",
      "locked",
      "prepared",
      "intent_committed",
      "workspace_applied",
      "completed",
    ]);
  });

  it("aborts without touching the workspace when another transaction holds it (created → aborted)", async () => {
    const other = await acquireWorkspaceLock({
      dataDir: fixture.dataDir,
      workspaceRoot: fixture.workspace,
      transactionId: "someone-else",
    });
    const error = await rejection(restoreCheckpoint(options({ operationId: "op-busy", lockWaitMs: 20 })));
    expect(error.code).toBe("WORKSPACE_LOCKED");
    other.release();
    expect(sameTree(snapshotTree(fixture.workspace), fixture.before)).toBe(true);
    const saga = await sagaStoreFor(fixture.dataDir, fixture.workspace).loadArchived("op-busy");
    expect(saga.events.map((event) => event.phase)).toEqual(["created", "aborted"]);
  });

  it("aborts before the intent when a checkpoint blob is damaged, releasing the lock and archiving", async () => {
    const manifest = await openCheckpointStore({ dataDir: fixture.dataDir }).readManifest(
      fixture.checkpointId,
    );
    const entry = manifest.entries.find(
      (item) => item.type === "file" && item.path === "new-dir/inside.txt",
    )!;
    if (entry.type !== "file") throw new Error("expected a file");
    fs.writeFileSync(
      join(fixture.dataDir, "checkpoints", "blobs", entry.sha256.slice(0, 2), entry.sha256),
      "tampered",
    );
    const error = await rejection(restoreCheckpoint(options({ operationId: "op-blob" })));
    expect(error.code).toBe("CORRUPT");
    expect(sameTree(snapshotTree(fixture.workspace), fixture.before)).toBe(true);
    expect(inspectWorkspaceLock({ dataDir: fixture.dataDir, workspaceRoot: fixture.workspace })).toBeNull();
    const saga = await sagaStoreFor(fixture.dataDir, fixture.workspace).loadArchived("op-blob");
    expect(saga.events.map((event) => event.phase)).toEqual(["created", "locked", "aborted"]);
    expect(saga.events[2]!.evidence.errorCode).toBe("CORRUPT");
  });

  it("journals recovery_required and retains the lock when a change fails after mutation started", async () => {
    const faulty = failNthCall(nodeFileOps, {
      n: 3,
      code: "EIO",
      count: (name, args) => name === "renameSync" && String(args[1]).startsWith(fixture.workspace),
    });
    const error = await rejection(restoreCheckpoint(options({ operationId: "op-mid", fs: faulty.ops })));
    expect(faulty.fired()).toBe(true);
    expect(error.code).toBe("RECOVERY_REQUIRED");
    expect(error.details).toMatchObject({ workspaceLockRetained: true, phase: "recovery_required" });
    expect((error.cause as SagaError).code).toBe("WRITE_FAILED");
    expect(strayFiles(fixture.workspace)).toEqual([]);
    const owner = inspectWorkspaceLock({ dataDir: fixture.dataDir, workspaceRoot: fixture.workspace });
    expect(owner?.payload.transactionId).toBe("op-mid");
    expect(error.details.retainedOwnerDigest).toBeDefined();
    const saga = await sagaStoreFor(fixture.dataDir, fixture.workspace).load("op-mid");
    expect(saga.events.map((event) => event.phase)).toEqual([...FORWARD.slice(0, 6), "recovery_required"]);
    // A new restore is refused while the retained owner (this live process) holds the workspace.
    expect(
      (await rejection(restoreCheckpoint(options({ operationId: "op-next", lockWaitMs: 0 })))).code,
    ).toBe("WORKSPACE_LOCKED");

    // Recovery: take over the (declared dead) owner and roll back through the safety checkpoint.
    const recovered = await recover("op-mid");
    expect(recovered.outcome).toBe("rolled_back");
    expect(recovered.saga!.events.map((event) => event.phase).slice(6)).toEqual([
      "recovery_required",
      "recovery_started",
      "rollback_prepared",
      "rollback_started",
      "workspace_rolled_back",
      "rolled_back",
    ]);
    expect(sameTree(snapshotTree(fixture.workspace), fixture.before)).toBe(true);
    expect(inspectWorkspaceLock({ dataDir: fixture.dataDir, workspaceRoot: fixture.workspace })).toBeNull();
  });

  /** A restore that fails mid-apply (its third file rename), keeping the lock for recovery. */
  async function stoppedMidApply(operationId: string): Promise<void> {
    const faulty = failNthCall(nodeFileOps, {
      n: 3,
      code: "EIO",
      count: (name, args) => name === "renameSync" && String(args[1]).startsWith(fixture.workspace),
    });
    const error = await rejection(restoreCheckpoint(options({ operationId, fs: faulty.ops })));
    expect(error.code).toBe("RECOVERY_REQUIRED");
  }

  it("rolls back only what the restore touched: what was written after it stopped stays", async () => {
    await stoppedMidApply("op-third-party");
    // While the restore waits for an operator, the workspace is written to: a new file, and a file the
    // restore's plan never touched (d1/f1.txt is the same before and after the checkpoint) is edited.
    expect(fixture.before.get("d1/f1.txt")).toBe(fixture.after.get("d1/f1.txt"));
    fs.writeFileSync(join(fixture.workspace, "user-notes.txt"), "written after the restore stopped");
    fs.writeFileSync(join(fixture.workspace, "d1", "f1.txt"), "edited after the restore stopped");
    const written = snapshotTree(fixture.workspace);

    const recovered = await recover("op-third-party");
    expect(recovered.outcome).toBe("rolled_back");
    const expected = new Map(fixture.before);
    for (const path of ["user-notes.txt", "d1/f1.txt"]) expected.set(path, written.get(path)!);
    expect(sameTree(snapshotTree(fixture.workspace), expected)).toBe(true);
  });

  it("refuses a rollback that would delete a file written inside a directory the restore created", async () => {
    await stoppedMidApply("op-inside-new-dir");
    // The plan creates new-dir (absent before), and mkdirs run before the renames that failed.
    expect(fs.statSync(join(fixture.workspace, "new-dir")).isDirectory()).toBe(true);
    fs.writeFileSync(join(fixture.workspace, "new-dir", "user.txt"), "not the restore's");
    const store = sagaStoreFor(fixture.dataDir, fixture.workspace);
    const stopped = await store.load("op-inside-new-dir");
    const beforeRollback = snapshotTree(fixture.workspace);

    const error = await rejection(recover("op-inside-new-dir"));
    expect(error.code).toBe("CONFLICT");
    expect(error.message).toContain("new-dir/user.txt");
    expect(error.message).toContain("Nothing was changed");
    expect(snapshotTree(fixture.workspace)).toEqual(beforeRollback);
    expect((await store.load("op-inside-new-dir")).seq).toBe(stopped.seq);
  });

  it("refuses a rollback that would overwrite a touched file written since the restore stopped", async () => {
    await stoppedMidApply("op-overwrite");
    // d3/f3.txt is rewritten by the plan, only-before.txt removed by it: both are touched paths. Written
    // since the restore stopped, each holds neither its content before the restore nor after it.
    expect(fixture.before.get("d3/f3.txt")).not.toBe(fixture.after.get("d3/f3.txt"));
    fs.writeFileSync(join(fixture.workspace, "d3", "f3.txt"), "the bot's own work, after the stop");
    fs.writeFileSync(join(fixture.workspace, "only-before.txt"), "also new");
    const store = sagaStoreFor(fixture.dataDir, fixture.workspace);
    const stopped = await store.load("op-overwrite");
    const beforeRollback = snapshotTree(fixture.workspace);

    const blockers = await rollbackBlockers({
      dataDir: fixture.dataDir,
      workspaceRoot: fixture.workspace,
      operationId: "op-overwrite",
    });
    expect(blockers).toHaveLength(1);
    expect(blockers[0]).toMatch(/would overwrite d3\/f3\.txt, only-before\.txt, which hold neither/);
    const error = await rejection(recover("op-overwrite"));
    expect(error.code).toBe("CONFLICT");
    expect(error.message).toContain("Nothing was changed");
    expect(error.message).toContain("d3/f3.txt");
    expect(snapshotTree(fixture.workspace)).toEqual(beforeRollback);
    expect((await store.load("op-overwrite")).seq).toBe(stopped.seq);

    // Moved away, the rollback goes ahead and puts back what was there before the restore.
    fs.renameSync(join(fixture.workspace, "d3", "f3.txt"), join(base, "kept-f3.txt"));
    fs.rmSync(join(fixture.workspace, "only-before.txt"));
    expect((await recover("op-overwrite")).outcome).toBe("rolled_back");
    expect(sameTree(snapshotTree(fixture.workspace), fixture.before)).toBe(true);
    expect(fs.readFileSync(join(base, "kept-f3.txt"), "utf8")).toBe("the bot's own work, after the stop");
  });

  it("refuses to write through a directory swapped for a symlink during the restore", async () => {
    // After the intent, something replaces a workspace directory with a symlink to a place outside it.
    const elsewhere = join(fixture.dataDir, "..", "elsewhere");
    const swap = {
      point(name: string) {
        if (name !== "restore.after-mutation-started") return;
        fs.renameSync(join(fixture.workspace, "d0"), elsewhere);
        fs.symlinkSync(elsewhere, join(fixture.workspace, "d0"));
      },
    };
    const d0Before = snapshotTree(join(fixture.workspace, "d0"));
    const error = await rejection(restoreCheckpoint(options({ operationId: "op-swap", crash: swap })));
    expect(error.code).toBe("RECOVERY_REQUIRED");
    expect((error.cause as SagaError).code).toBe("CORRUPT");
    expect((error.cause as SagaError).message).toMatch(/leads through a symlink/);
    // Nothing was written outside the workspace: the moved directory is exactly as it was.
    expect(snapshotTree(elsewhere)).toEqual(d0Before);
  });

  it("never changes the mode of a directory outside the workspace through a symlink swapped in", async () => {
    // The plan changes d1's mode (0755 now, 0750 in the checkpoint). After the intent, d1 becomes a
    // symlink to a directory outside the workspace.
    const outside = join(base, "outside-secret");
    fs.mkdirSync(outside, { mode: 0o700 });
    fs.chmodSync(outside, 0o700);
    const swap = {
      point(name: string) {
        if (name !== "restore.after-mutation-started") return;
        fs.renameSync(join(fixture.workspace, "d1"), join(base, "d1-moved"));
        fs.symlinkSync(outside, join(fixture.workspace, "d1"));
      },
    };
    const error = await rejection(restoreCheckpoint(options({ operationId: "op-chmod-swap", crash: swap })));
    expect(error.code).toBe("RECOVERY_REQUIRED");
    expect((error.cause as SagaError).code).toBe("CORRUPT");
    expect((error.cause as SagaError).message).toMatch(/symlink/);
    expect((fs.statSync(outside).mode & 0o7777).toString(8)).toBe("700");
    expect(fs.readdirSync(outside)).toEqual([]);
  });

  it("sets a temp's mode through its descriptor: a temp swapped for a symlink changes nothing outside", async () => {
    // Staging on another file system (EXDEV): temps are written beside their targets, in the workspace.
    // Right after the first one is closed, it is replaced by a symlink to a file outside the workspace.
    const outsideFile = join(base, "outside.txt");
    fs.writeFileSync(outsideFile, "secret", { mode: 0o600 });
    fs.chmodSync(outsideFile, 0o600);
    let swapped = false;
    const ops: FileOps = {
      ...nodeFileOps,
      renameSync(from: fs.PathLike, to: fs.PathLike) {
        if (String(from).includes("/restore-staging/") && String(to).startsWith(fixture.workspace)) {
          throw Object.assign(new Error("EXDEV: cross-device link not permitted"), { code: "EXDEV" });
        }
        return nodeFileOps.renameSync(from, to);
      },
      closeSync(fd: number) {
        const path = swapped ? "" : fs.readlinkSync(`/proc/self/fd/${fd}`);
        nodeFileOps.closeSync(fd);
        if (path.startsWith(fixture.workspace) && path.endsWith(".tmp")) {
          swapped = true;
          fs.unlinkSync(path);
          fs.symlinkSync(outsideFile, path);
        }
      },
    };
    await rejection(restoreCheckpoint(options({ operationId: "op-temp-swap", fs: ops })));
    expect(swapped).toBe(true);
    expect((fs.statSync(outsideFile).mode & 0o7777).toString(8)).toBe("600");
    expect(fs.readFileSync(outsideFile, "utf8")).toBe("secret");
  });

  it("rolls back a restore whose first change failed, removing what it had staged", async () => {
    const faulty = failNthCall(nodeFileOps, {
      n: 1,
      code: "EIO",
      // The plan's first change is a removal.
      count: (name, args) =>
        (name === "unlinkSync" || name === "rmdirSync") && String(args[0]).startsWith(fixture.workspace),
    });
    const error = await rejection(
      restoreCheckpoint(options({ operationId: "op-first-fails", fs: faulty.ops })),
    );
    expect(faulty.fired()).toBe(true);
    expect(error.code).toBe("RECOVERY_REQUIRED");
    // Plant a staged temp as a SIGKILL in the middle of an apply would have left it.
    const staging = join(fixture.dataDir, "restore-staging");
    const mine = join(staging, fs.readdirSync(staging)[0]!);
    fs.writeFileSync(join(mine, ".f1.txt.4242.0123456789abcdef.tmp"), "half a file");

    // Nothing in the workspace changed, so the rollback has nothing to apply, and still sweeps.
    const recovered = await recover("op-first-fails");
    expect(recovered.outcome).toBe("rolled_back");
    expect(sameTree(snapshotTree(fixture.workspace), fixture.before)).toBe(true);
    expect(fs.readdirSync(mine)).toEqual([]);
  });

  it("reconciles a lost response for completed as the exact successor and still succeeds", async () => {
    const faulty = failNthCall(nodeFileOps, {
      n: 1,
      code: "EIO",
      count: (name, args) =>
        name === "renameSync" &&
        String(args[1]).endsWith("HEAD") &&
        fs.existsSync(join(String(args[1]), "..", "000008-completed.json")),
    });
    const result = await restoreCheckpoint(options({ operationId: "op-lost", fs: faulty.ops }));
    expect(faulty.fired()).toBe(true);
    expect(result.phase).toBe("completed");
    expect(sameTree(snapshotTree(fixture.workspace), fixture.after)).toBe(true);
  });

  it("reports an archive failure only as a warning", async () => {
    const faulty = failNthCall(nodeFileOps, {
      n: 1,
      code: "EIO",
      count: (name, args) =>
        name === "renameSync" &&
        String(args[1]).includes(`${join("restore-sagas")}`) &&
        String(args[1]).includes(".archive"),
    });
    const result = await restoreCheckpoint(options({ operationId: "op-warn", fs: faulty.ops }));
    expect(result).toMatchObject({ phase: "completed", archived: false });
    expect(result.warning).toMatchObject({ code: "WRITE_FAILED", commitState: "archive_not_committed" });
    expect(inspectWorkspaceLock({ dataDir: fixture.dataDir, workspaceRoot: fixture.workspace })).toBeNull();
    const pending = await sagaStoreFor(fixture.dataDir, fixture.workspace).listPending();
    expect(pending.diagnostics).toEqual([
      { operationId: "op-warn", status: "terminal_unarchived", code: null, recoverable: true },
    ]);
  });

  it("refuses a checkpoint of another workspace, an unknown one, and a data directory inside the workspace", async () => {
    const otherWorkspace = join(base, "other");
    writeTree(otherWorkspace, { "x.txt": "x" });
    const foreign = await openCheckpointStore({ dataDir: fixture.dataDir }).createCheckpoint(otherWorkspace);
    expect((await rejection(restoreCheckpoint(options({ checkpointId: foreign.checkpointId })))).code).toBe(
      "INVALID_ARGUMENT",
    );
    expect((await rejection(restoreCheckpoint(options({ checkpointId: "ckpt-unknown" })))).code).toBe(
      "NOT_FOUND",
    );
    expect(
      (await rejection(restoreCheckpoint(options({ dataDir: join(fixture.workspace, "d0") })))).code,
    ).toBe("INVALID_ARGUMENT");
    expect(sameTree(snapshotTree(fixture.workspace), fixture.before)).toBe(true);
  });
});

describe("restoreCheckpoint whose workspace lock is no longer its own at the end", () => {
  it("says the restore completed but the lock was taken or removed, never 'release it with the recovery tool'", async () => {
    const removeLock = {
      point(name: string) {
        if (name === "restore.after-completed")
          fs.unlinkSync(workspaceLockPath(fixture.dataDir, fs.realpathSync(fixture.workspace)));
      },
    };
    const error = await rejection(restoreCheckpoint(options({ operationId: "op-lost", crash: removeLock })));
    expect(error.code).toBe("RECOVERY_REQUIRED");
    expect(error.details.workspaceLockRetained).toBe(false);
    expect((error.cause as SagaError).code).toBe("LOCK_OWNERSHIP_LOST");
    expect(error.message).toMatch(/op-lost completed .*no longer its own/);
    expect(sameTree(snapshotTree(fixture.workspace), fixture.after)).toBe(true);
  });

  /** Fails at `point` after `lose` took the workspace lock from the restore (removed, or another owner's). */
  function loseLockAt(point: string, lose: (path: string) => void) {
    return {
      point(name: string) {
        if (name !== point) return;
        lose(workspaceLockPath(fixture.dataDir, fs.realpathSync(fixture.workspace)));
        throw new Error(`stopped at ${point}`);
      },
    };
  }

  it("a failure after the intent with the lock lost never claims the lock kept: the loss is reported", async () => {
    const crash = loseLockAt("restore.after-safety-ready", (path) => fs.unlinkSync(path));
    const error = await rejection(restoreCheckpoint(options({ operationId: "op-lost-mid", crash })));
    expect(error.code).toBe("RECOVERY_REQUIRED");
    expect(error.details).toMatchObject({
      operationId: "op-lost-mid",
      workspaceLockRetained: false,
      phase: "recovery_required",
    });
    expect(error.details.retainedOwnerDigest).toBeUndefined();
    const lost = error.cause as SagaError;
    expect(lost.code).toBe("LOCK_OWNERSHIP_LOST");
    // The restore's own failure travels with the loss.
    expect((lost.details.callbackError as Error).message).toMatch(/unexpected error/);
    expect(((lost.details.callbackError as Error).cause as Error).message).toBe(
      "stopped at restore.after-safety-ready",
    );
    expect(error.message).toMatch(/op-lost-mid .*no longer its own/);
    expect(error.message).not.toMatch(/lock is kept/);
    // Nothing was re-created or claimed: no lock on disk, the saga journaled for a recovery.
    expect(inspectWorkspaceLock({ dataDir: fixture.dataDir, workspaceRoot: fixture.workspace })).toBeNull();
    const saga = await sagaStoreFor(fixture.dataDir, fixture.workspace).load("op-lost-mid");
    expect(saga.events.map((event) => event.phase)).toEqual([...FORWARD.slice(0, 5), "recovery_required"]);
  });

  it("a failure after the intent with the lock taken by another owner leaves that owner's lock alone", async () => {
    let theirs: Buffer | null = null;
    const crash = loseLockAt("restore.after-intent-committed", (path) => {
      const mine = JSON.parse(fs.readFileSync(path, "utf8"));
      fs.unlinkSync(path);
      fs.writeFileSync(
        path,
        `${JSON.stringify({ ...mine, token: "ffffffff-ffff-4fff-bfff-ffffffffffff" })}\n`,
      );
      theirs = fs.readFileSync(path);
    });
    const error = await rejection(restoreCheckpoint(options({ operationId: "op-stolen", crash })));
    expect(error.code).toBe("RECOVERY_REQUIRED");
    expect(error.details.workspaceLockRetained).toBe(false);
    expect((error.cause as SagaError).code).toBe("LOCK_OWNERSHIP_LOST");
    expect(fs.readFileSync(workspaceLockPath(fixture.dataDir, fs.realpathSync(fixture.workspace)))).toEqual(
      theirs,
    );
    expect(sameTree(snapshotTree(fixture.workspace), fixture.before)).toBe(true);
  });

  it("a failure before the intent with the lock lost: aborted, and the loss reported, never a kept lock", async () => {
    const crash = loseLockAt("restore.after-locked", (path) => fs.unlinkSync(path));
    const error = await rejection(restoreCheckpoint(options({ operationId: "op-lost-early", crash })));
    expect(error.details.workspaceLockRetained).toBe(false);
    expect((error.cause as SagaError).code).toBe("LOCK_OWNERSHIP_LOST");
    expect(error.details.phase).toBe("aborted");
    expect(inspectWorkspaceLock({ dataDir: fixture.dataDir, workspaceRoot: fixture.workspace })).toBeNull();
    expect(sameTree(snapshotTree(fixture.workspace), fixture.before)).toBe(true);
  });
});

// The second guard against restoring over a stopped restore: when the stopped restore's workspace lock is
// gone (removed by hand, lost with a disk), a new restore of the workspace still refuses while that saga
// stands unsettled past mutation_started — and does not refuse for sagas that changed nothing.

/** A restore that fails at `point` (after the intent: it journals recovery_required and keeps its lock). */
async function stopAt(operationId: string, point: string): Promise<void> {
  let applied = 0;
  const crash = {
    point(name: string) {
      if (name === "restore.after-entry-applied") applied += 1;
      if (name === point && (point !== "restore.after-entry-applied" || applied === 3))
        throw new Error(`stopped at ${point}`);
    },
  };
  const error = await rejection(restoreCheckpoint(options({ operationId, crash })));
  expect(error.code).toBe("RECOVERY_REQUIRED");
}

function removeWorkspaceLockByHand(): void {
  fs.unlinkSync(workspaceLockPath(fixture.dataDir, fs.realpathSync(fixture.workspace)));
}

describe("a new restore over a stopped restore whose workspace lock is gone", () => {
  it("refuses while a restore stopped mid-mutation is unsettled, naming it and changing nothing", async () => {
    await stopAt("op-half", "restore.after-entry-applied");
    const halfRestored = snapshotTree(fixture.workspace);
    expect(sameTree(halfRestored, fixture.before)).toBe(false);
    expect(sameTree(halfRestored, fixture.after)).toBe(false);
    removeWorkspaceLockByHand();

    const error = await rejection(restoreCheckpoint(options({ operationId: "op-over" })));
    expect(error.code).toBe("RECOVERY_REQUIRED");
    expect(error.details.ownerOperationId).toBe("op-half");
    expect(error.message).toMatch(
      /op-half .*stopped at mutation_started.*half-restored.*Nothing was changed/,
    );
    // Nothing was changed: the half-restored files are as the stopped restore left them, and the refused
    // restore ended (aborted, archived) without touching them.
    expect(snapshotTree(fixture.workspace)).toEqual(halfRestored);
    const store = sagaStoreFor(fixture.dataDir, fixture.workspace);
    expect((await store.loadArchived("op-over")).phase).toBe("aborted");
    expect((await store.load("op-half")).phase).toBe("recovery_required");
  });

  it("refuses as well over a restore stopped after workspace_applied (restored, but never settled)", async () => {
    await stopAt("op-applied", "restore.after-workspace-applied");
    removeWorkspaceLockByHand();
    const error = await rejection(restoreCheckpoint(options({ operationId: "op-over-2" })));
    expect(error.code).toBe("RECOVERY_REQUIRED");
    expect(error.details.ownerOperationId).toBe("op-applied");
  });

  it("does not refuse over a restore that stopped before changing anything (its files are as they were)", async () => {
    await stopAt("op-early", "restore.after-safety-ready");
    expect(sameTree(snapshotTree(fixture.workspace), fixture.before)).toBe(true);
    removeWorkspaceLockByHand();
    const result = await restoreCheckpoint(options({ operationId: "op-next" }));
    expect(result.phase).toBe("completed");
    expect(sameTree(snapshotTree(fixture.workspace), fixture.after)).toBe(true);
  });

  it("refuses when another saga of the workspace cannot be verified (whether it changed files is unknown)", async () => {
    await stopAt("op-broken", "restore.after-safety-ready");
    removeWorkspaceLockByHand();
    const store = sagaStoreFor(fixture.dataDir, fixture.workspace);
    const head = `${store.shardDir}/op-broken/HEAD`;
    fs.writeFileSync(head, `${fs.readFileSync(head, "utf8")} `);
    const error = await rejection(restoreCheckpoint(options({ operationId: "op-over-3" })));
    expect(error.code).toBe("RECOVERY_REQUIRED");
    expect(error.message).toMatch(/op-broken .*cannot be verified \(CORRUPT\)/);
    expect(sameTree(snapshotTree(fixture.workspace), fixture.before)).toBe(true);
  });
});
