import { describe, expect, it } from "vitest";
import { isJournalStateError } from "../errors.js";
import {
  type BoatDeleteJournalFile,
  type BoatDeletionOperationReceipt,
  type BoatDeletionRecord,
  MAX_RECORDS,
} from "../schema.js";
import { checkDeleteJournal } from "./check.js";
import {
  acceptStep,
  blockStep,
  getOf,
  hasPendingForBot,
  prepareStep,
  restampStep,
  retireStep,
  snapshotOf,
} from "./logic.js";

const T0 = 1_767_000_000_000;
const BOX = "bx_abcdefgh";
const OTHER_BOX = "bx_zzzzzzzz";
const OP = `bdop_${"a".repeat(32)}`;
const OP2 = `bdop_${"b".repeat(32)}`;
const identity = { boxId: BOX, name: "ogb-0123456789ab-bot1-abcdef", ownerBotId: "bot-1" };
const doc = (records: BoatDeletionRecord[] = []): BoatDeleteJournalFile => ({ version: 1, records });
const op = (over: Partial<BoatDeletionOperationReceipt> = {}): BoatDeletionOperationReceipt => ({
  id: OP,
  kind: "sandbox",
  targetId: BOX,
  status: "pending",
  ...over,
});
const prepared = (over: Partial<BoatDeletionRecord> = {}): BoatDeletionRecord => ({
  ...identity,
  phase: "prepared",
  requestedAt: T0,
  updatedAt: T0,
  ...over,
});

function refusal(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    if (isJournalStateError(error) && error.code === "BOAT_DELETE_PAUSED") return error.detail;
    throw error;
  }
  throw new Error("expected a refusal");
}

describe("prepareStep", () => {
  it("writes the immutable target as a prepared fence", () => {
    const step = prepareStep(doc(), identity, T0);
    expect(step.result).toEqual(prepared());
    expect(step.next?.records).toEqual([prepared()]);
  });

  it("returns prepared and accepted fences unchanged: in-flight work wins", () => {
    for (const existing of [
      prepared(),
      prepared({ phase: "accepted", operationId: OP, status: "processing" }),
    ]) {
      expect(prepareStep(doc([existing]), identity, T0 + 9)).toEqual({ result: existing });
    }
  });

  it("replaces a blocked fence with a clean prepared one (the explicit retry)", () => {
    const blocked = prepared({ phase: "blocked", operationId: OP, status: "blocked" });
    const step = prepareStep(doc([blocked]), identity, T0 + 9);
    expect(step.result).toEqual(prepared({ requestedAt: T0 + 9, updatedAt: T0 + 9 }));
    expect(step.result.operationId).toBeUndefined();
  });

  it("refuses a renamed or re-owned target", () => {
    expect(refusal(() => prepareStep(doc([prepared()]), { ...identity, name: "other" }, T0))).toBe(
      "conflicted with the remembered deletion target",
    );
    expect(refusal(() => prepareStep(doc([prepared()]), { ...identity, ownerBotId: null }, T0))).toBe(
      "conflicted with the remembered deletion target",
    );
  });

  it("refuses a new fence when MAX_RECORDS are held", () => {
    const letters = "23456789abcdefghjkmnpqrstuvwxyz";
    const records = Array.from({ length: MAX_RECORDS }, (_, i) =>
      prepared({ boxId: `bx_${[0, 1, 2].map((d) => letters[Math.floor(i / 31 ** d) % 31]).join("")}aaaaa` }),
    );
    expect(checkDeleteJournal(doc(records))).toBeNull();
    expect(refusal(() => prepareStep(doc(records), { ...identity, boxId: "bx_zzzzzzzz" }, T0))).toBe("full");
  });
});

describe("acceptStep", () => {
  it("binds the receipt and moves pending -> processing -> completed", () => {
    let state = doc([prepared()]);
    for (const status of ["pending", "processing", "completed"] as const) {
      const step = acceptStep(state, BOX, op({ status }), T0 + 1);
      expect(step.result).toMatchObject({ phase: "accepted", operationId: OP, status });
      state = step.next!;
    }
  });

  it("ignores a stale lower status without writing", () => {
    const accepted = prepared({ phase: "accepted", operationId: OP, status: "processing" });
    expect(acceptStep(doc([accepted]), BOX, op({ status: "pending" }), T0 + 5)).toEqual({ result: accepted });
  });

  it("keeps updatedAt from moving backwards when the clock does", () => {
    const step = acceptStep(doc([prepared({ updatedAt: T0 + 100 })]), BOX, op(), T0);
    expect(step.result.updatedAt).toBe(T0 + 100);
  });

  it("refuses a missing or blocked fence as out of date", () => {
    expect(refusal(() => acceptStep(doc(), BOX, op(), T0))).toBe("out of date");
    const blocked = prepared({ phase: "blocked", status: "blocked" });
    expect(refusal(() => acceptStep(doc([blocked]), BOX, op(), T0))).toBe("out of date");
  });

  it("refuses a second operation id and an operation id held by another Boat", () => {
    const accepted = prepared({ phase: "accepted", operationId: OP, status: "pending" });
    expect(refusal(() => acceptStep(doc([accepted]), BOX, op({ id: OP2 }), T0))).toBe(
      "conflicted with another deletion operation",
    );
    const theirs = prepared({ boxId: OTHER_BOX, phase: "accepted", operationId: OP2, status: "pending" });
    expect(refusal(() => acceptStep(doc([prepared(), theirs]), BOX, op({ id: OP2 }), T0))).toBe(
      "conflicted with another deletion operation",
    );
  });
});

