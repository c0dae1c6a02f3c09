import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createBoatClient } from "@drydock/boat-provider";
import {
  isBoatSimulatorError,
  readSimulatorState,
  startBoatSimulator,
  stateLogPath,
} from "@drydock/boat-provider/simulator";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { BODY, harness, rejection } from "./helpers.js";

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "boat-sim-"));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe("persistence", () => {
  it("a restarted simulator keeps Boats, keys, operations, counters and its clock", async () => {
    const stateFile = join(dir, "state.json");
    const token = "persist-token";
    const first = await harness({ stateFile, token, now: () => 1_800_000_000_000, deletionPolls: 2 });
    const key = randomUUID();
    let keptId: string;
    let opId: string;
    try {
      keptId = (await first.client.createSandbox(BODY, { idempotencyKey: key })).sandbox.id;
      await first.client.renameSandbox(keptId, "ogb-kept");
      const doomed = (await first.client.createSandbox(BODY, { idempotencyKey: randomUUID() })).sandbox.id;
      const op = await first.client.deleteSandbox(doomed);
      opId = op.id;
      expect((await first.client.getDeletionOperation(opId)).status).toBe("processing");
      await first.advance(5_000);
    } finally {
      await first.close();
    }
    // Atomic writes leave no temp file behind: the snapshot and its log, nothing else.
    expect(readdirSync(dir).sort()).toEqual(["state.json", "state.json.log"]);
    // The key is stored only as a hash.
    expect(readFileSync(stateFile, "utf8")).not.toContain(key);
    expect(readFileSync(stateLogPath(stateFile), "utf8")).not.toContain(key);

    const second = await harness({ stateFile, token, now: () => 1_800_000_000_000, deletionPolls: 2 });
    try {
      expect(second.sim.now()).toBe(1_800_000_005_000);
      expect(await second.client.getSandbox(keptId)).toMatchObject({ id: keptId, name: "ogb-kept" });
      const replay = await second.client.createSandbox(BODY, { idempotencyKey: key });
      expect(replay).toMatchObject({ replayed: true, sandbox: { id: keptId } });
      const finished = await second.client.getDeletionOperation(opId);
      expect(finished.status).toBe("completed");
      expect(await second.stats()).toMatchObject({
        createsCommitted: 2,
        createRequests: 3,
        deletesAccepted: 1,
        live: 1,
        perName: { "ogb-kept": 1 },
      });
    } finally {
      await second.close();
    }
  });

  it("a commit answered by a lost response survives a restart: the retry replays", async () => {
    const stateFile = join(dir, "state.json");
    const first = await harness({ stateFile, token: "t" });
    const key = randomUUID();
    try {
      await first.faults([{ method: "POST", action: "drop-after" }]);
      expect(await rejection(first.client.createSandbox(BODY, { idempotencyKey: key }))).toMatchObject({
        phase: "response",
      });
    } finally {
      await first.close();
    }
    const second = await harness({ stateFile, token: "t" });
    try {
      expect((await second.client.createSandbox(BODY, { idempotencyKey: key })).replayed).toBe(true);
      expect((await second.stats()).createsCommitted).toBe(1);
    } finally {
      await second.close();
    }
  });

  it.each([
    ["not JSON", "{nope"],
    ["wrong version", JSON.stringify({ version: 2 })],
    [
      "a bad Boat id",
      JSON.stringify({
        version: 1,
        clockOffsetMs: 0,
        counters: {},
        sandboxes: [{ id: "x" }],
        operations: [],
        keys: [],
      }),
    ],
  ])("refuses a state file that is %s and leaves its bytes untouched", async (_label, bytes) => {
    const stateFile = join(dir, "state.json");
    writeFileSync(stateFile, bytes);
    const error = await rejection(startBoatSimulator({ stateFile }));
    expect(isBoatSimulatorError(error)).toBe(true);
    expect(error).toMatchObject({ code: "simulator_state_invalid" });
    expect(readFileSync(stateFile, "utf8")).toBe(bytes);
  });
});

describe("start-up refusals", () => {
  it("refuses a non-loopback host unless allowNonLoopback", async () => {
    for (const host of ["0.0.0.0", "::", "192.168.1.10"]) {
      const error = await rejection(startBoatSimulator({ host }));
      expect(error).toMatchObject({ code: "simulator_host_refused", status: 400 });
    }
    const sim = await startBoatSimulator({ host: "0.0.0.0", allowNonLoopback: true });
    await sim.close();
  });

  it("reports a port in use as simulator_start_failed", async () => {
    const sim = await startBoatSimulator();
    try {
      const port = Number(new URL(sim.url).port);
      expect(await rejection(startBoatSimulator({ port }))).toMatchObject({ code: "simulator_start_failed" });
    } finally {
      await sim.close();
    }
  });
});

describe("drydock-boat-sim", () => {
  it("prints its URL and token, serves the API, keeps state in --state-file, and stops on SIGTERM", async () => {
    const bin = fileURLToPath(new URL("../src/bin.ts", import.meta.url));
    const stateFile = join(dir, "cli-state.json");
    const child = spawn(
      process.execPath,
      [
        "--conditions=@drydock/source",
        "--import",
        "tsx",
        bin,
        "--port",
        "0",
        "--state-file",
        stateFile,
        "--list-lag-ms",
        "0",
      ],
      { detached: true, stdio: ["ignore", "pipe", "pipe"] },
    );
    try {
      let out = "";
      const ready = await new Promise<{ apiUrl: string; token: string }>((resolve, reject) => {
        child.stdout?.on("data", (chunk: Buffer) => {
          out += String(chunk);
          const apiUrl = /BOAT_API_URL=(\S+)/.exec(out)?.[1];
          const token = /BOAT_API_TOKEN=(\S+)/.exec(out)?.[1];
          if (apiUrl && token) resolve({ apiUrl, token });
        });
        child.once("exit", (code) => reject(new Error(`exited early with ${code}`)));
      });
      expect(out).toMatch(/listening on http:\/\/127\.0\.0\.1:\d+/);
      const client = createBoatClient({ baseUrl: ready.apiUrl, token: ready.token });
      const { sandbox } = await client.createSandbox(BODY, { idempotencyKey: randomUUID() });
      // Acknowledged means on disk: the state file and its log, read as a restart would.
      expect(readSimulatorState(stateFile)?.sandboxes[0]?.id).toBe(sandbox.id);
      const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
      child.kill("SIGTERM");
      expect(await exited).toBe(0);
    } finally {
      try {
        process.kill(-(child.pid as number), "SIGKILL");
      } catch {
        // Already exited.
      }
    }
  });
});
