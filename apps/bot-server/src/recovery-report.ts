import { type PlanItem, planItemNeedsAttention } from "@drydock/recovery-controller";
import type { ServerContext } from "./context.js";
import { type UnfinishedRetirement, unfinishedRetirements } from "./domain/workspace-retirement.js";
import { collectRestoreRecovery, drydockCommandPrefix, type Unreadable } from "./recovery.js";

/**
 * The same data as `drydock status`: the recovery controller's Boat plan and every restore it would list
 * (all pages, and the store's diagnostics: finished-but-unarchived sagas still holding the lock, corrupt
 * or busy ones), each with the fenced command to act on it. What cannot be read is reported in
 * `unreadable` (and `complete: false`) instead of hiding what can: the answer is still 200, like the
 * status command's INCOMPLETE verdict. `open` counts what needs a person, as status's ATTENTION does; it
 * also sets the open-items gauge of /metrics.
 */
export async function recoveryReport(ctx: ServerContext) {
  const commandPrefix = drydockCommandPrefix(ctx.dataDir);
  const unreadable: Unreadable[] = [];
  let boats: (PlanItem & { attention: boolean })[] = [];
  try {
    const plan = await ctx.recovery.plan();
    if (!plan.providerListed) {
      unreadable.push({
        area: "boats",
        subject: "boat.dev",
        message: `boat.dev could not be listed (${plan.providerError ?? "unknown error"}), so Boats no journal knows were not looked for; retry, or run \`${commandPrefix} reconcile\` with the provider configured.`,
      });
    }
    // As `drydock status`: a journaled Boat whose direct read failed is unverified, so the answer is
    // incomplete (the status command's INCOMPLETE verdict, exit 6).
    for (const boat of plan.unreadBoats) {
      unreadable.push({
        area: "boats",
        subject: boat.boxId,
        message: `boat.dev could not read Boat ${boat.boxId}${boat.botId === null ? "" : ` (bot ${boat.botId})`} (${boat.reason}), so what is said of it is unverified; retry, or run \`${commandPrefix} status\` once boat.dev answers.`,
      });
    }
    if (plan.registryError !== undefined) {
      unreadable.push({
        area: "bots",
        subject: "bot registry",
        message: `The bot registry could not be read (${ctx.scrubPaths(plan.registryError)}), so whether the bots of recorded Boats still exist was not checked.`,
      });
    }
    // As `drydock status` (one rule, in the recovery controller): work in progress needs no person.
    boats = plan.items.map((item) => ({ ...item, attention: planItemNeedsAttention(item) }));
  } catch (error) {
    unreadable.push({
      area: "boats",
      subject: "journals",
      message: `The Boat recovery plan could not be made (${error instanceof Error ? error.message : String(error)}); run \`${commandPrefix} status\` to see what is unreadable.`,
    });
  }
  const found = await collectRestoreRecovery(ctx.dataDir, commandPrefix);
  unreadable.push(...found.unreadable);
  let retirements: UnfinishedRetirement[] = [];
  try {
    retirements = await unfinishedRetirements(ctx);
  } catch (error) {
    unreadable.push({
      area: "bots",
      subject: "bot registry",
      message: `The bot registry could not be read (${ctx.scrubPaths(error instanceof Error ? error.message : String(error))}), so deleted bots whose workspace retirement did not finish were not looked for.`,
    });
  }
  const open =
    boats.filter((item) => item.attention).length +
    found.restores.filter((item) => item.attention).length +
    unreadable.length +
    retirements.length;
  ctx.metrics.recoveryItemsOpen.set(open);
  ctx.recoveryGauge.countedAt = performance.now();
  return {
    ok: true,
    open,
    complete: unreadable.length === 0,
    boats,
    restores: found.restores,
    retirements,
    unreadable,
    startup: ctx.startupReport(),
  };
}
