// The restore staging directory lives in the data directory (`<dataDir>/restore-staging/<shard>`). A file
// in its way must stop a restore before its intent (nothing changed, aborted, the path named, the way out
// said), must not stop a rollback that has nothing to put back, and a failure there is never described as
// a change of the workspace.
import * as fs from "node:fs";
import { join } from "node:path";
import { failNthCall, nodeFileOps } from "@drydock/file-lock";
import { afterEach, beforeEach, expect, it } from "vitest";
import { inspectWorkspaceLock, restoreCheckpoint } from "../src/index.js";
import {
  everyoneDead,
  makeRestoreFixture,
  makeTempDir,
  recoverRestore,
  rejection,
  removeDir,
  sameTree,
  snapshotTree,
} from "./helpers.js";

let base: string;
let fixture: Awaited<ReturnType<typeof makeRestoreFixture>>;
let staging: string;
beforeEach(async () => {
  base = makeTempDir("staging-dir");
  fixture = await makeRestoreFixture(base, 8);
  staging = join(fixture.dataDir, "restore-staging");
});
afterEach(() => removeDir(base));

const options = (extra: Partial<Parameters<typeof restoreCheckpoint>[0]> = {}) => ({
  dataDir: fixture.dataDir,
  workspaceRoot: fixture.workspace,
  checkpointId: fixture.checkpointId,
  durable: false,
  ...extra,
});

/** The recovery an operator runs for `operationId`, its owner declared dead. */
const recoverDead = (operationId: string) =>
  recoverRestore({
    dataDir: fixture.dataDir,
    workspaceRoot: fixture.workspace,
    operationId,
    isProcessAlive: everyoneDead,
  });

/** Puts a file where the staging directory belongs, as a person or another program could. */
function blockStaging(): void {
  fs.rmSync(staging, { recursive: true, force: true });
  fs.writeFileSync(staging, "placed by hand");
}

it("a file where the staging directory belongs stops the restore before its intent: nothing changed, the path named", async () => {
  blockStaging();

  const error = await rejection(restoreCheckpoint(options({ operationId: "op-blocked" })));
  expect(error.code).toBe("CORRUPT");
  expect(error.message).toContain(`${staging} is in its way and is a file or a symlink`);
  expect(error.message).toContain("in the data directory");
  expect(error.message).toContain("Nothing was restored or changed");
  expect(error.message).toContain(`Move ${staging} aside`);
  expect(error.message).not.toContain("in the workspace failed");
  expect(sameTree(snapshotTree(fixture.workspace), fixture.before)).toBe(true);
  // Aborted: the lock is released and the saga is settled; the file is left as it is.
  expect(inspectWorkspaceLock({ dataDir: fixture.dataDir, workspaceRoot: fixture.workspace })).toBeNull();
  const settled = await recoverRestore({
    dataDir: fixture.dataDir,
    workspaceRoot: fixture.workspace,
    operationId: "op-blocked",
  });
  expect(settled.outcome).toBe("archived");
  expect(settled.saga?.phase).toBe("aborted");
  expect(fs.readFileSync(staging, "utf8")).toBe("placed by hand");

  // Moved aside as the message says, the same restore goes through.
  fs.renameSync(staging, `${staging}.aside`);
  const result = await restoreCheckpoint(options({ operationId: "op-after" }));
  expect(result.phase).toBe("completed");
  expect(sameTree(snapshotTree(fixture.workspace), fixture.after)).toBe(true);
});

it("a file at the workspace's own staging directory is named too", async () => {
  await restoreCheckpoint(options({ operationId: "op-first" }));
  const mine = join(staging, fs.readdirSync(staging)[0]!);
  fs.rmSync(mine, { recursive: true });
  fs.writeFileSync(mine, "placed by hand");
  fs.writeFileSync(join(fixture.workspace, "d0/f0.txt"), "changed");
  const before = snapshotTree(fixture.workspace);

  const error = await rejection(restoreCheckpoint(options({ operationId: "op-blocked" })));
  expect(error.code).toBe("CORRUPT");
  expect(error.message).toContain(`${mine} is a file or a symlink, not a directory`);
  expect(sameTree(snapshotTree(fixture.workspace), before)).toBe(true);
});

