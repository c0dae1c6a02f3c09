// A workspace lock left by a stopped workspace edit (the bot server's file write, deletion or checkpoint,
// restore-saga purpose `workspace-edit`) is not a restore: the controller says what it is and how it goes.
import { acquireWorkspaceLock, inspectWorkspaceLock, reapDeadEditLocks } from "@drydock/restore-saga";
import { afterEach, expect, it } from "vitest";
import { createRestoreRecoveryController, defaultRestorePorts, drydockCommandPrefix } from "../src/index.js";
import { createdSaga, dead, type Sandbox, sandbox } from "./helpers.js";

let box: Sandbox;
afterEach(() => box?.cleanup());

it("a stopped edit's lock is named as such (never 'another restore'), and once it is reaped the restore can be settled", async () => {
  box = sandbox();
  await createdSaga(box, "op-1");
  // A file write that was killed while it held the lock (never released; dead once probes say so).
  await acquireWorkspaceLock({
    dataDir: box.dataDir,
    workspaceRoot: box.workspace,
    transactionId: "file-write-0d7c",
    purpose: "workspace-edit",
  });
  const ports = defaultRestorePorts({
    dataDir: box.dataDir,
    workspaceRoot: box.workspace,
    isProcessAlive: dead,
  });
  const controller = createRestoreRecoveryController({
    dataDir: box.dataDir,
    workspaceRoot: box.workspace,
    isProcessAlive: dead,
    ...ports,
  });
  const blocked = await controller.preview("op-1");
  expect(blocked.actions.abort.eligible).toBe(false);
  const words = blocked.actions.abort.blockers.join("\n");
  expect(words).toContain("stopped file write, deletion or checkpoint (file-write-0d7c)");
  // The command carries this data directory, so it is pasted against the same installation.
  expect(words).toContain(`\`${drydockCommandPrefix(box.dataDir)} locks gc --yes\``);
  expect(words).not.toContain("another restore");

  const { removed } = await reapDeadEditLocks({ dataDir: box.dataDir, isProcessAlive: dead });
  expect(removed.map((owner) => owner.payload.transactionId)).toEqual(["file-write-0d7c"]);
  expect(inspectWorkspaceLock({ dataDir: box.dataDir, workspaceRoot: box.workspace })).toBeNull();
  const free = await controller.preview("op-1");
  expect(free.actions.abort.eligible).toBe(true);
});
