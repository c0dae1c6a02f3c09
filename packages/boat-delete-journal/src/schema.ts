import {
  BOAT_DELETION_OPERATION_ID,
  BOAT_DELETION_PHASES,
  BOAT_DELETION_STATUSES,
  BOAT_ID,
  BOT_ID,
} from "@drydock/facts";
import { z } from "zod";

/**
 * The delete journal's file format, byte-compatible with the journals written by the system seed 001 comes
 * from: `<dataDir>/box-delete-requests.json` = `{ "version": 1, "records": [...] }`, 2-space JSON with a
 * trailing newline. Every rule below is one of that system's load-time checks; a file that breaks any of
 * them is refused whole and never rewritten.
 */

/** Codes of a create refused while the bot's previous computer is being removed, or right after it was. */
export const BOAT_DELETING = "computer_deleting";
export const BOAT_DELETION_FINISHED = "previous_deletion_finished";

/** Records kept at most; a larger file is refused as invalid, a full journal refuses new fences. */
export const MAX_RECORDS = 4_096;
export const MAX_NAME_LENGTH = 100;

// The id patterns and the phase sets are @drydock/facts' (one definition for every layer).
export { BOAT_ID, BOT_ID };
/** boat.dev deletion operation ids (@drydock/facts' `BOAT_DELETION_OPERATION_ID`). */
export const OPERATION_ID = BOAT_DELETION_OPERATION_ID;

export const BoatDeletionPhaseSchema = z.enum(BOAT_DELETION_PHASES);
export const BoatDeletionStatusSchema = z.enum(BOAT_DELETION_STATUSES);

/** Positive safe integer milliseconds, as the original journal requires. */
const TimestampSchema = z.number().int().positive();

/** 1-100 UTF-16 units without CR, LF or NUL (zod's max counts code points, so it is checked by hand). */
export const BoatNameSchema = z
  .string()
  .refine((name) => name.length > 0 && name.length <= MAX_NAME_LENGTH && !/[\r\n\0]/.test(name), {
    message: `must be 1-${MAX_NAME_LENGTH} characters without line breaks or NUL`,
  });

/**
 * Validates with `fields` but returns a shallow copy of the input itself, so unknown keys and the key order
 * survive a rewrite exactly as the original writer's object spread keeps them (byte-identical files).
 */
function preservingOrder<S extends z.ZodType>(fields: S) {
  return z.unknown().transform((value, ctx): z.output<S> => {
    const result = fields.safeParse(value);
    if (!result.success) {
      for (const issue of result.error.issues) ctx.issues.push({ ...issue, input: undefined } as never);
      return z.NEVER;
    }
    return { ...(value as object) } as z.output<S>;
  });
}

/** The fields of one deletion fence, as the original journal checks them. */
export const BoatDeletionRecordFieldsSchema = z
  .looseObject({
    /** The immutable target: the only id a DELETE or a receipt may refer to. */
    boxId: z.string().regex(BOAT_ID),
    /** The Boat's name when the fence was written; a Boat renamed since is not deleted blindly. */
    name: BoatNameSchema,
    /** null for a Boat no bot owns (found by inventory). */
    ownerBotId: z.string().regex(BOT_ID).nullable(),
    /** prepared: written, DELETE maybe sent; accepted: boat.dev took it; blocked: boat.dev refused or stalled. */
    phase: BoatDeletionPhaseSchema,
    requestedAt: TimestampSchema,
    updatedAt: TimestampSchema,
    /** Unset until boat.dev answered with a receipt; a blocked fence may lack it (DELETE refused outright). */
    operationId: z.string().regex(OPERATION_ID).optional(),
    status: BoatDeletionStatusSchema.optional(),
  })
  .refine((record) => record.updatedAt >= record.requestedAt, {
    message: "updatedAt precedes requestedAt",
    path: ["updatedAt"],
  })
  .refine(
    (record) => {
      if (record.phase === "prepared") return record.operationId === undefined && record.status === undefined;
      if (record.phase === "accepted") {
        return record.operationId !== undefined && record.status !== undefined && record.status !== "blocked";
      }
      return record.status === "blocked";
    },
    { message: "phase does not match operationId/status", path: ["phase"] },
  );

/**
 * One deletion fence. While it exists the Boat may still exist, so nothing may create, use or forget it.
 * Unknown fields are kept in their original position, as the original journal does, so rewritten files stay
 * byte-identical to what it would write.
 */
export const BoatDeletionRecordSchema = preservingOrder(BoatDeletionRecordFieldsSchema);

export const BoatDeleteJournalFileSchema = z.looseObject({
  version: z.literal(1),
  records: z.array(BoatDeletionRecordSchema).max(MAX_RECORDS),
});

/** What a caller knows about the Boat before sending DELETE. */
export const BoatDeletionIdentitySchema = z.object({
  boxId: z.string().regex(BOAT_ID),
  name: BoatNameSchema,
  ownerBotId: z.string().regex(BOT_ID).nullable(),
});

/**
 * A boat.dev deletion operation as this journal accepts it: bound to a sandbox (`kind`) and, checked
 * separately, to the exact target id. Other provider fields (`stage`, `reason`, ...) are allowed and ignored.
 */
export const BoatDeletionOperationReceiptSchema = z.looseObject({
  id: z.string().regex(OPERATION_ID),
  kind: z.literal("sandbox"),
  targetId: z.string(),
  status: BoatDeletionStatusSchema,
});

export type BoatDeletionPhase = z.infer<typeof BoatDeletionPhaseSchema>;
export type BoatDeletionStatus = z.infer<typeof BoatDeletionStatusSchema>;
export type BoatDeletionRecord = z.infer<typeof BoatDeletionRecordSchema>;
export type BoatDeleteJournalFile = z.infer<typeof BoatDeleteJournalFileSchema>;
export type BoatDeletionIdentity = z.infer<typeof BoatDeletionIdentitySchema>;
export type BoatDeletionOperationReceipt = z.infer<typeof BoatDeletionOperationReceiptSchema>;
