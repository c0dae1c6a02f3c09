import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { inspectLock } from "@drydock/file-lock";
import { openCheckpointStore, restoreCheckpoint } from "@drydock/restore-saga";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type CrashImageOptions, createPowerLossFs, scratchFileOps } from "../src/index.js";

// Once a restore has journaled `mutation_started`, the workspace may be half-restored, and only its lock keeps
// other restores out until a fenced recovery settles it ("no retained workspace lock to take over" otherwise,
// while new restores run over the half-restored files). So the workspace lock must be on disk by then, in
// every image a power loss can leave: its owner flushed before link(2), its directory after.

let base: string;
beforeAll(() => {
  base = mkdtempSync(join(tmpdir(), "drydock-pl-retained-"));
});
afterAll(() => rmSync(base, { recursive: true, force: true }));

const IMAGES: CrashImageOptions[] = [
  { mode: "drop-all-unsynced" },
  { mode: "keep-all" },
  ...[1, 2, 3, 4].map((seed): CrashImageOptions => ({ mode: "random-subset", seed })),
];

describe("the workspace lock under power loss", () => {
  it("every image after mutation_started holds the saga's events and its workspace lock", async () => {
    const root = join(base, "run");
    mkdirSync(root);
    const ws = join(root, "ws");
    const dataDir = join(root, "data");
    mkdirSync(ws);
    writeFileSync(join(ws, "a.txt"), "after");
    const { checkpointId } = await openCheckpointStore({ dataDir, fs: scratchFileOps }).createCheckpoint(ws);
    writeFileSync(join(ws, "a.txt"), "before");
    const model = createPowerLossFs({ root });
    const images: string[] = [];
    await restoreCheckpoint({
      dataDir,
      workspaceRoot: ws,
      checkpointId,
      fs: model.ops,
      operationId: "op-pl",
      crash: {
        point(name) {
          if (name !== "restore.after-mutation-started") return;
          for (const options of IMAGES) {
            const image = join(base, `image-${images.length}`);
            model.crashImage(image, options);
            images.push(image);
          }
        },
      },
    });
    expect(images).toHaveLength(IMAGES.length);
    for (const [i, image] of images.entries()) {
      const sagas = join(image, "data", "restore-sagas");
      const shard = readdirSync(sagas).find((name) => name.startsWith("workspace-"));
      const events = shard ? readdirSync(join(sagas, shard, "op-pl")).filter((n) => n.endsWith(".json")) : [];
      expect(events, `image ${JSON.stringify(IMAGES[i])}`).toContain("000006-mutation_started.json");
      // The saga says files may have changed: the lock that keeps everyone else out must be there, whole.
      const locks = readdirSync(join(image, "data", "locks")).filter((n) =>
        /^ws-[0-9a-f]{64}\.lock$/.test(n),
      );
      expect(locks, `image ${JSON.stringify(IMAGES[i])}`).toHaveLength(1);
      const owner = inspectLock(join(image, "data", "locks", locks[0] as string), { fs: scratchFileOps });
      expect(owner?.payload?.transactionId).toBe("op-pl");
    }
  });
});
