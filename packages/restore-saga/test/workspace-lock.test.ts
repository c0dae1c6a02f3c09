import { execFileSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import * as fs from "node:fs";
import { hostname } from "node:os";
import { basename, dirname, join } from "node:path";
import { createSystemIdentity, type FileOps, nodeFileOps } from "@drydock/file-lock";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  acquireWorkspaceLock,
  inspectWorkspaceLock,
  inspectWorkspaceLockState,
  isSagaError,
  ownerDigest,
  reapDeadEditLocks,
  SagaError,
  takeoverWorkspaceLock,
  tornLockDigest,
  withWorkspaceLock,
  withWorkspaceRecoveryLock,
  workspaceLockPath,
} from "../src/index.js";
import { deadPid, everyoneDead, makeTempDir, rejection, removeDir } from "./helpers.js";

let base: string;
let dataDir: string;
let workspace: string;

beforeEach(() => {
  base = makeTempDir("wslock");
  dataDir = join(base, "data");
  workspace = join(base, "ws");
  fs.mkdirSync(join(workspace, "child"), { recursive: true });
});

afterEach(() => {
  removeDir(base);
});

describe("workspace lock", () => {
  it("publishes an owner carrying { transactionId, workspaceRoot, purpose } and releases it", async () => {
    const held = await acquireWorkspaceLock({ dataDir, workspaceRoot: workspace, transactionId: "op-1" });
    const onDisk = inspectWorkspaceLock({ dataDir, workspaceRoot: workspace });
    expect(onDisk?.payload).toEqual({
      transactionId: "op-1",
      workspaceRoot: workspace,
      purpose: "checkpoint-restore",
    });
    expect(onDisk?.pid).toBe(process.pid);
    expect(ownerDigest(onDisk!)).toBe(held.ownerDigest);
    expect(held.ownerDigest).toMatch(/^sha256:[0-9a-f]{64}$/);
    held.assertOwned();
    held.release();
    expect(inspectWorkspaceLock({ dataDir, workspaceRoot: workspace })).toBeNull();
  });

  it("inspects without creating anything", () => {
    expect(inspectWorkspaceLock({ dataDir, workspaceRoot: workspace })).toBeNull();
    expect(fs.existsSync(dataDir)).toBe(false);
  });

  it("refuses a second transaction on the same workspace while the first is live (WORKSPACE_LOCKED)", async () => {
    const held = await acquireWorkspaceLock({ dataDir, workspaceRoot: workspace, transactionId: "op-1" });
    const error = await rejection(
      acquireWorkspaceLock({ dataDir, workspaceRoot: workspace, transactionId: "op-2", waitMs: 30 }),
    );
    expect(error.code).toBe("WORKSPACE_LOCKED");
    expect(error.details).toMatchObject({ ownerOperationId: "op-1", ownerPid: process.pid });
    held.release();
  });

  it("refuses a child workspace while its parent is locked, and the parent while a child is locked", async () => {
    const child = join(workspace, "child");
    const parent = await acquireWorkspaceLock({
      dataDir,
      workspaceRoot: workspace,
      transactionId: "op-parent",
    });
    const refusedChild = await rejection(
      acquireWorkspaceLock({ dataDir, workspaceRoot: child, transactionId: "op-child", waitMs: 0 }),
    );
    expect(refusedChild.code).toBe("WORKSPACE_LOCKED");
    expect(refusedChild.details.ownerWorkspaceRoot).toBe(workspace);
    parent.release();
    const childLock = await acquireWorkspaceLock({
      dataDir,
      workspaceRoot: child,
      transactionId: "op-child",
    });
    const refusedParent = await rejection(
      acquireWorkspaceLock({ dataDir, workspaceRoot: workspace, transactionId: "op-parent", waitMs: 0 }),
    );
    expect(refusedParent.code).toBe("WORKSPACE_LOCKED");
    // A sibling that merely shares a name prefix does not overlap.
    fs.mkdirSync(join(base, "ws-sibling"));
    const sibling = await acquireWorkspaceLock({
      dataDir,
      workspaceRoot: join(base, "ws-sibling"),
      transactionId: "op-s",
    });
    sibling.release();
    childLock.release();
  });

  it("waits for a live owner to finish and then takes the lock", async () => {
    const held = await acquireWorkspaceLock({ dataDir, workspaceRoot: workspace, transactionId: "op-1" });
    setTimeout(() => held.release(), 50);
    const second = await acquireWorkspaceLock({
      dataDir,
      workspaceRoot: workspace,
      transactionId: "op-2",
      waitMs: 5_000,
    });
    expect(second.owner.payload.transactionId).toBe("op-2");
    second.release();
  });

  it("reports a dead owner as RECOVERY_REQUIRED and never takes it over implicitly", async () => {
    await acquireWorkspaceLock({ dataDir, workspaceRoot: workspace, transactionId: "op-dead" });
    const path = workspaceLockPath(dataDir, workspace);
    const bytes = fs.readFileSync(path);
    for (const root of [workspace, join(workspace, "child")]) {
      const error = await rejection(
        acquireWorkspaceLock({
          dataDir,
          workspaceRoot: root,
          transactionId: "op-new",
          isProcessAlive: everyoneDead,
        }),
      );
      expect(error.code).toBe("RECOVERY_REQUIRED");
      expect(error.details).toMatchObject({ ownerOperationId: "op-dead", workspaceLockRetained: false });
    }
    expect(fs.readFileSync(path)).toEqual(bytes);
  });

  it("refuses to lock past an unreadable lock file and leaves it as it is", async () => {
    fs.mkdirSync(join(dataDir, "locks"), { recursive: true });
    const path = workspaceLockPath(dataDir, join(workspace, "child"));
    fs.writeFileSync(path, "not json");
    const error = await rejection(
      acquireWorkspaceLock({ dataDir, workspaceRoot: workspace, transactionId: "op-1" }),
    );
    expect(error.code).toBe("LOCK_FAILED");
    expect(fs.readFileSync(path, "utf8")).toBe("not json");
  });

  it("keeps the lock only when the callback lets the retention error itself propagate", async () => {
    const retained = await rejection(
      withWorkspaceLock({ dataDir, workspaceRoot: workspace, transactionId: "op-keep" }, (lease) =>
        lease.retainForRecovery("journal write failed"),
      ),
    );
    expect(retained.code).toBe("RECOVERY_REQUIRED");
    expect(retained.details).toMatchObject({
      workspaceLockRetained: true,
      retentionReason: "journal write failed",
    });
    const kept = inspectWorkspaceLock({ dataDir, workspaceRoot: workspace });
    expect(kept?.payload.transactionId).toBe("op-keep");
    expect(ownerDigest(kept!)).toBe(retained.details.retainedOwnerDigest);
    fs.rmSync(workspaceLockPath(dataDir, workspace));

    // Caught and swallowed: released.
    await withWorkspaceLock({ dataDir, workspaceRoot: workspace, transactionId: "op-catch" }, (lease) => {
      try {
        lease.retainForRecovery("caught");
      } catch {
        // swallowed
      }
    });
    expect(inspectWorkspaceLock({ dataDir, workspaceRoot: workspace })).toBeNull();

    // Replaced by another error: released.
    const swapped = await withWorkspaceLock(
      { dataDir, workspaceRoot: workspace, transactionId: "op-swap" },
      (lease) => {
        try {
          lease.retainForRecovery("swapped");
        } catch {
          throw new Error("something else");
        }
      },
    ).catch((error: Error) => error);
    expect((swapped as Error).message).toBe("something else");
    expect(inspectWorkspaceLock({ dataDir, workspaceRoot: workspace })).toBeNull();
  });

  it("refuses to retain a workspace edit's lock (wrong purpose) and releases it", async () => {
    let refusal: unknown = null;
    const error = await rejection(
      withWorkspaceLock(
        { dataDir, workspaceRoot: workspace, transactionId: "op-edit", purpose: "workspace-edit" },
        (lease) => {
          try {
            lease.retainForRecovery("an edit cannot be retained");
          } catch (thrown) {
            refusal = thrown;
            throw thrown;
          }
        },
      ),
    );
    expect(error).toBe(refusal);
    expect(error.code).toBe("INVALID_ARGUMENT");
    expect(error.details.workspaceLockRetained).toBeUndefined();
    expect(inspectWorkspaceLock({ dataDir, workspaceRoot: workspace })).toBeNull();
  });

  it("releases the lock for a forged retention error: only the lease's own error object keeps it", async () => {
    let genuine: unknown = null;
    let forged: SagaError | null = null;
    const error = await rejection(
      withWorkspaceLock({ dataDir, workspaceRoot: workspace, transactionId: "op-forge" }, (lease) => {
        try {
          lease.retainForRecovery("genuine");
        } catch (thrown) {
          genuine = thrown;
        }
        const original = genuine as SagaError;
        // Same code, same details, same message: a look-alike, not the lease's error.
        forged = new SagaError({
          ...original.details,
          code: original.code,
          message: original.message,
        });
        throw forged;
      }),
    );
    expect(error).toBe(forged);
    expect(error).not.toBe(genuine);
    expect(error.code).toBe("RECOVERY_REQUIRED");
    expect(error.details.workspaceLockRetained).toBe(true);
    expect(inspectWorkspaceLock({ dataDir, workspaceRoot: workspace })).toBeNull();

    // Forged without ever calling retainForRecovery: released too.
    await rejection(
      withWorkspaceLock({ dataDir, workspaceRoot: workspace, transactionId: "op-forge-2" }, () => {
        throw new SagaError({
          code: "RECOVERY_REQUIRED",
          workspaceLockRetained: true,
          message: "forged",
        });
      }),
    );
    expect(inspectWorkspaceLock({ dataDir, workspaceRoot: workspace })).toBeNull();
  });

  it("detects a lock that no longer holds its owner (LOCK_OWNERSHIP_LOST)", async () => {
    const held = await acquireWorkspaceLock({ dataDir, workspaceRoot: workspace, transactionId: "op-1" });
    fs.rmSync(workspaceLockPath(dataDir, workspace));
    expect(() => held.assertOwned()).toThrow(expect.objectContaining({ code: "LOCK_OWNERSHIP_LOST" }));
  });

  it("takes over exactly the inspected dead owner, keeping its transaction with a new token", async () => {
    await acquireWorkspaceLock({ dataDir, workspaceRoot: workspace, transactionId: "op-t" });
    const dead = inspectWorkspaceLock({ dataDir, workspaceRoot: workspace })!;
    const options = {
      dataDir,
      workspaceRoot: workspace,
      transactionId: "op-t",
      isProcessAlive: everyoneDead,
    };
    const result = await withWorkspaceRecoveryLock({ ...options, expectedOwner: dead }, (lease) => {
      expect(lease.priorOwner).toEqual(dead);
      expect(lease.recoveryOfOperationId).toBe("op-t");
      expect(lease.owner.payload).toEqual(dead.payload);
      expect(lease.owner.token).not.toBe(dead.token);
      const onDisk = inspectWorkspaceLock({ dataDir, workspaceRoot: workspace })!;
      expect(ownerDigest(onDisk)).toBe(lease.ownerDigest);
      return "settled";
    });
    expect(result).toBe("settled");
    expect(inspectWorkspaceLock({ dataDir, workspaceRoot: workspace })).toBeNull();
  });

  it("refuses a takeover of a changed, live or foreign owner", async () => {
    const held = await acquireWorkspaceLock({ dataDir, workspaceRoot: workspace, transactionId: "op-t" });
    const owner = inspectWorkspaceLock({ dataDir, workspaceRoot: workspace })!;
    const base = { dataDir, workspaceRoot: workspace, transactionId: "op-t" };
    const live = await rejection(takeoverWorkspaceLock({ ...base, expectedOwner: owner }));
    expect(live.code).toBe("WORKSPACE_LOCKED");
    const drifted = { ...owner, token: "11111111-1111-4111-8111-111111111111" };
    const changed = await rejection(
      takeoverWorkspaceLock({ ...base, expectedOwner: drifted, isProcessAlive: everyoneDead }),
    );
    expect(changed.code).toBe("CONFLICT");
    const foreign = await rejection(
      takeoverWorkspaceLock({
        ...base,
        transactionId: "op-other",
        expectedOwner: owner,
        isProcessAlive: everyoneDead,
      }),
    );
    expect(foreign.code).toBe("INVALID_ARGUMENT");
    expect(inspectWorkspaceLock({ dataDir, workspaceRoot: workspace })).toEqual(owner);
    held.release();
  });

  it("lets a takeover retain the lock again for a later recovery", async () => {
    await acquireWorkspaceLock({ dataDir, workspaceRoot: workspace, transactionId: "op-r" });
    const first = inspectWorkspaceLock({ dataDir, workspaceRoot: workspace })!;
    const options = {
      dataDir,
      workspaceRoot: workspace,
      transactionId: "op-r",
      isProcessAlive: everyoneDead,
    };
    const error = await rejection(
      withWorkspaceRecoveryLock({ ...options, expectedOwner: first }, (lease) =>
        lease.retainForRecovery("again"),
      ),
    );
    expect(error.details.workspaceLockRetained).toBe(true);
    const second = inspectWorkspaceLock({ dataDir, workspaceRoot: workspace })!;
    expect(second.token).not.toBe(first.token);
    expect(second.payload.transactionId).toBe("op-r");
  });

  it("refuses the filesystem root as a workspace", async () => {
    const error = await rejection(
      acquireWorkspaceLock({ dataDir, workspaceRoot: "/", transactionId: "op-1" }),
    );
    expect(error.code).toBe("INVALID_ARGUMENT");
  });

  it("publishes the lock durably: the owner is flushed before it appears and the directory after", async () => {
    // A lock retained for recovery must survive a power loss: retainForRecovery writes nothing, so what
    // acquire and takeover published is what recovery finds.
    const log: string[] = [];
    const open = new Map<number, string>();
    const name = (path: string): string =>
      !basename(path).startsWith("ws-")
        ? basename(path)
        : path.includes(".reap-")
          ? "record"
          : path.includes(".candidate-")
            ? "candidate"
            : "lock";
    const traced: FileOps = {
      ...nodeFileOps,
      openSync: ((path: string, ...rest: unknown[]) => {
        const fd = (nodeFileOps.openSync as (...a: unknown[]) => number)(path, ...rest);
        open.set(fd, path);
        return fd;
      }) as FileOps["openSync"],
      fsyncSync: (fd) => {
        log.push(`fsync ${name(open.get(fd) ?? "?")}`);
        nodeFileOps.fsyncSync(fd);
      },
      linkSync: (from, to) => {
        log.push(`link ${name(String(from))} -> ${name(String(to))}`);
        nodeFileOps.linkSync(from, to);
      },
      renameSync: (from, to) => {
        log.push(`rename ${name(String(from))} -> ${name(String(to))}`);
        nodeFileOps.renameSync(from, to);
      },
    };
    fs.mkdirSync(join(dataDir, "locks"), { recursive: true });
    const ws = (entry: string) => !entry.includes("registry");
    await acquireWorkspaceLock({ dataDir, workspaceRoot: workspace, transactionId: "op-d", fs: traced });
    // Then, once per process, every directory above locks/ (it may exist without ever having been flushed).
    const above: string[] = [];
    for (let child = join(dataDir, "locks"); dirname(child) !== child; child = dirname(child)) {
      if (fs.statSync(dirname(child)).dev !== fs.statSync(dataDir).dev) break;
      above.push(`fsync ${basename(dirname(child))}`);
    }
    expect(log.filter(ws)).toEqual(["fsync candidate", "link candidate -> lock", "fsync locks", ...above]);
    // The registry lock stays a short, unflushed lock.
    expect(log.filter((entry) => entry.startsWith("fsync"))).toEqual([
      "fsync candidate",
      "fsync locks",
      ...above,
    ]);
    log.length = 0;
    const dead = inspectWorkspaceLock({ dataDir, workspaceRoot: workspace })!;
    await takeoverWorkspaceLock({
      dataDir,
      workspaceRoot: workspace,
      transactionId: "op-d",
      expectedOwner: dead,
      isProcessAlive: everyoneDead,
      fs: traced,
    });
    expect(log.filter(ws)).toEqual([
      "fsync candidate",
      "link record -> record",
      "rename candidate -> lock",
      "fsync locks",
    ]);
  });

  it("refuses a workspace lock torn by a power loss instead of reaping it, and leaves it", async () => {
    fs.mkdirSync(join(dataDir, "locks"), { recursive: true });
    const path = workspaceLockPath(dataDir, workspace);
    fs.writeFileSync(path, "");
    // The machine booted after the file was last changed: its unflushed bytes were lost.
    const identity = { ...createSystemIdentity(), bootTimeMs: () => Date.now() + 60_000 };
    const error = await rejection(
      acquireWorkspaceLock({ dataDir, workspaceRoot: workspace, transactionId: "op-1", identity }),
    );
    expect(error.code).toBe("LOCK_FAILED");
    expect(fs.readFileSync(path, "utf8")).toBe("");
  });

  it("reports a restore running in another pid namespace (another container) as running, never as dead", async () => {
    const child = join(workspace, "child");
    fs.mkdirSync(join(dataDir, "locks"), { recursive: true });
    const system = createSystemIdentity();
    const pid = await deadPid();
    for (const root of [workspace, child]) {
      const owner = {
        version: 1,
        pid,
        token: "6f1c1f0e-2a3b-4c5d-8e9f-0a1b2c3d4e5f",
        createdAt: 1_767_000_000_000,
        host: hostname(),
        bootId: system.bootId(),
        pidNamespace: "pid:[4026500001]",
        payload: { transactionId: "op-elsewhere", workspaceRoot: root, purpose: "checkpoint-restore" },
      };
      const path = workspaceLockPath(dataDir, root);
      fs.writeFileSync(path, `${JSON.stringify(owner)}\n`);
      // Its own workspace (file-lock's judge on the exact path), then its parent (the overlap scan's judge).
      const error = await rejection(
        acquireWorkspaceLock({ dataDir, workspaceRoot: workspace, transactionId: "op-new", waitMs: 0 }),
      );
      expect(error.code).toBe("WORKSPACE_LOCKED");
      expect(error.details.ownerOperationId).toBe("op-elsewhere");
      fs.rmSync(path);
    }
  });
});

