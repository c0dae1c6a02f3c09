import { BOAT_DELETION_OPERATION_ID, BOAT_ID, BOT_ID } from "@drydock/facts";
import { z } from "zod";

// boat.dev's Boat id and the bot ids the journals accept: @drydock/facts' patterns, re-exported as before.
export { BOAT_ID, BOT_ID };
/** boat.dev's deletion operation id (@drydock/facts' `BOAT_DELETION_OPERATION_ID`). */
export const OPERATION_ID = BOAT_DELETION_OPERATION_ID;

export const boatIdSchema = z.string().regex(BOAT_ID);
export const botIdSchema = z.string().regex(BOT_ID);
/** A provider name: 1–100 characters, no CR, LF or NUL. */
export const boatNameSchema = z
  .string()
  .min(1)
  .max(100)
  .refine((name) => !/[\r\n\0]/.test(name), "no CR, LF or NUL");

/** The exact body of every create; the create journal binds its key to these bytes. */
export const CREATE_REQUEST_BODY = { ttlSeconds: 28_800, noEnv: true } as const;

export const providerStateSchema = z.enum(["provisioning", "running", "stopped", "error"]);

/** A bot's Boat as `findBoat` returns it: what the caller may show and act on, nothing else. */
export const boatSchema = z.object({
  boxId: boatIdSchema,
  /** null until the deterministic rename has happened. */
  name: z.string().nullable(),
  state: providerStateSchema,
  ownerBotId: botIdSchema,
  /** The Boat was found under the pre-scope name and adopted. */
  legacyName: z.boolean(),
});
export type Boat = z.infer<typeof boatSchema>;

/**
 * One row of `inventory()`. Sanitized: ids, names, states and recovery facts only — never keys, request
 * bodies, tokens, addresses or environment.
 */
export const inventoryItemSchema = z.object({
  /** As listed; only trusted (and usable) when `available` is true. */
  boxId: z.string(),
  name: z.string().nullable(),
  /** null when no journal or known bot claims it (an orphan of this installation). */
  ownerBotId: botIdSchema.nullable(),
  /**
   * Provider state, or `removing` while an accepted deletion is pending, `deletion_blocked` while a
   * blocked fence stands, `unknown` when a remembered Boat could not be read.
   */
  state: z.enum(["provisioning", "running", "stopped", "error", "removing", "deletion_blocked", "unknown"]),
  /** false: do not use or delete this row before a person has repaired it (see `problem`). */
  available: z.boolean(),
  problem: z.string().optional(),
  naming: z.enum(["scoped", "legacy", "unnamed", "other"]),
  /** The create journal holds the bot→Boat ownership record for it (resolved or not). */
  remembered: z.boolean(),
  /** The deletion fence standing for it, if any. */
  deletion: z
    .object({
      phase: z.enum(["prepared", "accepted", "blocked"]),
      status: z.enum(["pending", "processing", "blocked", "completed"]).optional(),
    })
    .optional(),
});
export type InventoryItem = z.infer<typeof inventoryItemSchema>;

export const deletionOutcomeSchema = z.enum(["confirmed", "pending", "blocked"]);
export type DeletionOutcome = z.infer<typeof deletionOutcomeSchema>;

/** What `recoverAtStartup` found and did. It only reads, polls and retires proven-finished records. */
export const recoveryReportSchema = z.object({
  deletions: z.array(
    z.object({
      boxId: z.string(),
      ownerBotId: botIdSchema.nullable(),
      phaseBefore: z.enum(["prepared", "accepted", "blocked"]),
      outcome: z.union([deletionOutcomeSchema, z.literal("error")]),
      /** The error's message when `outcome` is `error` (sanitized; never a key or token). */
      error: z.string().optional(),
    }),
  ),
  unresolvedCreates: z.array(
    z.object({
      botId: botIdSchema,
      /** Absent: boat.dev's answer was never journaled; the key alone may still own a Boat. */
      boxId: z.string().optional(),
      ageMs: z.number(),
      /**
       * Time left until the key is no longer sent: boat.dev's 24-hour idempotency window less the create
       * journal's KEY_SAFETY_MARGIN_MS (1 h); 0 when it has passed.
       */
      retryWindowLeftMs: z.number(),
      /**
       * A key-only row past that point: a retry could bill a second Boat, so a person must reconcile it in
       * boat.dev. Never set for a row with a Boat id (it needs no key).
       */
      expired: z.boolean(),
    }),
  ),
  /** A journal that could not be read (recovery_paused) — nothing else was attempted for it. */
  journalErrors: z.array(z.string()),
});
export type RecoveryReport = z.infer<typeof recoveryReportSchema>;
