/**
 * What every part of Boat recovery shares: the journals, the provider and the lifecycle it reads, this
 * installation's name scope, the clock and the start of every printed command. Built once by
 * `createBoatRecovery`; the plan and the actions are top-level functions that take it.
 */
import { provesAbsence } from "@drydock/boat-provider";
import type {
  RecoveryClient,
  RecoveryCreateJournal,
  RecoveryDeleteJournal,
  RecoveryLifecycle,
} from "../ports.js";
import type { BoatObservation } from "../schema.js";

export interface BoatContext {
  readonly lifecycle: RecoveryLifecycle;
  readonly createJournal: RecoveryCreateJournal;
  readonly deleteJournal: RecoveryDeleteJournal;
  readonly client: RecoveryClient;
  /** The scope of this installation's Boat names (the lifecycle's own). */
  readonly ownScope: string;
  readonly now: () => number;
  /** Start of every printed command, e.g. `drydock --data-dir /srv/drydock`. */
  readonly prefix: string;
  /** More bot ids to attribute names to (BoatRecoveryOptions.knownBotIds). */
  readonly knownBotIds?: (() => readonly string[] | Promise<readonly string[]>) | undefined;
  /** The bot registry (BoatRecoveryOptions.registeredBotIds). */
  readonly registeredBotIds?:
    | (() => readonly string[] | null | Promise<readonly string[] | null>)
    | undefined;
}

/** What the registry says, read once per plan or action. */
export type Registry =
  | { kind: "none" }
  | { kind: "read"; ids: ReadonlySet<string> }
  | { kind: "unreadable"; reason: string };
/** Whether a bot is registered: undefined without a registry, "unknown" when it could not be read. */
export type Registration = boolean | "unknown" | undefined;

export type CreateRow = Awaited<ReturnType<RecoveryCreateJournal["boatCreateRecoverySnapshot"]>>[number];

/**
 * The status of a direct read that proves the Boat does not exist, else null: only boat.dev's own 404
 * `not_found` / 410 `gone` (`provesAbsence`, the rule boat-lifecycle applies too). A proxy's 404 page, a
 * 5xx, a 429 or a transport failure proves nothing.
 */
export function absenceProof(error: unknown): 404 | 410 | null {
  return provesAbsence(error) ? (error as { status: 404 | 410 }).status : null;
}

/** The bot registry as it stands now; a failed read is "unreadable", never an empty registry. */
export async function readRegistry(ctx: BoatContext): Promise<Registry> {
  if (ctx.registeredBotIds === undefined) return { kind: "none" };
  try {
    const ids = await ctx.registeredBotIds();
    if (ids === null) return { kind: "none" };
    if (!Array.isArray(ids))
      return { kind: "unreadable", reason: "the registry answered no list of bot ids" };
    return { kind: "read", ids: new Set(ids) };
  } catch (error) {
    return {
      kind: "unreadable",
      reason: (error instanceof Error ? error.message : String(error)).replace(/[.\s]+$/, ""),
    };
  }
}

export function registrationOf(registry: Registry, botId: string): Registration {
  if (registry.kind === "none") return undefined;
  if (registry.kind === "unreadable") return "unknown";
  return registry.ids.has(botId);
}

export async function observe(ctx: BoatContext, boxId: string): Promise<BoatObservation> {
  try {
    const boat = await ctx.client.getSandbox(boxId);
    return { kind: "present", name: boat.name, state: boat.state };
  } catch (error) {
    const proof = absenceProof(error);
    if (proof !== null) return { kind: "absent", status: proof };
    return { kind: "unknown", reason: error instanceof Error ? error.message : String(error) };
  }
}

/** A provider failure that is not proof either way is passed through (the CLI maps it to exit 6). */
export async function observeOrThrow(ctx: BoatContext, boxId: string): Promise<BoatObservation> {
  try {
    const boat = await ctx.client.getSandbox(boxId);
    return { kind: "present", name: boat.name, state: boat.state };
  } catch (error) {
    const proof = absenceProof(error);
    if (proof !== null) return { kind: "absent", status: proof };
    throw error;
  }
}

export function ownsName(ctx: BoatContext, botId: string, name: string | null): boolean {
  return (
    name !== null &&
    (name === ctx.lifecycle.boatNameFor(botId) || name === ctx.lifecycle.legacyBoatNameFor(botId))
  );
}

export function command(ctx: BoatContext, ...parts: string[]): string {
  return [ctx.prefix, ...parts].join(" ");
}
