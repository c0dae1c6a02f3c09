import { Command, CommanderError } from "commander";
// Inlined by the bundlers (tsup; the tests' esbuild bundle): the built command needs no package.json beside it.
import manifest from "../package.json" with { type: "json" };
import { type Runner, registerCommands } from "./command-table.js";
import { createContext, type GlobalOptions, type MainOptions } from "./context.js";
import { CliError, classifyError, EXIT_CODES, type ExitCode } from "./errors.js";
import type { CliIo } from "./io.js";
import { type Rendered, renderError } from "./render.js";

export type { MainOptions } from "./context.js";

/** What one command line came to: the command's rendering, or what it threw, and the options it ran with. */
interface Run {
  outcome: Rendered | null;
  failure: unknown;
  globals: GlobalOptions | null;
}

/**
 * Runs one command line and returns its exit code. The only place errors become exit codes; nothing here
 * calls process.exit, so the whole CLI runs inside a test with buffer streams.
 */
export async function main(argv: readonly string[], options: MainOptions): Promise<ExitCode> {
  const { io } = options;
  const run: Run = { outcome: null, failure: null, globals: null };
  const program = createProgram(io);
  registerCommands(program, runner(run, options));
  try {
    await program.parseAsync([...argv], { from: "user" });
  } catch (error) {
    if (error instanceof CommanderError) {
      // --help / --version print and exit 0; anything else commander refuses is a usage error.
      if (error.exitCode === 0) return EXIT_CODES.OK;
      run.failure = new CliError(
        "USAGE",
        error.code === "commander.help"
          ? "A subcommand is required (see the list above)."
          : error.message.replace(/^error: /, ""),
      );
    } else {
      run.failure = error;
    }
  }
  return finish(argv, io, run);
}

/** The `drydock` program with its global options; commands are added by `registerCommands`. */
function createProgram(io: CliIo): Command {
  return (
    new Command("drydock")
      .description("drydock operator tool: inspect and repair recovery state. Read-only unless --yes.")
      .version(manifest.version)
      .option("--data-dir <dir>", "drydock data directory (env DRYDOCK_DATA_DIR, default ./.drydock)")
      .option("--provider-url <url>", "boat.dev API base, e.g. https://boat.dev/api/v1 (env BOAT_API_URL)")
      .option("--provider-token <token>", "boat.dev API token (env BOAT_API_TOKEN)")
      .option("--json", "print one JSON document on stdout", false)
      .option("--yes", "apply the change (without it: print the preview and change nothing)", false)
      .option("--no-color", "no colour (also NO_COLOR)")
      .exitOverride()
      // Every printed command carries the global options after the subcommand (`creates adopt … --data-dir
      // … --yes`): a subcommand's --help lists them too.
      .configureHelp({ showGlobalOptions: true })
      .showHelpAfterError(false)
      .configureOutput({
        writeOut: (text) => io.stdout.write(text),
        writeErr: (text) => io.stderr.write(text),
        // Usage errors are printed once, by the code below, in the requested format.
        outputError: () => {},
      })
  );
}

/** Runs a command with the context of its options, keeping its outcome (or what it threw) in `run`. */
function runner(run: Run, options: MainOptions): Runner {
  return (handler) =>
    async (...commanderArgs) => {
      const command = commanderArgs[commanderArgs.length - 1] as Command;
      const globals = command.optsWithGlobals() as GlobalOptions;
      run.globals = globals;
      const ctx = createContext(globals, options);
      const positional = commanderArgs
        .slice(0, -2)
        .filter((value): value is string => typeof value === "string");
      try {
        run.outcome = await handler(ctx, ...positional);
      } catch (error) {
        run.failure = error;
      }
    };
}

/** Prints what the command line came to (its data, or its error) and returns the exit code. */
function finish(argv: readonly string[], io: CliIo, run: Run): ExitCode {
  const json = run.globals?.json ?? argv.includes("--json");
  if (run.failure !== null) {
    const { exitCode, code } = classifyError(run.failure);
    renderError(io, { code, message: messageOf(run.failure), exitCode, json });
    return exitCode;
  }
  if (run.outcome === null) {
    // A command group without a subcommand (`drydock creates`): commander printed help.
    return argv.length === 0 ? EXIT_CODES.USAGE : EXIT_CODES.OK;
  }
  if (json) io.stdout.write(`${JSON.stringify(run.outcome.data, null, 2)}\n`);
  else io.stdout.write(run.outcome.human);
  return run.outcome.exitCode ?? EXIT_CODES.OK;
}

function messageOf(error: unknown): string {
  if (error instanceof Error) return error.message;
  return "drydock failed with a non-error value";
}
