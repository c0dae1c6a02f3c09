/**
 * The second guard against restoring over a stopped restore: when the stopped restore's workspace lock is
 * gone (removed by hand, lost with a disk), a new restore of the workspace still refuses while that saga
 * stands unsettled past mutation_started — and does not refuse for sagas that changed nothing.
 */
import * as fs from "node:fs";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type RestoreOptions, restoreCheckpoint, workspaceLockPath } from "../src/index.js";
import {
  makeRestoreFixture,
  makeTempDir,
  rejection,
  removeDir,
  sagaStoreFor,
  sameTree,
  snapshotTree,
} from "./helpers.js";

let base: string;
let fixture: Awaited<ReturnType<typeof makeRestoreFixture>>;

beforeEach(async () => {
  base = makeTempDir("unsettled");
  fixture = await makeRestoreFixture(base, 24);
});

afterEach(() => {
  removeDir(base);
});

function options(extra: Partial<RestoreOptions> = {}): RestoreOptions {
  return {
    dataDir: fixture.dataDir,
    workspaceRoot: fixture.workspace,
    checkpointId: fixture.checkpointId,
    durable: false,
    ...extra,
  };
}

/** A restore that fails at `point` (after the intent: it journals recovery_required and keeps its lock). */
async function stopAt(operationId: string, point: string): Promise<void> {
  let applied = 0;
  const crash = {
    point(name: string) {
      if (name === "restore.after-entry-applied") applied += 1;
      if (name === point && (point !== "restore.after-entry-applied" || applied === 3))
        throw new Error(`stopped at ${point}`);
    },
  };
  const error = await rejection(restoreCheckpoint(options({ operationId, crash })));
  expect(error.code).toBe("RECOVERY_REQUIRED");
}

function removeWorkspaceLockByHand(): void {
  fs.unlinkSync(workspaceLockPath(fixture.dataDir, fs.realpathSync(fixture.workspace)));
}

describe("a new restore over a stopped restore whose workspace lock is gone", () => {
  it("refuses while a restore stopped mid-mutation is unsettled, naming it and changing nothing", async () => {
    await stopAt("op-half", "restore.after-entry-applied");
    const halfRestored = snapshotTree(fixture.workspace);
    expect(sameTree(halfRestored, fixture.before)).toBe(false);
    expect(sameTree(halfRestored, fixture.after)).toBe(false);
    removeWorkspaceLockByHand();

    const error = await rejection(restoreCheckpoint(options({ operationId: "op-over" })));
    expect(error.code).toBe("RECOVERY_REQUIRED");
    expect(error.details.ownerOperationId).toBe("op-half");
    expect(error.message).toMatch(
      /op-half .*stopped at mutation_started.*half-restored.*Nothing was changed/,
    );
    // Nothing was changed: the half-restored files are as the stopped restore left them, and the refused
    // restore ended (aborted, archived) without touching them.
    expect(snapshotTree(fixture.workspace)).toEqual(halfRestored);
    const store = sagaStoreFor(fixture.dataDir, fixture.workspace);
    expect((await store.loadArchived("op-over")).phase).toBe("aborted");
    expect((await store.load("op-half")).phase).toBe("recovery_required");
  });

  it("refuses as well over a restore stopped after workspace_applied (restored, but never settled)", async () => {
    await stopAt("op-applied", "restore.after-workspace-applied");
    removeWorkspaceLockByHand();
    const error = await rejection(restoreCheckpoint(options({ operationId: "op-over-2" })));
    expect(error.code).toBe("RECOVERY_REQUIRED");
    expect(error.details.ownerOperationId).toBe("op-applied");
  });

  it("does not refuse over a restore that stopped before changing anything (its files are as they were)", async () => {
    await stopAt("op-early", "restore.after-safety-ready");
    expect(sameTree(snapshotTree(fixture.workspace), fixture.before)).toBe(true);
    removeWorkspaceLockByHand();
    const result = await restoreCheckpoint(options({ operationId: "op-next" }));
    expect(result.phase).toBe("completed");
    expect(sameTree(snapshotTree(fixture.workspace), fixture.after)).toBe(true);
  });

  it("refuses when another saga of the workspace cannot be verified (whether it changed files is unknown)", async () => {
    await stopAt("op-broken", "restore.after-safety-ready");
    removeWorkspaceLockByHand();
    const store = sagaStoreFor(fixture.dataDir, fixture.workspace);
    const head = `${store.shardDir}/op-broken/HEAD`;
    fs.writeFileSync(head, `${fs.readFileSync(head, "utf8")} `);
    const error = await rejection(restoreCheckpoint(options({ operationId: "op-over-3" })));
    expect(error.code).toBe("RECOVERY_REQUIRED");
    expect(error.message).toMatch(/op-broken .*cannot be verified \(CORRUPT\)/);
    expect(sameTree(snapshotTree(fixture.workspace), fixture.before)).toBe(true);
  });
});
