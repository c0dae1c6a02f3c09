// The assertions live in the shared suite (packages/storage/src/conformance): every backend runs the same ones.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { expect, it } from "vitest";
import { describeStorageConformance } from "../src/conformance/index.js";
import { MAX_FILE_BOTS, STORE_WORKSPACES_DIR } from "../src/index.js";
import { open } from "./fixtures/file-backend.js";

describeStorageConformance({
  name: "file",
  changeToken: true,
  open,
  botLimit: MAX_FILE_BOTS,
  workerModule: fileURLToPath(new URL("./fixtures/file-backend.ts", import.meta.url)),
  crashPoints: [
    { point: "file:before-commit", leaves: "before" },
    { point: "file:after-commit", leaves: "after" },
  ],
  workspaceCrashPoints: [
    { point: "file:workspace-before-rename", leaves: "before" },
    { point: "file:workspace-after-rename", leaves: "after" },
  ],
  workspaces: {
    corruptBlob: (dataDir, sha256, bytes) =>
      writeFileSync(join(dataDir, STORE_WORKSPACES_DIR, "blobs", sha256), bytes),
  },
});

// The wrapper's own check: its fixture opens the backend this file is named for, with its workspaces, so the
// shared suite above cannot pass against another backend by a wrong fixture.
it("the fixture opens the file backend, workspaces included", async () => {
  const dataDir = mkdtempSync(join(tmpdir(), "conformance-kind-"));
  const storage = await open(dataDir);
  try {
    expect(storage.kind).toBe("file");
    expect(storage.workspaces).toBeDefined();
    expect((await storage.workspaces.head("bot-kind")).version).toBe(0);
  } finally {
    await storage.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});
