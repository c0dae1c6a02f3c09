import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type FileOpName, failNthCall, nodeFileOps } from "@drydock/file-lock";
import { openCheckpointStore } from "@drydock/restore-saga";
import { afterEach, describe, expect, it } from "vitest";
import { moveAside, retireWorkspaceParts } from "../src/domain/workspace-retirement.js";
import { tempDir } from "./helpers.js";

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

const CHANGING = new Set<FileOpName>(["mkdirSync", "renameSync", "rmdirSync", "openSync", "fsyncSync"]);

/** A data directory with one workspace (a file, a checkpoint of it) and a saga shard. */
async function seeded() {
  const { dir, cleanup } = tempDir("retire");
  cleanups.push(cleanup);
  const root = join(dir, "workspaces", "a");
  const shard = join(dir, "restore-sagas", "shard-a");
  mkdirSync(root, { recursive: true });
  mkdirSync(shard, { recursive: true });
  writeFileSync(join(root, "notes.txt"), "kept");
  writeFileSync(join(shard, "op_1.json"), "{}");
  const checkpoints = openCheckpointStore({ dataDir: dir });
  await checkpoints.createCheckpoint(root);
  return { dir, root, shard, workspaces: join(dir, "workspaces"), checkpoints };
}

/** Every file under `dir`'s retired places, with its content: what a retirement must keep. */
function kept(dir: string): string[] {
  const out: string[] = [];
  const walk = (path: string, label: string) => {
    for (const entry of readdirSync(path, { withFileTypes: true })) {
      const full = join(path, entry.name);
      if (entry.isDirectory()) walk(full, `${label}/${entry.name.replace(/\.\d+\.[0-9a-f]{8}$/, ".*")}`);
      else out.push(`${label}/${entry.name}=${readFileSync(full, "utf8").length}`);
    }
  };
  for (const place of ["workspaces/.retired", "restore-sagas/.retired"]) {
    if (existsSync(join(dir, place))) walk(join(dir, place), place);
  }
  return out.sort();
}

describe("retireWorkspaceParts: a deleted bot's workspace leaves its path, everything kept", () => {
  it("moves the shard and the files aside, retires the checkpoints, removes the directory", async () => {
    const s = await seeded();
    await retireWorkspaceParts(nodeFileOps, s.checkpoints, {
      root: s.root,
      shard: s.shard,
      workspacesDir: s.workspaces,
    });
    expect(existsSync(s.root)).toBe(false);
    expect(existsSync(s.shard)).toBe(false);
    expect(kept(s.dir)).toEqual([
      "restore-sagas/.retired/shard-a.*/op_1.json=2",
      "workspaces/.retired/a.*/notes.txt=4",
    ]);
    expect(readdirSync(join(s.dir, "checkpoints", "retired")).length).toBeGreaterThan(0);
  });

  it("an empty workspace with no shard: only the directory goes", async () => {
    const { dir, cleanup } = tempDir("retire-empty");
    cleanups.push(cleanup);
    const root = join(dir, "workspaces", "b");
    mkdirSync(root, { recursive: true });
    const checkpoints = openCheckpointStore({ dataDir: dir });
    await retireWorkspaceParts(nodeFileOps, checkpoints, {
      root,
      shard: join(dir, "restore-sagas", "none"),
      workspacesDir: join(dir, "workspaces"),
    });
    expect(existsSync(root)).toBe(false);
    expect(kept(dir)).toEqual([]);
  });

  it("a fault at any file-system call leaves what a second retirement finishes, nothing lost", async () => {
    let n = 1;
    for (; n < 200; n += 1) {
      const s = await seeded();
      // Every call that changes or flushes the disk (a failed close is ignored by design: it changes nothing).
      const faulty = failNthCall(nodeFileOps, { n, code: "EIO", count: (name) => CHANGING.has(name) });
      const where = { root: s.root, shard: s.shard, workspacesDir: s.workspaces };
      let failed = false;
      try {
        await retireWorkspaceParts(faulty.ops, s.checkpoints, where);
      } catch {
        failed = true;
      }
      if (!faulty.fired()) break;
      expect(failed).toBe(true);
      // The next retirement (DELETE again, the id taken again) runs with the directory recreated.
      mkdirSync(s.root, { recursive: true });
      await retireWorkspaceParts(nodeFileOps, s.checkpoints, where);
      expect(existsSync(s.root)).toBe(false);
      const files = kept(s.dir);
      expect(files.filter((f) => f.endsWith("/notes.txt=4"))).toHaveLength(1);
      expect(files.filter((f) => f.endsWith("/op_1.json=2"))).toHaveLength(1);
    }
    // The sweep reached every mutating call and ended with one that ran through.
    expect(n).toBeGreaterThan(4);
  });
});

describe("moveAside", () => {
  it("renames a directory into .retired beside it", () => {
    const { dir, cleanup } = tempDir("aside");
    cleanups.push(cleanup);
    mkdirSync(join(dir, "x"));
    moveAside(nodeFileOps, join(dir, "x"));
    expect(existsSync(join(dir, "x"))).toBe(false);
    expect(readdirSync(join(dir, ".retired"))).toEqual([expect.stringMatching(/^x\.\d+\.[0-9a-f]{8}$/)]);
  });
});
