import {
  type BoatPlan,
  drydockCommandPrefix,
  type NeedsPersonItem,
  type NeedsPersonReport,
  type PlanItem,
  type RestoreReportGap,
  type RestoreReportItem,
  reportNeedsPerson,
} from "@drydock/recovery-controller";

export { drydockCommandPrefix } from "@drydock/recovery-controller";

/** One restore `drydock status` reports: the recovery controller's report item (redacted by construction). */
export type RestoreRecoveryItem = RestoreReportItem;

/** Something that could not be read: the answer is incomplete there, and says so. */
export interface Unreadable {
  area: "restores" | "boats" | "bots";
  subject: string;
  message: string;
}

/** A workspace whose restores could not be listed, as `unreadable` names it (the failure itself stays here). */
function restoreGapUnreadable(gap: RestoreReportGap, commandPrefix: string): Unreadable {
  return {
    area: "restores",
    subject: gap.botId,
    message: `${gap.message}; run \`${commandPrefix} restores list\` to inspect them.`,
  };
}

/**
 * Every restore `drydock status` reports (the recovery controller's `reportRestores`: every page of every
 * workspace's pending listing and its diagnostics, each previewed with its fenced command). A workspace
 * whose sagas cannot be listed is reported in `unreadable` instead of failing the whole answer; the
 * failure itself stays in the server (only its message is sent).
 */
export async function collectRestoreRecovery(
  dataDir: string,
  commandPrefix: string,
): Promise<{ restores: RestoreRecoveryItem[]; unreadable: Unreadable[] }> {
  // The shared report without a Boat plan: its restores and the workspaces it could not list.
  const report = await reportNeedsPerson({ dataDir, commandPrefix, plan: null });
  return {
    restores: report.items.flatMap((item) => (item.kind === "restore" ? [item.restore] : [])),
    unreadable: report.items.flatMap((item) =>
      item.kind === "restores_unlisted" ? [restoreGapUnreadable(item.gap, commandPrefix)] : [],
    ),
  };
}

/** GET /v1/recovery's answer but for `ok` and `startup` (the route adds those). */
export interface RecoveryAnswer {
  /** What needs a person: as `drydock status`'s ATTENTION count, plus each unreadable thing and retirement. */
  open: number;
  complete: boolean;
  boats: (PlanItem & { attention: boolean })[];
  restores: RestoreRecoveryItem[];
  retirements: { botId: string; message: string }[];
  unreadable: Unreadable[];
}

/**
 * The same data as `drydock status`, from the one "needs a person" report both render (the recovery
 * controller's `reportNeedsPerson`): the Boat plan and every restore it would list (all pages, and the
 * store's diagnostics: finished-but-unarchived sagas still holding the lock, corrupt or busy ones), each
 * with the fenced command to act on it. What cannot be read is reported in `unreadable` (and
 * `complete: false`) instead of hiding what can: the answer is still 200, like the status command's
 * INCOMPLETE verdict. `open` counts what needs a person, as status's ATTENTION does, and what is unreadable.
 */
export async function recoveryAnswer(deps: {
  dataDir: string;
  /** The recovery controller's Boat plan. */
  plan: () => Promise<BoatPlan>;
  /** Deleted bots whose workspace retirement did not finish (throws when the registry cannot be read). */
  unfinishedRetirements: () => Promise<{ botId: string; message: string }[]>;
  /** Removes the data directory's paths from a message sent to a client. */
  scrubPaths: (message: string) => string;
}): Promise<RecoveryAnswer> {
  const commandPrefix = drydockCommandPrefix(deps.dataDir);
  const report = await reportNeedsPerson({ dataDir: deps.dataDir, commandPrefix, plan: deps.plan });
  const retired = await retirementsOrUnreadable(deps);
  const unreadable = [...reportUnreadable(report, commandPrefix, deps.scrubPaths), ...retired.unreadable];
  const boats = report.items.flatMap((item) =>
    item.kind === "boat" ? [{ ...item.item, attention: item.attention }] : [],
  );
  const restores = report.items.flatMap((item) => (item.kind === "restore" ? [item.restore] : []));
  // The report's own tally (what `drydock status` calls ATTENTION: Boats and restores that need a person,
  // workspaces not listed, the registry or the plan not read), what boat.dev left unchecked (status's
  // INCOMPLETE), and the retirements: each unfinished one, or the registry not read for them.
  const open =
    report.tally.attention + report.unchecked.length + retired.unreadable.length + retired.retirements.length;
  const { retirements } = retired;
  return { open, complete: unreadable.length === 0, boats, restores, retirements, unreadable };
}

/** Deleted bots whose workspace retirement did not finish, or why they could not be looked for. */
async function retirementsOrUnreadable(deps: {
  unfinishedRetirements: () => Promise<{ botId: string; message: string }[]>;
  scrubPaths: (message: string) => string;
}): Promise<{ retirements: { botId: string; message: string }[]; unreadable: Unreadable[] }> {
  try {
    return { retirements: await deps.unfinishedRetirements(), unreadable: [] };
  } catch (error) {
    return {
      retirements: [],
      unreadable: [
        {
          area: "bots",
          subject: "bot registry",
          message: `The bot registry could not be read (${deps.scrubPaths(error instanceof Error ? error.message : String(error))}), so deleted bots whose workspace retirement did not finish were not looked for.`,
        },
      ],
    };
  }
}

/**
 * What the report could not read, in the answer's words: boat.dev unlisted, each Boat not read, the bot
 * registry or the whole plan, then each workspace whose restores could not be listed.
 */
function reportUnreadable(
  report: NeedsPersonReport,
  commandPrefix: string,
  scrubPaths: (message: string) => string,
): Unreadable[] {
  const unreadable: Unreadable[] = [];
  for (const fact of report.unchecked) {
    if (fact.kind === "provider_unlisted") {
      unreadable.push({
        area: "boats",
        subject: "boat.dev",
        message: `boat.dev could not be listed (${fact.error ?? "unknown error"}), so Boats no journal knows were not looked for; retry, or run \`${commandPrefix} reconcile\` with the provider configured.`,
      });
    } else if (fact.kind === "boat_unread") {
      // As `drydock status`: a journaled Boat whose direct read failed is unverified, so the answer is
      // incomplete (the status command's INCOMPLETE verdict, exit 6).
      unreadable.push({
        area: "boats",
        subject: fact.boxId,
        message: `boat.dev could not read Boat ${fact.boxId}${fact.botId === null ? "" : ` (bot ${fact.botId})`} (${fact.reason}), so what is said of it is unverified; retry, or run \`${commandPrefix} status\` once boat.dev answers.`,
      });
    }
  }
  const planGap = (item: NeedsPersonItem): Unreadable[] =>
    item.kind === "registry_unreadable"
      ? [
          {
            area: "bots",
            subject: "bot registry",
            message: `The bot registry could not be read (${scrubPaths(item.error)}), so whether the bots of recorded Boats still exist was not checked.`,
          },
        ]
      : item.kind === "plan_failed"
        ? [
            {
              area: "boats",
              subject: "journals",
              message: `The Boat recovery plan could not be made (${item.error instanceof Error ? item.error.message : String(item.error)}); run \`${commandPrefix} status\` to see what is unreadable.`,
            },
          ]
        : [];
  unreadable.push(...report.items.flatMap(planGap));
  for (const item of report.items) {
    if (item.kind === "restores_unlisted") unreadable.push(restoreGapUnreadable(item.gap, commandPrefix));
  }
  return unreadable;
}
