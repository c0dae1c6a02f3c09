import { constants, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
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

const { O_WRONLY, O_CREAT, O_EXCL, O_RDONLY, O_DIRECTORY } = constants;

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

    model.crashImage(image("keep"), { mode: "keep-all" });
    expect(tree(image("keep"))).toEqual(tree(root));

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
