import { openBoatCreateJournal } from "@drydock/boat-create-journal";
import { openBoatDeleteJournal } from "@drydock/boat-delete-journal";
import { createBoatLifecycle } from "@drydock/boat-lifecycle";
import {
  type BoatActionName,
  type BoatRecovery,
  createBoatRecovery,
  type PlanItem,
} from "@drydock/recovery-controller";
import type { CommandContext } from "../context.js";
import { CliError } from "../errors.js";
import { duration, type Rendered, table } from "../render.js";

export function journals(ctx: CommandContext) {
  return {
    createJournal: openBoatCreateJournal({ dataDir: ctx.dataDir, now: ctx.now }),
    deleteJournal: openBoatDeleteJournal({ dataDir: ctx.dataDir, now: ctx.now }),
  };
}

/** Boat recovery wired to this data directory and provider. Needs the environment id and the provider. */
export function boatRecovery(ctx: CommandContext): BoatRecovery {
  const environmentId = ctx.environmentId();
  const client = ctx.client();
  const { createJournal, deleteJournal } = journals(ctx);
  const lifecycle = createBoatLifecycle({
    client,
    createJournal,
    deleteJournal,
    environmentId,
    now: ctx.now,
  });
  return createBoatRecovery({
    lifecycle,
    createJournal,
    deleteJournal,
    client,
    environmentId,
    now: ctx.now,
    commandPrefix: ctx.commandPrefix,
  });
}

export function planTable(ctx: CommandContext, items: readonly PlanItem[]): string {
  if (items.length === 0) return "";
  return (
    table(
      ["kind", "bot", "box", "boat.dev", "next"],
      items.map((item) => [
        item.kind,
        item.botId,
        item.boxId,
        item.facts.provider.kind === "present"
          ? (item.facts.provider.name ?? "unnamed")
          : item.facts.provider.kind === "absent"
            ? `gone (${item.facts.provider.status})`
            : item.facts.provider.kind,
        item.action.name ?? "person",
      ]),
      ctx.tty,
    ) +
    items
      .map(
        (item) =>
          `- ${item.summary}\n  ${item.action.command ? `→ ${item.action.command}` : item.action.advice}\n`,
      )
      .join("")
  );
}

/**
 * A Boat action. Without --yes: find the plan item that proposes exactly this action for this target and
 * print it with the command to paste (nothing changes). With --yes: the action, which re-reads everything
 * it depends on and refuses with STATE_CHANGED (exit 4) when --expected-state no longer matches. --yes
 * without --expected-state is a usage error (exit 2): a change is applied only against the exact state a
 * person previewed, never against whatever the journals and boat.dev say at that moment.
 */
export async function boatAction(
  ctx: CommandContext,
  action: BoatActionName,
  target: { botId?: string; boxId?: string },
  apply: (recovery: BoatRecovery, expectedState: string) => Promise<unknown>,
): Promise<Rendered> {
  const expectedState = ctx.options.expectedState;
  if (ctx.yes && expectedState === undefined) {
    throw new CliError(
      "USAGE",
      `Applying ${action} needs --expected-state sha256:… from its preview: run the same command without --yes (or \`drydock reconcile\`) and paste the command it prints. Nothing was changed.`,
    );
  }
  const recovery = boatRecovery(ctx);
  if (!ctx.yes || expectedState === undefined) {
    const plan = await recovery.plan();
    const item =
      plan.items.find(
        (candidate) =>
          candidate.action.name === action &&
          (target.botId === undefined || candidate.botId === target.botId) &&
          (target.boxId === undefined || candidate.boxId === target.boxId),
      ) ?? null;
    const what = [target.botId, target.boxId].filter(Boolean).join(" ");
    const human = item
      ? `Preview: ${item.summary}\n${item.action.advice}\nNothing was changed. To apply it, run:\n  ${item.action.command}\n`
      : `Preview: the recovery plan does not propose ${action} for ${what} now; nothing was changed. See \`drydock reconcile\` for what is needed.\n`;
    return {
      data: {
        ok: true,
        preview: true,
        changed: false,
        action,
        ...target,
        eligible: item !== null,
        item,
        command: item?.action.command ?? null,
      },
      human,
    };
  }
  const result = (await apply(recovery, expectedState)) as Record<string, unknown>;
  return { data: result, human: `${describe(result)}\n` };
}

function describe(result: Record<string, unknown>): string {
  switch (result.action) {
    case "adopt":
      return result.alreadyAdopted
        ? `Boat ${result.boxId} was already bot ${result.botId}'s; nothing changed.`
        : `Adopted Boat ${result.boxId} as bot ${result.botId}'s (${result.name}${result.renamed ? ", renamed" : ""}).`;
    case "retireCreate":
      return `Retired bot ${result.botId}'s create record for ${result.boxId} (boat.dev answered ${result.proof}).`;
    case "reconcileDeletion":
      return result.outcome === "confirmed"
        ? `Deletion of ${result.boxId} confirmed; its fence is lifted.`
        : `Deletion of ${result.boxId} is ${result.outcome}; the fence stays. Reconcile again later.`;
    case "retryDeletion":
      return result.pending
        ? `DELETE for ${result.boxId} accepted; boat.dev is working on it (\`drydock deletions reconcile ${result.boxId}\` later).`
        : `Boat ${result.boxId} is deleted; its fence is lifted.`;
    default:
      return JSON.stringify(result);
  }
}

export function age(ms: number): string {
  return duration(ms);
}
