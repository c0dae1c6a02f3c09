import { join } from "node:path";
import {
  type BoatLifecycle,
  createBoatLifecycle,
  type CrashHook as LifecycleCrashHook,
  type RecoveryReport,
} from "@drydock/boat-lifecycle";
import { createBoatClient } from "@drydock/boat-provider";
import { type BoatSimulator, startBoatSimulator } from "@drydock/boat-provider/simulator";
import { LOCKS_DIR } from "@drydock/facts";
import { collectLockGarbageIn, type LockHandle } from "@drydock/file-lock";
import { createBoatRecovery, providerIdentity } from "@drydock/recovery-controller";
import { type CrashHook as RestoreCrashHook, reapDeadEditLocks } from "@drydock/restore-saga";
import { claimDataDir, openStorage, type Storage, type StorageCrashHook } from "@drydock/storage";
import {
  instancesOf,
  type PostgresStorage,
  postgresBackend,
  redactUrl as redactPostgresUrl,
} from "@drydock/storage-postgres";
import { DEFAULT_MAX_ROWS, SQLITE_FILE, sqliteBackend } from "@drydock/storage-sqlite";
import type { FastifyInstance } from "fastify";
import { buildServer } from "./app.js";
import { fileTokens, staticTokens, type TokenEntry, type TokenSource } from "./auth.js";
import { httpBotRegistry } from "./bots.js";
import type { ServerConfig } from "./config.js";
import {
  bindProvider,
  bindSharedProvider,
  EMBEDDED_PROVIDER_FILE,
  ensureDataDir,
  holdEmbeddedSimulator,
  loadEnvironmentId,
  loadServerToken,
  removeEmbeddedProvider,
  saveEmbeddedProvider,
} from "./data-dir.js";
import { DEFAULT_LEASE_TTL_MS, type InstanceLease, startInstanceLease } from "./instance-lease.js";
import { leaseGatedFetch } from "./lease-gated-fetch.js";
import { countingFetch, createMetrics } from "./metrics.js";
import { drydockCommandPrefix } from "./recovery.js";
import { sweepStaleWorkspaceTemps } from "./workspace-files.js";

export interface StartOptions {
  /**
   * Tests only: crash hooks for the lifecycle and restore crash points, and the storage's own (its
   * transactions' steps, e.g. `postgres:before-commit`, with the lock the transaction holds as `scope`).
   */
  crash?: { lifecycle?: LifecycleCrashHook; restore?: RestoreCrashHook; storage?: StorageCrashHook };
  /** Where the start banner goes (default stdout). */
  print?: (line: string) => void;
  /** Tests only: the clock of the Boat journals, lifecycle and recovery plan (default Date.now). */
  now?: () => number;
  /** Tests only: wraps the lifecycle the HTTP routes call (to interleave them with another server's). */
  wrapLifecycle?: (lifecycle: BoatLifecycle) => BoatLifecycle;
}

export interface RunningServer {
  app: FastifyInstance;
  url: string;
  token: string;
  tokenPath: string | null;
  provider: { embedded: boolean; apiUrl: string };
  /** The storage backend the data directory is bound to and this server runs on (DRYDOCK_STORAGE). */
  storage: { kind: Storage["kind"] };
  /** The embedded boat.dev simulator, when no BOAT_API_URL was configured (its stats are the billing truth). */
  simulator: BoatSimulator | null;
  /** Resolves when recoverAtStartup has finished (its report is also in GET /v1/recovery). */
  startup: Promise<RecoveryReport | null>;
  close(): Promise<void>;
}

/** `url` without userinfo (`user:password@`), for banners and logs; an unparsable URL is hidden whole. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.username === "" && parsed.password === "") return url;
    parsed.username = "";
    parsed.password = "";
    return parsed.toString();
  } catch {
    return url.includes("@") ? "[unparsable URL; redacted]" : url;
  }
}

/**
 * Startup recovery of workspace edits: removes every workspace lock a file write, deletion or checkpoint
 * of a killed process left (restore-saga's `reapDeadEditLocks`: dead `workspace-edit` owners only; a
 * restore's lock stays for its fenced recovery), sweeping the temps that edit left in its workspace while
 * the lock is held. Such a lock would otherwise be taken over only by the workspace's next acquisition.
 * Never fails the start: what could not be removed is logged and left to that acquisition.
 */
