/**
 * The recovery report (`drydock status`, GET /v1/recovery) over sagas that another process is writing, or that
 * settle between the listing and their preview: work in progress (attention false, look again), never a
 * "needs a person" line without a command. A real problem (an invalid lock file) still needs a person.
 */
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { acquireLock, type LockHandle } from "@drydock/file-lock";
import { afterEach, describe, expect, it } from "vitest";
import { createRestoreRecoveryController, defaultRestorePorts, reportRestores } from "../src/index.js";
import { checkpoint, createdSaga, dead, killedRestore, type Sandbox, sandbox } from "./helpers.js";

let box: Sandbox;
const held: LockHandle[] = [];
afterEach(() => {
  for (const handle of held.splice(0)) handle.release();
  box?.cleanup();
});

/** The saga's own state lock, as a server creating it (or writing its next event) holds it. */
async function holdSagaLock(operationId: string): Promise<LockHandle> {
  const handle = await acquireLock(join(box.store.shardDir, ".locks", `${operationId}.lock`), {
    label: "test",
  });
  held.push(handle);
  return handle;
}

function release(handle: LockHandle): void {
  handle.release();
  held.splice(held.indexOf(handle), 1);
}

const report = (afterListing?: (botId: string) => void | Promise<void>) =>
  reportRestores({
    dataDir: box.dataDir,
    commandPrefix: "drydock",
    ...(afterListing ? { afterListing } : {}),
  });

describe("the recovery report while another process writes a saga", () => {
  it("a saga whose lock a live process holds for the whole report is in progress: attention false, no raw lock error", async () => {
    box = sandbox();
    await createdSaga(box, "op-busy");
    await holdSagaLock("op-busy");
    const { restores, gaps } = await report();
    expect(gaps).toEqual([]);
    expect(restores).toEqual([
      expect.objectContaining({
        operationId: "op-busy",
        diagnostic: "busy",
        attention: false,
        inProgress: true,
        command: null,
        problem: expect.stringMatching(/another drydock process is writing this restore's saga just now/),
      }),
    ]);
    expect(restores[0]?.problem).not.toMatch(/Could not lock/);
  });

  it("a saga being created when listed, then let go unpublished: settled since the listing, not 'No archived restore saga'", async () => {
    box = sandbox();
    const target = await checkpoint(box);
    // A restore killed right after its saga's genesis HEAD: a directory with no published event.
    await killedRestore(box, target, "op-creating", "saga.after-genesis-head");
    // A live creator holds the saga's lock while the listing looks, and lets go before the preview.
    const creator = await holdSagaLock("op-creating");
    const { restores } = await report(() => release(creator));
    expect(restores).toEqual([
      expect.objectContaining({
        operationId: "op-creating",
        attention: false,
        inProgress: true,
        command: null,
        problem: expect.stringMatching(/settled since the listing, or its create has not published/),
      }),
    ]);
    expect(restores[0]?.problem).not.toMatch(/No archived restore saga/);
    // The next report removes the unpublished directory and lists nothing.
    expect(await report()).toEqual({ restores: [], gaps: [] });
    expect(existsSync(join(box.store.shardDir, "op-creating"))).toBe(false);
  });

  it("a saga archived between the listing and its preview is settled: attention false, no 'inspect it'", async () => {
    box = sandbox();
    await createdSaga(box, "op-settling");
    const { restores } = await report(async () => {
      // Another operator's abort lands in between (its initiator is dead: abort needs no lock).
      const ports = defaultRestorePorts({
        dataDir: box.dataDir,
        workspaceRoot: box.workspace,
        isProcessAlive: dead,
      });
      const recovery = createRestoreRecoveryController({
        dataDir: box.dataDir,
        workspaceRoot: box.workspace,
        isProcessAlive: dead,
        ...ports,
      });
      const { fence } = await recovery.preview("op-settling");
      await recovery.abort("op-settling", { ...fence, reason: "test" });
    });
    expect(restores).toEqual([
      expect.objectContaining({
        operationId: "op-settling",
        phase: "aborted",
        attention: false,
        inProgress: true,
        next: null,
        command: null,
        problem: expect.stringMatching(/archived while this report was made/),
      }),
    ]);
    expect(await report()).toEqual({ restores: [], gaps: [] });
  });

  it("a saga whose lock file is invalid still needs a person, with the lock error's advice", async () => {
    box = sandbox();
    await createdSaga(box, "op-bad-lock");
    writeFileSync(join(box.store.shardDir, ".locks", "op-bad-lock.lock"), "not an owner\n");
    const { restores } = await report();
    expect(restores).toEqual([
      expect.objectContaining({
        operationId: "op-bad-lock",
        attention: true,
        inProgress: false,
        problem: expect.stringMatching(/unreadable or invalid.*inspect the lock file/),
      }),
    ]);
  });
});
