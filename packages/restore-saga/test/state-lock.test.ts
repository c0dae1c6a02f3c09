import * as fs from "node:fs";
import { join } from "node:path";
import { acquireLock, type FileOps, nodeFileOps } from "@drydock/file-lock";
import { describe, expect, it } from "vitest";
import { eventHash, type SagaState, type SagaStore } from "../src/index.js";
import { prettyCanonical } from "../src/internal/canonical.js";
import { withStateLock } from "../src/internal/state-lock.js";
import { rejection } from "./helpers.js";
import { createEvidence, HASH, step, useStoreBed } from "./store-bed.js";

const FOREIGN_TOKEN = "ffffffff-ffff-4fff-bfff-ffffffffffff";

const bed = useStoreBed("state-lock");
const { open } = bed;

async function upToLocked(store: SagaStore, id: string): Promise<SagaState> {
  const saga = await store.create(id, createEvidence);
  return step(store, saga, "locked", bed.lockedEvidence(id));
}

/** What a process that took the lock from us (a reaper misled about our liveness, a hand edit) leaves. */
function stealLock(path: string): void {
  const mine = JSON.parse(fs.readFileSync(path, "utf8"));
  fs.unlinkSync(path);
  fs.writeFileSync(path, `${JSON.stringify({ ...mine, token: FOREIGN_TOKEN })}\n`);
}

const eio = (syscall: string) =>
  Object.assign(new Error(`EIO: i/o error, ${syscall}`), { code: "EIO", syscall });

describe("state lock: a lock lost while it was held", () => {
  it("withStateLock reports it instead of returning the callback's result", async () => {
    const path = join(bed.base, "x.lock");
    const outcome = await withStateLock(path, "the test state", nodeFileOps, undefined, () => {
      stealLock(path);
      return "result";
    }).catch((error: unknown) => error);
    expect(outcome).toMatchObject({ code: "LOCK_OWNERSHIP_LOST" });
    expect((outcome as Error).message).toMatch(/may be stale/);
    // The other owner's lock is theirs: left in place.
    expect(JSON.parse(fs.readFileSync(path, "utf8")).token).toBe(FOREIGN_TOKEN);
  });

  it("an advance written while another writer held the saga's lock is WRITE_FAILED / event_commit_unknown, and the fork is CORRUPT on the next load", async () => {
    let other: (() => void) | null = null;
    const hooked: FileOps = {
      ...nodeFileOps,
      linkSync(from: fs.PathLike, to: fs.PathLike) {
        if (other && String(to).endsWith("000003-prepared.json")) {
          other();
          other = null;
        }
        return nodeFileOps.linkSync(from, to);
      },
    };
    const store = open({ fs: hooked });
    const at = await upToLocked(store, "op-f");
    const dir = join(store.shardDir, "op-f");
    const lockPath = join(store.shardDir, ".locks", "op-f.lock");
    // Another writer took the lock and published a valid event of another phase at the same seq: link(2)
    // refuses only the same name, and the name holds the phase.
    other = () => {
      stealLock(lockPath);
      const body = {
        schema: "drydock.restore-saga-event",
        version: 1 as const,
        operationId: "op-f",
        seq: 3,
        prevHash: at.headHash,
        phase: "aborted" as const,
        timestamp: new Date().toISOString(),
        evidence: { reason: "other writer" },
      };
      fs.writeFileSync(
        join(dir, "000003-aborted.json"),
        prettyCanonical({ ...body, hash: eventHash(body as never) }),
      );
    };
    const error = await rejection(step(store, at, "prepared", { prestateDigest: HASH, targetCount: 1 }));
    expect(error.code).toBe("WRITE_FAILED");
    expect(error.commitState).toBe("event_commit_unknown");
    expect(error.message).toMatch(/[Rr]eload the saga before deciding/);
    // The other writer finishes and lets go of the lock; the next replay sees two events with seq 3.
    fs.unlinkSync(lockPath);
    const corrupt = await rejection(open().load("op-f"));
    expect(corrupt.code).toBe("CORRUPT");
    expect(corrupt.message).toMatch(/two events with seq 3/);
  });

  it("a load whose lock was lost while it read says its result may be stale", async () => {
    let armed = false;
    const store = open({
      fs: {
        ...nodeFileOps,
        readdirSync: ((path: fs.PathLike, ...rest: unknown[]) => {
          if (armed && String(path) === join(store.shardDir, "op-r")) {
            armed = false;
            stealLock(join(store.shardDir, ".locks", "op-r.lock"));
          }
          return (nodeFileOps.readdirSync as (...args: unknown[]) => unknown)(path, ...rest);
        }) as FileOps["readdirSync"],
      },
    });
    await upToLocked(store, "op-r");
    armed = true;
    const error = await rejection(store.load("op-r"));
    expect(armed).toBe(false);
    expect(error.code).toBe("LOCK_OWNERSHIP_LOST");
    expect(error.commitState).toBeNull();
    expect(error.message).toMatch(/may be stale/);
  });
});

