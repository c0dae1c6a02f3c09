// When a restore fails and its saga cannot be read right then, what it says and what it keeps. A saga that
// could not be read just now (LOCK_FAILED) is read again, so a failure before the intent is still aborted
// with nothing kept; one that stays unreadable keeps the lock (fail closed) and says its phase is unknown,
// never "failed after its intent".
import * as fs from "node:fs";
import { join } from "node:path";
import { type FileOps, nodeFileOps } from "@drydock/file-lock";
import { afterEach, beforeEach, expect, it } from "vitest";
import { inspectWorkspaceLock, restoreCheckpoint } from "../src/index.js";
import { makeRestoreFixture, makeTempDir, rejection, removeDir, sameTree, snapshotTree } from "./helpers.js";

let base: string;
let fixture: Awaited<ReturnType<typeof makeRestoreFixture>>;
let staging: string;
beforeEach(async () => {
  base = makeTempDir("settle-unreadable");
  fixture = await makeRestoreFixture(base, 6);
  staging = join(fixture.dataDir, "restore-staging");
  // A failure before the intent: a file where the staging directory belongs.
  fs.rmSync(staging, { recursive: true, force: true });
  fs.writeFileSync(staging, "placed by hand");
});
afterEach(() => removeDir(base));

/**
 * Once the staging failure happened, listing the saga's directory fails with `code` `times` times (EMFILE:
 * the process is out of descriptors just now; EIO: the disk fails).
 */
function sagaUnreadableAfterFailure(code: string, times: number): FileOps {
  let failed = false;
  let left = times;
  return {
    ...nodeFileOps,
    mkdirSync: ((path: fs.PathLike, options?: fs.MakeDirectoryOptions) => {
      try {
        return nodeFileOps.mkdirSync(path, options);
      } catch (error) {
        if (String(path).startsWith(staging)) failed = true;
        throw error;
      }
    }) as FileOps["mkdirSync"],
    readdirSync: ((path: fs.PathLike, options?: unknown) => {
      if (failed && left > 0 && /\/restore-sagas\/workspace-[0-9a-f]+\/op-x$/.test(String(path))) {
        left -= 1;
        throw Object.assign(new Error(`${code}: injected, scandir '${String(path)}'`), {
          code,
          path: String(path),
        });
      }
      return (nodeFileOps.readdirSync as (p: fs.PathLike, o?: unknown) => string[])(path, options);
    }) as FileOps["readdirSync"],
  };
}

const options = (ops: FileOps) => ({
  dataDir: fixture.dataDir,
  workspaceRoot: fixture.workspace,
  checkpointId: fixture.checkpointId,
  operationId: "op-x",
  durable: false,
  fs: ops,
});

it("reads a saga that was busy just now again, and still aborts a failure before the intent", async () => {
  const error = await rejection(restoreCheckpoint(options(sagaUnreadableAfterFailure("EMFILE", 2))));
  expect(error.code).toBe("CORRUPT");
  expect(error.message).toContain("Nothing was restored or changed");
  expect(inspectWorkspaceLock({ dataDir: fixture.dataDir, workspaceRoot: fixture.workspace })).toBeNull();
  expect(sameTree(snapshotTree(fixture.workspace), fixture.before)).toBe(true);
});

it("keeps the lock and says the phase is unknown when the saga stays unreadable", async () => {
  const error = await rejection(restoreCheckpoint(options(sagaUnreadableAfterFailure("EIO", 1_000))));
  expect(error.code).toBe("RECOVERY_REQUIRED");
  expect(error.details.workspaceLockRetained).toBe(true);
  expect(error.details.phase).toBeNull();
  expect(error.message).toContain("its saga could not be read afterwards");
  expect(error.message).toContain("so its phase is unknown");
  expect(error.message).toContain("drydock restores show op-x");
  expect(error.message).not.toContain("failed after its intent");
  // Fail closed: the lock stays for a fenced recovery; the workspace is untouched.
  expect(inspectWorkspaceLock({ dataDir: fixture.dataDir, workspaceRoot: fixture.workspace })).not.toBeNull();
  expect(sameTree(snapshotTree(fixture.workspace), fixture.before)).toBe(true);
});
