import type { Command } from "commander";
import { Argument, Option } from "commander";
import { COMPLETION_SHELLS, type CompletionShell, completion } from "./commands/completion.js";
import { createsAdopt, createsList, createsRetire } from "./commands/creates.js";
import { deletionsList, deletionsReconcile, deletionsRetry } from "./commands/deletions.js";
import { instancesDeclareDead, instancesList } from "./commands/instances.js";
import { locksGc, locksList } from "./commands/locks.js";
import { reconcilePlan } from "./commands/reconcile.js";
import { restoresAction, restoresList, restoresPurge, restoresShow } from "./commands/restores.js";
import { status } from "./commands/status.js";
import { storageMigrate } from "./commands/storage.js";
import type { CommandContext } from "./context.js";
import { addExamples } from "./help.js";
import type { Rendered } from "./render.js";
import { PAGE_LIMIT_DEFAULT, PAGE_LIMIT_MAX } from "./shared/pages.js";

/** A command as the table calls it: the context, then its positional arguments. */
export type Handler = (ctx: CommandContext, ...args: string[]) => Promise<Rendered>;

/** Wraps a handler as commander's action (`main` builds it: it makes the context and keeps the outcome). */
export type Runner = (handler: Handler) => (...commanderArgs: unknown[]) => Promise<void>;

/** A command that needs no data directory (`completion`): its arguments in, its rendering out. */
export type PlainRunner = (handler: (...args: string[]) => Rendered) => (...commanderArgs: unknown[]) => void;

/** Every command line `drydock` knows, each calling its command function through `run` (in help's order). */
export function registerCommands(program: Command, run: Runner, plain: PlainRunner): void {
  program
    .command("status")
    .description("what needs attention, one line each, and the command to act on it")
    .option(
      "--fail-on-attention",
      "monitoring: exit 7 when anything needs a person (6 when incomplete, 0 when OK)",
      false,
    )
    .action(run((ctx) => status(ctx)));
  registerBoatCommands(program, run);
  registerRestoreCommands(program, run);
  program
    .command("reconcile")
    .description("plan for all Boats vs the provider; nothing is changed")
    .action(run((ctx) => reconcilePlan(ctx)));
  const locks = program.command("locks").description("lock files under the data directory");
  locks
    .command("list")
    .description("lock files, owners (digest only), liveness")
    .addOption(pageLimitOption())
    .addOption(pageCursorOption())
    .action(run((ctx) => locksList(ctx)));
  locks
    .command("gc")
    .description("remove garbage election records (only with --yes)")
    .action(run((ctx) => locksGc(ctx)));
  program
    .command("storage")
    .description("the data directory's storage backend")
    .command("migrate")
    .description(
      "move the journals, bots and meta (to postgres: and the workspaces) to another backend (offline, verified; only with --yes)",
    )
    .addOption(
      new Option("--to <backend>", "the backend to move to")
        .choices(["file", "sqlite", "postgres"])
        .makeOptionMandatory(),
    )
    .option("--expected-state <digest>", "the state digest printed by the preview")
    .action(run((ctx) => storageMigrate(ctx, (ctx.options as { to?: string }).to)));
  const instances = program
    .command("instances")
    .description("bot-server instances and their leases (postgres backend only)");
  instances
    .command("list")
    .description("every instance: id, host, pid, state, lease left by the database's clock, epoch, fence")
    .action(run((ctx) => instancesList(ctx)));
  instances
    .command("declare-dead")
    .description("mark an instance whose lease has passed dead (fenced; only with --yes)")
    .argument("<id>", "the instance id (instances list)")
    .option("--expected-state <digest>", "the instance's fence printed by the preview")
    .action(run((ctx, id) => instancesDeclareDead(ctx, id as string)));
  program
    .command("completion")
    .description("print a shell completion script (bash, zsh or fish), generated from this command table")
    .addArgument(new Argument("<shell>", "the shell").choices(COMPLETION_SHELLS))
    .action(plain((shell) => completion(program, shell as CompletionShell)));
  addExamples(program);
}

/** `--limit N` of a list: its page size. */
function pageLimitOption(): Option {
  return new Option(
    "--limit <n>",
    `rows per page (default ${PAGE_LIMIT_DEFAULT}, at most ${PAGE_LIMIT_MAX}); a "next:" line prints the following page`,
  );
}

/** `--cursor C` of a list: where its page starts (printed by the page before). */
function pageCursorOption(): Option {
  return new Option(
    "--cursor <cursor>",
    "start after this position (from a page's next: line or nextCursor)",
  );
}

/** `creates …` and `deletions …`: the Boat journals, each change fenced by `--expected-state`. */
function registerBoatCommands(program: Command, run: Runner): void {
  const creates = program.command("creates").description("the Boat create journal");
  creates
    .command("list")
    .description("create journal (redacted): bot, boxId, resolved, age vs the 24 h window")
    .addOption(pageLimitOption())
    .addOption(pageCursorOption())
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
    .addOption(pageLimitOption())
    .addOption(pageCursorOption())
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
}

/** `restores …`: the checkpoint restore sagas, each action fenced by the saga's seq, hash and owner. */
function registerRestoreCommands(program: Command, run: Runner): void {
  const restores = program.command("restores").description("checkpoint restore sagas");
  restores
    .command("list")
    .description("active restore sagas and what each needs")
    .addOption(pageLimitOption())
    .addOption(pageCursorOption())
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
}
