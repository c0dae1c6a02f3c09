// A rollback removes the temps an apply staging beside its targets left (EXDEV), recognised by their
// names. A user's own file that merely looks like one was there before the restore (the safety checkpoint
// holds it): it must survive.
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import { join } from "node:path";
import { expect, it } from "vitest";
import { openCheckpointStore } from "../src/index.js";
import { makeTempDir, recoverRestore, snapshotTree, writeTree } from "./helpers.js";

it("a user file named like a temp survives a rollback", async () => {
  const base = makeTempDir("tmpname");
  const workspace = join(base, "ws");
  const dataDir = join(base, "data");
  fs.mkdirSync(workspace);
  const userFile = ".notes.txt.4242.0123456789abcdef.tmp";
  writeTree(workspace, { "notes.txt": "target", "z.txt": "target z", [userFile]: "the user's own bytes" });
  const { checkpointId } = await openCheckpointStore({ dataDir, durable: false }).createCheckpoint(workspace);
  writeTree(workspace, { "notes.txt": "before", "z.txt": "before z", [userFile]: "the user's own bytes" });
  const before = snapshotTree(workspace);
  const child = spawnSync(
    process.execPath,
    [
      "--conditions=@drydock/source",
      "--import",
      "tsx",
      join(__dirname, "fixtures", "restore-child.ts"),
      dataDir,
      workspace,
      checkpointId,
      "op-1",
    ],
    {
      input: "go\n",
      encoding: "utf8",
      env: { ...process.env, DRYDOCK_CRASH_POINT: "restore.after-entry-applied#1" },
    },
  );
  expect(child.signal).toBe("SIGKILL");
  const result = await recoverRestore({
    dataDir,
    workspaceRoot: workspace,
    operationId: "op-1",
    isProcessAlive: () => {
      throw Object.assign(new Error("ESRCH"), { code: "ESRCH" });
    },
  }).catch((e) => e);
  expect(result.outcome ?? `${result.code}: ${result.message}`).toBe("rolled_back");
  expect(fs.readFileSync(join(workspace, userFile), "utf8")).toBe("the user's own bytes");
  expect(snapshotTree(workspace)).toEqual(before);
});
