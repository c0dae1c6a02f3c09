import { canonicalJson } from "../internal/canonical.js";
import { basePhase, PRE_MUTATION_PHASES, ROLLBACK_BASE_PHASES } from "../phases.js";
import type { Phase } from "../schema.js";
import type { SagaFence, SagaState } from "./types.js";

/**
 * Pure rules on a chain of events: how many events settling a saga can still take (the event cap keeps
 * room for them), what a person can still do when it does not, and which observed state is exactly the
 * successor a write meant. Plain values in, plain values out.
 */

export function isExactSuccessor(
  state: SagaState,
  fence: SagaFence,
  phase: Phase,
  evidence: unknown,
): boolean {
  const last = state.events.at(-1);
  return (
    state.seq === fence.expectedSeq + 1 &&
    last !== undefined &&
    last.phase === phase &&
    last.prevHash === fence.expectedHash &&
    canonicalJson(last.evidence) === canonicalJson(evidence)
  );
}

export type ChainStep = { readonly phase: Phase; readonly evidence: Readonly<Record<string, unknown>> };

/** The longest recovery attempt (recovery_started … its terminal event) a saga stopped at `base` may run. */
export function attemptLength(base: Phase | null): number {
  // A rollback: recovery_started, rollback_prepared, rollback_started, workspace_rolled_back,
  // session_rollback_committed, rolled_back. An abort (or a resume): recovery_started, then the terminal.
  return base !== null && ROLLBACK_BASE_PHASES.has(base) ? 6 : 2;
}

/**
 * The most events that can still be needed to settle a saga whose chain is `events`, if nothing else fails:
 * the rest of a recovery attempt under way; one whole attempt after recovery_required; after a restore's
 * own step, recovery_required and one attempt (what recovery writes when the restore stops there).
 */
export function eventsToSettle(events: readonly ChainStep[]): number {
  const last = events.at(-1)!;
  switch (last.phase) {
    case "completed":
    case "aborted":
    case "rolled_back":
      return 0;
    case "recovery_required":
      return attemptLength(basePhase(events));
    case "recovery_started":
      return last.evidence.recoveryAction === "rollback-partial-mutation" ? 5 : 1;
    case "rollback_prepared":
      return 4;
    case "rollback_started":
      return 3;
    case "workspace_rolled_back":
      return 2;
    case "session_rollback_committed":
      return 1;
    default:
      return 1 + attemptLength(last.phase);
  }
}

/** What still settles a saga from `events`, for a person, with `left` events of room. */
export function settleHint(events: readonly ChainStep[], left: number, maxEvents: number): string {
  const last = events.at(-1)!;
  const needed = eventsToSettle(events);
  // A restore's own step can also be settled by one terminal event, which only the cap holds back: aborted
  // before any file changed, completed once applied.
  const direct = PRE_MUTATION_PHASES.has(last.phase)
    ? "aborted"
    : last.phase === "workspace_applied" || last.phase === "session_committed"
      ? "completed"
      : null;
  if (direct && left >= 1) {
    return `What still fits is to finish it directly (${direct})${needed <= left ? ", or recovery_required and one recovery" : ""}.`;
  }
  if (needed > left) {
    return `It cannot be settled within its limit of ${maxEvents} events any more (that could take ${needed}, ${left} are left): inspect the workspace and the saga by hand.`;
  }
  const base = basePhase(events);
  switch (last.phase) {
    case "recovery_started":
    case "rollback_prepared":
    case "rollback_started":
    case "workspace_rolled_back":
    case "session_rollback_committed": {
      const action = events.findLast((event) => event.phase === "recovery_started")?.evidence.recoveryAction;
      const end =
        action === "rollback-partial-mutation"
          ? "rolled_back"
          : action === "abort-pre-intent"
            ? "aborted"
            : "completed";
      return `What still fits is to finish the recovery already started (${String(action)}), up to ${end}.`;
    }
    case "recovery_required": {
      const end =
        base !== null && PRE_MUTATION_PHASES.has(base)
          ? "aborted"
          : attemptLength(base) > 2
            ? "rolled_back"
            : "completed";
      return `What still fits is one recovery: recovery_started, then up to ${end}.`;
    }
    default:
      return "What still fits is recovery_required and one recovery.";
  }
}
