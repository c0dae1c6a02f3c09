import { randomUUID } from "node:crypto";
import { basename, dirname, isAbsolute, join, sep } from "node:path";
import { type FileOps, flushAncestry, isProcessLevelErrno, nodeFileOps } from "@drydock/file-lock";
import { isJsonJournalError, sweepStaleTemps, writeFileAtomic } from "@drydock/json-journal";
import { errnoOf, SagaError } from "./errors.js";
import { prettyCanonical, sha256Hex } from "./internal/canonical.js";
import { type CrashHook, noCrash } from "./internal/crash.js";
import {
  ensurePrivateDir,
  errnoBehind,
  flushBehind,
  fsyncPaths,
  isReadFailure,
  isTempName,
  lstatOrNull,
  MODE_BITS,
  readFailurePath,
  readRegularFile,
  refusalOf,
  removeQuietly,
  transientFailure,
  unresolvedPath,
  writeTemp,
} from "./internal/files.js";
import { MAX_CHECKPOINT_FILE_BYTES, treeDigest, walkTree } from "./internal/tree.js";
import {
  CHECKPOINT_ID_PATTERN,
  CHECKPOINT_MANIFEST_SCHEMA,
  type CheckpointManifest,
  CheckpointManifestSchema,
  type ManifestEntry,
} from "./schema.js";

/**
 * Checkpoints: `<dataDir>/checkpoints/manifests/<checkpointId>.json` (one manifest per checkpoint: path,
 * type, size, mode, sha256 of every entry) and `<dataDir>/checkpoints/blobs/<2 hex>/<64 hex>` (file
 * contents, content-addressed, so a file unchanged between checkpoints is stored once). Blobs are
 * verified against their hash every time they are read.
 */

const MAX_MANIFEST_BYTES = 64 * 1024 * 1024;

/** Largest single file a checkpoint holds (read whole into memory); a larger one is refused unread. */
export { MAX_CHECKPOINT_FILE_BYTES };

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
 */
const ABANDONED_TEMP_MS = 10 * 60 * 1000;

/**
 * Removes abandoned temps from one blob directory; best effort (a failure here fails nothing). `now` is the
 * real clock, compared with the file system's own mtimes (not the store's injectable clock).
 */
function sweepAbandonedTemps(fs: FileOps, dir: string, now: number): void {
  let names: string[];
  try {
    names = fs.readdirSync(dir);
  } catch {
    return;
  }
  for (const name of names) {
    if (!isTempName(name)) continue;
    const path = join(dir, name);
    try {
      if (now - fs.lstatSync(path).mtimeMs > ABANDONED_TEMP_MS) removeQuietly(fs, path);
    } catch {
      // Gone already, or unreadable: leave it.
    }
  }
}

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

