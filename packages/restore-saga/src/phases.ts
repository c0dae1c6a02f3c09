import type { z } from "zod";
import {
  AbortedEvidenceSchema,
  CompletedEvidenceSchema,
  CreatedEvidenceSchema,
  IntentCommittedEvidenceSchema,
  LockedEvidenceSchema,
  MutationStartedEvidenceSchema,
  PHASE_NAMES,
  type Phase,
  PreparedEvidenceSchema,
  RecoveryRequiredEvidenceSchema,
  RecoveryStartedEvidenceSchema,
  RollbackPreparedEvidenceSchema,
  RollbackStartedEvidenceSchema,
  RolledBackEvidenceSchema,
  SafetyReadyEvidenceSchema,
  SessionCommittedEvidenceSchema,
  SessionRollbackCommittedEvidenceSchema,
  WorkspaceAppliedEvidenceSchema,
  WorkspaceRolledBackEvidenceSchema,
} from "./schema.js";

/**
 * The phase machine as data. A phase is a durable LOWER bound on side effects: once `mutation_started`
 * is on disk, files may have changed, and nothing may claim otherwise.
 */
export const PHASES: readonly Phase[] = PHASE_NAMES;

export const TERMINAL_PHASES: ReadonlySet<Phase> = new Set<Phase>(["completed", "aborted", "rolled_back"]);

/** Phases that only record that recovery is needed or running; `basePhase` skips them. */
export const RECOVERY_PHASES: ReadonlySet<Phase> = new Set<Phase>(["recovery_required", "recovery_started"]);

export const TRANSITIONS: Readonly<Record<Phase, readonly Phase[]>> = {
  created: ["locked", "aborted", "recovery_required"],
  locked: ["prepared", "aborted", "recovery_required"],
  prepared: ["intent_committed", "aborted", "recovery_required"],
  // workspace_applied straight from intent only when the plan has zero targets (checked by evidence rules).
  intent_committed: ["safety_ready", "workspace_applied", "aborted", "recovery_required"],
  safety_ready: ["mutation_started", "aborted", "recovery_required"],
  mutation_started: ["workspace_applied", "recovery_required"],
  workspace_applied: ["session_committed", "completed", "recovery_required"],
  session_committed: ["completed", "recovery_required"],
  completed: [],
  aborted: [],
  recovery_required: ["recovery_started"],
  recovery_started: [
    "completed",
    "aborted",
    "rollback_prepared",
    "workspace_rolled_back",
    "session_rollback_committed",
    "recovery_required",
  ],
  rollback_prepared: ["rollback_started", "workspace_rolled_back", "recovery_required"],
  rollback_started: ["workspace_rolled_back", "recovery_required"],
  workspace_rolled_back: ["session_rollback_committed", "rolled_back", "recovery_required"],
  session_rollback_committed: ["rolled_back", "recovery_required"],
  rolled_back: [],
};

/** The evidence each phase must carry (zod, strict: unknown keys are refused). */
export const PHASE_EVIDENCE: Readonly<Record<Phase, z.ZodType<Record<string, unknown>>>> = {
  created: CreatedEvidenceSchema,
  locked: LockedEvidenceSchema,
  prepared: PreparedEvidenceSchema,
  intent_committed: IntentCommittedEvidenceSchema,
  safety_ready: SafetyReadyEvidenceSchema,
  mutation_started: MutationStartedEvidenceSchema,
  workspace_applied: WorkspaceAppliedEvidenceSchema,
  session_committed: SessionCommittedEvidenceSchema,
  completed: CompletedEvidenceSchema,
  aborted: AbortedEvidenceSchema,
  recovery_required: RecoveryRequiredEvidenceSchema,
  recovery_started: RecoveryStartedEvidenceSchema,
  rollback_prepared: RollbackPreparedEvidenceSchema,
  rollback_started: RollbackStartedEvidenceSchema,
  workspace_rolled_back: WorkspaceRolledBackEvidenceSchema,
  session_rollback_committed: SessionRollbackCommittedEvidenceSchema,
  rolled_back: RolledBackEvidenceSchema,
};

