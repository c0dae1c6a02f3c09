import * as fs from "node:fs";
import { join } from "node:path";
import { type FileOps, nodeFileOps } from "@drydock/file-lock";
import { describe, expect, it } from "vitest";
import { openSagaStore, ownerDigest, type SagaState, type SagaStore } from "../src/index.js";
import { rejection } from "./helpers.js";
import { createEvidence, HASH, step, useStoreBed } from "./store-bed.js";

const bed = useStoreBed("store-edges");
const { open, owner } = bed;

async function upToPrepared(store: SagaStore, id: string): Promise<SagaState> {
  let saga = await store.create(id, createEvidence);
  saga = await step(store, saga, "locked", bed.lockedEvidence(id));
  return step(store, saga, "prepared", { prestateDigest: HASH, targetCount: 3 });
}

function snapshotDir(dir: string): Map<string, string> {
  return new Map(
    fs.readdirSync(dir).map((name) => [name, fs.readFileSync(join(dir, name)).toString("base64")]),
  );
}

describe("saga store: the verified-chain memo trusts equal bytes only under the same file name", () => {
  it("calls an event file renamed to another phase CORRUPT in the store that verified it, in load and advance", async () => {
    const store = open();
    const saga = await upToPrepared(store, "op-r");
    const dir = join(store.shardDir, "op-r");
    await store.load("op-r"); // the memo now holds the whole chain
    fs.renameSync(join(dir, "000003-prepared.json"), join(dir, "000003-aborted.json"));
    const before = snapshotDir(dir);
    // A store without a memo calls it CORRUPT ...
    expect((await rejection(open().load("op-r"))).code).toBe("CORRUPT");
    // ... and so does the one that verified those very bytes under their old name.
    const loaded = await rejection(store.load("op-r"));
    expect(loaded.code).toBe("CORRUPT");
    expect(loaded.message).toContain("000003-aborted.json");
    const advanced = await rejection(
      step(store, saga, "intent_committed", { intentCommitDigest: HASH, authority: "operation" }),
    );
    expect(advanced.code).toBe("CORRUPT");
    expect(snapshotDir(dir)).toEqual(before);
  });

  it("also for the event this store has just written and remembered without reading it", async () => {
    const store = open();
    const created = await store.create("op-w", createEvidence);
    const saga = await step(store, created, "recovery_required", { reason: "r", errorCode: "E" });
    const dir = join(store.shardDir, "op-w");
    fs.renameSync(join(dir, "000002-recovery_required.json"), join(dir, "000002-aborted.json"));
    const before = snapshotDir(dir);
    expect((await rejection(store.load("op-w"))).code).toBe("CORRUPT");
    const o = owner("op-w");
    const advanced = await rejection(
      step(store, saga, "recovery_started", {
        workspaceLockOwner: o,
        lockOwnerDigest: ownerDigest(o),
        recoveryAction: "abort-pre-intent",
      }),
    );
    expect(advanced.code).toBe("CORRUPT");
    expect(snapshotDir(dir)).toEqual(before);
    // Renamed back, the chain is what it was.
    fs.renameSync(join(dir, "000002-aborted.json"), join(dir, "000002-recovery_required.json"));
    expect((await store.load("op-w")).headHash).toBe(saga.headHash);
  });
});

describe("saga store: reserved operation ids", () => {
  it("refuses 'shard' (its state lock would be the shard lock) at once with INVALID_ARGUMENT", async () => {
    const store = open();
    for (const id of ["shard", "Shard", "SHARD"]) {
      const started = Date.now();
      const error = await rejection(store.create(id, createEvidence));
      expect(error.code, error.message).toBe("INVALID_ARGUMENT");
      expect(error.message).toMatch(/reserved/);
      // Refused before any lock: no 5 s wait for a lock this very call holds.
      expect(Date.now() - started).toBeLessThan(1_000);
      expect((await rejection(store.load(id))).code).toBe("INVALID_ARGUMENT");
    }
    expect(fs.existsSync(join(store.shardDir, "shard"))).toBe(false);
    // Ids that merely contain it stay valid.
    expect((await store.create("shard-1", createEvidence)).seq).toBe(1);
    expect((await store.create("shards", createEvidence)).seq).toBe(1);
  }, 20_000);
});

