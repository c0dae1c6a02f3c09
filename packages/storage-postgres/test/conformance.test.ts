// The assertions live in the shared suite (packages/storage/src/conformance): every backend runs the same ones.
import { fileURLToPath } from "node:url";
import { describeStorageConformance } from "@drydock/storage/conformance";
import pg from "pg";
import { beforeAll } from "vitest";
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
