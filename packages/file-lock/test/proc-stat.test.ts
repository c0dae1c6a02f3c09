import { describe, expect, it } from "vitest";
import { parseProcStatStartTime, parseProcStatState } from "../src/internal/identity.js";
import { provesProcessExited } from "../src/internal/liveness.js";

/** A /proc/<pid>/stat line with the given comm, state and thread count (fields 4..52 filled in). */
function statLine(comm: string, state: string, threads: number, startTime = 2538214): string {
  // Fields 4 (ppid) .. 19 (nice), then 20 num_threads, 21 itrealvalue, 22 starttime, then 23 .. 52.
  const before = [
    "20348",
    "20346",
    "15888",
    "0",
    "-1",
    "4227084",
    "98",
    "0",
    "0",
    "0",
    "0",
    "0",
    "0",
    "0",
    "20",
    "0",
  ];
  const after = ["0", String(startTime), ...Array.from({ length: 30 }, () => "0")];
  return `20350 (${comm}) ${[state, ...before, String(threads), ...after].join(" ")}\n`;
}

describe("parseProcStatState: fields 3 and 20 of /proc/<pid>/stat, counted from the last ')'", () => {
  it("reads a real zombie's line", () => {
    const line =
      "20350 (sleep) Z 20348 20346 15888 0 -1 4227084 98 0 0 0 0 0 0 0 20 0 1 0 2538214 0 0 18446744073709551615 0 0 0 0 0 0 0 6 0 1 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n";
    expect(parseProcStatState(line)).toEqual({ state: "Z", threads: 1 });
    expect(parseProcStatStartTime(line)).toBe(2538214);
  });

  it("is not fooled by a comm holding ')', ' Z (', spaces or digits", () => {
    for (const comm of ["a) Z (b", ") Z 1 1 1 (", "x) X 20 (", "(sleep)", "we ird )", ")", "1 2 3", "Z"]) {
      expect(parseProcStatState(statLine(comm, "S", 7)), comm).toEqual({ state: "S", threads: 7 });
      expect(parseProcStatState(statLine(comm, "Z", 1)), comm).toEqual({ state: "Z", threads: 1 });
      expect(parseProcStatStartTime(statLine(comm, "S", 7, 99)), comm).toBe(99);
    }
  });

  it("answers undefined (unknown, so no zombie proof) for anything malformed", () => {
    const good = statLine("node", "Z", 1);
    for (const bad of [
      "",
      "20350 node Z 1",
      "20350 (node)",
      "20350 (node)Z 1 2 3",
      good.slice(0, good.indexOf(" 1 0 2538214")), // cut before field 20
      statLine("node", "ZZ", 1),
      statLine("node", "", 1),
      statLine("node", "Z", 1).replace(" 1 0 2538214", " one 0 2538214"),
      statLine("node", "Z", 1).replace(" 1 0 2538214", " -1 0 2538214"),
    ]) {
      expect(parseProcStatState(bad), JSON.stringify(bad)).toBeUndefined();
    }
  });

  it("proves an exit only for Z or X with exactly one thread", () => {
    expect(provesProcessExited({ state: "Z", threads: 1 })).toBe(true);
    expect(provesProcessExited({ state: "X", threads: 1 })).toBe(true);
    expect(provesProcessExited({ state: "Z", threads: 2 })).toBe(false);
    expect(provesProcessExited({ state: "Z", threads: 0 })).toBe(false);
    expect(provesProcessExited({ state: "S", threads: 1 })).toBe(false);
    expect(provesProcessExited(undefined)).toBe(false);
  });
});
