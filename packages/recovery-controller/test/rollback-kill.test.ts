/**
 * A rollback that is itself killed. A restore child is SIGKILLed after its k-th workspace change
 * (`restore.after-entry-applied#k`); an operator's rollback (preview + fenced rollback through this
 * controller, in a child process) takes over the dead restore's lock and is SIGKILLed after its j-th change
 * put back (`rollback.after-entry-applied#j`), possibly more than once; then a last recovery in this
 * process previews, takes over the dead rollback's lock and rolls back again. The workspace must end equal
 * to its state before the restore, byte for byte and mode for mode, the saga `rolled_back` and archived
 * with a chain that verifies, and the lock gone.
 */
import {
  chmodSync,
  existsSync,
  lstatSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
} from "node:fs";
import { join } from "node:path";
import { eventHash, inspectWorkspaceLock, type SagaEvent } from "@drydock/restore-saga";
import { describe, expect, it } from "vitest";
import { createRestoreRecoveryController } from "../src/index.js";
import { checkpoint, killedRestore, killedRollback, type Sandbox, sandbox, writeTree } from "./helpers.js";

/** Every entry under root: path → "dir <mode>" | "file <mode> <base64>" | "link <target>". */
function tree(root: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (rel: string): void => {
    for (const name of readdirSync(rel === "" ? root : join(root, rel)).sort()) {
      const path = rel === "" ? name : `${rel}/${name}`;
      const abs = join(root, path);
      const stat = lstatSync(abs);
      const mode = (stat.mode & 0o7777).toString(8);
      if (stat.isSymbolicLink()) out[path] = `link ${readlinkSync(abs)}`;
      else if (stat.isDirectory()) {
        out[path] = `dir ${mode}`;
        walk(path);
      } else out[path] = `file ${mode} ${readFileSync(abs).toString("base64")}`;
    }
  };
  walk("");
  return out;
}

/**
 * A workspace in its "before" state and a checkpoint of its "after" state: files changed, removed and
 * added, a file and a directory whose mode changed, a directory tree added and one removed (~23 changes).
 */
async function fixture(sandboxed: Sandbox): Promise<{ target: string; before: Record<string, string> }> {
  const ws = sandboxed.workspace;
  const after: Record<string, string> = {
    "keep.txt": "unchanged",
    "a.txt": "after a",
    "mode.sh": "#!/bin/sh\necho hi\n",
    "nd/inside.txt": "in a directory the restore creates",
    "nd/deeper/x.txt": "x",
  };
  for (let i = 0; i < 16; i += 1) after[`d${i % 4}/f${i}.txt`] = `after ${i} ${"x".repeat(i)}`;
  writeTree(ws, after);
  chmodSync(join(ws, "mode.sh"), 0o755);
  chmodSync(join(ws, "d1"), 0o750);
  const target = await checkpoint(sandboxed);

  rmSync(join(ws, "nd"), { recursive: true });
  chmodSync(join(ws, "mode.sh"), 0o644);
  chmodSync(join(ws, "d1"), 0o755);
  writeTree(ws, { "a.txt": "before a" });
  for (let i = 0; i < 16; i += 1) {
    const path = join(ws, `d${i % 4}/f${i}.txt`);
    if (i % 3 === 0) writeTree(ws, { [`d${i % 4}/f${i}.txt`]: `before ${i}` });
    else if (i % 5 === 1) rmSync(path);
    else if (i % 4 === 2) chmodSync(path, 0o600);
  }
  writeTree(ws, { "only-before.txt": "remove me", "old-dir/a.txt": "a", "old-dir/deep/b.txt": "b" });
  return { target, before: tree(ws) };
}

/** Files left in the restore staging area (never promoted; every rollback sweeps them). */
function staged(dataDir: string): string[] {
  const staging = join(dataDir, "restore-staging");
  if (!existsSync(staging)) return [];
  return readdirSync(staging, { recursive: true })
    .map(String)
    .filter((rel) => !statSync(join(staging, rel)).isDirectory());
}

