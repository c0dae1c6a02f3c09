import type { BoatCreateJournal } from "@drydock/boat-create-journal";
import type { BoatDeleteJournal } from "@drydock/boat-delete-journal";
import type { BoatLifecycle, RecoveryReport } from "@drydock/boat-lifecycle";
import type { BoatClient } from "@drydock/boat-provider";
import type { BoatPlan } from "@drydock/recovery-controller";
import type { CrashHook } from "@drydock/restore-saga";
import type { Storage } from "@drydock/storage";
import type { FastifyServerOptions } from "fastify";
import type { TokenSource } from "./auth.js";
import type { BotRegistry } from "./bots.js";
import type { Metrics } from "./metrics.js";

export interface RecoverySource {
  /** The recovery controller's Boat plan: everything about Boats that needs a person, redacted. */
  plan(): Promise<BoatPlan>;
}

export interface ServerDeps {
  dataDir: string;
  /** The admin token (DRYDOCK_TOKEN or `<dataDir>/server-token`); the only one unless `tokens` is given. */
  token: string;
  /** Every token the server accepts, with its role (DRYDOCK_TOKENS, its file): replaces `token` when set. */
  tokens?: TokenSource;
  /** DRYDOCK_METRICS_TOKEN: when set, GET /metrics needs it (or any API token); unset, /metrics is open. */
  metricsToken?: string;
  maxFileBytes: number;
  bots: BotRegistry;
  lifecycle: BoatLifecycle;
  createJournal: BoatCreateJournal;
  deleteJournal: BoatDeleteJournal;
  /**
   * The Storage the journals and the bot registry come from (startServer's): GET /readyz reads it (one meta
   * read) on every backend, and its change token, where it offers one, lets GET /v1/bots re-send a page
   * without reading a row. Unset (a server built around bare journals): no storage check.
   */
  storage?: Pick<Storage, "kind" | "meta" | "workspaces" | "changeToken">;
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
  /**
   * Runs each request's hooks and handler inside `scope(next)` (on postgres: the instance lease binds the
   * request to its epoch, so all its writes carry it). Unset: requests run as they are.
   */
  requestScope?: (next: () => void) => void;
}

/**
 * Tests only: the crash point (through the restore crash hook, `ServerDeps.restoreCrash`) inside a file
 * write, after its data is flushed to its temp and before the rename, while it holds the workspace lock.
 */
export const FILE_WRITE_CRASH_POINT = "file-write.before-rename";

/** How long GET /readyz waits for boat.dev's list before it calls the provider not ready. */
export const READYZ_PROVIDER_TIMEOUT_MS = 3_000;
