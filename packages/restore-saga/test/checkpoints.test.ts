import { execFileSync, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { type FileOps, failNthCall, nodeFileOps } from "@drydock/file-lock";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  MAX_CHECKPOINT_FILE_BYTES,
  openCheckpointStore,
  openSagaStore,
  restoreCheckpoint,
} from "../src/index.js";
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

    // (Injected at open: manifests are read with readRegularFile, open + fstat + read, like every reader.)
    const eio: FileOps = {
      ...nodeFileOps,
      openSync: ((path: fs.PathLike, ...rest: unknown[]) => {
        if (String(path).endsWith(`${unreadable.checkpointId}.json`)) {
          throw Object.assign(new Error("EIO: i/o error"), { code: "EIO" });
        }
        return (nodeFileOps.openSync as (...args: unknown[]) => number)(path, ...rest);
      }) as FileOps["openSync"],
    };
    // The hard-linked one is not listed (it does not verify), yet it still names the workspace: it counts.
    expect((await store.listCheckpoints(workspace)).map((c) => c.checkpointId)).not.toContain(
      linked.checkpointId,
    );
    expect(await store.hasCheckpointsOf(workspace)).toBe(true);
    // One that cannot be read makes the answer unknown, never "none".
    const unknown = await rejection(openCheckpointStore({ dataDir, fs: eio }).hasCheckpointsOf(workspace));
    expect(unknown).toMatchObject({ code: "CORRUPT" });
    expect(unknown.message).toContain("EIO");
    expect(unknown.message).toContain(`${unreadable.checkpointId}.json`);
    const failed = await rejection(openCheckpointStore({ dataDir, fs: eio }).retireCheckpoints(workspace));
    expect(failed).toMatchObject({ code: "WRITE_FAILED" });
    expect(failed.message).toMatch(/Retry/);
    expect(failed.message).toContain("EIO");

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

/** `openSync` of any path containing `match` fails with `code` (until `stop()`). */
function failingOpen(match: string, code: string): FileOps {
  return {
    ...nodeFileOps,
    openSync: ((path: fs.PathLike, ...rest: unknown[]) => {
      if (String(path).includes(match)) throw Object.assign(new Error(`${code}: injected`), { code });
      return (nodeFileOps.openSync as (...args: unknown[]) => number)(path, ...rest);
    }) as FileOps["openSync"],
  };
}

