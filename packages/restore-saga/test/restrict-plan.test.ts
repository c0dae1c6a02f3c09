import { describe, expect, it } from "vitest";
import { planFromScan, restrictPlan, touchedPaths } from "../src/internal/apply.js";
import type { ManifestEntry } from "../src/schema.js";

const dir = (path: string): ManifestEntry => ({ type: "dir", path, mode: 0o755 });
const file = (path: string, c = "a"): ManifestEntry => ({
  type: "file",
  path,
  size: 1,
  mode: 0o644,
  sha256: c.repeat(64),
});

describe("restrictPlan: a rollback changes only what its restore touched", () => {
  it("recreates the missing parents of a touched directory, not just the directory", () => {
    // Before the restore: a/b (empty). The restore removed a/b; then someone removed a.
    const safety = [dir("a"), dir("a/b")];
    const restore = planFromScan(safety, [dir("a")]);
    expect([...touchedPaths(restore)]).toEqual(["a/b"]);
    const current: ManifestEntry[] = [];
    const { plan, outside } = restrictPlan(planFromScan(current, safety), current, touchedPaths(restore));
    expect(outside).toEqual([]);
    expect(plan.ops).toEqual([
      { op: "mkdir", path: "a", mode: 0o755 },
      { op: "mkdir", path: "a/b", mode: 0o755 },
    ]);
  });

  it("refuses when something outside the touched paths is where a needed parent belongs", () => {
    const safety = [dir("a"), file("a/x")];
    const restore = planFromScan(safety, [dir("a")]);
    // Since: a was replaced by a file.
    const current = [file("a", "b")];
    const { outside } = restrictPlan(planFromScan(current, safety), current, touchedPaths(restore));
    expect(outside).toEqual(["a"]);
  });

  it("refuses when a directory it would remove holds something written since, however deep", () => {
    const safety = [dir("d")];
    const restore = planFromScan(safety, [dir("d"), dir("d/new"), file("d/new/x")]);
    const current = [dir("d"), dir("d/new"), file("d/new/x"), dir("d/new/sub"), file("d/new/sub/mine")];
    const { plan, outside } = restrictPlan(planFromScan(current, safety), current, touchedPaths(restore));
    expect(outside).toEqual(["d/new/sub", "d/new/sub/mine"]);
    expect(plan.ops.map((op) => ("path" in op ? op.path : op.entry.path))).not.toContain("d/new/sub/mine");
  });

  it("leaves an untouched path alone even where it differs from the safety checkpoint", () => {
    const safety = [file("kept", "a"), file("changed", "a")];
    const restore = planFromScan(safety, [file("kept", "a"), file("changed", "b")]);
    const current = [file("kept", "c"), file("changed", "b"), file("new-since")];
    const { plan, outside } = restrictPlan(planFromScan(current, safety), current, touchedPaths(restore));
    expect(outside).toEqual([]);
    expect(plan.ops).toEqual([{ op: "write", entry: file("changed", "a") }]);
  });
});