describe("saga store: a clock the event schema cannot record", () => {
  const MICROSECONDS = () => Date.now() * 1000; // far beyond year 9999

  it("refuses an advance with INVALID_ARGUMENT, event_not_committed, and writes nothing", async () => {
    const store = open();
    const saga = await store.create("op-c", createEvidence);
    const dir = join(store.shardDir, "op-c");
    const before = snapshotDir(dir);
    for (const now of [MICROSECONDS, () => Number.NaN, () => Number.POSITIVE_INFINITY]) {
      const error = await rejection(step(open({ now }), saga, "aborted", { reason: "x" }));
      expect(error.code, error.message).toBe("INVALID_ARGUMENT");
      expect(error.commitState).toBe("event_not_committed");
      expect(error.message).toMatch(/clock/);
      expect(error.message).toMatch(/Nothing was written/);
      expect(snapshotDir(dir)).toEqual(before);
    }
    // Every store still reads the saga, and it still advances with a sane clock.
    expect((await open().load("op-c")).seq).toBe(1);
    expect((await step(store, saga, "aborted", { reason: "x" })).seq).toBe(2);
  });

  it("refuses a create the same way, leaving no saga directory behind", async () => {
    for (const now of [MICROSECONDS, () => Number.NaN]) {
      const error = await rejection(open({ now }).create("op-g", createEvidence));
      expect(error.code, error.message).toBe("INVALID_ARGUMENT");
      expect(error.commitState).toBe("event_not_committed");
    }
    const store = open();
    expect(fs.existsSync(join(store.shardDir, "op-g"))).toBe(false);
    expect((await store.listPending()).diagnostics).toEqual([]);
    expect((await store.create("op-g", createEvidence)).seq).toBe(1);
  });

  it("refuses a purge the same way, writing no receipt", async () => {
    const store = open();
    const saga = await step(store, await store.create("op-p", createEvidence), "aborted", { reason: "x" });
    const fence = { expectedSeq: saga.seq, expectedHash: saga.headHash };
    await store.archiveTerminal("op-p", fence);
    const error = await rejection(open({ now: MICROSECONDS }).purgeArchived("op-p", fence));
    expect(error.code, error.message).toBe("INVALID_ARGUMENT");
    expect(error.commitState).toBe("purge_not_committed");
    expect(fs.existsSync(join(store.shardDir, ".purged", "op-p.json"))).toBe(false);
    expect((await store.purgeArchived("op-p", fence)).alreadyPurged).toBe(false);
  });
});

describe("saga store: a stateDir inside the workspace", () => {
  it("is refused when reached through a symlink, whether or not it exists yet", () => {
    fs.symlinkSync(bed.workspace, join(bed.base, "link"));
    fs.mkdirSync(join(bed.workspace, "state"));
    for (const dir of [join(bed.base, "link", "state"), join(bed.base, "link", "not", "yet")]) {
      expect(() => openSagaStore({ stateDir: dir, workspaceRoot: bed.workspace })).toThrow(
        expect.objectContaining({
          code: "INVALID_ARGUMENT",
          message: expect.stringMatching(/must not be inside the workspace/),
        }),
      );
    }
    expect(fs.readdirSync(bed.workspace)).toEqual(["state"]);
    expect(fs.readdirSync(join(bed.workspace, "state"))).toEqual([]);
  });

  it("is accepted through a symlink that leads outside it", async () => {
    fs.mkdirSync(join(bed.base, "elsewhere"));
    fs.symlinkSync(join(bed.base, "elsewhere"), join(bed.base, "link"));
    const store = openSagaStore({ stateDir: join(bed.base, "link", "state"), workspaceRoot: bed.workspace });
    expect((await store.create("op-ok", createEvidence)).seq).toBe(1);
  });
});

