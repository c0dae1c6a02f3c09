// The assertions live in the shared suite (packages/storage/src/conformance): every backend runs the same ones.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describeStorageConformance } from "@drydock/storage/conformance";
import pg from "pg";
import { beforeAll, expect, it } from "vitest";
import { open, schemaFor } from "./fixtures/postgres-backend.js";
import { freshDatabase } from "./helpers.js";

beforeAll(async () => {
  await freshDatabase();
});

describeStorageConformance({
  name: "postgres",
  open,
  // The small limit the fixture opens it with (the default is 1,000,000).
  botLimit: 5,
  // Above the file formats' 4,096, so the import test shows a row store is not held to a file's cap.
  rowLimit: 5_000,
  workerModule: fileURLToPath(new URL("./fixtures/postgres-backend.ts", import.meta.url)),
  crashPoints: [
    { point: "postgres:after-begin", leaves: "before" },
    { point: "postgres:before-commit", leaves: "before" },
    { point: "postgres:after-commit", leaves: "after" },
  ],
  workspaces: {
    async corruptBlob(dataDir, sha256, bytes) {
      const client = new pg.Client({ connectionString: process.env.DRYDOCK_TEST_POSTGRES_URL });
      client.on("error", () => {});
      await client.connect();
      try {
        await client.query(
          `UPDATE ${schemaFor(dataDir)}.ws_blobs SET bytes = $1::bytea, size = length($1::bytea) WHERE sha256 = $2`,
          [Buffer.from(bytes), sha256],
        );
      } finally {
        await client.end();
      }
    },
  },
});

// The wrapper's own check: its fixture opens the backend this file is named for, with its workspaces, so the
// shared suite above cannot pass against another backend by a wrong fixture.
it("the fixture opens the postgres backend, workspaces included", async () => {
  const dataDir = mkdtempSync(join(tmpdir(), "conformance-kind-"));
  const storage = await open(dataDir);
  try {
    expect(storage.kind).toBe("postgres");
    expect(storage.workspaces).toBeDefined();
    expect((await storage.workspaces.head("bot-kind")).version).toBe(0);
  } finally {
    await storage.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});
