import { describe, expect, it } from "vitest";
import { isJournalStateError } from "../errors.js";
import {
  type BoatCreateJournalFile,
  type BoatCreateRequest,
  KEY_RETENTION_MS,
  KEY_SAFETY_MARGIN_MS,
  MAX_REQUESTS,
} from "../schema.js";
import { checkCreateJournal } from "./check.js";
import {
  adoptOnceStep,
  adoptStep,
  beginStep,
  discardStep,
  rememberStep,
  resolveStep,
  retireOnceStep,
  retireStep,
  snapshotOf,
} from "./logic.js";

const T0 = 1_767_000_000_000;
let keyCounter = 0;
const key = () => `00000000-0000-4000-8000-${(++keyCounter).toString(16).padStart(12, "0")}`;
const ctx = (now = T0) => ({ now, newKey: key });
const doc = (requests: BoatCreateRequest[] = []): BoatCreateJournalFile => ({ version: 1, requests });
const BODY = '{"ttlSeconds":28800,"noEnv":true}';

function refusal(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    if (isJournalStateError(error) && error.code === "BOAT_CREATE_PAUSED") return error.detail;
    throw error;
  }
  throw new Error("expected a refusal");
}

function row(over: Partial<BoatCreateRequest> = {}): BoatCreateRequest {
  return { botId: "bot-1", requestBody: BODY, idempotencyKey: key(), createdAt: T0, ...over };
}

describe("beginStep", () => {
  it("mints and journals a key before the request leaves, with startedNow true", () => {
    const step = beginStep(doc(), "bot-1", BODY, ctx());
    expect(step.result.startedNow).toBe(true);
    expect(step.next?.requests).toEqual([step.result.request]);
    expect(step.result.request).toMatchObject({ botId: "bot-1", requestBody: BODY, createdAt: T0 });
    expect(step.result.request.boxId).toBeUndefined();
  });

  it("reuses a pending key for the same body without writing, with startedNow false", () => {
    const pending = row();
    const step = beginStep(doc([pending]), "bot-1", BODY, ctx(T0 + 1_000));
    expect(step).toEqual({ result: { request: pending, startedNow: false } });
  });

  it("refuses a changed body while an earlier key for the bot is unreconciled", () => {
    expect(refusal(() => beginStep(doc([row()]), "bot-1", '{"ttlSeconds":7200}', ctx()))).toBe(
      "waiting for an earlier cloud computer request to be reconciled",
    );
  });

  it("lets a remembered Boat win over a changed body and over an expired window", () => {
    const known = row({ boxId: "bx_abcdefgh" });
    const step = beginStep(doc([known]), "bot-1", "other body", ctx(T0 + 10 * KEY_RETENTION_MS));
    expect(step).toEqual({ result: { request: known, startedNow: false } });
  });

  it("reuses a pending key 1 ms before its trust deadline (24 hours minus the safety margin)", () => {
    const step = beginStep(
      doc([row()]),
      "bot-1",
      BODY,
      ctx(T0 + KEY_RETENTION_MS - KEY_SAFETY_MARGIN_MS - 1),
    );
    expect(step.result.startedNow).toBe(false);
    expect(step.next).toBeUndefined();
  });

  it("refuses a pending key from its trust deadline up to 24 hours, minting no new key", () => {
    expect(KEY_SAFETY_MARGIN_MS).toBe(60 * 60 * 1_000);
    for (const age of [KEY_RETENTION_MS - KEY_SAFETY_MARGIN_MS, KEY_RETENTION_MS - 1]) {
      expect(refusal(() => beginStep(doc([row()]), "bot-1", BODY, ctx(T0 + age)))).toBe(
        "too close to the end of boat.dev's 24-hour retry window",
      );
    }
  });

  it("refuses a pending key exactly at and after 24 hours, minting no new key", () => {
    for (const age of [KEY_RETENTION_MS, KEY_RETENTION_MS + 1]) {
      expect(refusal(() => beginStep(doc([row()]), "bot-1", BODY, ctx(T0 + age)))).toBe(
        "older than boat.dev's 24-hour retry window",
      );
    }
  });

  it("refuses a new key when the journal holds MAX_REQUESTS rows, but still answers known bots", () => {
    const rows = Array.from({ length: MAX_REQUESTS }, (_, i) => row({ botId: `b${i}` }));
    expect(refusal(() => beginStep(doc(rows), "new-bot", BODY, ctx()))).toBe("full");
    expect(beginStep(doc(rows), "b7", BODY, ctx()).result.startedNow).toBe(false);
  });
});

