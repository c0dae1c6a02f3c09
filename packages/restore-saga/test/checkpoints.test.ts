import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { type FileOps, failNthCall, nodeFileOps } from "@drydock/file-lock";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { MAX_CHECKPOINT_FILE_BYTES, openCheckpointStore, restoreCheckpoint } from "../src/index.js";
import { deadPid, makeTempDir, rejection, removeDir, writeTree } from "./helpers.js";

let base: string;
let dataDir: string;
let workspace: string;

beforeEach(() => {
  base = makeTempDir("ckpt");
  dataDir = join(base, "data");
  workspace = join(base, "ws");
  writeTree(workspace, { "a.txt": "alpha", "dir/b.txt": "beta", "dir/sub/c.txt": "alpha", empty: null });
  fs.chmodSync(join(workspace, "a.txt"), 0o640);
});

afterEach(() => {
  removeDir(base);
});

function blobCount(): number {
  const blobs = join(dataDir, "checkpoints", "blobs");
  return fs.readdirSync(blobs).reduce((sum, dir) => sum + fs.readdirSync(join(blobs, dir)).length, 0);
}

describe("checkpoint store", () => {
  it("records every entry with path, size, mode and sha256, and totals", async () => {
    const store = openCheckpointStore({ dataDir });
    const created = await store.createCheckpoint(workspace);
    expect(created).toMatchObject({ files: 3, bytes: 14 });
    const manifest = await store.readManifest(created.checkpointId);
    expect(manifest.workspaceRoot).toBe(workspace);
    expect(manifest.entries.map((entry) => `${entry.type} ${entry.path}`)).toEqual([
      "file a.txt",
      "dir dir",
      "file dir/b.txt",
      "dir dir/sub",
      "file dir/sub/c.txt",
      "dir empty",
    ]);
    const a = manifest.entries[0]!;
    expect(a).toEqual({
      type: "file",
      path: "a.txt",
      size: 5,
      mode: 0o640,
      sha256: "8ed3f6ad685b959ead7022518e1af76cd816f8e8ec7ccdda1ed4018e8f2223f8",
    });
    const manifestPath = join(dataDir, "checkpoints", "manifests", `${created.checkpointId}.json`);
    expect(fs.statSync(manifestPath).mode & 0o777).toBe(0o600);
    expect(fs.statSync(join(dataDir, "checkpoints")).mode & 0o777).toBe(0o700);
  });

  it("stores each file's exact bytes though the scan reads every file into one reused buffer", async () => {
    // Sizes that grow past the buffer, shrink, and end empty, in walk order: a blob holding a stale tail
    // of the file read before it, or a view past its own end, would not match these bytes.
    const files: Record<string, Buffer> = {
      "1-big.bin": Buffer.alloc(300 * 1024, 0x61),
      "2-small.bin": Buffer.from("bbbbb"),
      "3-mid.bin": Buffer.alloc(100 * 1024, 0x63),
      "4-empty.bin": Buffer.alloc(0),
      "5-tiny.bin": Buffer.from("d"),
    };
    for (const [name, bytes] of Object.entries(files)) fs.writeFileSync(join(workspace, name), bytes);
    const store = openCheckpointStore({ dataDir });
    const { checkpointId } = await store.createCheckpoint(workspace);
    const manifest = await store.readManifest(checkpointId);
    for (const [name, bytes] of Object.entries(files)) {
      const entry = manifest.entries.find((e) => e.path === name);
      expect(entry, name).toMatchObject({
        type: "file",
        size: bytes.length,
        sha256: createHash("sha256").update(bytes).digest("hex"),
      });
      const sha256 = entry?.type === "file" ? entry.sha256 : "";
      const blob = join(dataDir, "checkpoints", "blobs", sha256.slice(0, 2), sha256);
      if (bytes.length > 0) expect(fs.readFileSync(blob).equals(bytes), name).toBe(true);
    }
  });

  it("stores identical content once across files and checkpoints", async () => {
    const store = openCheckpointStore({ dataDir });
    await store.createCheckpoint(workspace);
    expect(blobCount()).toBe(2);
    await store.createCheckpoint(workspace);
    expect(blobCount()).toBe(2);
    fs.writeFileSync(join(workspace, "dir/b.txt"), "changed");
    await store.createCheckpoint(workspace);
    expect(blobCount()).toBe(3);
  });

  it("lists only this workspace's checkpoints, oldest first", async () => {
    const other = join(base, "other");
    writeTree(other, { "x.txt": "x" });
    let clock = 1_800_000_000_000;
    const store = openCheckpointStore({ dataDir, now: () => (clock += 1000) });
    const first = await store.createCheckpoint(workspace);
    await store.createCheckpoint(other);
    const second = await store.createCheckpoint(workspace, { kind: "safety" });
    const list = await store.listCheckpoints(workspace);
    expect(list.map((item) => item.checkpointId)).toEqual([first.checkpointId, second.checkpointId]);
    expect(list[1]).toMatchObject({ kind: "safety", files: 3, workspaceRoot: workspace });
    expect(await openCheckpointStore({ dataDir: join(base, "none") }).listCheckpoints(workspace)).toEqual([]);
  });

  it("gives NOT_FOUND for an unknown checkpoint and CORRUPT for a tampered manifest", async () => {
    const store = openCheckpointStore({ dataDir });
    expect((await rejection(store.readManifest("ckpt-missing"))).code).toBe("NOT_FOUND");
    const created = await store.createCheckpoint(workspace);
    const path = join(dataDir, "checkpoints", "manifests", `${created.checkpointId}.json`);
    const manifest = JSON.parse(fs.readFileSync(path, "utf8"));
    manifest.files = 99;
    fs.writeFileSync(path, JSON.stringify(manifest));
    expect((await rejection(store.readManifest(created.checkpointId))).code).toBe("CORRUPT");
    fs.writeFileSync(path, "{");
    expect((await rejection(store.readManifest(created.checkpointId))).code).toBe("CORRUPT");
  });

  it("verifies a blob against its hash whenever it is read", async () => {
    const store = openCheckpointStore({ dataDir });
    const created = await store.createCheckpoint(workspace);
    const entry = (await store.readManifest(created.checkpointId)).entries[0]!;
    if (entry.type !== "file") throw new Error("expected a file entry");
    expect(store.readBlob(entry).toString()).toBe("alpha");
    const blob = join(dataDir, "checkpoints", "blobs", entry.sha256.slice(0, 2), entry.sha256);
    fs.writeFileSync(blob, "alphb");
    expect(() => store.readBlob(entry)).toThrow(expect.objectContaining({ code: "CORRUPT" }));
    fs.rmSync(blob);
    expect(() => store.readBlob(entry)).toThrow(expect.objectContaining({ code: "CORRUPT" }));
  });

  it("removes blob temps a killed capture left long ago where it writes, and no fresh ones", async () => {
    const store = openCheckpointStore({ dataDir });
    await store.createCheckpoint(workspace);
    // A new file whose blob lands in a directory where a killed capture left temps.
    fs.writeFileSync(join(workspace, "new.txt"), "brand new");
    const sha = createHash("sha256").update("brand new").digest("hex");
    const blobDir = join(dataDir, "checkpoints", "blobs", sha.slice(0, 2));
    fs.mkdirSync(blobDir, { recursive: true });
    const stale = join(blobDir, `.${sha}.4242.0123456789abcdef.tmp`);
    const fresh = join(blobDir, `.${sha}.4243.0123456789abcdef.tmp`);
    fs.writeFileSync(stale, "half");
    fs.writeFileSync(fresh, "being written");
    const hourAgo = new Date(Date.now() - 60 * 60 * 1000);
    fs.utimesSync(stale, hourAgo, hourAgo);

    // The next store opened on the data directory (a restarted server, a CLI run) sweeps it.
    const created = await openCheckpointStore({ dataDir }).createCheckpoint(workspace);

    expect(fs.existsSync(stale)).toBe(false);
    expect(fs.existsSync(fresh)).toBe(true);
    const entry = (await store.readManifest(created.checkpointId)).entries.find((e) => e.path === "new.txt")!;
    if (entry.type !== "file") throw new Error("expected a file entry");
    expect(store.readBlob(entry).toString()).toBe("brand new");
  });

  it("refuses a workspace holding a symlink and writes no manifest", async () => {
    fs.symlinkSync("/etc/passwd", join(workspace, "link"));
    const store = openCheckpointStore({ dataDir });
    expect((await rejection(store.createCheckpoint(workspace))).code).toBe("INVALID_ARGUMENT");
    expect(fs.readdirSync(join(dataDir, "checkpoints", "manifests"))).toEqual([]);
  });

  it("refuses a file over the size limit with LIMIT before reading it, and writes no manifest", async () => {
    // Sparse: as large as the limit plus 64 MiB, costing no disk.
    const fd = fs.openSync(join(workspace, "huge.bin"), "w");
    fs.ftruncateSync(fd, MAX_CHECKPOINT_FILE_BYTES + 64 * 1024 * 1024);
    fs.closeSync(fd);
    let bytesRead = 0;
    const counting: FileOps = {
      ...nodeFileOps,
      readSync: ((...args: Parameters<typeof fs.readSync>) => {
        const read = fs.readSync(...args);
        bytesRead += read;
        return read;
      }) as FileOps["readSync"],
    };
    const store = openCheckpointStore({ dataDir, fs: counting, durable: false });
    const error = await rejection(store.createCheckpoint(workspace));
    expect(error.code).toBe("LIMIT");
    expect(error.message).toContain("huge.bin");
    expect(bytesRead).toBeLessThan(1024 * 1024);
    expect(fs.readdirSync(join(dataDir, "checkpoints", "manifests"))).toEqual([]);
  });

  it("refuses a data directory inside the workspace", async () => {
    const store = openCheckpointStore({ dataDir: join(workspace, "data") });
    expect((await rejection(store.createCheckpoint(workspace))).code).toBe("INVALID_ARGUMENT");
  });
});

