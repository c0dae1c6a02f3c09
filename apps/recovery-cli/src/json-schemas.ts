/**
 * The shapes of every `--json` document, as zod schemas: the CLI's promise to scripts. Each document
 * carries `schemaVersion` at its top level. Within a version fields are only ever ADDED (a consumer
 * ignores fields it does not know, so parse with these schemas or with loose objects); a field removed,
 * renamed or changed in meaning is a new `schemaVersion`. A test validates the output of every command
 * against its schema here, and the top-level objects are strict: a field added to a command's output
 * without being added here fails that test.
 */
import {
  BoatActionNameSchema,
  BoatPlanSchema,
  PlanItemSchema,
  RestoreActionNameSchema,
  RestoreActionResultSchema,
  RestoreFenceSchema,
  RestorePreviewSchema,
} from "@drydock/recovery-controller";
import { z } from "zod";

/** The version every document carries as `schemaVersion`. */
export const JSON_SCHEMA_VERSION = 1;

const Version = z.literal(JSON_SCHEMA_VERSION);
const IsoDate = z.string();

/** A preview: nothing changed. `confirmed: false` when a person answered anything but `y` at the prompt. */
const previewBase = {
  schemaVersion: Version,
  ok: z.literal(true),
  preview: z.literal(true),
  changed: z.literal(false),
  confirmed: z.literal(false).optional(),
};

/** The error envelope, on stderr: `{ schemaVersion, ok: false, error: { code, message }, exitCode }`. */
export const ErrorDocumentSchema = z.strictObject({
  schemaVersion: Version,
  ok: z.literal(false),
  error: z.strictObject({ code: z.string().regex(/^[a-z0-9_]+$/), message: z.string() }),
  exitCode: z.number().int().min(1).max(7),
});

export const FindingSchema = z.looseObject({
  area: z.enum(["restore", "create", "deletion", "boat", "lock", "journal", "provider"]),
  attention: z.boolean(),
  subject: z.string(),
  message: z.string(),
  command: z.string().nullable(),
  advice: z.string().optional(),
  waitMs: z.number().optional(),
  inProgress: z.literal(true).optional(),
  note: z.string().optional(),
});

export const StatusDocumentSchema = z.strictObject({
  schemaVersion: Version,
  findings: z.array(FindingSchema),
  attention: z.number().int().min(0),
  providerChecked: z.boolean(),
  verdict: z.string().regex(/^(OK|ATTENTION|INCOMPLETE):/),
  /** The storage backend read and where it keeps its state; null when it could not be opened. */
  storage: z.strictObject({ kind: z.enum(["file", "sqlite", "postgres"]), location: z.string() }).nullable(),
});

export const CreateRowSchema = z.strictObject({
  botId: z.string(),
  boxId: z.string().nullable(),
  resolved: z.boolean(),
  createdAt: IsoDate,
  ageMs: z.number(),
  windowLeftMs: z.number(),
  expired: z.boolean(),
  expectedName: z.string().nullable(),
});

export const CreatesListDocumentSchema = z.strictObject({
  schemaVersion: Version,
  creates: z.array(CreateRowSchema),
  environmentIdMissing: z.boolean(),
  /** Pass as `--cursor` for the next page (`--limit`, default 100); null on the last page. */
  nextCursor: z.string().nullable(),
});

export const DeletionRowSchema = z.strictObject({
  boxId: z.string(),
  name: z.string(),
  ownerBotId: z.string().nullable(),
  phase: z.enum(["prepared", "accepted", "blocked"]),
  status: z.string().nullable(),
  operationId: z.string().nullable(),
  requestedAt: IsoDate,
  ageMs: z.number(),
  inFlightLeftMs: z.number(),
});

export const DeletionsListDocumentSchema = z.strictObject({
  schemaVersion: Version,
  deletions: z.array(DeletionRowSchema),
  /** Pass as `--cursor` for the next page (`--limit`, default 100); null on the last page. */
  nextCursor: z.string().nullable(),
});

/** A Boat action's preview (`creates adopt|retire`, `deletions reconcile|retry` without --yes). */
export const BoatActionPreviewSchema = z.strictObject({
  ...previewBase,
  action: BoatActionNameSchema,
  botId: z.string().optional(),
  boxId: z.string().optional(),
  eligible: z.boolean(),
  item: PlanItemSchema.nullable(),
  command: z.string().nullable(),
});

/** A Boat action applied: the recovery controller's result, which names its action. */
export const BoatActionResultSchema = z.looseObject({ schemaVersion: Version, action: BoatActionNameSchema });

