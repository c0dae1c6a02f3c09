import { readdirSync, readFileSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type FileOps, failNthCall, nodeFileOps } from "@drydock/file-lock";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  isJsonJournalError,
  STALE_TEMP_MS,
  sweepStaleTemps,
  writeFileAtomic,
  writeFileAtomicAsync,
} from "../src/index.js";
import { deadPid, makeTempDir, removeDir, tempsIn } from "./helpers.js";

const FAULT_CODES = ["EIO", "ENOSPC", "EEXIST", "EPERM", "EXDEV"] as const;

let dir: string;
beforeEach(() => {
  dir = makeTempDir();
});
afterEach(() => {
  removeDir(dir);
});

describe("writeFileAtomic", () => {
  it("creates a missing file with mode 0600 and leaves no temporary file", () => {
    const target = join(dir, "doc.json");
    writeFileAtomic(target, "hello\n");
    expect(readFileSync(target, "utf8")).toBe("hello\n");
    expect(statSync(target).mode & 0o777).toBe(0o600);
    expect(readdirSync(dir)).toEqual(["doc.json"]);
  });

  it("replaces an existing file with a new inode carrying the requested mode", () => {
    const target = join(dir, "doc.json");
    writeFileSync(target, "old", { mode: 0o644 });
    const before = statSync(target).ino;
    writeFileAtomic(target, new Uint8Array([1, 2, 3]), { mode: 0o640 });
    expect([...readFileSync(target)]).toEqual([1, 2, 3]);
    expect(statSync(target).ino).not.toBe(before);
    expect(statSync(target).mode & 0o777).toBe(0o640);
  });

  it("writes everything even when the fs accepts only a few bytes per write", () => {
    const target = join(dir, "doc.json");
    const trickle: FileOps = {
      ...nodeFileOps,
      writeSync: ((fd: number, buffer: Uint8Array, offset: number, length: number, position: number) =>
        nodeFileOps.writeSync(fd, buffer, offset, Math.min(length, 7), position)) as FileOps["writeSync"],
    };
    const data = "0123456789abcdef".repeat(1000);
    writeFileAtomic(target, data, { fs: trickle });
    expect(readFileSync(target, "utf8")).toBe(data);
  });

  it("fails with WRITE_FAILED and keeps the target when a write makes no progress", () => {
    const target = join(dir, "doc.json");
    writeFileSync(target, "old");
    const stuck: FileOps = { ...nodeFileOps, writeSync: (() => 0) as unknown as FileOps["writeSync"] };
    expect(() => writeFileAtomic(target, "new", { fs: stuck })).toThrow(
      expect.objectContaining({ code: "WRITE_FAILED", status: 503 }),
    );
    expect(readFileSync(target, "utf8")).toBe("old");
    expect(tempsIn(dir)).toEqual([]);
  });

  it("flushes the file before the rename and the directory after it, and skips both when not durable", () => {
    const target = join(dir, "doc.json");
    const log: string[] = [];
    const logging: FileOps = {
      ...nodeFileOps,
      fsyncSync: ((fd: number) => {
        log.push(`fsync ${statSync(`/proc/self/fd/${fd}`).isDirectory() ? "dir" : "file"}`);
        nodeFileOps.fsyncSync(fd);
      }) as FileOps["fsyncSync"],
      renameSync: ((from: string, to: string) => {
        log.push("rename");
        nodeFileOps.renameSync(from, to);
      }) as FileOps["renameSync"],
    };
    writeFileAtomic(target, "a", { fs: logging });
    expect(log).toEqual(["fsync file", "rename", "fsync dir"]);
    log.length = 0;
    writeFileAtomic(target, "b", { fs: logging, durable: false });
    expect(log).toEqual(["rename"]);
    expect(readFileSync(target, "utf8")).toBe("b");
  });

  it("refuses bad arguments with INVALID_ARGUMENT before touching the disk", () => {
    expect(() => writeFileAtomic("", "x")).toThrow(
      expect.objectContaining({ code: "INVALID_ARGUMENT", status: 400 }),
    );
    expect(() => writeFileAtomic(join(dir, "a\0b"), "x")).toThrow(
      expect.objectContaining({ code: "INVALID_ARGUMENT" }),
    );
    expect(() => writeFileAtomic(join(dir, "a"), 42 as unknown as string)).toThrow(
      expect.objectContaining({ code: "INVALID_ARGUMENT" }),
    );
    expect(() => writeFileAtomic(join(dir, "a"), "x", { mode: 0o10000 })).toThrow(
      expect.objectContaining({ code: "INVALID_ARGUMENT" }),
    );
    expect(readdirSync(dir)).toEqual([]);
  });

  it("async twin writes the same bytes and mode, with and without an injected fs", async () => {
    const target = join(dir, "doc.json");
    await writeFileAtomicAsync(target, "one\n");
    expect(readFileSync(target, "utf8")).toBe("one\n");
    await writeFileAtomicAsync(target, "two\n", { fs: nodeFileOps, mode: 0o600 });
    expect(readFileSync(target, "utf8")).toBe("two\n");
    expect(statSync(target).mode & 0o777).toBe(0o600);
    expect(readdirSync(dir)).toEqual(["doc.json"]);
  });

  it("async twin reports a failure as WRITE_FAILED and keeps the old bytes", async () => {
    const target = join(dir, "doc.json");
    writeFileSync(target, "old");
    await expect(writeFileAtomicAsync(join(dir, "missing", "doc.json"), "new")).rejects.toMatchObject({
      code: "WRITE_FAILED",
    });
    expect(readFileSync(target, "utf8")).toBe("old");
  });
});

