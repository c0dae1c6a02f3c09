// The temporary names this package writes: `.drydock.<32 hex tag of the target>.<pid>.<16 hex>.tmp`, whose
// length does not depend on the target's (a 255-byte target can be staged), and the names earlier
// versions wrote (`.<target>.<pid>.<16 hex>.tmp`). Whatever recognises and sweeps temps recognises both:
// a temp is never promoted, and what a dead writer left is swept (staging directory, blob directories).
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { openCheckpointStore, restoreCheckpoint } from "../src/index.js";
import { isTempFor, isTempName, tempNameFor } from "../src/internal/files.js";
import { makeRestoreFixture, makeTempDir, removeDir, writeTree } from "./helpers.js";

const LEGACY = (target: string, pid = 4242) => `.${target}.${pid}.0123456789abcdef.tmp`;
const tag = (target: string) => createHash("sha256").update(target, "utf8").digest("hex").slice(0, 32);
const CURRENT = (target: string, pid = 4242) => `.drydock.${tag(target)}.${pid}.0123456789abcdef.tmp`;

describe("temp names", () => {
  it("are at most 73 bytes whatever the target's length, and recognised as the target's", () => {
    for (const target of ["a", "f1.txt", "é".repeat(127), "z".repeat(255)]) {
      const name = tempNameFor(target);
      expect(Buffer.byteLength(name)).toBeLessThanOrEqual(73);
      expect(name).toMatch(/^\.drydock\.[0-9a-f]{32}\.[1-9][0-9]*\.[0-9a-f]{16}\.tmp$/);
      expect(isTempName(name)).toBe(true);
      expect(isTempFor(name, target)).toBe(true);
      expect(isTempFor(name, `${target}x`)).toBe(false);
    }
    expect(tempNameFor("a")).not.toBe(tempNameFor("a"));
  });

  it("of earlier versions are still recognised, and as their target's", () => {
    expect(isTempName(LEGACY("f1.txt"))).toBe(true);
    expect(isTempFor(LEGACY("f1.txt"), "f1.txt")).toBe(true);
    expect(isTempFor(LEGACY("f1.txt"), "f2.txt")).toBe(false);
    for (const other of [
      "f1.txt",
      ".f1.txt.tmp",
      "x.tmp",
      ".f1.txt.0.0123456789abcdef.tmp",
      CURRENT("a").slice(1),
    ]) {
      expect(isTempName(other), other).toBe(false);
    }
  });
});

describe("sweeping temps of both forms", () => {
  let base: string;
  beforeEach(() => {
    base = makeTempDir("temp-names");
  });
  afterEach(() => removeDir(base));

  it("a restore sweeps what a dead apply staged for this workspace, in either form, and nothing else", async () => {
    const fixture = await makeRestoreFixture(base, 6);
    const options = { dataDir: fixture.dataDir, workspaceRoot: fixture.workspace };
    await restoreCheckpoint({ ...options, checkpointId: fixture.checkpointId, operationId: "op-first" });
    const staging = join(fixture.dataDir, "restore-staging");
    const mine = join(staging, fs.readdirSync(staging)[0]!);
    const long = "q".repeat(255);
    for (const name of [CURRENT("f1.txt"), CURRENT(long), LEGACY("f1.txt")]) {
      fs.writeFileSync(join(mine, name), "half a file");
    }
    fs.writeFileSync(join(mine, "not-a-temp"), "kept");
    writeTree(fixture.workspace, { "changed.txt": "changed" });

    await restoreCheckpoint({ ...options, checkpointId: fixture.checkpointId, operationId: "op-second" });

    expect(fs.readdirSync(mine)).toEqual(["not-a-temp"]);
  });

  it("a blob temp of either form a killed capture left long ago is removed, a fresh one is not", async () => {
    const workspace = join(base, "ws");
    const dataDir = join(base, "data");
    fs.mkdirSync(workspace);
    fs.writeFileSync(join(workspace, "a.txt"), "a");
    await openCheckpointStore({ dataDir }).createCheckpoint(workspace);
    fs.writeFileSync(join(workspace, "new.txt"), "brand new");
    const sha = createHash("sha256").update("brand new").digest("hex");
    const blobDir = join(dataDir, "checkpoints", "blobs", sha.slice(0, 2));
    fs.mkdirSync(blobDir, { recursive: true });
    const stale = [join(blobDir, CURRENT(sha, 4242)), join(blobDir, LEGACY(sha, 4244))];
    const fresh = join(blobDir, CURRENT(sha, 4243));
    for (const path of [...stale, fresh]) fs.writeFileSync(path, "half");
    const hourAgo = new Date(Date.now() - 60 * 60 * 1000);
    for (const path of stale) fs.utimesSync(path, hourAgo, hourAgo);

    await openCheckpointStore({ dataDir }).createCheckpoint(workspace);

    expect(stale.map((path) => fs.existsSync(path))).toEqual([false, false]);
    expect(fs.existsSync(fresh)).toBe(true);
  });
});