describe("manifests that are no manifest file, or cannot be read", () => {
  it("retire and hasCheckpointsOf name a directory, symlink or FIFO among the manifests as CORRUPT, never following or blocking on it", async () => {
    const store = openCheckpointStore({ dataDir });
    const created = await store.createCheckpoint(workspace);
    const manifests = join(dataDir, "checkpoints", "manifests");
    const outside = join(base, "elsewhere.json");
    // Outside the store, naming this workspace: a symlink to it must not count as one of its manifests.
    fs.writeFileSync(outside, JSON.stringify({ workspaceRoot: workspace }));
    const stray = (make: (path: string) => void, name: string) => {
      const path = join(manifests, name);
      make(path);
      return path;
    };
    const cases: [string, (path: string) => void, RegExp][] = [
      ["ckpt-stray-dir.json", (path) => fs.mkdirSync(path), /is not a regular file/],
      ["ckpt-stray-link.json", (path) => fs.symlinkSync(outside, path), /is a symbolic link/],
      ["ckpt-stray-fifo.json", (path) => execFileSync("mkfifo", [path]), /is not a regular file/],
    ];
    for (const [name, make, why] of cases) {
      const path = stray(make, name);
      for (const call of [store.hasCheckpointsOf(workspace), store.retireCheckpoints(workspace)]) {
        const error = await rejection(call);
        expect(error.code, error.message).toBe("CORRUPT");
        expect(error.message).toContain(path);
        expect(error.message).toMatch(why);
        expect(error.message).toMatch(/move it out of .* by hand/);
      }
      // Nothing was moved, and listing (which leaves out what it refuses) still shows the checkpoint.
      expect(fs.existsSync(join(dataDir, "checkpoints", "retired"))).toBe(false);
      expect((await store.listCheckpoints(workspace)).map((c) => c.checkpointId)).toEqual([
        created.checkpointId,
      ]);
      fs.rmSync(path, { recursive: true });
    }
    expect(await store.retireCheckpoints(workspace)).toEqual({ retired: [created.checkpointId] });
    expect(fs.readFileSync(outside, "utf8")).toContain(workspace);
  });

  it("listCheckpoints fails naming a manifest it could not read (with its errno), and still leaves out damaged ones and temps", async () => {
    const store = openCheckpointStore({ dataDir });
    const first = await store.createCheckpoint(workspace);
    const second = await store.createCheckpoint(workspace);
    const damaged = await store.createCheckpoint(workspace);
    const manifests = join(dataDir, "checkpoints", "manifests");
    fs.writeFileSync(join(manifests, `${damaged.checkpointId}.json`), "{ not json");
    fs.writeFileSync(join(manifests, `.ckpt-x.json.${process.pid}.${"0".repeat(16)}.tmp`), "{");
    fs.writeFileSync(join(manifests, "notes.txt"), "kept by someone");
    // Read and refused (damaged), a temp, a foreign name: left out, as before.
    expect((await store.listCheckpoints(workspace)).map((c) => c.checkpointId).sort()).toEqual(
      [first.checkpointId, second.checkpointId].sort(),
    );
    for (const [code, expected] of [
      ["EIO", "CORRUPT"],
      ["EMFILE", "LOCK_FAILED"],
      ["ENFILE", "LOCK_FAILED"],
      ["ENOMEM", "LOCK_FAILED"],
      ["EAGAIN", "LOCK_FAILED"],
      ["EINTR", "LOCK_FAILED"],
    ] as const) {
      const broken = openCheckpointStore({ dataDir, fs: failingOpen(`${second.checkpointId}.json`, code) });
      const error = await rejection(broken.listCheckpoints(workspace));
      expect(error.code, error.message).toBe(expected);
      expect(error.message).toContain(`${second.checkpointId}.json`);
      expect(error.message).toContain(code);
      if (expected === "LOCK_FAILED") {
        expect(error.message).toMatch(/retry/);
        expect(error.message).not.toMatch(/inspect it|damaged|corrupt/i);
      }
    }
  });

  it("readManifest and readBlob name the errno; a failure of the process says retry, never that the data is damaged", async () => {
    const store = openCheckpointStore({ dataDir });
    const created = await store.createCheckpoint(workspace);
    const entry = store
      .readVerifiedManifest(created.checkpointId)
      .manifest.entries.find((e) => e.type === "file") as Extract<
      import("../src/index.js").ManifestEntry,
      { type: "file" }
    >;
    for (const [code, expected] of [
      ["EMFILE", "LOCK_FAILED"],
      ["EIO", "CORRUPT"],
    ] as const) {
      const manifestError = (() => {
        try {
          openCheckpointStore({ dataDir, fs: failingOpen("/manifests/", code) }).readVerifiedManifest(
            created.checkpointId,
          );
        } catch (error) {
          return error as import("../src/index.js").SagaError;
        }
        throw new Error("expected a failure");
      })();
      expect(manifestError.code).toBe(expected);
      expect(manifestError.message).toContain(`(${code}`);
      const blobError = (() => {
        try {
          openCheckpointStore({ dataDir, fs: failingOpen("/blobs/", code) }).readBlob(entry);
        } catch (error) {
          return error as import("../src/index.js").SagaError;
        }
        throw new Error("expected a failure");
      })();
      expect(blobError.code).toBe(expected);
      expect(blobError.message).toContain(`(${code}`);
      if (expected === "LOCK_FAILED")
        expect(blobError.message).toMatch(/says nothing about its contents.*retry/);
    }
  });

  it("a manifest whose directory flush fails is reported as written and visible, with the real errno", async () => {
    const store = openCheckpointStore({ dataDir });
    await store.createCheckpoint(workspace);
    const manifests = join(dataDir, "checkpoints", "manifests");
    // The directory flush of manifests/ (its fsync comes after the rename of the manifest) fails.
    let flushingManifests = false;
    const faulty = failNthCall(nodeFileOps, {
      n: 1,
      code: "EIO",
      count: (name) => name === "fsyncSync" && flushingManifests,
    });
    const ops: FileOps = {
      ...faulty.ops,
      openSync: ((path: fs.PathLike, ...rest: unknown[]) => {
        flushingManifests = String(path) === manifests;
        return (faulty.ops.openSync as (...args: unknown[]) => number)(path, ...rest);
      }) as FileOps["openSync"],
    };
    const error = await rejection(openCheckpointStore({ dataDir, fs: ops }).createCheckpoint(workspace));
    expect(faulty.fired()).toBe(true);
    expect(error.code).toBe("WRITE_FAILED");
    const listed = (await store.listCheckpoints(workspace)).map((c) => c.checkpointId);
    expect(listed).toHaveLength(2);
    const id = listed.find((checkpointId) => error.message.includes(checkpointId));
    expect(id, error.message).toBeDefined();
    expect(error.message).toContain("(EIO)");
    expect(error.message).not.toContain("DIRECTORY_SYNC_FAILED");
    expect(error.message).not.toMatch(/was not created/);
    expect(error.message).toMatch(/visible/);
    expect(error.message).toMatch(/power loss/);
  });
});

