import { describe, expect, it } from "vitest";
import {
  describeWait,
  isLifecycleError,
  LIFECYCLE_ERROR_STATUS,
  LIFECYCLE_MESSAGES,
  LifecycleError,
  retryIn,
} from "./errors.js";

describe("LifecycleError", () => {
  it("derives the status from the code table", () => {
    for (const [code, status] of Object.entries(LIFECYCLE_ERROR_STATUS)) {
      const error = new LifecycleError({ code: code as keyof typeof LIFECYCLE_ERROR_STATUS, message: "m" });
      expect(error.status).toBe(status);
      expect(error.code).toBe(code);
    }
  });

  it("carries the provider's status where the table allows it", () => {
    expect(new LifecycleError({ code: "provider_refused", status: 422, message: "m" }).status).toBe(422);
  });

  it("carries boat.dev's Retry-After, and says the wait as a person reads it", () => {
    const error = new LifecycleError({
      code: "provider_refused",
      status: 429,
      retryAfterMs: 3_600_000,
      message: "m",
    });
    expect(error.retryAfterMs).toBe(3_600_000);
    expect(new LifecycleError({ code: "bot_busy", message: "m" }).retryAfterMs).toBeUndefined();
    expect([1, 1_000, 45_500, 90_000, 91_000, 3_600_000, 5_400_001, 7_200_000].map(describeWait)).toEqual([
      "1 second",
      "1 second",
      "46 seconds",
      "90 seconds",
      "2 minutes",
      "60 minutes",
      "2 hours",
      "2 hours",
    ]);
    expect(retryIn(undefined)).toBe("retry in a moment");
    expect(retryIn(0)).toBe("retry in a moment");
    expect(retryIn(30_000)).toBe("retry in a moment");
    expect(retryIn(120_000)).toBe("retry in 2 minutes (boat.dev asked to wait that long)");
  });

  it("is recognised across copies by its registered marker, not by instanceof", () => {
    const error = new LifecycleError({ code: "bot_busy", message: LIFECYCLE_MESSAGES.botBusy });
    expect(isLifecycleError(error)).toBe(true);
    const foreign = Object.assign(new Error("x"), {
      [Symbol.for("@drydock/boat-lifecycle/LifecycleError")]: true,
    });
    expect(isLifecycleError(foreign)).toBe(true);
    expect(isLifecycleError(new Error("x"))).toBe(false);
    expect(isLifecycleError(null)).toBe(false);
  });

  it("uses the seeds' wording for the fences", () => {
    expect(LIFECYCLE_ERROR_STATUS.computer_deleting).toBe(409);
    expect(LIFECYCLE_ERROR_STATUS.previous_deletion_finished).toBe(409);
    expect(LIFECYCLE_MESSAGES.computerDeleting).toBe(
      "this cloud computer is being deleted — wait for it to finish, or retry Delete if it needs attention",
    );
    expect(LIFECYCLE_MESSAGES.previousDeletionFinished).toBe(
      "the previous cloud computer deletion finished — retry to create a new computer",
    );
    expect(LIFECYCLE_MESSAGES.confirmationMismatch).toBe(
      "cloud computer confirmation no longer matches — refresh and try again",
    );
  });
});
