// The restore rules on plain values: a saga object literal in, a verdict out. No store, lock or files.
import { domainDigest } from "@drydock/restore-saga";
import { describe, expect, it } from "vitest";
import { isRecoveryError } from "../src/index.js";
import {
  abortBlockers,
  abortVerdict,
  assertAbortable,
  assertCompletable,
  assertRollbackable,
  assertTerminal,
  completeBlockers,
  completeVerdict,
  completionEvidence,
  type EligibilityInput,
  initiatorBlocker,
  type Liveness,
  type LockFacts,
  lockBlockers,
  type RuleSaga,
  recommendedAction,
  releasePhaseBlockers,
  releaseVerdict,
  rollbackBlockers,
  rollbackVerdict,
  safetyOf,
  stoppedBlockers,
  tornReleaseBlocker,
} from "../src/restore/rules.js";

const T0 = "2026-01-01T00:00:00.000Z";
const BOOT = Date.parse("2026-01-01T00:00:01.000Z");
const TERMINAL = new Set(["completed", "aborted", "rolled_back"]);
const RECOVERY = new Set(["recovery_required", "recovery_started"]);

type Evidence = Record<string, Record<string, unknown>>;

/** A saga whose events are `phases` in order, with `evidence` per phase (defaults: a created actorPid). */
function saga(phases: string[], evidence: Evidence = {}): RuleSaga {
  const events = phases.map((phase, index) => ({
    seq: index + 1,
    phase,
    timestamp: T0,
    prevHash: index === 0 ? null : `h${index}`,
    hash: `h${index + 1}`,
    evidence:
      evidence[phase] ??
      (phase === "created" ? { actorPid: 4242, checkpointId: "cp-1" } : ({} as Record<string, unknown>)),
  }));
  const phase = phases.at(-1)!;
  const basePhase = [...phases].reverse().find((candidate) => !RECOVERY.has(candidate)) ?? null;
  return { operationId: "op-1", phase, basePhase, terminal: TERMINAL.has(phase), events };
}

const SAFETY = { safetyCheckpointId: "cp-safety", safetyManifestDigest: `sha256:${"a".repeat(64)}` };
const APPLIED = { poststateDigest: `sha256:${"b".repeat(64)}` };
const UP_TO_SAFETY = ["created", "locked", "prepared", "intent_committed", "safety_ready"];

/** Every process dead, booted after T0 unless told otherwise. */
function liveness(alive: { pids?: number[]; boot?: number | undefined } = {}): Liveness {
  const pids = new Set(alive.pids ?? []);
  return {
    bootTimeMs: () => ("boot" in alive ? alive.boot : Date.parse(T0) - 1),
    isProcessAlive: (pid) => pids.has(pid),
    isClaimAlive: (claim) => pids.has(claim.pid),
  };
}

const NO_LOCK: LockFacts = { foreign: null, owner: null, torn: false, canTakeFresh: true };
const DEAD_OWNER: LockFacts = { ...NO_LOCK, owner: { pid: 77, alive: false } };

function input(s: RuleSaga, lock: LockFacts = DEAD_OWNER, archived = false): EligibilityInput {
  return { saga: s, archived, lock };
}

describe("abort rule", () => {
  it("allows every base before mutation_started", () => {
    for (let end = 1; end <= UP_TO_SAFETY.length; end += 1) {
      expect(abortBlockers(saga(UP_TO_SAFETY.slice(0, end)))).toEqual([]);
    }
    // recovery phases are skipped: the base is where the work stopped
    expect(abortBlockers(saga(["created", "locked", "recovery_required"]))).toEqual([]);
  });

  it("refuses once files may have changed, and names what to do instead", () => {
    expect(abortBlockers(saga([...UP_TO_SAFETY, "mutation_started"]))).toEqual([
      "the restore reached mutation_started: files may have changed; roll it back instead",
    ]);
    expect(abortBlockers(saga([...UP_TO_SAFETY, "mutation_started", "workspace_applied"]))).toEqual([
      "the restore reached workspace_applied: files changed and every change is applied; complete it (or roll it back)",
    ]);
    expect(
      abortBlockers(saga(["created", "locked", "prepared", "intent_committed", "workspace_applied"])),
    ).toEqual([
      "the restore reached workspace_applied: nothing needed changing and every change is applied; complete it",
    ]);
  });

  it("refuses a terminal saga, and assertAbortable throws ACTION_NOT_ALLOWED with the base", () => {
    expect(abortBlockers(saga(["created", "aborted"]))).toEqual(["the restore already ended (aborted)"]);
    const mutating = saga([...UP_TO_SAFETY, "mutation_started"]);
    let thrown: unknown;
    try {
      assertAbortable(mutating);
    } catch (error) {
      thrown = error;
    }
    expect(isRecoveryError(thrown)).toBe(true);
    expect(thrown).toMatchObject({
      code: "ACTION_NOT_ALLOWED",
      details: { operationId: "op-1", phase: "mutation_started", basePhase: "mutation_started" },
    });
    expect(() => assertAbortable(saga(["created", "locked"]))).not.toThrow();
  });
});

