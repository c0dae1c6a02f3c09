import { Command, CommanderError, Option } from "commander";
// Inlined by the bundlers (tsup; the tests' esbuild bundle): the built command needs no package.json beside it.
import manifest from "../package.json" with { type: "json" };
import { createsAdopt, createsList, createsRetire } from "./commands/creates.js";
import { deletionsList, deletionsReconcile, deletionsRetry } from "./commands/deletions.js";
import { locksGc, locksList } from "./commands/locks.js";
import { reconcilePlan } from "./commands/reconcile.js";
import { restoresAction, restoresList, restoresPurge, restoresShow } from "./commands/restores.js";
import { status } from "./commands/status.js";
import { type CommandContext, createContext, type GlobalOptions } from "./context.js";
import { CliError, classifyError, EXIT_CODES, type ExitCode } from "./errors.js";
import type { CliIo } from "./io.js";
import { type Rendered, renderError } from "./render.js";

export interface MainOptions {
  io: CliIo;
  /** The environment variables the CLI honours (DRYDOCK_DATA_DIR, BOAT_API_URL, BOAT_API_TOKEN, NO_COLOR). */
  env: Readonly<Record<string, string | undefined>>;
  now?: () => number;
  /** Injected for tests: replaces global fetch for the provider client. */
  fetch?: typeof fetch;
  cwd?: string;
}

type Handler = (ctx: CommandContext, ...args: string[]) => Promise<Rendered>;

/**
 * Runs one command line and returns its exit code. The only place errors become exit codes; nothing here
 * calls process.exit, so the whole CLI runs inside a test with buffer streams.
 */
export async function main(argv: readonly string[], options: MainOptions): Promise<ExitCode> {
  const { io } = options;
  let outcome: Rendered | null = null;
  let failure: unknown = null;
  let globals: GlobalOptions | null = null;

  const program = new Command("drydock");
  program
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
    });

  const run =
    (handler: Handler) =>
    async (...commanderArgs: unknown[]): Promise<void> => {
      const command = commanderArgs[commanderArgs.length - 1] as Command;
      globals = command.optsWithGlobals() as GlobalOptions;
      const ctx = createContext(globals, options);
      const positional = commanderArgs
        .slice(0, -2)
        .filter((value): value is string => typeof value === "string");
      try {
        outcome = await handler(ctx, ...positional);
      } catch (error) {
        failure = error;
      }
    };

  program
    .command("status")
    .description("what needs attention, one line each, and the command to act on it")
    .action(run((ctx) => status(ctx)));

  const creates = program.command("creates").description("the Boat create journal");
  creates
    .command("list")
    .description("create journal (redacted): bot, boxId, resolved, age vs the 24 h window")
    .action(run((ctx) => createsList(ctx)));
  creates
    .command("adopt <botId> <boxId>")
    .description("adopt a Boat found by its deterministic name")
    .option("--expected-state <digest>", "the state digest printed by the preview")
    .action(run((ctx, botId, boxId) => createsAdopt(ctx, botId!, boxId!)));
  creates
    .command("retire <botId>")
    .description("retire a create record, only after boat.dev proves no Boat exists for it")
    .option("--expected-state <digest>", "the state digest printed by the preview")
    .action(run((ctx, botId) => createsRetire(ctx, botId!)));

  const deletions = program.command("deletions").description("Boat deletion fences");
  deletions
    .command("list")
    .description("deletion fences by phase")
    .action(run((ctx) => deletionsList(ctx)));
  deletions
    .command("reconcile <boxId>")
    .description("one poll; finishes the fence when boat.dev proves deletion")
    .option("--expected-state <digest>", "the state digest printed by the preview")
    .action(run((ctx, boxId) => deletionsReconcile(ctx, boxId!)));
  deletions
    .command("retry <boxId>")
    .description("re-send DELETE for a blocked or unconfirmed fence")
    .option("--expected-state <digest>", "the state digest printed by the preview")
    .action(run((ctx, boxId) => deletionsRetry(ctx, boxId!)));

  const restores = program.command("restores").description("checkpoint restore sagas");
  restores
    .command("list")
    .description("active restore sagas and what each needs")
    .action(run((ctx) => restoresList(ctx)));
  restores
    .command("show <operationId>")
    .description("saga, events, chain check, live owner, the fence to echo, eligible actions")
    .action(run((ctx, operationId) => restoresShow(ctx, operationId!)));
  for (const action of ["abort", "release", "complete", "rollback"] as const) {
    const sub = restores
      .command(`${action} <operationId>`)
      .description(
        action === "abort"
          ? "abort a restore stopped before its first file change (up to safety_ready)"
          : action === "release"
            ? "release the retained lock of a finished restore and archive it"
            : action === "complete"
              ? "finish a restore that applied every change (workspace_applied) but did not journal completed"
              : "roll a restore stopped mid-mutation back to its safety checkpoint",
      )
      .addOption(new Option("--expected-seq <n>", "the saga seq from `restores show`"))
      .addOption(new Option("--expected-hash <hash>", "the saga head hash from `restores show`"))
      .addOption(new Option("--expected-owner-digest <digest>", "the lock owner digest, or `none`"));
    if (action === "abort") sub.option("--reason <text>", "why (recorded in the saga)");
    sub.action(run((ctx, operationId) => restoresAction(ctx, action, operationId!)));
  }

  restores
    .command("purge")
    .description(
      "delete archived restore sagas finished more than N days ago, keeping a receipt each (only with --yes)",
    )
    .addOption(new Option("--older-than-days <n>", "finished at least this many days ago").default("30"))
    .option("--expected-state <digest>", "the digest of the list printed by the preview")
    .action(run((ctx) => restoresPurge(ctx)));

  program
    .command("reconcile")
    .description("plan for all Boats vs the provider; nothing is changed")
    .action(run((ctx) => reconcilePlan(ctx)));

  const locks = program.command("locks").description("lock files under the data directory");
  locks
    .command("list")
    .description("lock files, owners (digest only), liveness")
    .action(run((ctx) => locksList(ctx)));
  locks
    .command("gc")
    .description("remove garbage election records (only with --yes)")
    .action(run((ctx) => locksGc(ctx)));

  try {
    await program.parseAsync([...argv], { from: "user" });
  } catch (error) {
    if (error instanceof CommanderError) {
      // --help / --version print and exit 0; anything else commander refuses is a usage error.
      if (error.exitCode === 0) return EXIT_CODES.OK;
      failure = new CliError(
        "USAGE",
        error.code === "commander.help"
          ? "A subcommand is required (see the list above)."
          : error.message.replace(/^error: /, ""),
      );
    } else {
      failure = error;
    }
  }

  const json = (globals as GlobalOptions | null)?.json ?? argv.includes("--json");
  if (failure !== null) {
    const { exitCode, code } = classifyError(failure);
    renderError(io, { code, message: messageOf(failure), exitCode, json });
    return exitCode;
  }
  if (outcome === null) {
    // A command group without a subcommand (`drydock creates`): commander printed help.
    return argv.length === 0 ? EXIT_CODES.USAGE : EXIT_CODES.OK;
  }
  const rendered: Rendered = outcome;
  if (json) io.stdout.write(`${JSON.stringify(rendered.data, null, 2)}\n`);
  else io.stdout.write(rendered.human);
  return rendered.exitCode ?? EXIT_CODES.OK;
}

function messageOf(error: unknown): string {
  if (error instanceof Error) return error.message;
  return "drydock failed with a non-error value";
}
