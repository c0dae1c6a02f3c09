import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { DEFAULT_MAX_FILE_BYTES } from "@drydock/facts";
import { isStorageError, parseStorageSetting } from "@drydock/storage";
import { z } from "zod";
import { parseTokenList, type TokenEntry, TokenListError } from "./auth.js";

/** Secrets that may also be given as a file (`<NAME>_FILE`: the file's content, trimmed, is the value). */
export const SECRET_FILE_VARIABLES = [
  "DRYDOCK_TOKEN",
  "BOAT_API_TOKEN",
  "DRYDOCK_METRICS_TOKEN",
  // A postgres:// URL holds the database password.
  "DRYDOCK_STORAGE",
] as const;

/**
 * The server's whole configuration, read from the environment once at start (packages never read it).
 * A bad value stops the server with one clear line naming the variable.
 */
export const ConfigSchema = z
  .object({
    DRYDOCK_DATA_DIR: z.string().min(1).default("./.drydock"),
    HOST: z.string().min(1).default("127.0.0.1"),
    PORT: z.coerce.number().int().min(0).max(65_535).default(8787),
    DRYDOCK_TOKEN: z.string().min(16, "must be at least 16 characters").optional(),
    BOAT_API_URL: z.url({ protocol: /^https?$/ }).optional(),
    BOAT_API_TOKEN: z.string().min(1).optional(),
    BOAT_API_IDENTITY: z
      .string()
      .regex(/^[\x21-\x7e]{1,200}$/, "must be 1-200 printable characters without spaces")
      .optional(),
    LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
    DRYDOCK_MAX_FILE_BYTES: z.coerce.number().int().positive().default(DEFAULT_MAX_FILE_BYTES),
    DRYDOCK_TOKENS: z.string().min(1).optional(),
    DRYDOCK_TOKENS_FILE: z.string().min(1).optional(),
    DRYDOCK_METRICS_TOKEN: z.string().min(16, "must be at least 16 characters").optional(),
    DRYDOCK_SHUTDOWN_TIMEOUT_MS: z.coerce.number().int().min(0).max(600_000).default(10_000),
    DRYDOCK_NAME_SWEEP_INLINE_PAGES: z.coerce.number().int().min(0).max(100_000).default(10),
    DRYDOCK_STORAGE: z.string().min(1).optional(),
    DRYDOCK_SQLITE_BUSY_TIMEOUT_MS: z.coerce.number().int().min(0).max(600_000).optional(),
    DRYDOCK_POSTGRES_SCHEMA: z
      .string()
      .regex(/^[a-z_][a-z0-9_]{0,62}$/, "must be lower-case letters, digits and underscores (at most 63)")
      .optional(),
    DRYDOCK_LEASE_TTL_MS: z.coerce.number().int().min(300).max(600_000).optional(),
  })
  .refine((env) => !env.BOAT_API_URL || env.BOAT_API_TOKEN, {
    message: "BOAT_API_TOKEN is required when BOAT_API_URL is set",
    path: ["BOAT_API_TOKEN"],
  })
  .refine((env) => !env.BOAT_API_IDENTITY || env.BOAT_API_URL, {
    message: "BOAT_API_IDENTITY names a real boat.dev: set BOAT_API_URL with it",
    path: ["BOAT_API_IDENTITY"],
  });

export interface ServerConfig {
  dataDir: string;
  host: string;
  port: number;
  /** Unset: the token is read from (or generated into) <dataDir>/server-token. */
  token?: string;
  /** Unset: the embedded boat.dev simulator is started on a loopback port. */
  provider?: { apiUrl: string; token: string };
  /**
   * BOAT_API_IDENTITY: the boat.dev this server uses as the servers sharing a postgres store compare it
   * (default: BOAT_API_URL's origin and path). Set the same value on every host when their URLs differ for
   * one boat.dev (a per-host egress proxy, say).
   */
  providerIdentity?: string;
  logLevel: string;
  maxFileBytes: number;
  /** DRYDOCK_TOKENS: more tokens, each with a name and a role. */
  tokens?: TokenEntry[];
  /** DRYDOCK_TOKENS_FILE: the same list in a file, re-read when it changes; `initial` is its content at start. */
  tokensFile?: { path: string; initial: TokenEntry[] };
  /** DRYDOCK_METRICS_TOKEN: unset, GET /metrics is open on the listening address. */
  metricsToken?: string;
  /** DRYDOCK_SHUTDOWN_TIMEOUT_MS: how long a SIGTERM/SIGINT waits for in-flight requests before exiting. */
  shutdownTimeoutMs?: number;
  /**
   * DRYDOCK_NAME_SWEEP_INLINE_PAGES: pages of boat.dev's list (200 each) one request reads itself while the
   * one-time name sweep is incomplete, before answering 503 `name_sweep_incomplete` (default 10).
   */
  nameSweepInlinePages?: number;
  /** DRYDOCK_STORAGE: the storage backend (default `file`: today's files); the data directory is bound to it. */
  storage?: ServerStorageKind;
  /**
   * The postgres backend's database, when DRYDOCK_STORAGE (or DRYDOCK_STORAGE_FILE) is a postgres:// URL: the
   * URL (it holds a password: never print it but through `redactUrl`) and DRYDOCK_POSTGRES_SCHEMA (default
   * `drydock`: the schema holding the tables, so several installations may share a database).
   */
  postgres?: { url: string; schema?: string };
  /**
   * DRYDOCK_LEASE_TTL_MS (postgres only; default 15,000): how long one renewal keeps this server's instance
   * alive; renewed every ttl/3, and side effects stop ttl/5 before the lease could pass.
   */
  leaseTtlMs?: number;
  /** DRYDOCK_SQLITE_BUSY_TIMEOUT_MS: the sqlite backend's bounded wait for a database another process holds. */
  sqliteBusyTimeoutMs?: number;
}

