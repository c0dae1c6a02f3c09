/**
 * The saga-store tests' common bed: a fresh workspace and state directory per test, the store over them,
 * a workspace-lock owner for `locked` evidence, and a CAS step. (Four test files each had their own copy.)
 */
import * as fs from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach } from "vitest";
import {
  openSagaStore,
  ownerDigest,
  type SagaState,
  type SagaStore,
  type SagaStoreOptions,
} from "../src/index.js";
import { makeTempDir, removeDir } from "./helpers.js";

export const HASH = `sha256:${"a".repeat(64)}`;
export const HASH2 = `sha256:${"b".repeat(64)}`;

export const createEvidence = {
  kind: "checkpoint-restore" as const,
  checkpointId: "ckpt-1",
  checkpointManifestDigest: HASH,
  actorPid: 77,
};

export interface StoreBed {
  /** This test's temp directory (workspace and state inside it). */
  readonly base: string;
  readonly workspace: string;
  readonly stateDir: string;
  open(extra?: Partial<SagaStoreOptions>): SagaStore;
  /** A checkpoint-restore workspace-lock owner of `operationId` (pid 4242), on this workspace by default. */
  owner(operationId: string, workspaceRoot?: string): ReturnType<typeof lockOwner>;
  /** The `locked` evidence for that owner. */
  lockedEvidence(operationId: string): Record<string, unknown>;
}

function lockOwner(operationId: string, workspaceRoot: string) {
  return {
    version: 1 as const,
    pid: 4242,
    token: "0b0f3c55-5a2e-4b8e-9c53-5b0f5e8a1d11",
    createdAt: 1_700_000_000_000,
    payload: { transactionId: operationId, workspaceRoot, purpose: "checkpoint-restore" as const },
  };
}

/** Registers the per-test setup and cleanup; the returned bed's paths are this test's. */
export function useStoreBed(label: string): StoreBed {
  const paths = { base: "", workspace: "", stateDir: "" };
  beforeEach(() => {
    paths.base = makeTempDir(label);
    paths.workspace = join(paths.base, "workspace");
    paths.stateDir = join(paths.base, "state");
    fs.mkdirSync(paths.workspace);
  });
  afterEach(() => {
    removeDir(paths.base);
  });
  const owner = (operationId: string, workspaceRoot = paths.workspace) =>
    lockOwner(operationId, workspaceRoot);
  return {
    get base() {
      return paths.base;
    },
    get workspace() {
      return paths.workspace;
    },
    get stateDir() {
      return paths.stateDir;
    },
    open: (extra = {}) =>
      openSagaStore({ stateDir: paths.stateDir, workspaceRoot: paths.workspace, ...extra }),
    owner,
    lockedEvidence: (operationId) => {
      const o = owner(operationId);
      return { workspaceLockOwner: o, lockOwnerDigest: ownerDigest(o) };
    },
  };
}

/** One compare-and-set advance from `saga` (as read) to `phase`. */
export function step(
  store: SagaStore,
  saga: SagaState,
  phase: string,
  evidence: Record<string, unknown>,
): Promise<SagaState> {
  return store.advance(saga.operationId, {
    expectedSeq: saga.seq,
    expectedHash: saga.headHash,
    phase: phase as never,
    evidence,
  });
}
