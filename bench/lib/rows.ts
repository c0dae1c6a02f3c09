import { randomUUID } from "node:crypto";

/** Row shapes shared by the journal suites: the create body the lifecycle sends and deterministic Boat ids. */
export const CREATE_BODY = { ttlSeconds: 28_800, noEnv: true };
export const BODY = JSON.stringify(CREATE_BODY);
const ALPHABET = "23456789abcdefghjkmnpqrstuvwxyz";

/** A valid, distinct Boat id for every `i` (bx_ + 8 characters of boat.dev's alphabet). */
export function boatId(i: number): string {
  let s = "";
  let n = i;
  for (let k = 0; k < 8; k++) {
    s += ALPHABET[n % ALPHABET.length];
    n = Math.floor(n / ALPHABET.length);
  }
  return `bx_${s}`;
}

/** Row `i` of a create journal: a resolved request, one per bot, as the journals hold it. */
export function createRow(i: number) {
  return {
    botId: `bot-${i}`,
    requestBody: BODY,
    idempotencyKey: randomUUID(),
    createdAt: 1_700_000_000_000 + i,
    boxId: boatId(i),
    resolved: true as const,
  };
}

/** Row `i` of a delete journal: an accepted fence, as the journals hold it. */
export function fenceRow(i: number) {
  return {
    boxId: boatId(i),
    name: `ogb-bench-${i}`,
    ownerBotId: `bot-${i}`,
    phase: "accepted" as const,
    operationId: `bdop_${i.toString(16).padStart(32, "0")}`,
    status: "pending" as const,
    requestedAt: 1_700_000_000_000 + i,
    updatedAt: 1_700_000_000_000 + i,
  };
}
