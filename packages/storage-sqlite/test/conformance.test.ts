// The assertions live in the shared suite (packages/storage/src/conformance): every backend runs the same ones.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describeStorageConformance } from "@drydock/storage/conformance";
import Database from "better-sqlite3";
import { expect, it } from "vitest";
import { SQLITE_FILE } from "../src/database.js";
import { open } from "./fixtures/sqlite-backend.js";

describeStorageConformance({
  name: "sqlite",
  changeToken: true,
  open,
  // A small configurable limit, so the limit test reaches it (the default is 1,000,000).
  botLimit: 5,
  // Above the file formats' 4,096, so the import test shows a row store is not held to a file's cap.
  rowLimit: 5_000,
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

// The wrapper's own check: its fixture opens the backend this file is named for, with its workspaces, so the
// shared suite above cannot pass against another backend by a wrong fixture.
it("the fixture opens the sqlite backend, workspaces included", async () => {
  const dataDir = mkdtempSync(join(tmpdir(), "conformance-kind-"));
  const storage = await open(dataDir);
  try {
    expect(storage.kind).toBe("sqlite");
    expect(storage.workspaces).toBeDefined();
    expect((await storage.workspaces.head("bot-kind")).version).toBe(0);
  } finally {
    await storage.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});