describe("rememberStep", () => {
  it("stores the Boat id and drops the bot's other rows, keeping other bots", () => {
    const mine = row();
    const stale = row({ requestBody: "older body" });
    const other = row({ botId: "bot-2" });
    const step = rememberStep(doc([stale, mine, other]), mine, "bx_abcdefgh");
    expect(step.result).toEqual({ ...mine, boxId: "bx_abcdefgh" });
    expect(step.next?.requests).toEqual([other, { ...mine, boxId: "bx_abcdefgh" }]);
  });

  it("refuses a row that is gone or that remembers a different Boat", () => {
    const mine = row();
    expect(refusal(() => rememberStep(doc([]), mine, "bx_abcdefgh"))).toBe("out of date");
    const known = { ...mine, boxId: "bx_abcdefgh" };
    expect(refusal(() => rememberStep(doc([known]), mine, "bx_zzzzzzzz"))).toBe("out of date");
    expect(rememberStep(doc([known]), mine, "bx_abcdefgh").result).toEqual(known);
  });

  it("refuses a request whose key or body differs from the journaled row", () => {
    const mine = row();
    expect(refusal(() => rememberStep(doc([mine]), { ...mine, idempotencyKey: key() }, "bx_abcdefgh"))).toBe(
      "out of date",
    );
    expect(refusal(() => rememberStep(doc([mine]), { ...mine, requestBody: "x" }, "bx_abcdefgh"))).toBe(
      "out of date",
    );
  });
});

describe("resolveStep", () => {
  it("marks only the exact remembered row resolved", () => {
    const known = row({ boxId: "bx_abcdefgh" });
    const other = row({ botId: "bot-2" });
    const step = resolveStep(doc([known, other]), known);
    expect(step.result).toEqual({ ...known, resolved: true });
    expect(step.next?.requests).toEqual([{ ...known, resolved: true }, other]);
  });

  it("refuses a key-only row and a row whose Boat id changed", () => {
    const pending = row();
    expect(refusal(() => resolveStep(doc([pending]), pending))).toBe("out of date");
    const known = row({ boxId: "bx_abcdefgh" });
    expect(refusal(() => resolveStep(doc([known]), { ...known, boxId: "bx_zzzzzzzz" }))).toBe("out of date");
  });
});

describe("adoptStep", () => {
  it("replaces every row of the bot with one resolved synthetic row", () => {
    const step = adoptStep(doc([row(), row({ botId: "bot-2" })]), "bot-1", "bx_abcdefgh", ctx());
    const adopted = step.next?.requests.at(-1);
    expect(step.next?.requests).toHaveLength(2);
    expect(adopted).toMatchObject({
      botId: "bot-1",
      requestBody: '{"adopted":"legacy-name","boxId":"bx_abcdefgh"}',
      boxId: "bx_abcdefgh",
      resolved: true,
      createdAt: T0,
    });
  });

  it("is a no-op when the Boat is already the bot's single resolved row", () => {
    const known = row({ boxId: "bx_abcdefgh", resolved: true });
    expect(adoptStep(doc([known]), "bot-1", "bx_abcdefgh", ctx())).toEqual({ result: undefined });
  });

  it("resolves the bot's own remembered row in place of a synthetic one", () => {
    const known = row({ boxId: "bx_abcdefgh" });
    const step = adoptStep(doc([known]), "bot-1", "bx_abcdefgh", ctx());
    expect(step.next?.requests).toEqual([{ ...known, resolved: true }]);
  });

  it("refuses a Boat remembered for another bot", () => {
    const theirs = row({ botId: "bot-2", boxId: "bx_abcdefgh" });
    expect(refusal(() => adoptStep(doc([theirs]), "bot-1", "bx_abcdefgh", ctx()))).toBe(
      "conflicted with another bot's remembered cloud computer",
    );
  });
});