describe("state lock: a release that fails after the call's work is done", () => {
  function armedFs(ctl: { armed: boolean; lockPath: string; mode: "eio" | "garbage" }): FileOps {
    return {
      ...nodeFileOps,
      linkSync(from: fs.PathLike, to: fs.PathLike) {
        nodeFileOps.linkSync(from, to);
        if (String(to).endsWith("-prepared.json")) {
          ctl.armed = true;
          if (ctl.mode === "garbage") fs.writeFileSync(ctl.lockPath, "{not an owner");
        }
      },
      unlinkSync(path: fs.PathLike) {
        if (ctl.armed && ctl.mode === "eio" && String(path) === ctl.lockPath) throw eio("unlink");
        return nodeFileOps.unlinkSync(path);
      },
    };
  }

  it("EIO: the committed advance is returned, and the lock this process still holds is released by its next call", async () => {
    const plain = open();
    const ctl = { armed: false, mode: "eio" as const, lockPath: join(plain.shardDir, ".locks", "op-l.lock") };
    const store = open({ fs: armedFs(ctl) });
    const at = await upToLocked(store, "op-l");
    const done = await step(store, at, "prepared", { prestateDigest: HASH, targetCount: 3 });
    expect(done).toMatchObject({ seq: 3, phase: "prepared" });
    expect(JSON.parse(fs.readFileSync(ctl.lockPath, "utf8")).pid).toBe(process.pid);
    // While the disk still fails, the next call says exactly that, never "could not lock / nothing changed".
    const stuck = await rejection(store.load("op-l"));
    expect(stuck.code).toBe("LOCK_FAILED");
    expect(stuck.message).toMatch(/still held by this process/);
    expect(stuck.message).not.toMatch(/Could not lock|Nothing was changed/);
    // Once it recovers, the next call releases the old hold first and goes on.
    ctl.armed = false;
    expect(await store.load("op-l")).toMatchObject({ seq: 3, phase: "prepared" });
    expect(fs.existsSync(ctl.lockPath)).toBe(false);
  });

  it("a lock file changed by someone else: WRITE_FAILED / event_commit_unknown, never 'could not lock, nothing was changed'", async () => {
    const plain = open();
    const ctl = {
      armed: false,
      mode: "garbage" as const,
      lockPath: join(plain.shardDir, ".locks", "op-g.lock"),
    };
    const store = open({ fs: armedFs(ctl) });
    const at = await upToLocked(store, "op-g");
    const error = await rejection(step(store, at, "prepared", { prestateDigest: HASH, targetCount: 3 }));
    const dir = join(store.shardDir, "op-g");
    expect(fs.readdirSync(dir)).toContain("000003-prepared.json");
    expect(JSON.parse(fs.readFileSync(join(dir, "HEAD"), "utf8")).seq).toBe(3);
    expect(error.code).toBe("WRITE_FAILED");
    expect(error.commitState).toBe("event_commit_unknown");
    expect(error.message).not.toMatch(/Could not lock|Nothing was changed/);
  });
});

