import { execFileSync, spawnSync } from "node:child_process";
import {
  appendFileSync,
  closeSync,
  fstatSync,
  mkdtempSync,
  openSync,
  rmSync,
  truncateSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { type FileOps, nodeFileOps } from "@drydock/file-lock";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { SagaError } from "../src/errors.js";
import { closeBehind, readRegularFile, readWhole } from "../src/internal/files.js";

const PACKAGE_DIR = join(dirname(fileURLToPath(import.meta.url)), "..");

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "drydock-files-"));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

/** Counts reads, and can make every read return at most `maxPerRead` bytes (a file system with short reads). */
function countingReads(maxPerRead = Number.MAX_SAFE_INTEGER): { fs: FileOps; reads(): number } {
  let reads = 0;
  const fs: FileOps = {
    ...nodeFileOps,
    readSync: ((fd: number, buffer: Buffer, offset: number, length: number, position: number) => {
      reads += 1;
      return nodeFileOps.readSync(fd, buffer, offset, Math.min(length, maxPerRead), position);
    }) as FileOps["readSync"],
  };
  return { fs, reads: () => reads };
}

function withFile<T>(bytes: Buffer, fn: (fd: number, path: string) => T): T {
  const path = join(dir, "f.bin");
  writeFileSync(path, bytes);
  const fd = openSync(path, "r");
  try {
    return fn(fd, path);
  } finally {
    closeSync(fd);
  }
}

const bytes = Buffer.from(Array.from({ length: 5000 }, (_, i) => i % 251));

describe("readWhole", () => {
  it("reads a file of the size its stat gave in one read", () => {
    const { fs, reads } = countingReads();
    const got = withFile(bytes, (fd) => readWhole(fs, fd, bytes.length, 1 << 20));
    expect(got.equals(bytes)).toBe(true);
    expect(reads()).toBe(1);
  });

  it("reads on past the stat size when the file grew, and stops short when it shrank", () => {
    const { fs } = countingReads();
    const grown = withFile(bytes, (fd, path) => {
      appendFileSync(path, Buffer.alloc(70_000, 7));
      return readWhole(fs, fd, bytes.length, 1 << 20);
    });
    expect(grown.length).toBe(bytes.length + 70_000);
    expect(grown.subarray(0, bytes.length).equals(bytes)).toBe(true);
    const shrunk = withFile(bytes, (fd, path) => {
      truncateSync(path, 100);
      return readWhole(fs, fd, bytes.length, 1 << 20);
    });
    expect(shrunk.equals(bytes.subarray(0, 100))).toBe(true);
  });

  it("reads the whole file from a file system that returns short reads", () => {
    const { fs, reads } = countingReads(333);
    const got = withFile(bytes, (fd) => readWhole(fs, fd, bytes.length, 1 << 20));
    expect(got.equals(bytes)).toBe(true);
    expect(reads()).toBe(Math.ceil(bytes.length / 333));
  });

  it("refuses more than maxBytes, whether the stat said so or the file grew", () => {
    const { fs } = countingReads();
    expect(() => withFile(bytes, (fd) => readWhole(fs, fd, bytes.length, 4999))).toThrow(RangeError);
    expect(() => withFile(bytes, (fd) => readWhole(fs, fd, bytes.length, 4000))).toThrow(RangeError);
    expect(() =>
      withFile(bytes, (fd, path) => {
        appendFileSync(path, "x");
        return readWhole(fs, fd, bytes.length, bytes.length);
      }),
    ).toThrow(RangeError);
    expect(withFile(bytes, (fd) => readWhole(fs, fd, bytes.length, bytes.length)).equals(bytes)).toBe(true);
  });
});

describe("readRegularFile", () => {
  const read = (path: string) => readRegularFile(nodeFileOps, path, { maxBytes: 4096, what: "test file" });

  it("refuses a FIFO at the name without blocking on it", () => {
    const path = join(dir, "fifo");
    execFileSync("mkfifo", [path]);
    // In a child: an open that blocks on the FIFO (no reader's peer ever comes) shows up as a timeout.
    const child = spawnSync(
      process.execPath,
      [
        "--conditions=@drydock/source",
        "--import",
        "tsx",
        join(PACKAGE_DIR, "test/fixtures/read-child.ts"),
        path,
      ],
      { cwd: PACKAGE_DIR, timeout: 20_000, encoding: "utf8" },
    );
    expect(child.signal).toBeNull();
    expect(JSON.parse(child.stdout)).toEqual({
      ok: false,
      message: expect.stringMatching(/is not a regular file/),
    });
  }, 30_000);

  it("refuses a symlink, a second hard link and an oversized file; a missing file is null", () => {
    writeFileSync(join(dir, "a"), "a");
    execFileSync("ln", ["-s", join(dir, "a"), join(dir, "sym")]);
    execFileSync("ln", [join(dir, "a"), join(dir, "hard")]);
    writeFileSync(join(dir, "big"), Buffer.alloc(4097));
    for (const [name, why] of [
      ["sym", /symbolic link/],
      ["hard", /more than one hard link/],
      ["big", /larger than 4096 bytes/],
    ] as const) {
      let caught: unknown;
      try {
        read(join(dir, name));
      } catch (error) {
        caught = error;
      }
      expect(caught).toBeInstanceOf(SagaError);
      expect((caught as SagaError).code).toBe("CORRUPT");
      expect(String((caught as Error).message)).toMatch(why);
    }
    expect(read(join(dir, "missing"))).toBeNull();
  });
});

describe("closeBehind", () => {
  const isOpen = (fd: number) => {
    try {
      fstatSync(fd);
      return true;
    } catch {
      return false;
    }
  };
  const openSome = (n: number) => {
    writeFileSync(join(dir, "f"), "x");
    return Array.from({ length: n }, () => openSync(join(dir, "f"), "r"));
  };

  it("closes on libuv's threads, at most 64 at a time, the rest in place; settle waits for all", async () => {
    const parked: (() => void)[] = [];
    const fs: FileOps = {
      ...nodeFileOps,
      // Park each asynchronous close until the test lets it go, to see what is still open meanwhile.
      close: ((fd: number, done: (error: NodeJS.ErrnoException | null) => void) => {
        parked.push(() => nodeFileOps.close(fd, done));
      }) as FileOps["close"],
    };
    const closer = closeBehind(fs);
    const fds = openSome(70);
    for (const fd of fds) closer.add(fd);
    expect(parked).toHaveLength(64);
    expect(fds.slice(0, 64).every(isOpen)).toBe(true);
    expect(fds.slice(64).some(isOpen)).toBe(false);
    let settled = false;
    const settling = closer.settle().then(() => {
      settled = true;
    });
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(settled).toBe(false);
    for (const release of parked.splice(0)) release();
    await settling;
    expect(fds.some(isOpen)).toBe(false);
  });

  it("closes in place when the asynchronous close throws, and ignores a failed close", async () => {
    let calls = 0;
    const fs: FileOps = {
      ...nodeFileOps,
      close: ((fd: number, done: (error: NodeJS.ErrnoException | null) => void) => {
        calls += 1;
        if (calls === 1) throw Object.assign(new Error("EIO"), { code: "EIO" });
        nodeFileOps.close(fd, () => done(Object.assign(new Error("EIO"), { code: "EIO" })));
      }) as FileOps["close"],
    };
    const closer = closeBehind(fs);
    const fds = openSome(2);
    for (const fd of fds) closer.add(fd);
    await closer.settle();
    expect(calls).toBe(2);
    expect(fds.some(isOpen)).toBe(false);
  });
});
