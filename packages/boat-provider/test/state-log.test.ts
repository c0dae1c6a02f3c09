import { execFileSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { type BoatClient, createBoatClient } from "@drydock/boat-provider";
import {
  readSimulatorState,
  type SimSandboxRecord,
  startBoatSimulator,
  stateLogPath,
} from "@drydock/boat-provider/simulator";
import { spawnWorker, type Worker } from "@drydock/test-kit";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { BODY, harness, rejection } from "./helpers.js";

/*
 * The simulator's state file and its append-only log (src/simulator/state-file.ts): a change acknowledged
 * to a client survives a SIGKILL, a record cut short by a kill is dropped, a damaged record refuses to
 * start (naming the file and offset), the whole-file format of version 1 is read and converted, and the
 * log is compacted at every start.
 */

const BIN = fileURLToPath(new URL("../src/bin.ts", import.meta.url));
const FIXTURE_V1 = fileURLToPath(new URL("./fixtures/simulator-state-v1.json", import.meta.url));
const TOKEN = "state-log-token";

let dir: string;
let stateFile: string;
let logFile: string;
const workers: Worker[] = [];
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "boat-sim-log-"));
  stateFile = join(dir, "state.json");
  logFile = stateLogPath(stateFile);
});
afterEach(() => {
  for (const worker of workers.splice(0)) worker.kill();
  rmSync(dir, { recursive: true, force: true });
});

/** The standalone simulator (bin) on `stateFile`, in its own process group, and a client for it. */
async function startBin(): Promise<{ worker: Worker; client: BoatClient; url: string }> {
  const worker = spawnWorker(BIN, ["--port", "0", "--state-file", stateFile, "--token", TOKEN]);
  workers.push(worker);
  const line = await worker.waitFor((l) => l.startsWith("BOAT_API_URL="));
  const apiUrl = line.slice("BOAT_API_URL=".length);
  return {
    worker,
    url: apiUrl.replace(/\/api\/v1$/, ""),
    client: createBoatClient({ baseUrl: apiUrl, token: TOKEN, timeoutMs: 30_000 }),
  };
}

/** Creates three Boats in an in-process simulator with a state file; their ids, in order. */
async function threeBoats(): Promise<string[]> {
  const h = await harness({ stateFile, token: TOKEN });
  try {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const { sandbox } = await h.client.createSandbox(BODY, { idempotencyKey: randomUUID() });
      ids.push(sandbox.id);
    }
    return ids;
  } finally {
    await h.close();
  }
}

/** Byte offsets at which each line of the log starts. */
function lineStarts(bytes: Buffer): number[] {
  const starts = [0];
  for (let i = bytes.indexOf(0x0a); i !== -1 && i < bytes.length - 1; i = bytes.indexOf(0x0a, i + 1)) {
    starts.push(i + 1);
  }
  return starts;
}

