// Two processes taking turns on one workspace: a lock that was held when an acquire tried it can be gone
// when the acquire reads its owner a moment later. That is a busy workspace (a wait), never LOCK_FAILED
// ("inspect the lock file"): the acquire looks again, and answers WORKSPACE_LOCKED if it stays that busy.
import * as fs from "node:fs";
import { join } from "node:path";
import { type FileOps, nodeFileOps } from "@drydock/file-lock";
import { afterEach, beforeEach, expect, it } from "vitest";
import { acquireWorkspaceLock, workspaceLockPath } from "../src/index.js";
import { makeTempDir, rejection, removeDir } from "./helpers.js";

let base: string;
let dataDir: string;
let workspace: string;
beforeEach(() => {
  base = makeTempDir("lock-vanished");
  dataDir = join(base, "data");
  workspace = join(base, "ws");
  fs.mkdirSync(workspace);
});
afterEach(() => removeDir(base));

/** Every open of `path` for reading, through `onOpen` first (which may change what the open finds). */
function watchingOpens(path: string, onOpen: (count: number) => void): FileOps {
  let count = 0;
  return {
    ...nodeFileOps,
    openSync: ((target: fs.PathLike, flags: fs.OpenMode, mode?: fs.Mode | null) => {
      if (String(target) === path && typeof flags === "number" && (flags & fs.constants.O_CREAT) === 0) {
        count += 1;
        onOpen(count);
      }
      return nodeFileOps.openSync(target, flags, mode);
    }) as FileOps["openSync"],
  };
}

it("takes the lock when its holder released it between the attempt and the owner's read", async () => {
  const holder = await acquireWorkspaceLock({ dataDir, workspaceRoot: workspace, transactionId: "holder" });
  const path = workspaceLockPath(dataDir, fs.realpathSync(workspace));
  // The attempt reads the holder's owner (open 1); the holder lets go before the next read (open 2).
  const ops = watchingOpens(path, (count) => {
    if (count === 2) holder.release();
  });
  const held = await acquireWorkspaceLock({
    dataDir,
    workspaceRoot: workspace,
    transactionId: "edit",
    waitMs: 0,
    fs: ops,
  });
  expect(held.owner.payload.transactionId).toBe("edit");
  held.release();
});

it("answers WORKSPACE_LOCKED (a wait), not LOCK_FAILED, when the lock keeps vanishing between attempt and read", async () => {
  const holder = await acquireWorkspaceLock({ dataDir, workspaceRoot: workspace, transactionId: "holder" });
  const path = workspaceLockPath(dataDir, fs.realpathSync(workspace));
  // Every attempt sees the holder (odd opens); every read right after finds no lock (even opens): as if
  // the holder released it and took it again between each two looks.
  const real = nodeFileOps.openSync;
  let count = 0;
  const ops: FileOps = {
    ...nodeFileOps,
    openSync: ((target: fs.PathLike, flags: fs.OpenMode, mode?: fs.Mode | null) => {
      if (String(target) === path && typeof flags === "number" && (flags & fs.constants.O_CREAT) === 0) {
        count += 1;
        if (count % 2 === 0) {
          throw Object.assign(new Error(`ENOENT: no such file or directory, open '${path}'`), {
            code: "ENOENT",
            path,
          });
        }
      }
      return real(target, flags, mode);
    }) as FileOps["openSync"],
  };
  const error = await rejection(
    acquireWorkspaceLock({ dataDir, workspaceRoot: workspace, transactionId: "edit", waitMs: 0, fs: ops }),
  );
  expect(error.code).toBe("WORKSPACE_LOCKED");
  expect(error.details.ownerOperationId).toBe("holder");
  expect(error.message).not.toMatch(/inspect the lock file/);
  holder.release();
});