describe("writeFileAtomic under injected fs faults (fail call N = 1.. until success)", () => {
  for (const variant of ["sync", "async"] as const) {
    for (const initial of ["existing", "missing"] as const) {
      it(`${variant}, target ${initial}: every failure is typed, the target is old or new, no temp is left`, async () => {
        const target = join(dir, "doc.json");
        const oldBytes = '{"v":"old"}\n';
        const newBytes = `{"v":"${"new".repeat(5000)}"}\n`;
        let faultsSeen = 0;
        for (const code of FAULT_CODES) {
          let completed = false;
          for (let n = 1; n <= 40 && !completed; n++) {
            if (initial === "existing") writeFileSync(target, oldBytes, { mode: 0o600 });
            else removeDir(target);
            const faulty = failNthCall(nodeFileOps, { n, code });
            let failure: unknown = null;
            try {
              if (variant === "sync") writeFileAtomic(target, newBytes, { fs: faulty.ops });
              else await writeFileAtomicAsync(target, newBytes, { fs: faulty.ops });
            } catch (error) {
              failure = error;
            }
            const now = readdirSync(dir).includes("doc.json") ? readFileSync(target, "utf8") : null;
            if (failure) {
              faultsSeen += 1;
              expect(isJsonJournalError(failure)).toBe(true);
              const errorCode = (failure as { code: string }).code;
              expect(["WRITE_FAILED", "DIRECTORY_SYNC_FAILED"]).toContain(errorCode);
              // WRITE_FAILED: nothing changed. DIRECTORY_SYNC_FAILED: the rename happened.
              expect(now).toBe(
                errorCode === "WRITE_FAILED" ? (initial === "existing" ? oldBytes : null) : newBytes,
              );
            } else {
              expect(now).toBe(newBytes);
            }
            expect(tempsIn(dir)).toEqual([]);
            // The next call, on a healthy fs, works.
            writeFileAtomic(target, "after\n");
            expect(readFileSync(target, "utf8")).toBe("after\n");
            completed = !faulty.fired();
          }
          expect(completed).toBe(true);
        }
        expect(faultsSeen).toBeGreaterThanOrEqual(FAULT_CODES.length * 6);
      });
    }
  }
});

