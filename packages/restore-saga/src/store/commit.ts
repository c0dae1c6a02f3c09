import { SagaError } from "../errors.js";
import { canonicalJson, plainDigest, prettyCanonical } from "../internal/canonical.js";
import { PublishFailure, publishNewFile, replaceFile } from "../internal/files.js";
import { issuesText } from "../internal/text.js";
import {
  basePhase,
  checkProgression,
  isTerminalPhase,
  isTransitionAllowed,
  PHASE_EVIDENCE,
} from "../phases.js";
import {
  HASH_PATTERN,
  type Phase,
  PhaseSchema,
  SAGA_EVENT_SCHEMA,
  type SagaEvent,
  type SagaHead,
} from "../schema.js";
import { present, type StoreContext, stateLock } from "./context.js";
import { assertOperationId, headDifference, writeFailed } from "./failures.js";
import { eventFileName, eventHash, makeHead, recordableTime } from "./format.js";
import { loadLocked } from "./replay.js";
import { eventsToSettle, isExactSuccessor, settleHint } from "./rules.js";
import type { AdvanceInput, SagaFence, SagaState } from "./types.js";

/**
 * Commit and reconciliation: an event built and checked, published with HEAD (each failure saying how far
 * it got), an unknown outcome reconciled against the exact successor meant, and `advance` itself.
 */

/** The state a create or advance returns: `event` committed after `before`, read from nothing but those. */
export function committedState(
  saga: Pick<SagaState, "operationId" | "workspaceRoot" | "workspaceIdentity">,
  before: readonly SagaEvent[],
  event: SagaEvent,
): SagaState {
  const events = Object.freeze([...before, Object.freeze(event)]);
  return Object.freeze({
    operationId: saga.operationId,
    workspaceRoot: saga.workspaceRoot,
    workspaceIdentity: saga.workspaceIdentity,
    seq: event.seq,
    headHash: event.hash,
    phase: event.phase,
    basePhase: basePhase(events),
    terminal: isTerminalPhase(event.phase),
    events,
    headRolledForward: false,
    archived: false,
  });
}

export function buildEvent(
  ctx: StoreContext,
  state: SagaState | null,
  id: string,
  phase: Phase,
  evidence: Record<string, unknown>,
) {
  const last = state?.events.at(-1) ?? null;
  const clock = ctx.now();
  // Clamp: a clock that steps back must not make the chain look reordered.
  const time = Math.max(clock, last ? Date.parse(last.timestamp) : 0);
  const body: Omit<SagaEvent, "hash"> = {
    schema: SAGA_EVENT_SCHEMA,
    version: 1,
    operationId: id,
    seq: last ? last.seq + 1 : 1,
    prevHash: last ? last.hash : null,
    phase,
    timestamp: recordableTime(id, time, clock, "event_not_committed"),
    evidence: JSON.parse(canonicalJson(evidence)) as Record<string, unknown>,
  };
  const event: SagaEvent = { ...body, hash: eventHash(body) };
  const bytes = Buffer.from(prettyCanonical(event), "utf8");
  if (bytes.length > ctx.limits.maxEventBytes) {
    throw new SagaError({
      code: "LIMIT",
      operationId: id,
      message: `The ${phase} event of restore saga ${id} would exceed ${ctx.limits.maxEventBytes} bytes. Nothing was written.`,
    });
  }
  return { event, bytes };
}

/** Publishes `event` then HEAD. Every failure says exactly how far it got. */
export function commitEvent(
  ctx: StoreContext,
  id: string,
  dir: string,
  event: SagaEvent,
  bytes: Buffer,
): { head: SagaHead; bytes: Buffer } {
  const intended = { seq: event.seq, hash: event.hash };
  try {
    publishNewFile(ctx.fs, dir, eventFileName(event.seq, event.phase), bytes);
  } catch (error) {
    if (error instanceof PublishFailure && error.stage === "before") {
      if (error.exists) {
        throw new SagaError({
          code: "CONFLICT",
          operationId: id,
          commitState: "event_not_committed",
          cause: error.cause,
          ...intended,
          message: `Restore saga ${id} already has an event ${event.seq} that this process did not expect (a writer outside the lock?). Nothing was written; reload it.`,
        });
      }
      throw writeFailed(id, "event_not_committed", error.cause, intended);
    }
    throw writeFailed(
      id,
      "event_commit_unknown",
      error instanceof PublishFailure ? error.cause : error,
      intended,
    );
  }
  // Crash window: the event is on disk, HEAD names its predecessor. The next load rolls HEAD forward.
  ctx.crash.point("saga.after-event-published");
  const head = makeHead(id, event);
  const headBytes = Buffer.from(prettyCanonical(head), "utf8");
  try {
    replaceFile(ctx.fs, dir, "HEAD", headBytes);
  } catch (error) {
    const failure = error instanceof PublishFailure ? error : null;
    throw writeFailed(
      id,
      failure?.stage === "after" ? "head_settlement_unknown" : "event_committed_head_unsettled",
      failure?.cause ?? error,
      intended,
    );
  }
  ctx.crash.point("saga.after-head-published");
  return { head, bytes: headBytes };
}

