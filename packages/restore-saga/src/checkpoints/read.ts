import { isProcessLevelErrno } from "@drydock/file-lock";
import { errnoOf, SagaError } from "../errors.js";
import { sha256Hex } from "../internal/canonical.js";
import { isReadFailure, MODE_BITS, readRegularFile, transientFailure } from "../internal/files.js";
import { treeDigest } from "../internal/tree.js";
import {
  CHECKPOINT_ID_PATTERN,
  type CheckpointManifest,
  CheckpointManifestSchema,
  type ManifestEntry,
} from "../schema.js";
import type { CheckpointContext } from "./context.js";
import { canonicalWorkspaceRoot, corrupt, invalid } from "./failures.js";
import type { CheckpointSummary, VerifiedManifest } from "./types.js";

/** Reading checkpoints back: a manifest verified, a blob checked against its hash, a workspace's list. */

export const MAX_MANIFEST_BYTES = 64 * 1024 * 1024;

export function readVerifiedManifest(ctx: CheckpointContext, checkpointId: string): VerifiedManifest {
  if (typeof checkpointId !== "string" || !CHECKPOINT_ID_PATTERN.test(checkpointId)) {
    throw invalid("A checkpoint id is 1-128 letters, digits, '-' or '_'.");
  }
  const path = ctx.manifestPath(checkpointId);
  const bytes = readRegularFile(ctx.fs, path, { maxBytes: MAX_MANIFEST_BYTES, what: "checkpoint manifest" });
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

export function readBlob(ctx: CheckpointContext, entry: Extract<ManifestEntry, { type: "file" }>): Buffer {
  const bytes = readRegularFile(ctx.fs, ctx.blobPath(entry.sha256), {
    maxBytes: Math.max(entry.size, 0),
    what: `checkpoint blob for ${entry.path}`,
  });
  if (!bytes) throw corrupt(`blob for ${entry.path}`, "is missing");
  if (bytes.length !== entry.size || sha256Hex(bytes) !== entry.sha256) {
    throw corrupt(`blob for ${entry.path}`, "does not match its hash");
  }
  return bytes;
}

export async function listCheckpoints(
  ctx: CheckpointContext,
  workspaceRoot: string,
): Promise<CheckpointSummary[]> {
  const canonical = canonicalWorkspaceRoot(ctx.fs, workspaceRoot);
  let names: string[];
  try {
    names = ctx.fs.readdirSync(ctx.manifestsDir);
  } catch (error) {
    const errno = errnoOf(error);
    if (errno === "ENOENT") return [];
    if (isProcessLevelErrno(errno)) {
      throw transientFailure(
        `The checkpoint manifests directory ${ctx.manifestsDir}`,
        "listed",
        errno,
        error,
      );
    }
    throw corrupt("directory", `${ctx.manifestsDir} cannot be listed (${errno ?? "error"})`, error);
  }
  const result: CheckpointSummary[] = [];
  for (const name of names.sort()) {
    const match = /^(.+)\.json$/.exec(name);
    if (!match || !CHECKPOINT_ID_PATTERN.test(match[1]!)) continue;
    let manifest: CheckpointManifest;
    try {
      manifest = readVerifiedManifest(ctx, match[1]!).manifest;
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
}
