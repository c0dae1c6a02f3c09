import { environmentScope, scopeOfBoatName } from "@drydock/boat-lifecycle";
import { adopt, reconcileDeletion, retireCreate, retryDeletion } from "./boat/actions.js";
import type { BoatContext } from "./boat/context.js";
import { plan } from "./boat/plan.js";
import type { BoatRecovery, BoatRecoveryOptions } from "./boat/types.js";
import { recoveryError } from "./errors.js";
import type { RecoveryLifecycle } from "./ports.js";

export type {
  BoatActionOptions,
  BoatActionResult,
  BoatPlanOptions,
  BoatRecovery,
  BoatRecoveryOptions,
} from "./boat/types.js";
export type {
  CreateRowFacts,
  RecoveryClient,
  RecoveryCreateJournal,
  RecoveryDeleteJournal,
  RecoveryDeletionRecord,
  RecoveryLifecycle,
} from "./ports.js";

/** The scope of this installation's Boat names: the lifecycle's own, which `environmentId` must match. */
function installationScope(lifecycle: RecoveryLifecycle, environmentId: unknown): string {
  let scope: string | null;
  try {
    scope = scopeOfBoatName(lifecycle.boatNameFor("scope"));
  } catch {
    scope = null;
  }
  if (scope === null) {
    throw recoveryError(
      "INVALID_ARGUMENT",
      "createBoatRecovery needs this installation's lifecycle (createBoatLifecycle): its Boat names tell this installation's Boats from others', and the lifecycle given names none.",
    );
  }
  if (environmentId === undefined) return scope;
  if (typeof environmentId !== "string" || environmentId.length === 0) {
    throw recoveryError("INVALID_ARGUMENT", "environmentId, when given, must be a non-empty string.");
  }
  if (environmentScope(environmentId) !== scope) {
    throw recoveryError(
      "INVALID_ARGUMENT",
      "environmentId is not the one the lifecycle names Boats with: the recovery would treat another installation's Boats as this one's. Pass the lifecycle's environmentId, or leave it out.",
    );
  }
  return scope;
}

/**
 * Boat recovery: a read-only plan of everything that needs a person, and four actions that each re-read
 * the exact facts they depend on (journal rows, fence, a direct GET of the Boat) and refuse when those
 * moved since the plan (STATE_CHANGED) or when the rules no longer allow the action.
 *
 * Proof of absence is only ever boat.dev's own direct 404/410 for the Boat's own id (`absenceProof`): the
 * provider's list is eventually consistent, so a Boat missing from it proves nothing.
 */
export function createBoatRecovery(options: BoatRecoveryOptions): BoatRecovery {
  const { lifecycle, createJournal, deleteJournal, client } = options;
  // Checked here, not at first use: a missing client would otherwise read as "boat.dev could not be read"
  // for every Boat, an unknown truth the plan asks a person about, instead of the caller's bug it is.
  for (const [name, given, method] of [
    ["client", client, "getSandbox"],
    ["createJournal", createJournal, "boatCreateRecoverySnapshot"],
    ["deleteJournal", deleteJournal, "boatDeletionSnapshot"],
  ] as const) {
    if (typeof (given as unknown as Record<string, unknown> | undefined)?.[method] !== "function") {
      throw recoveryError(
        "INVALID_ARGUMENT",
        `createBoatRecovery needs ${name} (it has no ${method} method); pass the one the bot server uses.`,
      );
    }
  }
  const ownScope = installationScope(lifecycle, options.environmentId);
  const now = options.now ?? Date.now;
  const prefix = options.commandPrefix ?? "drydock";
  const ctx: BoatContext = {
    lifecycle,
    createJournal,
    deleteJournal,
    client,
    ownScope,
    now,
    prefix,
    knownBotIds: options.knownBotIds,
    registeredBotIds: options.registeredBotIds,
  };
  return {
    plan: (planOptions) => plan(ctx, planOptions),
    adopt: (botId, boxId, opts) => adopt(ctx, botId, boxId, opts),
    retireCreate: (botId, opts) => retireCreate(ctx, botId, opts),
    reconcileDeletion: (boxId, opts) => reconcileDeletion(ctx, boxId, opts),
    retryDeletion: (boxId, opts) => retryDeletion(ctx, boxId, opts),
  };
}
