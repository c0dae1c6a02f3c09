#!/usr/bin/env node
/**
 * `drydock-server` / `pnpm start`: reads the environment once, validates it, starts the server, and shuts
 * down gracefully on SIGTERM/SIGINT (stop accepting, finish in-flight requests, close the simulator).
 */
import { ConfigError, loadConfig } from "./config.js";
import { DataDirError } from "./data-dir.js";
import { startServer } from "./server.js";

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
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    server.app.log.info(`${signal}: shutting down`);
    server.close().then(
      () => process.exit(0),
      (error: unknown) => {
        process.stderr.write(`drydock-server: shutdown failed: ${String(error)}\n`);
        process.exit(1);
      },
    );
  };
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
}

await main();
