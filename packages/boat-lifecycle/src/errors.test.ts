import { describe, expect, it } from "vitest";
import { isLifecycleError, LIFECYCLE_ERROR_STATUS, LIFECYCLE_MESSAGES, LifecycleError } from "./errors.js";

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
