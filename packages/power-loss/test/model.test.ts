import { constants, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import type { FileOps } from "@drydock/file-lock";
import { afterEach, describe, expect, it } from "vitest";
import { createPowerLossFs } from "../src/index.js";

const cleanups: string[] = [];
afterEach(() => {
  for (const dir of cleanups.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A live root (existing before the model starts, so durable) and fresh image paths beside it. */
function scratch(): { root: string; image: (name: string) => string } {
  const base = mkdtempSync(join(tmpdir(), "drydock-pl-model-"));
  cleanups.push(base);
  const root = join(base, "live");
  mkdirSync(root);
  return { root, image: (name) => join(base, `image-${name}`) };
}

/** Every file (with its bytes) and directory under `dir`, by relative path. */
function tree(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (path: string): void => {
    for (const name of readdirSync(path)) {
      const full = join(path, name);
      if (statSync(full).isDirectory()) {
        out[`${relative(dir, full)}/`] = "";
        walk(full);
      } else out[relative(dir, full)] = readFileSync(full, "utf8");
    }
  };
  walk(dir);
  return out;
}

/** The permission bits of every file and directory under `dir` (and of `dir` itself, as "."). */
function modes(dir: string): Record<string, string> {
  const out: Record<string, string> = { ".": (statSync(dir).mode & 0o7777).toString(8) };
  const walk = (path: string): void => {
    for (const name of readdirSync(path)) {
      const full = join(path, name);
      out[relative(dir, full)] = (statSync(full).mode & 0o7777).toString(8);
      if (statSync(full).isDirectory()) walk(full);
    }
  };
  walk(dir);
  return out;
}

const { O_WRONLY, O_CREAT, O_EXCL, O_RDONLY, O_DIRECTORY } = constants;

/** fsync of a path (file or directory) through the model. */
function flush(fs: FileOps, path: string): void {
  const fd = fs.openSync(path, O_RDONLY);
  fs.fsyncSync(fd);
  fs.closeSync(fd);
}

describe("power-loss model", () => {
  it("keep-all reproduces the live tree exactly; drop-all keeps only what was fsynced", () => {
    const { root, image } = scratch();
    const model = createPowerLossFs({ root });
    const fs = model.ops;
    fs.mkdirSync(join(root, "a/b"), { recursive: true });
    fs.writeFileSync(join(root, "a/b/unsynced.txt"), "volatile");
    const fd = fs.openSync(join(root, "synced.txt"), O_WRONLY | O_CREAT | O_EXCL, 0o600);
    fs.writeSync(fd, Buffer.from("durable bytes"));
    fs.fsyncSync(fd);
    fs.closeSync(fd);
    const dir = fs.openSync(root, O_RDONLY | O_DIRECTORY);
    fs.fsyncSync(dir);
    fs.closeSync(dir);
    fs.linkSync(join(root, "synced.txt"), join(root, "a/hard.txt"));
    fs.renameSync(join(root, "a/b/unsynced.txt"), join(root, "a/moved.txt"));

    fs.chmodSync(join(root, "a/moved.txt"), 0o751);
    fs.chmodSync(join(root, "a/b"), 0o710);

    model.crashImage(image("keep"), { mode: "keep-all" });
    expect(tree(image("keep"))).toEqual(tree(root));
    expect(modes(image("keep"))).toEqual(modes(root));

    model.crashImage(image("drop"), { mode: "drop-all-unsynced" });
    // The root was fsynced after synced.txt and a/ were created: both names and synced.txt's data survive;
    // nothing below a/ was ever made durable.
    expect(tree(image("drop"))).toEqual({ "a/": "", "synced.txt": "durable bytes" });
    expect(model.anomalies()).toEqual([]);
  });

  it("a new name without fsync of its directory can vanish; unsynced data can be empty or torn", () => {
    const { root, image } = scratch();
    const model = createPowerLossFs({ root });
    const fs = model.ops;
    const fd = fs.openSync(join(root, "f"), O_WRONLY | O_CREAT | O_EXCL, 0o600);
    fs.writeSync(fd, Buffer.from("0123456789"));
    fs.fsyncSync(fd);
    fs.closeSync(fd);
    model.crashImage(image("drop"), { mode: "drop-all-unsynced" });
    expect(tree(image("drop"))).toEqual({});

    const seen = new Set<string>();
    for (let seed = 1; seed <= 40; seed += 1) {
      const path = image(`r${seed}`);
      model.crashImage(path, { mode: "random-subset", seed });
      seen.add(JSON.stringify(tree(path)));
    }
    // Data was fsynced, so whenever the name landed its bytes are whole.
    expect([...seen].sort()).toEqual([JSON.stringify({}), JSON.stringify({ f: "0123456789" })].sort());

    const dirFd = fs.openSync(root, O_RDONLY | O_DIRECTORY);
    fs.fsyncSync(dirFd);
    fs.closeSync(dirFd);
    const again = fs.openSync(join(root, "f"), O_WRONLY);
    fs.writeSync(again, Buffer.from("abcdefghij"), 0, 10, 0);
    fs.closeSync(again);
    const contents = new Set<string>();
    for (let seed = 1; seed <= 60; seed += 1) {
      const path = image(`t${seed}`);
      model.crashImage(path, { mode: "random-subset", seed });
      contents.add(readFileSync(join(path, "f"), "utf8"));
    }
    expect(contents.has("0123456789")).toBe(true);
    expect(contents.has("abcdefghij")).toBe(true);
    // A torn write: a strict prefix of the latest bytes.
    expect([...contents].some((c) => c.length < 10 && "abcdefghij".startsWith(c))).toBe(true);
  });

  it("unsynced operations are unordered: a later create can land without an earlier one", () => {
    const { root, image } = scratch();
    const model = createPowerLossFs({ root });
    const fs = model.ops;
    // Two new names in one directory, in this order, and the directory never fsynced.
    for (const name of ["a", "b"])
      fs.closeSync(fs.openSync(join(root, name), O_WRONLY | O_CREAT | O_EXCL, 0o600));
    const seen = new Set<string>();
    for (let seed = 1; seed <= 64; seed += 1) {
      const path = image(`r${seed}`);
      model.crashImage(path, { mode: "random-subset", seed });
      seen.add(readdirSync(path).sort().join(","));
    }
    // Every subset, including the later name without the earlier one: an image that kept only a prefix of
    // the unsynced operations (program order) would never show "b" alone, and would hide every bug that
    // needs the reordering (a published name landing before the one it depends on).
    expect([...seen].sort()).toEqual(["", "a", "a,b", "b"]);
  });

  it("unsynced data of different files is unordered: a later write can land without an earlier one", () => {
    const { root, image } = scratch();
    const model = createPowerLossFs({ root });
    const fs = model.ops;
    // x and y, durable with their old bytes (data and names flushed).
    for (const name of ["x", "y"]) {
      const fd = fs.openSync(join(root, name), O_WRONLY | O_CREAT | O_EXCL, 0o600);
      fs.writeSync(fd, Buffer.from(`old-${name}`));
      fs.fsyncSync(fd);
      fs.closeSync(fd);
    }
    const dir = fs.openSync(root, O_RDONLY | O_DIRECTORY);
    fs.fsyncSync(dir);
    fs.closeSync(dir);
    // New bytes written to x, then to y, neither flushed.
    for (const name of ["x", "y"]) {
      const fd = fs.openSync(join(root, name), O_WRONLY);
      fs.writeSync(fd, Buffer.from(`new-${name}`), 0, 5, 0);
      fs.closeSync(fd);
    }
    const seen = new Set<string>();
    for (let seed = 1; seed <= 64; seed += 1) {
      const path = image(`d${seed}`);
      model.crashImage(path, { mode: "random-subset", seed });
      seen.add(`${readFileSync(join(path, "x"), "utf8")}|${readFileSync(join(path, "y"), "utf8")}`);
    }
    expect(seen.has("old-x|new-y")).toBe(true);
    expect(seen.has("new-x|old-y")).toBe(true);
    expect(seen.has("new-x|new-y")).toBe(true);
    expect(seen.has("old-x|old-y")).toBe(true);
  });

  it("modes: the creation mode lands with the name; a chmod is durable only after fsync of that node", () => {
    const { root, image } = scratch();
    const model = createPowerLossFs({ root });
    const fs = model.ops;
    fs.closeSync(fs.openSync(join(root, "f"), O_WRONLY | O_CREAT | O_EXCL, 0o640));
    fs.mkdirSync(join(root, "d"), { mode: 0o750 });
    flush(fs, root);
    const durable = { ".": "755", f: "640", d: "750" };
    model.crashImage(image("created"), { mode: "drop-all-unsynced" });
    expect(modes(image("created"))).toEqual(durable);

    fs.chmodSync(join(root, "f"), 0o755);
    fs.chmodSync(join(root, "d"), 0o700);
    fs.chmodSync(root, 0o711);
    // Flushing the parent flushes names, not the inodes of its children: f and d keep their old modes.
    flush(fs, root);
    expect(model.pending()).toEqual({ entryOps: 0, dirtyFiles: 0, dirtyModes: 2 });
    model.crashImage(image("parent"), { mode: "drop-all-unsynced" });
    expect(modes(image("parent"))).toEqual({ ...durable, ".": "711" });
    model.crashImage(image("keep"), { mode: "keep-all" });
    expect(modes(image("keep"))).toEqual({ ".": "711", f: "755", d: "700" });
    const seen = new Set<string>();
    for (let seed = 1; seed <= 32; seed += 1) {
      model.crashImage(image(`m${seed}`), { mode: "random-subset", seed });
      const { f, d } = modes(image(`m${seed}`));
      seen.add(`${f} ${d}`);
    }
    // Unordered: either change can land without the other.
    expect([...seen].sort()).toEqual(["640 700", "640 750", "755 700", "755 750"]);

    flush(fs, join(root, "f"));
    model.crashImage(image("f-synced"), { mode: "drop-all-unsynced" });
    expect(modes(image("f-synced"))).toEqual({ ".": "711", f: "755", d: "750" });
    flush(fs, join(root, "d"));
    model.crashImage(image("d-synced"), { mode: "drop-all-unsynced" });
    expect(modes(image("d-synced"))).toEqual({ ".": "711", f: "755", d: "700" });
    expect(model.pending().dirtyModes).toBe(0);
  });

  it("modes: fchmod (and chmod of /proc/self/fd/N) is tracked like chmod; hard links share one mode", () => {
    const { root, image } = scratch();
    const model = createPowerLossFs({ root });
    // fchmodSync is modelled whether or not this FileOps type names it (the cast keeps the test independent).
    const fs = model.ops as FileOps & { fchmodSync(fd: number, mode: number): void };
    const fd = fs.openSync(join(root, "f"), O_WRONLY | O_CREAT | O_EXCL, 0o600);
    fs.linkSync(join(root, "f"), join(root, "g"));
    flush(fs, root);
    fs.fchmodSync(fd, 0o644);
    model.crashImage(image("drop"), { mode: "drop-all-unsynced" });
    expect(modes(image("drop"))).toMatchObject({ f: "600", g: "600" });
    for (let seed = 1; seed <= 8; seed += 1) {
      model.crashImage(image(`r${seed}`), { mode: "random-subset", seed });
      const { f, g } = modes(image(`r${seed}`));
      expect(f).toBe(g);
    }
    fs.fsyncSync(fd);
    model.crashImage(image("synced"), { mode: "drop-all-unsynced" });
    expect(modes(image("synced"))).toMatchObject({ f: "644", g: "644" });
    // A chmod through /proc/self/fd (an fchmod by path, outside the root) changes the tracked inode.
    fs.chmodSync(`/proc/self/fd/${fd}`, 0o600);
    expect(model.pending().dirtyModes).toBe(1);
    model.crashImage(image("proc"), { mode: "keep-all" });
    expect(modes(image("proc"))).toMatchObject({ f: "600", g: "600" });
    fs.closeSync(fd);
    expect(model.anomalies()).toEqual([]);
  });

  it("is fused after the crash point: later calls fail and change nothing", () => {
    const { root } = scratch();
    const model = createPowerLossFs({ root, crashAfter: 1 });
    model.ops.mkdirSync(join(root, "x"));
    expect(model.crashed()).toBe(true);
    expect(() => model.ops.mkdirSync(join(root, "y"))).toThrow(/power lost/);
    expect(() => model.ops.readdirSync(root)).toThrow(/power lost/);
    expect(readdirSync(root)).toEqual(["x"]);
    expect(model.steps()).toBe(1);
  });
});
