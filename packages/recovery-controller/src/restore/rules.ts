/**
 * What an operator may do with a restore saga, decided from the saga alone (and, for the rules about who may
 * still be running, from a liveness judge passed in). Pure functions on plain values: no store, no lock, no
 * file system. The controller's preview and actions both ask these, so a command the preview offers is one
 * the action accepts.
 */
import {
  domainDigest,
  PRE_MUTATION_PHASES,
  ROLLBACK_BASE_PHASES,
  TERMINAL_PHASES,
} from "@drydock/restore-saga";
import { recoveryError } from "../errors.js";
import type { OwnerClaim } from "../internal/liveness.js";
import type { SagaView } from "../ports.js";
import type { ActionVerdict, RestoreActionName } from "../schema.js";

/**
 * Bases an abort may settle: every phase before `mutation_started`. The phase is a durable lower bound on
 * side effects (the orchestrator journals `mutation_started` before it touches a file), so from these the
 * workspace is provably untouched. Seed 004 stops at `locked` because its `prepared`/`intent_committed`
 * may stand for a durable session intent outside the workspace; drydock's restore has no such session,
 * and refusing here would leave a restore killed at `intent_committed` or `safety_ready` with no way out.
 */
export const SAFE_ABORT_BASES: ReadonlySet<string> = PRE_MUTATION_PHASES;
/**
 * Bases a rollback may start from: the restore may have changed files (mutation_started, workspace_applied,
 * session_committed) or a previous rollback cycle stopped part-way. The safety checkpoint was taken before
 * the first change, so restoring it is correct from any of them, and repeating it is idempotent.
 * (restore-saga's ROLLBACK_BASE_PHASES: mutation_started, workspace_applied, rollback_prepared,
 * rollback_started, workspace_rolled_back.)
 */
export const ROLLBACK_BASES: ReadonlySet<string> = ROLLBACK_BASE_PHASES;
/**
 * Bases a `complete` may finish from: the restore applied every change and recorded the workspace as it
 * read it back (`workspace_applied` carries the poststate digest). What is left is only the `completed`
 * event, which restore-saga's `resume-already-completed` recovery writes.
 */
export const COMPLETE_BASES: ReadonlySet<string> = new Set(["workspace_applied", "session_committed"]);
/** completed, aborted, rolled_back (restore-saga's TERMINAL_PHASES). */
export const TERMINAL: ReadonlySet<string> = TERMINAL_PHASES;
/**
 * The order in which the preview recommends an action: the first eligible one. Abort, release and complete
 * exclude each other by phase; only complete and rollback can both be eligible (a restore stopped after
 * `workspace_applied`), and then completing keeps the result the user asked for.
 */
export const RECOMMENDATION_ORDER: readonly RestoreActionName[] = [
  "abort",
  "release",
  "complete",
  "rollback",
];

/** The saga fields the rules read: a loaded SagaState satisfies it, and so does an object literal. */
export type RuleSaga = Pick<SagaView, "operationId" | "phase" | "basePhase" | "terminal" | "events">;

/** The recommended action: the first eligible one in RECOMMENDATION_ORDER, or null. */
export function recommendedAction(
  actions: Record<RestoreActionName, ActionVerdict>,
): RestoreActionName | null {
  return RECOMMENDATION_ORDER.find((action) => actions[action].eligible) ?? null;
}

/** A verdict from its blockers: eligible exactly when there are none. */
export function verdict(blockers: string[]): ActionVerdict {
  return { eligible: blockers.length === 0, blockers };
}

function changedFiles(saga: RuleSaga): boolean {
  return saga.events.some((event) => event.phase === "mutation_started");
}

/** Why the saga cannot be aborted (empty when its phase allows it): only before its first file change. */
export function abortBlockers(saga: RuleSaga): string[] {
  const base = saga.basePhase;
  if (saga.terminal) return [`the restore already ended (${saga.phase})`];
  if (base === null || !SAFE_ABORT_BASES.has(base)) {
    if (base !== null && COMPLETE_BASES.has(base)) {
      const changed = changedFiles(saga);
      return [
        `the restore reached ${base}: ${changed ? "files changed" : "nothing needed changing"} and every change is applied; complete it${changed ? " (or roll it back)" : ""}`,
      ];
    }
    return [`the restore reached ${base}: files may have changed; roll it back instead`];
  }
  return [];
}

