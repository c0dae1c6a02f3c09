import { describe, expect, it } from "vitest";
import { type VerifiedChain, verifiedChains } from "../src/internal/verified-chains.js";
import type { SagaEvent } from "../src/schema.js";

/** A chain whose remembered bytes total `size` (one event; the event object itself is not inspected). */
function chainOf(size: number): VerifiedChain {
  return { events: [{ event: {} as SagaEvent, bytes: Buffer.alloc(size) }], head: null };
}

describe("the memo of verified chains", () => {
  it("holds at most its byte budget, letting the least recently replayed chains go first", () => {
    const memo = verifiedChains(1000);
    memo.remember("a", chainOf(400));
    memo.remember("b", chainOf(400));
    memo.remember("a", chainOf(400)); // replayed again: now the most recent
    memo.remember("c", chainOf(400)); // over budget: b, the least recent, goes
    expect(memo.recall("a")).toBeDefined();
    expect(memo.recall("b")).toBeUndefined();
    expect(memo.recall("c")).toBeDefined();
  });

  it("never holds a chain larger than the whole budget, and forgets on request", () => {
    const memo = verifiedChains(1000);
    memo.remember("small", chainOf(600));
    memo.remember("huge", chainOf(1001));
    expect(memo.recall("huge")).toBeUndefined();
    expect(memo.recall("small")).toBeDefined();
    memo.forget("small");
    expect(memo.recall("small")).toBeUndefined();
    // What was forgotten no longer counts: two chains that fit together both stay.
    memo.remember("x", chainOf(500));
    memo.remember("y", chainOf(500));
    expect(memo.recall("x")).toBeDefined();
    expect(memo.recall("y")).toBeDefined();
  });
});
