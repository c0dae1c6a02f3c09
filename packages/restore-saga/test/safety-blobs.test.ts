import { createHash } from "node:crypto";
import * as fs from "node:fs";
import { join } from "node:path";
import { type FileOps, failNthCall, nodeFileOps } from "@drydock/file-lock";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { openCheckpointStore, restoreCheckpoint } from "../src/index.js";
import {
  everyoneDead,
  makeRestoreFixture,
  makeTempDir,
  recoverRestore,
  rejection,
  removeDir,
  sagaStoreFor,
  sameTree,
  snapshotTree,
  writeTree,
} from "./helpers.js";

let base: string;
let fixture: Awaited<ReturnType<typeof makeRestoreFixture>>;

beforeEach(async () => {
  base = makeTempDir("safety-blobs");
  fixture = await makeRestoreFixture(base, 24);
});

afterEach(() => {
  removeDir(base);
});

function blobOf(bytes: Buffer): string {
  const hex = createHash("sha256").update(bytes).digest("hex");
  return join(fixture.dataDir, "checkpoints", "blobs", hex.slice(0, 2), hex);
}

/** Damages, in place, the stored blob of a workspace file's current bytes (same size, one bit flipped). */
function rotBlobOf(path: string): string {
  const current = fs.readFileSync(join(fixture.workspace, path));
  const blob = blobOf(current);
  const rotten = Buffer.from(current);
  rotten[0]! ^= 1;
  fs.writeFileSync(blob, rotten);
  return blob;
}

describe("the safety checkpoint never reuses a damaged blob for a path the restore changes", () => {
  it("repairs the damaged blob from the bytes it read, so the rollback gets the before-state back", async () => {
    // An older checkpoint's blob of d0/f0.txt's current bytes rotted; the restore rewrites d0/f0.txt.
    const blob = rotBlobOf("d0/f0.txt");
    const faulty = failNthCall(nodeFileOps, {
      n: 3,
      code: "EIO",
      count: (name, args) => name === "renameSync" && String(args[1]).startsWith(fixture.workspace),
    });
    const error = await rejection(
      restoreCheckpoint({
        dataDir: fixture.dataDir,
        workspaceRoot: fixture.workspace,
        checkpointId: fixture.checkpointId,
        durable: false,
        fs: faulty.ops,
        operationId: "op-rot",
      }),
    );
    expect(error.code).toBe("RECOVERY_REQUIRED");
    // d0/f0.txt was already replaced when the third rename failed: only the safety blob has its bytes.
    expect(fs.readFileSync(join(fixture.workspace, "d0/f0.txt"), "utf8")).not.toBe("before 0");

    const recovered = await recoverRestore({
      dataDir: fixture.dataDir,
      workspaceRoot: fixture.workspace,
      operationId: "op-rot",
      isProcessAlive: everyoneDead,
    });
    expect(recovered.outcome).toBe("rolled_back");
    expect(sameTree(snapshotTree(fixture.workspace), fixture.before)).toBe(true);
    expect(fs.readFileSync(blob, "utf8")).toBe("before 0");
  });

  it("checks the blob for a changed file even when an unchanged file with the same bytes came first", async () => {
    const workspace = join(base, "shared");
    const dataDir = join(base, "shared-data");
    writeTree(workspace, { "a.txt": "same bytes", "b.txt": "other bytes" });
    const { checkpointId } = await openCheckpointStore({ dataDir, durable: false }).createCheckpoint(
      workspace,
    );
    // a.txt (left alone by the restore) and b.txt (changed by it) now share one blob, which rotted.
    fs.writeFileSync(join(workspace, "b.txt"), "same bytes");
    const hex = createHash("sha256").update("same bytes").digest("hex");
    const blob = join(dataDir, "checkpoints", "blobs", hex.slice(0, 2), hex);
    fs.writeFileSync(blob, "sane bytes");

    await restoreCheckpoint({ dataDir, workspaceRoot: workspace, checkpointId, durable: false });
    expect(fs.readFileSync(blob, "utf8")).toBe("same bytes");
  });

  it("refuses before the intent, changing nothing, when the damaged blob cannot be rewritten", async () => {
    const blob = rotBlobOf("d0/f0.txt");
    const faulty = failNthCall(nodeFileOps, {
      n: 1,
      code: "EIO",
      count: (name, args) => name === "renameSync" && String(args[1]) === blob,
    });
    const error = await rejection(
      restoreCheckpoint({
        dataDir: fixture.dataDir,
        workspaceRoot: fixture.workspace,
        checkpointId: fixture.checkpointId,
        durable: false,
        fs: faulty.ops,
        operationId: "op-rot-stuck",
      }),
    );
    expect(faulty.fired()).toBe(true);
    expect(error.code).toBe("WRITE_FAILED");
    expect(sameTree(snapshotTree(fixture.workspace), fixture.before)).toBe(true);
    const saga = await sagaStoreFor(fixture.dataDir, fixture.workspace).loadArchived("op-rot-stuck");
    expect(saga.events.map((event) => event.phase)).toEqual(["created", "locked", "aborted"]);
  });

  it("reads back only the stored blobs of the paths it changes, not those of the whole workspace", async () => {
    // Files the restore leaves alone: their blobs are reused by name and size without being read.
    const store = openCheckpointStore({ dataDir: fixture.dataDir, durable: false });
    const target = await store.readManifest(fixture.checkpointId);
    // The restore reads the blobs of the files it writes (its target's), and nothing else of the store.
    const writtenShas = new Set(
      target.entries.flatMap((entry) =>
        entry.type === "file" && fixture.before.get(entry.path) !== fixture.after.get(entry.path)
          ? [entry.sha256]
          : [],
      ),
    );
    const unchanged = [...fixture.before].filter(
      ([path, value]) => value.startsWith("file") && fixture.after.get(path) === value,
    );
    expect(unchanged.length).toBeGreaterThan(5);
    const untouchedBlobs = new Set(
      unchanged.map(([path]) => blobOf(fs.readFileSync(join(fixture.workspace, path)))),
    );
    const opened: string[] = [];
    const spy: FileOps = {
      ...nodeFileOps,
      openSync: ((path: fs.PathLike, ...rest: unknown[]) => {
        opened.push(String(path));
        return (nodeFileOps.openSync as (...args: unknown[]) => number)(path, ...rest);
      }) as FileOps["openSync"],
    };
    await restoreCheckpoint({
      dataDir: fixture.dataDir,
      workspaceRoot: fixture.workspace,
      checkpointId: fixture.checkpointId,
      durable: false,
      fs: spy,
      operationId: "op-cost",
    });
    const readUntouched = opened.filter(
      (path) => untouchedBlobs.has(path) && !writtenShas.has(path.slice(path.lastIndexOf("/") + 1)),
    );
    expect(readUntouched).toEqual([]);
    expect(sameTree(snapshotTree(fixture.workspace), fixture.after)).toBe(true);
  });
});
