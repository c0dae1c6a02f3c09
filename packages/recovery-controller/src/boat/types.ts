/** Boat recovery's public option and result types (re-exported by boat.ts and the package index). */
import type {
  RecoveryClient,
  RecoveryCreateJournal,
  RecoveryDeleteJournal,
  RecoveryLifecycle,
} from "../ports.js";
import type { BoatPlan, PlanItem } from "../schema.js";

export interface BoatRecoveryOptions {
  lifecycle: RecoveryLifecycle;
  createJournal: RecoveryCreateJournal;
  deleteJournal: RecoveryDeleteJournal;
  client: RecoveryClient;
  /**
   * This installation's id, which tells its Boat names from other installations'. Optional: by default the
   * scope is read from `lifecycle.boatNameFor`, whose names carry it. When given, it must be the
   * lifecycle's own (INVALID_ARGUMENT otherwise): a recovery scoped to another installation would offer
   * that installation's Boats as this one's.
   */
  environmentId?: string;
  now?: () => number;
  /** Start of every printed command, e.g. `drydock --data-dir /srv/drydock`. Default `drydock`. */
  commandPrefix?: string;
  /**
   * This installation's bot ids (the bot server's registry), to tell whose deterministic name a Boat no
   * journal knows carries: a name is a hash of the bot id, so only a known id can be matched to it. The
   * journals' bot ids are always used as well. A failure here only leaves such Boats unattributed.
   */
  knownBotIds?: () => readonly string[] | Promise<readonly string[]>;
  /**
   * The bot registry: the ids of the bots that exist now (the bot server's `bots.json`). `null` (or the
   * option left out): this installation keeps no registry (a library user without a bot server), and
   * nothing is judged by it. A throw: the registry exists but cannot be read — never taken as "not
   * registered": an adopt refuses (nothing is known of the bot) and the plan says it could not check
   * (`registryError`). With a registry, adopting a Boat for a bot that is not registered is refused, the
   * digest of an adoptable Boat covers whether its bot is registered (a preview made before the bot was
   * deleted is stale after), and a create row with a Boat id whose bot is not registered is a plan item
   * that needs a person (`create_bot_unregistered`: a billed Boat no bot uses or can delete). Its ids also
   * attribute names, as `knownBotIds` does.
   */
  registeredBotIds?: () => readonly string[] | null | Promise<readonly string[] | null>;
}

export interface BoatPlanOptions {
  /** More bot ids to attribute names to, e.g. the bot an operator names in `creates adopt <botId> <boxId>`. */
  botIds?: readonly string[];
}

export interface BoatActionOptions {
  /** The `stateDigest` of the plan item the operator saw; omitted = re-check the rules only. */
  expectedState?: string;
}

export type BoatActionResult =
  | {
      ok: true;
      action: "adopt";
      botId: string;
      boxId: string;
      name: string;
      renamed: boolean;
      alreadyAdopted: boolean;
    }
  | { ok: true; action: "retireCreate"; botId: string; boxId: string; proof: number }
  | {
      ok: true;
      action: "reconcileDeletion";
      boxId: string;
      /**
       * `confirmed`: proven gone, fence lifted. `pending`: boat.dev is deleting it (or a DELETE may still be
       * on the wire). `blocked`: boat.dev blocked it. `not_running`: the Boat exists and drydock holds no
       * receipt of a deletion, so reconciling again will not move it (`retryDeletion` does).
       */
      outcome: "confirmed" | "pending" | "blocked" | "not_running";
      /** What was found, in one or two plain sentences. */
      message: string;
      /** The one safe next step for the fence as it stands now (the plan item's action), or null. */
      next: PlanItem["action"] | null;
    }
  | { ok: true; action: "retryDeletion"; boxId: string; pending: boolean };

export interface BoatRecovery {
  plan(options?: BoatPlanOptions): Promise<BoatPlan>;
  adopt(botId: string, boxId: string, options?: BoatActionOptions): Promise<BoatActionResult>;
  retireCreate(botId: string, options?: BoatActionOptions): Promise<BoatActionResult>;
  reconcileDeletion(boxId: string, options?: BoatActionOptions): Promise<BoatActionResult>;
  retryDeletion(boxId: string, options?: BoatActionOptions): Promise<BoatActionResult>;
}
