import type { BoatDeleteJournalFile } from "../schema.js";

/**
 * Cross-record invariants the schema cannot express, checked on every load:
 * - one fence per Boat id: two fences could disagree about whether a DELETE was accepted;
 * - one Boat per operation id: a receipt must prove the deletion of exactly one target.
 */
export function checkDeleteJournal(doc: BoatDeleteJournalFile): string | null {
  const boatIds = new Set<string>();
  const operationIds = new Set<string>();
  for (const record of doc.records) {
    if (boatIds.has(record.boxId)) return "invalid";
    boatIds.add(record.boxId);
    if (record.operationId !== undefined) {
      if (operationIds.has(record.operationId)) return "invalid";
      operationIds.add(record.operationId);
    }
  }
  return null;
}
