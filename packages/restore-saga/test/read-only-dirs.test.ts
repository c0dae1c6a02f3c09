import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { openCheckpointStore } from "../src/index.js";
import { makeTempDir, removeDir, sameTree, snapshotTree, writeTree } from "./helpers.js";

/**
 * Root may write into a read-only directory, so the restores here run as an unprivileged user: as uid/gid
 * 65534 (nobody) when this test runs as root, or as the user running it otherwise (already unprivileged).
 */
const RESTORE_CHILD = fileURLToPath(new URL("./fixtures/restore-child.ts", import.meta.url));
const RECOVER_CHILD = fileURLToPath(new URL("./fixtures/recover-child.ts", import.meta.url));
const PACKAGE_DIR = fileURLToPath(new URL("..", import.meta.url));
const isRoot = process.getuid?.() === 0;
const NOBODY = 65534;

let base: string;
let workspace: string;
let dataDir: string;

beforeEach(() => {
  base = makeTempDir("ro-dirs");
  workspace = join(base, "ws");
  dataDir = join(base, "data");
  fs.mkdirSync(workspace);
});

afterEach(() => {
  // Directories left read-only must be made writable again before a non-root user can remove them.
  const writable = (dir: string): void => {
    fs.chmodSync(dir, 0o700);
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      if (entry.isDirectory()) writable(join(dir, entry.name));
    }
  };
  writable(base);
  removeDir(base);
});

/** Hands everything under `path` to the unprivileged user (root only; otherwise it is already theirs). */
function handOver(path: string): void {
  if (!isRoot) return;
  fs.lchownSync(path, NOBODY, NOBODY);
  if (fs.lstatSync(path).isDirectory()) {
    for (const name of fs.readdirSync(path)) handOver(join(path, name));
  }
}

function unprivileged(
  script: string,
  args: string[],
  extra: { input?: string; env?: NodeJS.ProcessEnv } = {},
) {
  const result = spawnSync(
    process.execPath,
    ["--conditions=@drydock/source", "--import", "tsx", script, ...args],
    {
      cwd: PACKAGE_DIR,
      encoding: "utf8",
      input: extra.input ?? "",
      env: { ...process.env, ...extra.env },
      ...(isRoot ? { uid: NOBODY, gid: NOBODY } : {}),
    },
  );
  return { ...result, stdout: result.stdout ?? "", stderr: result.stderr ?? "" };
}

/** Runs a restore as the unprivileged user, SIGKILLed at `crashPoint` if given; returns its last line. */
function restoreUnprivileged(checkpointId: string, operationId: string, crashPoint = ""): string {
  const child = unprivileged(RESTORE_CHILD, [dataDir, workspace, checkpointId, operationId], {
    input: "go\n",
    env: { DRYDOCK_CRASH_POINT: crashPoint },
  });
  if (crashPoint !== "") {
    expect(child.signal, child.stdout + child.stderr).toBe("SIGKILL");
    return "killed";
  }
  const last = child.stdout.trim().split("\n").at(-1) ?? "";
  expect(last, child.stderr).toMatch(/^done /);
  return last;
}

function recoverUnprivileged(operationId: string): unknown {
  const child = unprivileged(RECOVER_CHILD, [dataDir, workspace, operationId]);
  return JSON.parse(child.stdout.trim().split("\n").at(-1) ?? "null");
}

async function checkpoint(): Promise<string> {
  const { checkpointId } = await openCheckpointStore({ dataDir, durable: false }).createCheckpoint(workspace);
  return checkpointId;
}

const mode = (path: string): string => (fs.lstatSync(join(workspace, path)).mode & 0o7777).toString(8);

describe(`read-only directories, restored by an unprivileged process (${isRoot ? `uid ${NOBODY}` : "this user"})`, () => {
  it("restores a read-only directory the workspace no longer has, with its files, deepest modes last", async () => {
    writeTree(workspace, { "ro/a.txt": "checkpointed", "ro/sub/b.txt": "deeper" });
    fs.chmodSync(join(workspace, "ro", "sub"), 0o500);
    fs.chmodSync(join(workspace, "ro"), 0o555);
    const checkpointId = await checkpoint();
    const wanted = snapshotTree(workspace);
    fs.chmodSync(join(workspace, "ro", "sub"), 0o755);
    fs.chmodSync(join(workspace, "ro"), 0o755);
    fs.rmSync(join(workspace, "ro"), { recursive: true });
    handOver(base);

    restoreUnprivileged(checkpointId, "op-ro-new");
    expect(sameTree(snapshotTree(workspace), wanted)).toBe(true);
    expect([mode("ro"), mode("ro/sub")]).toEqual(["555", "500"]);
  });

  it("writes into a directory that becomes read-only only once the files are in", async () => {
    writeTree(workspace, { "ro/a.txt": "v1" });
    fs.chmodSync(join(workspace, "ro"), 0o555);
    const checkpointId = await checkpoint();
    const wanted = snapshotTree(workspace);
    fs.chmodSync(join(workspace, "ro"), 0o755);
    fs.writeFileSync(join(workspace, "ro", "a.txt"), "v2");
    handOver(base);

    restoreUnprivileged(checkpointId, "op-ro-kept");
    expect(sameTree(snapshotTree(workspace), wanted)).toBe(true);
  });

  it("removes a read-only tree the checkpoint does not hold (a Go module cache, say)", async () => {
    writeTree(workspace, { "keep.txt": "k" });
    const checkpointId = await checkpoint();
    const wanted = snapshotTree(workspace);
    writeTree(workspace, { "mod/x@v1/a.go": "package x", "mod/x@v1/sub/b.go": "package sub" });
    for (const dir of ["mod/x@v1/sub", "mod/x@v1", "mod"]) fs.chmodSync(join(workspace, dir), 0o555);
    handOver(base);

    restoreUnprivileged(checkpointId, "op-ro-remove");
    expect(sameTree(snapshotTree(workspace), wanted)).toBe(true);
  });

  it.each([
    ["once every change and final mode is in place", "restore.after-workspace-applied"],
    ["half-way through the changes", "restore.after-entry-applied#3"],
  ])("rolls back a restore killed %s, read-only directories included", async (_, crashPoint) => {
    // Before: a read-only tree the restore removes. After (the checkpoint): another one it creates.
    writeTree(workspace, { "new/a.txt": "a", "new/sub/b.txt": "b" });
    fs.chmodSync(join(workspace, "new", "sub"), 0o555);
    fs.chmodSync(join(workspace, "new"), 0o555);
    const checkpointId = await checkpoint();
    fs.chmodSync(join(workspace, "new", "sub"), 0o755);
    fs.chmodSync(join(workspace, "new"), 0o755);
    fs.rmSync(join(workspace, "new"), { recursive: true });
    writeTree(workspace, { "old/c.txt": "c", "old/sub/d.txt": "d" });
    fs.chmodSync(join(workspace, "old", "sub"), 0o555);
    fs.chmodSync(join(workspace, "old"), 0o555);
    const before = snapshotTree(workspace);
    handOver(base);

    restoreUnprivileged(checkpointId, "op-ro-killed", crashPoint);
    expect(recoverUnprivileged("op-ro-killed")).toEqual({ outcome: "rolled_back" });
    expect(sameTree(snapshotTree(workspace), before)).toBe(true);
  });
});