describe("a workspace lock this process could not read", () => {
  it("EMFILE is 'not judged, retry', never 'remove it by hand'", async () => {
    const base = makeTempDir("ws-emfile");
    const workspace = join(base, "ws");
    const dataDir = join(base, "data");
    fs.mkdirSync(workspace);
    const held = await acquireWorkspaceLock({ dataDir, workspaceRoot: workspace, transactionId: "op-1" });
    try {
      const emfile: FileOps = {
        ...nodeFileOps,
        openSync: ((path: fs.PathLike, ...rest: unknown[]) => {
          if (String(path).endsWith(".lock")) {
            throw Object.assign(new Error("EMFILE: too many open files"), { code: "EMFILE" });
          }
          return (nodeFileOps.openSync as (...args: unknown[]) => number)(path, ...rest);
        }) as FileOps["openSync"],
      };
      let caught: unknown = null;
      try {
        inspectWorkspaceLock({ dataDir, workspaceRoot: workspace, fs: emfile });
      } catch (error) {
        caught = error;
      }
      expect(caught).toMatchObject({ code: "LOCK_FAILED" });
      expect((caught as Error).message).toMatch(/not judged/);
      expect((caught as Error).message).not.toMatch(/remove it by hand/);
    } finally {
      held.release();
    }
  });
});