describe("capture and commit (the two halves of a checkpoint)", () => {
  /** Every file under the blob store, temps included. */
  function blobFiles(): string[] {
    const blobs = join(dataDir, "checkpoints", "blobs");
    if (!fs.existsSync(blobs)) return [];
    return fs.readdirSync(blobs).flatMap((dir) => fs.readdirSync(join(blobs, dir)).map((n) => `${dir}/${n}`));
  }

  it("a capture stores every blob durably but names nothing until it is committed", async () => {
    const store = openCheckpointStore({ dataDir });
    let seen: readonly string[] = [];
    const captured = await store.captureWorkspace(workspace, {
      whileFlushing: (entries) => {
        seen = entries.map((entry) => entry.path);
      },
    });
    expect(seen).toEqual(["a.txt", "dir", "dir/b.txt", "dir/sub", "dir/sub/c.txt", "empty"]);
    expect(blobFiles()).toHaveLength(2);
    expect(fs.readdirSync(join(dataDir, "checkpoints", "manifests"))).toEqual([]);
    const created = store.commitCheckpoint(captured, { kind: "safety" });
    const manifest = await store.readManifest(created.checkpointId);
    expect(manifest.kind).toBe("safety");
    for (const entry of manifest.entries) if (entry.type === "file") store.readBlob(entry);
  });

  it("refuses to commit a capture it did not make", async () => {
    const store = openCheckpointStore({ dataDir });
    const captured = await store.captureWorkspace(workspace);
    const forged = { workspaceRoot: captured.workspaceRoot, entries: [...captured.entries] };
    expect(() => store.commitCheckpoint(forged)).toThrow(/capture made by this store/);
    expect(() => openCheckpointStore({ dataDir }).commitCheckpoint(captured)).toThrow(
      /capture made by this store/,
    );
  });

  it("a failure while the blobs flush abandons the capture: no temp, no manifest, the error as thrown", async () => {
    const store = openCheckpointStore({ dataDir });
    const failure = new Error("planning failed");
    await expect(
      store.captureWorkspace(workspace, {
        whileFlushing: () => {
          throw failure;
        },
      }),
    ).rejects.toMatchObject({ code: "WRITE_FAILED", cause: failure });
    expect(blobFiles().filter((name) => name.endsWith(".tmp"))).toEqual([]);
    expect(fs.readdirSync(join(dataDir, "checkpoints", "manifests"))).toEqual([]);
  });

  it("a flush that fails leaves no temp and no blob under its hash", async () => {
    const faulty = failNthCall(nodeFileOps, { n: 1, code: "EIO", count: (name) => name === "fsync" });
    const store = openCheckpointStore({ dataDir, fs: faulty.ops });
    const error = await rejection(store.createCheckpoint(workspace));
    expect(faulty.fired()).toBe(true);
    expect(error.code).toBe("WRITE_FAILED");
    // The blob whose flush failed never got its content-address name; nothing temporary is left.
    expect(blobFiles().filter((name) => name.endsWith(".tmp"))).toEqual([]);
    expect(blobFiles().length).toBeLessThan(2);
    expect(fs.readdirSync(join(dataDir, "checkpoints", "manifests"))).toEqual([]);
    // The next attempt on a healthy disk completes and is whole.
    const created = await openCheckpointStore({ dataDir }).createCheckpoint(workspace);
    const manifest = await store.readManifest(created.checkpointId);
    for (const entry of manifest.entries) if (entry.type === "file") store.readBlob(entry);
  });
});

