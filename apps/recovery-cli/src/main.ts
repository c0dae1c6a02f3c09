#!/usr/bin/env node
// The `drydock` binary: the process's streams and environment go in, an exit code comes out. Everything
// else lives in main() so tests run the same code with buffers.
import { createInterface } from "node:readline/promises";
import { main } from "./program.js";

const token = process.env.BOAT_API_TOKEN;
const argvToken = (() => {
  const index = process.argv.indexOf("--provider-token");
  return index >= 0 ? process.argv[index + 1] : undefined;
})();
const secrets = [token, argvToken].filter(
  (value): value is string => typeof value === "string" && value.length >= 8,
);

/** Belt and braces: the bearer token is never echoed, even inside an error message from a dependency. */
function redact(text: string): string {
  let out = text;
  for (const secret of secrets) out = out.split(secret).join("[redacted]");
  return out;
}

const exitCode = await main(process.argv.slice(2), {
  io: {
    stdout: { write: (chunk: string) => process.stdout.write(redact(chunk)) },
    stderr: { write: (chunk: string) => process.stderr.write(redact(chunk)) },
    stdoutIsTTY: process.stdout.isTTY === true,
    stderrIsTTY: process.stderr.isTTY === true,
    stdinIsTTY: process.stdin.isTTY === true,
    // Asked only after a preview on a terminal (program.ts `mayAsk`); stdin is not touched otherwise, so a
    // pipe or a cron job never waits for an answer.
    async prompt(question: string) {
      const lines = createInterface({ input: process.stdin, output: process.stdout });
      try {
        // End of input (Ctrl-D) and Ctrl-C answer "no": the question never hangs and never means yes.
        return await new Promise<string>((resolve) => {
          lines.once("close", () => resolve(""));
          lines.once("SIGINT", () => {
            process.stdout.write("\n");
            resolve("");
          });
          lines.question(question).then(resolve, () => resolve(""));
        });
      } finally {
        lines.close();
      }
    },
  },
  env: process.env,
});
process.exitCode = exitCode;
