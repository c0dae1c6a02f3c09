import { describe, expect, it } from "vitest";
import type { Phase } from "../src/schema.js";
import {
  attemptLength,
  type ChainStep,
  eventsToSettle,
  isExactSuccessor,
  settleHint,
} from "../src/store/rules.js";
import type { SagaState } from "../src/store/types.js";

const at = (...phases: (Phase | [Phase, Record<string, unknown>])[]): ChainStep[] =>
  phases.map((p) => (Array.isArray(p) ? { phase: p[0], evidence: p[1] } : { phase: p, evidence: {} }));

const ROLLBACK = { recoveryAction: "rollback-partial-mutation" };
const ABORT = { recoveryAction: "abort-pre-intent" };

describe("store rules: the room a saga needs to settle", () => {
  it("a recovery attempt is six events long for a rollback, two otherwise", () => {
    expect(attemptLength(null)).toBe(2);
    expect(attemptLength("prepared")).toBe(2);
    expect(attemptLength("mutation_started")).toBe(6);
    expect(attemptLength("workspace_applied")).toBe(6);
  });

  it("a finished saga needs nothing; a restore's own step needs recovery_required and one attempt", () => {
    for (const end of ["completed", "aborted", "rolled_back"] as const) {
      expect(eventsToSettle(at("created", end))).toBe(0);
    }
    expect(eventsToSettle(at("created"))).toBe(3);
    expect(eventsToSettle(at("created", "locked", "prepared", "intent_committed"))).toBe(3);
    expect(eventsToSettle(at("created", "locked", "prepared", "intent_committed", "mutation_started"))).toBe(
      7,
    );
  });

  it("each step of a rollback uses exactly one event of the room it was granted", () => {
    const chain = at(
      "created",
      "mutation_started",
      "recovery_required",
      ["recovery_started", ROLLBACK],
      "rollback_prepared",
      "rollback_started",
      "workspace_rolled_back",
      "session_rollback_committed",
      "rolled_back",
    );
    const needs = chain.slice(1).map((_, i) => eventsToSettle(chain.slice(0, i + 2)));
    expect(needs).toEqual([7, 6, 5, 4, 3, 2, 1, 0]);
  });

  it("an abort under way needs only its terminal event", () => {
    expect(eventsToSettle(at("created", "locked", "recovery_required", ["recovery_started", ABORT]))).toBe(1);
    expect(eventsToSettle(at("created", "locked", "recovery_required"))).toBe(2);
  });

  it("says what still fits, by what the chain ends in and the room left", () => {
    expect(settleHint(at("created"), 0, 64)).toMatch(/cannot be settled within its limit of 64 events/);
    expect(settleHint(at("created"), 1, 64)).toBe("What still fits is to finish it directly (aborted).");
    expect(settleHint(at("created"), 3, 64)).toBe(
      "What still fits is to finish it directly (aborted), or recovery_required and one recovery.",
    );
    expect(settleHint(at("created", "mutation_started", "recovery_required"), 6, 64)).toBe(
      "What still fits is one recovery: recovery_started, then up to rolled_back.",
    );
    expect(
      settleHint(
        at("created", "mutation_started", "recovery_required", ["recovery_started", ROLLBACK]),
        5,
        64,
      ),
    ).toBe(
      "What still fits is to finish the recovery already started (rollback-partial-mutation), up to rolled_back.",
    );
  });
});

describe("store rules: the exact successor of a write whose outcome was unknown", () => {
  const fence = { expectedSeq: 2, expectedHash: `sha256:${"a".repeat(64)}` };
  const state = (last: { seq: number; phase: Phase; prevHash: string; evidence: Record<string, unknown> }) =>
    ({ seq: last.seq, events: [last] }) as unknown as SagaState;

  it("is the event meant, right after the fence, with the same evidence in any key order", () => {
    const written = state({
      seq: 3,
      phase: "prepared",
      prevHash: fence.expectedHash,
      evidence: { a: 1, b: 2 },
    });
    expect(isExactSuccessor(written, fence, "prepared", { b: 2, a: 1 })).toBe(true);
  });

  it("is not another phase, other evidence, another predecessor or another seq", () => {
    const base = { seq: 3, phase: "prepared" as Phase, prevHash: fence.expectedHash, evidence: { a: 1 } };
    expect(isExactSuccessor(state(base), fence, "locked", { a: 1 })).toBe(false);
    expect(isExactSuccessor(state(base), fence, "prepared", { a: 2 })).toBe(false);
    expect(
      isExactSuccessor(state({ ...base, prevHash: `sha256:${"b".repeat(64)}` }), fence, "prepared", { a: 1 }),
    ).toBe(false);
    expect(isExactSuccessor(state({ ...base, seq: 4 }), fence, "prepared", { a: 1 })).toBe(false);
  });
});
