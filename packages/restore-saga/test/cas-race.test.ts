import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import * as fs from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { openSagaStore } from "../src/index.js";
import { makeTempDir, removeDir } from "./helpers.js";

const FIXTURE = fileURLToPath(new URL("./fixtures/advance-child.ts", import.meta.url));
const PACKAGE_DIR = fileURLToPath(new URL("..", import.meta.url));
const HASH = `sha256:${"c".repeat(64)}`;

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

function start(
  args: string[],
  env: Record<string, string> = {},
): {
  proc: ChildProcessWithoutNullStreams;
  ready: Promise<void>;
  result: Promise<string>;
} {
  const proc = spawn(
    process.execPath,
    ["--conditions=@drydock/source", "--import", "tsx", FIXTURE, ...args],
    {
      cwd: PACKAGE_DIR,
      detached: true,
      stdio: ["pipe", "pipe", "pipe"],
      env: { ...process.env, ...env },
    },
  );
  cleanups.push(() => {
    try {
      process.kill(-proc.pid!, "SIGKILL");
    } catch {
      // Already exited.
    }
  });
  let out = "";
  let err = "";
  proc.stderr.on("data", (chunk: Buffer) => {
    err += chunk.toString();
  });
  const ready = new Promise<void>((resolve, reject) => {
    proc.stdout.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes("ready\n")) resolve();
    });
    proc.on("exit", () => reject(new Error(`child exited before ready: ${err}`)));
  });
  ready.catch(() => {});
  // "close", not "exit": exit can come before the child's verdict is read.
  const result = new Promise<string>((resolve) =>
    proc.on("close", () => resolve(`${out.replace("ready\n", "").trim()}${err ? ` ${err}` : ""}`)),
  );
  return { proc, ready, result };
}

/** A fresh state dir and workspace with one saga just created (seq 1), and a go file path for children. */
async function sagaAtSeq1(operationId: string) {
  const base = makeTempDir("race");
  cleanups.push(() => removeDir(base));
  const workspace = join(base, "workspace");
  const stateDir = join(base, "state");
  fs.mkdirSync(workspace);
  const store = openSagaStore({ stateDir, workspaceRoot: workspace });
  const saga = await store.create(operationId, {
    kind: "checkpoint-restore",
    checkpointId: "ckpt-x",
    checkpointManifestDigest: HASH,
    actorPid: process.pid,
  });
  return { workspace, stateDir, store, saga, goFile: join(base, "go") };
}

describe("saga compare-and-set across processes", () => {
  it("lets exactly one of two racing processes advance the same saga; the other gets CONFLICT", async () => {
    const { workspace, stateDir, store, saga, goFile } = await sagaAtSeq1("race-op");
    const racers = ["a", "b"].map((name) =>
      start([stateDir, workspace, "race-op", String(saga.seq), saga.headHash, goFile, name]),
    );
    await Promise.all(racers.map((racer) => racer.ready));
    fs.writeFileSync(goFile, "go");
    const results = await Promise.all(racers.map((racer) => racer.result));
    expect(
      results.filter((line) => line === "ok 2"),
      results.join(" | "),
    ).toHaveLength(1);
    expect(
      results.filter((line) => line === "error CONFLICT"),
      results.join(" | "),
    ).toHaveLength(1);
    const final = await store.load("race-op");
    expect(final.seq).toBe(2);
    expect(final.phase).toBe("aborted");
    expect(fs.readdirSync(join(store.shardDir, "race-op")).sort()).toEqual([
      "000001-created.json",
      "000002-aborted.json",
      "HEAD",
    ]);
  });

  it("a process killed after an advance leaves its kept lock owner file; the next store sweeps it, not a live one's", async () => {
    const { workspace, stateDir, store, saga, goFile } = await sagaAtSeq1("killed-op");
    const child = start(
      [stateDir, workspace, "killed-op", String(saga.seq), saga.headHash, goFile, "killed"],
      { SAGA_CHILD_SIGKILL: "1" },
    );
    await child.ready;
    fs.writeFileSync(goFile, "go");
    expect(await child.result).toBe("ok 2");
    const locks = join(store.shardDir, ".locks");
    const ownerFilesOf = (pid: number) =>
      fs.readdirSync(locks).filter((name) => name.includes(`.candidate-${pid}-`));
    expect(ownerFilesOf(child.proc.pid!)).toEqual([expect.stringMatching(/^killed-op\.lock\.candidate-/)]);
    const ours = ownerFilesOf(process.pid);
    expect(ours.length).toBeGreaterThan(0);

    const next = openSagaStore({ stateDir, workspaceRoot: workspace });
    expect((await next.load("killed-op")).seq).toBe(2);
    expect(ownerFilesOf(child.proc.pid!)).toEqual([]);
    // This live process's kept files are not garbage.
    expect(ownerFilesOf(process.pid)).toEqual(expect.arrayContaining(ours));
  });
});
