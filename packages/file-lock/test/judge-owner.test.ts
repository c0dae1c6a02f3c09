import { describe, expect, it } from "vitest";
import { createSystemIdentity, errnoError, judgeOwnerLiveness } from "../src/index.js";
import { freshDeadPid } from "./helpers.js";

describe("judgeOwnerLiveness: the lock's verdict for a recorded process, for previews", () => {
  it("calls a spawned-and-exited process dead and this process alive", async () => {
    expect(judgeOwnerLiveness({ pid: await freshDeadPid() })).toBe("dead");
    expect(judgeOwnerLiveness({ pid: process.pid })).toBe("alive");
  });

  it("never calls another host's process dead", async () => {
    expect(judgeOwnerLiveness({ pid: await freshDeadPid(), host: "some-other-host.invalid" })).toBe("alive");
  });

  it("calls a process from an earlier boot dead, and a reused pid (other start time) dead", () => {
    const identity = createSystemIdentity();
    expect(
      judgeOwnerLiveness({ pid: process.pid, bootId: "00000000-0000-4000-8000-000000000000" }, { identity }),
    ).toBe(identity.bootId() === undefined ? "alive" : "dead");
    const started = identity.processStartTime(process.pid);
    if (started !== undefined)
      expect(judgeOwnerLiveness({ pid: process.pid, startTime: started + 1 })).toBe("dead");
    expect(judgeOwnerLiveness({ pid: process.pid, startTime: started })).toBe("alive");
  });

  it("answers unverifiable (not dead) when the probe fails with an unexpected errno, and alive on EPERM", () => {
    const failing = (code: string) => () => {
      throw errnoError(code, "kill");
    };
    expect(judgeOwnerLiveness({ pid: 4242 }, { isProcessAlive: failing("EIO") })).toBe("unverifiable");
    expect(judgeOwnerLiveness({ pid: 4242 }, { isProcessAlive: failing("EPERM") })).toBe("alive");
    expect(judgeOwnerLiveness({ pid: 4242 }, { isProcessAlive: failing("ESRCH") })).toBe("dead");
  });
});
