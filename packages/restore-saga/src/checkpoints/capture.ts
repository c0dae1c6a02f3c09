import { randomUUID } from "node:crypto";
import { join } from "node:path";
import { type FileOps, flushAncestry } from "@drydock/file-lock";
import { isJsonJournalError, sweepStaleTemps, writeFileAtomic } from "@drydock/json-journal";
import { SagaError } from "../errors.js";
import { prettyCanonical, sha256Hex } from "../internal/canonical.js";
import {
  ensurePrivateDir,
  flushBehind,
  fsyncPaths,
  isTempName,
  lstatOrNull,
  readRegularFile,
  removeQuietly,
  writeTemp,
} from "../internal/files.js";
import { walkTree } from "../internal/tree.js";
import { CHECKPOINT_MANIFEST_SCHEMA, type CheckpointManifest, type ManifestEntry } from "../schema.js";
import type { CheckpointContext } from "./context.js";
import {
  assertDataDirOutside,
  canonicalWorkspaceRoot,
  invalid,
  writeErrno,
  writeFailed,
} from "./failures.js";
import type { CapturedWorkspace, CaptureOptions, CreatedCheckpoint } from "./types.js";

/** Taking a checkpoint: the workspace scanned and its new blobs stored durably, then the manifest written. */

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

/** Whether the blob at `path` holds exactly `bytes` (anything unreadable or odd about it: no). */
export function storedBytesEqual(ctx: CheckpointContext, path: string, bytes: Buffer): boolean {
  try {
    return (
      readRegularFile(ctx.fs, path, { maxBytes: bytes.length, what: "checkpoint blob" })?.equals(bytes) ??
      false
    );
  } catch {
    return false;
  }
}

