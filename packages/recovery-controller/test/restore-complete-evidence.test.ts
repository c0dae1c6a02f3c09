// `complete` finishes a restore killed after workspace_applied with the `completed` evidence the
// orchestrator itself would have written (restore-saga's restore.ts): the result digest over the
// operation, the target checkpoint and the poststate read back, and the workspace_applied event as the
// commit it rests on (drydock's restore has no session).
import { domainDigest } from "@drydock/restore-saga";
import { afterEach, expect, it } from "vitest";
import { createRestoreRecoveryController } from "../src/index.js";
import { checkpoint, killedRestore, type Sandbox, sandbox, writeTree } from "./helpers.js";

let box: Sandbox;
afterEach(() => box?.cleanup());

it("complete journals the orchestrator's own result digest and rests on the workspace_applied event", async () => {
  box = sandbox();
  writeTree(box.workspace, { "a.txt": "old a" });
  const target = await checkpoint(box);
  writeTree(box.workspace, { "a.txt": "new a" });
  await killedRestore(box, target, "op-evidence", "restore.after-workspace-applied");

  const recovery = createRestoreRecoveryController({ dataDir: box.dataDir, workspaceRoot: box.workspace });
  const preview = await recovery.preview("op-evidence");
  const result = await recovery.complete("op-evidence", preview.fence);
  expect(result).toMatchObject({ action: "complete", phase: "completed", archived: true });

  const saga = await box.store.loadArchived("op-evidence");
  const applied = saga.events.find((event) => event.phase === "workspace_applied");
  const completed = saga.events.at(-1);
  expect(completed?.phase).toBe("completed");
  expect(completed?.evidence).toEqual({
    recoveryAction: "resume-already-completed",
    sessionCommitDigest: applied?.hash,
    resultDigest: domainDigest("drydock-restore-result-v1", {
      operationId: "op-evidence",
      checkpointId: target,
      poststateDigest: applied?.evidence.poststateDigest,
    }),
  });
});
