#!/usr/bin/env node
/**
 * drydock-boat-sim — runs the boat.dev simulator alone.
 *   drydock-boat-sim [--port N] [--host H] [--state-file PATH] [--list-lag-ms N] [--token T]
 * Prints the URL and the token once on stdout (that is its purpose); runs until SIGINT/SIGTERM.
 */
import { parseArgs } from "node:util";
import { isBoatSimulatorError } from "./errors.js";
import { startBoatSimulator } from "./simulator/server.js";

function integer(name: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d{1,9}$/.test(value)) {
    process.stderr.write(`drydock-boat-sim: --${name} must be a non-negative integer\n`);
    process.exit(2);
  }
  return Number(value);
}

async function main(): Promise<void> {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      options: {
        port: { type: "string" },
        host: { type: "string" },
        "state-file": { type: "string" },
        "list-lag-ms": { type: "string" },
        token: { type: "string" },
        "allow-non-loopback": { type: "boolean" },
        help: { type: "boolean" },
      },
      strict: true,
    }));
  } catch (error) {
    process.stderr.write(`drydock-boat-sim: ${(error as Error).message}\n`);
    process.exit(2);
  }
  if (values.help) {
    process.stdout.write(
      "usage: drydock-boat-sim [--port N] [--host H] [--state-file PATH] [--list-lag-ms N] [--token T] [--allow-non-loopback]\n",
    );
    return;
  }
  const port = integer("port", values.port as string | undefined);
  const listLagMs = integer("list-lag-ms", values["list-lag-ms"] as string | undefined);
  const sim = await startBoatSimulator({
    ...(port === undefined ? {} : { port }),
    ...(typeof values.host === "string" ? { host: values.host } : {}),
    ...(typeof values["state-file"] === "string" ? { stateFile: values["state-file"] } : {}),
    ...(listLagMs === undefined ? {} : { listLagMs }),
    ...(typeof values.token === "string" ? { token: values.token } : {}),
    ...(values["allow-non-loopback"] === true ? { allowNonLoopback: true } : {}),
  });
  process.stdout.write(
    `drydock-boat-sim listening on ${sim.url}\nBOAT_API_URL=${sim.apiUrl}\nBOAT_API_TOKEN=${sim.token}\n`,
  );
  const stop = (): void => {
    sim.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
}

main().catch((error: unknown) => {
  const message = isBoatSimulatorError(error) ? error.message : "unexpected failure";
  process.stderr.write(`drydock-boat-sim: ${message}\n`);
  process.exit(1);
});