/**
 * After a write whose outcome is unknown, reload (repairing HEAD) and accept only the exact successor we
 * tried to write; anything else rethrows the original failure.
 */
export function reconcile(
  ctx: StoreContext,
  id: string,
  error: unknown,
  fence: SagaFence,
  phase: Phase,
  evidence: unknown,
): SagaState {
  if (
    !(error instanceof SagaError) ||
    error.code !== "WRITE_FAILED" ||
    error.commitState === "event_not_committed"
  ) {
    throw error;
  }
  let observed: SagaState;
  try {
    observed = loadLocked(ctx, id);
  } catch (loadError) {
    throw new SagaError({
      code: error.code,
      commitState: error.commitState ?? "event_commit_unknown",
      cause: error.cause,
      message: error.message,
      ...error.details,
      secondaryError: loadError,
    });
  }
  if (isExactSuccessor(observed, fence, phase, evidence)) return observed;
  throw error;
}

/**
 * After an advance wrote `event` and HEAD, extends the memo by what was written: the event was built
 * from a state replayed and verified under the same lock, by the rules replay checks (schema, chain,
 * phase machine, evidence), and its bytes are its canonical rendering; HEAD is the one made for it. The
 * next replay then compares bytes instead of parsing the writer's own output again (any byte changed on
 * disk still fails the comparison and is verified in full). Only when the memo holds exactly the chain
 * the advance appended to.
 */
export function rememberAppended(
  ctx: StoreContext,
  dir: string,
  state: SagaState,
  event: SagaEvent,
  bytes: Buffer,
  head: { head: SagaHead; bytes: Buffer },
): void {
  const known = ctx.verified.recall(dir);
  if (
    !known ||
    known.events.length !== state.events.length ||
    known.events.some((entry, i) => entry.event !== state.events[i])
  ) {
    ctx.verified.forget(dir);
    return;
  }
  ctx.verified.remember(dir, { events: [...known.events, { event, bytes }], head });
}

export function checkEvidence(
  ctx: StoreContext,
  id: string,
  phase: Phase,
  evidence: unknown,
): Record<string, unknown> {
  const parsed = PHASE_EVIDENCE[phase].safeParse(evidence);
  if (!parsed.success) {
    throw new SagaError({
      code: "INVALID_EVIDENCE",
      operationId: id,
      phase,
      cause: parsed.error,
      message: `The evidence for ${phase} of restore saga ${id} is not allowed (${issuesText(parsed.error.issues)}). Nothing was written.`,
    });
  }
  let text: string;
  try {
    text = canonicalJson(parsed.data);
  } catch (error) {
    throw new SagaError({
      code: "INVALID_EVIDENCE",
      operationId: id,
      phase,
      cause: error,
      message: `The evidence for ${phase} of restore saga ${id} is not plain JSON. Nothing was written.`,
    });
  }
  if (Buffer.byteLength(text, "utf8") > ctx.limits.maxEvidenceBytes) {
    throw new SagaError({
      code: "LIMIT",
      operationId: id,
      phase,
      message: `The evidence for ${phase} of restore saga ${id} exceeds ${ctx.limits.maxEvidenceBytes} bytes. Nothing was written.`,
    });
  }
  if (
    "lockOwnerDigest" in parsed.data &&
    plainDigest(parsed.data.workspaceLockOwner) !== parsed.data.lockOwnerDigest
  ) {
    throw new SagaError({
      code: "INVALID_EVIDENCE",
      operationId: id,
      phase,
      message: `The lock owner digest given for ${phase} of restore saga ${id} does not match the owner. Nothing was written.`,
    });
  }
  // Write what was validated, in canonical form: the input object may hold extra prototype baggage.
  return JSON.parse(text) as Record<string, unknown>;
}

export async function advance(
  ctx: StoreContext,
  operationId: string,
  input: AdvanceInput,
): Promise<SagaState> {
  assertOperationId(operationId);
  const { fence, phase } = checkAdvanceInput(operationId, input);
  const evidence = checkEvidence(ctx, operationId, phase, input.evidence);
  if (!present(ctx, ctx.opDir(operationId))) {
    throw new SagaError({
      code: "NOT_FOUND",
      operationId,
      message: `No active restore saga ${operationId} exists for ${ctx.workspaceRoot}.`,
    });
  }
  return stateLock(ctx, ctx.opLock(operationId), `restore saga ${operationId}`, () =>
    advanceLocked(ctx, operationId, fence, { phase, evidence }),
  );
}

