import type { BoatPlan } from "@drydock/recovery-controller";
import type { CommandContext } from "../context.js";
import { EXIT_CODES } from "../errors.js";
import type { Rendered } from "../render.js";
import { boatRecovery, pasteLine, planTable } from "../shared/boats.js";

/** The Boat recovery plan: journals vs boat.dev. Read-only, whatever flags are given. */
export async function reconcilePlan(ctx: CommandContext): Promise<Rendered> {
  // One plan over every Boat (the recovery controller's): the line says what it is waiting for.
  const progress = ctx.progress("reconcile");
  progress.phase("reading the Boat journals and boat.dev's list of Boats");
  try {
    return renderPlan(ctx, await (await boatRecovery(ctx)).plan());
  } finally {
    progress.done();
  }
}

/** The plan's warnings (what boat.dev could not be asked), its table and commands, and the INCOMPLETE footer. */
export function renderPlan(ctx: CommandContext, plan: BoatPlan): Rendered {
  // A journaled Boat boat.dev could not read directly is unverified, like a list that could not be read:
  // the plan is printed either way, and exit 6 says it is incomplete (as `status` says INCOMPLETE).
  const complete = plan.providerListed && plan.unreadBoats.length === 0;
  const header = [
    ...(plan.providerListed
      ? []
      : [
          `warning: boat.dev's list could not be read (${plan.providerError}); Boats no journal knows were not looked for.`,
        ]),
    ...plan.unreadBoats.map(
      (boat) =>
        `warning: boat.dev could not read Boat ${boat.boxId}${boat.botId === null ? "" : ` (bot ${boat.botId})`} (${boat.reason}); what is said of it is unverified.`,
    ),
  ]
    .map((line) => `${line}\n`)
    .join("");
  const body =
    plan.items.length === 0
      ? complete
        ? "Nothing needs a person: journals and boat.dev agree.\n"
        : "No journal entry needs a person, but the comparison with boat.dev is incomplete: a Boat no journal knows may still need one.\n"
      : planTable(ctx, plan.items);
  const footer = complete
    ? ""
    : `INCOMPLETE: boat.dev could not be read. Check that the provider URL (--provider-url or BOAT_API_URL) reaches it and that its token (--provider-token or BOAT_API_TOKEN) is accepted (a 401 means it was refused), then run:\n  ${pasteLine(ctx, `${ctx.boatCommandPrefix} reconcile`)}\n`;
  return {
    data: { plan, changed: false },
    human: `${header}${body}${footer}`,
    exitCode: complete ? EXIT_CODES.OK : EXIT_CODES.PROVIDER_UNAVAILABLE,
  };
}
