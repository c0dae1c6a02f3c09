import * as fs from "node:fs";
import { join } from "node:path";
import { acquireLock, errnoError, type FileOps, failNthCall, nodeFileOps } from "@drydock/file-lock";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  canonicalJson,
  domainDigest,
  eventHash,
  HEAD_ANCHOR_DOMAIN,
  isSagaError,
  openSagaStore,
  ownerDigest,
  type SagaState,
  type SagaStore,
} from "../src/index.js";
import { createEvidence, HASH, HASH2, step, useStoreBed } from "./store-bed.js";

const bed = useStoreBed("store");
const { open, owner } = bed;

async function expectSagaError(
  promise: Promise<unknown>,
  code: string,
): Promise<import("../src/index.js").SagaError> {
  try {
    await promise;
  } catch (error) {
    if (!isSagaError(error)) throw error;
    expect(error.code, error.message).toBe(code);
    return error;
  }
  throw new Error(`expected SagaError ${code}, but the call succeeded`);
}

/** created → … → completed with a restore of `targets` changes. */
async function happyPath(store: SagaStore, id: string, targets = 3): Promise<SagaState> {
  let saga = await store.create(id, createEvidence);
  const o = owner(id, store.workspaceRoot);
  saga = await step(store, saga, "locked", { workspaceLockOwner: o, lockOwnerDigest: ownerDigest(o) });
  saga = await step(store, saga, "prepared", { prestateDigest: HASH, targetCount: targets });
  saga = await step(store, saga, "intent_committed", { intentCommitDigest: HASH, authority: "operation" });
  if (targets === 0)
    return step(store, saga, "workspace_applied", { appliedCount: 0, poststateDigest: HASH2 });
  saga = await step(store, saga, "safety_ready", {
    safetyCheckpointId: "ckpt-safety",
    safetyManifestDigest: HASH,
    coverage: "full",
  });
  saga = await step(store, saga, "mutation_started", { targetCount: targets, coverage: "full" });
  saga = await step(store, saga, "workspace_applied", { appliedCount: targets, poststateDigest: HASH2 });
  return step(store, saga, "completed", { resultDigest: HASH });
}

function opDir(store: SagaStore, id: string): string {
  return join(store.shardDir, id);
}

function snapshotDir(dir: string): Map<string, string> {
  return new Map(
    fs.readdirSync(dir).map((name) => [name, fs.readFileSync(join(dir, name)).toString("base64")]),
  );
}

