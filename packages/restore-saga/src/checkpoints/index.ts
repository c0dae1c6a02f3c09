import { captureWorkspace, commitCheckpoint, createCheckpoint } from "./capture.js";
import { makeContext } from "./context.js";
import { importCheckpoint } from "./import.js";
import { listCheckpoints, readBlob, readVerifiedManifest } from "./read.js";
import { hasCheckpointsOf, retireCheckpoints } from "./retire.js";
import type { CheckpointStore, CheckpointStoreOptions } from "./types.js";

/** Largest single file a checkpoint holds (read whole into memory); a larger one is refused unread. */
export { MAX_CHECKPOINT_FILE_BYTES } from "../internal/tree.js";
export { assertDataDirOutside, canonicalWorkspaceRoot } from "./failures.js";
export type {
  CapturedWorkspace,
  CaptureOptions,
  CheckpointImport,
  CheckpointStore,
  CheckpointStoreOptions,
  CheckpointSummary,
  CreatedCheckpoint,
  VerifiedManifest,
} from "./types.js";

/**
 * The checkpoint store under `<dataDir>/checkpoints` (layout in context.ts). This only wires: the context
 * is built once and each call is a module's function of it (capture.ts, read.ts, retire.ts).
 */
export function openCheckpointStore(options: CheckpointStoreOptions): CheckpointStore {
  const ctx = makeContext(options);
  return Object.freeze({
    createCheckpoint: (workspaceRoot, createOptions) => createCheckpoint(ctx, workspaceRoot, createOptions),
    captureWorkspace: (workspaceRoot, captureOptions) => captureWorkspace(ctx, workspaceRoot, captureOptions),
    commitCheckpoint: (captured, createOptions) => commitCheckpoint(ctx, captured, createOptions),
    hasCheckpointsOf: (workspaceRoot) => hasCheckpointsOf(ctx, workspaceRoot),
    retireCheckpoints: (workspaceRoot) => retireCheckpoints(ctx, workspaceRoot),
    listCheckpoints: (workspaceRoot) => listCheckpoints(ctx, workspaceRoot),
    readManifest: async (checkpointId) => readVerifiedManifest(ctx, checkpointId).manifest,
    readVerifiedManifest: (checkpointId) => readVerifiedManifest(ctx, checkpointId),
    readBlob: (entry) => readBlob(ctx, entry),
    importCheckpoint: (input) => importCheckpoint(ctx, input),
  } satisfies CheckpointStore);
}