/** The safety checkpoint `safety_ready` recorded, or null when there is none. */
export function safetyOf(
  saga: Pick<RuleSaga, "events">,
): { safetyCheckpointId: string; safetyManifestDigest: string } | null {
  const event = saga.events.find((candidate) => candidate.phase === "safety_ready");
  const id = event?.evidence.safetyCheckpointId;
  const digest = event?.evidence.safetyManifestDigest;
  return typeof id === "string" && typeof digest === "string"
    ? { safetyCheckpointId: id, safetyManifestDigest: digest }
    : null;
}

/** Why the saga cannot be rolled back (empty when it can, as far as the saga tells). */
export function rollbackBlockers(saga: RuleSaga): string[] {
  const base = saga.basePhase;
  if (saga.terminal) return [`the restore already ended (${saga.phase})`];
  if (base === null || !ROLLBACK_BASES.has(base)) {
    return [`the restore is at ${base}, before any file changed; there is nothing to roll back`];
  }
  if (safetyOf(saga) === null) {
    return COMPLETE_BASES.has(base) && !changedFiles(saga)
      ? [
          "the restore changed nothing (its plan had no changes, so it took no safety checkpoint); complete it",
        ]
      : ["the saga records no safety checkpoint to roll back to"];
  }
  return [];
}

/** Why the saga cannot be completed (empty when it can). */
export function completeBlockers(saga: RuleSaga): string[] {
  const base = saga.basePhase;
  if (saga.terminal) return [`the restore already ended (${saga.phase})`];
  if (base === null || !COMPLETE_BASES.has(base)) {
    const instead =
      base !== null && SAFE_ABORT_BASES.has(base)
        ? "abort it instead"
        : base !== null && ROLLBACK_BASES.has(base)
          ? "roll it back instead"
          : "inspect it";
    return [`the restore is at ${base}, before it had applied all of its changes; ${instead}`];
  }
  if (completionEvidence(saga) === null) {
    return ["the saga records no applied workspace state to complete from"];
  }
  return [];
}

/**
 * The evidence of `completed {resume-already-completed}`: the result digest exactly as the orchestrator
 * computes it (operation, target checkpoint, the poststate `workspace_applied` read back), and the commit
 * the completion rests on: `session_committed`'s digest when there is one, else the hash of the
 * `workspace_applied` event itself (drydock's restore has no session; that event is what proves the work).
 */
export function completionEvidence(
  saga: Pick<RuleSaga, "operationId" | "events">,
): { sessionCommitDigest: string; resultDigest: string } | null {
  const applied = saga.events.findLast((event) => event.phase === "workspace_applied");
  const session = saga.events.findLast((event) => event.phase === "session_committed");
  const checkpointId = saga.events[0]?.evidence.checkpointId;
  const poststateDigest = applied?.evidence.poststateDigest;
  if (applied === undefined || typeof checkpointId !== "string" || typeof poststateDigest !== "string") {
    return null;
  }
  const sessionDigest = session?.evidence.sessionCommitDigest;
  return {
    sessionCommitDigest: typeof sessionDigest === "string" ? sessionDigest : applied.hash,
    resultDigest: domainDigest("drydock-restore-result-v1", {
      operationId: saga.operationId,
      checkpointId,
      poststateDigest,
    }),
  };
}

/** Why a terminal saga may not be released (empty when it may): the release half that the saga decides. */
export function releasePhaseBlockers(saga: Pick<RuleSaga, "phase" | "terminal">): string[] {
  return saga.terminal ? [] : [`the restore has not ended (${saga.phase})`];
}

export function assertAbortable(saga: RuleSaga): void {
  const blockers = abortBlockers(saga);
  if (blockers.length > 0) {
    throw recoveryError(
      "ACTION_NOT_ALLOWED",
      `Restore ${saga.operationId} can only be aborted before its first file change (up to safety_ready): ${blockers[0]}.`,
      { operationId: saga.operationId, phase: saga.phase, basePhase: saga.basePhase },
    );
  }
}

export function assertTerminal(saga: {
  operationId: string;
  phase: string;
  terminal: boolean;
  basePhase?: string | null;
}): void {
  if (!saga.terminal || !TERMINAL.has(saga.phase)) {
    throw recoveryError(
      "ACTION_NOT_ALLOWED",
      `Only a finished restore (completed, aborted or rolled_back) can be released; ${saga.operationId} is ${saga.phase}.`,
      { operationId: saga.operationId, phase: saga.phase, basePhase: saga.basePhase ?? null },
    );
  }
}