/** A restore that stops after `mutation_started` on its first removal (EIO), having only opened up modes. */
async function stoppedBeforeAnyChange(operationId: string): Promise<void> {
  const faulty = failNthCall(nodeFileOps, {
    n: 1,
    code: "EIO",
    count: (name, args) =>
      (name === "unlinkSync" || name === "rmdirSync") && String(args[0]).startsWith(fixture.workspace),
  });
  const error = await rejection(restoreCheckpoint(options({ operationId, fs: faulty.ops })));
  expect(faulty.fired()).toBe(true);
  expect(error.code).toBe("RECOVERY_REQUIRED");
}

it("a rollback with nothing to put back does not need the staging directory", async () => {
  // Stopped right after `mutation_started`, before any change (as the staging failure used to stop it).
  const crash = {
    point: (name: string) => {
      if (name === "restore.after-mutation-started") throw new Error("stopped before any change");
    },
  };
  const error = await rejection(restoreCheckpoint(options({ operationId: "op-untouched", crash })));
  expect(error.code).toBe("RECOVERY_REQUIRED");
  expect(sameTree(snapshotTree(fixture.workspace), fixture.before)).toBe(true);
  blockStaging();

  const recovered = await recoverDead("op-untouched");
  expect(recovered.outcome).toBe("rolled_back");
  expect(sameTree(snapshotTree(fixture.workspace), fixture.before)).toBe(true);
  expect(fs.readFileSync(staging, "utf8")).toBe("placed by hand");
});

it("nor does one that writes no file (only modes to set back)", async () => {
  // The first removal fails; by then a directory's mode had been opened up (owner rwx) for the apply.
  await stoppedBeforeAnyChange("op-modes");
  blockStaging();

  const recovered = await recoverDead("op-modes");
  expect(recovered.outcome).toBe("rolled_back");
  expect(sameTree(snapshotTree(fixture.workspace), fixture.before)).toBe(true);
});

it("a rollback that needs the staging directory names the file in its way, and succeeds once it is moved", async () => {
  // Stopped half-way: the removals are done, the first file write fails.
  const faulty = failNthCall(nodeFileOps, {
    n: 1,
    code: "EIO",
    count: (name, args) => name === "renameSync" && String(args[1]).startsWith(fixture.workspace),
  });
  const stopped = await rejection(restoreCheckpoint(options({ operationId: "op-half", fs: faulty.ops })));
  expect(stopped.code).toBe("RECOVERY_REQUIRED");
  blockStaging();
  const recover = () => recoverDead("op-half");

  const error = await rejection(recover());
  expect(error.message).toContain(`${staging} is in its way`);
  expect(error.message).toContain(`Move ${staging} aside`);
  expect(error.message).toContain("Nothing in the workspace was changed by this step");

  fs.renameSync(staging, `${staging}.aside`);
  expect((await recover()).outcome).toBe("rolled_back");
  expect(sameTree(snapshotTree(fixture.workspace), fixture.before)).toBe(true);
});

it("a staged file that fails is named in the data directory, never as a change of the workspace", async () => {
  const faulty = failNthCall(nodeFileOps, {
    n: 1,
    code: "EIO",
    // The flush of a staged temp opens it read-only first.
    count: (name, args) =>
      name === "openSync" &&
      String(args[0]).startsWith(`${staging}/`) &&
      args[1] !== undefined &&
      ((args[1] as number) & fs.constants.O_CREAT) === 0,
  });
  const error = await rejection(
    restoreCheckpoint(options({ operationId: "op-flush", fs: faulty.ops, durable: true })),
  );
  expect(faulty.fired()).toBe(true);
  expect(error.code).toBe("RECOVERY_REQUIRED");
  const cause = error.cause as Error;
  expect(cause.message).toContain("in the restore staging directory failed (EIO on");
  expect(cause.message).toContain(`${staging}/`);
  expect(cause.message).toContain("in the data directory");
  expect(cause.message).not.toContain("in the workspace failed");
});