/**
 * Bases from which the workspace is provably untouched, so recovery may abort. The seeds' controller is
 * stricter (only `created`/`locked`, because a session intent may be durable after `prepared`); with no
 * session surface here the store allows the whole pre-mutation zone and leaves the stricter policy to the
 * controller.
 */
export const PRE_MUTATION_PHASES: ReadonlySet<Phase> = new Set<Phase>([
  "created",
  "locked",
  "prepared",
  "intent_committed",
  "safety_ready",
]);

/** Bases from which a rollback through the safety checkpoint may start (or restart). */
export const ROLLBACK_BASE_PHASES: ReadonlySet<Phase> = new Set<Phase>([
  "mutation_started",
  "workspace_applied",
  "rollback_prepared",
  "rollback_started",
  "workspace_rolled_back",
]);

export function isTerminalPhase(phase: Phase): boolean {
  return TERMINAL_PHASES.has(phase);
}

export function isTransitionAllowed(from: Phase, to: Phase): boolean {
  return TRANSITIONS[from].includes(to);
}

interface ChainEvent {
  readonly phase: Phase;
  readonly evidence: Readonly<Record<string, unknown>>;
}

/** The last phase that is not a recovery phase: where the work itself stopped. */
export function basePhase(events: readonly ChainEvent[]): Phase | null {
  for (let index = events.length - 1; index >= 0; index -= 1) {
    const phase = events[index]!.phase;
    if (!RECOVERY_PHASES.has(phase)) return phase;
  }
  return null;
}

function lastOf(events: readonly ChainEvent[], phase: Phase): ChainEvent | undefined {
  for (let index = events.length - 1; index >= 0; index -= 1) {
    if (events[index]!.phase === phase) return events[index];
  }
  return undefined;
}

function field(event: ChainEvent | undefined, key: string): unknown {
  return event?.evidence[key];
}

/**
 * Rules that span events (the transition table and the per-phase schemas cannot see them). Returns null
 * when `next` may follow `events`, else a short reason. Run on every write AND every replay, so a chain
 * rehashed by hand still cannot skip the safety checkpoint.
 */
