import { isLifecycleError, LifecycleError, scopedBoatName } from "@drydock/boat-lifecycle";
import { provesAbsence } from "@drydock/boat-provider";
import type { BoatActionName, BoatRecovery, PlanItem } from "@drydock/recovery-controller";
import type { CommandContext } from "../context.js";
import { CliError } from "../errors.js";
import type { Rendered } from "../render.js";
import { boatRecovery, journals, pasteLine } from "./boats.js";

/**
 * A Boat action. Without --yes: find the plan item that proposes exactly this action for this target and
 * print it with the command to paste (nothing changes). The bot an operator names is one the plan can
 * attribute a Boat's deterministic name to, so `creates adopt <botId> <boxId>` finds a Boat no journal
 * knows. With --yes: the action, which re-reads everything it depends on and refuses with STATE_CHANGED
 * (exit 4) when --expected-state no longer matches. --yes without --expected-state is a usage error (exit
 * 2): a change is applied only against the exact state a person previewed, never against whatever the
 * journals and boat.dev say at that moment.
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
      `Applying ${action} needs --expected-state sha256:… from its preview: run the same command without --yes (or \`${ctx.boatCommandPrefix} reconcile\`) and paste the command it prints. Nothing was changed.`,
    );
  }
  const recovery = await boatRecovery(ctx);
  if (!ctx.yes || expectedState === undefined) {
    const plan = await recovery.plan(target.botId === undefined ? {} : { botIds: [target.botId] });
    const item =
      plan.items.find(
        (candidate) =>
          candidate.action.name === action &&
          (target.botId === undefined || candidate.botId === target.botId) &&
          (target.boxId === undefined || candidate.boxId === target.boxId),
      ) ?? null;
    // What the plan says about this target instead, when it does not propose the action.
    const instead =
      item === null
        ? (plan.items.find(
            (candidate) =>
              (target.boxId === undefined || candidate.boxId === target.boxId) &&
              (target.botId === undefined ||
                candidate.botId === target.botId ||
                // A Boat no bot is known for, matched by its id.
                (target.boxId !== undefined && candidate.botId === null)),
          ) ?? null)
        : null;
    const what = [target.botId, target.boxId].filter(Boolean).join(" ");
    if (item === null && !plan.providerListed) {
      // Without boat.dev's list the plan lacks every Boat only the list shows: no verdict on this target.
      throw new CliError(
        "PROVIDER_UNLISTED",
        `boat.dev's list of Boats could not be read (${plan.providerError}), so the recovery plan cannot say what it needs for ${what}; nothing was changed. Retry once boat.dev answers.`,
      );
    }
    if (item === null && action === "adopt" && target.botId !== undefined && target.boxId !== undefined) {
      const refusal = await adoptElsewhere(ctx, plan.items, target.botId, target.boxId);
      if (refusal !== null) return refusal;
    }
    if (item === null && instead === null) {
      // Nothing in the plan names this target at all: a typo, or something already settled.
      throw new CliError(
        "NOT_FOUND",
        `The recovery plan knows nothing of ${what}: no create request, deletion fence or Boat of boat.dev matches it; nothing was changed. Check the id, and see \`${ctx.boatCommandPrefix} reconcile\` for what is open.`,
      );
    }
    const human = item
      ? `Preview: ${item.summary}\n${item.action.advice}\nNothing was changed. To apply it, run:\n  ${pasteLine(ctx, item.action.command ?? "")}\n`
      : `Preview: the recovery plan does not propose ${action} for ${what} now; nothing was changed.${instead ? ` It says: ${instead.summary} ${instead.action.advice}` : ""} See \`${ctx.boatCommandPrefix} reconcile\` for what is needed.\n`;
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
      ...(item?.action.command ? { confirm: { command: item.action.command } } : {}),
    };
  }
  let result: Record<string, unknown>;
  try {
    result = (await apply(recovery, expectedState)) as Record<string, unknown>;
  } catch (error) {
    throw inCliTerms(ctx, error, target.boxId);
  }
  return { data: result, human: `${describe(ctx, result)}\n` };
}

/**
 * `creates adopt <botId> <boxId>` for a Boat that is not this bot's to adopt: the Boat is matched by its id
 * (whatever bot the plan attributes it to), and the refusal says whose it is (exit 5, nothing changed). A
 * Boat the plan has no item for (another bot's recorded Boat, a name of no bot of this installation) is
 * looked up in the create journal and read directly; only boat.dev's own 404/410 makes it "not found"
 * (null: the caller says so). The bot's own Boat, already adopted, is a preview that changes nothing.
 */
