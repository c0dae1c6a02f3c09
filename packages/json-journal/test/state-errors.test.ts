import { LockError } from "@drydock/file-lock";
import { describe, expect, it } from "vitest";
import { lockErrorDetail, toJournalStateError } from "../src/index.js";

class Paused extends Error {
  constructor(
    readonly detail: string,
    override readonly cause?: unknown,
  ) {
    super(`paused: ${detail}`);
  }
}
const paused = (detail: string, cause?: unknown) => new Paused(detail, cause);
const isOwn = (value: unknown) => value instanceof Paused;

describe("lock failures as journal state errors", () => {
  it("uses the seeds' words, with the holder's label for a timeout", () => {
    expect(lockErrorDetail(new LockError({ code: "LOCK_TIMEOUT", message: "busy" }))).toBe(
      "locked by another drydock process",
    );
    expect(lockErrorDetail(new LockError({ code: "LOCK_TIMEOUT", message: "busy" }), "bot registry")).toBe(
      "locked by another bot registry process",
    );
    expect(lockErrorDetail(new LockError({ code: "LOCK_INVALID", message: "bad" }))).toBe("lock is invalid");
    expect(lockErrorDetail(new LockError({ code: "LOCK_IO", message: "io" }))).toBe("lock is unavailable");
  });

  it("passes the journal's own errors through, maps a lock failure to its detail and anything else to unavailable", () => {
    const own = paused("invalid");
    expect(toJournalStateError(own, isOwn, paused)).toBe(own);
    const aborted = new LockError({ code: "LOCK_ABORTED", message: "aborted" });
    const mapped = toJournalStateError(aborted, isOwn, paused) as Paused;
    expect(mapped.detail).toBe("locked, and the caller cancelled the wait for it");
    expect(mapped.cause).toBe(aborted);
    const other = new Error("EIO");
    const unavailable = toJournalStateError(other, isOwn, paused) as Paused;
    expect(unavailable.detail).toBe("unavailable");
    expect(unavailable.cause).toBe(other);
  });
});
