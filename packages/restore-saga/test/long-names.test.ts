import * as fs from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, expect, it } from "vitest";
import { openCheckpointStore, restoreCheckpoint } from "../src/index.js";
import { makeTempDir, recoverRestore, rejection, removeDir, sameTree, snapshotTree } from "./helpers.js";

/**
 * Review (h-ws): a workspace file name of 226..255 bytes is legal (NAME_MAX 255) and checkpointed, but a
 * restore or rollback stages it as `.<name>.<pid>.<hex>.tmp`, ~30 bytes longer: ENAMETOOLONG after
 * `mutation_started`. When the restore removed a long-named file before failing, the rollback must
 * re-create it through the same staging name and fails every time: the workspace stays half restored and
 * the recommended recovery can never succeed.
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

it("a restore stopped by a 240-byte name can be rolled back to the workspace as it was", async () => {
  const first = `A${"a".repeat(239)}`;
  const last = `z${"z".repeat(239)}`;
  for (let i = 0; i < 5; i++) fs.writeFileSync(join(workspace, `m${i}.txt`), `X${i}`);
  fs.writeFileSync(join(workspace, last), "X last");
  const checkpoint = openCheckpointStore({ dataDir }).createCheckpoint(workspace);
  const { checkpointId } = await checkpoint;
  for (let i = 0; i < 5; i++) fs.writeFileSync(join(workspace, `m${i}.txt`), `Y${i}`);
  fs.rmSync(join(workspace, last));
  fs.writeFileSync(join(workspace, first), "Y first: the only copy");
  const before = snapshotTree(workspace);

  const error = await rejection(restoreCheckpoint({ dataDir, workspaceRoot: workspace, checkpointId }));
  expect(error.code).toBe("RECOVERY_REQUIRED");
  const operationId = error.details.operationId as string;

  // The recovery the controller recommends (its owner, this process, counted dead as after a restart).
  const recovered = await recoverRestore({
    dataDir,
    workspaceRoot: workspace,
    operationId,
    isProcessAlive: () => false,
  });
  expect(recovered.outcome).toBe("rolled_back");
  expect(sameTree(snapshotTree(workspace), before)).toBe(true);
});