describe("blockStep", () => {
  it("blocks without a receipt and keeps the fence and any operation id", () => {
    const accepted = prepared({ phase: "accepted", operationId: OP, status: "pending" });
    expect(blockStep(doc([accepted]), BOX, null, T0 + 1).result).toEqual({
      ...accepted,
      phase: "blocked",
      status: "blocked",
      updatedAt: T0 + 1,
    });
    const bare = blockStep(doc([prepared()]), BOX, null, T0 + 1).result;
    expect(bare).toEqual(prepared({ phase: "blocked", status: "blocked", updatedAt: T0 + 1 }));
    expect("operationId" in bare).toBe(false);
  });

  it("records the receipt's id on a fence that had none", () => {
    const step = blockStep(doc([prepared()]), BOX, op({ status: "blocked" }), T0 + 1);
    expect(step.result).toMatchObject({ phase: "blocked", operationId: OP, status: "blocked" });
  });

  it("a completed receipt is final: blocking it (bare or with its receipt) returns it unchanged", () => {
    const completed = prepared({ phase: "accepted", operationId: OP, status: "completed" });
    for (const receipt of [null, op({ status: "blocked" })]) {
      const step = blockStep(doc([completed]), BOX, receipt, T0 + 1);
      expect(step.next).toBeUndefined();
      expect(step.result).toEqual(completed);
    }
  });

  it("refuses a missing fence and conflicting operation ids", () => {
    expect(refusal(() => blockStep(doc(), BOX, null, T0))).toBe("out of date");
    const accepted = prepared({ phase: "accepted", operationId: OP, status: "pending" });
    expect(refusal(() => blockStep(doc([accepted]), BOX, op({ id: OP2, status: "blocked" }), T0))).toBe(
      "conflicted with another deletion operation",
    );
    const theirs = prepared({ boxId: OTHER_BOX, phase: "blocked", operationId: OP2, status: "blocked" });
    expect(
      refusal(() => blockStep(doc([prepared(), theirs]), BOX, op({ id: OP2, status: "blocked" }), T0)),
    ).toBe("conflicted with another deletion operation");
  });
});

describe("restampStep", () => {
  it("re-stamps exactly the prepared fence the caller read, keeping everything but updatedAt", () => {
    const fence = prepared();
    const step = restampStep(doc([fence]), BOX, fence, T0 + 40_000);
    expect(step.result).toEqual({ record: prepared({ updatedAt: T0 + 40_000 }), restamped: true });
    expect(step.next).toEqual(doc([prepared({ updatedAt: T0 + 40_000 })]));
  });

  it("moves updatedAt strictly forward even if the clock did not: a stale copy never matches again", () => {
    const fence = prepared({ updatedAt: T0 + 5 });
    const step = restampStep(doc([fence]), BOX, fence, T0);
    expect(step.result.record?.updatedAt).toBe(T0 + 6);
    const again = restampStep(step.next as BoatDeleteJournalFile, BOX, fence, T0 + 100_000);
    expect(again).toEqual({ result: { record: prepared({ updatedAt: T0 + 6 }), restamped: false } });
  });

  it("writes nothing for a changed, accepted, blocked or missing fence", () => {
    const fence = prepared();
    const accepted = prepared({ phase: "accepted", operationId: OP, status: "pending" });
    const blocked = prepared({ phase: "blocked", status: "blocked" });
    expect(restampStep(doc([prepared({ updatedAt: T0 + 1 })]), BOX, fence, T0 + 9)).toEqual({
      result: { record: prepared({ updatedAt: T0 + 1 }), restamped: false },
    });
    expect(restampStep(doc([accepted]), BOX, accepted, T0 + 9)).toEqual({
      result: { record: accepted, restamped: false },
    });
    expect(restampStep(doc([blocked]), BOX, blocked, T0 + 9)).toEqual({
      result: { record: blocked, restamped: false },
    });
    expect(restampStep(doc([]), BOX, fence, T0 + 9)).toEqual({ result: { record: null, restamped: false } });
  });
});

describe("reads and retire", () => {
  it("snapshot and get return copies; the bot fence covers every phase; retire is idempotent", () => {
    const record = prepared();
    const state = doc([record]);
    const snap = snapshotOf(state);
    snap[0]!.name = "mutated";
    expect(record.name).toBe(identity.name);
    expect(getOf(state, BOX)).toEqual(record);
    expect(getOf(state, OTHER_BOX)).toBeNull();
    expect(hasPendingForBot(state, "bot-1")).toBe(true);
    expect(hasPendingForBot(state, "bot-2")).toBe(false);
    expect(retireStep(state, BOX).next?.records).toEqual([]);
    expect(retireStep(doc(), BOX)).toEqual({ result: undefined });
  });
});

describe("checkDeleteJournal", () => {
  it("refuses duplicate Boat ids and duplicate operation ids", () => {
    expect(checkDeleteJournal(doc([prepared(), prepared()]))).toBe("invalid");
    const a = prepared({ phase: "accepted", operationId: OP, status: "pending" });
    const b = prepared({ boxId: OTHER_BOX, phase: "accepted", operationId: OP, status: "pending" });
    expect(checkDeleteJournal(doc([a, b]))).toBe("invalid");
    expect(checkDeleteJournal(doc([a, { ...b, operationId: OP2 }]))).toBeNull();
  });
});