describe("saga store: chain and phase machine", () => {
  it("creates a saga as event 000001-created.json plus HEAD, private files in private directories", async () => {
    const store = open();
    const saga = await store.create("op-1", createEvidence);
    expect(saga.seq).toBe(1);
    expect(saga.phase).toBe("created");
    expect(saga.events[0]!.prevHash).toBeNull();
    expect(saga.events[0]!.evidence.workspaceRoot).toBe(bed.workspace);
    const dir = opDir(store, "op-1");
    expect(fs.readdirSync(dir).sort()).toEqual(["000001-created.json", "HEAD"]);
    expect(fs.statSync(dir).mode & 0o777).toBe(0o700);
    expect(fs.statSync(store.shardDir).mode & 0o777).toBe(0o700);
    for (const name of fs.readdirSync(dir)) expect(fs.statSync(join(dir, name)).mode & 0o777).toBe(0o600);
  });

  it("walks the whole restore chain as files 000001..000008 and load verifies it to the same state", async () => {
    const store = open();
    const done = await happyPath(store, "op-happy");
    expect(done.events.map((event) => event.phase)).toEqual([
      "created",
      "locked",
      "prepared",
      "intent_committed",
      "safety_ready",
      "mutation_started",
      "workspace_applied",
      "completed",
    ]);
    expect(done.terminal).toBe(true);
    expect(fs.readdirSync(opDir(store, "op-happy")).sort()).toEqual([
      "000001-created.json",
      "000002-locked.json",
      "000003-prepared.json",
      "000004-intent_committed.json",
      "000005-safety_ready.json",
      "000006-mutation_started.json",
      "000007-workspace_applied.json",
      "000008-completed.json",
      "HEAD",
    ]);
    const loaded = await open().load("op-happy");
    expect(loaded.headHash).toBe(done.headHash);
    expect(loaded.events.map((event) => event.hash)).toEqual(done.events.map((event) => event.hash));
    // Every event chains to its predecessor and hashes exactly as documented.
    for (const [index, event] of loaded.events.entries()) {
      const { hash, ...body } = event;
      expect(hash).toBe(domainDigest("drydock-restore-saga-event-v1", body));
      expect(event.prevHash).toBe(index === 0 ? null : loaded.events[index - 1]!.hash);
    }
  });

  it("takes the zero-target path from intent_committed straight to workspace_applied", async () => {
    const saga = await happyPath(open(), "op-zero", 0);
    expect(saga.phase).toBe("workspace_applied");
    expect(saga.events.map((event) => event.phase)).not.toContain("safety_ready");
  });

  it("refuses a restore with targets that tries to skip the safety checkpoint", async () => {
    const store = open();
    let saga = await store.create("op-skip", createEvidence);
    const o = owner("op-skip");
    saga = await step(store, saga, "locked", { workspaceLockOwner: o, lockOwnerDigest: ownerDigest(o) });
    saga = await step(store, saga, "prepared", { prestateDigest: HASH, targetCount: 2 });
    saga = await step(store, saga, "intent_committed", { intentCommitDigest: HASH, authority: "operation" });
    await expectSagaError(
      step(store, saga, "workspace_applied", { appliedCount: 0, poststateDigest: HASH }),
      "INVALID_TRANSITION",
    );
    expect((await store.load("op-skip")).seq).toBe(4);
  });

  it("refuses mutation_started that does not cover exactly the prepared targets", async () => {
    const store = open();
    let saga = await store.create("op-cover", createEvidence);
    const o = owner("op-cover");
    saga = await step(store, saga, "locked", { workspaceLockOwner: o, lockOwnerDigest: ownerDigest(o) });
    saga = await step(store, saga, "prepared", { prestateDigest: HASH, targetCount: 5 });
    saga = await step(store, saga, "intent_committed", { intentCommitDigest: HASH, authority: "operation" });
    saga = await step(store, saga, "safety_ready", {
      safetyCheckpointId: "s",
      safetyManifestDigest: HASH,
      coverage: "full",
    });
    await expectSagaError(
      step(store, saga, "mutation_started", { targetCount: 4, coverage: "full" }),
      "INVALID_TRANSITION",
    );
  });

  it("publishes nothing for an illegal transition", async () => {
    const store = open();
    const saga = await store.create("op-illegal", createEvidence);
    const before = snapshotDir(opDir(store, "op-illegal"));
    await expectSagaError(
      step(store, saga, "prepared", { prestateDigest: HASH, targetCount: 1 }),
      "INVALID_TRANSITION",
    );
    await expectSagaError(step(store, saga, "created", createEvidence), "INVALID_TRANSITION");
    await expectSagaError(step(store, saga, "no_such_phase", {}), "INVALID_TRANSITION");
    expect(snapshotDir(opDir(store, "op-illegal"))).toEqual(before);
  });

  it("refuses unknown evidence keys, owner evidence on created, and a caller-set workspaceRoot", async () => {
    const store = open();
    await expectSagaError(
      store.create("op-ev", { ...createEvidence, extra: 1 } as never),
      "INVALID_EVIDENCE",
    );
    await expectSagaError(
      store.create("op-ev", { ...createEvidence, workspaceLockOwner: owner("op-ev") } as never),
      "INVALID_EVIDENCE",
    );
    await expectSagaError(
      store.create("op-ev", { ...createEvidence, workspaceRoot: "/elsewhere" } as never),
      "INVALID_EVIDENCE",
    );
    const saga = await store.create("op-ev", createEvidence);
    await expectSagaError(step(store, saga, "aborted", { reason: "x", unknown: true }), "INVALID_EVIDENCE");
    await expectSagaError(step(store, saga, "aborted", { reason: "" }), "INVALID_EVIDENCE");
  });

  it("says which field of the evidence is wrong, and why, without echoing the value", async () => {
    const store = open();
    const extra = await expectSagaError(
      store.create("op-why", { ...createEvidence, extra: "secret-value" } as never),
      "INVALID_EVIDENCE",
    );
    expect(extra.message).toMatch(/not allowed \(.*Unrecognized key.*"extra"/);
    expect(extra.message).not.toMatch(/store sets workspaceRoot/);
    expect(extra.message).not.toContain("secret-value");
    const digest = await expectSagaError(
      store.create("op-why", { ...createEvidence, checkpointManifestDigest: "sha256:xyz" } as never),
      "INVALID_EVIDENCE",
    );
    expect(digest.message).toMatch(/checkpointManifestDigest: /);
    expect(digest.message).not.toContain("xyz");
    const root = await expectSagaError(
      store.create("op-why", { ...createEvidence, workspaceRoot: "/x" } as never),
      "INVALID_EVIDENCE",
    );
    expect(root.message).toMatch(/the store sets workspaceRoot and workspaceIdentity itself/);
    const saga = await store.create("op-why", createEvidence);
    const advance = await expectSagaError(
      step(store, saga, "prepared", { prestateDigest: 5, targetCount: -1, bogus: 1, more: 2 } as never),
      "INVALID_EVIDENCE",
    );
    expect(advance.message).toMatch(
      /prestateDigest: .*; targetCount: .*; \(the evidence\): Unrecognized keys: "bogus", "more"\)/,
    );
    expect(advance.cause).toBeDefined();
  });

  it("refuses a lock owner whose digest or transaction does not match", async () => {
    const store = open();
    const saga = await store.create("op-own", createEvidence);
    const o = owner("op-own");
    await expectSagaError(
      step(store, saga, "locked", { workspaceLockOwner: o, lockOwnerDigest: HASH }),
      "INVALID_EVIDENCE",
    );
    const foreign = owner("someone-else");
    await expectSagaError(
      step(store, saga, "locked", { workspaceLockOwner: foreign, lockOwnerDigest: ownerDigest(foreign) }),
      "INVALID_TRANSITION",
    );
  });

  it("accepts only the exact abort shapes: lock-free from created, or through recovery_started", async () => {
    const store = open();
    const saga = await store.create("op-abort", createEvidence);
    await expectSagaError(
      step(store, saga, "aborted", { recoveryAction: "abort-pre-intent", reason: "no recovery started" }),
      "INVALID_TRANSITION",
    );
    const aborted = await step(store, saga, "aborted", {
      recoveryAction: "abort-before-lock",
      reason: "actor died",
    });
    expect(aborted.terminal).toBe(true);
  });

  it("refuses to abort through recovery once mutation started", async () => {
    const store = open();
    let saga = await store.create("op-mut", createEvidence);
    const o = owner("op-mut");
    saga = await step(store, saga, "locked", { workspaceLockOwner: o, lockOwnerDigest: ownerDigest(o) });
    saga = await step(store, saga, "prepared", { prestateDigest: HASH, targetCount: 1 });
    saga = await step(store, saga, "intent_committed", { intentCommitDigest: HASH, authority: "operation" });
    saga = await step(store, saga, "safety_ready", {
      safetyCheckpointId: "s",
      safetyManifestDigest: HASH,
      coverage: "full",
    });
    saga = await step(store, saga, "mutation_started", { targetCount: 1, coverage: "full" });
    await expectSagaError(step(store, saga, "aborted", { reason: "no" }), "INVALID_TRANSITION");
    saga = await step(store, saga, "recovery_required", { reason: "crash", errorCode: "X" });
    await expectSagaError(
      step(store, saga, "recovery_started", {
        workspaceLockOwner: o,
        lockOwnerDigest: ownerDigest(o),
        recoveryAction: "abort-pre-intent",
      }),
      "INVALID_TRANSITION",
    );
    const started = await step(store, saga, "recovery_started", {
      workspaceLockOwner: o,
      lockOwnerDigest: ownerDigest(o),
      recoveryAction: "rollback-partial-mutation",
      recoveryRequestId: "rb-1",
    });
    expect(started.basePhase).toBe("mutation_started");
  });

  it("keeps timestamps non-decreasing when the clock steps back", async () => {
    let clock = 2_000_000_000_000;
    const store = open({ now: () => (clock -= 60_000) });
    let saga = await store.create("op-clock", createEvidence);
    saga = await step(store, saga, "aborted", { reason: "x" });
    const [first, second] = saga.events;
    expect(Date.parse(second!.timestamp)).toBeGreaterThanOrEqual(Date.parse(first!.timestamp));
    expect((await store.load("op-clock")).seq).toBe(2);
  });
});

