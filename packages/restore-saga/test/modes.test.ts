import * as fs from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { openCheckpointStore, restoreCheckpoint } from "../src/index.js";
import { makeTempDir, removeDir, writeTree } from "./helpers.js";

let base: string;
let workspace: string;
let dataDir: string;

beforeEach(() => {
  base = makeTempDir("modes");
  workspace = join(base, "ws");
  dataDir = join(base, "data");
  fs.mkdirSync(workspace);
});

afterEach(() => {
  removeDir(base);
});

const modeOf = (path: string): string => (fs.lstatSync(join(workspace, path)).mode & 0o7777).toString(8);
const isRoot = process.getuid?.() === 0;

describe("setuid and setgid bits are neither checkpointed nor restored", () => {
  it("a setuid file a bot wrote comes back without its setuid bit, owned by whoever restores", async () => {
    writeTree(workspace, { tool: "#!/bin/sh\nid\n" });
    // Setuid *nobody*: harmless as the bot wrote it; as the restoring root's file it would not be.
    if (isRoot) fs.chownSync(join(workspace, "tool"), 65534, 65534);
    fs.chmodSync(join(workspace, "tool"), 0o4755);
    const store = openCheckpointStore({ dataDir, durable: false });
    const { checkpointId } = await store.createCheckpoint(workspace);
    fs.rmSync(join(workspace, "tool"));
    const result = await restoreCheckpoint({
      dataDir,
      workspaceRoot: workspace,
      checkpointId,
      durable: false,
    });
    expect(result.phase).toBe("completed");
    expect(modeOf("tool")).toBe("755");
    expect(fs.statSync(join(workspace, "tool")).uid).toBe(process.getuid?.());
    expect((await store.readManifest(checkpointId)).entries).toMatchObject([{ path: "tool", mode: 0o755 }]);
  });

  it("a manifest written before the bits were masked cannot set them either", async () => {
    writeTree(workspace, { tool: "binary", shared: null });
    const store = openCheckpointStore({ dataDir, durable: false });
    const { checkpointId } = await store.createCheckpoint(workspace);
    // As an older drydock wrote it: setuid+setgid on the file, setgid and sticky on the directory.
    const manifestPath = join(dataDir, "checkpoints", "manifests", `${checkpointId}.json`);
    const manifest = JSON.parse(fs.readFileSync(manifestPath, "utf8"));
    for (const entry of manifest.entries) entry.mode = entry.type === "dir" ? 0o3775 : 0o6755;
    fs.writeFileSync(manifestPath, `${JSON.stringify(manifest, null, 2)}\n`);
    expect((await store.readManifest(checkpointId)).entries.map((entry) => entry.mode)).toEqual([
      0o1775, 0o755,
    ]);

    fs.rmSync(join(workspace, "tool"));
    fs.rmdirSync(join(workspace, "shared"));
    const result = await restoreCheckpoint({
      dataDir,
      workspaceRoot: workspace,
      checkpointId,
      durable: false,
    });
    // The re-scan that proves the restore compares with the same mask: it completes.
    expect(result.phase).toBe("completed");
    expect(modeOf("tool")).toBe("755");
    expect(modeOf("shared")).toBe("1775");
  });

  it("a workspace entry that differs only in those bits is left as it is (nothing to restore)", async () => {
    writeTree(workspace, { "group-dir/a.txt": "a", tool: "binary" });
    const store = openCheckpointStore({ dataDir, durable: false });
    const { checkpointId } = await store.createCheckpoint(workspace);
    for (const [path, bit] of [
      ["group-dir", 0o2000],
      ["tool", 0o6000],
    ] as const) {
      fs.chmodSync(join(workspace, path), fs.statSync(join(workspace, path)).mode | bit);
    }
    const result = await restoreCheckpoint({
      dataDir,
      workspaceRoot: workspace,
      checkpointId,
      durable: false,
    });
    expect(result).toMatchObject({ phase: "completed", targetCount: 0 });
  });
});
