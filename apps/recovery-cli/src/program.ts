import { Command, CommanderError } from "commander";
// Inlined by the bundlers (tsup; the tests' esbuild bundle): the built command needs no package.json beside it.
import manifest from "../package.json" with { type: "json" };
import { type PlainRunner, type Runner, registerCommands } from "./command-table.js";
import { createContext, type GlobalOptions, type MainOptions } from "./context.js";
import { CliError, classifyError, EXIT_CODES, type ExitCode } from "./errors.js";
import type { CliIo } from "./io.js";
import { JSON_SCHEMA_VERSION } from "./json-schemas.js";
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
  registerCommands(program, runner(run, options), plainRunner(run));
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

/**
 * The whole command tree, with actions that do nothing: for walking it (completion, help and schema
 * tests). `main` builds its own, with the runners.
 */
export function commandTree(): Command {
  const quiet: CliIo = { stdout: { write: () => true }, stderr: { write: () => true }, stdoutIsTTY: false };
  const program = createProgram(quiet);
  registerCommands(
    program,
    () => async () => {},
    () => () => {},
  );
  return program;
}

/** The `drydock` program with its global options; commands are added by `registerCommands`. */
function createProgram(io: CliIo): Command {
  return (
    new Command("drydock")
      .description("drydock operator tool: inspect and repair recovery state. Read-only unless --yes.")
      .version(manifest.version)
      .option("--data-dir <dir>", "drydock data directory (env DRYDOCK_DATA_DIR, default ./.drydock)")
      .option(
        "--storage <backend>",
        "storage backend: file, sqlite or postgres://… (env DRYDOCK_STORAGE or DRYDOCK_STORAGE_FILE; default: the one the data directory is bound to; postgres needs its URL each time)",
      )
      .option("--provider-url <url>", "boat.dev API base, e.g. https://boat.dev/api/v1 (env BOAT_API_URL)")
      .option("--provider-token <token>", "boat.dev API token (env BOAT_API_TOKEN)")
      .option("--json", "print one JSON document on stdout", false)
      .option("--yes", "apply the change (without it: print the preview and change nothing)", false)
      .option("--no-color", "no colour (also NO_COLOR)")
      .option("--no-input", "never ask `apply? [y/N]` on a terminal (also when CI is set)")
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
        const preview = await handler(ctx, ...positional);
        // The preview's storage is released before a person is asked (a database is never held open while
        // someone reads); the apply opens its own.
        await ctx.close();
        run.outcome =
          preview.confirm !== undefined && mayAsk(globals, options)
            ? await confirmed(preview, preview.confirm.command, globals, options, async (fenced) => {
                const applying = createContext(fenced, options);
                try {
                  return await handler(applying, ...positional);
                } finally {
                  await applying.close();
                }
              })
            : preview;
      } catch (error) {
        run.failure = error;
      } finally {
        await ctx.close();
      }
    };
}

/** A command that needs no data directory: its rendering is the outcome, like any other. */
function plainRunner(run: Run): PlainRunner {
  return (handler) =>
    (...commanderArgs) => {
      const command = commanderArgs[commanderArgs.length - 1] as Command;
      run.globals = command.optsWithGlobals() as GlobalOptions;
      const positional = commanderArgs
        .slice(0, -2)
        .filter((value): value is string => typeof value === "string");
      try {
        run.outcome = handler(...positional);
      } catch (error) {
        run.failure = error;
      }
    };
}

/**
 * Whether a preview may ask `apply? [y/N]`: a person at a terminal (stdin and stdout TTYs, a prompt to
 * read with), no --yes (that is the pasted form), no --json (a document for a program), no --no-input and
 * no CI. Anywhere else the preview prints its paste-back command and exits 0, exactly as before.
 */
function mayAsk(globals: GlobalOptions, options: MainOptions): boolean {
  const { io, env } = options;
  return (
    io.prompt !== undefined &&
    io.stdinIsTTY === true &&
    io.stdoutIsTTY &&
    globals.json !== true &&
    globals.yes !== true &&
    globals.input !== false &&
    !env.CI
  );
}

/** The fence flags a paste-back command carries, and the option each sets. */
const FENCE_FLAGS = {
  "--expected-seq": "expectedSeq",
  "--expected-hash": "expectedHash",
  "--expected-owner-digest": "expectedOwnerDigest",
  "--expected-state": "expectedState",
  "--older-than-days": "olderThanDays",
} as const satisfies Record<string, keyof GlobalOptions>;

/**
 * The options of the printed paste-back command: its fences, read from the very line the person saw, and
 * --yes. Applying with them runs the same command function the pasted line would run, which checks these
 * fences against the state as it is then: a state that moved after the preview is refused exactly as a
 * stale paste is (exit 4), never applied against what was read afresh.
 */
export function fencedOptions(globals: GlobalOptions, command: string): GlobalOptions {
  const words = command.split(/\s+/);
  const fenced: GlobalOptions = { ...globals, yes: true };
  for (const [flag, key] of Object.entries(FENCE_FLAGS)) {
    const at = words.indexOf(flag);
    const value = at >= 0 ? words[at + 1] : undefined;
    if (value !== undefined) fenced[key] = value;
  }
  return fenced;
}

/**
 * Prints the preview, asks `apply? [y/N]` and, on `y`, runs `apply` with the preview's own fences
 * (`fencedOptions`). Any other answer changes nothing and exits 0.
 */
async function confirmed(
  preview: Rendered,
  command: string,
  globals: GlobalOptions,
  options: MainOptions,
  apply: (fenced: GlobalOptions) => Promise<Rendered>,
): Promise<Rendered> {
  const { io } = options;
  io.stdout.write(preview.human);
  const answer = await io.prompt!("apply? [y/N] ");
  if (/^y(es)?$/i.test(answer.trim())) {
    return apply(fencedOptions(globals, command));
  }
  return {
    data: { ...(preview.data as Record<string, unknown>), confirmed: false },
    human: "Not applied; nothing was changed.\n",
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
  // Every document carries its shape's version (json-schemas.ts): fields are only added within a version.
  if (json) {
    const document = { schemaVersion: JSON_SCHEMA_VERSION, ...(run.outcome.data as Record<string, unknown>) };
    io.stdout.write(`${JSON.stringify(document, null, 2)}\n`);
  } else io.stdout.write(run.outcome.human);
  return run.outcome.exitCode ?? EXIT_CODES.OK;
}

function messageOf(error: unknown): string {
  if (error instanceof Error) return error.message;
  return "drydock failed with a non-error value";
}
