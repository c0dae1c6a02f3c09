// A restore an older version (which still recorded setuid/setgid bits in manifests) was stopped in, after
// mutation_started, must still roll back after the upgrade. Its intent committed to a plan computed from the
// modes as recorded; the new code masks those bits, so it must prove the plan from the recorded modes.
// The older version's in-flight saga is built here with the store, exactly as it would have written it.
import * as fs from "node:fs";
import { join } from "node:path";
import { expect, it } from "vitest";
import { acquireWorkspaceLock, openCheckpointStore } from "../src/index.js";
import { planFromScan } from "../src/internal/apply.js";
import { domainDigest } from "../src/internal/canonical.js";
import { makeTempDir, recoverRestore, sagaStoreFor, snapshotTree, writeTree } from "./helpers.js";

const manifestFile = (dataDir: string, id: string): string =>
  join(dataDir, "checkpoints", "manifests", `${id}.json`);

/** Puts the setgid bit back on `dir` in a manifest, as the older version recorded it. */
function recordSetgid(dataDir: string, id: string, dir: string): void {
  const path = manifestFile(dataDir, id);
  const manifest = JSON.parse(fs.readFileSync(path, "utf8"));
  for (const entry of manifest.entries) if (entry.path === dir) entry.mode |= 0o2000;
  fs.writeFileSync(path, `${JSON.stringify(manifest, null, 2)}\n`);
}

it("rolls back a restore an older version stopped in, over a setgid directory", async () => {
  const base = makeTempDir("setid-upgrade");
  const workspace = join(base, "ws");
  const dataDir = join(base, "data");
  fs.mkdirSync(workspace);
  const checkpoints = openCheckpointStore({ dataDir, durable: false });
  writeTree(workspace, { "shared/a.txt": "target a", "shared/b.txt": "target b", "c.txt": "target c" });
  fs.chmodSync(join(workspace, "shared"), 0o2775);
  const target = await checkpoints.createCheckpoint(workspace);
  recordSetgid(dataDir, target.checkpointId, "shared");
  writeTree(workspace, { "shared/a.txt": "before a", "shared/b.txt": "before b", "c.txt": "before c" });
  const before = snapshotTree(workspace);
  const safety = await checkpoints.createCheckpoint(workspace);
  recordSetgid(dataDir, safety.checkpointId, "shared");
  const targetRead = checkpoints.readVerifiedManifest(target.checkpointId);
  const safetyRead = checkpoints.readVerifiedManifest(safety.checkpointId);
  expect(targetRead.recordedEntries).toBeDefined();
  // The plan as the older version computed it: from the modes as recorded.
  const plan = planFromScan(safetyRead.recordedEntries ?? [], targetRead.recordedEntries ?? []);

  const store = sagaStoreFor(dataDir, workspace);
  const operationId = "op-old";
  let saga = await store.create(operationId, {
    kind: "checkpoint-restore",
    checkpointId: target.checkpointId,
    checkpointManifestDigest: targetRead.manifestDigest,
    actorPid: process.pid,
  });
  const step = async (phase: string, evidence: Record<string, unknown>) => {
    saga = await store.advance(operationId, {
      expectedSeq: saga.seq,
      expectedHash: saga.headHash,
      phase: phase as never,
      evidence,
    });
  };
  const lock = await acquireWorkspaceLock({ dataDir, workspaceRoot: workspace, transactionId: operationId });
  await step("locked", { workspaceLockOwner: lock.owner, lockOwnerDigest: lock.ownerDigest });
  await step("prepared", { prestateDigest: plan.prestateDigest, targetCount: plan.ops.length });
  await step("intent_committed", {
    intentCommitDigest: domainDigest("drydock-restore-intent-v1", {
      operationId,
      checkpointId: target.checkpointId,
      checkpointManifestDigest: targetRead.manifestDigest,
      planDigest: plan.planDigest,
    }),
    authority: "operation",
  });
  await step("safety_ready", {
    safetyCheckpointId: safety.checkpointId,
    safetyManifestDigest: safetyRead.manifestDigest,
    coverage: "full",
  });
  await step("mutation_started", { targetCount: plan.ops.length, coverage: "full" });
  // The older version died after its first write: the lock stays with a process judged dead below.
  fs.writeFileSync(join(workspace, "c.txt"), "target c");

  const result = await recoverRestore({
    dataDir,
    workspaceRoot: workspace,
    operationId,
    isProcessAlive: () => {
      throw Object.assign(new Error("ESRCH"), { code: "ESRCH" });
    },
  }).catch((error: unknown) => error);
  expect((result as { outcome?: string }).outcome ?? String(result)).toBe("rolled_back");
  expect(snapshotTree(workspace)).toEqual(before);
  expect(fs.statSync(join(workspace, "shared")).mode & 0o7777).toBe(0o2775);
});