describe("rollback rule", () => {
  it("allows a rollback base with a recorded safety checkpoint", () => {
    const s = saga([...UP_TO_SAFETY, "mutation_started"], { safety_ready: SAFETY });
    expect(rollbackBlockers(s)).toEqual([]);
    expect(safetyOf(s)).toEqual(SAFETY);
    expect(assertRollbackable(s)).toEqual(SAFETY);
  });

  it("refuses before any file changed, without a safety checkpoint, and after the end", () => {
    expect(rollbackBlockers(saga(UP_TO_SAFETY, { safety_ready: SAFETY }))).toEqual([
      "the restore is at safety_ready, before any file changed; there is nothing to roll back",
    ]);
    expect(rollbackBlockers(saga([...UP_TO_SAFETY, "mutation_started"]))).toEqual([
      "the saga records no safety checkpoint to roll back to",
    ]);
    expect(
      rollbackBlockers(saga(["created", "locked", "prepared", "intent_committed", "workspace_applied"])),
    ).toEqual([
      "the restore changed nothing (its plan had no changes, so it took no safety checkpoint); complete it",
    ]);
    expect(rollbackBlockers(saga(["created", "aborted"]))).toEqual(["the restore already ended (aborted)"]);
    expect(() => assertRollbackable(saga([...UP_TO_SAFETY, "mutation_started"]))).toThrow(
      "cannot be rolled back: the saga records no safety checkpoint to roll back to",
    );
  });
});

describe("complete rule and completion evidence", () => {
  const applied = () =>
    saga([...UP_TO_SAFETY, "mutation_started", "workspace_applied"], {
      safety_ready: SAFETY,
      workspace_applied: APPLIED,
    });

  it("allows workspace_applied with its poststate, and derives the evidence of completed", () => {
    const s = applied();
    expect(completeBlockers(s)).toEqual([]);
    const expected = {
      // no session_committed: the commit the completion rests on is the workspace_applied event itself
      sessionCommitDigest: "h7",
      resultDigest: domainDigest("drydock-restore-result-v1", {
        operationId: "op-1",
        checkpointId: "cp-1",
        poststateDigest: APPLIED.poststateDigest,
      }),
    };
    expect(completionEvidence(s)).toEqual(expected);
    expect(assertCompletable(s)).toEqual(expected);
  });

  it("takes the session commit digest when session_committed recorded one", () => {
    const s = saga([...UP_TO_SAFETY, "mutation_started", "workspace_applied", "session_committed"], {
      workspace_applied: APPLIED,
      session_committed: { sessionCommitDigest: "sha256:session" },
    });
    expect(completionEvidence(s)?.sessionCommitDigest).toBe("sha256:session");
  });

  it("has no evidence without a poststate or a target checkpoint", () => {
    expect(completionEvidence(saga([...UP_TO_SAFETY, "mutation_started", "workspace_applied"]))).toBeNull();
    expect(
      completionEvidence(
        saga(["created", "workspace_applied"], { created: { actorPid: 1 }, workspace_applied: APPLIED }),
      ),
    ).toBeNull();
    expect(completeBlockers(saga([...UP_TO_SAFETY, "mutation_started", "workspace_applied"]))).toEqual([
      "the saga records no applied workspace state to complete from",
    ]);
  });

  it("refuses before every change was applied, naming the action that fits instead", () => {
    expect(completeBlockers(saga(["created", "locked"]))).toEqual([
      "the restore is at locked, before it had applied all of its changes; abort it instead",
    ]);
    expect(completeBlockers(saga([...UP_TO_SAFETY, "mutation_started"]))).toEqual([
      "the restore is at mutation_started, before it had applied all of its changes; roll it back instead",
    ]);
    expect(completeBlockers(saga(["created", "completed"]))).toEqual([
      "the restore already ended (completed)",
    ]);
    expect(() => assertCompletable(saga(["created", "locked"]))).toThrow("cannot be completed");
  });
});

describe("release rule", () => {
  it("needs a terminal saga", () => {
    expect(releasePhaseBlockers(saga(["created", "locked"]))).toEqual(["the restore has not ended (locked)"]);
    expect(releasePhaseBlockers(saga(["created", "aborted"]))).toEqual([]);
    expect(() => assertTerminal({ operationId: "op-1", phase: "locked", terminal: false })).toThrow(
      "Only a finished restore (completed, aborted or rolled_back) can be released; op-1 is locked.",
    );
    expect(() => assertTerminal({ operationId: "op-1", phase: "rolled_back", terminal: true })).not.toThrow();
  });
});

