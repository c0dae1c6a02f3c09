import { BOAT_DELETION_OPERATION_ID, BOAT_ID, UUID_V4 } from "@drydock/facts";
import { z } from "zod";

/**
 * One set of schemas for the boat.dev API v1 (`BOAT_DEV_API.md`), shared by the client and the simulator
 * so the two cannot drift. Response objects are parsed leniently (unknown fields are dropped, never
 * rejected): a provider may add fields (`reason`, `expectedBy`, …) without breaking us. Requests the
 * simulator receives are parsed strictly, because an unknown field there is a caller bug.
 */

/** A Boat id: `bx_` + 8 characters of an alphabet without look-alikes (0, 1, i, l, o); @drydock/facts'. */
export { BOAT_ID };
/** A deletion operation id: `bdop_` + 32 lowercase hex (@drydock/facts' `BOAT_DELETION_OPERATION_ID`). */
export const OPERATION_ID = BOAT_DELETION_OPERATION_ID;
/** Idempotency keys are UUID v4, as the provider requires (@drydock/facts' `UUID_V4`). */
export const IDEMPOTENCY_KEY = UUID_V4;
/** boat.dev keeps an idempotency key for 24 hours; after that the same key creates a new Boat. */
export const KEY_RETENTION_MS = 24 * 60 * 60 * 1000;
export const MAX_LIST_LIMIT = 200;
export const MAX_CURSOR_LENGTH = 4096;

export const boatIdSchema = z.string().regex(BOAT_ID, "not a Boat id");
export const operationIdSchema = z.string().regex(OPERATION_ID, "not a deletion operation id");
export const idempotencyKeySchema = z.string().regex(IDEMPOTENCY_KEY, "not a UUID v4");
/** 1–100 characters, no CR/LF/NUL (names end up in headers and log lines). */
export const boatNameSchema = z
  .string()
  .min(1)
  .max(100)
  .refine((name) => !/[\r\n\0]/.test(name), "name contains CR, LF or NUL");
const timestampSchema = z.iso.datetime({ offset: true });

export const sandboxStateSchema = z.enum(["provisioning", "running", "stopped", "error"]);
export const sandboxSchema = z.object({
  id: boatIdSchema,
  /** null until the Boat is renamed: a fresh Boat is unnamed. */
  name: boatNameSchema.nullable(),
  state: sandboxStateSchema,
  createdAt: timestampSchema,
  ttlSeconds: z.number().int().positive(),
});

export const deletionStatusSchema = z.enum(["pending", "processing", "blocked", "completed"]);
export const deletionOperationSchema = z.object({
  id: operationIdSchema,
  /** Receipts are bound to their target: only a "sandbox" operation on the Boat we deleted counts. */
  kind: z.literal("sandbox"),
  targetId: boatIdSchema,
  status: deletionStatusSchema,
  /** Absent while the provider has nothing finer than `status` to say. */
  stage: z.string().min(1).max(100).optional(),
  requestedAt: timestampSchema,
  /** Absent until the operation reaches a final status. */
  completedAt: timestampSchema.optional(),
});

// ---------------------------------------------------------------------------------------------------
// Requests

export const createSandboxBodySchema = z.strictObject({
  ttlSeconds: z
    .number()
    .int()
    .positive()
    .max(7 * 24 * 60 * 60),
  noEnv: z.boolean(),
});
export const renameSandboxBodySchema = z.strictObject({ name: boatNameSchema });
export const listSandboxesQuerySchema = z.strictObject({
  limit: z.number().int().min(1).max(MAX_LIST_LIMIT).optional(),
  cursor: z.string().min(1).max(MAX_CURSOR_LENGTH).optional(),
});

// ---------------------------------------------------------------------------------------------------
// Responses

export const createSandboxResponseSchema = z.object({
  ok: z.literal(true),
  type: z.literal("sandbox.created"),
  sandbox: sandboxSchema,
});
export const sandboxResponseSchema = z.object({ ok: z.literal(true), sandbox: sandboxSchema });
export const listSandboxesResponseSchema = z.object({
  ok: z.literal(true),
  sandboxes: z.array(sandboxSchema).max(MAX_LIST_LIMIT),
  pageInfo: z.object({
    /** null on the last page. */
    nextCursor: z.string().min(1).max(MAX_CURSOR_LENGTH).nullable(),
  }),
});
export const deletionResponseSchema = z.object({
  ok: z.literal(true),
  type: z.literal("deletion.operation"),
  operation: deletionOperationSchema,
});
export const operationResponseSchema = z.object({
  ok: z.literal(true),
  operation: deletionOperationSchema,
});
export const errorEnvelopeSchema = z.object({
  ok: z.literal(false),
  error: z.object({
    code: z.string().min(1).max(200),
    message: z.string().max(10_000),
    status: z.number().int().min(100).max(599),
    details: z.record(z.string(), z.unknown()).optional(),
  }),
  /** The provider always sends one; a proxy's error page may not, so absence is tolerated. */
  requestId: z.string().min(1).max(200).optional(),
});