describe("a checkpoint killed while writing its manifest", () => {
  const FIXTURE = fileURLToPath(new URL("./fixtures/checkpoint-child.ts", import.meta.url));
  const PACKAGE_DIR = fileURLToPath(new URL("..", import.meta.url));
  const manifests = () => join(dataDir, "checkpoints", "manifests");
  const temps = () => fs.readdirSync(manifests()).filter((name) => name.endsWith(".tmp"));

  it("leaves a temp that is no checkpoint, and the next store removes it once its writer is dead and it is 5 minutes old", async () => {
    const child = spawnSync(
      process.execPath,
      ["--conditions=@drydock/source", "--import", "tsx", FIXTURE, dataDir, workspace],
      { cwd: PACKAGE_DIR, encoding: "utf8" },
    );
    expect(child.signal, child.stderr).toBe("SIGKILL");
    const [left] = temps();
    expect(left).toMatch(/^\.ckpt-[^/]+\.json\.\d+\.[0-9a-f]{16}\.tmp$/);
    expect(await openCheckpointStore({ dataDir }).listCheckpoints(workspace)).toEqual([]);

    // A temp as fresh as this one is kept (its pid may belong to a live writer in another container);
    // so is one of a live process, whatever its age.
    const live = `.ckpt-live.json.${process.ppid}.${"0".repeat(16)}.tmp`;
    const freshDead = `.ckpt-fresh.json.${await deadPid()}.${"1".repeat(16)}.tmp`;
    fs.writeFileSync(join(manifests(), live), "{");
    fs.writeFileSync(join(manifests(), freshDead), "{");
    const old = new Date(Date.now() - 6 * 60_000);
    for (const name of [left!, live]) fs.utimesSync(join(manifests(), name), old, old);

    const store = openCheckpointStore({ dataDir });
    const created = await store.createCheckpoint(workspace);
    expect(temps().sort()).toEqual([freshDead, live].sort());
    expect((await store.listCheckpoints(workspace)).map((c) => c.checkpointId)).toEqual([
      created.checkpointId,
    ]);
  });
});

