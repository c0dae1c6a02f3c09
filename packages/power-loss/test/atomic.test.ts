import { constants, readFileSync } from "node:fs";
import { join } from "node:path";
import type { FileOps } from "@drydock/file-lock";
import { writeFileAtomic } from "@drydock/json-journal";
import { describe, expect, it } from "vitest";
import { crashSweep, type ImageContext } from "../src/index.js";
import { reportSweep, scale } from "./report.js";

const VERSIONS = 4;
const version = (n: number): string =>
  `${JSON.stringify({ version: n, body: "x".repeat(40 * n) }, null, 2)}\n`;

function readOrNull(path: string): string | null {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return null;
  }
}

/**
 * The target must hold the last acknowledged version, or the in-flight one; before the first write returned
 * it may also be absent. Never torn, never an older version, never missing once a write was acknowledged.
 */
function checkTarget(image: string, { acked, inflight }: ImageContext): string | null {
  const content = readOrNull(join(image, "doc.json"));
  const allowed = new Set<string | null>([acked === 0 ? null : version(acked)]);
  if (inflight !== null) allowed.add(version(inflight));
  if (allowed.has(content)) return null;
  const seen =
    content === null
      ? "missing"
      : (/"version": (\d+)/.exec(content)?.[0] ?? `torn (${content.length} bytes)`);
  return `after ${acked} acknowledged writes the target is ${seen}`;
}

type Writer = (fs: FileOps, path: string, data: string) => void;

async function sweepWriter(area: string, write: Writer, randomImages = scale(4)) {
  return crashSweep({
    area,
    randomImages,
    async workload(fs, root, log) {
      for (let n = 1; n <= VERSIONS; n += 1)
        await log.op(() => write(fs, join(root, "doc.json"), version(n)));
    },
    check: checkTarget,
  });
}

const { O_WRONLY, O_CREAT, O_EXCL, O_TRUNC, O_RDONLY, O_DIRECTORY } = constants;

/** The classic mistake (write-file-atomic, steno): temp, fsync, rename, but no fsync of the directory. */
const noDirectorySync: Writer = (fs, path, data) => {
  const temp = `${path}.tmp`;
  const fd = fs.openSync(temp, O_WRONLY | O_CREAT | O_EXCL, 0o600);
  fs.writeSync(fd, Buffer.from(data));
  fs.fsyncSync(fd);
  fs.closeSync(fd);
  fs.renameSync(temp, path);
};

/** Rewriting in place: a crash mid-write leaves a torn or empty document. */
const inPlace: Writer = (fs, path, data) => {
  const fd = fs.openSync(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600);
  fs.writeSync(fd, Buffer.from(data));
  fs.fsyncSync(fd);
  fs.closeSync(fd);
  const dir = fs.openSync(join(path, ".."), O_RDONLY | O_DIRECTORY);
  fs.fsyncSync(dir);
  fs.closeSync(dir);
};

describe("writeFileAtomic under power loss", () => {
  it("every image after every call holds the last acknowledged version or the in-flight one", async () => {
    const result = await sweepWriter("writeFileAtomic", (fs, path, data) =>
      writeFileAtomic(path, data, { fs }),
    );
    reportSweep(result);
    expect(result.anomalies).toEqual([]);
    expect(result.violations).toEqual([]);
    // 4 writes of ~9 calls each, crash after each call (and before the first).
    expect(result.crashPoints).toBeGreaterThan(4 * 8);
    expect(result.images).toBe(result.crashPoints * (2 + scale(4)));
  });

  it("the model catches durable:false (no fsync at all): an acknowledged write is lost", async () => {
    const result = await sweepWriter("writeFileAtomic durable:false (sabotaged)", (fs, path, data) =>
      writeFileAtomic(path, data, { fs, durable: false }),
    );
    expect(result.violations.some((v) => v.acked >= 1 && v.mode === "drop-all-unsynced")).toBe(true);
  });

  it("the model catches a writer that skips the directory fsync: an acknowledged write is lost", async () => {
    const result = await sweepWriter("no directory fsync (sabotaged)", noDirectorySync);
    expect(result.violations.some((v) => v.acked >= 1 && /missing|"version"/.test(v.detail))).toBe(true);
  });

  it("the model catches an in-place rewrite: the document can be torn", async () => {
    const result = await sweepWriter("in-place rewrite (sabotaged)", inPlace, 12);
    expect(result.violations.some((v) => /torn/.test(v.detail))).toBe(true);
  });
});
