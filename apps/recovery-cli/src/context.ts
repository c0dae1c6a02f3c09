import { existsSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { type BoatClient, createBoatClient } from "@drydock/boat-provider";
import {
  BOTS_FILE,
  CHECKPOINTS_DIR,
  CREATE_JOURNAL_FILE,
  DELETE_JOURNAL_FILE,
  EMBEDDED_PROVIDER_FILE,
  ENVIRONMENT_ID_FILE,
  PROVIDER_BINDING_FILE,
  RESTORE_SAGAS_DIR,
  STORAGE_BINDING_FILE,
  WORKSPACES_DIR,
} from "@drydock/facts";
import {
  drydockCommandPrefix,
  providerIdentity,
  providerMismatch,
  readProviderBinding,
  shellQuote,
} from "@drydock/recovery-controller";
import type { Storage } from "@drydock/storage";
import { SQLITE_FILE } from "@drydock/storage-sqlite";
import { CliError } from "./errors.js";
import type { CliIo } from "./io.js";
import { type Progress, progressReporter } from "./progress.js";
import { type Colors, colors } from "./render.js";
import { databaseClockOffset, openCliStorage, readEnvironmentId, storageSettingFromEnv } from "./storage.js";

/** What `main` runs with besides the command line: the streams, the environment, the test seams. */
export interface MainOptions {
  io: CliIo;
  /**
   * The environment variables the CLI honours (DRYDOCK_DATA_DIR, DRYDOCK_STORAGE, DRYDOCK_STORAGE_FILE,
   * DRYDOCK_POSTGRES_SCHEMA, BOAT_API_URL, BOAT_API_TOKEN, NO_COLOR).
   */
  env: Readonly<Record<string, string | undefined>>;
  /**
   * This host's clock (default Date.now; tests move it). The file and sqlite stores stamp with it; a postgres
   * store never does: its stamps and windows are the database's clock, and so is the context's `now` once
   * that storage is open (see createContext).
   */
  now?: () => number;
  /** Injected for tests: replaces global fetch for the provider client. */
  fetch?: typeof fetch;
  cwd?: string;
}

export interface GlobalOptions {
  dataDir?: string;
  /** `--storage file|sqlite|postgres://…` (env DRYDOCK_STORAGE / DRYDOCK_STORAGE_FILE); default: the binding. */
  storage?: string;
  /** `storage migrate --to`: the backend to move to. */
  to?: string;
  /** A list's page size (`--limit`). */
  limit?: string;
  /** Where a list's page starts (`--cursor`, printed by the page before it). */
  cursor?: string;
  providerUrl?: string;
  providerToken?: string;
  json: boolean;
  yes: boolean;
  color: boolean;
  expectedSeq?: string;
  expectedHash?: string;
  expectedOwnerDigest?: string;
  expectedState?: string;
  reason?: string;
  olderThanDays?: string;
  /** `status --fail-on-attention`: exit 7 when anything needs a person (monitoring). */
  failOnAttention?: boolean;
  /** False with `--no-input`: never ask `apply? [y/N]`, whatever the terminal. */
  input?: boolean;
}

/** Everything a command may use. Commands get it as an argument; nothing reads globals. */
export interface CommandContext {
  /** Absolute. */
  dataDir: string;
  io: CliIo;
  json: boolean;
  yes: boolean;
  tty: boolean;
  c: Colors;
  now: () => number;
  options: GlobalOptions;
  /** The boat.dev client; throws PROVIDER_NOT_CONFIGURED when no URL/token was given. */
  client(): BoatClient;
  providerConfigured: boolean;
  /**
   * The data directory's Storage (see storage.ts: `--storage`, DRYDOCK_STORAGE or its binding), opened on
   * first use; every journal and meta read goes through it. `close()` releases it (main does, after the command).
   */
  storage(): Promise<Storage>;
  /** `--storage`, else DRYDOCK_STORAGE / DRYDOCK_STORAGE_FILE (as given: a postgres URL holds a password). */
  storageSetting(): string | undefined;
  /** DRYDOCK_POSTGRES_SCHEMA, when set. */
  postgresSchema: string | undefined;
  close(): Promise<void>;
  /** The environment id (the storage's meta); throws ENVIRONMENT_ID_MISSING when the server never wrote it. */
  environmentId(): Promise<string>;
  /** `drydock --data-dir <abs>`: the start of every command line the CLI prints for pasting. */
  commandPrefix: string;
  /**
   * The start of every printed command that talks to boat.dev: `commandPrefix`, plus `--provider-url <url>`
   * when the URL came from that flag (so the pasted line reaches the same boat.dev). Never a token.
   */
  boatCommandPrefix: string;
  /**
   * What a printed boat.dev command needs beyond its words, said beside it (as a shell comment), or null:
   * the provider when none is configured, the token when it came from `--provider-token` (never printed).
   */
  providerNote: string | null;
  /** A progress line on stderr for a long operation (silent unless stderr is a TTY and not --json). */
  progress(title: string, total?: number | null): Progress;
}

/** What a data directory holds, for the message when the one given is not one. */
const DATA_DIR_LOOKS_LIKE =
  "A drydock data directory is the one drydock-server runs with (its DRYDOCK_DATA_DIR, default ./.drydock): " +
  "it holds environment-id, bots.json, box-create-requests.json, box-delete-requests.json, restore-sagas/ and " +
  "workspaces/. Pass it with --data-dir <dir> (or set DRYDOCK_DATA_DIR).";

/**
 * Every command reads the data directory: one that does not exist (a typo, a missing mount) or is not a
 * directory is "not found" (exit 3), never an empty journal or an empty list.
 */
function assertDataDir(dataDir: string): void {
  let isDirectory: boolean;
  try {
    isDirectory = statSync(dataDir).isDirectory();
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new CliError(
      "NOT_FOUND",
      code === "ENOENT" || code === "ENOTDIR"
        ? `The data directory ${dataDir} does not exist. ${DATA_DIR_LOOKS_LIKE}`
        : `The data directory ${dataDir} cannot be read (${code ?? String(error)}). ${DATA_DIR_LOOKS_LIKE}`,
      error,
    );
  }
  if (!isDirectory) {
    throw new CliError("NOT_FOUND", `${dataDir} is not a directory. ${DATA_DIR_LOOKS_LIKE}`);
  }
  // A directory holding nothing drydock writes (the parent of a data directory, a workspace, /tmp) would
  // read as empty journals and no restores: "OK" about a directory that is not the one meant.
  if (!DATA_DIR_MARKERS.some((name) => existsSync(path.join(dataDir, name)))) {
    throw new CliError(
      "NOT_FOUND",
      `${dataDir} holds nothing drydock writes, so it is not a drydock data directory. ${DATA_DIR_LOOKS_LIKE}`,
    );
  }
}

/** What a data directory holds once anything of drydock ran on it; one holding none of them is not one. */
const DATA_DIR_MARKERS = [
  ENVIRONMENT_ID_FILE,
  STORAGE_BINDING_FILE,
  SQLITE_FILE,
  PROVIDER_BINDING_FILE,
  BOTS_FILE,
  CREATE_JOURNAL_FILE,
  DELETE_JOURNAL_FILE,
  RESTORE_SAGAS_DIR,
  CHECKPOINTS_DIR,
  WORKSPACES_DIR,
];

/** The URL as a printable word, or null when it carries credentials (user:password@) and must not be shown. */
function printableUrl(url: string): string | null {
  try {
    const parsed = new URL(url);
    if (parsed.username !== "" || parsed.password !== "") return null;
  } catch {
    return null;
  }
  return shellQuote(url);
}

/** Whether the data directory is bound to the embedded simulator (or holds its state file). */
export function boundToEmbedded(dataDir: string): boolean {
  let bound: string | null = null;
  try {
    bound = readProviderBinding(dataDir);
  } catch {
    // An unreadable binding file: judged by the simulator's state file alone.
  }
  return bound === "embedded" || existsSync(path.join(dataDir, "boat-simulator.json"));
}

/** The boat.dev a run talks to: its URL and token (flags, then environment, then the embedded simulator). */
interface ProviderChoice {
  url: string | undefined;
  token: string | undefined;
  /** The embedded simulator found when nothing was given, or null. */
  embedded: { apiUrl: string; token: string } | null;
  /** The start of every printed boat.dev command (see `CommandContext.boatCommandPrefix`). */
  boatCommandPrefix: string;
  /** See `CommandContext.providerNote`. */
  providerNote: string | null;
}

function chooseProvider(
  globals: GlobalOptions,
  env: MainOptions["env"],
  dataDir: string,
  commandPrefix: string,
): ProviderChoice {
  const given = Boolean(
    globals.providerUrl ?? globals.providerToken ?? env.BOAT_API_URL ?? env.BOAT_API_TOKEN,
  );
  // Nothing given: the embedded simulator of a server running on this data directory, if there is one.
  const embedded = given ? null : readEmbeddedProvider(dataDir);
  const url = globals.providerUrl ?? env.BOAT_API_URL ?? embedded?.apiUrl;
  const token = globals.providerToken ?? env.BOAT_API_TOKEN ?? embedded?.token;
  // A URL given as a flag is not in the environment a pasted line runs in: the line carries it.
  const flagUrl = globals.providerUrl ? printableUrl(globals.providerUrl) : null;
  const boatCommandPrefix = flagUrl === null ? commandPrefix : `${commandPrefix} --provider-url ${flagUrl}`;
  let providerNote: string | null = null;
  if (!(url && token)) {
    // A directory of the embedded simulator is checked with its server up, never with a URL of another.
    providerNote = boundToEmbedded(dataDir)
      ? "with the bot server running on this data directory (its embedded simulator is this directory's boat.dev)"
      : "with BOAT_API_URL and BOAT_API_TOKEN set in the environment";
  } else if (globals.providerUrl && flagUrl === null) {
    providerNote =
      "with --provider-url as given here (not printed: it carries credentials) and --provider-token, or BOAT_API_URL and BOAT_API_TOKEN set";
  } else if (globals.providerToken) {
    providerNote = "add --provider-token as you did here (or set BOAT_API_TOKEN): drydock never prints it";
  }
  return { url, token, embedded, boatCommandPrefix, providerNote };
}

/**
 * The URL and token of `provider`, checked (on every use) to be this data directory's boat.dev; throws
 * PROVIDER_NOT_CONFIGURED without a URL and token, PROVIDER_MISMATCH for another boat.dev.
 */
function checkedProvider(provider: ProviderChoice, dataDir: string): { url: string; token: string } {
  const { url, token, embedded } = provider;
  if (!url || !token) {
    throw new CliError(
      "PROVIDER_NOT_CONFIGURED",
      url
        ? "This command talks to boat.dev and its token is missing: pass --provider-token <token> (or set BOAT_API_TOKEN). Nothing was read or sent."
        : token
          ? "This command talks to boat.dev and its URL is missing: pass --provider-url <url> (or set BOAT_API_URL). Nothing was read or sent."
          : "This command talks to boat.dev: set BOAT_API_URL and BOAT_API_TOKEN (or pass --provider-url and --provider-token); with the embedded simulator, start the bot server on this data directory (drydock then finds its address in embedded-boat-dev.json). Nothing was read or sent.",
    );
  }
  // One data directory, one boat.dev: its journals read against another make every Boat look gone.
  // The embedded simulator is `embedded` also when its address is given by hand.
  const running = embedded ?? readEmbeddedProvider(dataDir);
  const isEmbedded = running !== null && providerIdentity(running.apiUrl) === providerIdentity(url);
  const mismatch = providerMismatch(dataDir, providerIdentity(isEmbedded ? null : url));
  if (mismatch !== null) throw new CliError("PROVIDER_MISMATCH", `${mismatch} Nothing was read or sent.`);
  return { url, token };
}

export function createContext(globals: GlobalOptions, options: MainOptions): CommandContext {
  const { io, env } = options;
  const cwd = options.cwd ?? process.cwd();
  const dataDir = path.resolve(cwd, globals.dataDir ?? env.DRYDOCK_DATA_DIR ?? ".drydock");
  assertDataDir(dataDir);
  const commandPrefix = drydockCommandPrefix(dataDir);
  const provider = chooseProvider(globals, env, dataDir, commandPrefix);
  const colorOn = io.stdoutIsTTY && globals.color !== false && !env.NO_COLOR && !globals.json;
  let client: BoatClient | null = null;
  const hostNow = options.now ?? Date.now;
  // On postgres every journal stamp is the database's clock: once the storage is open, `now` is too (this
  // host's clock plus the offset measured then), so the windows judged against those stamps (a fence's DELETE
  // in flight, a create key's 24 hours) hold on a host whose clock is off.
  let databaseOffsetMs = 0;
  const now = () => hostNow() + databaseOffsetMs;
  let opened: Promise<Storage> | null = null;
  const storage = () => {
    // A command that writes (--yes) claims the data directory while its storage is open, so that
    // `drydock storage migrate` never moves the state from under it (and it never writes during one).
    opened ??= Promise.resolve().then(async () => {
      const store = await openCliStorage(dataDir, globals.storage ?? storageSettingFromEnv(env), hostNow, {
        claim: globals.yes === true,
        postgresSchema: env.DRYDOCK_POSTGRES_SCHEMA === "" ? undefined : env.DRYDOCK_POSTGRES_SCHEMA,
      });
      try {
        databaseOffsetMs = await databaseClockOffset(store, hostNow);
      } catch (error) {
        await store.close();
        throw error;
      }
      return store;
    });
    return opened;
  };
  return {
    dataDir,
    io,
    json: globals.json === true,
    yes: globals.yes === true,
    tty: io.stdoutIsTTY && !globals.json,
    c: colors(colorOn),
    now,
    options: globals,
    storageSetting: () => globals.storage ?? storageSettingFromEnv(env),
    postgresSchema: env.DRYDOCK_POSTGRES_SCHEMA === "" ? undefined : env.DRYDOCK_POSTGRES_SCHEMA,
    providerConfigured: Boolean(provider.url && provider.token),
    client() {
      const { url, token } = checkedProvider(provider, dataDir);
      client ??= createBoatClient({
        baseUrl: url,
        token,
        ...(options.fetch ? { fetch: options.fetch } : {}),
        timeoutMs: 5_000,
      });
      return client;
    },
    storage,
    async close() {
      const open = opened;
      opened = null;
      if (open !== null) await (await open.catch(() => null))?.close();
    },
    environmentId: async () => readEnvironmentId(await storage()),
    commandPrefix,
    boatCommandPrefix: provider.boatCommandPrefix,
    providerNote: provider.providerNote,
    progress: (title, total) =>
      progressReporter(io, { json: globals.json === true, title, total: total ?? null }),
  };
}

/**
 * The embedded boat.dev simulator a bot server on this data directory started (it writes its address and
 * token to `embedded-boat-dev.json` on every start), or null: no such file, one that does not read as
 * that, or one left by a server that is no longer running (its simulator went with it).
 */
function readEmbeddedProvider(dataDir: string): { apiUrl: string; token: string } | null {
  let saved: unknown;
  try {
    saved = JSON.parse(readFileSync(path.join(dataDir, EMBEDDED_PROVIDER_FILE), "utf8"));
  } catch {
    return null;
  }
  const { version, apiUrl, token, serverPid } = (saved ?? {}) as Record<string, unknown>;
  if (version !== 1 || typeof apiUrl !== "string" || typeof token !== "string") return null;
  if (!/^http:\/\/127\.0\.0\.1:\d+\//.test(apiUrl) || token.length === 0) return null;
  if (typeof serverPid !== "number" || !Number.isInteger(serverPid) || serverPid <= 0) return null;
  try {
    process.kill(serverPid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ESRCH") return null;
  }
  return { apiUrl, token };
}
