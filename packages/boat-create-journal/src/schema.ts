import { BOAT_ID, BOT_ID, UUID_V4 } from "@drydock/facts";
import { z } from "zod";

/**
 * The create journal's file format, byte-compatible with the journals written by the system seed 000 comes
 * from: `<dataDir>/box-create-requests.json` = `{ "version": 1, "requests": [...] }`, 2-space JSON with a
 * trailing newline. Every rule below is one of that system's load-time checks; a file that breaks any of
 * them is refused whole and never rewritten.
 */

/** boat.dev keeps an Idempotency-Key for 24 hours; past that a retry could bill a second Boat. */
export const KEY_RETENTION_MS = 24 * 60 * 60 * 1_000;
/**
 * A key is trusted for retries only until `createdAt + KEY_RETENTION_MS - KEY_SAFETY_MARGIN_MS`: the hour
 * covers clock skew between this machine and boat.dev and the waits inside one call (Retry-After, timeouts),
 * so a retry never reaches boat.dev after it has forgotten the key.
 */
export const KEY_SAFETY_MARGIN_MS = 60 * 60 * 1_000;
/** Until when a key journaled at `createdAt` may still be sent: boat.dev's 24 hours less the safety margin. */
export function keyTrustDeadline(createdAt: number): number {
  return createdAt + KEY_RETENTION_MS - KEY_SAFETY_MARGIN_MS;
}
/** Rows kept at most; a larger file is refused as invalid, a full journal refuses new creates. */
export const MAX_REQUESTS = 4_096;
/** Longest provider request body journaled, in UTF-16 code units (JavaScript `length`). */
export const MAX_REQUEST_BODY_LENGTH = 1_024;

// The id patterns are @drydock/facts' (one definition for every layer), re-exported here as before.
export { BOAT_ID, BOT_ID };
/** Lower-case UUID v4, as `crypto.randomUUID()` mints them (@drydock/facts' `UUID_V4`). */
export const IDEMPOTENCY_KEY = UUID_V4;

export const BotIdSchema = z.string().regex(BOT_ID);
export const BoatIdSchema = z.string().regex(BOAT_ID);
// zod's .min/.max count code points; the format counts UTF-16 units, so the bounds are checked by hand.
export const RequestBodySchema = z
  .string()
  .refine((body) => body.length > 0 && body.length <= MAX_REQUEST_BODY_LENGTH, {
    message: `must be 1-${MAX_REQUEST_BODY_LENGTH} characters`,
  });

/**
 * Validates with `fields` but returns a shallow copy of the input itself, so unknown keys and the key order
 * survive a rewrite exactly as the original writer's object spread keeps them (byte-identical files).
 */
function preservingOrder<S extends z.ZodType>(fields: S) {
  return z.unknown().transform((value, ctx): z.output<S> => {
    const result = fields.safeParse(value);
    if (!result.success) {
      // Issues keep their paths; the offending input is not copied (it may be a key or a request body).
      for (const issue of result.error.issues) ctx.issues.push({ ...issue, input: undefined } as never);
      return z.NEVER;
    }
    return { ...(value as object) } as z.output<S>;
  });
}

/** The fields of one create attempt, as the original journal checks them. */
export const BoatCreateRequestFieldsSchema = z
  .looseObject({
    botId: BotIdSchema,
    /** The exact body sent to boat.dev with this key; a changed body may never reuse the key. */
    requestBody: RequestBodySchema,
    /** Secret: never leaves the journal except to boat.dev. */
    idempotencyKey: z.string().regex(IDEMPOTENCY_KEY),
    /** When the key was minted (ms since the epoch); starts the 24-hour retry window. */
    createdAt: z.number().positive(),
    /** Unset until boat.dev answered with an id; the key alone may still own a Boat. */
    boxId: BoatIdSchema.optional(),
    /** Set once the Boat carries its deterministic name; until then deleting the bot would orphan an unnamed Boat. */
    resolved: z.literal(true).optional(),
  })
  .refine((request) => request.resolved === undefined || request.boxId !== undefined, {
    message: "resolved requires boxId",
    path: ["resolved"],
  });

/**
 * One create attempt. Unknown fields are kept (a newer writer's data is never silently dropped), in their
 * original position, as the original journal does.
 */
export const BoatCreateRequestSchema = preservingOrder(BoatCreateRequestFieldsSchema);

export const BoatCreateJournalFileSchema = z.looseObject({
  version: z.literal(1),
  requests: z.array(BoatCreateRequestSchema).max(MAX_REQUESTS),
});

/** What `boatCreateRecoverySnapshot()` returns: never a key, never a request body. */
export const BoatCreateRecoveryEntrySchema = z.strictObject({
  botId: BotIdSchema,
  boxId: BoatIdSchema.optional(),
  resolved: z.boolean(),
  createdAt: z.number().positive(),
  /** `now - createdAt`, never negative; compare with KEY_RETENTION_MS for an unresolved key. */
  ageMs: z.number().nonnegative(),
});

export type BoatCreateRequest = z.infer<typeof BoatCreateRequestSchema>;
export type BoatCreateJournalFile = z.infer<typeof BoatCreateJournalFileSchema>;
export type BoatCreateRecoveryEntry = z.infer<typeof BoatCreateRecoveryEntrySchema>;
/**
 * A row as `peekBoatCreates()` shows it: the snapshot's fields except `ageMs`, which depends on the clock
 * (the rows do not, so they can be shared while the file is unchanged).
 */
export type BoatCreateView = Readonly<Omit<BoatCreateRecoveryEntry, "ageMs">>;

export interface BoatCreateAttempt {
  request: BoatCreateRequest;
  /**
   * True only when this very call minted the key. Process-local provenance on purpose: a resumed key may
   * resolve a Boat from an earlier run holding user data, and must never authorise automatic cleanup.
   */
  startedNow: boolean;
}
