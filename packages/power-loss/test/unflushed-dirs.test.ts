import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openBoatCreateJournal } from "@drydock/boat-create-journal";
import { openBoatDeleteJournal } from "@drydock/boat-delete-journal";
import { acquireLock, type FileOps } from "@drydock/file-lock";
import { openCheckpointStore, openSagaStore } from "@drydock/restore-saga";
import { afterAll, describe, expect, it } from "vitest";
import { createPowerLossFs, scratchFileOps, withoutDirectoryFlushes } from "../src/index.js";
import { afterRebootLock } from "./restart.js";

// A directory that exists need not be durable: `mkdir -p` without a flush (how an operator or a deployment
// script makes a data directory), or a process killed before it flushed what it made, leaves a name a
// power loss can take away, and with it everything acknowledged inside. Each store flushes the path above
// its files once, before its first acknowledged write; this holds them to it.

const base = mkdtempSync(join(tmpdir(), "drydock-pl-unflushed-"));
afterAll(() => rmSync(base, { recursive: true, force: true }));

/** A data directory two levels deep, made through the model without any flush, then `work` acknowledged. */
async function acknowledgedInUnflushedDir(
  work: (fs: FileOps, dataDir: string, ws: string) => Promise<void>,
  wrap: (fs: FileOps) => FileOps = (fs) => fs,
): Promise<string> {
  const root = mkdtempSync(join(base, "case-"));
  const ws = join(root, "ws");
  mkdirSync(ws);
  writeFileSync(join(ws, "f.txt"), "precious\n");
  const model = createPowerLossFs({ root });
  const dataDir = join(root, "srv", "drydock");
  model.ops.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  await work(wrap(model.ops), dataDir, ws);
  const image = `${mkdtempSync(join(base, "image-"))}/image`;
  model.crashImage(image, { mode: "drop-all-unsynced" });
  return join(image, "srv", "drydock");
}

describe("a store in a directory nobody flushed keeps what it acknowledged after a power loss", () => {
  it("create journal: the key of a begun create survives (a lost one is re-minted: a second Boat)", async () => {
    let key = "";
    const after = await acknowledgedInUnflushedDir(async (fs, dataDir) => {
      key = (await openBoatCreateJournal({ dataDir, fs }).beginBoatCreate("bot-1", "{}")).request
        .idempotencyKey;
    });
    const reopened = openBoatCreateJournal({ dataDir: after, fs: scratchFileOps, lock: afterRebootLock() });
    const again = await reopened.beginBoatCreate("bot-1", "{}");
    expect(again.startedNow).toBe(false);
    expect(again.request.idempotencyKey).toBe(key);
  });

  it("delete journal: a prepared deletion fence survives", async () => {
    const identity = { boxId: "bx_abcdefgh", name: "boat-1", ownerBotId: "bot-1" };
    const after = await acknowledgedInUnflushedDir(async (fs, dataDir) => {
      await openBoatDeleteJournal({ dataDir, fs }).prepareBoatDeletion(identity);
    });
    const reopened = openBoatDeleteJournal({ dataDir: after, fs: scratchFileOps, lock: afterRebootLock() });
    const fence = await reopened.getBoatDeletion(identity.boxId);
    expect(fence).toMatchObject({ ...identity, phase: "prepared" });
  });

  it("checkpoint store and saga store: an acknowledged checkpoint and saga survive", async () => {
    let checkpointId = "";
    let ws = "";
    const after = await acknowledgedInUnflushedDir(async (fs, dataDir, workspace) => {
      ws = workspace;
      const created = await openCheckpointStore({ dataDir, fs }).createCheckpoint(ws);
      checkpointId = created.checkpointId;
      await openSagaStore({ stateDir: join(dataDir, "restore-sagas"), workspaceRoot: ws, fs }).create(
        "op-1",
        {
          kind: "checkpoint-restore",
          checkpointId,
          checkpointManifestDigest: created.manifestDigest,
          actorPid: process.pid,
        },
      );
    });
    await expect(
      openCheckpointStore({ dataDir: after, fs: scratchFileOps }).listCheckpoints(ws),
    ).resolves.toEqual([expect.objectContaining({ checkpointId })]);
    // The image's stores, of the workspace they were made for (still where it was: only the data is imaged).
    const sagas = openSagaStore({
      stateDir: join(after, "restore-sagas"),
      workspaceRoot: ws,
      fs: scratchFileOps,
      lock: afterRebootLock(),
    });
    await expect(sagas.listPending()).resolves.toMatchObject({ items: [{ operationId: "op-1" }] });
  });

  it("a durable lock's name survives, and the check can fail: without directory flushes it is lost", async () => {
    const take = (fs: FileOps, dataDir: string) =>
      acquireLock(join(dataDir, "locks", "a.lock"), { fs, durable: true, reapDeadOwners: false });
    const kept = await acknowledgedInUnflushedDir(async (fs, dataDir) => void (await take(fs, dataDir)));
    expect(scratchFileOps.existsSync(join(kept, "locks", "a.lock"))).toBe(true);
    const lost = await acknowledgedInUnflushedDir(
      async (fs, dataDir) => void (await take(fs, dataDir)),
      withoutDirectoryFlushes,
    );
    expect(scratchFileOps.existsSync(join(lost, "locks", "a.lock"))).toBe(false);
  });
});
