/**
 * A create killed before its first event was published leaves a saga directory that records no work (no
 * event: no restore ran under it, no lock was taken for it, no file changed). Such an orphan settles itself:
 * the store removes it once it holds the shard lock and the operation's lock and still finds no published
 * chain — a create holds both locks from making the directory until event 1 and HEAD are published, so
 * taking them proves its creator is gone — and never while a live process holds either lock.
 */
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import * as fs from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { type FileOps, nodeFileOps } from "@drydock/file-lock";
import { describe, expect, it } from "vitest";
import { domainDigest, HEAD_ANCHOR_DOMAIN, isSagaError, type SagaStore } from "../src/index.js";
import { prettyCanonical } from "../src/internal/canonical.js";
import { createEvidence, step, useStoreBed } from "./store-bed.js";

const bed = useStoreBed("orphan");
const { open } = bed;

const FIXTURE = fileURLToPath(new URL("./fixtures/create-child.ts", import.meta.url));
const PACKAGE_DIR = fileURLToPath(new URL("..", import.meta.url));

/** A pid no process can have (above Linux's PID_MAX_LIMIT): the "other process" that was creating. */
const CREATOR_PID = 4_194_400;
const creatorAlive = { isProcessAlive: (pid: number) => pid === CREATOR_PID || pid === process.pid };
const creatorDead = { isProcessAlive: (pid: number) => pid === process.pid };

class Crash extends Error {}

function opDir(store: SagaStore, id: string): string {
  return join(store.shardDir, id);
}

function snapshot(dir: string): Map<string, string> {
  return new Map(
    fs.readdirSync(dir).map((name) => [name, fs.readFileSync(join(dir, name)).toString("base64")]),
  );
}

/**
 * A create of `id` stopped at `point` the way a killed process stops: the state locks it held stay on disk,
 * owned by CREATOR_PID (whose liveness each test decides through the store's `lock.isProcessAlive` seam).
 */
async function createStoppedAt(id: string, point = "saga.after-genesis-head"): Promise<SagaStore> {
  const held = new Map<string, Record<string, unknown>>();
  const store: SagaStore = open({
    crash: {
      point(name: string) {
        if (name !== point) return;
        const locks = join(store.shardDir, ".locks");
        for (const file of ["shard.lock", `${id}.lock`]) {
          held.set(join(locks, file), JSON.parse(fs.readFileSync(join(locks, file), "utf8")));
        }
        throw new Crash(name);
      },
    },
  });
  await expect(store.create(id, createEvidence)).rejects.toMatchObject({ cause: expect.any(Crash) });
  expect(held.size).toBe(2);
  // A SIGKILLed creator never releases: its owners are still in the lock files.
  for (const [path, owner] of held) {
    fs.writeFileSync(path, `${JSON.stringify({ ...owner, pid: CREATOR_PID, token: randomUUID() })}\n`, {
      mode: 0o600,
    });
  }
  return store;
}

async function rejection(promise: Promise<unknown>): Promise<import("../src/index.js").SagaError> {
  try {
    await promise;
  } catch (error) {
    if (isSagaError(error)) return error;
    throw error;
  }
  throw new Error("expected a SagaError, but the call succeeded");
}