describe("sweepStaleTemps", () => {
  /** Writes `path` as last modified `ageMs` ago (a temp its writer abandoned that long ago). */
  const writeAged = (path: string, data: string, ageMs = STALE_TEMP_MS + 60_000) => {
    writeFileSync(path, data);
    const when = (Date.now() - ageMs) / 1000;
    utimesSync(path, when, when);
  };

  it("removes temps of dead writers only, never promotes them, and honours the seeds' temp names", () => {
    const target = join(dir, "doc.json");
    writeFileSync(target, "current\n");
    const dead = deadPid();
    const live = process.ppid;
    const names = {
      deadOurs: `.doc.json.${dead}.0123456789abcdef.tmp`,
      deadSeed: `doc.json.${dead}.0b9c2a8e-8f1d-4c3a-9b7e-1234567890ab.tmp`,
      deadOther: `.other.json.${dead}.fedcba9876543210.tmp`,
      liveOurs: `.doc.json.${live}.00000000000000aa.tmp`,
      selfOurs: `.doc.json.${process.pid}.00000000000000bb.tmp`,
      unrelated: "notes.tmp",
    };
    for (const name of Object.values(names)) writeAged(join(dir, name), "partial");

    expect(sweepStaleTemps(dir, { name: "doc.json" }).removed.sort()).toEqual(
      [join(dir, names.deadOurs), join(dir, names.deadSeed)].sort(),
    );
    expect(readFileSync(target, "utf8")).toBe("current\n");
    expect(sweepStaleTemps(dir).removed).toEqual([join(dir, names.deadOther)]);
    expect(readdirSync(dir).sort()).toEqual(
      ["doc.json", names.liveOurs, names.selfOurs, names.unrelated].sort(),
    );
  });

  it("asks the injected liveness check and treats a missing directory as empty", () => {
    writeAged(join(dir, ".doc.json.4242.0123456789abcdef.tmp"), "x");
    const asked: number[] = [];
    const alive = (pid: number) => {
      asked.push(pid);
      return true;
    };
    expect(sweepStaleTemps(dir, { isProcessAlive: alive }).removed).toEqual([]);
    expect(asked).toEqual([4242]);
    expect(sweepStaleTemps(dir, { isProcessAlive: () => false }).removed).toHaveLength(1);
    expect(sweepStaleTemps(join(dir, "absent")).removed).toEqual([]);
  });

  it("keeps a dead writer's temp until it is minAgeMs old: a live writer in another pid namespace can look dead", () => {
    const dead = deadPid();
    const young = `.doc.json.${dead}.00000000000000a1.tmp`;
    const almost = `.doc.json.${dead}.00000000000000a2.tmp`;
    const old = `.doc.json.${dead}.00000000000000a3.tmp`;
    const liveOld = `.doc.json.${process.ppid}.00000000000000a4.tmp`;
    writeAged(join(dir, young), "being written", 0);
    writeAged(join(dir, almost), "being written", STALE_TEMP_MS - 30_000);
    writeAged(join(dir, old), "abandoned");
    writeAged(join(dir, liveOld), "slow but alive");
    expect(STALE_TEMP_MS).toBe(5 * 60 * 1000);
    expect(sweepStaleTemps(dir).removed).toEqual([join(dir, old)]);
    expect(readdirSync(dir).sort()).toEqual([almost, liveOld, young].sort());
    // A caller that knows no writer can be mid-write (a journal, under its lock) removes them at once.
    expect(sweepStaleTemps(dir, { minAgeMs: 0 }).removed.sort()).toEqual(
      [join(dir, almost), join(dir, young)].sort(),
    );
    expect(readdirSync(dir)).toEqual([liveOld]);
    expect(() => sweepStaleTemps(dir, { minAgeMs: -1 })).toThrow(
      expect.objectContaining({ code: "INVALID_ARGUMENT" }),
    );
  });

  it("fails with SWEEP_FAILED when the directory cannot be listed", () => {
    const faulty = failNthCall(nodeFileOps, { n: 1, code: "EIO" });
    expect(() => sweepStaleTemps(dir, { fs: faulty.ops })).toThrow(
      expect.objectContaining({ code: "SWEEP_FAILED" }),
    );
  });
});