describe("retaining a lock this process could not read just then", () => {
  it("keeps it (fail closed): an I/O error is no proof the lock was lost, and the lock stays for recovery", async () => {
    const base = makeTempDir("ws-retain-io");
    const workspace = join(base, "ws");
    const dataDir = join(base, "data");
    fs.mkdirSync(workspace);
    let failReads = false;
    const flaky: FileOps = {
      ...nodeFileOps,
      openSync: ((path: fs.PathLike, ...rest: unknown[]) => {
        if (failReads && String(path).endsWith(".lock")) {
          throw Object.assign(new Error("EMFILE: too many open files"), { code: "EMFILE" });
        }
        return (nodeFileOps.openSync as (...args: unknown[]) => number)(path, ...rest);
      }) as FileOps["openSync"],
    };
    try {
      const outcome = await rejection(
        withWorkspaceLock(
          { dataDir, workspaceRoot: workspace, transactionId: "op-io", fs: flaky },
          (lease) => {
            failReads = true;
            try {
              // A check that cannot read the lock stops the work, and says so, not "lost".
              expect(() => lease.assertOwned()).toThrow(expect.objectContaining({ code: "LOCK_FAILED" }));
              return lease.retainForRecovery("the rollback failed: EMFILE");
            } finally {
              failReads = false;
            }
          },
        ),
      );
      expect(outcome).toMatchObject({ code: "RECOVERY_REQUIRED", details: { workspaceLockRetained: true } });
      expect(inspectWorkspaceLock({ dataDir, workspaceRoot: workspace })).toMatchObject({
        payload: { transactionId: "op-io" },
      });
    } finally {
      removeDir(base);
    }
  });
});