describe("retiring a workspace's checkpoints", () => {
  it("moves exactly that workspace's manifests to retired/: no longer listed, read or restored; idempotent", async () => {
    const store = openCheckpointStore({ dataDir });
    const other = join(base, "other");
    writeTree(other, { "o.txt": "other" });
    const first = await store.createCheckpoint(workspace);
    fs.writeFileSync(join(workspace, "a.txt"), "changed");
    const second = await store.createCheckpoint(workspace);
    const kept = await store.createCheckpoint(other);

    const { retired } = await store.retireCheckpoints(workspace);
    expect(retired.sort()).toEqual([first.checkpointId, second.checkpointId].sort());
    expect(await store.listCheckpoints(workspace)).toEqual([]);
    expect((await store.listCheckpoints(other)).map((c) => c.checkpointId)).toEqual([kept.checkpointId]);
    expect(() => store.readVerifiedManifest(first.checkpointId)).toThrow(
      expect.objectContaining({ code: "NOT_FOUND" }),
    );
    await expect(
      restoreCheckpoint({ dataDir, workspaceRoot: workspace, checkpointId: first.checkpointId }),
    ).rejects.toMatchObject({ code: "NOT_FOUND" });
    // Kept, not deleted: the manifests are in retired/, and a second call has nothing left to move.
    const retiredDir = join(dataDir, "checkpoints", "retired");
    expect(fs.readdirSync(retiredDir).sort()).toEqual(
      [`${first.checkpointId}.json`, `${second.checkpointId}.json`].sort(),
    );
    expect(await store.retireCheckpoints(workspace)).toEqual({ retired: [] });
    // The workspace itself is untouched; a new checkpoint of it is listed alone.
    expect(fs.readFileSync(join(workspace, "a.txt"), "utf8")).toBe("changed");
    const fresh = await store.createCheckpoint(workspace);
    expect((await store.listCheckpoints(workspace)).map((c) => c.checkpointId)).toEqual([fresh.checkpointId]);
  });
});

