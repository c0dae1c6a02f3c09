// The assertions live in the shared suite (packages/storage/src/conformance): every backend runs the same ones.
import { fileURLToPath } from "node:url";
import { describeStorageConformance } from "@drydock/storage/conformance";
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
});