export function checkProgression(
  events: readonly ChainEvent[],
  next: ChainEvent,
  context: { operationId: string; workspaceRoot: string },
): string | null {
  const previous = events.at(-1);
  if (!previous) return next.phase === "created" ? null : "the first event must be created";
  if (next.phase === "created") return "created may only be the first event";
  if (!isTransitionAllowed(previous.phase, next.phase)) {
    return `${next.phase} may not follow ${previous.phase}`;
  }
  const evidence = next.evidence;
  const base = basePhase(events);
  const prepared = lastOf(events, "prepared");
  const mutation = lastOf(events, "mutation_started");
  const safety = lastOf(events, "safety_ready");

  if (next.phase === "locked" || next.phase === "recovery_started") {
    const owner = evidence.workspaceLockOwner as { payload?: Record<string, unknown> } | undefined;
    if (owner?.payload?.transactionId !== context.operationId)
      return "the lock owner is for another operation";
    if (owner.payload.workspaceRoot !== context.workspaceRoot)
      return "the lock owner is for another workspace";
  }

  switch (next.phase) {
    case "mutation_started": {
      if (!prepared || !safety) return "mutation_started needs prepared and safety_ready";
      if (evidence.targetCount !== field(prepared, "targetCount")) {
        return "mutation_started must cover exactly the prepared targets";
      }
      if (evidence.targetCount === 0) return "a restore with no targets skips mutation_started";
      return null;
    }
    case "workspace_applied": {
      if (previous.phase === "intent_committed") {
        // The only way around the safety checkpoint: a plan that changes nothing.
        if (field(prepared, "targetCount") !== 0 || evidence.appliedCount !== 0) {
          return "only a restore with zero targets may skip the safety checkpoint";
        }
        return null;
      }
      if (evidence.appliedCount !== field(mutation, "targetCount")) {
        return "appliedCount must equal the mutation's targetCount";
      }
      return null;
    }
    case "completed": {
      if (previous.phase === "recovery_started") {
        if (
          field(previous, "recoveryAction") !== "resume-already-completed" ||
          !("recoveryAction" in evidence)
        ) {
          return "completing through recovery needs the resume-already-completed action";
        }
        if (base !== "workspace_applied" && base !== "session_committed") {
          return "only an applied restore can be completed through recovery";
        }
        return null;
      }
      if ("recoveryAction" in evidence) return "a recovery action needs recovery_started first";
      return null;
    }
    case "aborted": {
      const action = evidence.recoveryAction;
      if (previous.phase === "recovery_started") {
        if (action !== "abort-pre-intent" || field(previous, "recoveryAction") !== "abort-pre-intent") {
          return "aborting through recovery needs the abort-pre-intent action on both events";
        }
        if (!base || !PRE_MUTATION_PHASES.has(base)) return "a saga past mutation_started cannot be aborted";
        return null;
      }
      if (action === "abort-before-lock") {
        return previous.phase === "created" ? null : "abort-before-lock is only possible from created";
      }
      if (action !== undefined) return "abort-pre-intent needs recovery_started first";
      return null;
    }
    case "recovery_started": {
      const action = evidence.recoveryAction;
      if (action === "abort-pre-intent") {
        return base && PRE_MUTATION_PHASES.has(base)
          ? null
          : "a saga past mutation_started cannot be aborted";
      }
      if (action === "resume-already-completed") {
        return base === "workspace_applied" || base === "session_committed"
          ? null
          : "only an applied restore can be resumed to completed";
      }
      if (typeof evidence.recoveryRequestId !== "string") return "a rollback needs a recoveryRequestId";
      if (!base || !ROLLBACK_BASE_PHASES.has(base))
        return "only a saga past mutation_started can be rolled back";
      if (!safety) return "a rollback needs a safety checkpoint";
      return null;
    }
    case "rollback_prepared":
    case "rollback_started": {
      const started = next.phase === "rollback_prepared" ? previous : lastOf(events, "recovery_started");
      if (field(started, "recoveryAction") !== "rollback-partial-mutation") return "no rollback is running";
      if (evidence.recoveryRequestId !== field(started, "recoveryRequestId"))
        return "another rollback request";
      if (
        evidence.safetyCheckpointId !== field(safety, "safetyCheckpointId") ||
        evidence.safetyManifestDigest !== field(safety, "safetyManifestDigest")
      ) {
        return "the rollback must use the saga's safety checkpoint";
      }
      if (evidence.originalMutationTargetCount !== field(mutation, "targetCount")) {
        return "originalMutationTargetCount must equal the mutation's targetCount";
      }
      if (next.phase === "rollback_started") {
        const plan = lastOf(events, "rollback_prepared");
        for (const key of Object.keys(evidence)) {
          if (evidence[key] !== field(plan, key))
            return "rollback_started must repeat rollback_prepared exactly";
        }
        if (evidence.targetCount === 0) return "a rollback with no targets skips rollback_started";
      }
      return null;
    }
    case "workspace_rolled_back":
    case "session_rollback_committed":
    case "rolled_back": {
      const started = lastOf(events, "recovery_started");
      if (field(started, "recoveryAction") !== "rollback-partial-mutation") return "no rollback is running";
      if (evidence.recoveryRequestId !== field(started, "recoveryRequestId"))
        return "another rollback request";
      if (next.phase === "workspace_rolled_back") {
        const plan = lastOf(events, "rollback_prepared");
        if (!plan || field(plan, "recoveryRequestId") !== evidence.recoveryRequestId) {
          return "workspace_rolled_back needs this request's rollback_prepared";
        }
        if (evidence.rolledBackCount !== field(plan, "targetCount")) {
          return "rolledBackCount must equal the rollback plan's targetCount";
        }
      }
      if (next.phase === "rolled_back") {
        const plan = lastOf(events, "rollback_prepared");
        if (evidence.rollbackPlanIdentity !== field(plan, "rollbackPlanIdentity")) {
          return "rolled_back must name the prepared rollback plan";
        }
      }
      return null;
    }
    default:
      return null;
  }
}