async function reapStoppedEdits(dataDir: string, app: FastifyInstance): Promise<void> {
  try {
    const { removed } = await reapDeadEditLocks({
      dataDir,
      whileHeld: (owner) => {
        sweepStaleWorkspaceTemps(owner.payload.workspaceRoot);
      },
    });
    for (const owner of removed) {
      // Never the owner's token: its operation id and workspace only.
      app.log.info(
        { operationId: owner.payload.transactionId, workspaceRoot: owner.payload.workspaceRoot },
        "removed the workspace lock of a file write, deletion or checkpoint that stopped with a killed process",
      );
    }
    // What killed processes left beside the locks (a registry lock's candidate, a dead reaper's record),
    // in locks/ and beside the journals in the data directory itself: file-lock judges each file and removes
    // only a dead process's (`drydock locks gc` sweeps the same two directories).
    const swept = [dataDir, join(dataDir, LOCKS_DIR)].flatMap((dir) => collectLockGarbageIn(dir).removed);
    if (swept.length > 0) {
      app.log.info({ removed: swept.length }, "removed lock leftovers of killed processes");
    }
  } catch (error) {
    app.log.warn(
      { err: error },
      "the workspace locks of stopped file writes, deletions and checkpoints could not be swept; each is taken over by its workspace's next write",
    );
  }
}

/**
 * Starts the bot server on `config`: data directory, token, provider (embedded simulator when none is
 * configured), journals, lifecycle, HTTP. Then runs `recoverAtStartup()`, which finishes what can be
 * proven and reports what needs a person; it never creates a Boat.
 */
export async function startServer(config: ServerConfig, options: StartOptions = {}): Promise<RunningServer> {
  // What a start that fails part-way has taken is given back (newest first): the simulator's lock above
  // all, or this process could never start a server on the directory again (one embedded per directory).
  const taken: (() => unknown)[] = [];
  try {
    return await start(config, options, taken);
  } catch (error) {
    for (const giveBack of taken.reverse()) {
      try {
        await giveBack();
      } catch {
        // The start's own failure is the one to report.
      }
    }
    throw error;
  }
}

/** The boat.dev this data directory is bound to: the configured one, or an embedded simulator. */
interface BoatDev {
  provider: { apiUrl: string; token: string };
  simulator: BoatSimulator | null;
  simulatorLock: LockHandle | null;
}

async function provideBoatDev(config: ServerConfig, taken: (() => unknown)[]): Promise<BoatDev> {
  // One data directory, one boat.dev (see bindProvider): checked before any simulator or journal is touched.
  bindProvider(config.dataDir, providerIdentity(config.provider ? config.provider.apiUrl : null));
  if (config.provider) {
    // A real provider now: an earlier embedded run's file must not send drydock to a simulator that is gone.
    removeEmbeddedProvider(config.dataDir);
    return { provider: config.provider, simulator: null, simulatorLock: null };
  }
  // One embedded simulator per data directory (see holdEmbeddedSimulator).
  const lock = holdEmbeddedSimulator(config.dataDir);
  taken.push(() => lock.release());
  // The embedded boat.dev twin keeps its state in the data directory, so a restarted server finds the
  // Boats it created (the billing truth survives the server's own crash).
  const simulator = await startBoatSimulator({
    host: "127.0.0.1",
    port: 0,
    stateFile: join(config.dataDir, "boat-simulator.json"),
  });
  taken.push(() => simulator.close());
  const provider = { apiUrl: simulator.apiUrl, token: simulator.token };
  taken.push(() => removeEmbeddedProvider(config.dataDir));
  saveEmbeddedProvider(config.dataDir, provider);
  return { provider, simulator, simulatorLock: lock };
}

/** Where the lifecycle logs: the Fastify app's logger, once it is built. */
type LogSink = { app: FastifyInstance | null };

/**
 * The data directory's one Storage (DRYDOCK_STORAGE; the directory is bound to its backend on first start,
 * and another backend is refused naming both and the migrate command). Every journal call goes through it.
 */