/** The chain as the spec defines it, recomputed here: hash over the event without its hash, prevHash links. */
function expectChainVerifies(events: readonly SagaEvent[]): void {
  events.forEach((event, index) => {
    const { hash, ...body } = event;
    expect(eventHash(body), `event ${event.seq} ${event.phase}`).toBe(hash);
    expect(event.seq).toBe(index + 1);
    expect(event.prevHash).toBe(index === 0 ? null : events[index - 1]!.hash);
  });
}

// k: the restore dies after its k-th change; js: each rollback attempt dies after its j-th change put back
// (the last one may be the rollback's only change: the workspace is already back, the saga is not).
const CASES: { k: number; js: number[] }[] = [
  { k: 1, js: [1] },
  { k: 9, js: [4] },
  { k: 20, js: [7, 2] },
];

describe("a rollback killed part-way, then recovered again", () => {
  it.each(CASES)(
    "restore killed at change $k, rollbacks killed at changes $js: the workspace is back exactly",
    async ({ k, js }) => {
      const box = sandbox();
      try {
        await killRollbacksThenRecover(box, k, js);
      } finally {
        box.cleanup();
      }
    },
  );
});

async function killRollbacksThenRecover(box: Sandbox, k: number, js: readonly number[]): Promise<void> {
  const { target, before } = await fixture(box);
  const operationId = `op-k${k}`;
  const owner = () => inspectWorkspaceLock({ dataDir: box.dataDir, workspaceRoot: box.workspace });

  const restore = await killedRestore(box, target, operationId, "restore.after-entry-applied", k);
  expect(restore.signal).toBe("SIGKILL");
  expect((await box.store.load(operationId)).phase).toBe("mutation_started");
  let stoppedAt = tree(box.workspace);
  expect(stoppedAt).not.toEqual(before);

  const killers = [restore.pid];
  for (const j of js) {
    const killed = await killedRollback(box, operationId, "rollback.after-entry-applied", j);
    expect(killed.signal, killed.stdout).toBe("SIGKILL");
    // The rollback child previewed an eligible rollback, and it did put changes back before it died.
    expect(killed.stdout).toContain('"eligible":true');
    const now = tree(box.workspace);
    expect(now).not.toEqual(stoppedAt);
    stoppedAt = now;
    expect((await box.store.load(operationId)).phase, killed.stdout).toBe("rollback_started");
    // The lock is retained by the dead rollback, which took it over from the previous dead owner.
    expect(owner()?.pid).toBe(killed.pid);
    killers.push(killed.pid);
  }

  // The last recovery: the real liveness probe, the real store, lock and rollback.
  const recovery = createRestoreRecoveryController({ dataDir: box.dataDir, workspaceRoot: box.workspace });
  const preview = await recovery.preview(operationId);
  expect(preview.saga).toMatchObject({ phase: "rollback_started", basePhase: "rollback_started" });
  expect(preview.owner).toMatchObject({ pid: killers.at(-1), alive: false });
  expect(preview.actions.rollback).toEqual({ eligible: true, blockers: [] });
  expect(preview.actions.abort.eligible).toBe(false);

  const result = await recovery.rollback(operationId, preview.fence);

  expect(result).toMatchObject({ ok: true, action: "rollback", phase: "rolled_back", archived: true });
  expect(tree(box.workspace)).toEqual(before);
  expect(owner()).toBeNull();
  expect(staged(box.dataDir)).toEqual([]);

  const archived = await box.store.loadArchived(operationId);
  expect(archived).toMatchObject({ phase: "rolled_back", terminal: true, archived: true });
  expectChainVerifies(archived.events as readonly SagaEvent[]);
  const phases = archived.events.map((event) => event.phase);
  // One recovery cycle per rollback attempt, each taking over the previous (dead) owner.
  const cycles = archived.events.filter((event) => event.phase === "recovery_started");
  expect(cycles).toHaveLength(js.length + 1);
  expect(new Set(cycles.map((event) => event.evidence.lockOwnerDigest)).size).toBe(js.length + 1);
  expect(cycles.map((event) => (event.evidence.workspaceLockOwner as { pid: number }).pid)).toEqual([
    ...killers.slice(1),
    process.pid,
  ]);
  expect(phases.slice(-2)).toEqual(["workspace_rolled_back", "rolled_back"]);
  expect(phases.filter((phase) => phase === "workspace_rolled_back")).toHaveLength(1);
}
