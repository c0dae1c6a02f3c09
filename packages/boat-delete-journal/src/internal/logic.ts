import { deletePaused } from "../errors.js";
import {
  type BoatDeleteJournalFile,
  type BoatDeletionIdentity,
  type BoatDeletionOperationReceipt,
  type BoatDeletionRecord,
  type BoatDeletionStatus,
  MAX_RECORDS,
} from "../schema.js";

/**
 * The journal's decisions as pure functions of (document, arguments, clock): each returns the next document
 * (only when something must be written) and the caller's result, or throws the seed's refusal. Arguments are
 * already validated. Nothing here touches a file.
 */

export interface Step<R> {
  next?: BoatDeleteJournalFile;
  result: R;
}

const copy = (record: BoatDeletionRecord): BoatDeletionRecord => ({ ...record });
/** The next document: its own members (a newer writer's too, and their order) kept, the records replaced. */
const file = (doc: BoatDeleteJournalFile, records: BoatDeletionRecord[]): BoatDeleteJournalFile => ({
  ...doc,
  records,
});
/** Never moves backwards, even if the clock does: readers order events by it. */
const nextUpdatedAt = (record: BoatDeletionRecord, now: number): number => Math.max(now, record.updatedAt);

/** Accepted statuses only move forward; a late, lower status from a slow poll is ignored. */
const RANK: Record<Exclude<BoatDeletionStatus, "blocked">, number> = {
  pending: 0,
  processing: 1,
  completed: 2,
};

/**
 * The immutable target is written before DELETE is sent. A prepared or accepted fence is in-flight work and
 * wins (returned unchanged, so no second DELETE is sent blind); a blocked fence is replaced by a clean
 * prepared one, which is the explicit retry.
 */
export function prepareStep(
  doc: BoatDeleteJournalFile,
  identity: BoatDeletionIdentity,
  now: number,
): Step<BoatDeletionRecord> {
  const existing = doc.records.find((record) => record.boxId === identity.boxId);
  if (existing) {
    if (existing.name !== identity.name || existing.ownerBotId !== identity.ownerBotId) {
      throw deletePaused("conflicted with the remembered deletion target");
    }
    if (existing.phase !== "blocked") return { result: copy(existing) };
  }
  if (!existing && doc.records.length >= MAX_RECORDS) throw deletePaused("full");
  const prepared: BoatDeletionRecord = {
    boxId: identity.boxId,
    name: identity.name,
    ownerBotId: identity.ownerBotId,
    phase: "prepared",
    requestedAt: now,
    updatedAt: now,
  };
  const others = doc.records.filter((record) => record.boxId !== identity.boxId);
  return { next: file(doc, [...others, prepared]), result: copy(prepared) };
}

/** The fields a fence is compared on: a caller's copy is "the same fence" only if every one of them matches. */
const FENCE_FIELDS = [
  "boxId",
  "name",
  "ownerBotId",
  "phase",
  "requestedAt",
  "updatedAt",
  "operationId",
  "status",
] as const satisfies readonly (keyof BoatDeletionRecord)[];

export function sameRecord(a: BoatDeletionRecord, b: BoatDeletionRecord): boolean {
  return FENCE_FIELDS.every((field) => a[field] === b[field]);
}

/**
 * Compare-and-set of a prepared fence's `updatedAt`, written right before DELETE is sent again under it.
 * Only the exact fence the caller read (`expected`, every field equal) is re-stamped; anything else (another
 * caller re-stamped or re-prepared it, a receipt arrived, it was blocked or retired) is returned as it
 * stands, unwritten, with `restamped: false`: that caller must not send. The new stamp is strictly later
 * than the old one (`max(now, updatedAt + 1)`, even if the clock stepped back), so a second caller holding
 * the old copy can never match it again.
 */
export function restampStep(
  doc: BoatDeleteJournalFile,
  boxId: string,
  expected: BoatDeletionRecord,
  now: number,
): Step<{ record: BoatDeletionRecord | null; restamped: boolean }> {
  const existing = doc.records.find((record) => record.boxId === boxId);
  if (!existing) return { result: { record: null, restamped: false } };
  if (existing.phase !== "prepared" || !sameRecord(existing, expected)) {
    return { result: { record: copy(existing), restamped: false } };
  }
  const restamped: BoatDeletionRecord = { ...existing, updatedAt: Math.max(now, existing.updatedAt + 1) };
  return { next: replace(doc, boxId, restamped), result: { record: copy(restamped), restamped: true } };
}

