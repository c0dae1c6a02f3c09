import { spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import * as fs from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { SagaError, type SagaStore } from "../src/index.js";
import { snapshotTree } from "./helpers.js";
import { createEvidence, step, useStoreBed } from "./store-bed.js";

/**
 * A store opened `readOnly` (what `drydock restores list/show` and `status` read through) changes no file
 * it finds: each case snapshots the state directory, reads through the read-only store, compares, and then
 * shows that a writing store does change those files (so the case's leftovers are real, and the check
 * could fail).
 */

const bed = useStoreBed("read-only");
const { open } = bed;

class Crash extends Error {}
const crashAt = (point: string) => ({
  point(name: string) {
    if (name === point) throw new Crash(point);
  },
});
const opDir = (store: SagaStore, id: string) => join(store.shardDir, id);
const headSeq = (store: SagaStore, id: string) =>
  JSON.parse(fs.readFileSync(join(opDir(store, id), "HEAD"), "utf8")).seq as number;

describe("saga store opened readOnly", () => {
  it("reads past a HEAD a crash left one event behind without rewriting it", async () => {
    const store = open();
    const saga = await store.create("op-behind", createEvidence);
    await expect(
      step(open({ crash: crashAt("saga.after-event-published") }), saga, "aborted", { reason: "x" }),
    ).rejects.toMatchObject({ cause: expect.any(Crash) });
    const before = snapshotTree(bed.stateDir);

    const reader = open({ readOnly: true });
    const loaded = await reader.load("op-behind");
    expect(loaded.phase).toBe("aborted");
    expect(loaded.seq).toBe(2);
    const listed = await reader.listPending();
    expect(listed.diagnostics).toEqual([
      expect.objectContaining({ operationId: "op-behind", status: "terminal_unarchived" }),
    ]);
    expect(snapshotTree(bed.stateDir)).toEqual(before);
    expect(headSeq(store, "op-behind")).toBe(1);

    // A writing store settles it: the read-only one saw what it would settle to.
    expect((await open().load("op-behind")).seq).toBe(2);
    expect(headSeq(store, "op-behind")).toBe(2);
  });

  it("reports an unpublished directory and leaves it, with a dead process's lock files, as they are", async () => {
    await expect(
      open({ crash: crashAt("saga.after-genesis-head") }).create("op-orphan", createEvidence),
    ).rejects.toMatchObject({ cause: expect.any(Crash) });
    const store = open();
    await store.create("op-live", createEvidence);
    // What a SIGKILLed process leaves beside the locks: a candidate owner file named with its (dead) pid.
    const deadPid = spawnSync(process.execPath, ["-e", ""]).pid!;
    const stray = join(store.shardDir, ".locks", `shard.lock.candidate-${deadPid}-${randomUUID()}`);
    fs.writeFileSync(stray, "");
    const before = snapshotTree(bed.stateDir);

    const listed = await open({ readOnly: true }).listPending();
    expect(listed.items.map((item) => item.operationId)).toEqual(["op-live"]);
    expect(listed.diagnostics).toEqual([
      { operationId: "op-orphan", status: "orphan_unpublished", code: null, recoverable: true },
    ]);
    expect(snapshotTree(bed.stateDir)).toEqual(before);

    // A writing store's listing tidies both.
    const tidied = await open().listPending();
    expect(tidied.diagnostics).toEqual([]);
    expect(fs.existsSync(opDir(store, "op-orphan"))).toBe(false);
    expect(fs.existsSync(stray)).toBe(false);
  });

  it("refuses every write before touching anything", async () => {
    const reader = open({ readOnly: true });
    const fence = { expectedSeq: 1, expectedHash: `sha256:${"a".repeat(64)}` };
    const writes: Array<[string, () => Promise<unknown>]> = [
      ["create", () => reader.create("op-new", createEvidence)],
      ["advance", () => reader.advance("op-new", { ...fence, phase: "aborted", evidence: { reason: "x" } })],
      ["archiveTerminal", () => reader.archiveTerminal("op-new", fence)],
      ["purgeArchived", () => reader.purgeArchived("op-new", fence)],
      ["removeOrphan", () => reader.removeOrphan("op-new")],
    ];
    for (const [name, write] of writes) {
      const error = await write().then(
        () => null,
        (e: unknown) => e,
      );
      expect(error, name).toBeInstanceOf(SagaError);
      expect((error as SagaError).code, name).toBe("INVALID_ARGUMENT");
      expect((error as SagaError).message, name).toMatch(/read-only.*Nothing was changed/);
    }
    expect(fs.existsSync(bed.stateDir)).toBe(false);
  });
});