export function assertCompletable(saga: RuleSaga): { sessionCommitDigest: string; resultDigest: string } {
  const blockers = completeBlockers(saga);
  const evidence = completionEvidence(saga);
  if (blockers.length > 0 || evidence === null) {
    throw recoveryError(
      "ACTION_NOT_ALLOWED",
      `Restore ${saga.operationId} cannot be completed: ${blockers[0] ?? "no applied workspace state"}.`,
      { operationId: saga.operationId, phase: saga.phase, basePhase: saga.basePhase },
    );
  }
  return evidence;
}

export function assertRollbackable(saga: RuleSaga): {
  safetyCheckpointId: string;
  safetyManifestDigest: string;
} {
  const blockers = rollbackBlockers(saga);
  const safety = safetyOf(saga);
  if (blockers.length > 0 || safety === null) {
    throw recoveryError(
      "ACTION_NOT_ALLOWED",
      `Restore ${saga.operationId} cannot be rolled back: ${blockers[0] ?? "no safety checkpoint"}.`,
      { operationId: saga.operationId, phase: saga.phase, basePhase: saga.basePhase },
    );
  }
  return safety;
}

/** How the rules about running processes judge liveness (the controller passes file-lock's verdicts). */
export interface Liveness {
  /** When this machine booted (wall-clock ms), undefined where unknown. */
  bootTimeMs(): number | undefined;
  /** Whether a bare pid (the `created` event's initiator) may still run. */
  isProcessAlive(pid: number): boolean;
  /** Whether a recorded lock owner (pid, host, boot id, start time) may still run. */
  isClaimAlive(claim: OwnerClaim): boolean;
}

/** Whether the saga's `created` event was written before this machine booted (its writer is gone). */
export function createdBeforeBoot(saga: Pick<RuleSaga, "events">, bootTimeMs: number | undefined): boolean {
  const at = Date.parse(saga.events[0]?.timestamp ?? "");
  return bootTimeMs !== undefined && Number.isFinite(at) && at < bootTimeMs;
}

/**
 * Why the initiator recorded in `created` may still run, or null when it is proven gone. `actorPid` is only
 * a pid, which another process may own after a reboot: a saga created before this boot has a dead
 * initiator whatever that pid names now (file-lock's boot-time rule, applied to the event's timestamp).
 */
export function initiatorBlocker(
  saga: Pick<RuleSaga, "events">,
  liveness: Pick<Liveness, "bootTimeMs" | "isProcessAlive">,
): { blocker: string; actorPid: number | null } | null {
  const actorPid = saga.events[0]?.evidence.actorPid;
  if (typeof actorPid !== "number" || !Number.isSafeInteger(actorPid) || actorPid <= 0) {
    return { blocker: "the saga records no initiator pid", actorPid: null };
  }
  if (createdBeforeBoot(saga, liveness.bootTimeMs())) return null;
  return liveness.isProcessAlive(actorPid)
    ? { blocker: `the initiator (pid ${actorPid}) is still running`, actorPid }
    : null;
}

/**
 * Before acting on a saga whose lock is gone: every process it recorded must be proven dead, since no
 * lock tells any more who may still write. The lock owners of its `locked` and `recovery_started` events
 * (pid, host, boot id, start time: judged exactly as file-lock judges an owner), or, before any lock was
 * recorded, the initiator of `created`.
 */
export function stoppedBlockers(saga: Pick<RuleSaga, "events">, liveness: Liveness): string[] {
  const blockers = new Set<string>();
  let owners = 0;
  for (const event of saga.events) {
    if (event.phase !== "locked" && event.phase !== "recovery_started") continue;
    const claim = event.evidence.workspaceLockOwner as OwnerClaim | undefined;
    if (typeof claim?.pid !== "number") continue;
    owners += 1;
    if (liveness.isClaimAlive(claim)) {
      blockers.add(
        `process ${claim.pid}, which ${event.phase === "locked" ? "ran the restore" : "ran a recovery of it"}, is still running`,
      );
    }
  }
  if (owners === 0) {
    const initiator = initiatorBlocker(saga, liveness);
    if (initiator !== null) blockers.add(initiator.blocker);
  }
  return [...blockers];
}