/** The fence and the phase of an advance, or CONFLICT / INVALID_TRANSITION before anything is read. */
function checkAdvanceInput(operationId: string, input: AdvanceInput): { fence: SagaFence; phase: Phase } {
  const { expectedSeq, expectedHash, phase } = input ?? ({} as AdvanceInput);
  if (
    !Number.isSafeInteger(expectedSeq) ||
    expectedSeq < 1 ||
    typeof expectedHash !== "string" ||
    !HASH_PATTERN.test(expectedHash)
  ) {
    throw new SagaError({
      code: "CONFLICT",
      operationId,
      message: `An advance of restore saga ${operationId} needs the exact expectedSeq and expectedHash it was read at. Nothing was written.`,
    });
  }
  const phaseParsed = PhaseSchema.safeParse(phase);
  if (!phaseParsed.success || phaseParsed.data === "created") {
    throw new SagaError({
      code: "INVALID_TRANSITION",
      operationId,
      message: `Restore saga ${operationId} cannot advance to ${JSON.stringify(phase)}. Nothing was written.`,
    });
  }
  return { fence: { expectedSeq, expectedHash }, phase: phaseParsed.data };
}

/** Under the saga's lock: the fence, the phase machine and the cap checked, then the event committed. */
function advanceLocked(
  ctx: StoreContext,
  operationId: string,
  fence: SagaFence,
  next: { phase: Phase; evidence: Record<string, unknown> },
): SagaState {
  const { expectedSeq, expectedHash } = fence;
  const { evidence } = next;
  const state = loadLocked(ctx, operationId);
  if (state.seq !== expectedSeq || state.headHash !== expectedHash) {
    throw new SagaError({
      code: "CONFLICT",
      operationId,
      phase: state.phase,
      expectedSeq,
      expectedHash,
      actualSeq: state.seq,
      actualHash: state.headHash,
      message: `Restore saga ${operationId} moved on: it ${headDifference(fence, state)}. Nothing was written; reload it and decide again.`,
    });
  }
  if (!isTransitionAllowed(state.phase, next.phase)) {
    throw new SagaError({
      code: "INVALID_TRANSITION",
      operationId,
      phase: state.phase,
      message: `Restore saga ${operationId} cannot go from ${state.phase} to ${next.phase}. Nothing was written.`,
    });
  }
  const reason = checkProgression(state.events, next, { operationId, workspaceRoot: ctx.workspaceRoot });
  if (reason) {
    throw new SagaError({
      code: "INVALID_TRANSITION",
      operationId,
      phase: state.phase,
      message: `Restore saga ${operationId} cannot record ${next.phase} here: ${reason}. Nothing was written.`,
    });
  }
  assertRoomToSettle(ctx, state, next);
  const { event, bytes } = buildEvent(ctx, state, operationId, next.phase, evidence);
  const dir = ctx.opDir(operationId);
  let head: { head: SagaHead; bytes: Buffer };
  try {
    head = commitEvent(ctx, operationId, dir, event, bytes);
  } catch (error) {
    ctx.verified.forget(dir);
    return reconcile(ctx, operationId, error, fence, next.phase, evidence);
  }
  rememberAppended(ctx, dir, state, event, bytes, head);
  return committedState(state, state.events, event);
}

/**
 * The cap keeps room to settle: a step that is not terminal is written only if what it could still
 * take to settle the saga afterwards fits (the rest of a recovery under way, else one whole recovery
 * attempt, the longest its base phase allows). So a recovery the store lets start can always finish,
 * however many attempts failed before it; a terminal event is held back by the cap alone.
 */
function assertRoomToSettle(
  ctx: StoreContext,
  state: SagaState,
  next: { phase: Phase; evidence: Record<string, unknown> },
): void {
  const { operationId } = state;
  const left = ctx.limits.maxEvents - state.events.length;
  const needed = isTerminalPhase(next.phase) ? 0 : eventsToSettle([...state.events, next]);
  if (left - 1 < needed) {
    throw new SagaError({
      code: "LIMIT",
      operationId,
      phase: state.phase,
      message: `Restore saga ${operationId} ${
        left < 1
          ? `already has ${state.events.length} events, its limit`
          : `has ${state.events.length} of at most ${ctx.limits.maxEvents} events: after ${next.phase}, ${left - 1} would be left, and settling it could then take ${needed}`
      }. Nothing was written. ${settleHint(state.events, left, ctx.limits.maxEvents)}`,
    });
  }
}
