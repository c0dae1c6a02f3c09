import { CHECKPOINT_ID, RESTORE_OPERATION_ID } from "@drydock/facts";
import { z } from "zod";

/** `sha256:` + 64 lower-case hex digits: every digest and hash in the saga files. */
export const HASH_PATTERN = /^sha256:[0-9a-f]{64}$/;
/** Operation ids become directory names: one safe path segment, never `.`-prefixed. */
export const OPERATION_ID_PATTERN = RESTORE_OPERATION_ID;
/** Checkpoint ids become file names the same way. */
export const CHECKPOINT_ID_PATTERN = CHECKPOINT_ID;

export const HashSchema = z.string().regex(HASH_PATTERN);
export const OperationIdSchema = z.string().regex(OPERATION_ID_PATTERN);
export const CheckpointIdSchema = z.string().regex(CHECKPOINT_ID_PATTERN);
const AbsolutePathSchema = z
  .string()
  .min(1)
  .max(4096)
  .refine((value) => value.startsWith("/") && !value.includes("\0"), "an absolute path without NUL");
const CountSchema = z.int().min(0).max(10_000_000);
const ReasonSchema = z.string().min(1).max(2048);
const ErrorCodeSchema = z.string().min(1).max(128);
const RequestIdSchema = z.string().regex(OPERATION_ID_PATTERN);
/** ISO-8601 UTC with milliseconds, exactly as `Date.prototype.toISOString` prints it. */
const TimestampSchema = z
  .string()
  .regex(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
  .refine((value) => {
    const ms = Date.parse(value);
    return Number.isFinite(ms) && new Date(ms).toISOString() === value;
  }, "a real instant");

// ---------------------------------------------------------------------------------------------------------
// Workspace lock owner

/** The caller data a workspace lock carries inside its file-lock owner. */
export const WorkspaceLockPayloadSchema = z.strictObject({
  /** The saga (operation id) this lock belongs to; a takeover keeps it. */
  transactionId: OperationIdSchema,
  /** Canonical (realpath) workspace root. */
  workspaceRoot: AbsolutePathSchema,
  /**
   * What the lock guards. `checkpoint-restore`: a restore saga (its dead lock is evidence, settled only by
   * a fenced recovery). `workspace-edit`: a short edit that is atomic per file (a file write, deletion or
   * checkpoint); its dead lock guards nothing and the next acquisition takes it over. A version that knows
   * only `checkpoint-restore` reads a `workspace-edit` lock as invalid and refuses to lock (fails closed).
   */
  purpose: z.enum(["checkpoint-restore", "workspace-edit"]),
});
export type WorkspaceLockPayload = z.infer<typeof WorkspaceLockPayloadSchema>;
export type WorkspaceLockPurpose = WorkspaceLockPayload["purpose"];

/**
 * A workspace lock owner: the @drydock/file-lock owner file (`version`, `pid`, `token`, `createdAt`,
 * optional `host`/`bootId`/`startTime`) with the workspace payload. Loose, like file-lock's own schema:
 * a field a newer file-lock adds is kept, and the owner digest covers it.
 */
export const WorkspaceLockOwnerSchema = z.looseObject({
  version: z.literal(1),
  pid: z.int().min(1),
  token: z.string().min(1).max(128),
  createdAt: z.number().gt(0),
  host: z.string().min(1).max(255).optional(),
  bootId: z.string().min(1).max(64).optional(),
  startTime: z.int().nonnegative().optional(),
  payload: WorkspaceLockPayloadSchema,
});
export type WorkspaceLockOwner = z.infer<typeof WorkspaceLockOwnerSchema>;

// ---------------------------------------------------------------------------------------------------------
// Evidence, one schema per phase. Strict: an unknown key is INVALID_EVIDENCE when written, CORRUPT on replay.

const OwnerEvidence = {
  // A saga's lock is always a restore's: an edit's owner in its evidence is invalid.
  workspaceLockOwner: WorkspaceLockOwnerSchema.refine(
    (owner) => owner.payload.purpose === "checkpoint-restore",
    "a restore's workspace lock owner has purpose checkpoint-restore",
  ),
  /** `ownerDigest(workspaceLockOwner)`; the store checks it. */
  lockOwnerDigest: HashSchema,
};

export const CreatedEvidenceSchema = z.strictObject({
  kind: z.literal("checkpoint-restore"),
  checkpointId: CheckpointIdSchema,
  /** Digest of the checkpoint manifest the restore was planned on. */
  checkpointManifestDigest: HashSchema,
  /** The process that wrote `created`: a lock-free abort must prove it dead. */
  actorPid: z.int().min(1),
  /** Set by the store, never by the caller. */
  workspaceRoot: AbsolutePathSchema,
  /** Set by the store: digest of the workspace directory's identity (path, device, inode). */
  workspaceIdentity: HashSchema,
});
/** What a caller passes to `create`: the store adds `workspaceRoot` and `workspaceIdentity` itself. */
export const CreateEvidenceSchema = CreatedEvidenceSchema.omit({
  workspaceRoot: true,
  workspaceIdentity: true,
});

export const LockedEvidenceSchema = z.strictObject(OwnerEvidence);
export const PreparedEvidenceSchema = z.strictObject({
  /** Digest of the workspace tree before any change. */
  prestateDigest: HashSchema,
  /** Number of workspace changes (writes, removals, directory creations) the restore will make. */
  targetCount: CountSchema,
});
export const IntentCommittedEvidenceSchema = z.strictObject({
  intentCommitDigest: HashSchema,
  /** Who authorised the intent: only the operation itself here (no session transcript). */
  authority: z.literal("operation"),
});
export const SafetyReadyEvidenceSchema = z.strictObject({
  /** The undo checkpoint, taken of the workspace after `prepared` and before the first change. */
  safetyCheckpointId: CheckpointIdSchema,
  safetyManifestDigest: HashSchema,
  coverage: z.literal("full"),
});
export const MutationStartedEvidenceSchema = z.strictObject({
  targetCount: CountSchema,
  coverage: z.literal("full"),
});
export const WorkspaceAppliedEvidenceSchema = z.strictObject({
  appliedCount: CountSchema,
  /** Digest of the workspace tree as read back after the last change. */
  poststateDigest: HashSchema,
});
export const SessionCommittedEvidenceSchema = z.strictObject({ sessionCommitDigest: HashSchema });
export const CompletedEvidenceSchema = z.union([
  z.strictObject({ resultDigest: HashSchema }),
  z.strictObject({
    recoveryAction: z.literal("resume-already-completed"),
    sessionCommitDigest: HashSchema,
    resultDigest: HashSchema,
  }),
]);
export const AbortedEvidenceSchema = z.union([
  z.strictObject({ reason: ReasonSchema, errorCode: ErrorCodeSchema.optional() }),
  z.strictObject({
    recoveryAction: z.enum(["abort-pre-intent", "abort-before-lock"]),
    reason: ReasonSchema,
  }),
]);
export const RecoveryRequiredEvidenceSchema = z.strictObject({
  reason: ReasonSchema,
  errorCode: ErrorCodeSchema,
});
export const RecoveryStartedEvidenceSchema = z.strictObject({
  ...OwnerEvidence,
  recoveryAction: z.enum(["abort-pre-intent", "rollback-partial-mutation", "resume-already-completed"]),
  /** Required for a rollback: binds every rollback event of this cycle. */
  recoveryRequestId: RequestIdSchema.optional(),
});
const RollbackBinding = {
  recoveryRequestId: RequestIdSchema,
  safetyCheckpointId: CheckpointIdSchema,
  safetyManifestDigest: HashSchema,
  /** Digest of the rollback plan (the changes that make the workspace equal the safety checkpoint). */
  rollbackPlanIdentity: HashSchema,
  originalMutationTargetCount: CountSchema,
  targetCount: CountSchema,
};
export const RollbackPreparedEvidenceSchema = z.strictObject(RollbackBinding);
export const RollbackStartedEvidenceSchema = z.strictObject(RollbackBinding);
export const WorkspaceRolledBackEvidenceSchema = z.strictObject({
  recoveryRequestId: RequestIdSchema,
  rolledBackCount: CountSchema,
  poststateDigest: HashSchema,
});
export const SessionRollbackCommittedEvidenceSchema = z.strictObject({
  recoveryRequestId: RequestIdSchema,
  sessionRollbackDigest: HashSchema,
});
export const RolledBackEvidenceSchema = z.strictObject({
  recoveryRequestId: RequestIdSchema,
  recoveryAction: z.literal("rollback-partial-mutation"),
  rollbackPlanIdentity: HashSchema,
  poststateDigest: HashSchema,
});

export type CreatedEvidence = z.infer<typeof CreatedEvidenceSchema>;
export type CreateEvidence = z.infer<typeof CreateEvidenceSchema>;
export type LockedEvidence = z.infer<typeof LockedEvidenceSchema>;
export type PreparedEvidence = z.infer<typeof PreparedEvidenceSchema>;
export type IntentCommittedEvidence = z.infer<typeof IntentCommittedEvidenceSchema>;
export type SafetyReadyEvidence = z.infer<typeof SafetyReadyEvidenceSchema>;
export type MutationStartedEvidence = z.infer<typeof MutationStartedEvidenceSchema>;
export type WorkspaceAppliedEvidence = z.infer<typeof WorkspaceAppliedEvidenceSchema>;
export type CompletedEvidence = z.infer<typeof CompletedEvidenceSchema>;
export type AbortedEvidence = z.infer<typeof AbortedEvidenceSchema>;
export type RecoveryRequiredEvidence = z.infer<typeof RecoveryRequiredEvidenceSchema>;
export type RecoveryStartedEvidence = z.infer<typeof RecoveryStartedEvidenceSchema>;
export type RollbackPreparedEvidence = z.infer<typeof RollbackPreparedEvidenceSchema>;
export type WorkspaceRolledBackEvidence = z.infer<typeof WorkspaceRolledBackEvidenceSchema>;
export type RolledBackEvidence = z.infer<typeof RolledBackEvidenceSchema>;

// ---------------------------------------------------------------------------------------------------------
// Saga files

export const PHASE_NAMES = [
  "created",
  "locked",
  "prepared",
  "intent_committed",
  "safety_ready",
  "mutation_started",
  "workspace_applied",
  "session_committed",
  "completed",
  "aborted",
  "recovery_required",
  "recovery_started",
  "rollback_prepared",
  "rollback_started",
  "workspace_rolled_back",
  "session_rollback_committed",
  "rolled_back",
] as const;
export const PhaseSchema = z.enum(PHASE_NAMES);
export type Phase = z.infer<typeof PhaseSchema>;

export const SAGA_EVENT_SCHEMA = "drydock.restore-saga-event";
export const SAGA_HEAD_SCHEMA = "drydock.restore-saga-head";

/**
 * One immutable event file `NNNNNN-<phase>.json`. `hash` = digest (domain `drydock-restore-saga-event-v1`)
 * of the event without `hash`; `prevHash` is the previous event's hash (null for seq 1), which chains them.
 */
export const SagaEventSchema = z.strictObject({
  schema: z.literal(SAGA_EVENT_SCHEMA),
  version: z.literal(1),
  operationId: OperationIdSchema,
  seq: z.int().min(1).max(1_000_000),
  prevHash: HashSchema.nullable(),
  phase: PhaseSchema,
  /** Clamped to never go backwards along the chain, whatever the clock does. */
  timestamp: TimestampSchema,
  /** Checked against the phase's evidence schema on every replay. */
  evidence: z.record(z.string(), z.unknown()),
  hash: HashSchema,
});
export type SagaEvent = z.infer<typeof SagaEventSchema>;

/**
 * `HEAD`: which event is the saga's current head. `unpublished` (seq 0, nulls) is written before event 1
 * so a directory with events but no HEAD can never be a legitimate crash state. `anchorHash` is the
 * digest (domain `drydock-restore-saga-head-v1`) of HEAD without `anchorHash`.
 */
export const SagaHeadSchema = z.strictObject({
  schema: z.literal(SAGA_HEAD_SCHEMA),
  version: z.literal(1),
  state: z.enum(["unpublished", "committed"]),
  operationId: OperationIdSchema,
  seq: z.int().min(0).max(1_000_000),
  phase: PhaseSchema.nullable(),
  /** The head event's file name; null before event 1. */
  eventFile: z
    .string()
    .regex(/^\d{6}-[a-z_]+\.json$/)
    .nullable(),
  eventHash: HashSchema.nullable(),
  anchorHash: HashSchema,
});
export type SagaHead = z.infer<typeof SagaHeadSchema>;

export const SAGA_PURGE_RECEIPT_SCHEMA = "drydock.restore-saga-purge-receipt";

/**
 * `.purged/<operationId>.json`: what is left of an archived saga once its events are deleted. It keeps the
 * id from being used again and lets a retried purge answer `alreadyPurged`; the head hash is the whole
 * chain's digest, so a copy of the events kept elsewhere can still be checked against it.
 */
export const SagaPurgeReceiptSchema = z.strictObject({
  schema: z.literal(SAGA_PURGE_RECEIPT_SCHEMA),
  version: z.literal(1),
  operationId: OperationIdSchema,
  phase: PhaseSchema,
  seq: z.int().min(1).max(1_000_000),
  headHash: HashSchema,
  purgedAt: TimestampSchema,
});
export type SagaPurgeReceipt = z.infer<typeof SagaPurgeReceiptSchema>;

// ---------------------------------------------------------------------------------------------------------
// Checkpoints

/** A workspace-relative path: `/`-separated, no empty, `.` or `..` segment, no NUL, not absolute. */
export const RelativePathSchema = z
  .string()
  .min(1)
  .max(4096)
  .refine(
    (value) =>
      !value.startsWith("/") &&
      !value.includes("\0") &&
      !value.includes("\\") &&
      value.split("/").every((segment) => segment !== "" && segment !== "." && segment !== ".."),
    "a normalised relative path inside the workspace",
  );

export const ManifestEntrySchema = z.discriminatedUnion("type", [
  z.strictObject({
    type: z.literal("file"),
    path: RelativePathSchema,
    size: z.int().min(0),
    /** Permission bits (`mode & 0o7777`). */
    mode: z.int().min(0).max(0o7777),
    /** Hex sha256 of the content; also the blob's name. */
    sha256: z.string().regex(/^[0-9a-f]{64}$/),
  }),
  z.strictObject({
    type: z.literal("dir"),
    path: RelativePathSchema,
    mode: z.int().min(0).max(0o7777),
  }),
]);
export type ManifestEntry = z.infer<typeof ManifestEntrySchema>;

export const CHECKPOINT_MANIFEST_SCHEMA = "drydock.checkpoint-manifest";

/** `<dataDir>/checkpoints/manifests/<checkpointId>.json`. Entries sorted by path (code unit order). */
export const CheckpointManifestSchema = z.strictObject({
  schema: z.literal(CHECKPOINT_MANIFEST_SCHEMA),
  version: z.literal(1),
  checkpointId: CheckpointIdSchema,
  workspaceRoot: AbsolutePathSchema,
  createdAt: TimestampSchema,
  /** `user` for a checkpoint someone asked for, `safety` for the undo checkpoint of a restore. */
  kind: z.enum(["user", "safety"]),
  files: z.int().min(0),
  bytes: z.int().min(0),
  entries: z.array(ManifestEntrySchema),
});
export type CheckpointManifest = z.infer<typeof CheckpointManifestSchema>;
