import * as fs from "node:fs";
import { join } from "node:path";
import { type FileOpName, type FileOps, failNthCall, nodeFileOps } from "@drydock/file-lock";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { inspectWorkspaceLock, isSagaError, restoreCheckpoint } from "../src/index.js";
import {
  everyoneDead,
  makeRestoreFixture,
  makeTempDir,
  recoverRestore,
  removeDir,
  sameTree,
  snapshotTree,
  strayFiles,
} from "./helpers.js";

// fsync stays a counted (and failable) call but does not wait for the disk: this loop checks typed
// failures and before-or-after states, not power-loss durability.
const noWaitFsync: FileOps = {
  ...nodeFileOps,
  fsyncSync: () => {},
  fsync: ((_fd: number, done: (error: NodeJS.ErrnoException | null) => void) =>
    process.nextTick(done, null)) as FileOps["fsync"],
};

const { O_WRONLY, O_RDWR, O_CREAT } = fs.constants;
const CHANGES_DISK = new Set<FileOpName>([
  "writeSync",
  "writeFileSync",
  "fsyncSync",
  "fsync",
  "linkSync",
  "unlinkSync",
  "renameSync",
  "mkdirSync",
  "rmdirSync",
  "rmSync",
  "chmodSync",
  "fchmodSync",
  "symlinkSync",
  "ftruncateSync",
]);

/** The calls that change the disk: every write, flush, link, rename, removal, mkdir, chmod, write-open. */
function changesDisk(name: FileOpName, args: unknown[]): boolean {
  if (CHANGES_DISK.has(name)) return true;
  if (name !== "openSync") return false;
  const flags = args[1];
  return typeof flags === "number"
    ? (flags & (O_WRONLY | O_RDWR | O_CREAT)) !== 0
    : flags !== undefined && flags !== "r";
}

describe("restoreCheckpoint under injected file-system faults", () => {
  let base: string;
  let workspace: string;
  let dataDir: string;
  let templateWorkspace: string;
  let checkpointId: string;
  let before: Map<string, string>;
  let after: Map<string, string>;

  beforeAll(async () => {
    base = makeTempDir("faults");
    const fixture = await makeRestoreFixture(join(base, "run"), 4);
    ({ workspace, dataDir, checkpointId, before, after } = fixture);
    templateWorkspace = join(base, "template-workspace");
    fs.cpSync(workspace, templateWorkspace, { recursive: true });
  });

  afterAll(() => {
    removeDir(base);
  });

  /**
   * Fails the n-th counted call for n = first, first + stride, … until a restore runs without the fault
   * firing. After each: a typed SagaError or success; nothing temporary in the workspace and every entry
   * a before or an after one; after recovery (abort or rollback through a takeover) the workspace is
   * exactly before or after and the lock is free. Each attempt is its own operation in the same data
   * directory; the workspace is reset only when an attempt completed.
   */
  async function sweep(
    code: string,
    stride: number,
    count: "all" | typeof changesDisk,
  ): Promise<{ failures: number; attempts: number }> {
    let failures = 0;
    let attempts = 0;
    for (let n = 1; n < 5_000; n += stride) {
      attempts += 1;
      const faulty = failNthCall(noWaitFsync, { n, code, count });
      const operationId = `fault-${count === "all" ? "any" : "disk"}-${code}-${n}`;
      let failed = false;
      try {
        await restoreCheckpoint({
          dataDir,
          workspaceRoot: workspace,
          checkpointId,
          operationId,
          fs: faulty.ops,
        });
      } catch (error) {
        failed = true;
        failures += 1;
        expect(isSagaError(error), `call ${n}: ${String(error)}`).toBe(true);
      }
      const done = !faulty.fired();
      if (done) expect(failed).toBe(false);
      expect(strayFiles(workspace), `call ${n}`).toEqual([]);
      for (const [path, value] of snapshotTree(workspace)) {
        expect(value === before.get(path) || value === after.get(path), `call ${n}: ${path}`).toBe(true);
      }
      const recovered = await recoverRestore({
        dataDir,
        workspaceRoot: workspace,
        operationId,
        isProcessAlive: everyoneDead,
      });
      const completed = recovered.saga?.phase === "completed";
      expect(
        sameTree(snapshotTree(workspace), completed ? after : before),
        `call ${n}: ${recovered.outcome}`,
      ).toBe(true);
      expect(inspectWorkspaceLock({ dataDir, workspaceRoot: workspace }), `call ${n}`).toBeNull();
      if (completed) {
        removeDir(workspace);
        fs.cpSync(templateWorkspace, workspace, { recursive: true });
      }
      if (done) return { failures, attempts };
    }
    throw new Error("the restore never completed");
  }

  it("fails with a typed error or succeeds for every failing disk-changing call N = 1.. (EIO), and recovers to before or after", async () => {
    const { failures, attempts } = await sweep("EIO", 1, changesDisk);
    expect(attempts).toBeGreaterThan(100);
    expect(failures).toBeGreaterThan(30);
  }, 240_000);

  it("does the same when reads fail too (every call counted, on a stride)", async () => {
    const { failures } = await sweep("EIO", 41, "all");
    expect(failures).toBeGreaterThan(3);
  }, 240_000);

  it("does the same for ENOSPC, EPERM and EXDEV on a stride of disk-changing calls", async () => {
    for (const code of ["ENOSPC", "EPERM", "EXDEV"]) {
      const { failures } = await sweep(code, 29, changesDisk);
      expect(failures, code).toBeGreaterThan(1);
    }
  }, 240_000);
});
