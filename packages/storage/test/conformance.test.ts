// The assertions live in the shared suite (packages/storage/src/conformance): every backend runs the same ones.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describeStorageConformance } from "../src/conformance/index.js";
import { MAX_FILE_BOTS, STORE_WORKSPACES_DIR } from "../src/index.js";
import { open } from "./fixtures/file-backend.js";

describeStorageConformance({
  name: "file",
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