describe("saga store: what a refusal says is true", () => {
  it("leaves a crashed writer's temporary file in place when the chain it sits in is CORRUPT", async () => {
    const store = open();
    await upToPrepared(store, "op-m");
    const dir = join(store.shardDir, "op-m");
    const temp = join(dir, `.000004-intent_committed.json.12345.${"0".repeat(16)}.tmp`);
    fs.writeFileSync(temp, "partial evidence of a crashed writer");
    const event = join(dir, "000002-locked.json");
    const bytes = fs.readFileSync(event);
    bytes[10]! ^= 1;
    fs.writeFileSync(event, bytes);
    const before = snapshotDir(dir);
    const error = await rejection(open().load("op-m"));
    expect(error.code).toBe("CORRUPT");
    expect(error.message).toMatch(/left exactly as they are/);
    expect(snapshotDir(dir)).toEqual(before);
    // Once the chain verifies again, the temp is removed as before.
    bytes[10]! ^= 1;
    fs.writeFileSync(event, bytes);
    expect((await open().load("op-m")).seq).toBe(3);
    expect(fs.existsSync(temp)).toBe(false);
  });

  it("takes a killed writer's temp still linked to the event it published as that event's second name", async () => {
    // publishNewFile: temp → link(2) to the event name → unlink temp. Killed in between, the temp and the
    // event are one inode with two names; the temp goes only once the chain verified.
    const store = open();
    await upToPrepared(store, "op-l");
    const dir = join(store.shardDir, "op-l");
    const temp = join(dir, `.000003-prepared.json.12345.${"1".repeat(16)}.tmp`);
    fs.linkSync(join(dir, "000003-prepared.json"), temp);
    const event = join(dir, "000001-created.json");
    const original = fs.readFileSync(event);
    const changed = Buffer.from(original);
    changed[12]! ^= 1;
    fs.writeFileSync(event, changed);
    const before = snapshotDir(dir);
    expect((await rejection(open().load("op-l"))).code).toBe("CORRUPT");
    expect(snapshotDir(dir)).toEqual(before);
    fs.writeFileSync(event, original);
    expect((await open().load("op-l")).seq).toBe(3);
    expect(fs.existsSync(temp)).toBe(false);
    expect(fs.statSync(join(dir, "000003-prepared.json")).nlink).toBe(1);
    // A second name that is not a temp of this saga is still a hard link, and CORRUPT.
    fs.linkSync(join(dir, "000003-prepared.json"), join(bed.base, "elsewhere.json"));
    expect((await rejection(open().load("op-l"))).code).toBe("CORRUPT");
  });

  it("removes a killed writer's temp of this version's form (`.drydock.<tag>...`) once the chain verified", async () => {
    const store = open();
    await upToPrepared(store, "op-t");
    const dir = join(store.shardDir, "op-t");
    const partial = join(dir, `.drydock.${"a".repeat(32)}.12345.${"2".repeat(16)}.tmp`);
    fs.writeFileSync(partial, "partial evidence of a crashed writer");
    // And one still linked to the event it published (killed between link(2) and unlinking the temp).
    const linked = join(dir, `.drydock.${"b".repeat(32)}.12345.${"3".repeat(16)}.tmp`);
    fs.linkSync(join(dir, "000003-prepared.json"), linked);
    expect((await open().load("op-t")).seq).toBe(3);
    expect(fs.existsSync(partial)).toBe(false);
    expect(fs.existsSync(linked)).toBe(false);
    expect(fs.statSync(join(dir, "000003-prepared.json")).nlink).toBe(1);
  });

  it("says the head hash differs, not the seq, when only the hash of a fence is wrong", async () => {
    const store = open();
    const saga = await store.create("op-h", createEvidence);
    const done = await step(store, saga, "recovery_required", { reason: "r", errorCode: "E" });
    const o = owner("op-h");
    const advanced = await rejection(
      store.advance("op-h", {
        expectedSeq: done.seq,
        expectedHash: HASH,
        phase: "recovery_started",
        evidence: {
          workspaceLockOwner: o,
          lockOwnerDigest: ownerDigest(o),
          recoveryAction: "abort-pre-intent",
        },
      }),
    );
    expect(advanced.code).toBe("CONFLICT");
    expect(advanced.message).not.toMatch(/expected seq 2/);
    expect(advanced.message).toContain(`head hash is ${done.headHash}`);
    expect(advanced.message).toContain(HASH);
    const started = await step(store, done, "recovery_started", {
      workspaceLockOwner: o,
      lockOwnerDigest: ownerDigest(o),
      recoveryAction: "abort-pre-intent",
    });
    // A real seq difference still names both seqs.
    const stale = await rejection(step(store, saga, "aborted", { reason: "late" }));
    expect(stale.message).toMatch(/seq 3.*seq 1/);
    const aborted = await step(store, started, "aborted", {
      recoveryAction: "abort-pre-intent",
      reason: "x",
    });
    for (const call of [
      () => store.archiveTerminal("op-h", { expectedSeq: aborted.seq, expectedHash: HASH }),
      async () => {
        await store.archiveTerminal("op-h", { expectedSeq: aborted.seq, expectedHash: aborted.headHash });
        return store.archiveTerminal("op-h", { expectedSeq: aborted.seq, expectedHash: HASH });
      },
    ]) {
      const error = await rejection(call());
      expect(error.code).toBe("CONFLICT");
      expect(error.message).not.toMatch(/not the seq 4/);
      expect(error.message).toContain(`head hash is ${aborted.headHash}`);
    }
  });
});