describe("state lock: calls of one process on the same saga", () => {
  it("a load and an archive started together both finish at once (no synchronous wait on our own lock)", async () => {
    const store = open();
    const saga = await store.create("op-i", createEvidence);
    const done = await step(store, saga, "aborted", { reason: "x" });
    const t0 = performance.now();
    const [loaded, archived] = await Promise.allSettled([
      store.load("op-i"),
      store.archiveTerminal("op-i", { expectedSeq: done.seq, expectedHash: done.headHash }),
    ]);
    // A deadlock check, not a timing goal: the failure it guards against is a 5 s frozen event loop.
    expect(performance.now() - t0).toBeLessThan(2_000);
    expect(loaded).toMatchObject({ status: "fulfilled", value: { seq: done.seq, phase: "aborted" } });
    expect(archived).toMatchObject({
      status: "fulfilled",
      value: { archived: true, alreadyArchived: false },
    });
  }, 20_000);

  it("a create, a load, a listing and two archives interleaved in one process all settle quickly", async () => {
    const store = open();
    const saga = await store.create("op-m", createEvidence);
    const done = await step(store, saga, "aborted", { reason: "x" });
    const fence = { expectedSeq: done.seq, expectedHash: done.headHash };
    const t0 = performance.now();
    const results = await Promise.allSettled([
      store.create("op-n", createEvidence),
      store.load("op-m"),
      store.listPending(),
      store.archiveTerminal("op-m", fence),
      store.archiveTerminal("op-m", fence),
    ]);
    expect(performance.now() - t0).toBeLessThan(2_000);
    expect(results.map((r) => r.status)).toEqual([
      "fulfilled",
      "fulfilled",
      "fulfilled",
      "fulfilled",
      "fulfilled",
    ]);
    expect(
      results
        .slice(3)
        .map((r) => (r as PromiseFulfilledResult<{ alreadyArchived: boolean }>).value.alreadyArchived),
    ).toEqual([false, true]);
    expect(await store.loadArchived("op-m")).toMatchObject({ seq: done.seq, phase: "aborted" });
  }, 20_000);
});

describe("state lock: busy", () => {
  it("a wait on other calls of this process ends in LOCK_FAILED caused by LOCK_TIMEOUT, like a wait on another process", async () => {
    const path = join(bed.base, "busy.lock");
    let letGo!: () => void;
    const holding = new Promise<void>((resolve) => {
      letGo = resolve;
    });
    let entered!: () => void;
    const inside = new Promise<void>((resolve) => {
      entered = resolve;
    });
    const first = withStateLock(path, "the test state", nodeFileOps, undefined, async () => {
      entered();
      await holding;
      return "first";
    });
    await inside;
    // In this process: the gate.
    const gated = (await withStateLock(
      path,
      "the test state",
      nodeFileOps,
      { waitMs: 30 },
      () => "second",
    ).catch((error: unknown) => error)) as Error & { code?: string; cause?: { code?: string } };
    expect(gated.code).toBe("LOCK_FAILED");
    expect(gated.message).toMatch(/other calls of this process kept it busy/);
    expect(gated.cause?.code).toBe("LOCK_TIMEOUT");
    letGo();
    expect(await first).toBe("first");
    // Another process's hold (file-lock's own wait) gives the same cause.
    const other = await acquireLock(path);
    try {
      const waited = (await withStateLock(
        path,
        "the test state",
        nodeFileOps,
        { waitMs: 30 },
        () => "x",
      ).catch((error: unknown) => error)) as Error & { code?: string; cause?: { code?: string } };
      expect(waited.code).toBe("LOCK_FAILED");
      expect(waited.cause?.code).toBe("LOCK_TIMEOUT");
    } finally {
      other.release();
    }
  });
});
