import { mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { trustedFileIdentity } from "../src/index.js";

describe("trustedFileIdentity: what a memo outside the journal may key on", () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });
  const fresh = () => {
    const dir = mkdtempSync(join(tmpdir(), "drydock-identity-"));
    dirs.push(dir);
    return join(dir, "doc.json");
  };

  it("a missing file is 'absent'; a file changed within the racy window proves nothing (null)", () => {
    const file = fresh();
    expect(trustedFileIdentity(file, Date.now())).toBe("absent");
    writeFileSync(file, "{}");
    expect(trustedFileIdentity(file, Date.now())).toBeNull();
  });

  it("past the window: the same identity while unchanged, another after a same-size rewrite by rename", () => {
    const file = fresh();
    writeFileSync(file, '{"a":1}');
    // Seen from 3 s later: the change is older than the window.
    const later = () => Date.now() + 3_000;
    const first = trustedFileIdentity(file, later());
    expect(first).toMatch(/^\d+:\d+:7:\d+:\d+$/);
    expect(trustedFileIdentity(file, later())).toBe(first);
    writeFileSync(`${file}.tmp`, '{"a":2}');
    renameSync(`${file}.tmp`, file);
    const second = trustedFileIdentity(file, later());
    expect(second).not.toBeNull();
    expect(second).not.toBe(first);
  });
});
