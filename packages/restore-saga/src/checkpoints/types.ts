import type { FileOps } from "@drydock/file-lock";
import type { CrashHook } from "../internal/crash.js";
import type { CheckpointManifest, ManifestEntry } from "../schema.js";

export interface CheckpointStoreOptions {
  dataDir: string;
  fs?: FileOps;
  now?: () => number;
  /** Crash points `checkpoint.*` (tests only). */
  crash?: CrashHook;
  /**
   * Flush blobs, manifests and their directories (default true). `false` keeps every write atomic
   * (a crashed process never leaves a torn file) but not durable across a power loss: for tests and
   * throwaway data only.
   */
  durable?: boolean;
}

export interface CreatedCheckpoint {
  checkpointId: string;
  files: number;
  bytes: number;
  /** `sha256:` + hex of the manifest file's bytes; a restore saga records it. */
  manifestDigest: string;
}

export interface CheckpointSummary {
  checkpointId: string;
  workspaceRoot: string;
  createdAt: string;
  kind: "user" | "safety";
  files: number;
  bytes: number;
}

export interface VerifiedManifest {
  manifest: CheckpointManifest;
  manifestDigest: string;
  /** Digest of the tree the manifest describes (compare with a scan of the workspace). */
  treeDigest: string;
  /**
   * The entries with the modes as recorded, only when some recorded mode carried setuid/setgid bits (a
   * manifest written before those were dropped). A plan an older version committed to was computed from
   * these: `manifest.entries` (masked) would not reproduce its digest.
   */
  recordedEntries?: CheckpointManifest["entries"];
}

/**
 * A blob temp lives from its write until its flush completes (seconds); one this old was left by a capture
 * that was killed, and is never promoted. Age, not the pid in its name, decides: processes in other pid
 * namespaces (containers sharing the data directory) cannot be asked whether they still run.

/** A scanned workspace whose blobs are all stored and durable, not yet a checkpoint (no manifest). */
export interface CapturedWorkspace {
  readonly workspaceRoot: string;
  /** Sorted by path, as a manifest holds them. */
  readonly entries: readonly ManifestEntry[];
}

export interface CaptureOptions {
  /**
   * Runs once the scan is done, with its entries, while the last blob flushes are still on their way to
   * the disk (a restore plans and checks its target's blobs here, off the critical path). If it throws,
   * the capture is abandoned (its unpublished temps removed) and the error propagates.
   */
  whileFlushing?: (entries: readonly ManifestEntry[]) => void;
  /**
   * Which files must not be deduplicated against a stored blob unchecked (default: none; a blob of the
   * same name and size is trusted, and verified whenever it is read). For each of these whose blob is
   * already stored, the blob is compared with the bytes just read and, if it differs (damaged), replaced
   * by them atomically and durably, like a new blob; if that fails, the capture fails. A restore passes
   * the files it will change, whose blobs its rollback needs, so only those are read back.
   */
  verifyReused?: (entry: Extract<ManifestEntry, { type: "file" }>) => boolean;
}

/** A checkpoint taken elsewhere (a postgres store), for `CheckpointStore.importCheckpoint`. */
export interface CheckpointImport {
  /** Kept as it is (the original id). */
  checkpointId: string;
  /** The local workspace it belongs to (must exist, outside the data directory's checkpoints). */
  workspaceRoot: string;
  /** The original creation time, ms since the epoch. */
  createdAt: number;
  kind?: "user" | "safety";
  /** Its files (directories are implied by their paths and recorded with mode 0755). */
  files: { path: string; size: number; mode: number; sha256: string }[];
  /** The bytes of every file, by sha256; each is verified before anything is written. */
  blobs: ReadonlyMap<string, Uint8Array>;
}

export interface CheckpointStore {
  /**
   * Writes a checkpoint taken elsewhere under its original id and createdAt (`drydock storage migrate` out
   * of postgres): every blob verified against its sha256, blobs durable before the manifest. Idempotent for
   * the same checkpoint ("unchanged"); a different one under the same id is ALREADY_EXISTS, nothing changed.
   */
  importCheckpoint(
    input: CheckpointImport,
  ): Promise<{ checkpointId: string; outcome: "imported" | "unchanged" }>;
  /** `captureWorkspace` then `commitCheckpoint`. */
  createCheckpoint(workspaceRoot: string, options?: { kind?: "user" | "safety" }): Promise<CreatedCheckpoint>;
  /**
   * The first half of `createCheckpoint`: one scan of the workspace that stores (and flushes) every new
   * blob but writes no manifest, so nothing names it yet. A restore plans from this scan and commits it as
   * its safety checkpoint only once it will change the workspace: one read of the workspace serves both.
   */
  captureWorkspace(workspaceRoot: string, options?: CaptureOptions): Promise<CapturedWorkspace>;
  /** The second half: writes the manifest of a capture. */
  commitCheckpoint(captured: CapturedWorkspace, options?: { kind?: "user" | "safety" }): CreatedCheckpoint;
  /** This workspace's checkpoints, oldest first. Unreadable manifests are skipped, never repaired. */
  listCheckpoints(workspaceRoot: string): Promise<CheckpointSummary[]>;
  /**
   * Takes every checkpoint of this workspace out of use for good, keeping it: each manifest is moved from
   * `manifests/` to `retired/` (durably), so it is no longer listed, read or restored (NOT_FOUND), and a
   * later workspace at the same path (a new bot under a deleted bot's id) does not inherit it. Idempotent.
   * Every manifest whose bytes name this workspace moves, verified or not; one that cannot be read fails
   * the call (WRITE_FAILED: retry), one that is not JSON stays (it is never listed). Returns the ids moved.
   */
  retireCheckpoints(workspaceRoot: string): Promise<{ retired: string[] }>;
  /**
   * Whether any manifest names this workspace, verified or not (what `retireCheckpoints` would move); a
   * manifest that cannot be read now is CORRUPT (unknown), never "none". For deciding whether a retirement
   * is left to finish.
   */
  hasCheckpointsOf(workspaceRoot: string): Promise<boolean>;
  readManifest(checkpointId: string): Promise<CheckpointManifest>;
  /** The manifest with its digests; CORRUPT if it is inconsistent. */
  readVerifiedManifest(checkpointId: string): VerifiedManifest;
  /** A file's content, verified against its hash (CORRUPT on any difference). */
  readBlob(entry: Extract<ManifestEntry, { type: "file" }>): Buffer;
}