describe("retireStep and discardStep", () => {
  it("retire removes rows of that Boat and writes nothing when none match", () => {
    const known = row({ boxId: "bx_abcdefgh" });
    expect(retireStep(doc([known]), "bx_abcdefgh").next?.requests).toEqual([]);
    expect(retireStep(doc([known]), "bx_zzzzzzzz")).toEqual({ result: undefined });
  });

  it("discard removes the caller's exact row and writes nothing for an unknown key", () => {
    const mine = row();
    const other = row({ botId: "bot-2" });
    expect(discardStep(doc([mine, other]), mine).next?.requests).toEqual([other]);
    expect(discardStep(doc([mine]), { ...mine, idempotencyKey: key() })).toEqual({ result: undefined });
    const gone = row({ boxId: "bx_abcdefgh", resolved: true });
    expect(discardStep(doc([gone]), { ...gone, resolved: undefined }).next?.requests).toEqual([]);
  });

  it("discard refuses a row another process remembered (or changed) under the same key", () => {
    const held = row();
    // Another process resumed the key, got the Boat and resolved the row.
    const remembered = { ...held, boxId: "bx_abcdefgh", resolved: true as const };
    expect(refusal(() => discardStep(doc([remembered]), held))).toBe("out of date");
    // A stale holder of a remembered row does not erase a row remembering something else.
    expect(refusal(() => discardStep(doc([held]), { ...held, boxId: "bx_abcdefgh" }))).toBe("out of date");
    expect(refusal(() => discardStep(doc([held]), { ...held, requestBody: "{}" }))).toBe("out of date");
  });
});

describe("snapshotOf", () => {
  it("never contains keys or request bodies, and reports the age", () => {
    const rows = [row(), row({ botId: "bot-2", boxId: "bx_abcdefgh", resolved: true })];
    const snapshot = snapshotOf(doc(rows), T0 + 5);
    expect(snapshot).toEqual([
      { botId: "bot-1", resolved: false, createdAt: T0, ageMs: 5 },
      { botId: "bot-2", boxId: "bx_abcdefgh", resolved: true, createdAt: T0, ageMs: 5 },
    ]);
    const text = JSON.stringify(snapshot);
    for (const r of rows) {
      expect(text).not.toContain(r.idempotencyKey);
      expect(text).not.toContain("ttlSeconds");
    }
  });
});

describe("checkCreateJournal", () => {
  it("accepts distinct rows and refuses duplicate identities, keys or two Boats for one bot", () => {
    const a = row();
    expect(checkCreateJournal(doc([a, row({ botId: "bot-2" })]))).toBeNull();
    expect(checkCreateJournal(doc([a, row()]))).toBe("invalid");
    expect(
      checkCreateJournal(doc([a, { ...row({ botId: "bot-2" }), idempotencyKey: a.idempotencyKey }])),
    ).toBe("invalid");
    expect(
      checkCreateJournal(
        doc([row({ boxId: "bx_abcdefgh" }), row({ requestBody: "b2", boxId: "bx_zzzzzzzz" })]),
      ),
    ).toBe("invalid");
  });
});

describe("the compare-and-set steps (fenced adopt and retire)", () => {
  const facts = (r: BoatCreateRequest) => ({
    botId: r.botId,
    boxId: r.boxId,
    resolved: r.resolved === true,
    createdAt: r.createdAt,
  });

  it("adopt: exactly one of two callers from the same reading writes; a moved row writes nothing", () => {
    const pending = row();
    const first = adoptOnceStep(doc([pending]), "bot-1", "bx_abcdefgh", facts(pending), ctx());
    expect(first.result).toBe(true);
    const after = first.next!;
    expect(adoptOnceStep(after, "bot-1", "bx_abcdefgh", facts(pending), ctx())).toEqual({ result: false });
    expect(adoptOnceStep(doc([pending]), "bot-1", "bx_abcdefgh", null, ctx())).toEqual({ result: false });
  });

  it("adopt and retire still apply to a bot with a second row (a key-only row beside its remembered Boat)", () => {
    const remembered = row({ boxId: "bx_abcdefgh", createdAt: T0 - 10 });
    const keyOnly = row({ requestBody: '{"other":true}', createdAt: T0 - 5 });
    const two = doc([remembered, keyOnly]);
    // The reader fences the bot's first row, as the recovery plan does.
    const adopted = adoptOnceStep(two, "bot-1", "bx_abcdefgh", facts(remembered), ctx());
    expect(adopted.result).toBe(true);
    // Retire: exactly the row read, even when it is not the bot's first.
    const retired = retireOnceStep(doc([keyOnly, remembered]), facts(remembered));
    expect(retired.result).toBe(true);
    expect(retired.next?.requests).toEqual([keyOnly]);
    expect(retireOnceStep(retired.next!, facts(remembered))).toEqual({ result: false });
  });
});
