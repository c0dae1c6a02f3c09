import { timingSafeEqual } from "node:crypto";
import {
  accessSync,
  existsSync,
  constants as fsConstants,
  mkdirSync,
  readdirSync,
  realpathSync,
  renameSync,
  rmdirSync,
} from "node:fs";
import { basename, dirname, join } from "node:path";
import { type BoatCreateJournal, keyTrustDeadline } from "@drydock/boat-create-journal";
import type { BoatDeleteJournal } from "@drydock/boat-delete-journal";
import {
  type BoatLifecycle,
  DELETE_IN_FLIGHT_MS,
  deletionInFlightLeftMs,
  isLifecycleError,
  type RecoveryReport,
} from "@drydock/boat-lifecycle";
import type { BoatClient } from "@drydock/boat-provider";
import { fsyncDirectory, judgeOwnerLiveness, nodeFileOps } from "@drydock/file-lock";
import { type BoatPlan, listWorkspaces, strayRestoreShards } from "@drydock/recovery-controller";
import type { CrashHook, SagaState } from "@drydock/restore-saga";
import {
  findUnsettledRestore,
  inspectWorkspaceLock,
  isSagaError,
  openCheckpointStore,
  openSagaStore,
  restoreCheckpoint,
  WORKSPACE_EDIT_LOCK_PURPOSE,
  withWorkspaceLock,
} from "@drydock/restore-saga";
import Fastify, {
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
  type FastifyServerOptions,
  LogController,
} from "fastify";
import {
  hasZodFastifySchemaValidationErrors,
  serializerCompiler,
  validatorCompiler,
  type ZodTypeProvider,
} from "fastify-type-provider-zod";
import { z } from "zod";
import { BOT_ID, type Bot, type BotRegistry } from "./bots.js";
import { HttpProblem, toHttpError } from "./http-errors.js";
import type { Metrics } from "./metrics.js";
import { drydockCommandPrefix, recoveryAnswer } from "./recovery.js";
import {
  BIDI_CONTROLS,
  sweepStaleWorkspaceTemps,
  WorkspacePathError,
  workspaceFiles,
} from "./workspace-files.js";

export interface RecoverySource {
  /** The recovery controller's Boat plan: everything about Boats that needs a person, redacted. */
  plan(): Promise<BoatPlan>;
}

export interface ServerDeps {
  dataDir: string;
  token: string;
  maxFileBytes: number;
  bots: BotRegistry;
  lifecycle: BoatLifecycle;
  createJournal: BoatCreateJournal;
  deleteJournal: BoatDeleteJournal;
  client: BoatClient;
  metrics: Metrics;
  /** Boat recovery plan (recovery-controller); restores are listed by the server itself. */
  recovery: RecoverySource;
  /** What recoverAtStartup found, once it has run. */
  startupReport: () => RecoveryReport | null;
  logger: FastifyServerOptions["logger"];
  /**
   * The clock of the Boat journals and the lifecycle (default Date.now): the routes judge a fence's in-flight
   * window on it, as the lifecycle does, or the two would disagree about whether a DELETE may still be on
   * the wire.
   */
  now?: () => number;
  /**
   * Tests only: restore crash points (see @drydock/restore-saga RESTORE_CRASH_POINTS), and the file
   * write's FILE_WRITE_CRASH_POINT.
   */
  restoreCrash?: CrashHook;
}

/**
 * Tests only: the crash point (through the restore crash hook, `ServerDeps.restoreCrash`) inside a file
 * write, after its data is flushed to its temp and before the rename, while it holds the workspace lock.
 */
export const FILE_WRITE_CRASH_POINT = "file-write.before-rename";

/** How long GET /readyz waits for boat.dev's list before it calls the provider not ready. */
export const READYZ_PROVIDER_TIMEOUT_MS = 3_000;

const BotIdParam = z.object({ botId: z.string().regex(BOT_ID, "must be 1–120 letters, digits, '_' or '-'") });
const CHECKPOINT_ID = /^[A-Za-z0-9_-]{1,128}$/;
const OPERATION_ID = /^[A-Za-z0-9_-]{1,128}$/;

const CreateBotBody = z
  .object({
    name: z
      .string()
      .trim()
      .min(1, "must not be empty")
      .max(200)
      .refine((name) => !/[\u0000-\u001f\u007f-\u009f]/.test(name), "must not contain control characters")
      .refine((name) => !BIDI_CONTROLS.test(name), "must not contain bidirectional text control characters"),
    botId: z.string().regex(BOT_ID, "must be 1–120 letters, digits, '_' or '-'").optional(),
  })
  .strict();

const DeleteComputerBody = z.object({ confirmName: z.string().min(1).max(100) }).strict();
/** Needed only while the bot has a live Boat (then it must name it); a bot without one takes no body. */
// `{}` is the same as no body: the route then answers 409 confirmation_required with the name to send.
const DeleteBotBody = z
  .object({ confirmName: z.string().min(1).max(100).optional() })
  .strict()
  .nullish();

/** Redaction is structural: responses are built from these fields only, never by spreading internal records. */
type BotView = { readonly botId: string; readonly name: string; readonly createdAt: string };
// Keyed by the registry's rows: `peek` hands out the same frozen row while bots.json is unchanged, so a
// listing formats each bot once, not once per request (Date#toISOString is most of a row's cost).
const botViews = new WeakMap<Readonly<Bot>, BotView>();
function botView(bot: Readonly<Bot>): BotView {
  let view = botViews.get(bot);
  if (view === undefined) {
    view = { botId: bot.botId, name: bot.name, createdAt: new Date(bot.createdAt).toISOString() };
    botViews.set(bot, view);
  }
  return view;
}

function sagaView(state: SagaState) {
  return {
    operationId: state.operationId,
    phase: state.phase,
    basePhase: state.basePhase,
    seq: state.seq,
    headHash: state.headHash,
    terminal: state.terminal,
    archived: state.archived,
    events: state.events.map((e) => ({ seq: e.seq, phase: e.phase, timestamp: e.timestamp })),
  };
}

/** How old the open recovery items count may be when /metrics is scraped before it is recounted. */
const RECOVERY_GAUGE_MAX_AGE_MS = 60_000;
/** How long a scrape waits for a recount it found running before it answers with the last count. */
const RECOVERY_GAUGE_WAIT_MS = 2_000;

/**
 * Every failed restore answers with `details.recoveryRequired` (boolean) and, when known, the
 * `operationId` a person would act on: this restore's own saga when it failed, or the restore whose lock
 * blocks the workspace (also as `blockingOperationId`). A failure of this restore that kept the workspace
 * lock answers 503 `restore_recovery_required`; a workspace held by another restore keeps the saga's code
 * and status (409 RECOVERY_REQUIRED / WORKSPACE_LOCKED), like every other workspace route.
 */
function restoreFailure(error: unknown, commandPrefix: string): HttpProblem {
  if (isSagaError(error)) {
    const { operationId: own, ownerOperationId: blocking, workspaceLockRetained } = error.details;
    const recoveryRequired = workspaceLockRetained === true || error.code === "RECOVERY_REQUIRED";
    const operationId = own ?? blocking;
    const ownRetained = recoveryRequired && own !== undefined && workspaceLockRetained === true;
    const next = operationId ? ` Run: ${commandPrefix} restores show ${operationId}` : "";
    return new HttpProblem(
      ownRetained ? 503 : error.status,
      ownRetained ? "restore_recovery_required" : error.code,
      `${error.message}${recoveryRequired ? next : ""}`,
      {
        recoveryRequired,
        ...(operationId === undefined ? {} : { operationId }),
        ...(blocking !== undefined && blocking !== own ? { blockingOperationId: blocking } : {}),
      },
    );
  }
  const mapped = toHttpError(error);
  const previous = mapped.body.error.details;
  // A refusal that already says whether a person must act (restore_unsettled) keeps its word.
  const problem = new HttpProblem(mapped.status, mapped.body.error.code, mapped.body.error.message, {
    recoveryRequired: false,
    ...(typeof previous === "object" && previous !== null ? previous : {}),
  });
  // The server log still shows what really failed (an internal error's details never reach the body).
  if (!(error instanceof HttpProblem)) problem.cause = error;
  return problem;
}

function randomBotId(): string {
  return `bot_${crypto.randomUUID().replaceAll("-", "").slice(0, 16)}`;
}

