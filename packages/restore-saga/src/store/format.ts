import { type CommitState, SagaError } from "../errors.js";
import { domainDigest, prettyCanonical } from "../internal/canonical.js";
import { type Phase, SAGA_HEAD_SCHEMA, type SagaEvent, type SagaHead } from "../schema.js";
import { corrupt } from "./failures.js";

/**
 * The on-disk format of one saga directory: `NNNNNN-<phase>.json` per event, hash-chained, and `HEAD`
 * naming the last one. Pure: names, hashes and byte-exact parsing, nothing that touches a file.
 */

/** Hash domains. Changing one orphans every chain on disk: never do it without a new schema version. */
export const EVENT_HASH_DOMAIN = "drydock-restore-saga-event-v1";
export const HEAD_ANCHOR_DOMAIN = "drydock-restore-saga-head-v1";
export const WORKSPACE_IDENTITY_DOMAIN = "drydock-restore-saga-workspace-v1";

export const HEAD_MAX_BYTES = 4096;
/** The instants a saga timestamp can hold: `toISOString` prints a four-digit year only within these. */
export const MIN_RECORDABLE_MS = Date.parse("0000-01-01T00:00:00.000Z");
export const MAX_RECORDABLE_MS = Date.parse("9999-12-31T23:59:59.999Z");
export const EVENT_FILE = /^(\d{6})-([a-z_]+)\.json$/;

export function eventFileName(seq: number, phase: Phase): string {
  return `${String(seq).padStart(6, "0")}-${phase}.json`;
}

export function eventHash(event: Omit<SagaEvent, "hash">): string {
  return domainDigest(EVENT_HASH_DOMAIN, event);
}

export function headAnchor(head: Omit<SagaHead, "anchorHash">): string {
  return domainDigest(HEAD_ANCHOR_DOMAIN, head);
}

export function makeHead(operationId: string, last: SagaEvent | null): SagaHead {
  const body: Omit<SagaHead, "anchorHash"> = {
    schema: SAGA_HEAD_SCHEMA,
    version: 1,
    state: last ? "committed" : "unpublished",
    operationId,
    seq: last ? last.seq : 0,
    phase: last ? last.phase : null,
    eventFile: last ? eventFileName(last.seq, last.phase) : null,
    eventHash: last ? last.hash : null,
  };
  return { ...body, anchorHash: headAnchor(body) };
}

export function parseExact(bytes: Buffer, operationId: string, what: string): unknown {
  let parsed: unknown;
  try {
    parsed = JSON.parse(bytes.toString("utf8"));
  } catch (error) {
    throw corrupt(operationId, `${what} is not JSON`, error);
  }
  // Byte-exact: the hash covers values, not whitespace or key order, so the file must also be exactly
  // the canonical rendering of what it holds. Any changed byte is then tampering, whatever it was.
  let rendered: string;
  try {
    rendered = prettyCanonical(parsed);
  } catch (error) {
    throw corrupt(operationId, `${what} holds a value canonical JSON cannot represent`, error);
  }
  if (!bytes.equals(Buffer.from(rendered, "utf8"))) {
    throw corrupt(operationId, `${what} is not byte-for-byte its canonical form`);
  }
  return parsed;
}

/**
 * `time` as the schemas record it (ISO-8601 with a four-digit year). A clock beyond year 9999 (one counting
 * microseconds, say) would write a file every reader calls CORRUPT, and NaN cannot be written at all; both
 * are refused before anything is written, naming the clock, not the disk.
 */
export function recordableTime(id: string, time: number, clock: number, commitState: CommitState): string {
  if (time >= MIN_RECORDABLE_MS && time <= MAX_RECORDABLE_MS) return new Date(time).toISOString();
  throw new SagaError({
    code: "INVALID_ARGUMENT",
    operationId: id,
    commitState,
    message: `The clock of this restore saga store gave ${clock}, which is not a time restore saga ${id} can record (years 0000 to 9999, in milliseconds). Nothing was written; fix the clock (the store's now option) and retry.`,
  });
}
