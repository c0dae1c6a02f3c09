import path from "node:path";
import { BOTS_FILE } from "@drydock/facts";
import {
  createInFlightLeftMs,
  type NeedsPersonItem,
  type NeedsPersonTallied,
  type RestoreReportItem,
} from "@drydock/recovery-controller";
import type { CreateRow } from "../commands/creates.js";
import type { DeletionRow } from "../commands/deletions.js";
import type { LockRow } from "../commands/locks.js";
import type { CommandContext } from "../context.js";

/** One line of `drydock status`: what it is about, whether a person must act, and the command to act on it. */
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

/** What a finding counts towards the verdict (the report's `tallyNeedsPerson`). */
export function tallied(finding: Finding): NeedsPersonTallied {
  return {
    attention: finding.attention,
    lookAgain: finding.waitMs !== undefined || finding.inProgress === true,
    waitMs: finding.waitMs ?? 0,
    command: finding.command,
  };
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** A restore of the report, in words (the report decided its attention and its command). */
function restoreMessage(restore: RestoreReportItem): string {
  if (restore.problem) return restore.problem;
  if (restore.retainedByLiveOwner) {
    // Failed in a process that runs on (a bot server) and keeps the lock: it will not settle it, and no
    // recovery may take its lock over while it lives.
    return `failed in process ${restore.retainedByLiveOwner.pid}, which is still running and keeps the workspace lock for recovery (${restore.phase}): it will not settle this restore itself. Stop or restart that process (a bot server keeps the lock on disk when it stops), then run the command shown`;
  }
  if (restore.stalledForMs !== null) {
    return `running (${restore.phase}), but its saga has not moved for ${Math.round(restore.stalledForMs / 60_000)} min: the process that holds its workspace lock may be stuck, or may have failed without being able to journal it. Check that process; if it is stuck, stop or restart it, then run the command shown (a very large restore may just be slow)`;
  }
  if (restore.ownerAlive) return `running (${restore.phase})`;
  return `stopped at ${restore.phase} (base ${restore.basePhase ?? "-"})${restore.next ? `: ${restore.next} it` : ": inspect it"}`;
}

/** One item of the shared "needs a person" report as a status line. */
export function reportFinding(ctx: CommandContext, item: NeedsPersonItem): Finding {
  const { attention, command } = item;
  switch (item.kind) {
    case "restore":
      // A restore that could not be read for a reason that does not settle by itself needs a person (its
      // message says what to do); work in progress does not: a saga another process is writing just now,
      // one settled since the listing, an unpublished directory the next look removes, a running restore.
      return {
        area: "restore",
        attention,
        ...(item.lookAgain ? { inProgress: true as const } : {}),
        subject: item.restore.operationId,
        message: restoreMessage(item.restore),
        command,
      };
    case "restores_unlisted":
      return {
        area: "restore",
        attention,
        subject: `bot ${item.gap.botId}`,
        message: item.gap.message,
        command,
      };
    case "registry_unreadable":
      return {
        area: "boat",
        attention,
        subject: "bot registry",
        message: `The bot registry could not be read (${item.error}), so whether the bots of recorded Boats still exist was not checked, and nothing is offered for adoption.`,
        command,
        advice: `Make ${path.join(ctx.dataDir, BOTS_FILE)} readable (repair it from a backup after checking boat.dev, or upgrade this drydock if it is in a newer format), then run status again.`,
      };
    case "plan_failed":
      return { area: "boat", attention, subject: "boats", message: messageOf(item.error), command };
    case "boat":
      return {
        area:
          item.item.kind === "deletion_fence"
            ? "deletion"
            : item.item.kind.startsWith("create")
              ? "create"
              : "boat",
        attention,
        subject: item.item.boxId ?? item.item.botId ?? item.item.kind,
        message: item.item.summary,
        command,
        ...(command === null || ctx.providerNote === null ? {} : { note: ctx.providerNote }),
        advice: item.item.action.advice,
        ...(item.waitMs > 0 ? { waitMs: item.waitMs } : {}),
      };
  }
}

/**
 * An unresolved create of the journal, when there is no Boat plan (no boat.dev): the plan's rule without
 * boat.dev, where a create started moments ago may still be in a server's call.
 */
export function createFinding(ctx: CommandContext, row: CreateRow): Finding {
  const inFlightLeftMs =
    row.boxId === null && !row.expired ? createInFlightLeftMs(Date.parse(row.createdAt), ctx.now()) : 0;
  return {
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
    ...(ctx.providerNote === null ? {} : { note: ctx.providerNote }),
  };
}

/** A deletion fence of the journal, when there is no Boat plan (no boat.dev). */
export function deletionFinding(ctx: CommandContext, row: DeletionRow): Finding {
  return {
    area: "deletion",
    // As the plan: boat.dev is working on an accepted one, and a prepared one's DELETE may be on the wire.
    attention: row.phase !== "accepted" && row.inFlightLeftMs === 0,
    ...(row.inFlightLeftMs > 0 ? { waitMs: row.inFlightLeftMs } : {}),
    subject: row.boxId,
    message: `deletion fence ${row.phase}${row.status ? `/${row.status}` : ""} (${row.name})`,
    // Which of `deletions reconcile|retry` applies depends on boat.dev: the plan decides and prints it.
    command: `${ctx.boatCommandPrefix} reconcile`,
    ...(ctx.providerNote === null ? {} : { note: ctx.providerNote }),
  };
}

/** A journal that could not be read: a person must look. */
export function journalFinding(subject: "create journal" | "delete journal", error: unknown): Finding {
  return { area: "journal", attention: true, subject, message: messageOf(error), command: null };
}

/** A lock file worth a line: one that could not be read (a person), or a dead edit's lock (informational). */
export function lockFinding(ctx: CommandContext, lock: LockRow): Finding | null {
  if (lock.problem) {
    return { area: "lock", attention: true, subject: lock.path, message: lock.problem, command: null };
  }
  if (lock.purpose === "workspace-edit" && lock.alive === false && lock.note) {
    // Guards nothing and goes by itself (next write, server start); informational, with the command.
    return {
      area: "lock",
      attention: false,
      subject: lock.path,
      message: `${lock.note} (${lock.transactionId})`,
      command: `${ctx.commandPrefix} locks gc --yes`,
    };
  }
  return null;
}