describe("a durable acquire whose flush fails", () => {
  it("says the lock is still held by this process when giving it up failed too, never 'nothing was changed'", async () => {
    const base = makeTempDir("ws-dflush");
    const workspace = join(base, "ws");
    const dataDir = join(base, "data");
    fs.mkdirSync(workspace);
    fs.mkdirSync(join(dataDir, "locks"), { recursive: true });
    const failing: FileOps = {
      ...nodeFileOps,
      fsyncSync: (fd) => {
        if (nodeFileOps.fstatSync(fd).isDirectory()) throw Object.assign(new Error("EIO"), { code: "EIO" });
        nodeFileOps.fsyncSync(fd);
      },
      unlinkSync: (path) => {
        // A disk remounted read-only after the EIO: the give-up fails too.
        if (/ws-[0-9a-f]+\.lock$/.test(String(path)))
          throw Object.assign(new Error("EROFS"), { code: "EROFS" });
        nodeFileOps.unlinkSync(path);
      },
    };
    let caught: unknown = null;
    try {
      await acquireWorkspaceLock({ dataDir, workspaceRoot: workspace, transactionId: "op-1", fs: failing });
    } catch (error) {
      caught = error;
    }
    expect(caught).toMatchObject({ code: "LOCK_FAILED" });
    expect((caught as Error).message).toMatch(/this process holds it until it exits/);
    expect((caught as Error).message).not.toMatch(/Nothing was changed/);
    expect(inspectWorkspaceLock({ dataDir, workspaceRoot: workspace })?.pid).toBe(process.pid);
  });
});

const FOREIGN_TOKEN = "ffffffff-ffff-4fff-bfff-ffffffffffff";

/** What a process that took a lock from us (a reaper misled about our liveness, a hand edit) leaves. */
function stealLock(path: string): void {
  const mine = JSON.parse(fs.readFileSync(path, "utf8"));
  fs.unlinkSync(path);
  fs.writeFileSync(path, `${JSON.stringify({ ...mine, token: FOREIGN_TOKEN })}\n`);
}

describe("workspace lock: a lease whose lock was taken by another owner", () => {
  it("release() reports it and leaves the other owner's lock in place", async () => {
    const held = await acquireWorkspaceLock({ dataDir, workspaceRoot: workspace, transactionId: "op-1" });
    const path = workspaceLockPath(dataDir, workspace);
    stealLock(path);
    const theirs = fs.readFileSync(path);
    let caught: unknown = null;
    try {
      held.release();
    } catch (error) {
      caught = error;
    }
    expect(caught).toMatchObject({ code: "LOCK_OWNERSHIP_LOST" });
    expect((caught as Error).message).toMatch(/taken by another owner/);
    expect(fs.readFileSync(path)).toEqual(theirs);
  });

  it("withWorkspaceLock reports it even though the callback succeeded", async () => {
    const path = workspaceLockPath(dataDir, workspace);
    const error = await rejection(
      withWorkspaceLock({ dataDir, workspaceRoot: workspace, transactionId: "op-1" }, () => {
        stealLock(path);
        return "done";
      }),
    );
    expect(error.code).toBe("LOCK_OWNERSHIP_LOST");
    expect(JSON.parse(fs.readFileSync(path, "utf8")).token).toBe(FOREIGN_TOKEN);
  });

  it("withWorkspaceLock reports the loss, carrying the callback's failure, when the callback failed too", async () => {
    const path = workspaceLockPath(dataDir, workspace);
    const failure = new Error("the work under the lock failed");
    const error = await rejection(
      withWorkspaceLock({ dataDir, workspaceRoot: workspace, transactionId: "op-1" }, () => {
        stealLock(path);
        throw failure;
      }),
    );
    expect(isSagaError(error)).toBe(true);
    expect(error.code).toBe("LOCK_OWNERSHIP_LOST");
    expect(error.details.callbackError).toBe(failure);
    expect(error.details.ownerOperationId).toBe("op-1");
    expect(error.message).toMatch(/taken by another owner/);
    expect(error.message).toContain("the work under the lock failed");
    expect(error.message).not.toContain(FOREIGN_TOKEN);
    // The cause is the lock's own (file-lock's LOCK_OWNERSHIP_LOST), as when the callback succeeded.
    expect((error.cause as { code?: string }).code).toBe("LOCK_OWNERSHIP_LOST");
    expect(JSON.parse(fs.readFileSync(path, "utf8")).token).toBe(FOREIGN_TOKEN);

    // A lock removed (not taken) while the callback failed: the same.
    fs.rmSync(path);
    const removed = await rejection(
      withWorkspaceLock({ dataDir, workspaceRoot: workspace, transactionId: "op-2" }, () => {
        fs.rmSync(path);
        throw failure;
      }),
    );
    expect(removed.code).toBe("LOCK_OWNERSHIP_LOST");
    expect(removed.details.callbackError).toBe(failure);
  });

  it("a callback failure with the lock still owned is the caller's error, lock released (unchanged)", async () => {
    const failure = new Error("plain failure");
    const error = await withWorkspaceLock(
      { dataDir, workspaceRoot: workspace, transactionId: "op-1" },
      (): never => {
        throw failure;
      },
    ).catch((thrown: unknown) => thrown);
    expect(error).toBe(failure);
    expect(inspectWorkspaceLock({ dataDir, workspaceRoot: workspace })).toBeNull();
  });

  it("retainForRecovery refuses to claim a lock that is no longer ours (LOCK_OWNERSHIP_LOST, nothing retained)", async () => {
    const held = await acquireWorkspaceLock({ dataDir, workspaceRoot: workspace, transactionId: "op-1" });
    const path = workspaceLockPath(dataDir, workspace);
    stealLock(path);
    let caught: unknown = null;
    try {
      held.retainForRecovery("journal write failed");
    } catch (error) {
      caught = error;
    }
    expect(caught).toMatchObject({ code: "LOCK_OWNERSHIP_LOST" });
    expect((caught as SagaError).details.workspaceLockRetained).toBeUndefined();
    expect((caught as SagaError).details.retainedOwnerDigest).toBeUndefined();
    expect(held.retention).toBeNull();
    expect(JSON.parse(fs.readFileSync(path, "utf8")).token).toBe(FOREIGN_TOKEN);
  });

  it("withWorkspaceLock never reports a retention of a lost lock: the loss carries the refused retention", async () => {
    const path = workspaceLockPath(dataDir, workspace);
    const error = await rejection(
      withWorkspaceLock({ dataDir, workspaceRoot: workspace, transactionId: "op-1" }, (lease) => {
        stealLock(path);
        return lease.retainForRecovery("journal write failed");
      }),
    );
    expect(error.code).toBe("LOCK_OWNERSHIP_LOST");
    expect(error.details.workspaceLockRetained).toBeUndefined();
    expect((error.details.callbackError as SagaError).code).toBe("LOCK_OWNERSHIP_LOST");
    expect(JSON.parse(fs.readFileSync(path, "utf8")).token).toBe(FOREIGN_TOKEN);
  });

  it("a retention of a lock still owned is kept, as before", async () => {
    const held = await acquireWorkspaceLock({ dataDir, workspaceRoot: workspace, transactionId: "op-1" });
    let caught: unknown = null;
    try {
      held.retainForRecovery("kept");
    } catch (error) {
      caught = error;
    }
    expect(caught).toBe(held.retention);
    expect((caught as SagaError).details).toMatchObject({
      workspaceLockRetained: true,
      retainedOwnerDigest: held.ownerDigest,
    });
    expect(ownerDigest(inspectWorkspaceLock({ dataDir, workspaceRoot: workspace })!)).toBe(held.ownerDigest);
  });
});