describe("saga store: compare-and-set, limits, ids", () => {
  it("rejects a stale seq or hash with CONFLICT carrying expected and actual, and writes nothing", async () => {
    const store = open();
    const saga = await store.create("op-cas", createEvidence);
    const advanced = await step(store, saga, "aborted", { reason: "first" });
    const before = snapshotDir(opDir(store, "op-cas"));
    const error = await expectSagaError(step(store, saga, "aborted", { reason: "second" }), "CONFLICT");
    expect(error.details).toMatchObject({ expectedSeq: 1, actualSeq: 2, actualHash: advanced.headHash });
    await expectSagaError(
      store.advance("op-cas", {
        expectedSeq: 2,
        expectedHash: HASH,
        phase: "aborted",
        evidence: { reason: "x" },
      }),
      "CONFLICT",
    );
    expect(snapshotDir(opDir(store, "op-cas"))).toEqual(before);
  });

  it("treats a malformed fence as CONFLICT", async () => {
    const store = open();
    await store.create("op-fence", createEvidence);
    for (const fence of [
      { expectedSeq: 0, expectedHash: HASH },
      { expectedSeq: 1.5, expectedHash: HASH },
      { expectedSeq: 1, expectedHash: "sha256:short" },
    ]) {
      await expectSagaError(
        store.advance("op-fence", { ...fence, phase: "aborted", evidence: { reason: "x" } }),
        "CONFLICT",
      );
    }
  });

  it("lets exactly one of two store instances win the same compare-and-set", async () => {
    const first = open();
    const second = open();
    const saga = await first.create("op-two", createEvidence);
    const results = await Promise.allSettled([
      step(first, saga, "aborted", { reason: "one" }),
      step(second, saga, "aborted", { reason: "two" }),
    ]);
    expect(results.filter((result) => result.status === "fulfilled")).toHaveLength(1);
    const rejected = results.find((result) => result.status === "rejected") as PromiseRejectedResult;
    expect(rejected.reason.code).toBe("CONFLICT");
  });

  it("refuses a second create of the same id and any reuse of an archived id", async () => {
    const store = open();
    const saga = await store.create("op-dup", createEvidence);
    await expectSagaError(store.create("op-dup", createEvidence), "ALREADY_EXISTS");
    const aborted = await step(store, saga, "aborted", { reason: "x" });
    await store.archiveTerminal("op-dup", { expectedSeq: aborted.seq, expectedHash: aborted.headHash });
    await expectSagaError(store.create("op-dup", createEvidence), "ALREADY_EXISTS");
  });

  it("caps evidence size with LIMIT and writes nothing", async () => {
    const store = open({ limits: { maxEvidenceBytes: 600 } });
    const saga = await store.create("op-lim", createEvidence);
    await expectSagaError(step(store, saga, "aborted", { reason: "x".repeat(1000) }), "LIMIT");
    expect((await store.load("op-lim")).seq).toBe(1);
  });

  it("caps events per saga with LIMIT", async () => {
    // The cap keeps room to settle (test/store-event-cap.test.ts): with 2 events, recovery_required would
    // leave no room for the recovery after it (recovery_started, aborted), so it is the step refused; a
    // terminal event is held back by the cap alone.
    const store = open({ limits: { maxEvents: 2 } });
    let saga = await store.create("op-ev-cap", createEvidence);
    const error = await expectSagaError(
      step(store, saga, "recovery_required", { reason: "r", errorCode: "E" }),
      "LIMIT",
    );
    expect(error.message).toMatch(
      /Nothing was written\. What still fits is to finish it directly \(aborted\)/,
    );
    expect((await store.load("op-ev-cap")).seq).toBe(1);
    saga = await step(store, saga, "aborted", { reason: "x" });
    expect(saga.seq).toBe(2);
  });

  it("caps sagas per workspace shard with LIMIT, counting archived ones", async () => {
    const store = open({ limits: { maxSagasPerShard: 2 } });
    const first = await store.create("op-s1", createEvidence);
    const done = await step(store, first, "aborted", { reason: "x" });
    await store.archiveTerminal("op-s1", { expectedSeq: done.seq, expectedHash: done.headHash });
    await store.create("op-s2", createEvidence);
    await expectSagaError(store.create("op-s3", createEvidence), "LIMIT");
    expect(fs.existsSync(opDir(store, "op-s3"))).toBe(false);
    // What the LIMIT message asks for: purging an archived saga makes room (its receipt does not count).
    await store.purgeArchived("op-s1", { expectedSeq: done.seq, expectedHash: done.headHash });
    expect((await store.create("op-s3", createEvidence)).seq).toBe(1);
  });

  it("answers the shard cap from directory link counts far below the limit, without listing the sagas", async () => {
    const listed: string[] = [];
    const counting: FileOps = {
      ...nodeFileOps,
      readdirSync: ((path: string, ...rest: unknown[]) => {
        listed.push(path);
        return (nodeFileOps.readdirSync as (...a: unknown[]) => unknown)(path, ...rest);
      }) as FileOps["readdirSync"],
    };
    const store = open({ fs: counting, limits: { maxSagasPerShard: 50 } });
    for (let i = 0; i < 5; i++) {
      const saga = await store.create(`op-room-${i}`, createEvidence);
      const done = await step(store, saga, "aborted", { reason: "x" });
      await store.archiveTerminal(`op-room-${i}`, { expectedSeq: done.seq, expectedHash: done.headHash });
    }
    listed.length = 0;
    await store.create("op-room-next", createEvidence);
    expect(listed).not.toContain(store.shardDir);
    expect(listed).not.toContain(join(store.shardDir, ".archive"));
  });

  for (const [fsKind, constant] of [
    ["btrfs, which reports 1", 1],
    ["some FUSE and network mounts, which report a constant 2", 2],
  ] as const) {
    it(`counts the sagas by name where the file system keeps no directory link count (${fsKind})`, async () => {
      const noLinkCount: FileOps = {
        ...nodeFileOps,
        lstatSync: ((path: string, ...rest: unknown[]) => {
          const stat = (nodeFileOps.lstatSync as (...a: unknown[]) => fs.Stats | undefined)(path, ...rest);
          if (stat?.isDirectory()) stat.nlink = constant;
          return stat;
        }) as FileOps["lstatSync"],
      };
      const store = open({ fs: noLinkCount, limits: { maxSagasPerShard: 3 } });
      const first = await store.create(`op-b1-${constant}`, createEvidence);
      const done = await step(store, first, "aborted", { reason: "x" });
      await store.archiveTerminal(`op-b1-${constant}`, {
        expectedSeq: done.seq,
        expectedHash: done.headHash,
      });
      await store.create(`op-b2-${constant}`, createEvidence);
      await store.create(`op-b3-${constant}`, createEvidence);
      await expectSagaError(store.create(`op-b4-${constant}`, createEvidence), "LIMIT");
      expect(fs.existsSync(opDir(store, `op-b4-${constant}`))).toBe(false);
    });
  }

  it("counts the sagas by name near the limit, where the link counts' bound (other subdirectories too) reaches it", async () => {
    // .locks and .archive are subdirectories too: with a limit of 4, two sagas already bring the bound to it.
    const store = open({ limits: { maxSagasPerShard: 4 } });
    for (const id of ["op-n1", "op-n2", "op-n3", "op-n4"]) await store.create(id, createEvidence);
    await expectSagaError(store.create("op-n5", createEvidence), "LIMIT");
    expect(fs.existsSync(opDir(store, "op-n5"))).toBe(false);
  });

  it("refuses operation ids that are not one safe path segment", async () => {
    const store = open();
    for (const id of ["../escape", ".hidden", "a/b", "", "x".repeat(129), "nul\0"]) {
      await expectSagaError(store.create(id, createEvidence), "INVALID_ARGUMENT");
      await expectSagaError(store.load(id), "INVALID_ARGUMENT");
    }
    expect(fs.existsSync(join(bed.base, "escape"))).toBe(false);
  });

  it("refuses a stateDir inside the workspace", () => {
    expect(() =>
      openSagaStore({ stateDir: join(bed.workspace, "state"), workspaceRoot: bed.workspace }),
    ).toThrow(expect.objectContaining({ code: "INVALID_ARGUMENT" }));
  });

  it("gives NOT_FOUND for an unknown saga and for an archived one on load", async () => {
    const store = open();
    await expectSagaError(store.load("op-none"), "NOT_FOUND");
    const saga = await store.create("op-arch", createEvidence);
    const aborted = await step(store, saga, "aborted", { reason: "x" });
    await store.archiveTerminal("op-arch", { expectedSeq: aborted.seq, expectedHash: aborted.headHash });
    await expectSagaError(store.load("op-arch"), "NOT_FOUND");
    expect((await store.loadArchived("op-arch")).headHash).toBe(aborted.headHash);
  });

  it("keeps shards of different workspaces isolated", async () => {
    const otherWorkspace = join(bed.base, "other");
    fs.mkdirSync(otherWorkspace);
    const a = open();
    const b = openSagaStore({ stateDir: bed.stateDir, workspaceRoot: otherWorkspace });
    await a.create("same-id", createEvidence);
    const inB = await b.create("same-id", createEvidence);
    expect(inB.workspaceRoot).toBe(otherWorkspace);
    expect(a.shardDir).not.toBe(b.shardDir);
    expect((await a.load("same-id")).events[0]!.evidence.workspaceRoot).toBe(bed.workspace);
  });

  it("refuses a saga whose workspace directory was replaced with WORKSPACE_MISMATCH", async () => {
    const store = open();
    await store.create("op-replaced", createEvidence);
    // The old directory stays alive elsewhere, so the new one cannot reuse its inode number.
    fs.renameSync(bed.workspace, join(bed.base, "old-workspace"));
    fs.mkdirSync(bed.workspace);
    await expectSagaError(open().load("op-replaced"), "WORKSPACE_MISMATCH");
  });
});