/** The backends this server can run on. */
export type ServerStorageKind = "file" | "sqlite" | "postgres";

/**
 * DRYDOCK_STORAGE as the server takes it: `file` (default), `sqlite` or a postgres:// URL; anything else is a
 * ConfigError, whose message never holds the value's credentials.
 */
function parseServerStorage(value: string | undefined): { kind: ServerStorageKind; url?: string } {
  let setting: ReturnType<typeof parseStorageSetting>;
  try {
    setting = parseStorageSetting(value);
  } catch (error) {
    if (isStorageError(error))
      throw new ConfigError(`invalid configuration: DRYDOCK_STORAGE: ${error.message}`);
    throw error;
  }
  return setting;
}

export class ConfigError extends Error {
  override readonly name = "ConfigError";
}

/** Reads a `*_FILE` variable's file; one that cannot be read stops the start with the OS's reason. */
function readSecretFile(variable: string, path: string): string {
  try {
    return readFileSync(path, "utf8").trim();
  } catch (error) {
    const e = error as NodeJS.ErrnoException;
    throw new ConfigError(`invalid configuration: ${variable}: cannot read ${path}: ${e.code ?? e.message}`);
  }
}

function parseTokens(variable: string, text: string): TokenEntry[] {
  try {
    return parseTokenList(text);
  } catch (error) {
    if (error instanceof TokenListError)
      throw new ConfigError(`invalid configuration: ${variable}: ${error.message}`);
    throw error;
  }
}

export function loadConfig(env: NodeJS.ProcessEnv): ServerConfig {
  const known: Record<string, string | undefined> = Object.fromEntries(
    Object.keys(ConfigSchema.shape).map((k) => [k, env[k] === "" ? undefined : env[k]]),
  );
  // `<NAME>_FILE` for each secret: the value comes from the file, and an error in it names the _FILE variable.
  const fromFile = new Set<string>();
  for (const name of SECRET_FILE_VARIABLES) {
    const path = env[`${name}_FILE`];
    if (path === undefined || path === "") continue;
    if (known[name] !== undefined) {
      throw new ConfigError(`invalid configuration: ${name}_FILE: set ${name} or ${name}_FILE, not both`);
    }
    known[name] = readSecretFile(`${name}_FILE`, path);
    fromFile.add(name);
  }
  const parsed = ConfigSchema.safeParse(known);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const path = issue?.path.join(".") ?? "";
    const variable = path === "" ? "environment" : fromFile.has(path) ? `${path}_FILE` : path;
    throw new ConfigError(`invalid configuration: ${variable}: ${issue?.message ?? "invalid"}`);
  }
  const c = parsed.data;
  const storage = parseServerStorage(c.DRYDOCK_STORAGE);
  for (const name of ["DRYDOCK_POSTGRES_SCHEMA", "DRYDOCK_LEASE_TTL_MS"] as const) {
    if (c[name] !== undefined && storage.kind !== "postgres") {
      throw new ConfigError(
        `invalid configuration: ${name}: set only with DRYDOCK_STORAGE=postgres://… (the postgres backend)`,
      );
    }
  }
  const tokens = c.DRYDOCK_TOKENS === undefined ? undefined : parseTokens("DRYDOCK_TOKENS", c.DRYDOCK_TOKENS);
  const tokensFile =
    c.DRYDOCK_TOKENS_FILE === undefined
      ? undefined
      : {
          path: resolve(c.DRYDOCK_TOKENS_FILE),
          initial: parseTokens(
            "DRYDOCK_TOKENS_FILE",
            readSecretFile("DRYDOCK_TOKENS_FILE", resolve(c.DRYDOCK_TOKENS_FILE)),
          ),
        };
  return {
    dataDir: resolve(c.DRYDOCK_DATA_DIR),
    host: c.HOST,
    port: c.PORT,
    ...(c.DRYDOCK_TOKEN ? { token: c.DRYDOCK_TOKEN } : {}),
    ...(c.BOAT_API_URL && c.BOAT_API_TOKEN
      ? { provider: { apiUrl: c.BOAT_API_URL, token: c.BOAT_API_TOKEN } }
      : {}),
    ...(c.BOAT_API_IDENTITY ? { providerIdentity: c.BOAT_API_IDENTITY } : {}),
    logLevel: c.LOG_LEVEL,
    maxFileBytes: c.DRYDOCK_MAX_FILE_BYTES,
    ...(tokens ? { tokens } : {}),
    ...(tokensFile ? { tokensFile } : {}),
    ...(c.DRYDOCK_METRICS_TOKEN ? { metricsToken: c.DRYDOCK_METRICS_TOKEN } : {}),
    shutdownTimeoutMs: c.DRYDOCK_SHUTDOWN_TIMEOUT_MS,
    nameSweepInlinePages: c.DRYDOCK_NAME_SWEEP_INLINE_PAGES,
    storage: storage.kind,
    ...(storage.url === undefined
      ? {}
      : {
          postgres: {
            url: storage.url,
            ...(c.DRYDOCK_POSTGRES_SCHEMA === undefined ? {} : { schema: c.DRYDOCK_POSTGRES_SCHEMA }),
          },
        }),
    ...(c.DRYDOCK_LEASE_TTL_MS === undefined ? {} : { leaseTtlMs: c.DRYDOCK_LEASE_TTL_MS }),
    ...(c.DRYDOCK_SQLITE_BUSY_TIMEOUT_MS === undefined
      ? {}
      : { sqliteBusyTimeoutMs: c.DRYDOCK_SQLITE_BUSY_TIMEOUT_MS }),
  };
}