describe("workspace lock: a release that fails but leaves the lock held", () => {
  /** Fails every unlink of the workspace lock with EIO while `ctl.failing`: a disk having a bad moment. */
  function flaky(ctl: { failing: boolean; unlinks: number }): FileOps {
    return {
      ...nodeFileOps,
      unlinkSync(path: fs.PathLike) {
        if (/ws-[0-9a-f]{64}\.lock$/.test(String(path))) {
          ctl.unlinks += 1;
          if (ctl.failing) throw Object.assign(new Error("EIO: i/o error, unlink"), { code: "EIO" });
        }
        nodeFileOps.unlinkSync(path);
      },
    };
  }
  const settle = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

  it("is retried in the background: once the disk recovers, the workspace is free again without a restart", async () => {
    const ctl = { failing: true, unlinks: 0 };
    const held = await acquireWorkspaceLock({
      dataDir,
      workspaceRoot: workspace,
      transactionId: "op-1",
      fs: flaky(ctl),
    });
    let caught: unknown = null;
    try {
      held.release();
    } catch (error) {
      caught = error;
    }
    expect(caught).toMatchObject({ code: "LOCK_FAILED" });
    expect((caught as Error).message).toMatch(/retries releasing it in the background/);
    expect(inspectWorkspaceLock({ dataDir, workspaceRoot: workspace })?.pid).toBe(process.pid);
    ctl.failing = false;
    await settle(400);
    expect(inspectWorkspaceLock({ dataDir, workspaceRoot: workspace })).toBeNull();
    // The lease knows: a later release() is quiet, and another acquisition goes ahead.
    held.release();
    const next = await acquireWorkspaceLock({
      dataDir,
      workspaceRoot: workspace,
      transactionId: "op-2",
      waitMs: 200,
    });
    next.release();
  });

  it("withWorkspaceLock: the callback's failure is the caller's, and the lock it could not release is freed later", async () => {
    const ctl = { failing: false, unlinks: 0 };
    const failure = new Error("the work under the lock failed");
    const error = await withWorkspaceLock(
      { dataDir, workspaceRoot: workspace, transactionId: "op-1", fs: flaky(ctl) },
      (): never => {
        ctl.failing = true;
        throw failure;
      },
    ).catch((thrown: unknown) => thrown);
    expect(error).toBe(failure);
    expect(inspectWorkspaceLock({ dataDir, workspaceRoot: workspace })?.pid).toBe(process.pid);
    ctl.failing = false;
    await settle(400);
    expect(inspectWorkspaceLock({ dataDir, workspaceRoot: workspace })).toBeNull();
  });

  it("never releases a lock retained for recovery after the failed release", async () => {
    const ctl = { failing: true, unlinks: 0 };
    const held = await acquireWorkspaceLock({
      dataDir,
      workspaceRoot: workspace,
      transactionId: "op-1",
      fs: flaky(ctl),
    });
    expect(() => held.release()).toThrow(expect.objectContaining({ code: "LOCK_FAILED" }));
    expect(() => held.retainForRecovery("the outcome is unknown")).toThrow(
      expect.objectContaining({ code: "RECOVERY_REQUIRED" }),
    );
    ctl.failing = false;
    const unlinksBefore = ctl.unlinks;
    await settle(400);
    expect(ctl.unlinks).toBe(unlinksBefore);
    expect(ownerDigest(inspectWorkspaceLock({ dataDir, workspaceRoot: workspace })!)).toBe(held.ownerDigest);
  });
});

describe("workspace lock: the registry lock's release fails after the workspace lock was taken", () => {
  const wsLock = /ws-[0-9a-f]{64}\.lock$/;
  function faulty(ctl: { armed: boolean; mode: "eio" | "steal" }): FileOps {
    const registry = join(dataDir, "locks", "registry.lock");
    const published = (to: fs.PathLike): void => {
      if (!wsLock.test(String(to))) return;
      ctl.armed = true;
      if (ctl.mode === "steal") stealLock(registry);
    };
    return {
      ...nodeFileOps,
      linkSync(from: fs.PathLike, to: fs.PathLike) {
        nodeFileOps.linkSync(from, to);
        published(to);
      },
      renameSync(from: fs.PathLike, to: fs.PathLike) {
        nodeFileOps.renameSync(from, to);
        published(to);
      },
      unlinkSync(path: fs.PathLike) {
        if (ctl.armed && ctl.mode === "eio" && String(path) === registry)
          throw Object.assign(new Error("EIO: i/o error, unlink"), { code: "EIO", syscall: "unlink" });
        nodeFileOps.unlinkSync(path);
      },
    };
  }

  it("EIO: the lease is handed back, and the registry this process still holds is released by its next acquisition", async () => {
    const ctl = { armed: false, mode: "eio" as const };
    const registry = join(dataDir, "locks", "registry.lock");
    const held = await acquireWorkspaceLock({
      dataDir,
      workspaceRoot: workspace,
      transactionId: "op-1",
      fs: faulty(ctl),
    });
    expect(inspectWorkspaceLock({ dataDir, workspaceRoot: workspace })).toEqual(held.owner);
    held.release();
    expect(inspectWorkspaceLock({ dataDir, workspaceRoot: workspace })).toBeNull();
    expect(JSON.parse(fs.readFileSync(registry, "utf8")).pid).toBe(process.pid);
    const stuck = await rejection(
      acquireWorkspaceLock({ dataDir, workspaceRoot: workspace, transactionId: "op-2", fs: faulty(ctl) }),
    );
    expect(stuck.code).toBe("LOCK_FAILED");
    expect(stuck.message).toMatch(/still held by this process/);
    expect(stuck.message).not.toMatch(/Nothing was changed/);
    ctl.armed = false;
    const next = await acquireWorkspaceLock({ dataDir, workspaceRoot: workspace, transactionId: "op-3" });
    next.release();
    expect(fs.existsSync(registry)).toBe(false);
  });

  it("a registry taken by another owner: acquire gives the workspace lock up again before it throws", async () => {
    const error = await rejection(
      acquireWorkspaceLock({
        dataDir,
        workspaceRoot: workspace,
        transactionId: "op-1",
        fs: faulty({ armed: false, mode: "steal" }),
      }),
    );
    expect(error.code).toBe("LOCK_FAILED");
    expect(error.message).toMatch(/registry/);
    expect(error.message).not.toMatch(/may be stale/);
    expect(inspectWorkspaceLock({ dataDir, workspaceRoot: workspace })).toBeNull();
  });

  it("a registry taken by another owner during a takeover: the lease is handed back, the workspace never unlocked", async () => {
    await acquireWorkspaceLock({ dataDir, workspaceRoot: workspace, transactionId: "op-t" });
    const dead = inspectWorkspaceLock({ dataDir, workspaceRoot: workspace })!;
    const lease = await takeoverWorkspaceLock({
      dataDir,
      workspaceRoot: workspace,
      transactionId: "op-t",
      expectedOwner: dead,
      isProcessAlive: everyoneDead,
      fs: faulty({ armed: false, mode: "steal" }),
    });
    expect(lease.priorOwner).toEqual(dead);
    expect(inspectWorkspaceLock({ dataDir, workspaceRoot: workspace })).toEqual(lease.owner);
    lease.release();
    expect(inspectWorkspaceLock({ dataDir, workspaceRoot: workspace })).toBeNull();
  });
});

