import { writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { deadPid, hasRepeatedMemberName, spawnWorker } from "../src/index.js";

describe("test-kit", () => {
  it("hasRepeatedMemberName sees a name repeated within one object, and only that", () => {
    expect(hasRepeatedMemberName('{"a":1,"a":2}')).toBe(true);
    expect(hasRepeatedMemberName('{"note":{"":false,"":false}}')).toBe(true);
    expect(hasRepeatedMemberName('{"a":1,"\\u0061":2}')).toBe(true);
    expect(hasRepeatedMemberName('{"x":[{"k":1},{"k":"a\\":b","j":{"k":2}}]}')).toBe(false);
    expect(hasRepeatedMemberName('[":", {"a" : ":"}, "b"]')).toBe(false);
    expect(hasRepeatedMemberName('{"__proto__":1,"b":{}}')).toBe(false);
  });

  it("deadPid names a process that no longer exists", () => {
    const pid = deadPid();
    expect(() => process.kill(pid, 0)).toThrow(expect.objectContaining({ code: "ESRCH" }));
  });

  it("spawnWorker reports lines as they come, its exit, and kills its whole group", async () => {
    const script = join(tmpdir(), `drydock-kit-${process.pid}.ts`);
    writeFileSync(script, 'console.log("ready"); setInterval(() => {}, 1000);\n');
    const worker = spawnWorker(script, []);
    expect(await worker.waitFor((line) => line === "ready")).toBe("ready");
    expect(worker.lines).toEqual(["ready"]);
    worker.kill();
    expect(await worker.exited).toMatchObject({ signal: "SIGKILL" });
    await expect(worker.waitFor((line) => line === "never")).rejects.toThrow(/exited/);
  });
});
