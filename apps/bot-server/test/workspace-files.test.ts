/**
 * Workspace file access when the tree changes under a request: a directory swapped for a symlink (or a
 * FIFO or link swapped in at the last name) between the checks and the use must never let a write land,
 * or a read be served, outside the workspace. The swaps run at the module's hook points, so every
 * interleaving is deterministic.
 */
import { execFileSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type WorkspaceWriteHooks, workspaceFiles } from "../src/workspace-files.js";
import { tempDir } from "./helpers.js";

let tmp: ReturnType<typeof tempDir>;
let root: string;
let outside: string;

beforeEach(() => {
  tmp = tempDir("wsfiles");
  root = join(tmp.dir, "ws");
  outside = join(tmp.dir, "outside");
  mkdirSync(join(root, "d"), { recursive: true });
  mkdirSync(outside);
});
afterEach(() => tmp.cleanup());

/** Replaces the workspace's directory `d` with a symlink to `outside` (the old directory moves aside). */
const swapParentForLink = () => {
  renameSync(join(root, "d"), join(root, "old"));
  symlinkSync(outside, join(root, "d"));
};

/** Every file under `dir`, relative, walking real directories only. */
function tree(dir: string, rel = ""): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = rel ? `${rel}/${e.name}` : e.name;
    if (e.isDirectory()) out.push(...tree(join(dir, e.name), p));
    else out.push(p);
  }
  return out;
}

describe("workspaceFiles: a parent swapped for a symlink during a write", () => {
  for (const point of ["beforeTempCreated", "afterTempCreated", "beforeRename"] as const) {
    it(`refuses (400) a swap at ${point}: nothing lands outside and no temp is left`, () => {
      const hooks: WorkspaceWriteHooks = { [point]: swapParentForLink };
      const ws = workspaceFiles(root, { hooks });
      let thrown: unknown;
      try {
        ws.write("d/f", Buffer.from("escaped"));
      } catch (error) {
        thrown = error;
      }
      expect(thrown).toMatchObject({ status: 400, code: "invalid_path" });
      expect((thrown as Error).message).not.toContain(tmp.dir);
      expect(readdirSync(outside)).toEqual([]);
      expect(tree(root).filter((p) => p.endsWith(".tmp"))).toEqual([]);
      expect(existsSync(join(root, "old", "f"))).toBe(false);
    });
  }

  it("writes normally when nothing is swapped", () => {
    workspaceFiles(root).write("d/f", Buffer.from("ok"));
    expect(readFileSync(join(root, "d", "f"), "utf8")).toBe("ok");
    expect(tree(root)).toEqual(["d/f"]);
  });
});

describe("workspaceFiles: the last name swapped for a link or a FIFO during a read", () => {
  it("does not follow a symlink swapped in after the checks", () => {
    writeFileSync(join(root, "d", "f"), "inside");
    writeFileSync(join(outside, "secret"), "outside");
    const ws = workspaceFiles(root, {
      readHooks: {
        beforeOpen: () => {
          rmSync(join(root, "d", "f"));
          symlinkSync(join(outside, "secret"), join(root, "d", "f"));
        },
      },
    });
    expect(() => ws.read("d/f")).toThrow(expect.objectContaining({ status: 400 }));
  });

  it("does not block on a FIFO swapped in after the checks", () => {
    writeFileSync(join(root, "d", "f"), "inside");
    const ws = workspaceFiles(root, {
      readHooks: {
        beforeOpen: () => {
          rmSync(join(root, "d", "f"));
          execFileSync("mkfifo", [join(root, "d", "f")]);
        },
      },
    });
    expect(() => ws.read("d/f")).toThrow(expect.objectContaining({ status: 400 }));
  });

  it("does not serve a file through a parent swapped for a link after the checks", () => {
    writeFileSync(join(root, "d", "f"), "inside");
    writeFileSync(join(outside, "f"), "outside");
    const ws = workspaceFiles(root, { readHooks: { beforeOpen: swapParentForLink } });
    expect(() => ws.read("d/f")).toThrow(expect.objectContaining({ status: 400 }));
  });

  it("refuses a file larger than maxFileBytes (413) without reading it", () => {
    writeFileSync(join(root, "d", "big"), Buffer.alloc(100));
    expect(() => workspaceFiles(root, { maxFileBytes: 99 }).read("d/big")).toThrow(
      expect.objectContaining({ status: 413, code: "file_too_large" }),
    );
    expect(workspaceFiles(root, { maxFileBytes: 100 }).read("d/big")).toHaveLength(100);
  });
});
