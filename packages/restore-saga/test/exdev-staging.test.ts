import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { rollbackBlockers } from "../src/index.js";
import {
  everyoneDead,
  makeRestoreFixture,
  makeTempDir,
  recoverRestore,
  removeDir,
  sameTree,
  snapshotTree,
  strayFiles,
} from "./helpers.js";

const FIXTURE = fileURLToPath(new URL("./fixtures/exdev-restore-child.ts", import.meta.url));
const PACKAGE_DIR = fileURLToPath(new URL("..", import.meta.url));

let base: string;
let fixture: Awaited<ReturnType<typeof makeRestoreFixture>>;

beforeEach(async () => {
  base = makeTempDir("exdev");
  fixture = await makeRestoreFixture(base, 24);
});

afterEach(() => {
  removeDir(base);
});

/** The name a temp for `target` has (`.drydock.<tag>.<pid>.<16 hex>.tmp`), as a pattern. */
function tempOf(target: string): RegExp {
  const tag = createHash("sha256").update(target, "utf8").digest("hex").slice(0, 32);
  return new RegExp(`^\\.drydock\\.${tag}\\.\\d+\\.[0-9a-f]{16}\\.tmp$`);
}

/** Runs a restore that stages beside its targets (EXDEV) and SIGKILLs itself at `killAt`. */
function killedRestore(operationId: string, killAt: string): void {
  const child = spawnSync(
    process.execPath,
    [
      "--conditions=@drydock/source",
      "--import",
      "tsx",
      FIXTURE,
      fixture.dataDir,
      fixture.workspace,
      fixture.checkpointId,
      operationId,
      killAt,
    ],
    { cwd: PACKAGE_DIR, encoding: "utf8" },
  );
  expect(child.signal, child.stderr).toBe("SIGKILL");
}

describe("a restore staging beside its targets (staging on another file system) killed mid-apply", () => {
  it("leaves temps beside its targets that the rollback removes: the workspace is exactly as before", async () => {
    killedRestore("op-exdev", "entry#10");
    const left = strayFiles(fixture.workspace);
    // Flushes run several at a time behind the writes, so staged temps are waiting beside their targets.
    expect(left.length).toBeGreaterThan(0);
    // Each named for one of the files it was staged for (f<n>.txt beside it), whatever that name's length.
    const targets = Array.from({ length: 24 }, (_, i) => tempOf(`f${i}.txt`));
    expect(
      left.every((path) => targets.some((temp) => temp.test(path.slice(path.lastIndexOf("/") + 1)))),
    ).toBe(true);

    const recovered = await recoverRestore({
      dataDir: fixture.dataDir,
      workspaceRoot: fixture.workspace,
      operationId: "op-exdev",
      isProcessAlive: everyoneDead,
    });
    expect(recovered.outcome).toBe("rolled_back");
    expect(strayFiles(fixture.workspace)).toEqual([]);
    expect(sameTree(snapshotTree(fixture.workspace), fixture.before)).toBe(true);
  });

  it("removes a temp left inside a directory the restore created (not a blocker, and not touched by a preview)", async () => {
    killedRestore("op-exdev-new-dir", "rename:new-dir/inside.txt");
    const left = strayFiles(fixture.workspace);
    const inside = tempOf("inside.txt");
    expect(left.some((path) => path.startsWith("new-dir/") && inside.test(path.slice(8)))).toBe(true);

    // The preview is read-only: no blocker, and the temps are still there afterwards.
    const options = { dataDir: fixture.dataDir, workspaceRoot: fixture.workspace };
    expect(await rollbackBlockers({ ...options, operationId: "op-exdev-new-dir" })).toEqual([]);
    expect(strayFiles(fixture.workspace)).toEqual(left);

    const recovered = await recoverRestore({
      ...options,
      operationId: "op-exdev-new-dir",
      isProcessAlive: everyoneDead,
    });
    expect(recovered.outcome).toBe("rolled_back");
    expect(strayFiles(fixture.workspace)).toEqual([]);
    expect(sameTree(snapshotTree(fixture.workspace), fixture.before)).toBe(true);
  });
});
