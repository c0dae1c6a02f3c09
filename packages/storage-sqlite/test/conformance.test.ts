// The assertions live in the shared suite (packages/storage/src/conformance): every backend runs the same ones.
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describeStorageConformance } from "@drydock/storage/conformance";
import Database from "better-sqlite3";
import { SQLITE_FILE } from "../src/database.js";
import { open } from "./fixtures/sqlite-backend.js";

describeStorageConformance({
  name: "sqlite",
  open,
  // A small configurable limit, so the limit test reaches it (the default is 1,000,000).
  botLimit: 5,
  workerModule: fileURLToPath(new URL("./fixtures/sqlite-backend.ts", import.meta.url)),
  crashPoints: [
    { point: "sqlite:after-begin", leaves: "before" },
    { point: "sqlite:before-commit", leaves: "before" },
    { point: "sqlite:after-commit", leaves: "after" },
  ],
  workspaces: {
    corruptBlob(dataDir, sha256, bytes) {
      const db = new Database(join(dataDir, SQLITE_FILE), { timeout: 10_000 });
      try {
        db.prepare("UPDATE ws_blobs SET bytes = ? WHERE sha256 = ?").run(Buffer.from(bytes), sha256);
      } finally {
        db.close();
      }
    },
  },
});
