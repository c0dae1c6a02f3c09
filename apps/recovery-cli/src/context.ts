import { readFileSync } from "node:fs";
import path from "node:path";
import { type BoatClient, createBoatClient } from "@drydock/boat-provider";
import { drydockCommandPrefix } from "@drydock/recovery-controller";
import { CliError } from "./errors.js";
import type { CliIo } from "./io.js";
import type { MainOptions } from "./program.js";
import { type Colors, colors } from "./render.js";

export interface GlobalOptions {
  dataDir?: string;
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
  /** `<dataDir>/environment-id`; throws ENVIRONMENT_ID_MISSING when the server never wrote it. */
  environmentId(): string;
  /** `drydock --data-dir <abs>`: the start of every command line the CLI prints for pasting. */
  commandPrefix: string;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function createContext(globals: GlobalOptions, options: MainOptions): CommandContext {
  const { io, env } = options;
  const cwd = options.cwd ?? process.cwd();
  const dataDir = path.resolve(cwd, globals.dataDir ?? env.DRYDOCK_DATA_DIR ?? ".drydock");
  const providerUrl = globals.providerUrl ?? env.BOAT_API_URL;
  const providerToken = globals.providerToken ?? env.BOAT_API_TOKEN;
  const colorOn = io.stdoutIsTTY && globals.color !== false && !env.NO_COLOR && !globals.json;
  let client: BoatClient | null = null;
  return {
    dataDir,
    io,
    json: globals.json === true,
    yes: globals.yes === true,
    tty: io.stdoutIsTTY && !globals.json,
    c: colors(colorOn),
    now: options.now ?? Date.now,
    options: globals,
    providerConfigured: Boolean(providerUrl && providerToken),
    client() {
      if (!providerUrl || !providerToken) {
        throw new CliError(
          "PROVIDER_NOT_CONFIGURED",
          "This command talks to boat.dev: pass --provider-url and --provider-token (or set BOAT_API_URL and BOAT_API_TOKEN).",
        );
      }
      client ??= createBoatClient({
        baseUrl: providerUrl,
        token: providerToken,
        ...(options.fetch ? { fetch: options.fetch } : {}),
        timeoutMs: 5_000,
      });
      return client;
    },
    environmentId() {
      const file = path.join(dataDir, "environment-id");
      let text: string;
      try {
        text = readFileSync(file, "utf8").trim();
      } catch (error) {
        throw new CliError(
          "ENVIRONMENT_ID_MISSING",
          `${file} is missing or unreadable, so this installation's Boat names cannot be computed. ` +
            "Start drydock-server once with this data directory (it writes the file), or pass the right --data-dir.",
          error,
        );
      }
      if (!UUID.test(text)) {
        throw new CliError(
          "ENVIRONMENT_ID_MISSING",
          `${file} does not hold a UUID, so this installation's Boat names cannot be computed. Restore the file from a backup; do not invent a new id (Boats are named after it).`,
        );
      }
      return text;
    },
    commandPrefix: drydockCommandPrefix(dataDir),
  };
}
