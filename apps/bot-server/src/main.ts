#!/usr/bin/env node
/**
 * `drydock-server` / `pnpm start`: reads the environment once, validates it, starts the server, and shuts
 * down gracefully on SIGTERM/SIGINT (stop accepting, finish in-flight requests, close the simulator), within
 * DRYDOCK_SHUTDOWN_TIMEOUT_MS; a second signal exits at once (see shutdown.ts).
 */
import { ConfigError, loadConfig } from "./config.js";
import { DataDirError } from "./data-dir.js";
import { startServer } from "./server.js";
import { exitOnSignals } from "./shutdown.js";

async function main(): Promise<void> {
  let config: ReturnType<typeof loadConfig>;
  try {
    config = loadConfig(process.env);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`drydock-server: ${error.message}\n`);
      process.exit(2);
    }
    throw error;
  }
  let server: Awaited<ReturnType<typeof startServer>>;
  try {
    server = await startServer(config);
  } catch (error) {
    const message = error instanceof DataDirError || error instanceof Error ? error.message : String(error);
    process.stderr.write(`drydock-server: could not start: ${message}\n`);
    process.exit(1);
  }
  exitOnSignals(() => server.close(), { timeoutMs: config.shutdownTimeoutMs ?? 10_000 });
}

await main();