export async function openServerStorage(config: ServerConfig, options: StartOptions = {}): Promise<Storage> {
  const kind = config.storage ?? "file";
  if (kind === "postgres" && config.postgres === undefined) {
    throw new Error(
      "startServer: config.storage is postgres but config.postgres.url is missing (loadConfig sets both)",
    );
  }
  return openStorage({
    dataDir: config.dataDir,
    storage: kind === "postgres" ? (config.postgres?.url as string) : kind,
    backends: { sqlite: sqliteBackend, postgres: postgresBackend },
    ...(options.now ? { now: options.now } : {}),
    ...(options.crash?.storage ? { crash: options.crash.storage } : {}),
    backendOptions: {
      ...(config.sqliteBusyTimeoutMs === undefined ? {} : { busyTimeoutMs: config.sqliteBusyTimeoutMs }),
      ...(config.postgres?.schema === undefined ? {} : { schema: config.postgres.schema }),
      // The store's workspaces (postgres) take the server's limit on a file, as local files do.
      ...(kind === "postgres" ? { maxFileBytes: config.maxFileBytes } : {}),
    },
  });
}

/** How the banner names the storage: its backend and where it lives (a postgres URL's password as ***). */
function storageLine(storage: Storage, config: ServerConfig): string {
  if (storage.kind === "postgres") {
    const url = redactPostgresUrl(config.postgres?.url ?? "");
    // This slice moves the journals, the bot registry and meta; workspaces and sagas stay on this host.
    return `postgres (${url}, schema ${config.postgres?.schema ?? "drydock"}; workspaces in the database too)`;
  }
  return storage.kind === "sqlite"
    ? `sqlite (${join(storage.dataDir, SQLITE_FILE)})`
    : `${storage.kind} (${storage.dataDir}, one JSON file per journal)`;
}

/** The journals, the bot registry, the boat.dev client, the lifecycle and the recovery plan of a start. */
function openCollaborators(
  config: ServerConfig,
  options: StartOptions,
  storage: Storage,
  environmentId: string,
  boatDev: BoatDev,
  logs: LogSink,
  lease: InstanceLease | null,
  providerFetch: typeof fetch,
) {
  const now = options.now ?? Date.now;
  // The journals' caps are the backend's: the file backend's 4,096 rows, sqlite's and postgres's limit.
  const metrics = createMetrics(
    storage.kind !== "file" ? { journalCaps: { create: DEFAULT_MAX_ROWS, delete: DEFAULT_MAX_ROWS } } : {},
  );
  const client = createBoatClient({
    baseUrl: boatDev.provider.apiUrl,
    token: boatDev.provider.token,
    fetch: countingFetch(metrics, providerFetch),
  });
  const { createJournal, deleteJournal } = storage;
  // The bot registry is the Storage's (bots.json on file, the bots table on sqlite), answering in HTTP terms.
  const bots = httpBotRegistry(storage.bots);
  const lifecycle = createBoatLifecycle({
    client,
    createJournal,
    deleteJournal,
    environmentId,
    now,
    knownBotIds: async () => (await bots.list()).map((b) => b.botId),
    logger: {
      info: (message: string, fields?: Record<string, unknown>) => logs.app?.log.info(fields ?? {}, message),
      warn: (message: string, fields?: Record<string, unknown>) => logs.app?.log.warn(fields ?? {}, message),
    },
    onCreateRetry: () => metrics.providerRetries.inc(),
    // The one walk of boat.dev's list behind the name lookup starts at recoverAtStartup (below).
    ...(config.nameSweepInlinePages === undefined
      ? {}
      : { nameSweep: { inlinePages: config.nameSweepInlinePages } }),
    ...(options.crash?.lifecycle ? { crash: options.crash.lifecycle } : {}),
    // On postgres: no create POST or DELETE once this server's instance lease has lapsed (503 lease_lost).
    ...(lease === null ? {} : { beforeSideEffect: () => lease.gate() }),
    // On postgres several hosts provision one bot at once (the per-bot exclusivity is per process): a
    // minted create key may be resumed elsewhere, so it is never discarded.
    keysSharedAcrossProcesses: storage.kind === "postgres",
  });
  const recovery = createBoatRecovery({
    lifecycle,
    createJournal,
    deleteJournal,
    client,
    environmentId,
    now,
    // A Boat carrying one of these bots' names is attributed to it even with no journal row (adoptable);
    // a recorded Boat whose bot is not here is reported (billed, and no bot uses or deletes it). A registry
    // that cannot be read throws: the plan says so instead of taking it as "no bots".
    registeredBotIds: async () => (await bots.list()).map((b) => b.botId),
    // The plan's commands name this data directory, as `drydock status` prints them.
    commandPrefix: drydockCommandPrefix(config.dataDir),
  });
  return { metrics, client, createJournal, deleteJournal, bots, lifecycle, recovery };
}