function tokenMatches(expected: string, header: string | undefined): boolean {
  if (!header?.startsWith("Bearer ")) return false;
  const given = Buffer.from(header.slice(7));
  const want = Buffer.from(expected);
  // Constant-time compare so the token cannot be guessed byte by byte from response timing.
  return given.length === want.length && timingSafeEqual(given, want);
}

export async function buildServer(deps: ServerDeps): Promise<FastifyInstance> {
  const app = Fastify({
    logger: deps.logger,
    bodyLimit: deps.maxFileBytes,
    // Never log bodies, headers or query strings: they may carry tokens, keys or user files.
    logController: new LogController({ disableRequestLogging: true }),
    return503OnClosing: true,
    // Fastify's default (100) would refuse legitimate nested file paths with its own 414 shape; params are
    // bounded by our zod schemas instead (file paths ≤ 1024 characters), which answer 400 naming the field.
    routerOptions: { maxParamLength: 4096 },
    // What Fastify refuses before routing (a path whose percent-encoding does not decode, e.g. `%FF`) gets
    // the same JSON error shape too, instead of Fastify's own.
    frameworkErrors: (error, _request, reply) => {
      void (reply as FastifyReply).code(400).send({
        ok: false,
        error: { code: "bad_request", message: `Malformed request: ${error.message}` },
      });
    },
    // Requests Node's HTTP parser rejects (bad bytes in the path, broken headers) get the same JSON error
    // shape as every other refusal, instead of Fastify's default text.
    clientErrorHandler: (error, socket) => {
      if (!socket.writable) return;
      const body = JSON.stringify({
        ok: false,
        error: {
          code: "bad_request",
          message: `Malformed HTTP request (${(error as NodeJS.ErrnoException).code ?? "parse error"}).`,
        },
      });
      socket.end(
        `HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
      );
    },
  }).withTypeProvider<ZodTypeProvider>();
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);

  app.addContentTypeParser("application/octet-stream", { parseAs: "buffer" }, (_req, body, done) =>
    done(null, body),
  );
  // Many clients label every request JSON, also a DELETE sent without a body: an empty JSON body is no body
  // (Fastify's parser refuses it), so the route answers as it does to a bare request. Anything else goes to
  // Fastify's own parser, with its prototype-poisoning refusals.
  const parseJson = app.getDefaultJsonParser("error", "error");
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser("application/json", { parseAs: "string" }, (request, body, done) => {
    const text = typeof body === "string" ? body : body.toString("utf8");
    if (text === "") return done(null, undefined);
    void parseJson(request, text, done);
  });

  const workspaceRoot = (botId: string) => join(deps.dataDir, "workspaces", botId);
  // Read at each call (a test that fakes Date sees its time when no clock was given).
  const boatClock = (): number => (deps.now ? deps.now() : Date.now());
  /**
   * A bot's workspace is (re)created only by what writes it (file writes, checkpoints, restores), before
   * its lock is taken (the lock resolves the directory); reads never create it.
   */
  const ensureWorkspace = (botId: string): void => {
    mkdirSync(join(deps.dataDir, "workspaces"), { recursive: true, mode: 0o700 });
    try {
      mkdirSync(workspaceRoot(botId), { mode: 0o700 });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    }
  };
  const workspaceExists = (botId: string): boolean => existsSync(workspaceRoot(botId));
  /**
   * Whether anything of a workspace at this bot id's path exists: an entry in it, a checkpoint of it, or its
   * restore sagas.
   */
  const hasWorkspaceData = async (botId: string): Promise<boolean> => {
    const parent = join(deps.dataDir, "workspaces");
    if (!existsSync(parent)) return false;
    if (workspaceExists(botId) && readdirSync(workspaceRoot(botId)).length > 0) return true;
    // Checkpoints are found by the workspace's real path, which exists only while its directory does.
    const created = !workspaceExists(botId);
    ensureWorkspace(botId);
    try {
      return (
        existsSync(sagaStore(botId).shardDir) || (await checkpoints.hasCheckpointsOf(workspaceRoot(botId)))
      );
    } finally {
      if (created) rmdirSync(workspaceRoot(botId));
    }
  };
  /** A missing workspace has no checkpoints (the store would refuse to resolve it, naming its path). */
  const listWorkspaceCheckpoints = async (botId: string) =>
    workspaceExists(botId) ? checkpoints.listCheckpoints(workspaceRoot(botId)) : [];
  const checkpoints = openCheckpointStore({ dataDir: deps.dataDir });
  /**
   * File writes, deletions and checkpoints hold the workspace lock for their short duration, like a restore
   * does for its whole run: a write can never land in the middle of a restore (which would make the result
   * neither the checkpoint nor the state before it), nor in a workspace whose failed restore retained the
   * lock for a fenced recovery (a rollback would silently discard it). Those answer 409 with the saga's
   * message (WORKSPACE_LOCKED: wait; RECOVERY_REQUIRED: see drydock restores show). Their lock's purpose is
   * `workspace-edit`: each of them is atomic per file (a write renames a flushed temp over its target, a
   * deletion is one unlink, a checkpoint's blobs are unreferenced until its manifest's atomic rename), so a
   * process killed under it leaves nothing to recover but temps, and its dead lock is taken over by the
   * next acquisition (and removed at startup, `reapStoppedEdits` in server.ts) instead of refusing every
   * later edit and restore of the workspace as a "restore that stopped".
   */
  const withWorkspace = <T>(
    botId: string,
    kind: string,
    fn: () => T | Promise<T>,
    forBot?: Bot,
  ): Promise<T> =>
    // A restore's lock in the way (running, or kept for recovery) is named as a restore's refusal is:
    // `details.recoveryRequired` and the `operationId` to act on, with the command when a person must.
    withWorkspaceLock(
      {
        dataDir: deps.dataDir,
        workspaceRoot: workspaceRoot(botId),
        transactionId: `${kind}-${crypto.randomUUID()}`,
        purpose: "workspace-edit",
        waitMs: 2_000,
      },
      async () => {
        // An edit for `forBot` checked the bot before it waited for the lock: if that bot was deleted
        // meanwhile (its workspace retired, the id perhaps taken by a new bot), it must not land here.
        if (forBot) {
          const current = await deps.bots.get(botId);
          if (current?.createdAt !== forBot.createdAt) {
            throw new HttpProblem(
              404,
              "bot_not_found",
              `No bot with id '${botId}' (it was deleted meanwhile).`,
            );
          }
        }
        // A restore that stopped half-way normally keeps this lock, which refuses the edit. If that lock is
        // gone (removed by hand, lost with a disk), the saga is the evidence: an edit now would be mixed
        // into a half-restored workspace, and its rollback would have to refuse or lose it.
        if (kind !== "retire") await refuseUnsettledRestores(botId, "edit");
        return fn();
      },
    ).catch(async (error: unknown) => {
      const operationId = isSagaError(error) ? error.details.ownerOperationId : undefined;
      if (!isSagaError(error) || operationId === undefined) throw error;
      // Its lock's owner may be alive yet have failed: it keeps the lock for recovery (recovery_required).
      // (An edit's lock has no saga: the lock's own verdict stands.)
      const recoveryRequired = error.code === "RECOVERY_REQUIRED" || (await sagaFailed(botId, operationId));
      const show = `${drydockCommandPrefix(deps.dataDir)} restores show ${operationId}`;
      throw new HttpProblem(
        error.status,
        error.code,
        recoveryRequired
          ? `${error.message} Restore ${operationId} failed and keeps the workspace for its recovery; settle it first (run: ${show}, then the command it prints).`
          : error.message,
        { recoveryRequired, operationId },
      );
    });
  const sagaStore = (botId: string) =>
    openSagaStore({ stateDir: join(deps.dataDir, "restore-sagas"), workspaceRoot: workspaceRoot(botId) });
  // Saga shards a move or copy of the data directory left behind (found at the start: a data directory is
  // moved only while nothing runs on it): the bots they name are refused their workspace (reads, edits,
  // checkpoints, restores, deletion) until a person settles those restores where they were, as the message
  // says, and restarts the server.
  const strayShards = new Set<string>();
  for (const gap of strayRestoreShards(deps.dataDir) ?? []) {
    if (gap.botId !== "(unknown)") strayShards.add(gap.botId);
  }
  function refuseStrayShard(botId: string, kept: string): void {
    if (!strayShards.has(botId)) return;
    throw new HttpProblem(
      409,
      "restore_unsettled",
      `Restores of this bot's workspace were recorded where the data directory was before it was moved or copied, and have not settled: its files may be half restored, so ${kept}. Run \`${drydockCommandPrefix(deps.dataDir)} status\` for the sagas, the path they name and what to do (settle them where they were, then restart this server).`,
      { recoveryRequired: true },
    );
  }
  // A workspace's saga shard is named after its path, which a bot id fixes: found once per bot.
  const shardDirs = new Map<string, string>();
  /** Whether the bot's saga shard holds a saga that is not archived (any entry not starting with "."). */
  const hasActiveSagas = (botId: string): boolean => {
    let shard = shardDirs.get(botId);
    if (shard === undefined) {
      shard = sagaStore(botId).shardDir;
      shardDirs.set(botId, shard);
    }
    try {
      return readdirSync(shard).some((name) => !name.startsWith("."));
    } catch (error) {
      // No shard: no saga. Anything else: let the full check read it and say what is wrong.
      return (error as NodeJS.ErrnoException).code !== "ENOENT";
    }
  };

  /**
   * Refuses (409 `restore_unsettled`) while a restore of the bot's workspace stands in the way (restore-saga's
   * `findUnsettledRestore`). Before the workspace is retired (bot deleted, id taken again): any saga that has
   * not ended or cannot be read, since its recovery must come first. Before an edit: one that may have left
   * files half-restored (stopped past `mutation_started`, or unreadable). Finished sagas not yet archived and
   * orphans of a killed create never count.
   */
  async function refuseUnsettledRestores(
    botId: string,
    intent: "delete" | "retire-deleted" | "create" | "edit" | "read",
  ): Promise<void> {
    if (!workspaceExists(botId)) return;
    refuseStrayShard(botId, intent === "read" ? "nothing was read" : "nothing was changed");
    // Before the workspace goes, any restore that has not ended (one stopped before its first change is
    // settled by an abort first); before an edit or a read, one that may have left files half-restored.
    const found = await findUnsettledRestore(sagaStore(botId), {
      anyActive: intent !== "edit" && intent !== "read",
    });
    if (found === null) return;
    // Asked while deleting this bot, retiring a deleted bot's workspace, creating a bot under the id of a
    // deleted one, or editing the workspace.
    const kept = {
      delete: "so the bot was kept",
      "retire-deleted": "so the deleted bot's workspace was not retired",
      create: `so no bot was created under the id '${botId}'`,
      edit: "so nothing was changed",
      read: "so nothing was read",
    }[intent];
    if (found.kind === "unsettled") {
      // Running right now (its owner alive and not failed): nothing for a person, only a wait.
      const runner = await runningRestoreOwner(botId, found.operationId);
      if (runner !== null) {
        throw new HttpProblem(
          409,
          "restore_running",
          `Restore ${found.operationId} of this bot's workspace is running (process ${runner.pid}), ${kept}. Retry once it has finished.`,
          { recoveryRequired: false, operationId: found.operationId },
        );
      }
    }
    const show = `${drydockCommandPrefix(deps.dataDir)} restores show ${found.operationId}`;
    const then = {
      delete: "then delete the bot",
      "retire-deleted": `then send DELETE /v1/bots/${botId} again`,
      create: "then create the bot again",
      edit: "then retry",
      read: "then retry",
    }[intent];
    const message =
      found.kind === "unsettled"
        ? `Restore ${found.operationId} of this bot's workspace has not settled (phase ${found.phase}), ${kept}: its workspace may be half restored. Settle it first (run: ${show}, then the command it prints), ${then}.`
        : found.kind === "busy"
          ? `Restore ${found.operationId} of this bot's workspace could not be read just now (${found.reason}), ${kept}. Retry in a moment.`
          : `Restore ${found.operationId} of this bot's workspace cannot be verified (${found.reason}), so whether it left files half-restored is unknown, ${kept}. Inspect it (run: ${show}; docs/OPERATORS.md says how to set an unverifiable saga aside), ${then}.`;
    throw new HttpProblem(409, "restore_unsettled", message, {
      recoveryRequired: found.kind !== "busy",
      operationId: found.operationId,
    });
  }

  /** Whether restore `operationId`'s saga says it failed (recovery_required); false when unreadable or absent. */
  async function sagaFailed(botId: string, operationId: string): Promise<boolean> {
    try {
      return (await sagaStore(botId).load(operationId)).phase === "recovery_required";
    } catch {
      return false;
    }
  }

  /**
   * Whether the restore whose lock `owner` holds the workspace runs right now: its owner alive and its saga
   * (if readable yet) not failed. A failed restore's live owner keeps the lock for recovery: a person's.
   */
  async function restoreRuns(
    botId: string,
    owner: NonNullable<ReturnType<typeof inspectWorkspaceLock>>,
  ): Promise<boolean> {
    return judgeOwnerLiveness(owner) !== "dead" && !(await sagaFailed(botId, owner.payload.transactionId));
  }

  /** The process running restore `operationId` right now (see `restoreRuns`), or null (also when unreadable). */
  async function runningRestoreOwner(botId: string, operationId: string): Promise<{ pid: number } | null> {
    let owner: ReturnType<typeof inspectWorkspaceLock>;
    try {
      owner = inspectWorkspaceLock({ dataDir: deps.dataDir, workspaceRoot: workspaceRoot(botId) });
    } catch {
      return null;
    }
    if (owner === null) return startingRestore(botId, operationId);
    if (owner.payload.transactionId !== operationId) return null;
    return (await restoreRuns(botId, owner)) ? { pid: owner.pid } : null;
  }

  /**
   * A restore that has recorded `created` and not yet taken the workspace lock (it reads its checkpoint and
   * creates its saga first) is starting, not stopped, while the process that created it lives: a wait, as
   * the recovery controller's initiator check says. Once that process is gone the saga is a person's (an
   * abort settles it).
   */
  async function startingRestore(botId: string, operationId: string): Promise<{ pid: number } | null> {
    try {
      const saga = await sagaStore(botId).load(operationId);
      const actorPid = saga.events[0]?.evidence.actorPid;
      if (saga.phase !== "created" || typeof actorPid !== "number") return null;
      return judgeOwnerLiveness({ pid: actorPid }) === "alive" ? { pid: actorPid } : null;
    } catch {
      return null;
    }
  }

  /**
   * Reads take no lock, so while a restore holds the workspace (running, or stopped and kept for recovery)
   * a read would serve a mix of restored and unrestored files as if nothing were wrong: refused instead,
   * 409 `restore_running` (a wait) or `restore_unsettled` (a person settles it), naming the restore. An edit's
   * lock is no reason (its write is one atomic rename). A lock that cannot be read is refused too.
   */
  async function refuseReadDuringRestore(botId: string): Promise<void> {
    if (!workspaceExists(botId)) return;
    refuseStrayShard(botId, "nothing was read");
    let owner: ReturnType<typeof inspectWorkspaceLock>;
    try {
      owner = inspectWorkspaceLock({ dataDir: deps.dataDir, workspaceRoot: workspaceRoot(botId) });
    } catch (error) {
      throw new HttpProblem(
        409,
        "restore_unsettled",
        `This bot's workspace lock cannot be read (${scrubPaths(error instanceof Error ? error.message : String(error))}), so whether a restore left files half-restored is unknown; nothing was read. Run: ${drydockCommandPrefix(deps.dataDir)} locks list.`,
        { recoveryRequired: true },
      );
    }
    if (owner === null) {
      // No restore holds the workspace, but one may have stopped half-way and lost its lock (removed by
      // hand): the saga is the evidence, as for an edit. Checked only when the saga store holds a saga that
      // is not archived (one directory listing; nearly always none).
      if (hasActiveSagas(botId)) await refuseUnsettledRestores(botId, "read");
      return;
    }
    if (owner.payload.purpose === WORKSPACE_EDIT_LOCK_PURPOSE) return;
    const operationId = owner.payload.transactionId;
    if (await restoreRuns(botId, owner)) {
      throw new HttpProblem(
        409,
        "restore_running",
        `Restore ${operationId} of this bot's workspace is running (process ${owner.pid}): its files are a mix of before and after until it ends, so nothing was read. Retry once it has finished.`,
        { recoveryRequired: false, operationId },
      );
    }
    throw new HttpProblem(
      409,
      "restore_unsettled",
      `Restore ${operationId} of this bot's workspace stopped before it settled and keeps its lock: its files may be half restored, so nothing was read. Settle it first (run: ${drydockCommandPrefix(deps.dataDir)} restores show ${operationId}, then the command it prints), then retry.`,
      { recoveryRequired: true, operationId },
    );
  }

  /** Moves a directory, kept, to `.retired/<name>.<ms>.<random>` beside it (same file system), durably. */
  function moveAside(path: string): void {
    const retiredDir = join(dirname(path), ".retired");
    mkdirSync(retiredDir, { recursive: true, mode: 0o700 });
    renameSync(path, join(retiredDir, `${basename(path)}.${Date.now()}.${crypto.randomUUID().slice(0, 8)}`));
    fsyncDirectory(nodeFileOps, retiredDir);
    fsyncDirectory(nodeFileOps, dirname(path));
  }

  /**
   * Retires a deleted bot's workspace, keeping everything: its restore sagas' shard moves to
   * `restore-sagas/.retired/`, its files to `<dataDir>/workspaces/.retired/<botId>.<ms>.<random>` (beside the
   * workspaces, so on their file system), and its checkpoints leave the listings (restore-saga's
   * `retireCheckpoints`: their manifests move to `checkpoints/retired/`). A workspace, its checkpoints and
   * its sagas are found by the path the bot id names, so without this a new bot under the same id would
   * read the old bot's files, restore its checkpoints and list its restores as its own. Under the workspace
   * lock (a live edit or a stopped restore's lock refuses), with the unsettled-restore check made under it.
   * The shard moves first, while the workspace directory is still the one its sagas were bound to (a saga
   * left behind a recreated directory would no longer verify); then the files, then the checkpoints of the
   * empty path. A stop anywhere leaves leftovers `hasWorkspaceData` sees, which the next retirement (the id
   * taken again, or DELETE of the missing bot) finishes.
   */
  async function retireWorkspace(botId: string, intent: "retire-deleted" | "create"): Promise<void> {
    ensureWorkspace(botId);
    await withWorkspace(botId, "retire", async () => {
      // A deleted bot's workspace only: if the id was taken again meanwhile (by another server on this
      // directory, while this one waited for the lock), the workspace is that bot's now.
      if (intent === "retire-deleted" && (await deps.bots.get(botId)) !== null) return;
      await refuseUnsettledRestores(botId, intent);
      const root = workspaceRoot(botId);
      const shard = sagaStore(botId).shardDir;
      if (existsSync(shard)) moveAside(shard);
      if (readdirSync(root).length > 0) {
        moveAside(root);
        ensureWorkspace(botId);
      }
      await checkpoints.retireCheckpoints(root);
      rmdirSync(root);
      fsyncDirectory(nodeFileOps, join(deps.dataDir, "workspaces"));
    });
  }

  // One lifecycle operation per bot at a time, in this process. Two processes are still safe (the journals
  // serialize them); this only turns an overlapping click into a clear 409 instead of a queue.
  const busy = new Set<string>();
  // Bumped whenever `busy` changes: a bot's computer view depends on it (see the listing below).
  let busyVersion = 0;
  async function exclusive<T>(botId: string, fn: () => Promise<T>): Promise<T> {
    if (busy.has(botId)) {
      throw new HttpProblem(
        409,
        "bot_busy",
        "Another operation on this bot is still running; retry when it finishes.",
      );
    }
    busy.add(botId);
    busyVersion += 1;
    try {
      return await fn();
    } finally {
      busy.delete(botId);
      busyVersion += 1;
    }
  }

  /**
   * A create never re-sends a deletion the person has not confirmed again: while the bot's previous Boat is
   * fenced for a deletion boat.dev refused (blocked) or never confirmed (prepared, nothing sending it), the
   * lifecycle would send that DELETE again before it creates. The computer's Delete does that, with the
   * Boat's name, as DELETE /v1/bots/:botId does; a create only waits for one that is running.
   */
  async function refuseUnsettledFence(botId: string): Promise<void> {
    const fences = (await deps.deleteJournal.boatDeletionSnapshot()).filter((r) => r.ownerBotId === botId);
    const blocked = fences.find((r) => r.phase === "blocked");
    const fence = blocked ?? unconfirmedFence(fences, boatClock());
    if (fence === undefined) return;
    throw new HttpProblem(
      409,
      blocked ? "deletion_blocked" : "confirmation_required",
      `This bot's previous cloud computer (${fence.boxId}, '${fence.name}') ${
        blocked
          ? "was not deleted: boat.dev refused or lost the deletion"
          : "was being deleted, but boat.dev never confirmed it and nothing is sending it now"
      }, and a new computer is created only once it is gone. Delete it first: DELETE /v1/bots/${botId}/computer with { "confirmName": "${fence.name}" }, then create the computer again. Nothing was sent to boat.dev.`,
      { boxId: fence.boxId, name: fence.name },
    );
  }

  /**
   * A bot being deleted (a DELETE /v1/bots/:botId under way marked it) gets no new computer. Marks whose
   * process is proven dead (a server killed in its DELETE), and this process's leftovers (only called while
   * this process holds the bot's exclusivity, so no DELETE of it runs here), are no deletion under way:
   * they are removed, and the bot is still wanted. Throws 409 `bot_deleting` while any other stands.
   */
  async function refuseDeleting(bot: Readonly<Bot>, log: FastifyBaseLogger): Promise<void> {
    const { live, abandoned } = deps.bots.liveMarks(bot, { ownIdle: true });
    if (abandoned.length > 0) {
      await deps.bots.dropAbandonedMarks(bot.botId, abandoned);
      log.info(
        { botId: bot.botId, markedBy: abandoned.map((m) => m.by.pid) },
        "removed the deletion marks of DELETEs that are no longer running",
      );
    }
    const first = live[0];
    if (first === undefined) return;
    throw new HttpProblem(
      409,
      "bot_deleting",
      `This bot is being deleted (since ${new Date(first.since).toISOString()}, by process ${first.by.pid}, which still runs), so no computer is created for it; nothing was sent to boat.dev. Retry once that deletion has ended.`,
    );
  }

  /** `peek` for read-only routes: a view need not wait for a writer (see json-journal's `peek`). */
  async function requireBot(botId: string, options?: { peek: true }): Promise<Bot> {
    const bot = await deps.bots.get(botId, options);
    if (!bot) throw new HttpProblem(404, "bot_not_found", `No bot with id '${botId}'.`);
    return bot;
  }

  app.addHook("onRequest", async (request, reply) => {
    if (request.routeOptions.url === "/healthz") return;
    if (!tokenMatches(deps.token, request.headers.authorization)) {
      await reply
        .code(401)
        .header("www-authenticate", "Bearer")
        .send({ ok: false, error: { code: "unauthorized", message: "Send Authorization: Bearer <token>." } });
    }
  });

  app.addHook("onResponse", async (request, reply) => {
    const route = request.routeOptions.url ?? "unmatched";
    const status = reply.statusCode;
    deps.metrics.httpRequests.inc({ method: request.method, route, status: String(status) });
    deps.metrics.httpDuration.observe({ route }, reply.elapsedTime / 1000);
  });

  app.setNotFoundHandler(async (request, reply) => {
    await reply.code(404).send({
      ok: false,
      error: { code: "not_found", message: `No route ${request.method} ${request.url.split("?")[0]}.` },
    });
  });

  const scrubPaths = (message: string): string => {
    let out = message;
    const roots = [deps.dataDir];
    try {
      roots.push(realpathSync(deps.dataDir));
    } catch {
      // Unresolvable: the configured spelling is all there is to elide.
    }
    for (const root of roots.sort((a, b) => b.length - a.length)) {
      if (root.length > 1) out = out.replaceAll(root, "<dataDir>");
    }
    return out;
  };

  app.setErrorHandler(async (error, request, reply) => {
    if (hasZodFastifySchemaValidationErrors(error)) {
      const where = (error as { validationContext?: string }).validationContext ?? "request";
      const first = error.validation[0];
      const field = `${where}${first?.instancePath ? first.instancePath.replaceAll("/", ".") : ""}`;
      return reply.code(400).send({
        ok: false,
        error: {
          code: "invalid_request",
          message: `${field}: ${first?.message ?? "invalid"}`,
          details: { field },
        },
      });
    }
    const fastifyStatus = (error as { statusCode?: number }).statusCode;
    if (typeof fastifyStatus === "number" && fastifyStatus >= 400 && fastifyStatus < 500) {
      // Fastify's own refusals: bad JSON, body too large, unsupported media type.
      const code =
        fastifyStatus === 413
          ? "payload_too_large"
          : fastifyStatus === 415
            ? "unsupported_media_type"
            : "invalid_request";
      return reply
        .code(fastifyStatus)
        .send({ ok: false, error: { code, message: (error as Error).message } });
    }
    const mapped = toHttpError(error);
    if (mapped.status >= 500) request.log.error({ err: error }, "request failed");
    // Answers never name server paths: a package message that does gets the data directory elided.
    mapped.body.error.message = scrubPaths(mapped.body.error.message);
    // A bad file path is the client's mistake, not a refusal of work (busy, fenced, paused).
    const clientMistake = error instanceof WorkspacePathError;
    if (!clientMistake && (mapped.status === 409 || mapped.status === 429 || mapped.status === 503)) {
      deps.metrics.refusals.inc({ status: String(mapped.status), code: mapped.body.error.code });
    }
    if (mapped.retryAfterS !== undefined) reply.header("retry-after", String(mapped.retryAfterS));
    return reply.code(mapped.status).send(mapped.body);
  });

  // --- health -------------------------------------------------------------------------------------------
  app.get("/healthz", async () => ({ ok: true }));

  app.get("/readyz", async (_request, reply) => {
    const checks: Record<string, { ok: boolean; message?: string }> = {};
    try {
      accessSync(deps.dataDir, fsConstants.W_OK);
      checks.dataDir = { ok: true };
    } catch (error) {
      checks.dataDir = { ok: false, message: (error as Error).message };
    }
    for (const [name, read] of [
      ["createJournal", () => deps.createJournal.boatCreateRecoverySnapshot()],
      ["deleteJournal", () => deps.deleteJournal.boatDeletionSnapshot()],
      ["bots", () => deps.bots.list()],
    ] as const) {
      try {
        await read();
        checks[name] = { ok: true };
      } catch (error) {
        checks[name] = { ok: false, message: (error as Error).message };
      }
    }
    // Bounded: a probe with a short timeout gets an answer, and a boat.dev this slow is not ready either.
    const bound = AbortSignal.timeout(READYZ_PROVIDER_TIMEOUT_MS);
    try {
      await deps.client.listSandboxes({ limit: 1, signal: bound });
      checks.provider = { ok: true };
    } catch (error) {
      checks.provider = {
        ok: false,
        message: bound.aborted
          ? `boat.dev did not answer within ${READYZ_PROVIDER_TIMEOUT_MS / 1000} s`
          : (error as Error).message,
      };
    }
    const ok = Object.values(checks).every((c) => c.ok);
    return reply.code(ok ? 200 : 503).send({ ok, checks });
  });

  app.get("/metrics", async (request, reply) => {
    // An alert on open recovery items must not wait for someone to GET /v1/recovery: a scrape starts a
    // recount when the count is older than RECOVERY_GAUGE_MAX_AGE_MS (the plan lists boat.dev, so not on
    // every scrape). One recount at a time, shared by every scrape meanwhile, and timed from its start (a
    // failing one is not retried by the next scrape); a scrape waits for it at most
    // RECOVERY_GAUGE_WAIT_MS, then answers with the last count, so a slow boat.dev never fails the scrape.
    if (recoveryCountedAt === null || performance.now() - recoveryCountedAt > RECOVERY_GAUGE_MAX_AGE_MS) {
      recoveryCountedAt = performance.now();
      recount ??= recoveryReport()
        .then(
          () => undefined,
          (error: unknown) => {
            request.log.warn({ err: error }, "could not count open recovery items for /metrics");
          },
        )
        .finally(() => {
          recount = null;
        });
    }
    const running = recount;
    if (running !== null) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        running,
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, RECOVERY_GAUGE_WAIT_MS);
        }),
      ]);
      clearTimeout(timer);
    }
    return reply
      .header("content-type", deps.metrics.registry.contentType)
      .send(await deps.metrics.registry.metrics());
  });

  // --- bots ---------------------------------------------------------------------------------------------
  app.post("/v1/bots", { schema: { body: CreateBotBody } }, async (request, reply) => {
    const botId = request.body.botId ?? randomBotId();
    // The id of a deleted bot whose workspace was never retired (a server before retirement existed, or a
    // deletion that stopped half-way): retired now, so the new bot starts empty.
    const bot = await exclusive(botId, async () => {
      if (BOT_ID.test(botId) && (await deps.bots.get(botId)) === null && (await hasWorkspaceData(botId))) {
        await retireWorkspace(botId, "create");
      }
      return deps.bots.create({ botId, name: request.body.name });
    });
    mkdirSync(workspaceRoot(bot.botId), { recursive: true, mode: 0o700 });
    return reply.code(201).send({ ok: true, bot: botView(bot) });
  });

  // The last listing rendered, and everything it was rendered from. The body is a pure function of the
  // bot rows, both journals' rows, which bots are busy in this process and the clock (an interrupted create
  // turns "older than 24 hours" at a known instant); json-journal's `peek` hands out the very same frozen
  // objects while a file is unchanged, so the listing is re-sent as long as the bot rows and the journal
  // index are the same objects, `busy` has not changed and that instant has not come. Rendering 100 bots
  // costs about as much as Fastify's whole handling of the request, and a listing is polled far more often
  // than a bot or its computer changes.
  let listing: {
    bots: readonly Readonly<Bot>[];
    journals: Journals;
    busyVersion: number;
    validUntil: number;
    body: string;
  } | null = null;
  app.get("/v1/bots", async (_request, reply) => {
    const [bots, journals] = await Promise.all([deps.bots.list({ peek: true }), readJournals()]);
    const now = boatClock();
    if (
      listing === null ||
      listing.bots !== bots ||
      listing.journals !== journals ||
      listing.busyVersion !== busyVersion ||
      now >= listing.validUntil
    ) {
      const rendered = {
        ok: true,
        bots: bots.map((b) => ({ ...botView(b), computer: computerView(b.botId, journals, now) })),
      };
      listing = {
        bots,
        journals,
        busyVersion,
        validUntil: nextExpiry(journals, now),
        body: JSON.stringify(rendered),
      };
    }
    return reply.type("application/json; charset=utf-8").send(listing.body);
  });

  app.get("/v1/bots/:botId", { schema: { params: BotIdParam } }, async (request) => {
    const bot = await requireBot(request.params.botId, { peek: true });
    return { ok: true, bot: { ...botView(bot), computer: computerView(bot.botId, await readJournals()) } };
  });

  app.delete("/v1/bots/:botId", { schema: { params: BotIdParam, body: DeleteBotBody } }, async (request) => {
    const { botId } = request.params;
    const confirmName = request.body?.confirmName;
    if ((await deps.bots.get(botId)) === null) {
      // A deleted bot whose workspace could not be retired when it went: retried here (and whenever its id
      // is taken again), so a generated id, never taken again, is not left with its data in place.
      if (!(await hasWorkspaceData(botId)))
        throw new HttpProblem(404, "bot_not_found", `No bot with id '${botId}'.`);
      return exclusive(botId, async () => {
        await retireWorkspace(botId, "retire-deleted");
        return { ok: true, workspaceRetired: true };
      });
    }
    return exclusive(botId, async () => {
      await refuseUnsettledRestores(botId, "delete");
      // Marked before the create journal is read: a computer create in another process asks after
      // journaling its key whether the bot is still wanted, so it sees this mark (and sends nothing), or
      // the reads below see its key. Cleared again when the bot is kept.
      const mark = await deps.bots.markDeleting(botId);
      if (mark === null) throw new HttpProblem(404, "bot_not_found", `No bot with id '${botId}'.`);
      try {
        await removeBotAfterItsBoat(botId, confirmName);
      } catch (error) {
        // Only this deletion's own mark: other DELETEs under way keep theirs.
        await deps.bots
          .unmarkDeleting(botId, mark)
          .catch((unmark: unknown) =>
            request.log.warn(
              { err: unmark, botId },
              "the bot was kept, but its deletion mark could not be removed; the next computer create of this bot on this server removes it",
            ),
          );
        throw error;
      }
      try {
        await retireWorkspace(botId, "retire-deleted");
      } catch (error) {
        request.log.warn({ err: error, botId }, "the deleted bot's workspace could not be retired yet");
        return {
          ok: true,
          workspaceRetired: false,
          warning: `The bot was deleted, but its workspace could not be retired yet (${scrubPaths(error instanceof Error ? error.message : String(error))}); the retirement is unfinished (anything already moved is under workspaces/.retired/ and restore-sagas/.retired/ of the data directory, the rest is where it was) until DELETE /v1/bots/${botId} is sent again or the id is taken again.`,
        };
      }
      return { ok: true, workspaceRetired: true };
    });
  });

  /**
   * Removes a bot whose Boat is provably gone (deleting it first, with the person's confirmation), or throws
   * why it keeps it: a create unresolved, a deletion pending, blocked or unconfirmed, a live Boat without
   * confirmation. The caller marked the bot as being deleted.
   */
  async function removeBotAfterItsBoat(botId: string, confirmName: string | undefined): Promise<void> {
    const creates = (await deps.createJournal.boatCreateRecoverySnapshot()).filter((r) => r.botId === botId);
    if (creates.some((r) => !r.resolved)) {
      throw new HttpProblem(
        409,
        "create_unresolved",
        "Finish reconciling this bot's pending cloud computer creation before deleting it — check boat.dev, then retry the computer setup.",
      );
    }
    if (await deps.deleteJournal.hasPendingBoatDeletionForBot(botId)) {
      for (const record of (await deps.deleteJournal.boatDeletionSnapshot()).filter(
        (r) => r.ownerBotId === botId,
      )) {
        let outcome = await deps.lifecycle.reconcileDeletion(record.boxId);
        if (outcome === "pending" && unconfirmedFence([record], boatClock())) {
          // Its DELETE was never confirmed and nothing sends it now: reconciling never moves it. The
          // person's confirmation sends it again (the lifecycle re-checks the Boat and its name first).
          if (confirmName === undefined) {
            throw new HttpProblem(
              409,
              "confirmation_required",
              `This bot's cloud computer (${record.boxId}, '${record.name}') was being deleted, but boat.dev never confirmed the deletion and nothing is sending it now. Deleting the bot sends it again: send { "confirmName": "${record.name}" } (or delete the computer first: DELETE /v1/bots/${botId}/computer). Nothing was deleted.`,
              { boxId: record.boxId, name: record.name },
            );
          }
          const resent = await deps.lifecycle.deleteBoat({
            boxId: record.boxId,
            confirmName,
            ownerBotId: botId,
          });
          outcome = resent.pending ? "pending" : "confirmed";
        }
        if (outcome === "blocked") {
          // Reconciling a blocked fence never moves it: only a new DELETE does, which the person asks for.
          throw new HttpProblem(
            409,
            "deletion_blocked",
            `boat.dev did not delete this bot's cloud computer (${record.boxId}); the bot was kept. Check boat.dev, then retry the deletion with DELETE /v1/bots/${botId}/computer and { "confirmName": "${record.name}" } before deleting the bot.`,
            { boxId: record.boxId, name: record.name },
          );
        }
        if (outcome !== "confirmed") {
          throw new HttpProblem(
            409,
            "deletion_pending",
            `The cloud computer deletion has started but is still finishing. The bot was kept; retry in a moment. If it stays pending, check GET /v1/bots/${botId}/computer.`,
            { boxId: record.boxId },
          );
        }
      }
    }
    // The bot's Boat must be provably gone before the bot goes: a bot deleted first would leave a billable
    // Boat nobody owns. findBoat reads the Boat its create row remembers directly, and otherwise lists
    // boat.dev for the bot's names: a Boat no journal knows (a data directory restored from an older
    // backup, a Boat made or renamed by hand) carries them too, and skipping the look for a bot without a
    // remembered Boat deleted such bots with their Boat still billed. Without boat.dev's answer the bot
    // stays (the provider error answers).
    const remembered = (await deps.createJournal.boatCreateRecoverySnapshot()).filter(
      (r) => r.botId === botId && r.boxId !== undefined,
    );
    const boat = await deps.lifecycle.findBoat(botId);
    if (!boat) {
      // Its remembered Boat is proven gone (findBoat read it directly: 404/410): the row goes too, or a new
      // bot under this id would be shown that Boat as its computer.
      for (const row of remembered) await deps.createJournal.retireDeletedBoatCreate(row.boxId!);
    } else {
      // A live Boat is deleted only on the same confirmation DELETE /v1/bots/:botId/computer asks for; a
      // wrong name is refused by the lifecycle (confirmation_mismatch) before anything is sent.
      if (confirmName === undefined) {
        // The name the lifecycle compares confirmName with: the Boat's own, or for an unnamed Boat the
        // bot's scoped Boat name (deleteBoat falls back to it for a Boat of this bot).
        const name = boat.name ?? deps.lifecycle.boatNameFor(botId);
        throw new HttpProblem(
          409,
          "confirmation_required",
          `This bot still has a cloud computer (${boat.boxId}, ${boat.name ? "named" : "unnamed; confirm it as"} '${name}'). Deleting the bot deletes it too: send { "confirmName": "${name}" }, or delete the computer first (DELETE /v1/bots/${botId}/computer). Nothing was deleted.`,
          { boxId: boat.boxId, name },
        );
      }
      const result = await deps.lifecycle.deleteBoat({ boxId: boat.boxId, confirmName, ownerBotId: botId });
      if (result.pending) {
        throw new HttpProblem(
          409,
          "deletion_pending",
          "The cloud computer deletion has started but is still finishing. The bot was kept; retry in a moment.",
        );
      }
    }
    // The Boat is gone, and no restore is unsettled: the bot goes, then (the caller) its workspace is
    // retired (kept). A retirement that fails then (a live edit holds the workspace, a disk error) is said
    // so, and finished by DELETE /v1/bots/:botId again or when the id is taken again.
    await deps.bots.remove(botId);
  }

  // --- the bot's computer ---------------------------------------------------------------------------------
  type ComputerStatus = "none" | "provisioning" | "ready" | "deleting" | "needs_attention";
  type ComputerView = { status: ComputerStatus; boxId?: string; name?: string; problem?: string };
  type CreateRow = Awaited<ReturnType<BoatCreateJournal["peekBoatCreates"]>>[number];
  type DeletionRow = Awaited<ReturnType<BoatDeleteJournal["peekBoatDeletions"]>>[number];
  /** Both journals' rows by bot: the first create row and every deletion fence of each bot. */
  type Journals = { creates: Map<string, CreateRow>; deletions: Map<string, DeletionRow[]> };
  // The last index built, with the two arrays it came from: the journals' peek methods hand out the very
  // same frozen arrays while their files are unchanged, so a poll rebuilds nothing.
  let indexed: {
    creates: readonly CreateRow[];
    deletions: readonly DeletionRow[];
    journals: Journals;
  } | null = null;
  /**
   * Both journals read once per request, however many bots the answer covers, without their locks: these
   * are views (json-journal's `peek`), and every decision is taken again under the locks by the routes
   * and the lifecycle that act.
   */
  async function readJournals(): Promise<Journals> {
    const [creates, deletions] = await Promise.all([
      deps.createJournal.peekBoatCreates(),
      deps.deleteJournal.peekBoatDeletions(),
    ]);
    if (indexed?.creates === creates && indexed.deletions === deletions) return indexed.journals;
    const journals: Journals = { creates: new Map(), deletions: new Map() };
    for (const row of creates) if (!journals.creates.has(row.botId)) journals.creates.set(row.botId, row);
    for (const record of deletions) {
      // A fence with no owning bot (one an operator prepared by hand) belongs to no bot's view.
      if (record.ownerBotId === null) continue;
      const list = journals.deletions.get(record.ownerBotId);
      if (list) list.push(record);
      else journals.deletions.set(record.ownerBotId, [record]);
    }
    indexed = { creates, deletions, journals };
    return journals;
  }

  /**
   * The first instant after `now` at which some computer's view changes by time alone (see computerView): a
   * create row's key stops being retried, or a prepared deletion fence leaves its in-flight window.
   */
  function nextExpiry(journals: Journals, now: number): number {
    let next = Number.POSITIVE_INFINITY;
    const consider = (at: number) => {
      if (at > now && at < next) next = at;
    };
    for (const row of journals.creates.values()) consider(keyTrustDeadline(row.createdAt));
    for (const records of journals.deletions.values()) {
      for (const record of records)
        if (record.phase === "prepared") consider(record.updatedAt + DELETE_IN_FLIGHT_MS);
    }
    return next;
  }

  /**
   * A fence prepared longer ago than the in-flight window whose DELETE boat.dev never confirmed: nothing is
   * sending it any more, and only a person's Delete (fenced to this Boat) sends it again.
   */
  const unconfirmedFence = (records: readonly DeletionRow[], now: number): DeletionRow | undefined =>
    records.find((r) => r.phase === "prepared" && deletionInFlightLeftMs(r, now) === 0);

  /** The computer's state from the journals only (no provider call), so listing bots stays cheap. */
  function computerView(botId: string, journals: Journals, now = boatClock()): ComputerView {
    const deletions = journals.deletions.get(botId) ?? [];
    const blocked = deletions.find((r) => r.phase === "blocked");
    if (blocked) {
      return {
        status: "needs_attention",
        boxId: blocked.boxId,
        name: blocked.name,
        problem: "boat.dev could not delete this computer; check boat.dev, then retry Delete.",
      };
    }
    const unconfirmed = unconfirmedFence(deletions, now);
    if (unconfirmed) {
      return {
        status: "needs_attention",
        boxId: unconfirmed.boxId,
        name: unconfirmed.name,
        problem: `This computer's deletion was started but boat.dev never confirmed it, and nothing is sending it now. Delete it again (DELETE /v1/bots/${botId}/computer with { "confirmName": "${unconfirmed.name}" }): the same Boat, never a second one.`,
      };
    }
    const deleting = deletions[0];
    if (deleting) return { status: "deleting", boxId: deleting.boxId, name: deleting.name };
    const row = journals.creates.get(botId);
    if (!row) return { status: "none" };
    if (row.resolved && row.boxId)
      return { status: "ready", boxId: row.boxId, name: deps.lifecycle.boatNameFor(botId) };
    if (busy.has(botId)) return { status: "provisioning", ...(row.boxId ? { boxId: row.boxId } : {}) };
    // A row with a Boat id needs no key: it is finished by reading that Boat, never "expired".
    const expired = row.boxId === undefined && now >= keyTrustDeadline(row.createdAt);
    return {
      status: "needs_attention",
      ...(row.boxId ? { boxId: row.boxId } : {}),
      problem: expired
        ? `An earlier computer creation is too close to or past the end of boat.dev's 24-hour retry window, so drydock will not retry it; check boat.dev for an unnamed Boat (run: ${drydockCommandPrefix(deps.dataDir)} status).`
        : // This server knows only its own calls: another server on the directory may still be running this
          // one (GET /v1/recovery counts it as in progress for 2 minutes). POSTing again is safe either way.
          "An earlier computer creation did not finish here: it was interrupted, or another server on this data directory is still working on it. POST the computer again to finish it with the same request (safe either way: the same request never creates a second computer).",
    };
  }

  app.get("/v1/bots/:botId/computer", { schema: { params: BotIdParam } }, async (request) => {
    await requireBot(request.params.botId, { peek: true });
    return { ok: true, computer: computerView(request.params.botId, await readJournals()) };
  });

  app.post("/v1/bots/:botId/computer", { schema: { params: BotIdParam } }, async (request, reply) => {
    const { botId } = request.params;
    await requireBot(botId);
    const result = await exclusive(botId, async () => {
      // Under this server's exclusivity for the bot: only then is a mark of its own a leftover (no DELETE of
      // the bot runs here), never the mark of its own DELETE still running.
      const bot = await deps.bots.get(botId);
      if (bot === null) throw new HttpProblem(404, "bot_not_found", `No bot with id '${botId}'.`);
      await refuseDeleting(bot, request.log);
      await refuseUnsettledFence(botId);
      try {
        // Asked once the create's key is journaled, before it is sent: a DELETE of the bot (in any process)
        // marks it before reading the create journal, so one of the two always sees the other.
        return await deps.lifecycle.provision(botId, {
          stillWanted: async () => {
            const bot = await deps.bots.get(botId);
            if (bot === null) return false;
            try {
              await refuseDeleting(bot, request.log);
              return true;
            } catch {
              return false;
            }
          },
          // Never the lifecycle's own re-send of a prior deletion: only the person's Delete, with the name.
          // Decided where the fence is read, so no check made before can go stale.
          resendDeletions: false,
        });
      } catch (error) {
        if (isLifecycleError(error) && error.code === "computer_deleting") {
          // A refused or unconfirmed deletion stands: say which, and the Delete that finishes it.
          await refuseUnsettledFence(botId);
        }
        if (isLifecycleError(error) && error.code === "provision_withdrawn") {
          const bot = await deps.bots.get(botId);
          if (bot === null) throw new HttpProblem(404, "bot_not_found", `No bot with id '${botId}'.`);
          await refuseDeleting(bot, request.log);
          // Marked when asked, and no more now (that deletion kept the bot, or its server was killed).
          throw new HttpProblem(
            409,
            "bot_deleting",
            "A deletion of this bot was under way when its computer was about to be created, so nothing was sent to boat.dev. Retry.",
          );
        }
        throw error;
      }
    });
    return reply.code(result.createdThisAttempt ? 201 : 200).send({
      ok: true,
      computer: {
        status: "ready",
        boxId: result.boxId,
        name: result.name,
        createdThisAttempt: result.createdThisAttempt,
      },
    });
  });

  app.delete(
    "/v1/bots/:botId/computer",
    { schema: { params: BotIdParam, body: DeleteComputerBody } },
    async (request, reply) => {
      const { botId } = request.params;
      await requireBot(botId);
      const result = await exclusive(botId, async () => {
        const deletion = (await deps.deleteJournal.boatDeletionSnapshot()).find(
          (r) => r.ownerBotId === botId,
        );
        const boxId =
          deletion?.boxId ??
          (await deps.createJournal.boatCreateRecoverySnapshot()).find((r) => r.botId === botId && r.boxId)
            ?.boxId ??
          (await deps.lifecycle.findBoat(botId))?.boxId;
        if (!boxId) throw new HttpProblem(404, "computer_not_found", "This bot has no cloud computer.");
        return deps.lifecycle.deleteBoat({ boxId, confirmName: request.body.confirmName, ownerBotId: botId });
      });
      return reply
        .code(result.pending ? 202 : 200)
        .send(result.pending ? { ok: true, pending: true } : { ok: true });
    },
  );

  app.get("/v1/computers", async () => ({ ok: true, computers: await deps.lifecycle.inventory() }));

  // --- workspace files ------------------------------------------------------------------------------------
  const FileParams = z.object({
    botId: BotIdParam.shape.botId,
    "*": z.string().min(1, "a file path is required"),
  });

  app.put("/v1/bots/:botId/files/*", { schema: { params: FileParams } }, async (request, reply) => {
    const { botId } = request.params;
    const bot = await requireBot(botId);
    if (!Buffer.isBuffer(request.body)) {
      throw new HttpProblem(
        415,
        "unsupported_media_type",
        "Send the file's bytes with Content-Type: application/octet-stream.",
      );
    }
    const body = request.body;
    const path = request.params["*"];
    ensureWorkspace(botId);
    const written = await withWorkspace(
      botId,
      "file-write",
      () => {
        // Temps an interrupted write left beside this one (and at the top) go now, under the lock.
        const parent = dirname(path);
        sweepStaleWorkspaceTemps(workspaceRoot(botId), { dirs: parent === "." ? [""] : ["", parent] });
        return workspaceFiles(workspaceRoot(botId), {
          maxFileBytes: deps.maxFileBytes,
          // Tests only: the write's data is in its flushed temp, not renamed yet, the workspace lock held.
          ...(deps.restoreCrash
            ? { hooks: { beforeRename: () => deps.restoreCrash?.point(FILE_WRITE_CRASH_POINT) } }
            : {}),
        }).write(path, body);
      },
      bot,
    );
    return reply.code(201).send({ ok: true, path: request.params["*"], bytes: written.bytes });
  });

  app.get("/v1/bots/:botId/files/*", { schema: { params: FileParams } }, async (request, reply) => {
    const { botId } = request.params;
    await requireBot(botId);
    await refuseReadDuringRestore(botId);
    const data = workspaceFiles(workspaceRoot(botId), { maxFileBytes: deps.maxFileBytes }).read(
      request.params["*"],
    );
    return reply.header("content-type", "application/octet-stream").send(data);
  });

  app.delete("/v1/bots/:botId/files/*", { schema: { params: FileParams } }, async (request) => {
    const { botId } = request.params;
    const bot = await requireBot(botId);
    if (!workspaceExists(botId)) {
      throw new HttpProblem(404, "file_not_found", `No file at '${request.params["*"]}' in this workspace.`);
    }
    await withWorkspace(
      botId,
      "file-delete",
      () => workspaceFiles(workspaceRoot(botId)).remove(request.params["*"]),
      bot,
    );
    return { ok: true };
  });

  // --- checkpoints and restores ---------------------------------------------------------------------------
  app.post("/v1/bots/:botId/checkpoints", { schema: { params: BotIdParam } }, async (request, reply) => {
    const { botId } = request.params;
    const bot = await requireBot(botId);
    const created = await exclusive(botId, () => {
      ensureWorkspace(botId);
      return withWorkspace(
        botId,
        "checkpoint",
        () => {
          // An interrupted write's temp is not the bot's file: it goes before the capture, never into it.
          sweepStaleWorkspaceTemps(workspaceRoot(botId));
          return checkpoints.createCheckpoint(workspaceRoot(botId));
        },
        bot,
      );
    });
    return reply.code(201).send({ ok: true, checkpoint: created });
  });

  app.get("/v1/bots/:botId/checkpoints", { schema: { params: BotIdParam } }, async (request) => {
    const { botId } = request.params;
    await requireBot(botId);
    // Built field by field: the store's rows also carry the workspace's server path, which never leaves.
    const rows = await listWorkspaceCheckpoints(botId);
    return {
      ok: true,
      checkpoints: rows.map((c) => ({
        checkpointId: c.checkpointId,
        createdAt: c.createdAt,
        ...(c.kind === undefined ? {} : { kind: c.kind }),
        files: c.files,
        bytes: c.bytes,
      })),
    };
  });

  const RestoreParams = z.object({
    botId: BotIdParam.shape.botId,
    checkpointId: z.string().regex(CHECKPOINT_ID, "is not a checkpoint id"),
  });
  app.post(
    "/v1/bots/:botId/checkpoints/:checkpointId/restore",
    { schema: { params: RestoreParams } },
    async (request) => {
      const { botId, checkpointId } = request.params;
      let replaced = false;
      try {
        const bot = await requireBot(botId);
        refuseStrayShard(botId, "nothing was restored");
        const known = await listWorkspaceCheckpoints(botId);
        if (!known.some((c) => c.checkpointId === checkpointId)) {
          throw new HttpProblem(404, "checkpoint_not_found", `This bot has no checkpoint '${checkpointId}'.`);
        }
        return await exclusive(botId, async () => {
          const result = await restoreCheckpoint({
            dataDir: deps.dataDir,
            workspaceRoot: workspaceRoot(botId),
            checkpointId,
            // Under the workspace lock, which the bot's deletion (another server's too) needs to retire its
            // workspace: the bot checked above was not deleted, and its id perhaps taken again, while the
            // checkpoint was read. Otherwise a deleted bot's files would be restored into the new bot's
            // workspace at the same path, as edits check too (withWorkspace's forBot).
            confirmWorkspace: async () => {
              const current = await deps.bots.get(botId);
              if (current?.createdAt === bot.createdAt) return null;
              replaced = true;
              return `bot ${botId} was deleted${current ? " and created again" : ""} while the restore started`;
            },
            ...(deps.restoreCrash ? { crash: deps.restoreCrash } : {}),
          });
          return { ok: true, operationId: result.operationId, phase: result.phase, warning: result.warning };
        });
      } catch (error) {
        if (replaced && isSagaError(error) && error.code === "WORKSPACE_MISMATCH") {
          throw new HttpProblem(
            404,
            "bot_not_found",
            `No bot with id '${botId}' (it was deleted meanwhile); nothing was restored.`,
          );
        }
        throw restoreFailure(error, drydockCommandPrefix(deps.dataDir));
      }
    },
  );

  app.get(
    "/v1/restores/:operationId",
    {
      schema: { params: z.object({ operationId: z.string().regex(OPERATION_ID, "is not an operation id") }) },
    },
    async (request) => {
      const { operationId } = request.params;
      // Every workspace directory, also a deleted bot's whose retirement has not run yet (a retired one's
      // sagas moved with it); a bot without a workspace directory has never had a file, so no restore.
      for (const { botId } of listWorkspaces(deps.dataDir)) {
        const store = sagaStore(botId);
        for (const load of [() => store.load(operationId), () => store.loadArchived(operationId)]) {
          try {
            return { ok: true, botId, restore: sagaView(await load()) };
          } catch (error) {
            if ((error as { code?: string }).code !== "NOT_FOUND") throw error;
          }
        }
      }
      throw new HttpProblem(404, "restore_not_found", `No restore with operation id '${operationId}'.`);
    },
  );

  // --- recovery -------------------------------------------------------------------------------------------
  /**
   * The same data as `drydock status`: the recovery controller's Boat plan and every restore it would list
   * (all pages, and the store's diagnostics: finished-but-unarchived sagas still holding the lock, corrupt
   * or busy ones), each with the fenced command to act on it. What cannot be read is reported in
   * `unreadable` (and `complete: false`) instead of hiding what can: the answer is still 200, like the
   * status command's INCOMPLETE verdict. `open` counts what needs a person, as status's ATTENTION does.
   */
  app.get("/v1/recovery", async () => recoveryReport());

  /** When the open-items gauge was last computed (performance.now()), or null before the first time. */
  let recoveryCountedAt: number | null = null;
  /** The recount a scrape started and has not finished, shared by the scrapes that come meanwhile. */
  let recount: Promise<void> | null = null;
  async function recoveryReport() {
    const answer = await recoveryAnswer({
      dataDir: deps.dataDir,
      plan: () => deps.recovery.plan(),
      unfinishedRetirements,
      scrubPaths,
    });
    deps.metrics.recoveryItemsOpen.set(answer.open);
    recoveryCountedAt = performance.now();
    return { ok: true, ...answer, startup: deps.startupReport() };
  }

  /**
   * Deleted bots whose workspace directory is still where it was: their retirement did not finish (it could
   * not run then, or the server stopped in it). Each needs DELETE /v1/bots/:botId again (or the next start,
   * which finishes what it can).
   */
  async function unfinishedRetirements(): Promise<{ botId: string; message: string }[]> {
    const bots = new Set((await deps.bots.list()).map((bot) => bot.botId));
    const unfinished: { botId: string; message: string }[] = [];
    for (const { botId } of listWorkspaces(deps.dataDir)) {
      // Only what DELETE /v1/bots/:botId would retire (an empty directory is no one's data).
      if (bots.has(botId) || !(await hasWorkspaceData(botId))) continue;
      unfinished.push({
        botId,
        message: `Bot ${botId} was deleted, but retiring its workspace did not finish (its files, checkpoints or restores are partly where they were): send DELETE /v1/bots/${botId} to finish it. It is kept, never deleted.`,
      });
    }
    return unfinished;
  }

  /**
   * Retirements a stopped server left half-done, finished once the server is up, in the background (a busy
   * workspace must not hold up the start); each re-checks the registry under the workspace lock. One that
   * cannot run now (a restore still unsettled, a disk error) stays in GET /v1/recovery until DELETE does it.
   */
  let retiringAtStart: Promise<void> = Promise.resolve();
  app.addHook("onReady", async () => {
    retiringAtStart = (async () => {
      let unfinished: { botId: string }[];
      try {
        unfinished = await unfinishedRetirements();
      } catch (error) {
        app.log.warn(
          { err: error },
          "deleted bots' unfinished workspace retirements could not be looked for",
        );
        return;
      }
      for (const { botId } of unfinished) {
        try {
          await exclusive(botId, () => retireWorkspace(botId, "retire-deleted"));
          app.log.info({ botId }, "finished retiring a deleted bot's workspace");
        } catch (error) {
          app.log.warn({ err: error, botId }, "a deleted bot's workspace could not be retired at start");
        }
      }
    })();
  });
  app.addHook("onClose", async () => {
    await retiringAtStart;
  });

  return app;
}
