import { invalidArgument } from "../errors.js";
import {
  BOAT_ID,
  BOT_ID,
  type BoatDeletionIdentity,
  type BoatDeletionOperationReceipt,
  BoatDeletionOperationReceiptSchema,
  type BoatDeletionRecord,
  BoatDeletionRecordFieldsSchema,
  type BoatDeletionStatus,
  BoatNameSchema,
} from "../schema.js";

/**
 * Argument checks run before any file is opened: a value the journal would refuse to load must never be
 * written, and a caller's mistake must not look like a damaged journal (400, not 503).
 */

export function assertBoatId(value: unknown, message: string): asserts value is string {
  if (typeof value !== "string" || !BOAT_ID.test(value)) throw invalidArgument(message);
}

export function assertBotId(value: unknown, message: string): asserts value is string {
  if (typeof value !== "string" || !BOT_ID.test(value)) throw invalidArgument(message);
}

/** Copies exactly the three identity fields, so nothing else a caller passes can reach the file. */
export function parseIdentity(value: unknown): BoatDeletionIdentity {
  const identity = readFields(value, ["boxId", "name", "ownerBotId"]);
  assertBoatId(identity.boxId, "invalid cloud computer id for deletion");
  if (!BoatNameSchema.safeParse(identity.name).success) {
    throw invalidArgument("invalid cloud computer name for deletion");
  }
  const owner = identity.ownerBotId;
  if (!(owner === null || (typeof owner === "string" && BOT_ID.test(owner)))) {
    throw invalidArgument("invalid cloud computer owner for deletion");
  }
  return { boxId: identity.boxId, name: identity.name as string, ownerBotId: owner };
}

/**
 * A provider receipt is accepted only if it names a sandbox deletion of exactly `boxId`, so another Boat's
 * operation can never attach to this fence.
 */
export function parseOperation(
  boxId: string,
  value: unknown,
  expectedStatus?: BoatDeletionStatus,
): BoatDeletionOperationReceipt {
  let parsed: ReturnType<typeof BoatDeletionOperationReceiptSchema.safeParse>;
  try {
    parsed = BoatDeletionOperationReceiptSchema.safeParse(value);
  } catch {
    parsed = { success: false } as typeof parsed;
  }
  if (
    !parsed.success ||
    parsed.data.targetId !== boxId ||
    (expectedStatus !== undefined && parsed.data.status !== expectedStatus)
  ) {
    throw invalidArgument("invalid or mismatched cloud computer deletion operation");
  }
  return parsed.data;
}

/** A fence as the caller read it (for a compare-and-set): a valid record of exactly this Boat. */
export function parseExpected(boxId: string, value: unknown): BoatDeletionRecord {
  let parsed: ReturnType<typeof BoatDeletionRecordFieldsSchema.safeParse>;
  try {
    parsed = BoatDeletionRecordFieldsSchema.safeParse(value);
  } catch {
    parsed = { success: false } as typeof parsed;
  }
  if (!parsed.success || parsed.data.boxId !== boxId) {
    throw invalidArgument("invalid or mismatched cloud computer deletion fence");
  }
  return parsed.data as BoatDeletionRecord;
}

/** Reads plain fields once; a non-object or a throwing getter counts as a missing field. */
function readFields(value: unknown, names: string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (typeof value !== "object" || value === null || Array.isArray(value)) return out;
  for (const name of names) {
    try {
      out[name] = (value as Record<string, unknown>)[name];
    } catch {
      out[name] = undefined;
    }
  }
  return out;
}
