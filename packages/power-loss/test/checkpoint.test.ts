import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { FileOps } from "@drydock/file-lock";
import { openCheckpointStore, restoreCheckpoint } from "@drydock/restore-saga";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { crashSweep, createPowerLossFs, type ImageContext, scratchFileOps } from "../src/index.js";
import { report, reportSweep, scale } from "./report.js";

// Checkpoints write their blobs unflushed, flush them several at a time, and only then give them their
// content-address names; a restore does the same with every file it publishes (flushed, then renamed over
// its target), and flushes the directories before it journals `workspace_applied`. These sweeps hold both
// to what they promise under the weak model.

const BEFORE: Record<string, string> = {
  "a.txt": "alpha\n",
  "same-1.txt": "twin\n",
  "same-2.txt": "twin\n",
  "docs/guide.md": "# guide\n",
  "docs/deep/notes.txt": "deep notes\n",
};
const AFTER: Record<string, string> = {
  "a.txt": "alpha, restored\n",
  "same-1.txt": "twin\n",
  "docs/guide.md": "# guide, version two\n",
  "docs/new.txt": "new\n",
};

function writeTree(root: string, files: Record<string, string>, fs?: FileOps): void {
  for (const [path, text] of Object.entries(files)) {
    const abs = join(root, path);
    (fs ?? scratchFileOps).mkdirSync(join(abs, ".."), { recursive: true });
    (fs ?? scratchFileOps).writeFileSync(abs, text);
  }
}

/** Every regular file under `root` by relative path. */
function readTree(root: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (rel: string): void => {
    for (const entry of readdirSync(join(root, rel), { withFileTypes: true })) {
      const path = rel ? `${rel}/${entry.name}` : entry.name;
      if (entry.isDirectory()) walk(path);
      else out[path] = readFileSync(join(root, path), "utf8");
    }
  };
  walk("");
  return out;
}

/** Manifests in an image: each must verify and every blob it names must read back with its hash. */
function checkManifests(dataDir: string): { manifests: number; problem: string | null } {
  const store = openCheckpointStore({ dataDir, fs: scratchFileOps });
  let names: string[];
  try {
    names = readdirSync(join(dataDir, "checkpoints", "manifests")).filter((n) => n.endsWith(".json"));
  } catch {
    return { manifests: 0, problem: null };
  }
  for (const name of names) {
    try {
      const manifest = store.readVerifiedManifest(name.slice(0, -".json".length)).manifest;
      for (const entry of manifest.entries) if (entry.type === "file") store.readBlob(entry);
    } catch (error) {
      return { manifests: names.length, problem: `${name}: ${(error as Error).message}` };
    }
  }
  return { manifests: names.length, problem: null };
}