export const BoatActionDocumentSchema = z.union([BoatActionPreviewSchema, BoatActionResultSchema]);

export const ReconcileDocumentSchema = z.strictObject({
  schemaVersion: Version,
  plan: BoatPlanSchema,
  changed: z.literal(false),
});

export const RestoreListItemSchema = z.looseObject({
  botId: z.string(),
  operationId: z.string(),
  phase: z.string(),
  basePhase: z.string().nullable(),
  seq: z.number().int(),
  updatedAt: z.string().nullable(),
  ownerAlive: z.boolean().nullable(),
  next: RestoreActionNameSchema.nullable(),
  command: z.string().nullable(),
  problem: z.string().nullable(),
  attention: z.boolean(),
  inProgress: z.boolean(),
  retainedByLiveOwner: z.object({ pid: z.number() }).nullable(),
  stalledForMs: z.number().nullable(),
});

export const RestoresListDocumentSchema = z.strictObject({
  schemaVersion: Version,
  restores: z.array(RestoreListItemSchema),
  gaps: z.array(z.strictObject({ botId: z.string(), message: z.string() })),
  /** Pass as `--cursor` for the next page (`--limit`, default 100); null on the last page. */
  nextCursor: z.string().nullable(),
});

export const RestoresShowDocumentSchema = z.strictObject({
  schemaVersion: Version,
  restore: z.looseObject({
    ...RestorePreviewSchema.shape,
    botId: z.string(),
    workspaceRoot: z.string(),
    chain: z.literal("verified"),
  }),
  commands: z.record(RestoreActionNameSchema, z.string().nullable()),
});

export const RestoreActionPreviewSchema = z.strictObject({
  ...previewBase,
  action: RestoreActionNameSchema,
  operationId: z.string(),
  eligible: z.boolean(),
  blockers: z.array(z.string()),
  fence: RestoreFenceSchema,
  command: z.string().nullable(),
});

export const RestoreActionDocumentSchema = z.union([
  RestoreActionPreviewSchema,
  z.looseObject({ schemaVersion: Version, ...RestoreActionResultSchema.shape }),
]);

const PurgeCandidateSchema = z.strictObject({
  botId: z.string(),
  operationId: z.string(),
  phase: z.string(),
  seq: z.number().int(),
  headHash: z.string(),
  finishedAt: z.string(),
});
const PurgeKeptSchema = z.strictObject({ botId: z.string(), operationId: z.string(), problem: z.string() });

export const RestoresPurgeDocumentSchema = z.union([
  z.strictObject({
    ...previewBase,
    candidates: z.array(PurgeCandidateSchema),
    kept: z.array(PurgeKeptSchema),
    stateDigest: z.string().regex(/^sha256:[0-9a-f]{64}$/),
    command: z.string(),
  }),
  z.strictObject({
    schemaVersion: Version,
    ok: z.literal(true),
    purged: z.array(PurgeCandidateSchema),
    kept: z.array(PurgeKeptSchema),
  }),
]);

export const LockRowSchema = z.strictObject({
  path: z.string(),
  kind: z.enum(["workspace", "workspace-registry", "journal", "saga-state", "other"]),
  present: z.boolean(),
  pid: z.number().int().nullable(),
  createdAt: IsoDate.nullable(),
  alive: z.boolean().nullable(),
  ownerDigest: z.string().nullable(),
  transactionId: z.string().nullable(),
  purpose: z.enum(["checkpoint-restore", "workspace-edit"]).nullable(),
  note: z.string().nullable(),
  leftovers: z.number().int(),
  kept: z.number().int(),
  problem: z.string().nullable(),
});

export const LocksListDocumentSchema = z.strictObject({
  schemaVersion: Version,
  locks: z.array(LockRowSchema),
  /** Pass as `--cursor` for the next page (`--limit`, default 100); null on the last page. */
  nextCursor: z.string().nullable(),
});

export const LocksGcDocumentSchema = z.union([
  z.strictObject({ ...previewBase, candidates: z.array(z.string()), command: z.string() }),
  z.strictObject({
    schemaVersion: Version,
    ok: z.literal(true),
    removed: z.array(z.string()),
    kept: z.array(z.string()),
  }),
]);

const InstanceSchema = z.strictObject({
  id: z.string(),
  host: z.string(),
  pid: z.number().int(),
  startedAt: z.number(),
  leaseUntil: z.number(),
  epoch: z.number().int(),
  state: z.enum(["live", "dead", "stopped"]),
  /** leaseUntil minus the database's now (negative once passed). */
  leaseLeftMs: z.number(),
  holdsLease: z.boolean(),
  fence: z.string(),
});

