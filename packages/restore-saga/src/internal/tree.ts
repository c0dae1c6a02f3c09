import { constants } from "node:fs";
import { join } from "node:path";
import type { FileOps } from "@drydock/file-lock";
import { errnoOf, SagaError } from "../errors.js";
import type { ManifestEntry } from "../schema.js";
import { domainDigest, sha256Hex } from "./canonical.js";
import { closeQuietly, MODE_BITS, type ReadScratch, readWhole } from "./files.js";

const { O_RDONLY, O_NOFOLLOW } = constants;

/** Bounds a walk: a workspace with more entries than this is refused rather than read without end. */
export const MAX_TREE_ENTRIES = 200_000;

/** Largest single file a checkpoint holds (read whole into memory); a larger one is never read. */
export const MAX_CHECKPOINT_FILE_BYTES = 512 * 1024 * 1024;

/** One entry of a live workspace scan: a manifest entry, or something a checkpoint cannot hold. */
export type ScannedEntry = ManifestEntry | { type: "other"; path: string };

const TREE_DOMAIN = "drydock-workspace-tree-v1";

/** Digest of a tree (manifest entries or a scan), independent of the order entries were found in. */
export function treeDigest(entries: readonly ScannedEntry[]): string {
  const sorted = [...entries].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  return domainDigest(TREE_DOMAIN, sorted);
}

function ioFailure(path: string, error: unknown): SagaError {
  return new SagaError({
    code: "WRITE_FAILED",
    cause: error,
    message: `The workspace entry ${path} could not be read (${errnoOf(error) ?? "error"}). Nothing was changed by this step; check the disk and retry.`,
  });
}

/**
 * Reads a regular file without following a symlink at its last component, into `scratch` (so the result
 * is valid only until the next read through it; see `ReadScratch`). Null, with nothing read, for a file
 * larger than MAX_CHECKPOINT_FILE_BYTES (its size is taken from fstat of the opened file, and a file that
 * grows past the limit while it is read is null too).
 */
function readFileNoFollow(fs: FileOps, path: string, scratch: ReadScratch): Buffer | null {
  let fd: number;
  try {
    fd = fs.openSync(path, O_RDONLY | O_NOFOLLOW);
  } catch (error) {
    throw ioFailure(path, error);
  }
  try {
    const stat = fs.fstatSync(fd);
    if (!stat.isFile())
      throw ioFailure(path, Object.assign(new Error("not a regular file"), { code: "EINVAL" }));
    if (stat.size > MAX_CHECKPOINT_FILE_BYTES) return null;
    return readWhole(fs, fd, stat.size, MAX_CHECKPOINT_FILE_BYTES, scratch);
  } catch (error) {
    if (error instanceof SagaError) throw error;
    if (error instanceof RangeError) return null;
    throw ioFailure(path, error);
  } finally {
    closeQuietly(fs, fd);
  }
}

export interface ScanOptions {
  /**
   * Refuse symlinks and special files (INVALID_ARGUMENT) and files over MAX_CHECKPOINT_FILE_BYTES
   * (LIMIT), as a checkpoint must, instead of reporting them as `other` (a plan, a verification).
   */
  strict: boolean;
}

/**
 * One scanned entry; a regular file comes with the exact bytes that were hashed. Those bytes live in the
 * walk's one read buffer: valid until the walk is resumed, so a caller uses them (writes a blob) before it
 * asks for the next entry, and copies them to keep them.
 */
export type WalkedEntry =
  | { entry: Extract<ManifestEntry, { type: "file" }>; bytes: Buffer }
  | { entry: Exclude<ScannedEntry, { type: "file" }>; bytes?: undefined };

/**
 * Walks a workspace without following symlinks, in path order, hashing every file, and yields entry by
 * entry, so a caller can act on (and await between) files; `scanTree` collects it. Holds one file's bytes
 * at a time, in one buffer of its own that it reuses from file to file (never shared with another walk).
 */
export function* walkTree(fs: FileOps, root: string, options: ScanOptions): Generator<WalkedEntry> {
  let count = 0;
  const scratch: ReadScratch = { buffer: Buffer.alloc(0) };
  function* walk(relDir: string): Generator<WalkedEntry> {
    const absDir = relDir === "" ? root : join(root, relDir);
    let names: string[];
    try {
      names = fs.readdirSync(absDir);
    } catch (error) {
      throw ioFailure(absDir, error);
    }
    for (const name of names.sort()) {
      const rel = relDir === "" ? name : `${relDir}/${name}`;
      const abs = join(root, rel);
      if (count >= MAX_TREE_ENTRIES) {
        throw new SagaError({
          code: "LIMIT",
          message: `The workspace ${root} has more than ${MAX_TREE_ENTRIES} entries; it cannot be checkpointed or restored.`,
        });
      }
      count += 1;
      let stat: ReturnType<FileOps["lstatSync"]>;
      try {
        stat = fs.lstatSync(abs);
      } catch (error) {
        throw ioFailure(abs, error);
      }
      const mode = stat.mode & MODE_BITS;
      const bytes = stat.isFile() ? readFileNoFollow(fs, abs, scratch) : undefined;
      if (stat.isDirectory()) {
        yield { entry: { type: "dir", path: rel, mode } };
        yield* walk(rel);
      } else if (bytes) {
        yield {
          entry: { type: "file", path: rel, size: bytes.length, mode, sha256: sha256Hex(bytes) },
          bytes,
        };
      } else if (bytes === null && options.strict) {
        throw new SagaError({
          code: "LIMIT",
          message: `${rel} is larger than ${MAX_CHECKPOINT_FILE_BYTES} bytes; it cannot be checkpointed. Move it out of the workspace ${root} (or make it smaller) and retry.`,
        });
      } else if (options.strict) {
        throw new SagaError({
          code: "INVALID_ARGUMENT",
          message: `The workspace entry ${abs} is a symlink or special file; checkpoints hold only files and directories. Replace it with a regular file or remove it.`,
        });
      } else {
        yield { entry: { type: "other", path: rel } };
      }
    }
  }
  yield* walk("");
}

/** Every entry of the workspace (see `walkTree`), sorted by path: exactly what is on disk now. */
export function scanTree(fs: FileOps, root: string, options: ScanOptions): ScannedEntry[] {
  const entries: ScannedEntry[] = [];
  for (const { entry } of walkTree(fs, root, options)) entries.push(entry);
  return entries.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}