describe("saga store: crash windows and write failures", () => {
  class Crash extends Error {}
  const crashAt = (point: string) => ({
    point(name: string) {
      if (name === point) throw new Crash(point);
    },
  });

  it("rolls a HEAD left exactly one event behind forward on the next load", async () => {
    const store = open();
    const saga = await store.create("op-roll", createEvidence);
    const crashing = open({ crash: crashAt("saga.after-event-published") });
    await expect(step(crashing, saga, "aborted", { reason: "x" })).rejects.toMatchObject({
      cause: expect.any(Crash),
    });
    const head = JSON.parse(fs.readFileSync(join(opDir(store, "op-roll"), "HEAD"), "utf8"));
    expect(head.seq).toBe(1);
    const loaded = await store.load("op-roll");
    expect(loaded.headRolledForward).toBe(true);
    expect(loaded.phase).toBe("aborted");
    expect(JSON.parse(fs.readFileSync(join(opDir(store, "op-roll"), "HEAD"), "utf8")).seq).toBe(2);
  });

  it("recovers a create whose HEAD was never committed, and re-create then gives ALREADY_EXISTS", async () => {
    const crashing = open({ crash: crashAt("saga.after-event-published") });
    await expect(crashing.create("op-c", createEvidence)).rejects.toMatchObject({ cause: expect.any(Crash) });
    const store = open();
    const loaded = await store.load("op-c");
    expect(loaded.seq).toBe(1);
    expect(loaded.headRolledForward).toBe(true);
    await expectSagaError(store.create("op-c", createEvidence), "ALREADY_EXISTS");
  });

  it("lets a create that died before event 1 be created again, reusing its directory", async () => {
    const crashing = open({ crash: crashAt("saga.after-genesis-head") });
    await expect(crashing.create("op-orphan", createEvidence)).rejects.toMatchObject({
      cause: expect.any(Crash),
    });
    const store = open();
    await expectSagaError(store.load("op-orphan"), "NOT_FOUND");
    // (listPending would remove it: the create that died let go of its locks; see orphan.test.ts.)
    expect(fs.readdirSync(opDir(store, "op-orphan"))).toEqual(["HEAD"]);
    // The re-create flushes the directory's name into the shard too: the dead create may have died
    // between making the directory and flushing it, and an acknowledged saga must survive a power loss.
    const flushed: string[] = [];
    const paths = new Map<number, string>();
    const watching: FileOps = {
      ...nodeFileOps,
      openSync: ((path: string, ...rest: unknown[]) => {
        const fd = (nodeFileOps.openSync as (...a: unknown[]) => number)(path, ...rest);
        paths.set(fd, String(path));
        return fd;
      }) as FileOps["openSync"],
      fsyncSync: (fd) => {
        flushed.push(paths.get(fd) ?? "?");
        nodeFileOps.fsyncSync(fd);
      },
    };
    const saga = await open({ fs: watching }).create("op-orphan", createEvidence);
    expect(saga.seq).toBe(1);
    expect(flushed).toContain(store.shardDir);
  });

  it("deletes temporary files on load and never promotes them", async () => {
    const store = open();
    const saga = await store.create("op-temp", createEvidence);
    const dir = opDir(store, "op-temp");
    // A fully valid next event, left as a temp by a writer that died before publishing it.
    const body = {
      schema: "drydock.restore-saga-event" as const,
      version: 1 as const,
      operationId: "op-temp",
      seq: 2,
      prevHash: saga.headHash,
      phase: "aborted" as const,
      timestamp: new Date().toISOString(),
      evidence: { reason: "ghost" },
    };
    const temp = join(dir, `.000002-aborted.json.${process.pid}.0123456789abcdef.tmp`);
    fs.writeFileSync(temp, JSON.stringify({ ...body, hash: eventHash(body) }), { mode: 0o600 });
    const loaded = await store.load("op-temp");
    expect(loaded.seq).toBe(1);
    expect(fs.existsSync(temp)).toBe(false);
  });

  it("reports event_not_committed and leaves the saga as it was when publishing the event fails", async () => {
    const store = open();
    const saga = await store.create("op-fail", createEvidence);
    const before = snapshotDir(opDir(store, "op-fail"));
    const faulty = failNthCall(nodeFileOps, {
      n: 1,
      code: "ENOSPC",
      count: (name, args) => name === "linkSync" && String(args[1]).endsWith("-aborted.json"),
    });
    const error = await expectSagaError(
      step(open({ fs: faulty.ops }), saga, "aborted", { reason: "x" }),
      "WRITE_FAILED",
    );
    expect(faulty.fired()).toBe(true);
    expect(error.commitState).toBe("event_not_committed");
    expect(error.details.intendedSeq).toBe(2);
    expect(snapshotDir(opDir(store, "op-fail"))).toEqual(before);
  });

  it("reconciles an unsettled HEAD as the exact successor within the same advance", async () => {
    const store = open();
    const saga = await store.create("op-head", createEvidence);
    const faulty = failNthCall(nodeFileOps, {
      n: 1,
      code: "EIO",
      count: (name, args) => name === "renameSync" && String(args[1]).endsWith("HEAD"),
    });
    const advanced = await step(open({ fs: faulty.ops }), saga, "aborted", { reason: "x" });
    expect(faulty.fired()).toBe(true);
    expect(advanced.seq).toBe(2);
    expect(advanced.headRolledForward).toBe(true);
    expect((await store.load("op-head")).headRolledForward).toBe(false);
  });

  it("returns a committed create even when its event cannot be read back (EIO after HEAD moved)", async () => {
    // Event 1 and HEAD are on disk once HEAD is renamed: a read failing after that must not turn the
    // create into an error saying nothing was changed (a retry would then answer ALREADY_EXISTS).
    let published = false;
    const readBackFails: FileOps = {
      ...nodeFileOps,
      renameSync: (from, to) => {
        nodeFileOps.renameSync(from, to);
        if (String(to).endsWith("HEAD")) published = true;
      },
      openSync: ((path: string, ...rest: unknown[]) => {
        if (published && String(path).endsWith("000001-created.json")) throw errnoError("EIO", "open", path);
        return (nodeFileOps.openSync as (...a: unknown[]) => number)(path, ...rest);
      }) as FileOps["openSync"],
    };
    const created = await open({ fs: readBackFails }).create("op-readback", createEvidence);
    expect(published).toBe(true);
    expect(created.seq).toBe(1);
    expect(created.phase).toBe("created");
    expect(created.headRolledForward).toBe(false);
    const loaded = await open().load("op-readback");
    expect(loaded.headHash).toBe(created.headHash);
    expect(loaded.workspaceIdentity).toBe(created.workspaceIdentity);
    expect(loaded.events).toEqual(created.events);
    expect(Object.isFrozen(created)).toBe(true);
  });

  it("reports event_committed_head_unsettled when HEAD cannot be moved at all, and a later load settles it", async () => {
    const store = open();
    const saga = await store.create("op-stuck", createEvidence);
    const headRenameFails: FileOps = {
      ...nodeFileOps,
      renameSync: (from, to) => {
        if (String(to).endsWith("HEAD")) throw Object.assign(new Error("EIO"), { code: "EIO" });
        return nodeFileOps.renameSync(from, to);
      },
    };
    const error = await expectSagaError(
      step(open({ fs: headRenameFails }), saga, "aborted", { reason: "x" }),
      "WRITE_FAILED",
    );
    expect(error.commitState).toBe("event_committed_head_unsettled");
    expect(error.details.intendedSeq).toBe(2);
    const loaded = await store.load("op-stuck");
    expect(loaded.seq).toBe(2);
    expect(loaded.events[1]!.hash).toBe(error.details.intendedHash);
  });
});

