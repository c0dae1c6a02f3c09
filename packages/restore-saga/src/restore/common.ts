import { basename, isAbsolute, join, resolve } from "node:path";
import { RESTORE_STAGING_DIR } from "@drydock/facts";
import type { FileOps } from "@drydock/file-lock";
import { assertDataDirOutside, canonicalWorkspaceRoot } from "../checkpoints/index.js";
import { errnoOf, isSagaError, SagaError } from "../errors.js";
import { domainDigest } from "../internal/canonical.js";
import { boundedText } from "../internal/text.js";
import type { Phase } from "../schema.js";
import type { SagaState, SagaStore } from "../store/index.js";
import type { ArchiveWarning } from "./options.js";

/** What a restore and a rollback share: their failures, one journaled step, the archive, the layout. */

export function invalid(message: string): SagaError {
  return new SagaError({ code: "INVALID_ARGUMENT", message });
}

export function toSagaError(error: unknown, what: "restore" | "rollback" = "restore"): SagaError {
  if (isSagaError(error)) return error;
  const path = (error as NodeJS.ErrnoException | null)?.path;
  return new SagaError({
    code: "WRITE_FAILED",
    cause: error,
    message: `The ${what} failed on an unexpected error (${errnoOf(error) ?? (error as Error)?.name ?? "error"}${
      typeof path === "string" ? ` on ${path}` : ""
    }).`,
  });
}

export async function step(
  store: SagaStore,
  saga: SagaState,
  phase: Phase,
  evidence: Record<string, unknown>,
): Promise<SagaState> {
  return store.advance(saga.operationId, {
    expectedSeq: saga.seq,
    expectedHash: saga.headHash,
    phase,
    evidence,
  });
}

export async function archiveQuietly(store: SagaStore, saga: SagaState): Promise<ArchiveWarning | null> {
  try {
    await store.archiveTerminal(saga.operationId, { expectedSeq: saga.seq, expectedHash: saga.headHash });
    return null;
  } catch (error) {
    return {
      code: boundedText(isSagaError(error) ? error.code : null, "ARCHIVE_PENDING", 128),
      message: boundedText((error as Error)?.message, "The restore saga could not be archived yet.", 512),
      commitState: isSagaError(error) ? error.commitState : null,
    };
  }
}

export function checkLayout(
  fs: FileOps,
  options: { dataDir: string; workspaceRoot: string },
): { dataDir: string; root: string } {
  if (typeof options.dataDir !== "string" || !isAbsolute(options.dataDir)) {
    throw invalid("A restore needs an absolute dataDir.");
  }
  const root = canonicalWorkspaceRoot(fs, options.workspaceRoot);
  assertDataDirOutside(fs, options.dataDir, root);
  return { dataDir: resolve(options.dataDir), root };
}

/**
 * Where a restore of this workspace stages its files: one directory per workspace (named like its saga
 * shard), so the apply, which holds that workspace's lock, may sweep what a dead apply left there.
 */
export function stagingDirFor(dataDir: string, store: SagaStore): string {
  return join(dataDir, RESTORE_STAGING_DIR, basename(store.shardDir));
}

/** What `intent_committed` commits to: this operation, its target checkpoint and the exact plan. */
export function intentDigest(intent: {
  operationId: string;
  checkpointId: string;
  checkpointManifestDigest: string;
  planDigest: string;
}): string {
  return domainDigest("drydock-restore-intent-v1", intent);
}
