import { join } from "node:path";
import { isProcessLevelErrno } from "@drydock/file-lock";
import { errnoOf, SagaError } from "../errors.js";
import {
  ensurePrivateDir,
  errnoBehind,
  fsyncPaths,
  isReadFailure,
  readFailurePath,
  readRegularFile,
  refusalOf,
} from "../internal/files.js";
import { CHECKPOINT_ID_PATTERN } from "../schema.js";
import type { CheckpointContext } from "./context.js";
import { canonicalWorkspaceRoot } from "./failures.js";
import { MAX_MANIFEST_BYTES } from "./read.js";

/**
 * Retiring a workspace's checkpoints: every manifest that names it moved from `manifests/` to `retired/`,
 * and the question whether any is left to move.
 */

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
export function manifestsNaming(ctx: CheckpointContext, canonical: string): string[] {
  let names: string[];
  try {
    names = ctx.fs.readdirSync(ctx.manifestsDir);
  } catch (error) {
    if (errnoOf(error) === "ENOENT") return [];
    throw error;
  }
  const naming: string[] = [];
  for (const name of names.sort()) {
    const match = /^(.+)\.json$/.exec(name);
    if (!match || !CHECKPOINT_ID_PATTERN.test(match[1]!)) continue;
    const path = join(ctx.manifestsDir, name);
    let bytes: Buffer | null;
    try {
      bytes = readRegularFile(ctx.fs, path, {
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
        message: `The entry ${path} ${refusal}, so it is not a checkpoint manifest, and whether it names the workspace ${canonical} cannot be told. Nothing was changed; move it out of ${ctx.manifestsDir} by hand (it cannot be listed or restored), then retry.`,
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

export async function hasCheckpointsOf(ctx: CheckpointContext, workspaceRoot: string): Promise<boolean> {
  const canonical = canonicalWorkspaceRoot(ctx.fs, workspaceRoot);
  try {
    return manifestsNaming(ctx, canonical).length > 0;
  } catch (error) {
    // An entry that is no manifest file names itself and says what to do.
    if (SagaError.isInstance(error) && !isReadFailure(error)) throw error;
    const errno = errnoBehind(error) ?? "error";
    const path = readFailurePath(error) ?? ctx.manifestsDir;
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
}

export async function retireCheckpoints(
  ctx: CheckpointContext,
  workspaceRoot: string,
): Promise<{ retired: string[] }> {
  const canonical = canonicalWorkspaceRoot(ctx.fs, workspaceRoot);
  const { retiredDir } = ctx;
  const retired: string[] = [];
  let names: string[];
  try {
    names = manifestsNaming(ctx, canonical);
  } catch (error) {
    // An entry that is no manifest file names itself and says what to do; a retry cannot cure it.
    if (SagaError.isInstance(error) && !isReadFailure(error)) throw error;
    const path = readFailurePath(error) ?? ctx.manifestsDir;
    throw new SagaError({
      code: "WRITE_FAILED",
      cause: error,
      message: `Retiring the checkpoints of ${canonical} failed before any was moved: ${path} could not be read (${errnoBehind(error) ?? "error"}). Nothing was changed. Retry; if it persists, check the data directory's disk.`,
    });
  }
  try {
    for (const name of names) {
      if (retired.length === 0) ensurePrivateDir(ctx.fs, retiredDir, { flushNew: ctx.durable });
      ctx.fs.renameSync(join(ctx.manifestsDir, name), join(retiredDir, name));
      retired.push(name.slice(0, -".json".length));
    }
    if (ctx.durable && retired.length > 0) await fsyncPaths(ctx.fs, [ctx.manifestsDir, retiredDir]);
  } catch (error) {
    throw new SagaError({
      code: "WRITE_FAILED",
      cause: error,
      message: `Retiring the checkpoints of ${canonical} failed after ${retired.length} (${errnoBehind(error) ?? "error"}). Nothing was lost: every manifest is in manifests/ or retired/. Retry; check the data directory's disk.`,
    });
  }
  return { retired };
}