/** Scans the workspace and stores every new blob durably; writes no manifest (see the interface). */
export async function captureWorkspace(
  ctx: CheckpointContext,
  workspaceRoot: string,
  captureOptions: CaptureOptions = {},
): Promise<CapturedWorkspace> {
  const canonical = canonicalWorkspaceRoot(ctx.fs, workspaceRoot);
  assertDataDirOutside(ctx.fs, ctx.dataDir, canonical);
  try {
    ensurePrivateDir(ctx.fs, ctx.checkpointsDir);
    ensurePrivateDir(ctx.fs, ctx.manifestsDir);
    ensurePrivateDir(ctx.fs, ctx.blobsDir);
    // Once per store: the path may exist without being durable (a process killed before it flushed, a
    // failed flush, someone else's `mkdir -p`); an acknowledged checkpoint must not vanish with it.
    // (The flush of checkpoints/, first of them, also covers blobs/ beside manifests/.)
    if (ctx.durable && !ctx.ancestryFlushed) {
      flushAncestry(ctx.fs, ctx.manifestsDir);
      ctx.ancestryFlushed = true;
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
    if (ctx.durable && !ctx.durableBlobs.has(sha256)) reusedDirs.add(join(ctx.blobsDir, sha256.slice(0, 2)));
  };
  // A new blob is written to a private temp, flushed behind the scan (several at a time) and only then
  // renamed to its content address: a blob is never visible under its hash before its bytes are
  // durable, so a later checkpoint that deduplicates against it cannot point at a torn blob (the
  // power-loss sweep in @drydock/power-loss catches exactly that when the order is reversed).
  const temps = new Set<string>();
  const flusher = flushBehind(ctx.fs);
  const publish = (temp: string, path: string) => (): void => {
    ctx.fs.renameSync(temp, path);
    temps.delete(temp);
  };
  const entries: ManifestEntry[] = [];
  try {
    for (const { entry, bytes } of walkTree(ctx.fs, canonical, { strict: true })) {
      entries.push(entry as ManifestEntry);
      if (bytes === undefined) continue;
      const verify = captureOptions.verifyReused?.(entry) ?? false;
      const seen = known.get(entry.sha256);
      if (seen === true || (seen === false && !verify)) continue;
      const path = ctx.blobPath(entry.sha256);
      let temp: string;
      try {
        const existing = lstatOrNull(ctx.fs, path);
        // Deduplicated: the same content is already stored (verified by hash whenever it is read), or,
        // for the files the caller names, compared with the bytes just read; a damaged one is replaced.
        if (existing?.isFile() && existing.size === bytes.length) {
          if (!verify) {
            known.set(entry.sha256, false);
            reuse(entry.sha256);
            continue;
          }
          if (storedBytesEqual(ctx, path, bytes)) {
            known.set(entry.sha256, true);
            reuse(entry.sha256);
            continue;
          }
        }
        known.set(entry.sha256, true);
        const dir = join(ctx.blobsDir, entry.sha256.slice(0, 2));
        // Once per blob directory and checkpoint: the new directory's name is flushed with blobsDir below.
        // Once per blob directory and store: what a killed capture left there long ago is removed (a
        // killed process's temps meet the next store it opens; a sweep per capture would list the whole
        // blob directory every time).
        if (!blobDirs.has(dir)) ensurePrivateDir(ctx.fs, dir, { flushNew: false });
        if (!ctx.sweptBlobDirs.has(dir)) {
          sweepAbandonedTemps(ctx.fs, dir, Date.now());
          ctx.sweptBlobDirs.add(dir);
        }
        // `bytes` is a view of the walk's read buffer: written here, before the loop resumes the walk.
        temp = writeTemp(ctx.fs, dir, entry.sha256, bytes, 0o600, false);
        temps.add(temp);
        blobDirs.add(dir);
        if (!ctx.durable) publish(temp, path)();
      } catch (error) {
        throw writeFailed(`a checkpoint blob for ${entry.path}`, error);
      }
      if (ctx.durable) await flusher.add(temp, publish(temp, path));
    }
    entries.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
    captureOptions.whileFlushing?.(entries);
    await flusher.drain();
    // Before the manifest names them, so a manifest never outlives (power loss) a blob it needs: the
    // directories of the blobs written here, and of reused ones not known durable.
    const dirs = new Set([...blobDirs, ...reusedDirs]);
    if (ctx.durable && dirs.size > 0) await fsyncPaths(ctx.fs, [...[...dirs].sort(), ctx.blobsDir]);
    // Every blob this capture names is durable now: written and flushed, or reused and flushed above.
    if (ctx.durable) for (const sha256 of known.keys()) ctx.durableBlobs.add(sha256);
  } catch (error) {
    await flusher.settle();
    for (const temp of temps) removeQuietly(ctx.fs, temp);
    throw writeFailed("the checkpoint blobs", error);
  }
  // Crash window: blobs are stored but no manifest names them yet; they are unreferenced, harmless.
  ctx.crash.point("checkpoint.after-blobs");
  const captured = Object.freeze({ workspaceRoot: canonical, entries: Object.freeze(entries) });
  ctx.captures.add(captured);
  return captured;
}

/** Writes the manifest of a capture: from here the checkpoint exists. */
export function commitCheckpoint(
  ctx: CheckpointContext,
  captured: CapturedWorkspace,
  createOptions: { kind?: "user" | "safety" } = {},
): CreatedCheckpoint {
  // Only a capture made here: its blobs are known to be stored, so the manifest can name them.
  if (!ctx.captures.has(captured)) throw invalid("commitCheckpoint takes a capture made by this store.");
  const { workspaceRoot: canonical } = captured;
  const entries = [...captured.entries];
  const files = entries.filter((entry) => entry.type === "file");
  const checkpointId = `ckpt-${randomUUID()}`;
  const manifest: CheckpointManifest = {
    schema: CHECKPOINT_MANIFEST_SCHEMA,
    version: 1,
    checkpointId,
    workspaceRoot: canonical,
    createdAt: new Date(ctx.now()).toISOString(),
    kind: createOptions.kind ?? "user",
    files: files.length,
    bytes: files.reduce((sum, entry) => sum + (entry.type === "file" ? entry.size : 0), 0),
    entries,
  };
  const bytes = Buffer.from(prettyCanonical(manifest), "utf8");
  if (!ctx.manifestTempsSwept) {
    // Once per store: a checkpoint killed while writing its manifest left a temp beside the manifests
    // (never promoted: the checkpoint does not exist). Its writer dead and the temp 5 minutes old, it
    // is removed; a sweep that cannot list or remove is no reason to fail this checkpoint.
    ctx.manifestTempsSwept = true;
    try {
      sweepStaleTemps(ctx.manifestsDir, { fs: ctx.fs });
    } catch {
      // Left for the next store.
    }
  }
  try {
    writeFileAtomic(ctx.manifestPath(checkpointId), bytes, { fs: ctx.fs, mode: 0o600, durable: ctx.durable });
  } catch (error) {
    if (isJsonJournalError(error) && error.code === "DIRECTORY_SYNC_FAILED") {
      // The rename happened: the checkpoint exists and is listed, only its name's durability is unknown.
      throw new SagaError({
        code: "WRITE_FAILED",
        cause: error,
        message: `Checkpoint ${checkpointId} was written and is visible (listed, restorable), but flushing the directory ${ctx.manifestsDir} failed (${writeErrno(error)}), so it may not survive a power loss. Check the disk; then treat ${checkpointId} as existing, or create another checkpoint to have one known durable.`,
      });
    }
    throw writeFailed(`the manifest of checkpoint ${checkpointId}`, error);
  }
  ctx.crash.point("checkpoint.after-manifest");
  return {
    checkpointId,
    files: manifest.files,
    bytes: manifest.bytes,
    manifestDigest: `sha256:${sha256Hex(bytes)}`,
  };
}

export async function createCheckpoint(
  ctx: CheckpointContext,
  workspaceRoot: string,
  createOptions: { kind?: "user" | "safety" } = {},
): Promise<CreatedCheckpoint> {
  return commitCheckpoint(ctx, await captureWorkspace(ctx, workspaceRoot), createOptions);
}