export const InstancesListDocumentSchema = z.strictObject({
  schemaVersion: Version,
  databaseNow: IsoDate,
  instances: z.array(InstanceSchema),
});

export const InstancesDeclareDeadDocumentSchema = z.union([
  z.strictObject({
    ...previewBase,
    instance: InstanceSchema,
    expectedState: z.string(),
    command: z.string(),
  }),
  z.strictObject({
    schemaVersion: Version,
    ok: z.literal(true),
    preview: z.literal(false),
    changed: z.boolean(),
    instance: InstanceSchema,
  }),
]);

export const CompletionDocumentSchema = z.strictObject({
  schemaVersion: Version,
  shell: z.enum(["bash", "zsh", "fish"]),
  script: z.string(),
});

const StorageKindSchema = z.enum(["file", "sqlite", "postgres"]);
const MigrateCountsSchema = z.strictObject({
  creates: z.number().int().min(0),
  deletes: z.number().int().min(0),
  bots: z.number().int().min(0),
  meta: z.number().int().min(0),
});

const MigrateWorkspacesSchema = z.strictObject({
  workspaces: z.int().min(0),
  files: z.int().min(0),
  checkpoints: z.int().min(0),
  bytes: z.int().min(0),
  /** Deleted bots' retired workspaces: not moved. */
  retired: z.int().min(0),
});

/**
 * `storage migrate`: the preview (what would move and the fence to echo), the directory already bound to
 * the target (nothing to do), or the migration applied (`outcome`: migrated, or resumed after a crash).
 */
export const StorageMigrateDocumentSchema = z.union([
  z.strictObject({
    ...previewBase,
    from: StorageKindSchema,
    to: StorageKindSchema,
    /** null when an interrupted migration is finished (its source may be retired: it is not read). */
    counts: MigrateCountsSchema.nullable(),
    /** The interrupted migration the command finishes, when there is one. */
    interrupted: z
      .strictObject({
        from: StorageKindSchema,
        to: StorageKindSchema,
        phase: z.enum(["importing", "verified"]),
        at: z.number(),
      })
      .optional(),
    /** `--to postgres`: the workspaces that move (live bots') and how many retired ones stay behind. */
    workspaces: MigrateWorkspacesSchema.optional(),
    /** `--to postgres`: the database, its password as `***`. */
    target: z.string().optional(),
    /** Out of postgres (`--to file|sqlite`): the database, its password as `***`. */
    source: z.string().optional(),
    expectedState: z.string().regex(/^sha256:[0-9a-f]{64}$/),
    command: z.string(),
  }),
  z.strictObject({
    schemaVersion: Version,
    ok: z.literal(true),
    preview: z.boolean(),
    changed: z.boolean(),
    from: StorageKindSchema,
    to: StorageKindSchema,
    outcome: z.enum(["migrated", "resumed", "unchanged"]),
    counts: MigrateCountsSchema,
    workspaces: MigrateWorkspacesSchema.optional(),
    target: z.string().optional(),
    source: z.string().optional(),
  }),
]);

/** The schema of each command's `--json` document on stdout, by command path (errors: `ErrorDocumentSchema`). */
export const JSON_SCHEMAS = {
  status: StatusDocumentSchema,
  "creates list": CreatesListDocumentSchema,
  "creates adopt": BoatActionDocumentSchema,
  "creates retire": BoatActionDocumentSchema,
  "deletions list": DeletionsListDocumentSchema,
  "deletions reconcile": BoatActionDocumentSchema,
  "deletions retry": BoatActionDocumentSchema,
  "restores list": RestoresListDocumentSchema,
  "restores show": RestoresShowDocumentSchema,
  "restores abort": RestoreActionDocumentSchema,
  "restores release": RestoreActionDocumentSchema,
  "restores complete": RestoreActionDocumentSchema,
  "restores rollback": RestoreActionDocumentSchema,
  "restores purge": RestoresPurgeDocumentSchema,
  reconcile: ReconcileDocumentSchema,
  "locks list": LocksListDocumentSchema,
  "locks gc": LocksGcDocumentSchema,
  "storage migrate": StorageMigrateDocumentSchema,
  "instances list": InstancesListDocumentSchema,
  "instances declare-dead": InstancesDeclareDeadDocumentSchema,
  completion: CompletionDocumentSchema,
} as const satisfies Record<string, z.ZodType>;

export type JsonCommand = keyof typeof JSON_SCHEMAS;