describe("the state log", () => {
  it("SIGKILL of the standalone simulator mid-load: every acknowledged Boat and name is there after a restart, and no key holds two Boats", async () => {
    const first = await startBin();
    const acked = new Map<string, { id: string; name: string | null }>();
    const sent: string[] = [];
    let stop = false;
    let killed = false;
    const killAfter = 40;
    // Eight clients create and rename Boats until the simulator is killed under them.
    const load = Array.from({ length: 8 }, async () => {
      while (!stop) {
        const key = randomUUID();
        sent.push(key);
        try {
          const { sandbox } = await first.client.createSandbox(BODY, { idempotencyKey: key });
          acked.set(key, { id: sandbox.id, name: null });
          const name = `ogb-${key.slice(0, 8)}`;
          await first.client.renameSandbox(sandbox.id, name);
          acked.set(key, { id: sandbox.id, name });
        } catch {
          stop = true;
        }
        if (acked.size >= killAfter && !killed) {
          killed = true;
          first.worker.kill();
        }
      }
    });
    await Promise.all(load);
    const exit = await first.worker.exited;
    expect(exit.signal).toBe("SIGKILL");
    expect(acked.size).toBeGreaterThanOrEqual(killAfter);
    // Requests were still in flight when it died (the load did not stop by itself).
    expect(sent.length).toBeGreaterThan(acked.size);

    const second = await startBin();
    const history = (await (
      await fetch(`${second.url}/_sim/sandboxes`, { headers: { authorization: `Bearer ${TOKEN}` } })
    ).json()) as { sandboxes: SimSandboxRecord[] };
    const byId = new Map(history.sandboxes.map((boat) => [boat.id, boat]));
    for (const [key, boat] of acked) {
      const found = byId.get(boat.id);
      expect(found, `acknowledged Boat ${boat.id} (key ${key})`).toBeDefined();
      if (boat.name !== null) expect(found?.name).toBe(boat.name);
    }
    // Every key sent, retried: an acknowledged one replays its Boat, and none makes a second Boat.
    for (const key of sent) {
      const retry = await second.client.createSandbox(BODY, { idempotencyKey: key });
      const ackedBoat = acked.get(key);
      if (ackedBoat) expect(retry).toMatchObject({ replayed: true, sandbox: { id: ackedBoat.id } });
    }
    const after = (await (
      await fetch(`${second.url}/_sim/sandboxes`, { headers: { authorization: `Bearer ${TOKEN}` } })
    ).json()) as { sandboxes: SimSandboxRecord[] };
    const keyHashes = after.sandboxes.map((boat) => boat.keyHash);
    expect(new Set(keyHashes).size).toBe(keyHashes.length);
    expect(after.sandboxes.length).toBe(sent.length);
    second.worker.kill();
  });

  it("counts requests across a SIGKILL: a counter bump alone is written (not fsynced) before the answer", async () => {
    const first = await startBin();
    const control = (path: string, body: unknown) =>
      fetch(`${first.url}${path}`, {
        method: "POST",
        headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
        body: JSON.stringify(body),
      });
    expect(
      (await control("/_sim/faults", { rules: [{ method: "POST", action: "fail-before", times: 3 }] }))
        .status,
    ).toBe(200);
    for (let i = 0; i < 3; i++) {
      expect(
        await rejection(first.client.createSandbox(BODY, { idempotencyKey: randomUUID() })),
      ).toMatchObject({
        status: 503,
      });
    }
    // Nothing after them is fsynced: only the written counter records hold the three requests.
    first.worker.kill();
    expect((await first.worker.exited).signal).toBe("SIGKILL");
    const second = await startBin();
    const stats = await (
      await fetch(`${second.url}/_sim/stats`, { headers: { authorization: `Bearer ${TOKEN}` } })
    ).json();
    expect(stats).toMatchObject({ createRequests: 3, createsCommitted: 0 });
    second.worker.kill();
  });

  it("drops a last record cut short by a kill (never acknowledged) and starts from the records before it", async () => {
    const ids = await threeBoats();
    const log = readFileSync(logFile);
    const starts = lineStarts(log);
    const lastStart = starts[starts.length - 1] as number;
    // The last create's record, cut in the middle: no newline, as a kill during its write leaves it.
    writeFileSync(logFile, log.subarray(0, lastStart + Math.floor((log.length - lastStart) / 2)));

    const h = await harness({ stateFile, token: TOKEN });
    try {
      const boats = h.sim.sandboxes().map((boat) => boat.id);
      expect(boats).toEqual(ids.slice(0, 2));
      expect(h.sim.stats()).toMatchObject({ createsCommitted: 2, live: 2 });
      // Compacted at start: the torn bytes are gone, the log is empty again.
      expect(statSync(logFile).size).toBe(0);
    } finally {
      await h.close();
    }
  });

  it.each([
    ["a digit changed in a middle record (still valid JSON)", (line: Buffer) => flipDigit(line)],
    ["a middle record overwritten with other bytes", (line: Buffer) => Buffer.alloc(line.length, "x")],
  ])(
    "refuses to start on %s: typed error naming the file and offset, files untouched",
    async (_label, damage) => {
      await threeBoats();
      const log = readFileSync(logFile);
      const starts = lineStarts(log);
      expect(starts.length).toBeGreaterThanOrEqual(4);
      const at = starts[2] as number;
      const end = log.indexOf(0x0a, at);
      const damaged = Buffer.concat([log.subarray(0, at), damage(log.subarray(at, end)), log.subarray(end)]);
      writeFileSync(logFile, damaged);
      const snapshot = readFileSync(stateFile);

      const error = await rejection(startBoatSimulator({ stateFile }));
      expect(error).toMatchObject({
        name: "BoatSimulatorError",
        code: "simulator_state_invalid",
        path: logFile,
        offset: at,
      });
      expect((error as Error).message).toContain(logFile);
      expect((error as Error).message).toContain(`byte offset ${at}`);
      expect(readFileSync(logFile).equals(damaged)).toBe(true);
      expect(readFileSync(stateFile).equals(snapshot)).toBe(true);
    },
  );

  it("refuses a damaged last record that is complete (ends in its newline): only a cut-short one is torn", async () => {
    await threeBoats();
    const log = readFileSync(logFile);
    const starts = lineStarts(log);
    const at = starts[starts.length - 1] as number;
    const damaged = Buffer.concat([
      log.subarray(0, at),
      flipDigit(log.subarray(at, log.length - 1)),
      Buffer.from("\n"),
    ]);
    writeFileSync(logFile, damaged);
    expect(await rejection(startBoatSimulator({ stateFile }))).toMatchObject({
      code: "simulator_state_invalid",
      offset: at,
    });
    expect(readFileSync(logFile).equals(damaged)).toBe(true);
  });

  it("refuses a log whose state file is missing (the log alone holds only recent changes)", async () => {
    await threeBoats();
    const log = readFileSync(logFile);
    expect(log.length).toBeGreaterThan(0);
    rmSync(stateFile);
    const error = await rejection(startBoatSimulator({ stateFile }));
    expect(error).toMatchObject({ code: "simulator_state_invalid", path: stateFile });
    expect((error as Error).message).toContain(logFile);
    expect(readFileSync(logFile).equals(log)).toBe(true);
  });

  it("reads the whole-file format of version 1 (written by the previous simulator) and converts it", async () => {
    copyFileSync(FIXTURE_V1, stateFile);
    const now = () => 1_800_000_000_000;
    const first = await harness({ stateFile, token: TOKEN, now });
    let added: string;
    try {
      expect(first.sim.now()).toBe(1_800_000_007_000);
      expect(await first.client.getSandbox("bx_nz8eg8fn")).toMatchObject({ name: "ogb-fixture-kept" });
      expect(await rejection(first.client.getSandbox("bx_cm7s6zsb"))).toMatchObject({ status: 410 });
      const replay = await first.client.createSandbox(BODY, {
        idempotencyKey: "3f0c8a52-6d0e-4a8e-9c4b-1f2a3b4c5d6e",
      });
      expect(replay).toMatchObject({ replayed: true, sandbox: { id: "bx_nz8eg8fn" } });
      expect(await first.client.getDeletionOperation("bdop_90478a97104f9a78ca86211fae341bed")).toMatchObject({
        status: "completed",
      });
      // Converted at start: a version 2 snapshot (which the previous simulator refuses) and a log.
      expect(JSON.parse(readFileSync(stateFile, "utf8")).version).toBe(2);
      added = (await first.client.createSandbox(BODY, { idempotencyKey: randomUUID() })).sandbox.id;
    } finally {
      await first.close();
    }
    const second = await harness({ stateFile, token: TOKEN, now });
    try {
      expect(second.sim.sandboxes().map((boat) => boat.id)).toEqual(["bx_nz8eg8fn", "bx_cm7s6zsb", added]);
      expect(second.sim.stats()).toMatchObject({ createsCommitted: 3, deletesAccepted: 1 });
    } finally {
      await second.close();
    }
  });

  it("compacts at start: the snapshot holds everything, the log starts empty, and a log that outlived its compaction replays harmlessly", async () => {
    const ids = await threeBoats();
    const log = readFileSync(logFile);
    expect(log.length).toBeGreaterThan(0);
    const before = readSimulatorState(stateFile);

    const h = await harness({ stateFile, token: TOKEN });
    await h.close();
    expect(statSync(logFile).size).toBe(0);
    const snapshot = JSON.parse(readFileSync(stateFile, "utf8"));
    expect(snapshot.sandboxes.map((boat: SimSandboxRecord) => boat.id)).toEqual(ids);
    expect(readSimulatorState(stateFile)).toEqual(before);

    // Killed between the new snapshot's rename and the log's reset: the old log is still there.
    writeFileSync(logFile, log);
    expect(readSimulatorState(stateFile)).toEqual(before);
    const again = await harness({ stateFile, token: TOKEN });
    try {
      expect(again.sim.sandboxes().map((boat) => boat.id)).toEqual(ids);
      expect(again.sim.stats()).toMatchObject({ createsCommitted: 3, createRequests: 3, live: 3 });
    } finally {
      await again.close();
    }
  });
});