describe("retiring checkpoints whose manifests do not verify or cannot be read", () => {
  it("moves a damaged or hard-linked manifest that names the workspace; an unreadable one fails the call, to be retried", async () => {
    const store = openCheckpointStore({ dataDir });
    const damaged = await store.createCheckpoint(workspace);
    const linked = await store.createCheckpoint(workspace);
    const unreadable = await store.createCheckpoint(workspace);
    const manifests = join(dataDir, "checkpoints", "manifests");
    // Still JSON naming the workspace, but no longer the bytes its digest was taken over.
    const damagedPath = join(manifests, `${damaged.checkpointId}.json`);
    fs.writeFileSync(damagedPath, fs.readFileSync(damagedPath, "utf8").replace('"files"', '"files" '));
    // A second name (a backup tool's hard link): it would be refused as CORRUPT, so never listed now, but
    // listed again for the next workspace at this path once the link is gone.
    fs.linkSync(join(manifests, `${linked.checkpointId}.json`), join(base, "backup.json"));

    const eio: FileOps = {
      ...nodeFileOps,
      readFileSync: ((path: fs.PathOrFileDescriptor, ...rest: unknown[]) => {
        if (String(path).endsWith(`${unreadable.checkpointId}.json`)) {
          throw Object.assign(new Error("EIO: i/o error"), { code: "EIO" });
        }
        return (nodeFileOps.readFileSync as (...args: unknown[]) => unknown)(path, ...rest);
      }) as FileOps["readFileSync"],
    };
    // The hard-linked one is not listed (it does not verify), yet it still names the workspace: it counts.
    expect((await store.listCheckpoints(workspace)).map((c) => c.checkpointId)).not.toContain(
      linked.checkpointId,
    );
    expect(await store.hasCheckpointsOf(workspace)).toBe(true);
    // One that cannot be read makes the answer unknown, never "none".
    await expect(openCheckpointStore({ dataDir, fs: eio }).hasCheckpointsOf(workspace)).rejects.toMatchObject(
      {
        code: "CORRUPT",
      },
    );
    const failed = await rejection(openCheckpointStore({ dataDir, fs: eio }).retireCheckpoints(workspace));
    expect(failed).toMatchObject({ code: "WRITE_FAILED" });
    expect(failed.message).toMatch(/Retry/);

    const { retired } = await store.retireCheckpoints(workspace);
    // The first call may have moved some before it failed: together they moved all three, once each.
    const all = [...fs.readdirSync(join(dataDir, "checkpoints", "retired"))].sort();
    expect(all).toEqual([damaged, linked, unreadable].map((c) => `${c.checkpointId}.json`).sort());
    expect(retired).toContain(unreadable.checkpointId);
    expect(fs.readdirSync(manifests).filter((name) => name.endsWith(".json"))).toEqual([]);
    fs.unlinkSync(join(base, "backup.json"));
    expect(await store.listCheckpoints(workspace)).toEqual([]);
    expect(await store.hasCheckpointsOf(workspace)).toBe(false);
  });
});
