import * as fs from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { DEFAULT_SAGA_LIMITS, isSagaError, type SagaError, type SagaState } from "../src/index.js";
import { rejection } from "./helpers.js";
import { createEvidence, HASH, HASH2, step, useStoreBed } from "./store-bed.js";

// The event cap (limits.maxEvents) keeps room to settle: a recovery attempt that the store lets start can
// always finish, however many attempts failed before it.

const MAX = DEFAULT_SAGA_LIMITS.maxEvents;

const bed = useStoreBed("event-cap");
const { open } = bed;
const ownerEvidence = (operationId: string) => bed.lockedEvidence(operationId);

/** Runs `attempt` until the store refuses a step with LIMIT; returns the saga then and the refusal. */
async function untilLimit(
  saga: SagaState,
  attempt: (saga: SagaState) => Promise<SagaState>,
): Promise<{ saga: SagaState; refused: SagaError }> {
  let current = saga;
  for (let round = 0; round < MAX; round += 1) {
    try {
      current = await attempt(current);
    } catch (error) {
      if (!isSagaError(error) || error.code !== "LIMIT") throw error;
      return { saga: current, refused: error };
    }
  }
  throw new Error("the store never refused with LIMIT");
}

describe("saga store: the event cap keeps room to settle", () => {
  it("stops repeated abort attempts at the last one that can still finish, and it finishes", async () => {
    const store = open();
    const id = "op-cap";
    const own = ownerEvidence(id);
    let saga = await store.create(id, createEvidence);
    saga = await step(store, saga, "locked", own);
    saga = await step(store, saga, "recovery_required", { reason: "lock flush failed", errorCode: "EIO" });
    // Each failed attempt: recovery_started, then the failure journaled as recovery_required.
    const { saga: last, refused } = await untilLimit(saga, async (current) => {
      const started = await step(store, current, "recovery_started", {
        ...own,
        recoveryAction: "abort-pre-intent",
      });
      saga = started;
      return step(store, started, "recovery_required", { reason: "abort failed", errorCode: "EIO" });
    });
    // The refusal is the failure record that would leave no room for another attempt; nothing was written.
    expect(saga.phase).toBe("recovery_started");
    expect(last.seq).toBe(saga.seq - 1);
    expect(refused.details.phase).toBe("recovery_started");
    expect(refused.message).toMatch(/Nothing was written/);
    expect(refused.message).toMatch(/recovery_required/);
    // It says what still fits: finishing the abort already started.
    expect(refused.message).toMatch(/finish.*aborted/);
    expect((await store.load(id)).headHash).toBe(saga.headHash);
    // The settle path works, within the cap, and the saga can be archived.
    const done = await step(store, saga, "aborted", {
      recoveryAction: "abort-pre-intent",
      reason: "operator abort",
    });
    expect(done.terminal).toBe(true);
    expect(done.seq).toBeLessThanOrEqual(MAX);
    await store.archiveTerminal(id, { expectedSeq: done.seq, expectedHash: done.headHash });
  }, 60_000);

  it("stops repeated rollback attempts where the longest rollback still fits, and the last one finishes", async () => {
    const store = open();
    const id = "op-rb";
    const own = ownerEvidence(id);
    let saga = await store.create(id, createEvidence);
    saga = await step(store, saga, "locked", own);
    saga = await step(store, saga, "prepared", { prestateDigest: HASH, targetCount: 3 });
    saga = await step(store, saga, "intent_committed", { intentCommitDigest: HASH, authority: "operation" });
    const safety = { safetyCheckpointId: "ckpt-safety", safetyManifestDigest: HASH };
    saga = await step(store, saga, "safety_ready", { ...safety, coverage: "full" });
    saga = await step(store, saga, "mutation_started", { targetCount: 3, coverage: "full" });
    const binding = (requestId: string) => ({
      recoveryRequestId: requestId,
      ...safety,
      rollbackPlanIdentity: HASH2,
      originalMutationTargetCount: 3,
      targetCount: 2,
    });
    let round = 0;
    let prepared = saga;
    let request = "";
    // Each failed attempt: recovery_required, recovery_started, rollback_prepared, then it fails.
    const { refused } = await untilLimit(saga, async (current) => {
      round += 1;
      const required = await step(store, current, "recovery_required", {
        reason: "rollback failed",
        errorCode: "EIO",
      });
      const started = await step(store, required, "recovery_started", {
        ...own,
        recoveryAction: "rollback-partial-mutation",
        recoveryRequestId: `rb-${round}`,
      });
      prepared = await step(store, started, "rollback_prepared", binding(`rb-${round}`));
      request = `rb-${round}`;
      return prepared;
    });
    expect(refused.details.phase).toBe("rollback_prepared");
    expect(refused.message).toMatch(/Nothing was written/);
    expect(refused.message).toMatch(/rolled_back/);
    // The attempt in progress still completes, at most at the cap.
    saga = await step(store, prepared, "rollback_started", binding(request));
    saga = await step(store, saga, "workspace_rolled_back", {
      recoveryRequestId: request,
      rolledBackCount: 2,
      poststateDigest: HASH,
    });
    saga = await step(store, saga, "session_rollback_committed", {
      recoveryRequestId: request,
      sessionRollbackDigest: HASH,
    });
    const done = await step(store, saga, "rolled_back", {
      recoveryRequestId: request,
      recoveryAction: "rollback-partial-mutation",
      rollbackPlanIdentity: HASH2,
      poststateDigest: HASH,
    });
    expect(done.terminal).toBe(true);
    expect(done.seq).toBeLessThanOrEqual(MAX);
  }, 60_000);

  it("refuses to start a recovery that could not finish in a chain written under a larger limit, saying so", async () => {
    const id = "op-old";
    const own = ownerEvidence(id);
    const roomy = open();
    let saga = await roomy.create(id, createEvidence);
    saga = await step(roomy, saga, "recovery_required", { reason: "r", errorCode: "E" });
    // The same chain under a limit that leaves no room for recovery_started and its aborted.
    const tight = open({ limits: { maxEvents: 3 } });
    const dir = join(tight.shardDir, id);
    const before = fs.readdirSync(dir).sort();
    const error = await rejection(
      step(tight, saga, "recovery_started", { ...own, recoveryAction: "abort-pre-intent" }),
    );
    expect(error.code).toBe("LIMIT");
    expect(error.message).toMatch(/Nothing was written/);
    expect(error.message).toMatch(/cannot be settled/);
    expect(fs.readdirSync(dir).sort()).toEqual(before);
    // A terminal event is never held back by the reserve, only by the cap itself.
    const alone = await tight.create("op-alone", createEvidence);
    expect((await step(tight, alone, "aborted", { reason: "x" })).seq).toBe(2);
  });

  it("never lets a restore start changing files without room for a whole rollback", async () => {
    // created..safety_ready (5 events); mutation_started (6) needs room behind it for recovery_required and
    // the longest rollback (recovery_started … rolled_back, 6): 13 events in all.
    const store = open({ limits: { maxEvents: 12 } });
    const id = "op-small";
    let saga = await store.create(id, createEvidence);
    saga = await step(store, saga, "locked", ownerEvidence(id));
    saga = await step(store, saga, "prepared", { prestateDigest: HASH, targetCount: 1 });
    saga = await step(store, saga, "intent_committed", { intentCommitDigest: HASH, authority: "operation" });
    saga = await step(store, saga, "safety_ready", {
      safetyCheckpointId: "ckpt-safety",
      safetyManifestDigest: HASH,
      coverage: "full",
    });
    const error = await rejection(
      step(store, saga, "mutation_started", { targetCount: 1, coverage: "full" }),
    );
    expect(error.code).toBe("LIMIT");
    expect(error.message).toMatch(/aborted/);
    // Before any file changed it can still be aborted.
    expect((await step(store, saga, "aborted", { reason: "no room" })).terminal).toBe(true);
    // One more event of room and it may proceed.
    const roomier = open({ limits: { maxEvents: 13 } });
    let other = await roomier.create("op-13", createEvidence);
    other = await step(roomier, other, "locked", ownerEvidence("op-13"));
    other = await step(roomier, other, "prepared", { prestateDigest: HASH, targetCount: 1 });
    other = await step(roomier, other, "intent_committed", {
      intentCommitDigest: HASH,
      authority: "operation",
    });
    other = await step(roomier, other, "safety_ready", {
      safetyCheckpointId: "ckpt-safety",
      safetyManifestDigest: HASH,
      coverage: "full",
    });
    expect((await step(roomier, other, "mutation_started", { targetCount: 1, coverage: "full" })).seq).toBe(
      6,
    );
  });
});