describe("a workspace or data directory that cannot be resolved", () => {
  const failingRealpath = (code: string, match: string): FileOps => ({
    ...nodeFileOps,
    realpathSync: ((path: fs.PathLike, ...rest: unknown[]) => {
      if (String(path) === match) throw Object.assign(new Error(`${code}: injected`), { code });
      return (nodeFileOps.realpathSync as (...args: unknown[]) => string)(path, ...rest);
    }) as FileOps["realpathSync"],
  });

  it("is INVALID_ARGUMENT only when the path is wrong; EIO or EMFILE is a failure a retry may cure, with its errno", async () => {
    for (const [code, expected] of [
      ["ENOENT", "INVALID_ARGUMENT"],
      ["ENOTDIR", "INVALID_ARGUMENT"],
      ["ELOOP", "INVALID_ARGUMENT"],
      ["EACCES", "INVALID_ARGUMENT"],
      ["EIO", "LOCK_FAILED"],
      ["EMFILE", "LOCK_FAILED"],
      ["ENOMEM", "LOCK_FAILED"],
    ] as const) {
      const fsOps = failingRealpath(code, workspace);
      const checkpoints = await rejection(
        openCheckpointStore({ dataDir, fs: fsOps }).createCheckpoint(workspace),
      );
      expect(checkpoints.code, checkpoints.message).toBe(expected);
      expect(checkpoints.message).toContain(code);
      let store: unknown;
      try {
        store = openSagaStore({
          stateDir: join(dataDir, "restore-sagas"),
          workspaceRoot: workspace,
          fs: fsOps,
        });
      } catch (error) {
        store = error;
      }
      expect(store).toMatchObject({ code: expected });
      expect((store as Error).message).toContain(code);
      if (expected === "LOCK_FAILED") {
        expect((store as Error).message).toMatch(/retry/);
        expect((store as Error).message).not.toMatch(/Check that it exists/);
      }
    }
    const dataFs = failingRealpath("EIO", base);
    const dataError = await rejection(
      openCheckpointStore({ dataDir, fs: dataFs }).createCheckpoint(workspace),
    );
    expect(dataError.code).toBe("LOCK_FAILED");
    expect(dataError.message).toContain("EIO");
  });
});