async function adoptElsewhere(
  ctx: CommandContext,
  items: readonly PlanItem[],
  botId: string,
  boxId: string,
): Promise<Rendered | null> {
  const own = scopedBoatName(await ctx.environmentId(), botId);
  const refuse = (why: string): never => {
    throw new CliError(
      "ACTION_NOT_ELIGIBLE",
      `${why} Nothing was changed. See \`${ctx.boatCommandPrefix} reconcile\` for what it needs.`,
    );
  };
  const other = items.find((candidate) => candidate.boxId === boxId && candidate.botId !== botId);
  if (other !== undefined) {
    const shown = other.facts.provider.kind === "present" ? other.facts.provider.name : other.name;
    if (other.kind === "unknown_boat" && other.botId !== null) {
      refuse(
        `Boat ${boxId} carries bot ${other.botId}'s name (${shown}), not bot ${botId}'s (${own}): it can only be adopted as bot ${other.botId}'s.`,
      );
    }
    if (other.kind === "unknown_boat" || other.kind === "unnamed_boat") {
      refuse(
        `Boat ${boxId} carries no name of bot ${botId} (${shown === null ? "it is unnamed" : `it is named ${shown}`}; bot ${botId}'s name is ${own}), so it cannot be adopted as bot ${botId}'s. ${other.action.advice}`,
      );
    }
    if (other.kind === "deletion_fence") {
      refuse(
        `Boat ${boxId} is fenced for deletion${other.botId === null ? "" : ` (bot ${other.botId}'s)`}; it cannot be adopted.`,
      );
    }
    refuse(
      `Boat ${boxId} is remembered for bot ${other.botId}, not bot ${botId}; it cannot be adopted as bot ${botId}'s.`,
    );
  }
  if (items.some((candidate) => candidate.boxId === boxId)) return null; // this bot's item: said below
  // No plan item: a recorded Boat needs none, and a Boat of no bot of this installation gets none.
  const rows = await (await journals(ctx)).createJournal.boatCreateRecoverySnapshot();
  const recorded = rows.find((row) => row.boxId === boxId);
  if (recorded !== undefined && recorded.botId !== botId) {
    refuse(
      `Boat ${boxId} is bot ${recorded.botId}'s recorded Boat, not bot ${botId}'s; it cannot be adopted.`,
    );
  }
  if (recorded?.resolved) {
    return {
      data: {
        ok: true,
        preview: true,
        changed: false,
        action: "adopt",
        botId,
        boxId,
        eligible: false,
        item: null,
        command: null,
      },
      human: `Preview: Boat ${boxId} is already bot ${botId}'s; there is nothing to adopt, and nothing was changed.\n`,
    };
  }
  let name: string | null;
  try {
    name = (await ctx.client().getSandbox(boxId)).name;
  } catch (error) {
    if (provesAbsence(error)) return null;
    throw error;
  }
  return refuse(
    `Boat ${boxId} exists but carries no name of bot ${botId} (${name === null ? "it is unnamed" : `it is named ${name}`}; bot ${botId}'s name is ${own}), so it cannot be adopted as bot ${botId}'s.`,
  );
}

/**
 * The lifecycle speaks to the bot server's users ("retry Delete"); at the CLI the way on is `drydock
 * reconcile`, which reads the fence and boat.dev as they stand now and prints the fenced command for them.
 * The error keeps its code, status and cause (so its exit code); only its words are the CLI's.
 */
function inCliTerms(ctx: CommandContext, error: unknown, boxId: string | undefined): unknown {
  if (!isLifecycleError(error)) return error;
  const reconcile = `\`${ctx.boatCommandPrefix} reconcile\``;
  const target = boxId ?? error.boxId;
  const forBoat = target === undefined ? "" : ` for ${target}`;
  let message = error.message
    .replace(
      /retry Delete to reconcile it/g,
      `run ${reconcile} and paste the command it prints${forBoat} (it reads boat.dev first; a second DELETE is never blind)`,
    )
    .replace(/retry Delete if it needs attention/g, `run ${reconcile} if it needs attention`);
  if (message === error.message) {
    message = `${message.replace(/\.?$/, ".")} Run ${reconcile}: it shows the fence${forBoat} and boat.dev as they stand now, and the command for them.`;
  }
  if (error.retryAfterMs !== undefined && error.retryAfterMs > 0) {
    message += ` boat.dev asked to wait ${Math.ceil(error.retryAfterMs / 1_000)} s first.`;
  }
  return new LifecycleError({
    code: error.code,
    status: error.status,
    message,
    ...(error.boxId === undefined ? {} : { boxId: error.boxId }),
    ...(error.retryAfterMs === undefined ? {} : { retryAfterMs: error.retryAfterMs }),
    cause: error,
  });
}

function describe(ctx: CommandContext, result: Record<string, unknown>): string {
  switch (result.action) {
    case "adopt":
      return result.alreadyAdopted
        ? `Boat ${result.boxId} was already bot ${result.botId}'s; nothing changed.`
        : `Adopted Boat ${result.boxId} as bot ${result.botId}'s (${result.name}${result.renamed ? ", renamed" : ""}).`;
    case "retireCreate":
      return `Retired bot ${result.botId}'s create record for ${result.boxId} (boat.dev answered ${result.proof}).`;
    case "reconcileDeletion": {
      const next = result.next as PlanItem["action"] | null;
      if (next === null) return String(result.message);
      return next.command
        ? `${result.message}\nNext, run:\n  → ${pasteLine(ctx, next.command)}`
        : `${result.message}\n${next.advice}`;
    }
    case "retryDeletion":
      return result.pending
        ? `DELETE for ${result.boxId} accepted; boat.dev is working on it (\`${ctx.boatCommandPrefix} reconcile\` prints the \`deletions reconcile\` command for it).`
        : `Boat ${result.boxId} is deleted; its fence is lifted.`;
    default:
      return JSON.stringify(result);
  }
}