const SERVER_LOG_REDACTION = {
  // Belt and braces: nothing logs these, and if something ever does, pino blanks them.
  paths: ["req.headers.authorization", "headers.authorization", "token", "idempotencyKey", "requestBody"],
  censor: "[redacted]",
};

function printBanner(
  print: (line: string) => void,
  facts: {
    url: string;
    dataDir: string;
    storage: Storage;
    tokenPath: string | null;
    boatDev: BoatDev;
    config: ServerConfig;
  },
): void {
  const { url, dataDir, storage, tokenPath, boatDev, config } = facts;
  print(`drydock bot server listening on ${url}`);
  print(`  data directory: ${dataDir}`);
  print(`  storage:        ${storageLine(storage, config)}`);
  print(
    tokenPath
      ? `  bearer token:   in ${tokenPath} (curl -H "Authorization: Bearer $(cat ${tokenPath})")`
      : config.token
        ? "  bearer token:   from DRYDOCK_TOKEN"
        : "  bearer tokens:  from DRYDOCK_TOKENS / DRYDOCK_TOKENS_FILE",
  );
  if (config.tokens || config.tokensFile) {
    const count = (config.tokens?.length ?? 0) + (config.tokensFile?.initial.length ?? 0);
    print(
      `  more tokens:    ${count} named${config.tokensFile ? `, ${config.tokensFile.path} re-read when it changes` : ""}`,
    );
  }
  print(`  metrics:        ${config.metricsToken ? "need DRYDOCK_METRICS_TOKEN (or an API token)" : "open"}`);
  print(
    boatDev.simulator
      ? `  boat.dev:       embedded simulator at ${boatDev.simulator.apiUrl} (no BOAT_API_URL set; no real Boats are billed; address and token in ${join(dataDir, EMBEDDED_PROVIDER_FILE)}, which drydock reads)`
      : `  boat.dev:       ${redactUrl(boatDev.provider.apiUrl)}`,
  );
}

/**
 * The tokens of a start: DRYDOCK_TOKEN (admin, `default`); else, when no token list is configured either,
 * `<dataDir>/server-token` (generated on first start); then DRYDOCK_TOKENS, and DRYDOCK_TOKENS_FILE re-read
 * on change. `token` is the one the banner and tests use: the default admin token, else the first admin one.
 */
function tokensOf(config: ServerConfig): {
  token: string;
  path: string | null;
  source: (warn: (message: string) => void) => TokenSource;
} {
  const listed = config.tokens !== undefined || config.tokensFile !== undefined;
  const primary: { token: string; path: string | null } | null = config.token
    ? { token: config.token, path: null }
    : listed
      ? null
      : loadServerToken(config.dataDir);
  const fixed: TokenEntry[] = [
    ...(primary ? [{ name: "default", role: "admin" as const, token: primary.token }] : []),
    ...(config.tokens ?? []),
  ];
  const all = [...fixed, ...(config.tokensFile?.initial ?? [])];
  const first = all.find((e) => e.role === "admin") ?? all[0];
  const file = config.tokensFile;
  return {
    token: first?.token ?? "",
    path: primary?.path ?? null,
    source: (warn) => (file ? fileTokens(file.path, file.initial, warn, fixed) : staticTokens(fixed)),
  };
}

