import * as fs from "node:fs";
import { join } from "node:path";
import { type FileOps, nodeFileOps } from "@drydock/file-lock";
import { afterEach, beforeEach, expect, it } from "vitest";
import { inspectWorkspaceLock, openCheckpointStore, restoreCheckpoint } from "../src/index.js";
import { makeTempDir, recoverRestore, rejection, removeDir, sameTree, snapshotTree } from "./helpers.js";

/**
 * Review (h-ws): a workspace file name of 226..255 bytes is legal (NAME_MAX 255) and checkpointed, but a
 * restore or rollback stages it as `.<name>.<pid>.<hex>.tmp`, ~30 bytes longer: ENAMETOOLONG after
 * `mutation_started`. When the restore removed a long-named file before failing, the rollback must
 * re-create it through the same staging name and fails every time: the workspace stays half restored and
 * the recommended recovery can never succeed. Temps are now named `.drydock.<tag>.<pid>.<hex>.tmp`, whose
 * length does not depend on the target's: the restore itself completes, and a restore stopped for another
 * reason after removing a long-named file rolls back.
 */
let base: string;
let workspace: string;
let dataDir: string;
beforeEach(() => {
  base = makeTempDir("long-names");
  workspace = join(base, "ws");
  dataDir = join(base, "data");
  fs.mkdirSync(workspace);
});
afterEach(() => removeDir(base));

/**
 * The reviewer's workspace: five small files, a 240-byte name the checkpoint holds (`last`) and one it
 * lacks (`first`, the only copy of its bytes), which the restore removes before it writes anything.
 */
async function longNamedWorkspace(): Promise<{ checkpointId: string; first: string; last: string }> {
  const first = `A${"a".repeat(239)}`;
  const last = `z${"z".repeat(239)}`;
  for (let i = 0; i < 5; i++) fs.writeFileSync(join(workspace, `m${i}.txt`), `X${i}`);
  fs.writeFileSync(join(workspace, last), "X last");
  const { checkpointId } = await openCheckpointStore({ dataDir }).createCheckpoint(workspace);
  for (let i = 0; i < 5; i++) fs.writeFileSync(join(workspace, `m${i}.txt`), `Y${i}`);
  fs.rmSync(join(workspace, last));
  fs.writeFileSync(join(workspace, first), "Y first: the only copy");
  return { checkpointId, first, last };
}

it("a restore places and removes 240-byte names (its temps are no longer than ~73 bytes)", async () => {
  const { checkpointId, first, last } = await longNamedWorkspace();
  const result = await restoreCheckpoint({ dataDir, workspaceRoot: workspace, checkpointId });
  expect(result.phase).toBe("completed");
  expect(fs.readFileSync(join(workspace, last), "utf8")).toBe("X last");
  expect(fs.existsSync(join(workspace, first))).toBe(false);
  expect(fs.readdirSync(workspace).sort()).toEqual([...[0, 1, 2, 3, 4].map((i) => `m${i}.txt`), last]);
});

it("a restore stopped by a 240-byte name can be rolled back to the workspace as it was", async () => {
  const { checkpointId, first } = await longNamedWorkspace();
  const before = snapshotTree(workspace);
  // Staging a 240-byte name no longer stops the restore (the test above), so it is stopped here by another
  // failure after `mutation_started`, once `first` is gone: the rename into m3.txt fails (EIO).
  const failing: FileOps = {
    ...nodeFileOps,
    renameSync: (from, to) => {
      if (String(to) === join(workspace, "m3.txt")) {
        throw Object.assign(new Error("EIO: i/o error, rename"), { code: "EIO" });
      }
      nodeFileOps.renameSync(from, to);
    },
  };
  const error = await rejection(
    restoreCheckpoint({ dataDir, workspaceRoot: workspace, checkpointId, fs: failing }),
  );
  expect(error.code).toBe("RECOVERY_REQUIRED");
  expect(fs.existsSync(join(workspace, first))).toBe(false);
  const operationId = error.details.operationId as string;

  // The rollback puts `first` back through the staging directory, under a temp of bounded length.
  const recovered = await recoverRestore({
    dataDir,
    workspaceRoot: workspace,
    operationId,
    isProcessAlive: () => false,
  });
  expect(recovered.outcome).toBe("rolled_back");
  expect(sameTree(snapshotTree(workspace), before)).toBe(true);
});

it("refuses, before its intent, a checkpoint holding a name longer than 255 bytes: nothing changes", async () => {
  fs.writeFileSync(join(workspace, "a.txt"), "target a");
  fs.writeFileSync(join(workspace, "long.txt"), "target long");
  const { checkpointId } = await openCheckpointStore({ dataDir }).createCheckpoint(workspace);
  // As a checkpoint made on a file system with a larger NAME_MAX would hold it.
  const manifestPath = join(dataDir, "checkpoints", "manifests", `${checkpointId}.json`);
  const manifest = JSON.parse(fs.readFileSync(manifestPath, "utf8"));
  const long = "L".repeat(256);
  for (const entry of manifest.entries) if (entry.path === "long.txt") entry.path = long;
  manifest.entries.sort((a: { path: string }, b: { path: string }) => (a.path < b.path ? -1 : 1));
  fs.writeFileSync(manifestPath, `${JSON.stringify(manifest, null, 2)}\n`);
  fs.writeFileSync(join(workspace, "a.txt"), "changed a");
  const before = snapshotTree(workspace);

  const error = await rejection(restoreCheckpoint({ dataDir, workspaceRoot: workspace, checkpointId }));
  expect(error.code).toBe("INVALID_ARGUMENT");
  expect(error.message).toContain("longer than 255 bytes");
  expect(error.message).toContain("Nothing was restored or changed");
  expect(sameTree(snapshotTree(workspace), before)).toBe(true);
  // Aborted before its intent: the lock is released, nothing waits for recovery.
  expect(inspectWorkspaceLock({ dataDir, workspaceRoot: workspace })).toBeNull();
  const recovered = await recoverRestore({
    dataDir,
    workspaceRoot: workspace,
    operationId: error.details.operationId as string,
  });
  expect(recovered.outcome).toBe("archived");
  expect(recovered.saga?.phase).toBe("aborted");
});
