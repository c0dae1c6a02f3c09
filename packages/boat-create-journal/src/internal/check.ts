import type { BoatCreateJournalFile } from "../schema.js";

/**
 * Cross-record invariants the schema cannot express, checked on every load. Any break means the file was
 * not written by a correct journal, so nothing in it can be trusted to guard a billable create.
 *
 * - (botId, requestBody) is unique: one key per identical request, or a retry could pick either key.
 * - idempotencyKey is unique: two rows sharing a key would both claim the same Boat.
 * - at most one row per bot has a boxId: a bot owns at most one Boat.
 */
export function checkCreateJournal(doc: BoatCreateJournalFile): string | null {
  const identities = new Set<string>();
  const keys = new Set<string>();
  const botsWithBoats = new Set<string>();
  for (const request of doc.requests) {
    // NUL cannot occur in a bot id, so the pair is unambiguous.
    const identity = `${request.botId}\0${request.requestBody}`;
    if (identities.has(identity) || keys.has(request.idempotencyKey)) return "invalid";
    if (request.boxId !== undefined && botsWithBoats.has(request.botId)) return "invalid";
    identities.add(identity);
    keys.add(request.idempotencyKey);
    if (request.boxId !== undefined) botsWithBoats.add(request.botId);
  }
  return null;
}