describe("saga store: listPending", () => {
  it("leaves out a saga another process archived between the listing and its lock", async () => {
    const plain = open();
    const saga = await plain.create("op-a", createEvidence);
    await step(plain, saga, "aborted", { reason: "x" });
    await plain.create("op-b", createEvidence);
    const dir = join(plain.shardDir, "op-a");
    let racing = true;
    const racy: FileOps = {
      ...nodeFileOps,
      readdirSync: ((path: fs.PathLike, ...rest: unknown[]) => {
        const names = (nodeFileOps.readdirSync as (...a: unknown[]) => string[])(path, ...rest);
        if (racing && String(path) === plain.shardDir) {
          racing = false;
          // Another process archives it right after this listing.
          fs.renameSync(dir, join(plain.shardDir, ".archive", "op-a"));
        }
        return names;
      }) as FileOps["readdirSync"],
    };
    const listed = await open({ fs: racy }).listPending();
    expect(racing).toBe(false);
    expect(listed.diagnostics).toEqual([]);
    expect(listed.items.map((item) => item.operationId)).toEqual(["op-b"]);
  });

  it("lists a saga whose HEAD could not be rolled forward as head_unsettled, not corrupt", async () => {
    const store = open();
    const saga = await store.create("op-u", createEvidence);
    const headRenameFails: FileOps = {
      ...nodeFileOps,
      renameSync: (from, to) => {
        if (String(to).endsWith("HEAD")) throw Object.assign(new Error("EIO"), { code: "EIO" });
        return nodeFileOps.renameSync(from, to);
      },
    };
    const failing = open({ fs: headRenameFails });
    const error = await rejection(step(failing, saga, "recovery_required", { reason: "r", errorCode: "E" }));
    expect(error.commitState).toBe("event_committed_head_unsettled");
    const listed = await failing.listPending();
    expect(listed.items).toEqual([]);
    expect(listed.diagnostics).toEqual([
      { operationId: "op-u", status: "head_unsettled", code: "WRITE_FAILED", recoverable: false },
    ]);
    // The next store that can write settles it.
    expect((await store.listPending()).items.map((item) => [item.operationId, item.seq])).toEqual([
      ["op-u", 2],
    ]);
  });
});

describe("saga store: a file that cannot be read is not called damaged unless it may be", () => {
  const failingOpen = (match: string, code: string): FileOps => ({
    ...nodeFileOps,
    openSync: ((path: fs.PathLike, ...rest: unknown[]) => {
      if (String(path).endsWith(match)) throw Object.assign(new Error(`${code}: injected`), { code });
      return (nodeFileOps.openSync as (...args: unknown[]) => number)(path, ...rest);
    }) as FileOps["openSync"],
  });

  it("EMFILE, ENFILE, ENOMEM, EAGAIN, EINTR: LOCK_FAILED with the errno and retry (listed busy); EIO: CORRUPT naming EIO", async () => {
    await open().create("op-io", createEvidence);
    for (const code of ["EMFILE", "ENFILE", "ENOMEM", "EAGAIN", "EINTR", "EIO"]) {
      const transient = code !== "EIO";
      // A fresh store each time: nothing remembered, every file is read.
      const store = open({ fs: failingOpen("000001-created.json", code) });
      const error = await rejection(store.load("op-io"));
      expect(error.code, error.message).toBe(transient ? "LOCK_FAILED" : "CORRUPT");
      expect(error.message).toContain(`(${code}`);
      expect(error.message).toContain("000001-created.json");
      if (transient) {
        expect(error.message).toMatch(/says nothing about its contents.*retry/);
        expect(error.message).not.toMatch(/inspect it before any recovery/);
      }
      const listed = await open({ fs: failingOpen("000001-created.json", code) }).listPending();
      expect(listed.diagnostics).toEqual([
        {
          operationId: "op-io",
          status: transient ? "busy" : "corrupt",
          code: transient ? "LOCK_FAILED" : "CORRUPT",
          recoverable: false,
        },
      ]);
    }
    expect((await open().load("op-io")).seq).toBe(1);
  });

  it("a workspace whose stat fails with EIO or EMFILE is no other workspace: LOCK_FAILED (retry), not WORKSPACE_MISMATCH", async () => {
    const store = open();
    const root = store.workspaceRoot;
    for (const code of ["EIO", "EMFILE"]) {
      const failingStat: FileOps = {
        ...nodeFileOps,
        statSync: ((path: fs.PathLike, ...rest: unknown[]) => {
          if (String(path) === root) throw Object.assign(new Error(`${code}: injected`), { code });
          return (nodeFileOps.statSync as (...args: unknown[]) => unknown)(path, ...rest);
        }) as FileOps["statSync"],
      };
      const error = await rejection(open({ fs: failingStat }).create(`op-stat-${code}`, createEvidence));
      expect(error.code, error.message).toBe("LOCK_FAILED");
      expect(error.message).toContain(code);
    }
  });
});
