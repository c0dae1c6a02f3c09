// The assertions live in the shared suite (packages/storage/src/conformance): every backend runs the same ones.
import { fileURLToPath } from "node:url";
import { describeStorageConformance } from "../src/conformance/index.js";
import { MAX_FILE_BOTS } from "../src/index.js";
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
});
