import path from "node:path";
import {
  createInFlightLeftMs,
  type PlanItem,
  planItemNeedsAttention,
  planItemWaitMs,
} from "@drydock/recovery-controller";
import { boundToEmbedded, type CommandContext } from "../context.js";
import { CliError, EXIT_CODES } from "../errors.js";
import type { Rendered } from "../render.js";
import { boatRecovery } from "./boats.js";
import { collectCreates } from "./creates.js";
import { collectDeletions } from "./deletions.js";
import { collectLocks } from "./locks.js";
import { collectRestores } from "./restores.js";

export interface Finding {
  area: "restore" | "create" | "deletion" | "boat" | "lock" | "journal" | "provider";
  /** true: a person must act; false: informational (work in progress). */
  attention: boolean;
  subject: string;
  message: string;
  /** The command that acts on it, or null. */
  command: string | null;
  /** What to do about it in words (a Boat plan item's advice); shown under it when it has no command. */
  advice?: string;
  /** Work in progress that asks for a wait: how long (ms) before looking again offers its command. */
  waitMs?: number;
  /**
   * Work in progress with no known wait (a restore whose process still runs, a saga another process is
   * writing just now): the verdict says to run status again, as for `waitMs`.
   */
  inProgress?: true;
  /**
   * What the command needs besides its words (boat.dev's URL and token, which are never printed), shown
   * after it as a shell comment so the whole line still pastes.
   */
  note?: string;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * Everything that needs attention, one line each with the command to act on it, and a one-line verdict.
 * Exit 0 even when attention is needed (the verdict says so); non-zero only when it could not look (the
 * data directory is missing, or boat.dev was not configured, or could not be reached: INCOMPLETE, exit 6).
 */
export async function status(ctx: CommandContext): Promise<Rendered> {
  // A missing data directory (exit 3) is refused by createContext, for every command alike.
  const boatNote = ctx.providerNote === null ? {} : { note: ctx.providerNote };
  const findings: Finding[] = [];
  let providerChecked = false;
  let couldNotLook: string | null = null;

  const restoreReport = await collectRestores(ctx);
  for (const item of restoreReport.restores) {
    if (item.problem) {
      findings.push({
        area: "restore",
        // True for every restore that could not be read for a reason that does not settle by itself (its
        // message says what to do); false for work in progress: a saga another process is writing just now,
        // one settled since the listing, an unpublished directory the next look removes.
        attention: item.attention,
        ...(item.inProgress ? { inProgress: true as const } : {}),
        subject: item.operationId,
        message: item.problem,
        command: null,
      });
    } else if (item.retainedByLiveOwner) {
      // Failed in a process that runs on (a bot server) and keeps the lock: it will not settle it, and no
      // recovery may take its lock over while it lives.
      findings.push({
        area: "restore",
        attention: true,
        subject: item.operationId,
        message: `failed in process ${item.retainedByLiveOwner.pid}, which is still running and keeps the workspace lock for recovery (${item.phase}): it will not settle this restore itself. Stop or restart that process (a bot server keeps the lock on disk when it stops), then run the command shown`,
        command: `${ctx.commandPrefix} restores show ${item.operationId}`,
      });
    } else if (item.stalledForMs !== null) {
      findings.push({
        area: "restore",
        attention: true,
        subject: item.operationId,
        message: `running (${item.phase}), but its saga has not moved for ${Math.round(item.stalledForMs / 60_000)} min: the process that holds its workspace lock may be stuck, or may have failed without being able to journal it. Check that process; if it is stuck, stop or restart it, then run the command shown (a very large restore may just be slow)`,
        command: `${ctx.commandPrefix} restores show ${item.operationId}`,
      });
    } else if (item.ownerAlive) {
      findings.push({
        area: "restore",
        attention: false,
        inProgress: true,
        subject: item.operationId,
        message: `running (${item.phase})`,
        command: null,
      });
    } else {
      findings.push({
        area: "restore",
        attention: true,
        subject: item.operationId,
        message: `stopped at ${item.phase} (base ${item.basePhase ?? "-"})${item.next ? `: ${item.next} it` : ": inspect it"}`,
        command: item.command ?? `${ctx.commandPrefix} restores show ${item.operationId}`,
      });
    }
  }
  // A workspace whose restores could not be listed (or only in part) is a finding of its own, naming the bot.
  for (const gap of restoreReport.gaps) {
    findings.push({
      area: "restore",
      attention: true,
      subject: `bot ${gap.botId}`,
      message: gap.message,
      command: null,
    });
  }

  let planItems: PlanItem[] | null = null;
  if (ctx.providerConfigured) {
    try {
      const plan = await boatRecovery(ctx).plan();
      providerChecked = plan.providerListed && plan.unreadBoats.length === 0;
      // A Boat the journals know whose own read failed is unverified, like a list that failed: never OK.
      const notRead = plan.unreadBoats.map(
        (boat) =>
          `boat.dev could not read Boat ${boat.boxId}${boat.botId === null ? "" : ` (bot ${boat.botId})`}: ${boat.reason}`,
      );
      const missed = [
        ...(plan.providerListed ? [] : [`boat.dev could not be listed: ${plan.providerError}`]),
        ...notRead,
      ];
      if (missed.length > 0) couldNotLook = missed.join("; ");
      planItems = plan.items;
      if (plan.registryError !== undefined) {
        // Whether recorded Boats' bots still exist was not checked: a billed Boat of a deleted bot hides here.
        findings.push({
          area: "boat",
          attention: true,
          subject: "bot registry",
          message: `The bot registry could not be read (${plan.registryError}), so whether the bots of recorded Boats still exist was not checked, and nothing is offered for adoption.`,
          command: null,
          advice: `Make ${path.join(ctx.dataDir, "bots.json")} readable (repair it from a backup after checking boat.dev, or upgrade this drydock if it is in a newer format), then run status again.`,
        });
      }
    } catch (error) {
      if (error instanceof CliError && error.code !== "ENVIRONMENT_ID_MISSING") throw error;
      findings.push({
        area: "boat",
        attention: true,
        subject: "boats",
        message: messageOf(error),
        command: null,
      });
    }
  }
  if (planItems !== null) {
    for (const item of planItems) {
      const waitMs = planItemWaitMs(item);
      findings.push({
        area:
          item.kind === "deletion_fence" ? "deletion" : item.kind.startsWith("create") ? "create" : "boat",
        attention: planItemNeedsAttention(item),
        subject: item.boxId ?? item.botId ?? item.kind,
        message: item.summary,
        command: item.action.command,
        ...(item.action.command === null ? {} : boatNote),
        advice: item.action.advice,
        ...(waitMs > 0 ? { waitMs } : {}),
      });
    }
  } else {
    try {
      const { rows } = await collectCreates(ctx);
      for (const row of rows.filter((candidate) => !candidate.resolved)) {
        // The plan's rule without boat.dev: a create started moments ago may still be in a server's call.
        const inFlightLeftMs =
          row.boxId === null && !row.expired ? createInFlightLeftMs(Date.parse(row.createdAt), ctx.now()) : 0;
        findings.push({
          area: "create",
          attention: inFlightLeftMs === 0,
          ...(inFlightLeftMs > 0 ? { waitMs: inFlightLeftMs } : {}),
          subject: row.botId,
          message: row.expired
            ? "create request without a recorded Boat whose key is no longer sent (its last hour of boat.dev's 24-hour window, or past it): creation is paused for this bot"
            : row.boxId
              ? `Boat ${row.boxId} remembered but not resolved`
              : inFlightLeftMs > 0
                ? "create request started moments ago: a provisioning call may still be running"
                : "create request whose answer was never recorded, and nothing retries it by itself: unless a provisioning call for this bot runs right now, retry provisioning (POST the bot's computer again; it reuses the key)",
          // The plan (which needs boat.dev) prints the fenced command; the provider is never printed here.
          command: `${ctx.boatCommandPrefix} reconcile`,
          ...boatNote,
        });
      }
    } catch (error) {
      findings.push({
        area: "journal",
        attention: true,
        subject: "create journal",
        message: messageOf(error),
        command: null,
      });
    }
    try {
      for (const row of await collectDeletions(ctx)) {
        findings.push({
          area: "deletion",
          // As the plan: boat.dev is working on an accepted one, and a prepared one's DELETE may be on the wire.
          attention: row.phase !== "accepted" && row.inFlightLeftMs === 0,
          ...(row.inFlightLeftMs > 0 ? { waitMs: row.inFlightLeftMs } : {}),
          subject: row.boxId,
          message: `deletion fence ${row.phase}${row.status ? `/${row.status}` : ""} (${row.name})`,
          // Which of `deletions reconcile|retry` applies depends on boat.dev: the plan decides and prints it.
          command: `${ctx.boatCommandPrefix} reconcile`,
          ...boatNote,
        });
      }
    } catch (error) {
      findings.push({
        area: "journal",
        attention: true,
        subject: "delete journal",
        message: messageOf(error),
        command: null,
      });
    }
  }

  for (const lock of collectLocks(ctx)) {
    if (lock.problem) {
      findings.push({
        area: "lock",
        attention: true,
        subject: lock.path,
        message: lock.problem,
        command: null,
      });
    } else if (lock.purpose === "workspace-edit" && lock.alive === false && lock.note) {
      // Guards nothing and goes by itself (next write, server start); informational, with the command.
      findings.push({
        area: "lock",
        attention: false,
        subject: lock.path,
        message: `${lock.note} (${lock.transactionId})`,
        command: `${ctx.commandPrefix} locks gc --yes`,
      });
    }
  }

  const attention = findings.filter((finding) => finding.attention).length;
  const commandless = findings.filter((finding) => finding.attention && finding.command === null).length;
  const todo =
    commandless === 0
      ? "run the command shown beside each"
      : commandless === attention
        ? "none has a command to run: read each message and settle it by hand"
        : `run the command shown beside each; ${commandless} without one need a look by hand (read the message)`;
  // Work in progress that only asks for a wait (a deletion whose DELETE may still be on the wire, a restore
  // whose process still runs): no person settles it; looking again once the wait is over shows how it ended.
  // Never a plain "OK: nothing needs attention" while one is listed.
  const waiting = findings.filter((finding) => finding.waitMs !== undefined || finding.inProgress);
  const waitS = Math.ceil(Math.max(0, ...waiting.map((finding) => finding.waitMs ?? 0)) / 1_000);
  const again =
    waiting.length === 0
      ? ""
      : `${waiting.length} item(s) are still in progress; run \`${ctx.boatCommandPrefix} status\` again ${waitS > 0 ? `in ${waitS} s` : "shortly"}${ctx.providerNote === null ? "" : ` (${ctx.providerNote})`}`;
  let verdict: string;
  if (couldNotLook) verdict = `INCOMPLETE: ${couldNotLook}; ${attention} item(s) need attention locally.`;
  else if (attention === 0)
    verdict = again ? `OK: nothing needs a person now; ${again}.` : "OK: nothing needs attention.";
  else verdict = `ATTENTION: ${attention} item(s) need a person; ${todo}.${again ? ` ${again}.` : ""}`;
  // Never "OK" without boat.dev: a Boat no journal knows (still billed) shows only in its list. So the
  // verdict says what was not checked and how to check it, and the exit is 6 (INCOMPLETE) as for a
  // provider that could not be reached. A data directory bound to the embedded simulator (or holding its
  // state file) needs its server started, not a URL.
  const unchecked = !ctx.providerConfigured && !couldNotLook;
  if (unchecked) {
    const how = boundToEmbedded(ctx.dataDir)
      ? "this data directory uses the bot server's embedded simulator, which runs only with its server: start the bot server on it (drydock then finds the simulator by itself) and run status again"
      : "set BOAT_API_URL and BOAT_API_TOKEN (or pass --provider-url and --provider-token) and run status again";
    verdict =
      attention === 0
        ? `INCOMPLETE: nothing needs a person in the journals, restores and locks, but boat.dev was not checked: ${how}.${again ? ` ${again}.` : ""}`
        : `${verdict} INCOMPLETE: boat.dev was not checked: ${how}.`;
  }

  const { c } = ctx;
  const lines = findings.map((finding) => {
    const mark = finding.attention ? c.yellow("!") : c.dim("·");
    const next = finding.command
      ? `\n    → ${finding.command}${finding.note ? `  # ${finding.note}` : ""}`
      : finding.advice
        ? `\n    ${finding.advice}`
        : "";
    return `${mark} ${finding.area} ${finding.subject}: ${finding.message}${next}`;
  });
  const colored =
    couldNotLook || (unchecked && attention === 0)
      ? c.red(verdict)
      : attention === 0
        ? c.green(verdict)
        : c.yellow(verdict);
  return {
    data: { findings, attention, providerChecked, verdict },
    human: `${lines.length > 0 ? `${lines.join("\n")}\n` : ""}${colored}\n`,
    exitCode: couldNotLook || unchecked ? EXIT_CODES.PROVIDER_UNAVAILABLE : EXIT_CODES.OK,
  };
}