/** Why `release` never takes over a torn lock: it names no restore, and it may guard an unsettled one. */
export function tornReleaseBlocker(prefix: string): string {
  return `the workspace lock file is torn by a power loss and names no restore, so release does not take it over: settle any unsettled restore of this workspace first (\`${prefix} restores list\`); if there is none, move the file away`;
}

/** What the workspace lock says, as the eligibility rules read it (the preview gathers it). */
export interface LockFacts {
  /** Another restore's (or a workspace edit's) lock on this workspace, in words; null when there is none. */
  foreign: string | null;
  /** This restore's lock owner, and whether it may still run; null when there is none. */
  owner: { pid: number; alive: boolean } | null;
  /** The lock file is torn by a power loss (and the lock port can take it over). */
  torn: boolean;
  /** The lock port can take a fresh lock when none is on disk (`withFresh`). */
  canTakeFresh: boolean;
}

/** What a lock held by someone else, or by a live owner, forbids (empty when neither). */
function ownerBlockers(lock: LockFacts): string[] {
  if (lock.foreign !== null) return [`the workspace is locked by ${lock.foreign}`];
  if (lock.owner?.alive) return [`the workspace lock owner (pid ${lock.owner.pid}) is still running`];
  return [];
}

/** What the lock says about acting now: nothing held → a fresh lock, once the saga's processes stopped. */
export function lockBlockers(saga: Pick<RuleSaga, "events">, lock: LockFacts, liveness: Liveness): string[] {
  if (lock.foreign !== null || lock.owner !== null) return ownerBlockers(lock);
  // A torn lock is taken over as it is; it names no owner, so the saga's processes must be gone.
  if (lock.torn) return stoppedBlockers(saga, liveness);
  if (!lock.canTakeFresh) return ["no workspace lock owner to take over"];
  return stoppedBlockers(saga, liveness);
}

/** The facts every eligibility rule reads: the saga, whether it is archived, and its lock. */
export interface EligibilityInput {
  saga: RuleSaga;
  archived: boolean;
  lock: LockFacts;
}

const ARCHIVED = "the restore is archived";

export function abortVerdict({ saga, archived, lock }: EligibilityInput, liveness: Liveness): ActionVerdict {
  if (archived) return verdict([ARCHIVED]);
  const blockers = abortBlockers(saga);
  if (blockers.length === 0) {
    if (lock.foreign === null && lock.owner === null && !lock.torn && saga.phase === "created") {
      // Lock-free: only the initiator that wrote `created` could still publish a lock.
      const initiator = initiatorBlocker(saga, liveness);
      if (initiator !== null) blockers.push(initiator.blocker);
    } else blockers.push(...lockBlockers(saga, lock, liveness));
  }
  return verdict(blockers);
}

export function releaseVerdict({ saga, archived, lock }: EligibilityInput, prefix: string): ActionVerdict {
  const blockers: string[] = [];
  if (!saga.terminal) blockers.push(...releasePhaseBlockers(saga));
  else if (lock.foreign !== null) blockers.push(...ownerBlockers(lock));
  else if (lock.torn) blockers.push(tornReleaseBlocker(prefix));
  else if (archived && lock.owner === null)
    blockers.push("already archived and unlocked: nothing to release");
  else blockers.push(...ownerBlockers(lock));
  return verdict(blockers);
}

export function completeVerdict(
  { saga, archived, lock }: EligibilityInput,
  liveness: Liveness,
): ActionVerdict {
  if (archived) return verdict([ARCHIVED]);
  const blockers = completeBlockers(saga);
  if (blockers.length === 0) blockers.push(...lockBlockers(saga, lock, liveness));
  return verdict(blockers);
}

/**
 * The rollback verdict as far as the saga and the lock tell; the preview adds what only the workspace can
 * tell (the rollback port's `blockers`) when this leaves none.
 */
export function rollbackVerdict(
  { saga, archived, lock }: EligibilityInput,
  liveness: Liveness,
): ActionVerdict {
  if (archived) return verdict([ARCHIVED]);
  const blockers = rollbackBlockers(saga);
  if (blockers.length === 0) blockers.push(...lockBlockers(saga, lock, liveness));
  return verdict(blockers);
}
