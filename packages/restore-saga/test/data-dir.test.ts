import * as fs from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { openCheckpointStore, restoreCheckpoint } from "../src/index.js";
import { makeTempDir, rejection, removeDir, sameTree, snapshotTree, writeTree } from "./helpers.js";

let base: string;
let workspace: string;

beforeEach(() => {
  base = makeTempDir("data-dir");
  workspace = join(base, "ws");
  writeTree(workspace, { "a.txt": "v1", ".drydock": null });
});

afterEach(() => {
  removeDir(base);
});

const INSIDE = /^The data directory .* must not be inside the workspace/;

describe("a data directory reached through a symlink into the workspace", () => {
  it("is refused by a checkpoint, which writes nothing there", async () => {
    // <base>/data -> <ws>/.drydock: the path looks outside the workspace, the directory is inside it.
    fs.symlinkSync(join(workspace, ".drydock"), join(base, "data"));
    const error = await rejection(
      openCheckpointStore({ dataDir: join(base, "data"), durable: false }).createCheckpoint(workspace),
    );
    expect(error.code).toBe("INVALID_ARGUMENT");
    expect(error.message).toMatch(INSIDE);
    expect(fs.readdirSync(join(workspace, ".drydock"))).toEqual([]);
  });

  it("is refused by a restore before it journals or changes anything", async () => {
    // A checkpoint taken with the data directory outside; then the data directory moves into the
    // workspace and the old path becomes a symlink to it.
    const real = join(base, "real-data");
    const { checkpointId } = await openCheckpointStore({ dataDir: real, durable: false }).createCheckpoint(
      workspace,
    );
    fs.writeFileSync(join(workspace, "a.txt"), "v2");
    fs.rmdirSync(join(workspace, ".drydock"));
    fs.renameSync(real, join(workspace, ".drydock"));
    fs.symlinkSync(join(workspace, ".drydock"), join(base, "data"));
    const before = snapshotTree(workspace);

    const error = await rejection(
      restoreCheckpoint({
        dataDir: join(base, "data"),
        workspaceRoot: workspace,
        checkpointId,
        durable: false,
      }),
    );
    expect(error.code).toBe("INVALID_ARGUMENT");
    expect(error.message).toMatch(INSIDE);
    // Nothing journaled, nothing locked, nothing restored: the data directory holds what it held.
    expect(sameTree(snapshotTree(workspace), before)).toBe(true);
    expect(fs.readdirSync(join(workspace, ".drydock")).sort()).toEqual(["checkpoints"]);
  });

  it("is refused when it does not exist yet but its nearest existing ancestor is in the workspace", async () => {
    fs.symlinkSync(join(workspace, ".drydock"), join(base, "link"));
    const dataDir = join(base, "link", "not", "yet");
    const error = await rejection(
      openCheckpointStore({ dataDir, durable: false }).createCheckpoint(workspace),
    );
    expect(error.code).toBe("INVALID_ARGUMENT");
    expect(error.message).toMatch(INSIDE);
    expect(fs.readdirSync(join(workspace, ".drydock"))).toEqual([]);
  });

  it("is accepted when the symlink leads outside the workspace", async () => {
    fs.mkdirSync(join(base, "elsewhere"));
    fs.symlinkSync(join(base, "elsewhere"), join(base, "data"));
    const store = openCheckpointStore({ dataDir: join(base, "data"), durable: false });
    const { checkpointId } = await store.createCheckpoint(workspace);
    fs.writeFileSync(join(workspace, "a.txt"), "v2");
    const result = await restoreCheckpoint({
      dataDir: join(base, "data"),
      workspaceRoot: workspace,
      checkpointId,
      durable: false,
    });
    expect(result.phase).toBe("completed");
    expect(fs.readFileSync(join(workspace, "a.txt"), "utf8")).toBe("v1");
  });
});