/** BEFORE/AFTER as `readTree` returns them (keys in walk order), for an exact comparison. */
function readTreeOf(files: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(files).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

function flush(fs: FileOps, path: string): void {
  const fd = fs.openSync(path, "r");
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

/** Removes every file and directory under `root` (not `root` itself) through `fs`. */
function rmTree(fs: FileOps, root: string): void {
  for (const name of fs.readdirSync(root)) {
    const path = join(root, name);
    if (fs.lstatSync(path).isDirectory()) {
      rmTree(fs, path);
      fs.rmdirSync(path);
    } else fs.unlinkSync(path);
  }
}

let base: string;
beforeAll(() => {
  base = mkdtempSync(join(tmpdir(), "drydock-pl-checkpoint-"));
});
afterAll(() => rmSync(base, { recursive: true, force: true }));

describe("checkpoints and restores under power loss", () => {
  it("a manifest never names a blob that is not durable, across deduplicating checkpoints", async () => {
    const result = await crashSweep({
      area: "checkpoint blobs",
      randomImages: scale(2),
      setup: (root) => writeTree(join(root, "ws"), BEFORE),
      workload: async (fs, root, log) => {
        const store = openCheckpointStore({ dataDir: join(root, "data"), fs, now: () => 1_700_000_000_000 });
        await log.op(() => store.createCheckpoint(join(root, "ws")));
        // Fully deduplicated against the first; then one changed and one new file.
        await log.op(() => store.createCheckpoint(join(root, "ws")));
        await log.op(async () => {
          writeTree(join(root, "ws"), { "a.txt": "alpha, edited\n", "extra.txt": "extra\n" }, fs);
          return store.createCheckpoint(join(root, "ws"));
        });
      },
      check: async (image: string, { acked, inflight }: ImageContext) => {
        const before = checkManifests(join(image, "data"));
        if (before.problem) return before.problem;
        const { manifests } = before;
        if (manifests < acked) return `${acked} checkpoints acknowledged, ${manifests} manifests survive`;
        if (manifests > (inflight ?? acked)) return `${manifests} manifests, more than were ever written`;
        // After the reboot, a new checkpoint deduplicates against whatever blobs survived: it must still be
        // whole (a blob visible under its hash before its bytes were durable would poison it).
        const store = openCheckpointStore({ dataDir: join(image, "data"), fs: scratchFileOps });
        await store.createCheckpoint(join(image, "ws"));
        return checkManifests(join(image, "data")).problem;
      },
    });
    reportSweep(result);
    expect(result.anomalies).toEqual([]);
    expect(result.violations).toEqual([]);
    expect(result.crashPoints).toBeGreaterThan(30);
  });

  it("every restored name holds its old or its new bytes, whenever the power goes", async () => {
    // The workspace's state before the restore, made durable through the model (op 2).
    const writeDurably = (fs: FileOps, root: string, files: Record<string, string>): void => {
      rmTree(fs, root);
      writeTree(root, files, fs);
      for (const path of Object.keys(files)) flush(fs, join(root, path));
      for (const dir of new Set(Object.keys(files).map((path) => join(root, path, "..")))) flush(fs, dir);
      flush(fs, root);
    };
    const result = await crashSweep({
      area: "restore apply",
      randomImages: scale(1),
      setup: (root) => writeTree(join(root, "ws"), BEFORE),
      workload: async (fs, root, log) => {
        const ws = join(root, "ws");
        const dataDir = join(root, "data");
        const store = openCheckpointStore({ dataDir, fs, now: () => 1_700_000_000_000 });
        const { checkpointId } = await log.op(() => store.createCheckpoint(ws));
        await log.op(() => writeDurably(fs, ws, AFTER));
        await log.op(() =>
          restoreCheckpoint({ dataDir, workspaceRoot: ws, checkpointId, fs, operationId: "op-pl" }),
        );
      },
      check: (image: string, { acked }: ImageContext) => {
        if (acked < 2) return null;
        const now = readTree(join(image, "ws"));
        for (const path of new Set([...Object.keys(now), ...Object.keys(BEFORE), ...Object.keys(AFTER)])) {
          const text = now[path];
          if (text === undefined) {
            // Only a name the restore creates or removes may be absent.
            if (path in BEFORE && path in AFTER) return `${path} vanished`;
          } else if (text !== AFTER[path] && text !== BEFORE[path]) {
            return `${path} holds ${JSON.stringify(text)}, neither its old nor its restored bytes`;
          }
        }
        if (acked === 3 && JSON.stringify(now) !== JSON.stringify(readTreeOf(BEFORE))) {
          return "the restore returned, but the workspace is not the checkpoint";
        }
        return null;
      },
    });
    reportSweep(result);
    expect(result.anomalies).toEqual([]);
    expect(result.violations).toEqual([]);
    expect(result.crashPoints).toBeGreaterThan(50);
  });

  /** Restores BEFORE over AFTER on the model; returns the workspace as a power loss right after
   * `workspace_applied` is journaled (nothing unflushed survives) would leave it. */
  async function workspaceAtApplied(durable: boolean): Promise<Record<string, string>> {
    const root = mkdtempSync(join(base, "restore-"));
    const ws = join(root, "ws");
    const dataDir = join(root, "data");
    writeTree(ws, BEFORE);
    const { checkpointId } = await openCheckpointStore({ dataDir, fs: scratchFileOps }).createCheckpoint(ws);
    rmSync(ws, { recursive: true });
    writeTree(ws, AFTER);
    const model = createPowerLossFs({ root });
    const image = join(base, `image-${durable}`);
    await restoreCheckpoint({
      dataDir,
      workspaceRoot: ws,
      checkpointId,
      fs: model.ops,
      durable,
      crash: {
        point(name) {
          if (name === "restore.after-workspace-applied")
            model.crashImage(image, { mode: "drop-all-unsynced" });
        },
      },
    });
    return readTree(join(image, "ws"));
  }

  it("workspace_applied is journaled only once every restored file and name is durable", async () => {
    expect(await workspaceAtApplied(true)).toEqual(BEFORE);
    // The check can fail: without the flushes, the same image has lost restored files or their contents.
    const unflushed = await workspaceAtApplied(false);
    const differing = Object.keys({ ...BEFORE, ...unflushed }).filter((p) => unflushed[p] !== BEFORE[p]);
    expect(differing.length).toBeGreaterThan(0);
    report(
      "power-loss",
      "sabotaged restore (no flushes): files it left wrong, so the check can fail",
      differing.length,
    );
  });
});
