import type { CommandContext } from "../context.js";
import { EXIT_CODES } from "../errors.js";
import type { Rendered } from "../render.js";
import { boatRecovery, pasteLine, planTable } from "./boats.js";

/** The Boat recovery plan: journals vs boat.dev. Read-only, whatever flags are given. */
export async function reconcilePlan(ctx: CommandContext): Promise<Rendered> {
  const plan = await boatRecovery(ctx).plan();
  const header = plan.providerListed
    ? ""
    : `warning: boat.dev's list could not be read (${plan.providerError}); Boats no journal knows were not looked for.\n`;
  const body =
    plan.items.length === 0
      ? plan.providerListed
        ? "Nothing needs a person: journals and boat.dev agree.\n"
        : "No journal entry needs a person, but the comparison with boat.dev is incomplete: a Boat no journal knows may still need one.\n"
      : planTable(ctx, plan.items);
  // The plan is printed either way; exit 6 says it is incomplete because boat.dev could not be asked.
  const footer = plan.providerListed
    ? ""
    : `INCOMPLETE: boat.dev could not be read. Check that the provider URL (--provider-url or BOAT_API_URL) reaches it and that its token (--provider-token or BOAT_API_TOKEN) is accepted (a 401 means it was refused), then run:\n  ${pasteLine(ctx, `${ctx.boatCommandPrefix} reconcile`)}\n`;
  return {
    data: { plan, changed: false },
    human: `${header}${body}${footer}`,
    exitCode: plan.providerListed ? EXIT_CODES.OK : EXIT_CODES.PROVIDER_UNAVAILABLE,
  };
}