describe("a full disk under the simulator", () => {
  it("answers 500 for the change it could not log, refuses every later change until restarted (even once space is freed), and restarts with every acknowledged Boat", async () => {
    // A REAL full disk: a small tmpfs (needs root / CAP_SYS_ADMIN to mount; fails, never skips, without).
    const mount = join(dir, "small-disk");
    mkdirSync(mount);
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=1m", "tmpfs", mount]);
    try {
      stateFile = join(mount, "state.json");
      const h = await harness({ stateFile, token: TOKEN });
      const acked: string[] = [];
      try {
        acked.push((await h.client.createSandbox(BODY, { idempotencyKey: randomUUID() })).sandbox.id);
        const filler = join(mount, "filler");
        try {
          writeFileSync(filler, Buffer.alloc(2 * 1024 * 1024));
        } catch {
          // ENOSPC: the disk is now full, as intended (the file holds what fitted).
        }
        // The log's last page may still have room for a few lines: create until one is refused.
        let refused: unknown;
        for (let i = 0; i < 200 && refused === undefined; i++) {
          try {
            acked.push((await h.client.createSandbox(BODY, { idempotencyKey: randomUUID() })).sandbox.id);
          } catch (error) {
            refused = error;
          }
        }
        expect(refused).toMatchObject({ status: 500 });
        expect((refused as Error).message).toContain("could not write");
        rmSync(filler);
        // Space is back, but the log's tail was in doubt: nothing more is acknowledged until a restart.
        const later = await rejection(h.client.createSandbox(BODY, { idempotencyKey: randomUUID() }));
        expect(later).toMatchObject({ status: 500 });
        expect((later as Error).message).toContain("until the simulator restarts");
      } finally {
        await h.close();
      }
      const again = await harness({ stateFile, token: TOKEN });
      try {
        const ids = new Set(again.sim.sandboxes().map((boat) => boat.id));
        for (const id of acked) expect(ids.has(id), `acknowledged Boat ${id}`).toBe(true);
        expect((await again.client.createSandbox(BODY, { idempotencyKey: randomUUID() })).replayed).toBe(
          false,
        );
      } finally {
        await again.close();
      }
    } finally {
      execFileSync("umount", [mount]);
    }
  });
});

/** The same bytes with the first digit of the JSON changed (so it still parses). */
function flipDigit(line: Buffer): Buffer {
  const copy = Buffer.from(line);
  const json = copy.indexOf(0x20) + 1;
  for (let i = json; i < copy.length; i++) {
    const c = copy[i] as number;
    if (c >= 0x30 && c <= 0x39) {
      copy[i] = c === 0x39 ? 0x30 : c + 1;
      return copy;
    }
  }
  throw new Error("no digit to change");
}
