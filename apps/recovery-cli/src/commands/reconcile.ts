import type { CommandContext } from "../context.js";
import { EXIT_CODES } from "../errors.js";
import type { Rendered } from "../render.js";
import { boatRecovery, planTable } from "./boats.js";

/** The Boat recovery plan: journals vs boat.dev. Read-only, whatever flags are given. */
export async function reconcilePlan(ctx: CommandContext): Promise<Rendered> {
  const plan = await boatRecovery(ctx).plan();
  const header = plan.providerListed
    ? ""
    : `warning: boat.dev's list could not be read (${plan.providerError}); Boats no journal knows were not looked for.\n`;
  const body =
    plan.items.length === 0
      ? "Nothing needs a person: journals and boat.dev agree.\n"
      : planTable(ctx, plan.items);
  // The plan is printed either way; exit 6 says it is incomplete because boat.dev could not be asked.
  return {
    data: { plan, changed: false },
    human: `${header}${body}`,
    exitCode: plan.providerListed ? EXIT_CODES.OK : EXIT_CODES.PROVIDER_UNAVAILABLE,
  };
}