describe("orphan sagas: a create killed before its chain was published", () => {
  it("is removed by listPending once its creator is dead, durably, and the id can be created again", async () => {
    const crashed = await createStoppedAt("op-orphan");
    const dir = opDir(crashed, "op-orphan");
    expect(fs.readdirSync(dir)).toEqual(["HEAD"]);
    const ops: string[] = [];
    const paths = new Map<number, string>();
    const watching: FileOps = {
      ...nodeFileOps,
      openSync: ((path: string, ...rest: unknown[]) => {
        const fd = (nodeFileOps.openSync as (...a: unknown[]) => number)(path, ...rest);
        paths.set(fd, String(path));
        return fd;
      }) as FileOps["openSync"],
      fsyncSync: (fd) => {
        ops.push(`fsync ${paths.get(fd)}`);
        nodeFileOps.fsyncSync(fd);
      },
      unlinkSync: (path) => {
        ops.push(`unlink ${String(path)}`);
        nodeFileOps.unlinkSync(path);
      },
      rmdirSync: ((path: fs.PathLike, ...rest: unknown[]) => {
        ops.push(`rmdir ${String(path)}`);
        (nodeFileOps.rmdirSync as (...a: unknown[]) => void)(path, ...rest);
      }) as FileOps["rmdirSync"],
    };
    const store = open({ fs: watching, lock: creatorDead });
    expect(await store.listPending()).toEqual({
      items: [],
      diagnostics: [],
      nextCursor: null,
      truncated: false,
    });
    expect(fs.existsSync(dir)).toBe(false);
    // Its genesis HEAD went, then the directory, then the removal was flushed into the shard.
    const removal = ops.filter((op) => op.includes(dir) || op === `fsync ${store.shardDir}`);
    expect(removal.slice(-3)).toEqual([
      `unlink ${join(dir, "HEAD")}`,
      `rmdir ${dir}`,
      `fsync ${store.shardDir}`,
    ]);
    const saga = await open().create("op-orphan", createEvidence);
    expect(saga.seq).toBe(1);
  });

  it("is never touched while its creator is alive (it still holds the saga's locks)", async () => {
    const crashed = await createStoppedAt("op-live");
    const dir = opDir(crashed, "op-live");
    const before = snapshot(dir);
    const store = open({ lock: { ...creatorAlive, waitMs: 300 } });
    const pending = await store.listPending();
    expect(pending.items).toEqual([]);
    expect(pending.diagnostics).toEqual([
      { operationId: "op-live", status: "busy", code: "LOCK_FAILED", recoverable: false },
    ]);
    expect((await rejection(store.removeOrphan("op-live"))).code).toBe("LOCK_FAILED");
    expect(snapshot(dir)).toEqual(before);
    // Once the creator is dead, the same directory goes.
    expect((await open({ lock: creatorDead }).listPending()).diagnostics).toEqual([]);
    expect(fs.existsSync(dir)).toBe(false);
  });

  it("is not touched while only the shard lock is held by a live process (a create may be about to reuse it)", async () => {
    const crashed = await createStoppedAt("op-shard");
    const dir = opDir(crashed, "op-shard");
    // Only the saga's own lock is the dead creator's; a live process holds the shard.
    fs.unlinkSync(join(crashed.shardDir, ".locks", "op-shard.lock"));
    const before = snapshot(dir);
    const store = open({ lock: creatorAlive });
    const pending = await store.listPending();
    expect(pending.items).toEqual([]);
    expect(pending.diagnostics).toEqual([
      { operationId: "op-shard", status: "orphan_unpublished", code: "LOCK_FAILED", recoverable: true },
    ]);
    expect(snapshot(dir)).toEqual(before);
    expect((await open({ lock: creatorDead }).listPending()).diagnostics).toEqual([]);
    expect(fs.existsSync(dir)).toBe(false);
  });

  it("a create killed (SIGKILL, a real process) at saga.after-genesis-head leaves an orphan the next listing removes", async () => {
    const child: ChildProcessWithoutNullStreams = spawn(
      process.execPath,
      ["--conditions=@drydock/source", "--import", "tsx", FIXTURE, bed.stateDir, bed.workspace, "op-killed"],
      { cwd: PACKAGE_DIR, env: { ...process.env, DRYDOCK_CRASH_POINT: "saga.after-genesis-head" } },
    );
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.stderr.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    const exit = await new Promise<NodeJS.Signals | null>((resolve) =>
      child.on("exit", (_, signal) => resolve(signal)),
    );
    expect(exit, output).toBe("SIGKILL");
    const store = open();
    const dir = opDir(store, "op-killed");
    expect(fs.readdirSync(dir)).toEqual(["HEAD"]);
    // The killed creator's locks are still on disk: real liveness proves it dead.
    expect(fs.existsSync(join(store.shardDir, ".locks", "op-killed.lock"))).toBe(true);
    expect(await store.listPending()).toMatchObject({ items: [], diagnostics: [] });
    expect(fs.existsSync(dir)).toBe(false);
    expect((await store.create("op-killed", createEvidence)).seq).toBe(1);
  }, 30_000);

  it("every unpublished state a dead create can leave is removed: empty directory, genesis HEAD, their temporaries", async () => {
    const store = open();
    await store.create("op-seed", createEvidence);
    await createStoppedAt("op-genesis");
    expect(fs.readFileSync(join(opDir(store, "op-genesis"), "HEAD"))).toEqual(genesisHead("op-genesis"));
    const states: Record<string, Record<string, Buffer>> = {
      "op-empty": {},
      "op-head-temp": { [`.HEAD.${CREATOR_PID}.0123456789abcdef.tmp`]: genesisHead("op-head-temp") },
      "op-event-temp": {
        HEAD: genesisHead("op-event-temp"),
        [`.000001-created.json.${CREATOR_PID}.0123456789abcdef.tmp`]: Buffer.from("{}\n"),
      },
    };
    for (const [id, files] of Object.entries(states)) {
      const dir = opDir(store, id);
      fs.mkdirSync(dir, { mode: 0o700 });
      for (const [name, bytes] of Object.entries(files)) fs.writeFileSync(join(dir, name), bytes);
    }
    const pending = await open({ lock: creatorDead }).listPending();
    expect(pending.diagnostics).toEqual([]);
    expect(pending.items.map((item) => item.operationId)).toEqual(["op-seed"]);
    for (const id of [...Object.keys(states), "op-genesis"])
      expect(fs.existsSync(opDir(store, id))).toBe(false);
  });

  it("a directory with a published event is never removed (HEAD one behind is rolled forward instead)", async () => {
    const crashed = await createStoppedAt("op-published", "saga.after-event-published");
    const store = open({ lock: creatorDead });
    const pending = await store.listPending();
    expect(pending.diagnostics).toEqual([]);
    expect(pending.items).toMatchObject([{ operationId: "op-published", phase: "created", seq: 1 }]);
    expect(fs.readdirSync(opDir(crashed, "op-published")).sort()).toEqual(["000001-created.json", "HEAD"]);
  });

  it("a removal that fails half-way is reported (orphan_unpublished, WRITE_FAILED) and finished by the next listing", async () => {
    const crashed = await createStoppedAt("op-eio");
    const dir = opDir(crashed, "op-eio");
    const eio = Object.assign(new Error("EIO: i/o error, rmdir"), { code: "EIO" });
    const failing: FileOps = {
      ...nodeFileOps,
      rmdirSync: (() => {
        throw eio;
      }) as FileOps["rmdirSync"],
    };
    const store = open({ fs: failing, lock: creatorDead });
    expect((await store.listPending()).diagnostics).toEqual([
      { operationId: "op-eio", status: "orphan_unpublished", code: "WRITE_FAILED", recoverable: true },
    ]);
    const error = await rejection(store.removeOrphan("op-eio"));
    expect(error.code).toBe("WRITE_FAILED");
    expect(error.commitState).toBe("orphan_removal_unfinished");
    // Its HEAD went, the directory stayed: still an orphan, and the next listing finishes the removal.
    expect(fs.readdirSync(dir)).toEqual([]);
    expect((await open({ lock: creatorDead }).listPending()).diagnostics).toEqual([]);
    expect(fs.existsSync(dir)).toBe(false);
  });

  it("removeOrphan: removes an orphan, answers removed: false when there is none, refuses a published saga and leaves a corrupt one", async () => {
    await createStoppedAt("op-o");
    const store = open({ lock: creatorDead });
    expect(await store.removeOrphan("op-o")).toEqual({ operationId: "op-o", removed: true });
    expect(fs.existsSync(opDir(store, "op-o"))).toBe(false);
    expect(await store.removeOrphan("op-o")).toEqual({ operationId: "op-o", removed: false });

    const saga = await store.create("op-p", createEvidence);
    const published = await rejection(store.removeOrphan("op-p"));
    expect(published.code).toBe("INVALID_TRANSITION");
    expect(published.message).toMatch(/published/);
    expect((await store.load("op-p")).headHash).toBe(saga.headHash);
    const aborted = await step(store, saga, "aborted", { reason: "x" });
    await store.archiveTerminal("op-p", { expectedSeq: aborted.seq, expectedHash: aborted.headHash });
    expect((await rejection(store.removeOrphan("op-p"))).code).toBe("INVALID_TRANSITION");

    // A HEAD that is not the genesis HEAD of this id, with no event: evidence, left exactly as it is.
    const dir = opDir(store, "op-c");
    fs.mkdirSync(dir, { mode: 0o700 });
    fs.writeFileSync(join(dir, "HEAD"), "{}\n");
    const before = snapshot(dir);
    expect((await rejection(store.removeOrphan("op-c"))).code).toBe("CORRUPT");
    expect((await store.listPending()).diagnostics).toEqual([
      { operationId: "op-c", status: "corrupt", code: "CORRUPT", recoverable: false },
    ]);
    expect(snapshot(dir)).toEqual(before);
    expect((await rejection(store.removeOrphan("shard"))).code).toBe("INVALID_ARGUMENT");
  });
});

/** The HEAD a create writes before event 1 (state "unpublished", seq 0), as bytes on disk. */
function genesisHead(id: string): Buffer {
  const body = {
    schema: "drydock.restore-saga-head",
    version: 1,
    state: "unpublished",
    operationId: id,
    seq: 0,
    phase: null,
    eventFile: null,
    eventHash: null,
  };
  return Buffer.from(
    prettyCanonical({ ...body, anchorHash: domainDigest(HEAD_ANCHOR_DOMAIN, body) }),
    "utf8",
  );
}