describe("who may still run", () => {
  it("judges the initiator of created by pid, unless the saga predates this boot", () => {
    const created = saga(["created"]);
    expect(initiatorBlocker(created, liveness())).toBeNull();
    expect(initiatorBlocker(created, liveness({ pids: [4242] }))).toEqual({
      blocker: "the initiator (pid 4242) is still running",
      actorPid: 4242,
    });
    // Written before this boot: its writer is gone whatever pid 4242 names now.
    expect(initiatorBlocker(created, liveness({ pids: [4242], boot: BOOT }))).toBeNull();
    // An unknown boot time proves nothing.
    expect(initiatorBlocker(created, liveness({ pids: [4242], boot: undefined }))?.actorPid).toBe(4242);
    expect(initiatorBlocker(saga(["created"], { created: {} }), liveness())).toEqual({
      blocker: "the saga records no initiator pid",
      actorPid: null,
    });
  });

  it("judges the lock owners the saga recorded, and falls back to the initiator when none", () => {
    const owner = (pid: number) => ({ workspaceLockOwner: { pid } });
    const s = saga(["created", "locked", "recovery_required", "recovery_started"], {
      locked: owner(11),
      recovery_started: owner(12),
    });
    expect(stoppedBlockers(s, liveness())).toEqual([]);
    expect(stoppedBlockers(s, liveness({ pids: [11, 12, 4242] }))).toEqual([
      "process 11, which ran the restore, is still running",
      "process 12, which ran a recovery of it, is still running",
    ]);
    expect(stoppedBlockers(saga(["created"]), liveness({ pids: [4242] }))).toEqual([
      "the initiator (pid 4242) is still running",
    ]);
  });
});

describe("eligibility of each action", () => {
  const locked = saga(["created", "locked"], { locked: { workspaceLockOwner: { pid: 11 } } });

  it("reads the lock: another restore's, a live owner, no lock to take over", () => {
    const foreign: LockFacts = { ...NO_LOCK, foreign: "another restore (op-2); settle that one first" };
    expect(lockBlockers(locked, foreign, liveness())).toEqual([
      "the workspace is locked by another restore (op-2); settle that one first",
    ]);
    expect(lockBlockers(locked, { ...NO_LOCK, owner: { pid: 77, alive: true } }, liveness())).toEqual([
      "the workspace lock owner (pid 77) is still running",
    ]);
    expect(lockBlockers(locked, DEAD_OWNER, liveness())).toEqual([]);
    expect(lockBlockers(locked, { ...NO_LOCK, canTakeFresh: false }, liveness())).toEqual([
      "no workspace lock owner to take over",
    ]);
    // No lock on disk (or a torn one): every process the saga recorded must be gone.
    expect(lockBlockers(locked, NO_LOCK, liveness({ pids: [11] }))).toEqual([
      "process 11, which ran the restore, is still running",
    ]);
    expect(lockBlockers(locked, { ...NO_LOCK, torn: true, canTakeFresh: false }, liveness())).toEqual([]);
  });

  it("abort: lock-free only in created, judged by its initiator", () => {
    const created = saga(["created"]);
    expect(abortVerdict(input(created, NO_LOCK), liveness({ pids: [4242] }))).toEqual({
      eligible: false,
      blockers: ["the initiator (pid 4242) is still running"],
    });
    expect(abortVerdict(input(created, NO_LOCK), liveness())).toEqual({ eligible: true, blockers: [] });
    expect(abortVerdict(input(locked), liveness())).toEqual({ eligible: true, blockers: [] });
    expect(abortVerdict(input(locked, DEAD_OWNER, true), liveness())).toEqual({
      eligible: false,
      blockers: ["the restore is archived"],
    });
  });

  it("release: a terminal saga with a dead owner, never a torn lock", () => {
    const ended = saga(["created", "locked", "recovery_required", "recovery_started", "aborted"]);
    expect(releaseVerdict(input(ended), "drydock")).toEqual({ eligible: true, blockers: [] });
    expect(releaseVerdict(input(ended, { ...NO_LOCK, torn: true }), "drydock")).toEqual({
      eligible: false,
      blockers: [tornReleaseBlocker("drydock")],
    });
    expect(releaseVerdict(input(ended, NO_LOCK, true), "drydock").blockers).toEqual([
      "already archived and unlocked: nothing to release",
    ]);
    expect(releaseVerdict(input(locked), "drydock").blockers).toEqual(["the restore has not ended (locked)"]);
  });

  it("complete and rollback: both eligible after workspace_applied, and complete is recommended", () => {
    const applied = saga([...UP_TO_SAFETY, "mutation_started", "workspace_applied"], {
      safety_ready: SAFETY,
      workspace_applied: APPLIED,
    });
    const actions = {
      abort: abortVerdict(input(applied), liveness()),
      release: releaseVerdict(input(applied), "drydock"),
      complete: completeVerdict(input(applied), liveness()),
      rollback: rollbackVerdict(input(applied), liveness()),
    };
    expect(actions.complete.eligible).toBe(true);
    expect(actions.rollback.eligible).toBe(true);
    expect(actions.abort.eligible).toBe(false);
    expect(recommendedAction(actions)).toBe("complete");
    expect(recommendedAction({ ...actions, complete: { eligible: false, blockers: ["x"] } })).toBe(
      "rollback",
    );
    expect(
      recommendedAction({
        abort: actions.abort,
        release: actions.release,
        complete: { eligible: false, blockers: ["x"] },
        rollback: { eligible: false, blockers: ["y"] },
      }),
    ).toBeNull();
  });
});