/** Binds a provider receipt (not blocked) to this exact fence. */
export function acceptStep(
  doc: BoatDeleteJournalFile,
  boxId: string,
  operation: BoatDeletionOperationReceipt,
  now: number,
): Step<BoatDeletionRecord> {
  if (operation.status === "blocked") throw new Error("acceptStep needs a status other than blocked");
  const status = operation.status;
  const existing = doc.records.find((record) => record.boxId === boxId);
  // A blocked fence waits for an explicit retry (prepare); a late receipt must not revive it.
  if (!existing || existing.phase === "blocked") throw deletePaused("out of date");
  if (existing.operationId !== undefined && existing.operationId !== operation.id) {
    throw deletePaused("conflicted with another deletion operation");
  }
  if (doc.records.some((record) => record.boxId !== boxId && record.operationId === operation.id)) {
    throw deletePaused("conflicted with another deletion operation");
  }
  if (
    existing.phase === "accepted" &&
    existing.status !== undefined &&
    existing.status !== "blocked" &&
    RANK[status] < RANK[existing.status]
  ) {
    return { result: copy(existing) };
  }
  const accepted: BoatDeletionRecord = {
    ...existing,
    phase: "accepted",
    operationId: operation.id,
    status,
    updatedAt: nextUpdatedAt(existing, now),
  };
  return { next: replace(doc, boxId, accepted), result: copy(accepted) };
}

/** The target stays fenced; only a deliberate deletion retry (prepare) may clear it. */
export function blockStep(
  doc: BoatDeleteJournalFile,
  boxId: string,
  operation: BoatDeletionOperationReceipt | null,
  now: number,
): Step<BoatDeletionRecord> {
  const existing = doc.records.find((record) => record.boxId === boxId);
  if (!existing) throw deletePaused("out of date");
  if (operation) {
    if (existing.operationId !== undefined && existing.operationId !== operation.id) {
      throw deletePaused("conflicted with another deletion operation");
    }
    if (doc.records.some((record) => record.boxId !== boxId && record.operationId === operation.id)) {
      throw deletePaused("conflicted with another deletion operation");
    }
  }
  // A completed receipt is proof of absence and final: a later "blocked" (a stale receipt, or a caller
  // that did not see the completion) must not turn it into "retry needed". Returned unchanged, like a
  // stale lower status in acceptStep; the caller retires the fence. (Departs from seed 001, which blocked it.)
  if (existing.phase === "accepted" && existing.status === "completed") return { result: copy(existing) };
  const operationId = operation?.id ?? existing.operationId;
  const blocked: BoatDeletionRecord = {
    ...existing,
    phase: "blocked",
    ...(operationId !== undefined ? { operationId } : {}),
    status: "blocked",
    updatedAt: nextUpdatedAt(existing, now),
  };
  return { next: replace(doc, boxId, blocked), result: copy(blocked) };
}

export function snapshotOf(doc: BoatDeleteJournalFile): BoatDeletionRecord[] {
  return doc.records.map(copy);
}

export function getOf(doc: BoatDeleteJournalFile, boxId: string): BoatDeletionRecord | null {
  const record = doc.records.find((candidate) => candidate.boxId === boxId);
  return record ? copy(record) : null;
}

/** Any fence owned by the bot, whatever its phase: the bot's next create must wait for it. */
export function hasPendingForBot(doc: BoatDeleteJournalFile, botId: string): boolean {
  return doc.records.some((record) => record.ownerBotId === botId);
}

/** Only after a direct absence or a completed target-bound operation proves the Boat is gone. */
export function retireStep(doc: BoatDeleteJournalFile, boxId: string): Step<undefined> {
  const next = doc.records.filter((record) => record.boxId !== boxId);
  return next.length === doc.records.length
    ? { result: undefined }
    : { next: file(doc, next), result: undefined };
}

function replace(
  doc: BoatDeleteJournalFile,
  boxId: string,
  record: BoatDeletionRecord,
): BoatDeleteJournalFile {
  return file(
    doc,
    doc.records.map((candidate) => (candidate.boxId === boxId ? record : candidate)),
  );
}
