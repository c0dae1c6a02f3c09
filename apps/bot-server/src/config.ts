import { resolve } from "node:path";
import { z } from "zod";

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
    LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
    DRYDOCK_MAX_FILE_BYTES: z.coerce
      .number()
      .int()
      .positive()
      .default(8 * 1024 * 1024),
  })
  .refine((env) => !env.BOAT_API_URL || env.BOAT_API_TOKEN, {
    message: "BOAT_API_TOKEN is required when BOAT_API_URL is set",
    path: ["BOAT_API_TOKEN"],
  });

export interface ServerConfig {
  dataDir: string;
  host: string;
  port: number;
  /** Unset: the token is read from (or generated into) <dataDir>/server-token. */
  token?: string;
  /** Unset: the embedded boat.dev simulator is started on a loopback port. */
  provider?: { apiUrl: string; token: string };
  logLevel: string;
  maxFileBytes: number;
}

export class ConfigError extends Error {
  override readonly name = "ConfigError";
}

export function loadConfig(env: NodeJS.ProcessEnv): ServerConfig {
  const known = Object.fromEntries(
    Object.keys(ConfigSchema.shape).map((k) => [k, env[k] === "" ? undefined : env[k]]),
  );
  const parsed = ConfigSchema.safeParse(known);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const variable = issue?.path.join(".") || "environment";
    throw new ConfigError(`invalid configuration: ${variable}: ${issue?.message ?? "invalid"}`);
  }
  const c = parsed.data;
  return {
    dataDir: resolve(c.DRYDOCK_DATA_DIR),
    host: c.HOST,
    port: c.PORT,
    ...(c.DRYDOCK_TOKEN ? { token: c.DRYDOCK_TOKEN } : {}),
    ...(c.BOAT_API_URL && c.BOAT_API_TOKEN
      ? { provider: { apiUrl: c.BOAT_API_URL, token: c.BOAT_API_TOKEN } }
      : {}),
    logLevel: c.LOG_LEVEL,
    maxFileBytes: c.DRYDOCK_MAX_FILE_BYTES,
  };
}