// ---------------------------------------------------------------------------------------------------
// Simulator controls (`/_sim/...`): not part of the provider.

export const FAULT_ACTIONS = [
  "fail-before",
  "fail-after",
  "drop-after",
  "drop-before",
  "delay",
  "in-progress",
  "rate-limit",
  "block-deletion",
] as const;
export const faultActionSchema = z.enum(FAULT_ACTIONS);
export const faultRuleSchema = z
  .strictObject({
    action: faultActionSchema,
    /** Any method when absent. */
    method: z.string().min(1).max(10).optional(),
    /** A regex on the path after `/api/v1` (no query); any path when absent. */
    path: z
      .string()
      .min(1)
      .max(500)
      .refine((source) => {
        try {
          new RegExp(source);
          return true;
        } catch {
          return false;
        }
      }, "not a valid regular expression")
      .optional(),
    times: z.number().int().min(1).max(10_000).default(1),
    status: z.number().int().min(400).max(599).optional(),
    code: z.string().min(1).max(100).optional(),
    ms: z.number().int().min(0).max(60_000).optional(),
    retryAfterS: z.number().int().min(0).max(86_400).optional(),
  })
  .refine(
    // boat.dev answers a change it committed with a 5xx (or a 408 timeout) at worst; any other 4xx after a
    // commit would read as proof that nothing happened (a create key discarded while its Boat exists), a
    // state the real provider never produces, so no test may build on it.
    (rule) =>
      rule.action !== "fail-after" || rule.status === undefined || rule.status >= 500 || rule.status === 408,
    {
      message: "fail-after commits, then answers 5xx or 408: its status must be 500-599 or 408",
      path: ["status"],
    },
  );
export const faultsBodySchema = z.strictObject({ rules: z.array(faultRuleSchema).min(1).max(100) });
export const clockBodySchema = z.strictObject({
  advanceMs: z
    .number()
    .int()
    .min(0)
    .max(365 * 24 * 60 * 60 * 1000),
});
export const simSandboxPatchSchema = z.strictObject({
  /** A busy Boat answers DELETE with 409 sandbox_busy. */
  busy: z.boolean().optional(),
  state: sandboxStateSchema.optional(),
});
/**
 * POST /_sim/sandboxes (test-only seeding): `count` Boats named `namePrefix` + index (unnamed without a
 * prefix), or one Boat per entry of `names`. They exist at once (no list lag) and are listed in the given
 * order, before any Boat created later (the order across two seeding calls is not defined).
 */
export const simSeedBodySchema = z.union([
  z.strictObject({
    count: z.number().int().min(1).max(100_000),
    namePrefix: z
      .string()
      .regex(/^[^\r\n\0]{1,90}$/, "1–90 characters, no CR, LF or NUL")
      .optional(),
  }),
  z.strictObject({ names: z.array(boatNameSchema.nullable()).min(1).max(100_000) }),
]);
export const simStatsSchema = z.object({
  /** Boats that came into existence: the billing truth. */
  createsCommitted: z.number().int().min(0),
  /** Authenticated POST /sandboxes requests received, whatever their outcome. */
  createRequests: z.number().int().min(0),
  /** Deletion operations started (a repeated DELETE answered with the running operation is not counted). */
  deletesAccepted: z.number().int().min(0),
  /** Authenticated DELETE /sandboxes/{id} requests received, whatever their outcome. */
  deleteRequests: z.number().int().min(0),
  /** Boats that exist now (created and not yet completely deleted). */
  live: z.number().int().min(0),
  /** Live Boats per current name; unnamed Boats are counted in `unnamed`. */
  perName: z.record(z.string(), z.number().int().min(1)),
  unnamed: z.number().int().min(0),
});
export const simHistoryEventSchema = z.object({
  at: z.number().int(),
  event: z.enum(["created", "renamed", "deletion_requested", "deletion_blocked", "deleted", "patched"]),
  name: z.string().nullable().optional(),
  operationId: operationIdSchema.optional(),
});
export const simSandboxRecordSchema = z.object({
  id: boatIdSchema,
  name: boatNameSchema.nullable(),
  state: sandboxStateSchema,
  createdAt: z.number().int(),
  ttlSeconds: z.number().int().positive(),
  busy: z.boolean(),
  /** SHA-256 of the idempotency key that created it (never the key): lets tests group Boats by key. */
  keyHash: z.string().regex(/^[a-f0-9]{64}$/),
  /** null while the Boat exists. */
  deletedAt: z.number().int().nullable(),
  history: z.array(simHistoryEventSchema),
});
export const simOperationRecordSchema = z.object({
  id: operationIdSchema,
  targetId: boatIdSchema,
  status: deletionStatusSchema,
  requestedAt: z.number().int(),
  completedAt: z.number().int().nullable(),
  polls: z.number().int().min(0),
  /** Whether this operation ends `blocked` instead of `completed`. */
  endsBlocked: z.boolean(),
});
/**
 * A remembered idempotency key. Only its SHA-256 is kept (the key is a secret of the caller); the
 * fingerprint is the canonical JSON of the body it was first used with.
 */
