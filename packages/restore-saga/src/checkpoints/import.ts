import { dirname } from "node:path";
import { writeFileAtomic } from "@drydock/json-journal";
import { SagaError } from "../errors.js";
import { prettyCanonical, sha256Hex } from "../internal/canonical.js";
import { ensurePrivateDir, readRegularFile } from "../internal/files.js";
import {
  CHECKPOINT_ID_PATTERN,
  CHECKPOINT_MANIFEST_SCHEMA,
  type CheckpointManifest,
  type ManifestEntry,
} from "../schema.js";
import { storedBytesEqual } from "./capture.js";
import type { CheckpointContext } from "./context.js";
import { assertDataDirOutside, canonicalWorkspaceRoot, invalid, writeFailed } from "./failures.js";
import { MAX_MANIFEST_BYTES } from "./read.js";
import type { CheckpointImport } from "./types.js";

/** Directories a manifest names implicitly (a file's parents): recorded with this mode. */
export const IMPORTED_DIR_MODE = 0o755;

/**
 * `drydock storage migrate` out of postgres: writes a checkpoint taken elsewhere under its ORIGINAL id and
 * createdAt. Every blob is verified against its sha256 (and size) before anything is written; blobs are
 * written durably before the manifest names them. Idempotent: a manifest already holding exactly this
 * checkpoint is kept ("unchanged"); one holding anything else is ALREADY_EXISTS and nothing is changed.
 */
export async function importCheckpoint(
  ctx: CheckpointContext,
  input: CheckpointImport,
): Promise<{ checkpointId: string; outcome: "imported" | "unchanged" }> {
  const { checkpointId } = input;
  if (typeof checkpointId !== "string" || !CHECKPOINT_ID_PATTERN.test(checkpointId)) {
    throw invalid("A checkpoint id is 1-128 letters, digits, '-' or '_'. Nothing was changed.");
  }
  if (!Number.isSafeInteger(input.createdAt) || input.createdAt < 0) {
    throw invalid(`The createdAt of checkpoint ${checkpointId} is not a time in ms. Nothing was changed.`);
  }
  const canonical = canonicalWorkspaceRoot(ctx.fs, input.workspaceRoot);
  assertDataDirOutside(ctx.fs, ctx.dataDir, canonical);
  const entries = new Map<string, ManifestEntry>();
  for (const file of input.files) {
    const bytes = input.blobs.get(file.sha256);
    if (bytes === undefined || bytes.length !== file.size || sha256Hex(bytes) !== file.sha256) {
      throw invalid(
        `The blob of ${file.path} in checkpoint ${checkpointId} is missing or does not hash to ${file.sha256}. Nothing was changed.`,
      );
    }
    const parts = file.path.split("/");
    for (let i = 1; i < parts.length; i += 1) {
      const dir = parts.slice(0, i).join("/");
      if (!entries.has(dir)) entries.set(dir, { type: "dir", path: dir, mode: IMPORTED_DIR_MODE });
    }
    entries.set(file.path, {
      type: "file",
      path: file.path,
      size: file.size,
      mode: file.mode,
      sha256: file.sha256,
    });
  }
  const sorted = [...entries.values()].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  const files = sorted.filter((e) => e.type === "file");
  const manifest: CheckpointManifest = {
    schema: CHECKPOINT_MANIFEST_SCHEMA,
    version: 1,
    checkpointId,
    workspaceRoot: canonical,
    createdAt: new Date(input.createdAt).toISOString(),
    kind: input.kind ?? "user",
    files: files.length,
    bytes: files.reduce((sum, e) => sum + (e.type === "file" ? e.size : 0), 0),
    entries: sorted,
  };
  const text = Buffer.from(prettyCanonical(manifest), "utf8");
  const path = ctx.manifestPath(checkpointId);
  const existing = readRegularFile(ctx.fs, path, {
    maxBytes: MAX_MANIFEST_BYTES,
    what: "checkpoint manifest",
  });
  if (existing) {
    if (existing.equals(text)) return { checkpointId, outcome: "unchanged" };
    throw new SagaError({
      code: "ALREADY_EXISTS",
      message: `A different checkpoint ${checkpointId} already exists in ${ctx.manifestsDir}, so it was not imported and nothing was changed. Move that manifest away (or import into an empty data directory), then run the import again.`,
    });
  }
  try {
    ensurePrivateDir(ctx.fs, ctx.checkpointsDir);
    ensurePrivateDir(ctx.fs, ctx.manifestsDir);
    ensurePrivateDir(ctx.fs, ctx.blobsDir);
    for (const file of files) {
      if (file.type !== "file") continue;
      const blob = ctx.blobPath(file.sha256);
      const bytes = Buffer.from(input.blobs.get(file.sha256) as Uint8Array);
      if (storedBytesEqual(ctx, blob, bytes)) continue;
      ensurePrivateDir(ctx.fs, dirname(blob));
      writeFileAtomic(blob, bytes, { fs: ctx.fs, mode: 0o600, durable: ctx.durable });
    }
    writeFileAtomic(path, text, { fs: ctx.fs, mode: 0o600, durable: ctx.durable });
  } catch (error) {
    throw writeFailed(`imported checkpoint ${checkpointId}`, error);
  }
  return { checkpointId, outcome: "imported" };
}