/** Whether this process may bind-mount (root, or a user namespace allowing it); probed once. */
const canBindMount = ((): boolean => {
  if (process.platform !== "linux") return false;
  const dir = makeTempDir("bind-probe");
  try {
    fs.mkdirSync(join(dir, "a"));
    fs.mkdirSync(join(dir, "b"));
    execFileSync("mount", ["--bind", join(dir, "a"), join(dir, "b")], { stdio: "ignore" });
    execFileSync("umount", [join(dir, "b")], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  } finally {
    removeDir(dir);
  }
})();

describe("workspace lock: one directory under two paths", () => {
  /** stat of `alias` answers `target`'s device and inode, as a bind mount of target at alias would. */
  function aliasing(alias: string, target: string): FileOps {
    return {
      ...nodeFileOps,
      statSync: ((path: fs.PathLike, ...rest: unknown[]) => {
        const stat = (nodeFileOps.statSync as (...args: unknown[]) => fs.Stats)(path, ...rest);
        if (String(path) !== alias) return stat;
        const real = (nodeFileOps.statSync as (...args: unknown[]) => fs.Stats)(target, ...rest);
        return Object.assign(Object.create(Object.getPrototypeOf(stat)), stat, {
          dev: real.dev,
          ino: real.ino,
        });
      }) as FileOps["statSync"],
    };
  }

  it("refuses a root with the same device and inode as a locked root, in either order", async () => {
    const alias = join(base, "alias");
    fs.mkdirSync(alias);
    const seam = aliasing(alias, workspace);
    for (const [first, second] of [
      [workspace, alias],
      [alias, workspace],
    ] as const) {
      const held = await acquireWorkspaceLock({
        dataDir,
        workspaceRoot: first,
        transactionId: "op-1",
        fs: seam,
      });
      const error = await rejection(
        acquireWorkspaceLock({ dataDir, workspaceRoot: second, transactionId: "op-2", waitMs: 0, fs: seam }),
      );
      expect(error.code).toBe("WORKSPACE_LOCKED");
      expect(error.details.ownerWorkspaceRoot).toBe(first);
      expect(error.message).toMatch(/same directory/);
      held.release();
    }
    // A dead owner of the alias is RECOVERY_REQUIRED, as for the path itself.
    await acquireWorkspaceLock({ dataDir, workspaceRoot: alias, transactionId: "op-dead", fs: seam });
    const dead = await rejection(
      acquireWorkspaceLock({
        dataDir,
        workspaceRoot: workspace,
        transactionId: "op-2",
        isProcessAlive: everyoneDead,
        fs: seam,
      }),
    );
    expect(dead.code).toBe("RECOVERY_REQUIRED");
  });

  it("does not match a locked root that no longer exists", async () => {
    const alias = join(base, "alias");
    fs.mkdirSync(alias);
    const seam = aliasing(alias, workspace);
    const held = await acquireWorkspaceLock({
      dataDir,
      workspaceRoot: alias,
      transactionId: "op-1",
      fs: seam,
    });
    fs.rmdirSync(alias);
    const second = await acquireWorkspaceLock({
      dataDir,
      workspaceRoot: workspace,
      transactionId: "op-2",
      fs: seam,
    });
    second.release();
    held.release();
  });

  it.runIf(canBindMount)("refuses the same directory reached through a real bind mount", async () => {
    const alias = join(base, "alias");
    fs.mkdirSync(alias);
    execFileSync("mount", ["--bind", workspace, alias]);
    try {
      const held = await acquireWorkspaceLock({ dataDir, workspaceRoot: workspace, transactionId: "op-1" });
      const error = await rejection(
        acquireWorkspaceLock({ dataDir, workspaceRoot: alias, transactionId: "op-2", waitMs: 0 }),
      );
      expect(error.code).toBe("WORKSPACE_LOCKED");
      held.release();
    } finally {
      execFileSync("umount", [alias]);
    }
  });
});

describe("workspace lock: a lock file torn by a power loss", () => {
  /** This machine as file-lock sees it, but booted at `bootTimeMs` (no real reboot needed). */
  const bootedAt = (bootTimeMs: number) => ({ ...createSystemIdentity(), bootTimeMs: () => bootTimeMs });
  const afterReboot = () => bootedAt(Date.now() + 60_000);
  const sameBoot = () => bootedAt(Date.now() - 3_600_000);
  const lockPath = () => workspaceLockPath(dataDir, fs.realpathSync(workspace));

  /** A retained lock of `op-torn`, then torn: `bytes` replace its owner in place (same inode). */
  async function tornLock(bytes: (owner: Buffer) => Buffer): Promise<string> {
    await acquireWorkspaceLock({ dataDir, workspaceRoot: workspace, transactionId: "op-torn" });
    const path = lockPath();
    fs.writeFileSync(path, bytes(fs.readFileSync(path)));
    return path;
  }

  it("inspection reports an empty or half-written lock as unreadable and torn, read-only, with its identity", async () => {
    for (const [name, tear] of [
      ["empty", () => Buffer.alloc(0)],
      ["half", (owner: Buffer) => owner.subarray(0, owner.length >> 1)],
      ["zeros", (owner: Buffer) => Buffer.alloc(owner.length)],
    ] as const) {
      const path = await tornLock(tear);
      const bytes = fs.readFileSync(path);
      const stat = fs.statSync(path);
      const state = inspectWorkspaceLockState({ dataDir, workspaceRoot: workspace, identity: afterReboot() });
      expect(state.kind, name).toBe("unreadable");
      if (state.kind !== "unreadable") throw new Error("unreachable");
      const identity = { dev: stat.dev, ino: stat.ino, size: stat.size, ctimeMs: stat.ctimeMs };
      expect(state.identity, name).toEqual(identity);
      expect(state.torn, name).toEqual({ torn: true, ...identity });
      expect(state.path).toBe(path);
      expect(state.reason.length).toBeGreaterThan(0);
      // The same file in this boot: unreadable, but not torn (a process of this boot may have written it).
      const now = inspectWorkspaceLockState({ dataDir, workspaceRoot: workspace, identity: sameBoot() });
      expect(now).toMatchObject({ kind: "unreadable", torn: null, identity });
      // The old inspection still refuses it; nothing was changed.
      expect(() => inspectWorkspaceLock({ dataDir, workspaceRoot: workspace })).toThrow(
        expect.objectContaining({ code: "LOCK_FAILED" }),
      );
      expect(fs.readFileSync(path)).toEqual(bytes);
      expect(fs.readdirSync(join(dataDir, "locks")).filter((entry) => entry.startsWith("ws-"))).toEqual([
        basename(path),
      ]);
      fs.rmSync(path);
    }
    expect(inspectWorkspaceLockState({ dataDir, workspaceRoot: workspace })).toEqual({ kind: "absent" });
    const held = await acquireWorkspaceLock({ dataDir, workspaceRoot: workspace, transactionId: "op-live" });
    const state = inspectWorkspaceLockState({ dataDir, workspaceRoot: workspace });
    expect(state).toEqual({ kind: "owner", owner: held.owner });
    held.release();
  });

  it("takes over a torn lock given its exact TornLock: the new lease owns the lock, for the operation's transaction", async () => {
    const path = await tornLock(() => Buffer.alloc(0));
    const identity = afterReboot();
    const state = inspectWorkspaceLockState({ dataDir, workspaceRoot: workspace, identity });
    if (state.kind !== "unreadable" || state.torn === null) throw new Error("expected a torn lock");
    const expectedTorn = state.torn;
    expect(tornLockDigest(expectedTorn)).toMatch(/^sha256:[0-9a-f]{64}$/);
    const result = await withWorkspaceRecoveryLock(
      { dataDir, workspaceRoot: workspace, transactionId: "op-torn", expectedTorn, identity },
      (lease) => {
        expect(lease.owner.payload).toEqual({
          transactionId: "op-torn",
          workspaceRoot: fs.realpathSync(workspace),
          purpose: "checkpoint-restore",
        });
        expect(lease.priorOwner).toBeNull();
        expect(lease.priorTornLock).toEqual(expectedTorn);
        expect(lease.recoveryOfOperationId).toBe("op-torn");
        const onDisk = inspectWorkspaceLock({ dataDir, workspaceRoot: workspace })!;
        expect(ownerDigest(onDisk)).toBe(lease.ownerDigest);
        lease.assertOwned();
        return "settled";
      },
    );
    expect(result).toBe("settled");
    expect(fs.existsSync(path)).toBe(false);

    // takeoverWorkspaceLock itself: the lease can retain the lock again for a later recovery.
    await tornLock(() => Buffer.alloc(0));
    const again = inspectWorkspaceLockState({ dataDir, workspaceRoot: workspace, identity });
    if (again.kind !== "unreadable" || again.torn === null) throw new Error("expected a torn lock");
    const held = await takeoverWorkspaceLock({
      dataDir,
      workspaceRoot: workspace,
      transactionId: "op-torn",
      expectedTorn: again.torn,
      identity,
    });
    expect(inspectWorkspaceLock({ dataDir, workspaceRoot: workspace })).toEqual(held.owner);
    held.release();
  });

  it("refuses a stale TornLock (the file was replaced since it was inspected) and leaves the file", async () => {
    const path = await tornLock(() => Buffer.alloc(0));
    const identity = afterReboot();
    const state = inspectWorkspaceLockState({ dataDir, workspaceRoot: workspace, identity });
    if (state.kind !== "unreadable" || state.torn === null) throw new Error("expected a torn lock");
    // Replaced by another file (another inode), torn too.
    fs.writeFileSync(`${path}.new`, "");
    fs.renameSync(`${path}.new`, path);
    const bytes = fs.readFileSync(path);
    const ino = fs.statSync(path).ino;
    const error = await rejection(
      takeoverWorkspaceLock({
        dataDir,
        workspaceRoot: workspace,
        transactionId: "op-torn",
        expectedTorn: state.torn,
        identity,
      }),
    );
    expect(error.code).toBe("CONFLICT");
    expect(error.message).toMatch(/changed since it was inspected/);
    expect(fs.readFileSync(path)).toEqual(bytes);
    expect(fs.statSync(path).ino).toBe(ino);
    // A shape that is not a TornLock at all is an argument error, before anything is read.
    const invalid = await rejection(
      takeoverWorkspaceLock({
        dataDir,
        workspaceRoot: workspace,
        transactionId: "op-torn",
        expectedTorn: { ...state.torn, size: -1 },
        identity,
      }),
    );
    expect(invalid.code).toBe("INVALID_ARGUMENT");
  });

  it("refuses a garbage lock last changed after this boot (fail closed) and says what to do", async () => {
    const path = await tornLock(() => Buffer.from("{ not json"));
    const identity = sameBoot();
    const state = inspectWorkspaceLockState({ dataDir, workspaceRoot: workspace, identity });
    if (state.kind !== "unreadable" || state.identity === null)
      throw new Error("expected an unreadable lock");
    expect(state.torn).toBeNull();
    const error = await rejection(
      takeoverWorkspaceLock({
        dataDir,
        workspaceRoot: workspace,
        transactionId: "op-torn",
        expectedTorn: { torn: true, ...state.identity },
        identity,
      }),
    );
    expect(error.code).toBe("LOCK_FAILED");
    expect(error.message).toMatch(/after this machine booted/);
    expect(error.message).toMatch(/--expected-owner-digest none/);
    expect(fs.readFileSync(path, "utf8")).toBe("{ not json");
  });

  it("refuses a torn takeover while an overlapping workspace is locked, and leaves both", async () => {
    const path = await tornLock(() => Buffer.alloc(0));
    const identity = afterReboot();
    const state = inspectWorkspaceLockState({ dataDir, workspaceRoot: workspace, identity });
    if (state.kind !== "unreadable" || state.torn === null) throw new Error("expected a torn lock");
    const child = await acquireWorkspaceLock({
      dataDir,
      workspaceRoot: join(workspace, "child"),
      transactionId: "op-child",
      identity,
    }).catch((error: unknown) => error);
    // The torn lock itself keeps the child out (fail closed), so lock the child's file by hand instead.
    expect(child).toMatchObject({ code: "LOCK_FAILED" });
    fs.writeFileSync(
      workspaceLockPath(dataDir, join(fs.realpathSync(workspace), "child")),
      `${JSON.stringify({
        version: 1,
        pid: process.pid,
        token: "6f1c1f0e-2a3b-4c5d-8e9f-0a1b2c3d4e5f",
        createdAt: Date.now(),
        host: hostname(),
        bootId: createSystemIdentity().bootId(),
        payload: {
          transactionId: "op-child",
          workspaceRoot: join(fs.realpathSync(workspace), "child"),
          purpose: "checkpoint-restore",
        },
      })}\n`,
    );
    const error = await rejection(
      takeoverWorkspaceLock({
        dataDir,
        workspaceRoot: workspace,
        transactionId: "op-torn",
        expectedTorn: state.torn,
        identity,
      }),
    );
    expect(error.code).toBe("WORKSPACE_LOCKED");
    expect(fs.readFileSync(path, "utf8")).toBe("");
  });
});

describe("workspace lock: a lock left by a stopped workspace edit (file write, deletion, checkpoint)", () => {
  /** An owner file of a process that is provably gone (its pid exited; this host, this boot). */
  async function writeDeadOwner(root: string, transactionId: string, purpose: string): Promise<string> {
    fs.mkdirSync(join(dataDir, "locks"), { recursive: true });
    const owner = {
      version: 1,
      pid: await deadPid(),
      token: randomUUID(),
      createdAt: Date.now() - 1_000,
      host: hostname(),
      bootId: createSystemIdentity().bootId(),
      payload: { transactionId, workspaceRoot: fs.realpathSync(root), purpose },
    };
    const path = workspaceLockPath(dataDir, fs.realpathSync(root));
    fs.writeFileSync(path, `${JSON.stringify(owner)}\n`);
    return path;
  }

  it("publishes purpose workspace-edit when asked, checkpoint-restore by default", async () => {
    const held = await acquireWorkspaceLock({
      dataDir,
      workspaceRoot: workspace,
      transactionId: "file-write-1",
      purpose: "workspace-edit",
    });
    expect(inspectWorkspaceLock({ dataDir, workspaceRoot: workspace })?.payload.purpose).toBe(
      "workspace-edit",
    );
    held.release();
  });

  it("the next acquire takes a dead edit owner's lock over (exact owner, never a blind unlink) and proceeds", async () => {
    for (const purpose of ["workspace-edit", "checkpoint-restore"] as const) {
      const path = await writeDeadOwner(workspace, "file-write-dead", "workspace-edit");
      const held = await acquireWorkspaceLock({
        dataDir,
        workspaceRoot: workspace,
        transactionId: `next-${purpose}`,
        purpose,
        waitMs: 0,
      });
      expect(held.owner.payload).toEqual({
        transactionId: `next-${purpose}`,
        workspaceRoot: workspace,
        purpose,
      });
      expect(held.priorOwner).toBeNull();
      expect(held.recoveryOfOperationId).toBeNull();
      expect(held.reapedEditLocks.map((o) => o.payload.transactionId)).toEqual(["file-write-dead"]);
      expect(inspectWorkspaceLock({ dataDir, workspaceRoot: workspace })?.token).toBe(held.owner.token);
      held.release();
      expect(fs.existsSync(path)).toBe(false);
      // Nothing is left beside the lock (file-lock's candidate and election records are gone).
      expect(fs.readdirSync(join(dataDir, "locks")).filter((n) => n.startsWith("ws-"))).toEqual([]);
    }
  });

  it("a dead edit owner of an overlapping workspace is removed by the overlap scan, and the acquire proceeds", async () => {
    const child = join(workspace, "child");
    for (const [locked, wanted] of [
      [child, workspace],
      [workspace, child],
    ] as const) {
      const path = await writeDeadOwner(locked, "checkpoint-dead", "workspace-edit");
      const held = await acquireWorkspaceLock({
        dataDir,
        workspaceRoot: wanted,
        transactionId: "op-next",
        waitMs: 0,
      });
      expect(fs.existsSync(path)).toBe(false);
      expect(held.reapedEditLocks.map((o) => o.payload.workspaceRoot)).toEqual([locked]);
      held.release();
    }
  });

  it("a live edit owner still gives WORKSPACE_LOCKED (saying it is an edit, not a restore)", async () => {
    const edit = await acquireWorkspaceLock({
      dataDir,
      workspaceRoot: workspace,
      transactionId: "file-write-live",
      purpose: "workspace-edit",
    });
    for (const root of [workspace, join(workspace, "child")]) {
      const error = await rejection(
        acquireWorkspaceLock({ dataDir, workspaceRoot: root, transactionId: "op-next", waitMs: 0 }),
      );
      expect(error.code).toBe("WORKSPACE_LOCKED");
      expect(error.details.ownerOperationId).toBe("file-write-live");
      expect(error.message).not.toMatch(/^Restore/);
      expect(error.message).toContain("file write");
    }
    expect(inspectWorkspaceLock({ dataDir, workspaceRoot: workspace })).toEqual(edit.owner);
    edit.release();
  });

  it("a dead checkpoint-restore owner still gives RECOVERY_REQUIRED, its lock untouched", async () => {
    const path = await writeDeadOwner(workspace, "restore-dead", "checkpoint-restore");
    const bytes = fs.readFileSync(path);
    for (const [root, purpose] of [
      [workspace, "workspace-edit"],
      [join(workspace, "child"), "checkpoint-restore"],
    ] as const) {
      const error = await rejection(
        acquireWorkspaceLock({ dataDir, workspaceRoot: root, transactionId: "op-next", purpose, waitMs: 0 }),
      );
      expect(error.code).toBe("RECOVERY_REQUIRED");
      expect(error.details.ownerOperationId).toBe("restore-dead");
    }
    expect(fs.readFileSync(path)).toEqual(bytes);
  });

  it("an edit owner in another pid namespace is never judged dead: WORKSPACE_LOCKED, lock kept", async () => {
    const path = await writeDeadOwner(workspace, "file-write-elsewhere", "workspace-edit");
    const owner = JSON.parse(fs.readFileSync(path, "utf8"));
    fs.writeFileSync(path, `${JSON.stringify({ ...owner, pidNamespace: "pid:[4026500001]" })}\n`);
    const bytes = fs.readFileSync(path);
    const error = await rejection(
      acquireWorkspaceLock({ dataDir, workspaceRoot: workspace, transactionId: "op-next", waitMs: 0 }),
    );
    expect(error.code).toBe("WORKSPACE_LOCKED");
    expect((await reapDeadEditLocks({ dataDir })).removed).toEqual([]);
    expect(fs.readFileSync(path)).toEqual(bytes);
  });

  it("takeoverWorkspaceLock keeps requiring a checkpoint-restore owner and purpose", async () => {
    await writeDeadOwner(workspace, "file-write-dead", "workspace-edit");
    const owner = inspectWorkspaceLock({ dataDir, workspaceRoot: workspace })!;
    const base = { dataDir, workspaceRoot: workspace, transactionId: "file-write-dead" };
    const edit = await rejection(takeoverWorkspaceLock({ ...base, expectedOwner: owner }));
    expect(edit.code).toBe("INVALID_ARGUMENT");
    const asEdit = await rejection(
      takeoverWorkspaceLock({ ...base, expectedOwner: owner, purpose: "workspace-edit" }),
    );
    expect(asEdit.code).toBe("INVALID_ARGUMENT");
    expect(inspectWorkspaceLock({ dataDir, workspaceRoot: workspace })).toEqual(owner);
  });

  it("reapDeadEditLocks removes only dead edit locks, running its callback while it holds each", async () => {
    const others = ["w-dead-edit", "w-dead-restore", "w-live-edit"].map((name) => {
      const root = join(base, name);
      fs.mkdirSync(root);
      return root;
    });
    const [deadEdit, deadRestore, liveEdit] = others as [string, string, string];
    const deadEditPath = await writeDeadOwner(deadEdit, "file-delete-dead", "workspace-edit");
    const deadRestorePath = await writeDeadOwner(deadRestore, "restore-dead", "checkpoint-restore");
    const restoreBytes = fs.readFileSync(deadRestorePath);
    const live = await acquireWorkspaceLock({
      dataDir,
      workspaceRoot: liveEdit,
      transactionId: "file-write-live",
      purpose: "workspace-edit",
    });
    // A stopped edit whose workspace was removed since: its lock still goes.
    const gone = join(base, "w-gone");
    fs.mkdirSync(gone);
    const gonePath = await writeDeadOwner(gone, "checkpoint-gone", "workspace-edit");
    fs.rmSync(gone, { recursive: true });

    const held: string[] = [];
    const result = await reapDeadEditLocks({
      dataDir,
      whileHeld: (owner) => {
        held.push(owner.payload.workspaceRoot);
        // This very workspace's lock is held (taken over by this process, not yet released) while the
        // callback runs. (Not another's: the reap order follows the lock files' names.)
        const path = workspaceLockPath(dataDir, owner.payload.workspaceRoot);
        expect(JSON.parse(fs.readFileSync(path, "utf8")).pid).toBe(process.pid);
      },
    });
    expect(result.removed.map((o) => o.payload.transactionId).sort()).toEqual([
      "checkpoint-gone",
      "file-delete-dead",
    ]);
    expect(held.sort()).toEqual([fs.realpathSync(deadEdit), join(fs.realpathSync(base), "w-gone")].sort());
    expect(fs.existsSync(deadEditPath)).toBe(false);
    expect(fs.existsSync(gonePath)).toBe(false);
    expect(fs.readFileSync(deadRestorePath)).toEqual(restoreBytes);
    expect(inspectWorkspaceLock({ dataDir, workspaceRoot: liveEdit })).toEqual(live.owner);
    // Nothing to do: nothing changes, and a data directory without locks is fine too.
    expect((await reapDeadEditLocks({ dataDir })).removed).toEqual([]);
    expect((await reapDeadEditLocks({ dataDir: join(base, "empty") })).removed).toEqual([]);
    expect(fs.existsSync(join(base, "empty"))).toBe(false);
    live.release();
  });
});
