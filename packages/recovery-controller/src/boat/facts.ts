/**
 * What a plan item's `stateDigest` covers: the facts an action depends on and re-reads (a create row, a
 * fence, a Boat's existence and name), so a command printed before any of them moved never applies after.
 */
import { digestOf } from "../internal/digest.js";
import type { CreateRowFacts, RecoveryDeletionRecord } from "../ports.js";
import type { BoatObservation } from "../schema.js";
import type { CreateRow } from "./context.js";

export const ITEM_DOMAIN = "drydock-recovery-plan-item-v1";

export function rowFacts(row: CreateRow | undefined): unknown {
  return row === undefined ? null : rowOf(row);
}

/** The facts of a snapshot row a digest covers and a compare-and-set compares (without `ageMs`). */
export function rowOf(row: CreateRow): CreateRowFacts {
  return { botId: row.botId, boxId: row.boxId, resolved: row.resolved, createdAt: row.createdAt };
}

export function providerFact(observation: BoatObservation): unknown {
  // The digest covers what an action depends on: existence and name, not the ever-changing run state.
  if (observation.kind === "present") return { exists: true, name: observation.name };
  if (observation.kind === "absent") return { exists: false };
  return { exists: "unknown" };
}

export function fenceFacts(record: RecoveryDeletionRecord): unknown {
  return {
    boxId: record.boxId,
    name: record.name,
    ownerBotId: record.ownerBotId,
    phase: record.phase,
    status: record.status,
    operationId: record.operationId,
    updatedAt: record.updatedAt,
  };
}

/**
 * The name boat.dev shows for a fenced Boat when it is not the fence's recorded name (renamed since the
 * fence was written), else undefined. Only a Boat read directly and present can be renamed.
 */
export function renamedTo(
  record: RecoveryDeletionRecord,
  observation: BoatObservation,
): string | null | undefined {
  return observation.kind === "present" && observation.name !== record.name ? observation.name : undefined;
}

/**
 * The digest of a fence's plan item: the fence's facts and, for a Boat boat.dev shows renamed, the name it
 * shows (so a digest printed before a rename never applies after it). Existence is left out on purpose: an
 * accepted deletion that completes between the plan and its reconcile still reconciles.
 */
export function fenceDigest(record: RecoveryDeletionRecord, observation: BoatObservation): string {
  const renamed = renamedTo(record, observation);
  return digestOf(ITEM_DOMAIN, {
    kind: "deletion",
    fence: fenceFacts(record),
    ...(renamed === undefined ? {} : { observedName: renamed }),
  });
}
