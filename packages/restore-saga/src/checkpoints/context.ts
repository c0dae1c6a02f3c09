import { isAbsolute, join } from "node:path";
import { CHECKPOINTS_DIR } from "@drydock/facts";
import { type FileOps, nodeFileOps } from "@drydock/file-lock";
import { type CrashHook, noCrash } from "../internal/crash.js";
import { invalid } from "./failures.js";
import type { CapturedWorkspace, CheckpointStoreOptions } from "./types.js";

/**
 * Checkpoints: `<dataDir>/checkpoints/manifests/<checkpointId>.json` (one manifest per checkpoint: path,
 * type, size, mode, sha256 of every entry) and `<dataDir>/checkpoints/blobs/<2 hex>/<64 hex>` (file
 * contents, content-addressed, so a file unchanged between checkpoints is stored once). Blobs are
 * verified against their hash every time they are read. Retired manifests go to
 * `<dataDir>/checkpoints/retired/`.
 *
 * What every module of the checkpoint store shares: its options, that layout, and what it has learnt
 * (the captures it made, the blob directories swept, the blobs known durable, the once-per-store flags).
 */
export interface CheckpointContext {
  readonly fs: FileOps;
  readonly now: () => number;
  readonly crash: CrashHook;
  readonly durable: boolean;
  readonly dataDir: string;
  /** `<dataDir>/checkpoints`. */
  readonly checkpointsDir: string;
  readonly manifestsDir: string;
  readonly blobsDir: string;
  /** Where retired manifests go. */
  readonly retiredDir: string;
  blobPath(hex: string): string;
  manifestPath(id: string): string;
  /** The captures this store made (only those can be committed). */
  readonly captures: WeakSet<CapturedWorkspace>;
  readonly sweptBlobDirs: Set<string>;
  /**
   * Blobs whose names this store knows are durable: it wrote them, or flushed their directories after
   * finding them. A blob found under its hash may have been renamed there by a capture that failed or was
   * killed before flushing its directory, so a power loss could still take its name away: a checkpoint that
   * reuses a blob not in this set flushes its directory before the manifest names it (once per store).
   */
  readonly durableBlobs: Set<string>;
  ancestryFlushed: boolean;
  manifestTempsSwept: boolean;
}

export function makeContext(options: CheckpointStoreOptions): CheckpointContext {
  if (typeof options.dataDir !== "string" || !isAbsolute(options.dataDir)) {
    throw invalid("The checkpoint store needs an absolute dataDir.");
  }
  const checkpointsDir = join(options.dataDir, CHECKPOINTS_DIR);
  const manifestsDir = join(checkpointsDir, "manifests");
  const blobsDir = join(checkpointsDir, "blobs");
  return {
    fs: options.fs ?? nodeFileOps,
    now: options.now ?? Date.now,
    crash: options.crash ?? noCrash,
    durable: options.durable ?? true,
    dataDir: options.dataDir,
    checkpointsDir,
    manifestsDir,
    blobsDir,
    retiredDir: join(checkpointsDir, "retired"),
    blobPath: (hex) => join(blobsDir, hex.slice(0, 2), hex),
    manifestPath: (id) => join(manifestsDir, `${id}.json`),
    captures: new WeakSet<CapturedWorkspace>(),
    sweptBlobDirs: new Set<string>(),
    durableBlobs: new Set<string>(),
    ancestryFlushed: false,
    manifestTempsSwept: false,
  };
}
