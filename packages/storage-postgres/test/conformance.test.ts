// The assertions live in the shared suite (packages/storage/src/conformance): every backend runs the same ones.
import { fileURLToPath } from "node:url";
import { describeStorageConformance } from "@drydock/storage/conformance";
import { beforeAll } from "vitest";
import { open } from "./fixtures/postgres-backend.js";
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
});
