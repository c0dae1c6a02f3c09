/**
 * `CheckpointStore.importCheckpoint` (storage migrate out of postgres): a checkpoint taken in one store is
 * written into another under its original id and createdAt, then restored there; a re-import is a no-op, a
 * different checkpoint under the same id and a damaged blob are refused with nothing written.
 */
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type CheckpointImport, openCheckpointStore, restoreCheckpoint } from "../src/index.js";
import { makeTempDir, removeDir, writeTree } from "./helpers.js";

let base: string;
beforeEach(() => {
  base = makeTempDir("ckpt-import");
});
afterEach(() => removeDir(base));

/** A checkpoint taken in `<base>/src-data` of a workspace, as an import of `<base>/ws2` in `<base>/data`. */
async function exported(): Promise<CheckpointImport> {
  const srcData = join(base, "src-data");
  const ws = join(base, "ws1");
  writeTree(ws, { "a.txt": "alpha", "dir/b.txt": "beta", "dir/sub/c.txt": "alpha" });
  fs.chmodSync(join(ws, "a.txt"), 0o640);
  const source = openCheckpointStore({ dataDir: srcData, durable: false, now: () => 1_700_000_000_123 });
  const { checkpointId } = await source.createCheckpoint(ws);
  const { manifest } = source.readVerifiedManifest(checkpointId);
  const blobs = new Map<string, Uint8Array>();
  const files: CheckpointImport["files"] = [];
  for (const entry of manifest.entries) {
    if (entry.type !== "file") continue;
    blobs.set(entry.sha256, source.readBlob(entry));
    files.push({ path: entry.path, size: entry.size, mode: entry.mode, sha256: entry.sha256 });
  }
  const root = join(base, "ws2");
  writeTree(root, { "a.txt": "changed since" });
  return { checkpointId, workspaceRoot: root, createdAt: Date.parse(manifest.createdAt), files, blobs };
}

describe("importCheckpoint", () => {
  it("writes the checkpoint under its original id and createdAt, and it restores", async () => {
    const input = await exported();
    const dataDir = join(base, "data");
    const store = openCheckpointStore({ dataDir });
    expect(await store.importCheckpoint(input)).toEqual({
      checkpointId: input.checkpointId,
      outcome: "imported",
    });
    const listed = await store.listCheckpoints(input.workspaceRoot);
    expect(listed.map((c) => [c.checkpointId, c.createdAt])).toEqual([
      [input.checkpointId, new Date(1_700_000_000_123).toISOString()],
    ]);
    const { manifest } = store.readVerifiedManifest(input.checkpointId);
    expect(manifest.entries.filter((e) => e.type === "file")).toEqual(
      input.files.map((f) => ({ type: "file", ...f })),
    );
    await restoreCheckpoint({
      dataDir,
      workspaceRoot: input.workspaceRoot,
      checkpointId: input.checkpointId,
    });
    expect(fs.readFileSync(join(input.workspaceRoot, "a.txt"), "utf8")).toBe("alpha");
    expect(fs.readFileSync(join(input.workspaceRoot, "dir/sub/c.txt"), "utf8")).toBe("alpha");
    expect(fs.statSync(join(input.workspaceRoot, "a.txt")).mode & 0o777).toBe(0o640);
    // Idempotent: the same checkpoint again changes nothing.
    const manifestPath = join(dataDir, "checkpoints", "manifests", `${input.checkpointId}.json`);
    const before = fs.readFileSync(manifestPath);
    expect(await store.importCheckpoint(input)).toMatchObject({ outcome: "unchanged" });
    expect(fs.readFileSync(manifestPath)).toEqual(before);
  });

  it("refuses a different checkpoint under the same id, leaving the stored one as it is", async () => {
    const input = await exported();
    const dataDir = join(base, "data");
    const store = openCheckpointStore({ dataDir });
    await store.importCheckpoint(input);
    const manifestPath = join(dataDir, "checkpoints", "manifests", `${input.checkpointId}.json`);
    const before = fs.readFileSync(manifestPath);
    await expect(store.importCheckpoint({ ...input, createdAt: input.createdAt + 1 })).rejects.toMatchObject({
      code: "ALREADY_EXISTS",
      message: expect.stringContaining("nothing was changed"),
    });
    await expect(store.importCheckpoint({ ...input, files: input.files.slice(1) })).rejects.toMatchObject({
      code: "ALREADY_EXISTS",
    });
    expect(fs.readFileSync(manifestPath)).toEqual(before);
  });

  it("refuses a blob that does not hash to its name, writing nothing", async () => {
    const input = await exported();
    const dataDir = join(base, "data");
    const blobs = new Map(input.blobs);
    const victim = input.files[1] as CheckpointImport["files"][number];
    const damaged = Buffer.from(blobs.get(victim.sha256) as Uint8Array);
    damaged[0] = (damaged[0] as number) ^ 0xff;
    expect(createHash("sha256").update(damaged).digest("hex")).not.toBe(victim.sha256);
    blobs.set(victim.sha256, damaged);
    await expect(
      openCheckpointStore({ dataDir }).importCheckpoint({ ...input, blobs }),
    ).rejects.toMatchObject({ code: "INVALID_ARGUMENT", message: expect.stringContaining(victim.path) });
    blobs.delete(victim.sha256);
    await expect(
      openCheckpointStore({ dataDir }).importCheckpoint({ ...input, blobs }),
    ).rejects.toMatchObject({ code: "INVALID_ARGUMENT" });
    expect(fs.existsSync(join(dataDir, "checkpoints"))).toBe(false);
  });
});