export interface CheckpointStore {
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

function invalid(message: string): SagaError {
  return new SagaError({ code: "INVALID_ARGUMENT", message });
}

function corrupt(what: string, why: string, cause?: unknown): SagaError {
  return new SagaError({
    code: "CORRUPT",
    cause,
    message: `The checkpoint ${what} ${why}. It was left as it is; the checkpoint cannot be used to restore.`,
  });
}

/** The errno of a failed write: json-journal's errors carry it in their cause (their code is their own). */
function writeErrno(error: unknown): string {
  return (isJsonJournalError(error) ? errnoOf(error.cause) : errnoBehind(error)) ?? "error";
}

/**
 * Refuses a data directory inside the workspace `root` (canonical), judged by where it really is: the
 * realpath of the data directory, or of its nearest existing ancestor if it does not exist yet (a
 * symlink that leads into the workspace would otherwise pass, and a restore would delete its own saga
 * and lock).
 */
export function assertDataDirOutside(
  fs: FileOps,
  dataDir: string,
  root: string,
  what = "data directory",
): void {
  let real: string;
  try {
    let missing = "";
    let existing = dataDir;
    while (lstatOrNull(fs, existing) === null && dirname(existing) !== existing) {
      missing = join(basename(existing), missing);
      existing = dirname(existing);
    }
    real = join(fs.realpathSync(existing), missing);
  } catch (error) {
    throw unresolvedPath(what, dataDir, error);
  }
  if (real === root || real.startsWith(root + sep)) {
    throw invalid(
      `The ${what} ${dataDir}${real === dataDir ? "" : ` (really ${real})`} must not be inside the workspace ${root}: a restore would delete it. Use a ${what} outside the workspace.`,
    );
  }
}

export function canonicalWorkspaceRoot(fs: FileOps, workspaceRoot: string): string {
  if (typeof workspaceRoot !== "string" || !isAbsolute(workspaceRoot)) {
    throw invalid("A workspace root must be an absolute path.");
  }
  try {
    return fs.realpathSync(workspaceRoot);
  } catch (error) {
    throw unresolvedPath("workspace", workspaceRoot, error);
  }
}

export function openCheckpointStore(options: CheckpointStoreOptions): CheckpointStore {
  const fs = options.fs ?? nodeFileOps;
  const now = options.now ?? Date.now;
  const crash = options.crash ?? noCrash;
  const durable = options.durable ?? true;
  if (typeof options.dataDir !== "string" || !isAbsolute(options.dataDir)) {
    throw invalid("The checkpoint store needs an absolute dataDir.");
  }
  const root = join(options.dataDir, "checkpoints");
  const manifestsDir = join(root, "manifests");
  const blobsDir = join(root, "blobs");
  const blobPath = (hex: string): string => join(blobsDir, hex.slice(0, 2), hex);
  const manifestPath = (id: string): string => join(manifestsDir, `${id}.json`);

  function writeFailed(what: string, error: unknown): SagaError {
    if (error instanceof SagaError) return error;
    return new SagaError({
      code: "WRITE_FAILED",
      cause: error,
      message: `Writing ${what} failed (${writeErrno(error)}). The checkpoint was not created; check free space and retry.`,
    });
  }

  function readVerifiedManifest(checkpointId: string): VerifiedManifest {
    if (typeof checkpointId !== "string" || !CHECKPOINT_ID_PATTERN.test(checkpointId)) {
      throw invalid("A checkpoint id is 1-128 letters, digits, '-' or '_'.");
    }
    const path = manifestPath(checkpointId);
    const bytes = readRegularFile(fs, path, { maxBytes: MAX_MANIFEST_BYTES, what: "checkpoint manifest" });
    if (!bytes) {
      throw new SagaError({ code: "NOT_FOUND", message: `No checkpoint ${checkpointId} exists.` });
    }
    let value: unknown;
    try {
      value = JSON.parse(bytes.toString("utf8"));
    } catch (error) {
      throw corrupt(checkpointId, "manifest is not JSON", error);
    }
    const parsed = CheckpointManifestSchema.safeParse(value);
    if (!parsed.success) throw corrupt(checkpointId, "manifest does not match the manifest schema");
    const manifest = parsed.data;
    // Written before setuid/setgid were dropped (see MODE_BITS): they are never restored, nor compared.
    // The recorded modes are kept aside, to prove a plan an older version committed to (see the field).
    const recordedEntries = manifest.entries.some((entry) => (entry.mode & ~MODE_BITS) !== 0)
      ? manifest.entries.map((entry) => ({ ...entry }))
      : undefined;
    for (const entry of manifest.entries) entry.mode &= MODE_BITS;
    if (manifest.checkpointId !== checkpointId)
      throw corrupt(checkpointId, "manifest names another checkpoint");
    // Entries strictly sorted (so unique), every file's and dir's parent present as a dir entry.
    const dirs = new Set<string>();
    let files = 0;
    let total = 0;
    let previous = "";
    for (const entry of manifest.entries) {
      if (previous !== "" && !(previous < entry.path))
        throw corrupt(checkpointId, "manifest entries are not sorted");
      previous = entry.path;
      const slash = entry.path.lastIndexOf("/");
      if (slash >= 0 && !dirs.has(entry.path.slice(0, slash))) {
        throw corrupt(checkpointId, `manifest entry ${entry.path} has no parent directory entry`);
      }
      if (entry.type === "dir") dirs.add(entry.path);
      else {
        files += 1;
        total += entry.size;
      }
    }
    if (files !== manifest.files || total !== manifest.bytes) {
      throw corrupt(checkpointId, "manifest totals do not match its entries");
    }
    return {
      manifest,
      manifestDigest: `sha256:${sha256Hex(bytes)}`,
      treeDigest: treeDigest(manifest.entries),
      ...(recordedEntries ? { recordedEntries } : {}),
    };
  }

  /** Whether the blob at `path` holds exactly `bytes` (anything unreadable or odd about it: no). */
  function storedBytesEqual(path: string, bytes: Buffer): boolean {
    try {
      return (
        readRegularFile(fs, path, { maxBytes: bytes.length, what: "checkpoint blob" })?.equals(bytes) ?? false
      );
    } catch {
      return false;
    }
  }

  /**
   * The manifest file names (sorted) whose bytes name this workspace, verified or not: what
   * `retireCheckpoints` moves and `hasCheckpointsOf` looks for. Read as every reader here reads
   * (`readRegularFile`: never following a symlink, never blocking on a FIFO, bounded), but not verified: a
   * manifest that no longer verifies (or is hard-linked elsewhere) could verify again later and be listed
   * for whoever takes the path next, so it counts. One that is not JSON names nothing (it is never listed
   * either). One that cannot be read now throws (`isReadFailure`), so nobody takes "unreadable" for "none";
   * so does an entry that is no manifest file at all (a symlink, FIFO, directory, oversized file): whether
   * it names the workspace cannot be told, and only a person can move it away (CORRUPT, naming it).
   */
  function manifestsNaming(canonical: string): string[] {
    let names: string[];
    try {
      names = fs.readdirSync(manifestsDir);
    } catch (error) {
      if (errnoOf(error) === "ENOENT") return [];
      throw error;
    }
    const naming: string[] = [];
    for (const name of names.sort()) {
      const match = /^(.+)\.json$/.exec(name);
      if (!match || !CHECKPOINT_ID_PATTERN.test(match[1]!)) continue;
      const path = join(manifestsDir, name);
      let bytes: Buffer | null;
      try {
        bytes = readRegularFile(fs, path, {
          maxBytes: MAX_MANIFEST_BYTES,
          what: "checkpoint manifest",
          anyLinks: true,
        });
      } catch (error) {
        const refusal = refusalOf(error);
        if (refusal === undefined) throw error;
        throw new SagaError({
          code: "CORRUPT",
          cause: error,
          message: `The entry ${path} ${refusal}, so it is not a checkpoint manifest, and whether it names the workspace ${canonical} cannot be told. Nothing was changed; move it out of ${manifestsDir} by hand (it cannot be listed or restored), then retry.`,
        });
      }
      // Gone since the directory was listed (retired or removed meanwhile): it names nothing now.
      if (bytes === null) continue;
      let named: unknown;
      try {
        named = (JSON.parse(bytes.toString("utf8")) as { workspaceRoot?: unknown } | null)?.workspaceRoot;
      } catch (error) {
        if (error instanceof SyntaxError) continue;
        throw error;
      }
      if (named === canonical) naming.push(name);
    }
    return naming;
  }

  const captures = new WeakSet<CapturedWorkspace>();
  const sweptBlobDirs = new Set<string>();
  /**
   * Blobs whose names this store knows are durable: it wrote them, or flushed their directories after
   * finding them. A blob found under its hash may have been renamed there by a capture that failed or was
   * killed before flushing its directory, so a power loss could still take its name away: a checkpoint that
   * reuses a blob not in this set flushes its directory before the manifest names it (once per store).
   */
  const durableBlobs = new Set<string>();
  let ancestryFlushed = false;
  let manifestTempsSwept = false;

  /** Scans the workspace and stores every new blob durably; writes no manifest (see the interface). */
  async function captureWorkspace(
    workspaceRoot: string,
    captureOptions: CaptureOptions = {},
  ): Promise<CapturedWorkspace> {
    const canonical = canonicalWorkspaceRoot(fs, workspaceRoot);
    assertDataDirOutside(fs, options.dataDir, canonical);
    try {
      ensurePrivateDir(fs, root);
      ensurePrivateDir(fs, manifestsDir);
      ensurePrivateDir(fs, blobsDir);
      // Once per store: the path may exist without being durable (a process killed before it flushed, a
      // failed flush, someone else's `mkdir -p`); an acknowledged checkpoint must not vanish with it.
      // (The flush of checkpoints/, first of them, also covers blobs/ beside manifests/.)
      if (durable && !ancestryFlushed) {
        flushAncestry(fs, manifestsDir);
        ancestryFlushed = true;
      }
    } catch (error) {
      throw writeFailed("the checkpoint directories", error);
    }
    /** Blobs this capture has seen: true once written or compared with its bytes, false if trusted. */
    const known = new Map<string, boolean>();
    const blobDirs = new Set<string>();
    // Directories of reused blobs whose names may not be durable yet (see durableBlobs).
    const reusedDirs = new Set<string>();
    const reuse = (sha256: string): void => {
      if (durable && !durableBlobs.has(sha256)) reusedDirs.add(join(blobsDir, sha256.slice(0, 2)));
    };
    // A new blob is written to a private temp, flushed behind the scan (several at a time) and only then
    // renamed to its content address: a blob is never visible under its hash before its bytes are
    // durable, so a later checkpoint that deduplicates against it cannot point at a torn blob (the
    // power-loss sweep in @drydock/power-loss catches exactly that when the order is reversed).
    const temps = new Set<string>();
    const flusher = flushBehind(fs);
    const publish = (temp: string, path: string) => (): void => {
      fs.renameSync(temp, path);
      temps.delete(temp);
    };
    const entries: ManifestEntry[] = [];
    try {
      for (const { entry, bytes } of walkTree(fs, canonical, { strict: true })) {
        entries.push(entry as ManifestEntry);
        if (bytes === undefined) continue;
        const verify = captureOptions.verifyReused?.(entry) ?? false;
        const seen = known.get(entry.sha256);
        if (seen === true || (seen === false && !verify)) continue;
        const path = blobPath(entry.sha256);
        let temp: string;
        try {
          const existing = lstatOrNull(fs, path);
          // Deduplicated: the same content is already stored (verified by hash whenever it is read), or,
          // for the files the caller names, compared with the bytes just read; a damaged one is replaced.
          if (existing?.isFile() && existing.size === bytes.length) {
            if (!verify) {
              known.set(entry.sha256, false);
              reuse(entry.sha256);
              continue;
            }
            if (storedBytesEqual(path, bytes)) {
              known.set(entry.sha256, true);
              reuse(entry.sha256);
              continue;
            }
          }
          known.set(entry.sha256, true);
          const dir = join(blobsDir, entry.sha256.slice(0, 2));
          // Once per blob directory and checkpoint: the new directory's name is flushed with blobsDir below.
          // Once per blob directory and store: what a killed capture left there long ago is removed (a
          // killed process's temps meet the next store it opens; a sweep per capture would list the whole
          // blob directory every time).
          if (!blobDirs.has(dir)) ensurePrivateDir(fs, dir, { flushNew: false });
          if (!sweptBlobDirs.has(dir)) {
            sweepAbandonedTemps(fs, dir, Date.now());
            sweptBlobDirs.add(dir);
          }
          // `bytes` is a view of the walk's read buffer: written here, before the loop resumes the walk.
          temp = writeTemp(fs, dir, entry.sha256, bytes, 0o600, false);
          temps.add(temp);
          blobDirs.add(dir);
          if (!durable) publish(temp, path)();
        } catch (error) {
          throw writeFailed(`a checkpoint blob for ${entry.path}`, error);
        }
        if (durable) await flusher.add(temp, publish(temp, path));
      }
      entries.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
      captureOptions.whileFlushing?.(entries);
      await flusher.drain();
      // Before the manifest names them, so a manifest never outlives (power loss) a blob it needs: the
      // directories of the blobs written here, and of reused ones not known durable.
      const dirs = new Set([...blobDirs, ...reusedDirs]);
      if (durable && dirs.size > 0) await fsyncPaths(fs, [...[...dirs].sort(), blobsDir]);
      // Every blob this capture names is durable now: written and flushed, or reused and flushed above.
      if (durable) for (const sha256 of known.keys()) durableBlobs.add(sha256);
    } catch (error) {
      await flusher.settle();
      for (const temp of temps) removeQuietly(fs, temp);
      throw writeFailed("the checkpoint blobs", error);
    }
    // Crash window: blobs are stored but no manifest names them yet; they are unreferenced, harmless.
    crash.point("checkpoint.after-blobs");
    const captured = Object.freeze({ workspaceRoot: canonical, entries: Object.freeze(entries) });
    captures.add(captured);
    return captured;
  }

  /** Writes the manifest of a capture: from here the checkpoint exists. */
  function commitCheckpoint(
    captured: CapturedWorkspace,
    createOptions: { kind?: "user" | "safety" } = {},
  ): CreatedCheckpoint {
    // Only a capture made here: its blobs are known to be stored, so the manifest can name them.
    if (!captures.has(captured)) throw invalid("commitCheckpoint takes a capture made by this store.");
    const { workspaceRoot: canonical } = captured;
    const entries = [...captured.entries];
    const files = entries.filter((entry) => entry.type === "file");
    const checkpointId = `ckpt-${randomUUID()}`;
    const manifest: CheckpointManifest = {
      schema: CHECKPOINT_MANIFEST_SCHEMA,
      version: 1,
      checkpointId,
      workspaceRoot: canonical,
      createdAt: new Date(now()).toISOString(),
      kind: createOptions.kind ?? "user",
      files: files.length,
      bytes: files.reduce((sum, entry) => sum + (entry.type === "file" ? entry.size : 0), 0),
      entries,
    };
    const bytes = Buffer.from(prettyCanonical(manifest), "utf8");
    if (!manifestTempsSwept) {
      // Once per store: a checkpoint killed while writing its manifest left a temp beside the manifests
      // (never promoted: the checkpoint does not exist). Its writer dead and the temp 5 minutes old, it
      // is removed; a sweep that cannot list or remove is no reason to fail this checkpoint.
      manifestTempsSwept = true;
      try {
        sweepStaleTemps(manifestsDir, { fs });
      } catch {
        // Left for the next store.
      }
    }
    try {
      writeFileAtomic(manifestPath(checkpointId), bytes, { fs, mode: 0o600, durable });
    } catch (error) {
      if (isJsonJournalError(error) && error.code === "DIRECTORY_SYNC_FAILED") {
        // The rename happened: the checkpoint exists and is listed, only its name's durability is unknown.
        throw new SagaError({
          code: "WRITE_FAILED",
          cause: error,
          message: `Checkpoint ${checkpointId} was written and is visible (listed, restorable), but flushing the directory ${manifestsDir} failed (${writeErrno(error)}), so it may not survive a power loss. Check the disk; then treat ${checkpointId} as existing, or create another checkpoint to have one known durable.`,
        });
      }
      throw writeFailed(`the manifest of checkpoint ${checkpointId}`, error);
    }
    crash.point("checkpoint.after-manifest");
    return {
      checkpointId,
      files: manifest.files,
      bytes: manifest.bytes,
      manifestDigest: `sha256:${sha256Hex(bytes)}`,
    };
  }

  return Object.freeze({
    async createCheckpoint(workspaceRoot: string, createOptions: { kind?: "user" | "safety" } = {}) {
      return commitCheckpoint(await captureWorkspace(workspaceRoot), createOptions);
    },

    captureWorkspace,

    commitCheckpoint,

    async hasCheckpointsOf(workspaceRoot: string) {
      const canonical = canonicalWorkspaceRoot(fs, workspaceRoot);
      try {
        return manifestsNaming(canonical).length > 0;
      } catch (error) {
        // An entry that is no manifest file names itself and says what to do.
        if (SagaError.isInstance(error) && !isReadFailure(error)) throw error;
        const errno = errnoBehind(error) ?? "error";
        const path = readFailurePath(error) ?? manifestsDir;
        if (isProcessLevelErrno(errno)) {
          throw new SagaError({
            code: "LOCK_FAILED",
            cause: error,
            message: `The checkpoint manifests could not all be read just now (${errno}: ${path}; this process ran out of file descriptors or memory, or the call was interrupted), so whether ${canonical} still has checkpoints is unknown. That says nothing about the manifests; retry.`,
          });
        }
        throw new SagaError({
          code: "CORRUPT",
          cause: error,
          message: `The checkpoint manifests could not all be read (${errno}: ${path}), so whether ${canonical} still has checkpoints is unknown. Check the data directory's disk, then retry.`,
        });
      }
    },

    async retireCheckpoints(workspaceRoot: string) {
      const canonical = canonicalWorkspaceRoot(fs, workspaceRoot);
      const retiredDir = join(root, "retired");
      const retired: string[] = [];
      let names: string[];
      try {
        names = manifestsNaming(canonical);
      } catch (error) {
        // An entry that is no manifest file names itself and says what to do; a retry cannot cure it.
        if (SagaError.isInstance(error) && !isReadFailure(error)) throw error;
        const path = readFailurePath(error) ?? manifestsDir;
        throw new SagaError({
          code: "WRITE_FAILED",
          cause: error,
          message: `Retiring the checkpoints of ${canonical} failed before any was moved: ${path} could not be read (${errnoBehind(error) ?? "error"}). Nothing was changed. Retry; if it persists, check the data directory's disk.`,
        });
      }
      try {
        for (const name of names) {
          if (retired.length === 0) ensurePrivateDir(fs, retiredDir, { flushNew: durable });
          fs.renameSync(join(manifestsDir, name), join(retiredDir, name));
          retired.push(name.slice(0, -".json".length));
        }
        if (durable && retired.length > 0) await fsyncPaths(fs, [manifestsDir, retiredDir]);
      } catch (error) {
        throw new SagaError({
          code: "WRITE_FAILED",
          cause: error,
          message: `Retiring the checkpoints of ${canonical} failed after ${retired.length} (${errnoBehind(error) ?? "error"}). Nothing was lost: every manifest is in manifests/ or retired/. Retry; check the data directory's disk.`,
        });
      }
      return { retired };
    },

    async listCheckpoints(workspaceRoot: string) {
      const canonical = canonicalWorkspaceRoot(fs, workspaceRoot);
      let names: string[];
      try {
        names = fs.readdirSync(manifestsDir);
      } catch (error) {
        const errno = errnoOf(error);
        if (errno === "ENOENT") return [];
        if (isProcessLevelErrno(errno)) {
          throw transientFailure(
            `The checkpoint manifests directory ${manifestsDir}`,
            "listed",
            errno,
            error,
          );
        }
        throw corrupt("directory", `${manifestsDir} cannot be listed (${errno ?? "error"})`, error);
      }
      const result: CheckpointSummary[] = [];
      for (const name of names.sort()) {
        const match = /^(.+)\.json$/.exec(name);
        if (!match || !CHECKPOINT_ID_PATTERN.test(match[1]!)) continue;
        let manifest: CheckpointManifest;
        try {
          manifest = readVerifiedManifest(match[1]!).manifest;
        } catch (error) {
          // One that could not be read (an errno) may well be this workspace's: the listing fails, naming
          // it, rather than come back shorter. One that was read and refused (damaged, hostile, gone since
          // the directory was listed) cannot be told to belong here: left out, never guessed.
          if (isReadFailure(error)) throw error;
          continue;
        }
        if (manifest.workspaceRoot !== canonical) continue;
        const { checkpointId, createdAt, kind, files, bytes } = manifest;
        result.push({ checkpointId, workspaceRoot: canonical, createdAt, kind, files, bytes });
      }
      return result.sort((a, b) =>
        a.createdAt === b.createdAt
          ? a.checkpointId < b.checkpointId
            ? -1
            : 1
          : a.createdAt < b.createdAt
            ? -1
            : 1,
      );
    },

    async readManifest(checkpointId: string) {
      return readVerifiedManifest(checkpointId).manifest;
    },

    readVerifiedManifest,

    readBlob(entry: Extract<ManifestEntry, { type: "file" }>) {
      const bytes = readRegularFile(fs, blobPath(entry.sha256), {
        maxBytes: Math.max(entry.size, 0),
        what: `checkpoint blob for ${entry.path}`,
      });
      if (!bytes) throw corrupt(`blob for ${entry.path}`, "is missing");
      if (bytes.length !== entry.size || sha256Hex(bytes) !== entry.sha256) {
        throw corrupt(`blob for ${entry.path}`, "does not match its hash");
      }
      return bytes;
    },
  });
}
