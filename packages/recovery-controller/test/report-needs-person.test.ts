/**
 * The one "needs a person" report (`drydock status` and GET /v1/recovery render it), on plain values: each
 * item's attention, look-again and command; what is unchecked; the tally and its verdict.
 */
import { describe, expect, it } from "vitest";
import {
  type BoatPlan,
  needsPersonReport,
  type PlanItem,
  type RestoreReportItem,
  tallyNeedsPerson,
} from "../src/index.js";

function restore(overrides: Partial<RestoreReportItem>): RestoreReportItem {
  return {
    botId: "bot1",
    operationId: "op-1",
    phase: "mutation_started",
    basePhase: null,
    seq: 3,
    updatedAt: null,
    ownerAlive: false,
    next: "rollback",
    command: "drydock restores rollback op-1 --yes",
    problem: null,
    diagnostic: null,
    attention: true,
    inProgress: false,
    retainedByLiveOwner: null,
    stalledForMs: null,
    ...overrides,
  };
}

function planItem(
  overrides: Partial<Omit<PlanItem, "facts">> & { facts?: Partial<PlanItem["facts"]> },
): PlanItem {
  const { facts, ...rest } = overrides;
  return {
    kind: "deletion_fence",
    botId: "bot1",
    boxId: "box-1",
    name: null,
    summary: "a deletion fence",
    facts: { provider: { kind: "not_checked" }, ...facts },
    action: { name: "retryDeletion", command: "drydock deletions retry box-1 --yes", advice: "retry" },
    stateDigest: `sha256:${"0".repeat(64)}`,
    ...rest,
  };
}

function plan(overrides: Partial<BoatPlan>): BoatPlan {
  return { items: [], providerListed: true, providerError: null, unreadBoats: [], ...overrides };
}

const prefix = "drydock --data-dir /d";

describe("needsPersonReport", () => {
  it("a stopped restore needs a person with its fenced command; one with nothing eligible gets `restores show`", () => {
    const report = needsPersonReport({
      restores: [restore({}), restore({ operationId: "op-2", next: null, command: null })],
      gaps: [],
      plan: { made: plan({}) },
      commandPrefix: prefix,
    });
    expect(report.items.map((item) => [item.kind, item.attention, item.lookAgain, item.command])).toEqual([
      ["restore", true, false, "drydock restores rollback op-1 --yes"],
      ["restore", true, false, `${prefix} restores show op-2`],
    ]);
    expect(report.tally).toEqual({
      attention: 2,
      commandless: 0,
      lookAgain: 0,
      waitMs: 0,
      verdict: "attention",
    });
    expect(report.providerChecked).toBe(true);
  });

  it("a live owner that kept the lock, or a stalled restore, is shown with `restores show`, never its action", () => {
    const report = needsPersonReport({
      restores: [
        restore({ ownerAlive: true, retainedByLiveOwner: { pid: 7 } }),
        restore({ operationId: "op-2", ownerAlive: true, stalledForMs: 3_600_000 }),
      ],
      gaps: [],
      plan: { made: plan({}) },
      commandPrefix: prefix,
    });
    expect(report.items.map((item) => item.command)).toEqual([
      `${prefix} restores show op-1`,
      `${prefix} restores show op-2`,
    ]);
  });

  it("a running restore and a busy saga are work in progress (look again, no command); a problem has none", () => {
    const report = needsPersonReport({
      restores: [
        restore({ ownerAlive: true, attention: false, inProgress: true }),
        restore({ operationId: "op-2", problem: "busy", attention: false, inProgress: true, command: null }),
        restore({ operationId: "op-3", problem: "corrupt", command: null }),
      ],
      gaps: [{ botId: "bot2", message: "bot bot2 could not be listed" }],
      plan: { made: plan({}) },
      commandPrefix: prefix,
    });
    expect(report.items.map((item) => [item.kind, item.attention, item.lookAgain, item.command])).toEqual([
      ["restore", false, true, null],
      ["restore", false, true, null],
      ["restore", true, false, null],
      ["restores_unlisted", true, false, null],
    ]);
    expect(report.tally).toEqual({
      attention: 2,
      commandless: 2,
      lookAgain: 2,
      waitMs: 0,
      verdict: "attention",
    });
  });

  it("Boat items follow the plan's rule: an accepted deletion and a fresh one are in progress, the rest need a person", () => {
    const report = needsPersonReport({
      restores: [],
      gaps: [],
      plan: {
        made: plan({
          items: [
            planItem({ facts: { fencePhase: "accepted", fenceStatus: "processing" } }),
            planItem({
              boxId: "box-2",
              facts: { fencePhase: "prepared", inFlightLeftMs: 4_500 },
              action: { name: null, command: null, advice: "wait" },
            }),
            planItem({ boxId: "box-3", facts: { fencePhase: "blocked" } }),
          ],
          registryError: "bots.json is not valid JSON",
        }),
      },
      commandPrefix: prefix,
    });
    expect(report.items.map((item) => [item.kind, item.attention, item.lookAgain, item.waitMs])).toEqual([
      ["registry_unreadable", true, false, 0],
      ["boat", false, false, 0],
      ["boat", false, true, 4_500],
      ["boat", true, false, 0],
    ]);
    expect(report.tally).toEqual({
      attention: 2,
      commandless: 1,
      lookAgain: 1,
      waitMs: 4_500,
      verdict: "attention",
    });
  });

  it("boat.dev unlisted, a Boat not read, no boat.dev at all: unchecked, so the verdict is incomplete", () => {
    const unlisted = needsPersonReport({
      restores: [],
      gaps: [],
      plan: {
        made: plan({
          providerListed: false,
          providerError: "connect failed",
          unreadBoats: [{ boxId: "box-9", botId: null, reason: "timed out" }],
        }),
      },
      commandPrefix: prefix,
    });
    expect(unlisted.unchecked).toEqual([
      { kind: "provider_unlisted", error: "connect failed" },
      { kind: "boat_unread", boxId: "box-9", botId: null, reason: "timed out" },
    ]);
    expect(unlisted.providerChecked).toBe(false);
    expect(unlisted.tally.verdict).toBe("incomplete");

    const none = needsPersonReport({ restores: [], gaps: [], plan: null, commandPrefix: prefix });
    expect(none.unchecked).toEqual([{ kind: "provider_unconfigured" }]);
    expect(none.tally.verdict).toBe("incomplete");
    expect(none.providerChecked).toBe(false);
  });

  it("a plan that failed is an item needing a person (carrying the error), not an unchecked fact", () => {
    const error = new Error("journal unreadable");
    const report = needsPersonReport({
      restores: [],
      gaps: [],
      plan: { failed: error },
      commandPrefix: prefix,
    });
    expect(report.items).toEqual([
      { kind: "plan_failed", error, attention: true, lookAgain: false, waitMs: 0, command: null },
    ]);
    expect(report.unchecked).toEqual([]);
    expect(report.providerChecked).toBe(false);
    expect(report.tally.verdict).toBe("attention");
  });

  it("nothing open is ok", () => {
    expect(
      needsPersonReport({ restores: [], gaps: [], plan: { made: plan({}) }, commandPrefix: prefix }).tally,
    ).toEqual({
      attention: 0,
      commandless: 0,
      lookAgain: 0,
      waitMs: 0,
      verdict: "ok",
    });
    expect(
      tallyNeedsPerson([{ attention: false, lookAgain: true, waitMs: 0, command: null }], []).verdict,
    ).toBe("ok");
  });
});