async function start(
  config: ServerConfig,
  options: StartOptions,
  taken: (() => unknown)[],
): Promise<RunningServer> {
  const print = options.print ?? ((line: string) => process.stdout.write(`${line}\n`));
  ensureDataDir(config.dataDir);
  // First: a directory bound to another backend, or a damaged, busy or newer store, stops the start here,
  // before anything else is written to the directory.
  // The server's presence claim: `drydock storage migrate` refuses while it is held, and a start during a
  // migration is refused here (STORAGE_IN_USE) before the store is opened. Released at close.
  const claim = await claimDataDir(config.dataDir, { role: "server" });
  taken.push(() => claim.release());
  const storage = await openServerStorage(config, options);
  taken.push(() => storage.close());
  const environmentId = await loadEnvironmentId(storage);
  const { token, path: tokenPath, source: tokenSource } = tokensOf(config);
  const logs: LogSink = { app: null };
  // On postgres this server is an instance with a lease (registered now, renewed by a heartbeat).
  const instances = instancesOf(storage);
  const lease =
    instances === null
      ? null
      : await startInstanceLease({
          instances,
          ttlMs: config.leaseTtlMs ?? DEFAULT_LEASE_TTL_MS,
          log: {
            info: (fields, message) => logs.app?.log.info(fields, message),
            warn: (fields, message) => logs.app?.log.warn(fields, message),
          },
        });
  if (lease !== null) {
    taken.push(() => lease.close());
    // From here every journal, registry and meta write is fenced by this server's instance, read when each
    // call starts: a write under an epoch whose lease lapsed (a pause) or that was declared dead is refused
    // inside its transaction (STORAGE_FENCED → 503 lease_lost), nothing written. The lease switches to its
    // new epoch when it re-registers; a request keeps the epoch it began under (lease.scope, below).
    (storage as PostgresStorage).fenceWith(() => lease.writer());
  }
  // The lease is checked again as each create POST or DELETE is written to boat.dev's socket.
  const gatedFetch = lease === null ? null : leaseGatedFetch(lease);
  if (gatedFetch !== null) taken.push(() => gatedFetch.close());

  const boatDev = await provideBoatDev(config, taken);
  // Several hosts share a postgres store: all of them must use one boat.dev (checked after the data
  // directory's own binding, before any Boat call).
  if (instancesOf(storage) !== null) {
    await bindSharedProvider(
      storage as PostgresStorage,
      config.providerIdentity ?? providerIdentity(config.provider ? config.provider.apiUrl : null),
    );
  }
  const { simulator, simulatorLock, provider } = boatDev;
  const { metrics, client, createJournal, deleteJournal, bots, lifecycle, recovery } = openCollaborators(
    config,
    options,
    storage,
    environmentId,
    boatDev,
    logs,
    lease,
    gatedFetch?.fetch ?? fetch,
  );

  let startupReport: RecoveryReport | null = null;
  const app = await buildServer({
    dataDir: config.dataDir,
    token,
    tokens: tokenSource((message) => logs.app?.log.warn(message)),
    ...(config.metricsToken ? { metricsToken: config.metricsToken } : {}),
    maxFileBytes: config.maxFileBytes,
    bots,
    lifecycle: options.wrapLifecycle ? options.wrapLifecycle(lifecycle) : lifecycle,
    createJournal,
    deleteJournal,
    storage,
    client,
    metrics,
    recovery,
    startupReport: () => startupReport,
    ...(lease === null ? {} : { requestScope: (next: () => void) => lease.scope(next) }),
    ...(options.now ? { now: options.now } : {}),
    logger: { level: config.logLevel, redact: SERVER_LOG_REDACTION },
    ...(options.crash?.restore ? { restoreCrash: options.crash.restore } : {}),
  });
  logs.app = app;
  taken.push(() => app.close());

  // Before the first request: locks left by file writes, deletions and checkpoints of a killed server.
  await reapStoppedEdits(config.dataDir, app);

  const address = await app.listen({ host: config.host, port: config.port });
  const url = address.replace("[::1]", "localhost");
  printBanner(print, { url, dataDir: config.dataDir, storage, tokenPath, boatDev, config });
  if (lease !== null) {
    const ttl = config.leaseTtlMs ?? DEFAULT_LEASE_TTL_MS;
    const { id, epoch } = lease.current();
    print(
      `  instance:       ${id} (epoch ${epoch}; lease ${ttl} ms, renewed every ${Math.floor(ttl / 3)} ms)`,
    );
  }

  const startup = lifecycle.recoverAtStartup().then(
    (report) => {
      startupReport = report;
      app.log.info({ recovery: report }, "startup recovery finished");
      return report;
    },
    (error: unknown) => {
      app.log.error(
        { err: error },
        "startup recovery could not run; see GET /v1/recovery and drydock status",
      );
      return null;
    },
  );

  return {
    app,
    url,
    token,
    tokenPath,
    provider: { embedded: simulator !== null, apiUrl: provider.apiUrl },
    storage: { kind: storage.kind },
    simulator,
    startup,
    async close() {
      await startup;
      lifecycle.close();
      await app.close();
      // The instance is marked stopped once no request can start a side effect any more.
      await lease?.close();
      await gatedFetch?.close();
      // The simulator goes with this server: so does the file that tells drydock where it was.
      if (simulator) removeEmbeddedProvider(config.dataDir);
      await simulator?.close();
      try {
        simulatorLock?.release();
      } catch {
        // Held until this process exits (then reaped by the next start): nothing is lost.
      }
      // Last: in-flight requests (and the simulator) are done with it.
      try {
        await storage.close();
      } finally {
        claim.release();
      }
    },
  };
}
