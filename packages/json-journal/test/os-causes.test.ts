import { LockError } from "@drydock/file-lock";
import { describe, expect, it } from "vitest";
import { isNotDamaged } from "../src/journal.js";
import { osCauseDetail } from "../src/os-causes.js";
import { lockErrorDetail, toJournalStateError } from "../src/state-errors.js";

const errnos = ["ENOSPC", "EDQUOT", "EROFS", "EACCES", "EPERM", "EMFILE", "ENFILE", "EIO", "ENOMEM", "EBUSY"];

function fsError(code: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`${code}: injected`), { code });
}

describe("OS causes of journal and lock failures", () => {
  it.each(errnos)(
    "a lock file that cannot be created (%s) names the cause, not 'lock is unavailable'",
    (code) => {
      const lock = new LockError({ code: "LOCK_IO", path: "/d/x.lock", message: "m", cause: fsError(code) });
      const detail = lockErrorDetail(lock);
      expect(detail).toContain(`(${code})`);
      expect(detail).toContain("the file is as it was");
      expect(detail).not.toMatch(/lock is unavailable|invalid|repair/i);
      expect(isNotDamaged(detail)).toBe(true);
    },
  );

  it("ENOSPC says to free space", () => {
    expect(osCauseDetail(fsError("ENOSPC"))).toContain("the disk is full (ENOSPC)");
    expect(osCauseDetail(fsError("ENOSPC"))).toContain("free space on that file system, then retry");
  });

  it("a write's stray fs error becomes the OS detail through toJournalStateError", () => {
    const out = toJournalStateError(
      fsError("EROFS"),
      () => false,
      (detail) => new Error(detail),
    ) as Error;
    expect(out.message).toContain("the file system is read-only (EROFS)");
  });

  it("an unknown errno keeps the old wording", () => {
    const lock = new LockError({ code: "LOCK_IO", path: "/d/x.lock", message: "m", cause: fsError("EXDEV") });
    expect(lockErrorDetail(lock)).toBe("lock is unavailable");
    expect(osCauseDetail(new Error("x"))).toBeUndefined();
  });
});
