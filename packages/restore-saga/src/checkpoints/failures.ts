import { basename, dirname, isAbsolute, join, sep } from "node:path";
import type { FileOps } from "@drydock/file-lock";
import { isJsonJournalError } from "@drydock/json-journal";
import { errnoOf, SagaError } from "../errors.js";
import { errnoBehind, lstatOrNull, unresolvedPath } from "../internal/files.js";

/** The checkpoint store's refusals and failures, and the path rules a restore shares with it. */

export function invalid(message: string): SagaError {
  return new SagaError({ code: "INVALID_ARGUMENT", message });
}

export function corrupt(what: string, why: string, cause?: unknown): SagaError {
  return new SagaError({
    code: "CORRUPT",
    cause,
    message: `The checkpoint ${what} ${why}. It was left as it is; the checkpoint cannot be used to restore.`,
  });
}

/** The errno of a failed write: json-journal's errors carry it in their cause (their code is their own). */
export function writeErrno(error: unknown): string {
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

export function writeFailed(what: string, error: unknown): SagaError {
  if (error instanceof SagaError) return error;
  return new SagaError({
    code: "WRITE_FAILED",
    cause: error,
    message: `Writing ${what} failed (${writeErrno(error)}). The checkpoint was not created; check free space and retry.`,
  });
}