export const simKeyRecordSchema = z.object({
  keyHash: z.string().regex(/^[a-f0-9]{64}$/),
  fingerprint: z.string().max(10_000),
  firstSeenAt: z.number().int(),
  boatId: boatIdSchema,
});
/**
 * One committed change in the simulator's state log (`<stateFile>.log`): the clock and the counters as they
 * now are, and every record the change touched, whole. Each field holds a value, never a delta, so replaying
 * a record twice (a log that outlived the snapshot it was compacted into) changes nothing.
 */
export const simStateLogRecordSchema = z.object({
  clockOffsetMs: z.number().int().min(0),
  counters: z.object({
    createsCommitted: z.number().int().min(0),
    createRequests: z.number().int().min(0),
    deletesAccepted: z.number().int().min(0),
    deleteRequests: z.number().int().min(0),
  }),
  sandboxes: z.array(simSandboxRecordSchema),
  operations: z.array(simOperationRecordSchema),
  keys: z.array(simKeyRecordSchema),
});
/**
 * The simulator's state file (`stateFile`): the snapshot of everything committed up to the start of its
 * log. Version 2 has a log beside it (`<stateFile>.log`); version 1 (written whole on every change) is read
 * and converted at start. A simulator that knows only version 1 refuses version 2 instead of ignoring the log.
 */
export const simStateFileSchema = simStateLogRecordSchema.extend({
  version: z.union([z.literal(1), z.literal(2)]),
});

export type Sandbox = z.infer<typeof sandboxSchema>;
export type SandboxState = z.infer<typeof sandboxStateSchema>;
export type DeletionOperation = z.infer<typeof deletionOperationSchema>;
export type DeletionStatus = z.infer<typeof deletionStatusSchema>;
export type CreateSandboxBody = z.infer<typeof createSandboxBodySchema>;
export type RenameSandboxBody = z.infer<typeof renameSandboxBodySchema>;
export type ListSandboxesQuery = z.infer<typeof listSandboxesQuerySchema>;
export type CreateSandboxResponse = z.infer<typeof createSandboxResponseSchema>;
export type SandboxResponse = z.infer<typeof sandboxResponseSchema>;
export type ListSandboxesResponse = z.infer<typeof listSandboxesResponseSchema>;
export type DeletionResponse = z.infer<typeof deletionResponseSchema>;
export type OperationResponse = z.infer<typeof operationResponseSchema>;
export type ErrorEnvelope = z.infer<typeof errorEnvelopeSchema>;
export type FaultAction = z.infer<typeof faultActionSchema>;
export type FaultRule = z.input<typeof faultRuleSchema>;
export type SimStats = z.infer<typeof simStatsSchema>;
export type SimSeedBody = z.infer<typeof simSeedBodySchema>;
export type SimSandboxRecord = z.infer<typeof simSandboxRecordSchema>;
export type SimOperationRecord = z.infer<typeof simOperationRecordSchema>;
export type SimKeyRecord = z.infer<typeof simKeyRecordSchema>;
export type SimStateFile = z.infer<typeof simStateFileSchema>;
export type SimStateLogRecord = z.infer<typeof simStateLogRecordSchema>;