describe("saga store: tampering is CORRUPT and changes nothing", () => {
  async function completedSaga(): Promise<{ store: SagaStore; dir: string; saga: SagaState }> {
    const store = open();
    const saga = await happyPath(store, "op-t");
    return { store, dir: opDir(store, "op-t"), saga };
  }

  /** Flips one bit in the middle of the file; returns its original bytes. */
  function flipMiddleByte(path: string): Buffer {
    const original = fs.readFileSync(path);
    const changed = Buffer.from(original);
    changed[Math.floor(changed.length / 2)]! ^= 0x01;
    fs.writeFileSync(path, changed);
    return original;
  }

  async function expectCorruptUnchanged(store: SagaStore, dir: string): Promise<void> {
    const before = snapshotDir(dir);
    await expectSagaError(store.load("op-t"), "CORRUPT");
    expect(snapshotDir(dir)).toEqual(before);
  }

  it("detects a changed byte anywhere in any event file or in HEAD", async () => {
    const { store, dir } = await completedSaga();
    for (const name of fs.readdirSync(dir).sort()) {
      const path = join(dir, name);
      const original = fs.readFileSync(path);
      for (const offset of [
        0,
        Math.floor(original.length / 3),
        Math.floor(original.length / 2),
        original.length - 2,
      ]) {
        const changed = Buffer.from(original);
        changed[offset] = changed[offset] === 0x20 ? 0x09 : changed[offset]! ^ 0x01;
        fs.writeFileSync(path, changed);
        await expectCorruptUnchanged(store, dir);
        fs.writeFileSync(path, original);
      }
    }
    expect((await store.load("op-t")).seq).toBe(8);
  });

  it("catches a change made after this very store verified the chain, in advance as in load", async () => {
    // The store remembers what it verified (to skip re-checking identical bytes); a changed byte is not
    // identical, so it is checked again, whoever asks.
    const { store, dir, saga } = await completedSaga();
    expect((await store.load("op-t")).seq).toBe(8);
    const path = join(dir, "000003-prepared.json");
    const original = flipMiddleByte(path);
    const before = snapshotDir(dir);
    await expectSagaError(
      store.advance("op-t", {
        expectedSeq: saga.seq,
        expectedHash: saga.headHash,
        phase: "recovery_required",
        evidence: { reason: "test", errorCode: "TEST" },
      }),
      "CORRUPT",
    );
    expect(snapshotDir(dir)).toEqual(before);
    fs.writeFileSync(path, original);
    expect((await store.load("op-t")).headHash).toBe(saga.headHash);
  });

  it("catches a change to what this very store just wrote, before anything re-read it", async () => {
    // An advance remembers the event and HEAD it wrote, so the next call compares bytes instead of parsing
    // its own output again; a byte changed on disk in between is not identical, and is verified in full.
    for (const target of ["event", "HEAD"] as const) {
      const store = open();
      const id = `op-w-${target}`;
      const created = await store.create(id, createEvidence);
      const saga = await step(store, created, "aborted", { reason: "x" });
      const dir = opDir(store, id);
      const path = join(dir, target === "HEAD" ? "HEAD" : "000002-aborted.json");
      const original = flipMiddleByte(path);
      const before = snapshotDir(dir);
      await expectSagaError(
        store.archiveTerminal(id, { expectedSeq: saga.seq, expectedHash: saga.headHash }),
        "CORRUPT",
      );
      await expectSagaError(store.load(id), "CORRUPT");
      expect(snapshotDir(dir)).toEqual(before);
      fs.writeFileSync(path, original);
      expect((await store.load(id)).headHash).toBe(saga.headHash);
    }
  });

  it("detects random single-byte changes in any saga file (property)", async () => {
    const { store, dir } = await completedSaga();
    const names = fs.readdirSync(dir).sort();
    await fc.assert(
      fc.asyncProperty(
        fc.nat({ max: names.length - 1 }),
        fc.nat(),
        fc.integer({ min: 1, max: 255 }),
        async (fileIndex, position, delta) => {
          const path = join(dir, names[fileIndex]!);
          const original = fs.readFileSync(path);
          const changed = Buffer.from(original);
          const offset = position % original.length;
          changed[offset] = (changed[offset]! + delta) % 256;
          fs.writeFileSync(path, changed);
          try {
            await expectCorruptUnchanged(store, dir);
          } finally {
            fs.writeFileSync(path, original);
          }
        },
      ),
      { numRuns: 60 },
    );
    expect((await store.load("op-t")).seq).toBe(8);
  });

  it("detects a removed tail event while HEAD still names it", async () => {
    const { store, dir } = await completedSaga();
    fs.rmSync(join(dir, "000008-completed.json"));
    await expectCorruptUnchanged(store, dir);
  });

  it("detects a HEAD edited to point at an earlier event", async () => {
    const { store, dir, saga } = await completedSaga();
    const head = JSON.parse(fs.readFileSync(join(dir, "HEAD"), "utf8"));
    const earlier = saga.events[5]!;
    // Fields changed, anchor left as it was.
    fs.writeFileSync(
      join(dir, "HEAD"),
      `${JSON.stringify({ ...head, seq: earlier.seq, phase: earlier.phase, eventHash: earlier.hash, eventFile: "000006-mutation_started.json" }, null, 2)}\n`,
    );
    await expectCorruptUnchanged(store, dir);
    // Two behind, even with a recomputed anchor, is not a crash state either.
    const body = {
      schema: head.schema,
      version: 1,
      state: "committed",
      operationId: "op-t",
      seq: earlier.seq,
      phase: earlier.phase,
      eventFile: "000006-mutation_started.json",
      eventHash: earlier.hash,
    };
    const rewritten = { ...body, anchorHash: domainDigest(HEAD_ANCHOR_DOMAIN, body) };
    fs.writeFileSync(join(dir, "HEAD"), `${JSON.stringify(JSON.parse(canonicalJson(rewritten)), null, 2)}\n`);
    await expectCorruptUnchanged(store, dir);
  });

  it("detects swapped event files", async () => {
    const { store, dir } = await completedSaga();
    const a = join(dir, "000003-prepared.json");
    const b = join(dir, "000004-intent_committed.json");
    const bytesA = fs.readFileSync(a);
    fs.writeFileSync(a, fs.readFileSync(b));
    fs.writeFileSync(b, bytesA);
    await expectCorruptUnchanged(store, dir);
  });

  it("refuses a symlinked event file", async () => {
    const { store, dir } = await completedSaga();
    const path = join(dir, "000005-safety_ready.json");
    const outside = join(bed.base, "outside.json");
    fs.renameSync(path, outside);
    fs.symlinkSync(outside, path);
    await expectCorruptUnchanged(store, dir);
  });

  it("refuses a hard-linked event file", async () => {
    const { store, dir } = await completedSaga();
    fs.linkSync(join(dir, "000002-locked.json"), join(bed.base, "second-name.json"));
    await expectCorruptUnchanged(store, dir);
  });

  it("refuses a symlinked saga directory and an unexpected file", async () => {
    const { store, dir } = await completedSaga();
    const moved = join(bed.base, "moved-op");
    fs.renameSync(dir, moved);
    fs.symlinkSync(moved, dir);
    await expectSagaError(store.load("op-t"), "CORRUPT");
    fs.rmSync(dir);
    fs.renameSync(moved, dir);
    fs.writeFileSync(join(dir, "notes.txt"), "hello");
    await expectCorruptUnchanged(store, dir);
  });

  it("refuses a chain that was rehashed by hand to skip the safety checkpoint", async () => {
    const store = open();
    let saga = await store.create("op-t", createEvidence);
    const o = owner("op-t");
    saga = await step(store, saga, "locked", { workspaceLockOwner: o, lockOwnerDigest: ownerDigest(o) });
    saga = await step(store, saga, "prepared", { prestateDigest: HASH, targetCount: 4 });
    saga = await step(store, saga, "intent_committed", { intentCommitDigest: HASH, authority: "operation" });
    const dir = opDir(store, "op-t");
    // A forged, correctly hashed event 5 and a matching HEAD: consistent bytes, illegal history.
    const last = saga.events.at(-1)!;
    const body = {
      schema: "drydock.restore-saga-event" as const,
      version: 1 as const,
      operationId: "op-t",
      seq: 5,
      prevHash: last.hash,
      phase: "workspace_applied" as const,
      timestamp: last.timestamp,
      evidence: { appliedCount: 0, poststateDigest: HASH },
    };
    const forged = { ...body, hash: eventHash(body) };
    fs.writeFileSync(
      join(dir, "000005-workspace_applied.json"),
      `${JSON.stringify(JSON.parse(canonicalJson(forged)), null, 2)}\n`,
    );
    await expectCorruptUnchanged(store, dir);
  });
});

describe("saga store: archive and listing", () => {
  it("archives only a terminal saga with the exact fence, in one rename, idempotently", async () => {
    const store = open();
    let saga = await store.create("op-a", createEvidence);
    await expectSagaError(
      store.archiveTerminal("op-a", { expectedSeq: 1, expectedHash: saga.headHash }),
      "INVALID_TRANSITION",
    );
    saga = await step(store, saga, "aborted", { reason: "x" });
    await expectSagaError(
      store.archiveTerminal("op-a", { expectedSeq: 1, expectedHash: saga.headHash }),
      "CONFLICT",
    );
    const first = await store.archiveTerminal("op-a", { expectedSeq: saga.seq, expectedHash: saga.headHash });
    expect(first).toMatchObject({ archived: true, alreadyArchived: false, phase: "aborted", seq: 2 });
    expect(fs.existsSync(opDir(store, "op-a"))).toBe(false);
    expect(fs.readdirSync(join(store.shardDir, ".archive", "op-a")).sort()).toEqual([
      "000001-created.json",
      "000002-aborted.json",
      "HEAD",
    ]);
    const again = await store.archiveTerminal("op-a", { expectedSeq: saga.seq, expectedHash: saga.headHash });
    expect(again).toMatchObject({ archived: true, alreadyArchived: true, seq: 2, headHash: saga.headHash });
    await expectSagaError(
      store.archiveTerminal("op-a", { expectedSeq: 1, expectedHash: saga.headHash }),
      "CONFLICT",
    );
    await expectSagaError(
      store.archiveTerminal("op-none", { expectedSeq: 1, expectedHash: HASH }),
      "NOT_FOUND",
    );
  });

  async function archivedSaga(store: SagaStore, id: string): Promise<SagaState> {
    const saga = await step(store, await store.create(id, createEvidence), "aborted", { reason: "x" });
    await store.archiveTerminal(id, { expectedSeq: saga.seq, expectedHash: saga.headHash });
    return saga;
  }

  it("purges an archived saga with its exact fence, keeps a receipt, and never reuses the id", async () => {
    const store = open();
    const saga = await archivedSaga(store, "op-p");
    const fence = { expectedSeq: saga.seq, expectedHash: saga.headHash };
    expect(await store.listArchived()).toEqual(["op-p"]);
    await expectSagaError(store.purgeArchived("op-p", { ...fence, expectedSeq: 1 }), "CONFLICT");
    expect(await store.listArchived()).toEqual(["op-p"]);

    const purged = await store.purgeArchived("op-p", fence);
    expect(purged).toEqual({
      purged: true,
      alreadyPurged: false,
      operationId: "op-p",
      phase: "aborted",
      seq: 2,
      headHash: saga.headHash,
    });
    expect(fs.existsSync(join(store.shardDir, ".archive", "op-p"))).toBe(false);
    expect(fs.readdirSync(join(store.shardDir, ".purge"))).toEqual([]);
    const receipt = JSON.parse(fs.readFileSync(join(store.shardDir, ".purged", "op-p.json"), "utf8"));
    expect(receipt).toMatchObject({ operationId: "op-p", phase: "aborted", seq: 2, headHash: saga.headHash });
    expect(fs.statSync(join(store.shardDir, ".purged", "op-p.json")).mode & 0o777).toBe(0o600);
    expect(await store.listArchived()).toEqual([]);

    // A retry is an exact read; the id stays used.
    expect(await store.purgeArchived("op-p", fence)).toMatchObject({ alreadyPurged: true, seq: 2 });
    await expectSagaError(store.purgeArchived("op-p", { ...fence, expectedHash: HASH }), "CONFLICT");
    await expectSagaError(store.create("op-p", createEvidence), "ALREADY_EXISTS");
    await expectSagaError(store.archiveTerminal("op-p", fence), "CONFLICT");
    const gone = await expectSagaError(store.loadArchived("op-p"), "NOT_FOUND");
    expect(gone.message).toMatch(/purged/);
    await expectSagaError(store.purgeArchived("op-none", fence), "NOT_FOUND");
  });

  it("purges only archived sagas whose chain verifies", async () => {
    const store = open();
    const active = await store.create("op-active", createEvidence);
    await expectSagaError(
      store.purgeArchived("op-active", { expectedSeq: active.seq, expectedHash: active.headHash }),
      "INVALID_TRANSITION",
    );
    const saga = await archivedSaga(store, "op-bad");
    const dir = join(store.shardDir, ".archive", "op-bad");
    const path = join(dir, "000001-created.json");
    const changed = fs.readFileSync(path);
    changed[Math.floor(changed.length / 2)]! ^= 0x01;
    fs.writeFileSync(path, changed);
    const before = snapshotDir(dir);
    await expectSagaError(
      store.purgeArchived("op-bad", { expectedSeq: saga.seq, expectedHash: saga.headHash }),
      "CORRUPT",
    );
    expect(snapshotDir(dir)).toEqual(before);
    expect(fs.existsSync(join(store.shardDir, ".purged", "op-bad.json"))).toBe(false);
  });

  it("finishes a purge interrupted after its receipt or after its rename on retry", async () => {
    class Crash extends Error {}
    for (const point of ["saga.after-purge-receipt", "saga.after-purge-rename"]) {
      const id = `op-${point.slice("saga.after-purge-".length)}`;
      const saga = await archivedSaga(open(), id);
      const fence = { expectedSeq: saga.seq, expectedHash: saga.headHash };
      const crashing = open({
        crash: {
          point(name: string) {
            if (name === point) throw new Crash(point);
          },
        },
      });
      await expect(crashing.purgeArchived(id, fence)).rejects.toBeTruthy();
      const store = open();
      // Decided (the receipt is durable) but not finished: the id is taken, a retry completes it.
      await expectSagaError(store.create(id, createEvidence), "ALREADY_EXISTS");
      expect(await store.purgeArchived(id, fence)).toMatchObject({ alreadyPurged: true, seq: saga.seq });
      expect(fs.existsSync(join(store.shardDir, ".archive", id))).toBe(false);
      expect(fs.existsSync(join(store.shardDir, ".purge", id))).toBe(false);
    }
  });

  it("reports a failed archive rename as archive_not_committed, and a retry archives", async () => {
    const store = open();
    let saga = await store.create("op-af", createEvidence);
    saga = await step(store, saga, "aborted", { reason: "x" });
    const faulty = failNthCall(nodeFileOps, {
      n: 1,
      code: "EIO",
      count: (name, args) => name === "renameSync" && String(args[1]).includes(".archive"),
    });
    const error = await expectSagaError(
      open({ fs: faulty.ops }).archiveTerminal("op-af", {
        expectedSeq: saga.seq,
        expectedHash: saga.headHash,
      }),
      "WRITE_FAILED",
    );
    expect(error.commitState).toBe("archive_not_committed");
    expect((await store.load("op-af")).phase).toBe("aborted");
    const done = await store.archiveTerminal("op-af", { expectedSeq: saga.seq, expectedHash: saga.headHash });
    expect(done.alreadyArchived).toBe(false);
  });

  it("answers a retry after an unknown archive outcome with alreadyArchived", async () => {
    const store = open();
    let saga = await store.create("op-au", createEvidence);
    saga = await step(store, saga, "aborted", { reason: "x" });
    // The first flush after the rename into .archive fails: the move happened, its durability is unknown.
    let renamed = false;
    const faulty: FileOps = {
      ...nodeFileOps,
      renameSync: (from, to) => {
        nodeFileOps.renameSync(from, to);
        if (String(to).includes(".archive")) renamed = true;
      },
      fsyncSync: (fd) => {
        if (renamed) throw errnoError("EIO", "fsync");
        nodeFileOps.fsyncSync(fd);
      },
    };
    const error = await expectSagaError(
      open({ fs: faulty }).archiveTerminal("op-au", {
        expectedSeq: saga.seq,
        expectedHash: saga.headHash,
      }),
      "WRITE_FAILED",
    );
    expect(error.commitState).toBe("archive_commit_unknown");
    const retry = await store.archiveTerminal("op-au", {
      expectedSeq: saga.seq,
      expectedHash: saga.headHash,
    });
    expect(retry).toMatchObject({ archived: true, alreadyArchived: true, phase: "aborted", seq: 2 });
  });

  it("lists a saga whose state lock is held by a live process as busy", async () => {
    const store = open();
    await store.create("op-busy", createEvidence);
    const handle = await acquireLock(join(store.shardDir, ".locks", "op-busy.lock"));
    try {
      const pending = await store.listPending();
      expect(pending.items).toEqual([]);
      expect(pending.diagnostics).toEqual([
        { operationId: "op-busy", status: "busy", code: "LOCK_FAILED", recoverable: false },
      ]);
    } finally {
      handle.release();
    }
    expect((await store.listPending()).items.map((item) => item.operationId)).toEqual(["op-busy"]);
  });

  it("lists pending sagas page by page with diagnostics for terminal and unreadable ones", async () => {
    const store = open();
    for (const id of ["p-1", "p-2", "p-3", "p-4"]) await store.create(id, createEvidence);
    const done = await step(store, await store.load("p-2"), "aborted", { reason: "x" });
    expect(done.terminal).toBe(true);
    fs.writeFileSync(join(opDir(store, "p-3"), "HEAD"), "garbage");
    const page1 = await store.listPending({ limit: 2 });
    expect(page1.items.map((item) => item.operationId)).toEqual(["p-1"]);
    expect(page1.diagnostics).toEqual([
      { operationId: "p-2", status: "terminal_unarchived", code: null, recoverable: true },
    ]);
    expect(page1).toMatchObject({ truncated: true, nextCursor: "p-2" });
    const page2 = await store.listPending({ after: page1.nextCursor!, limit: 2 });
    expect(page2.items.map((item) => item.operationId)).toEqual(["p-4"]);
    expect(page2.diagnostics).toEqual([
      { operationId: "p-3", status: "corrupt", code: "CORRUPT", recoverable: false },
    ]);
    expect(page2).toMatchObject({ truncated: false, nextCursor: null });
    expect(page2.items[0]).toMatchObject({ phase: "created", seq: 1 });
  });
});
