/**
 * A REAL full disk under a running server, on each storage backend: a small tmpfs holds the data directory,
 * the server starts on it, then the disk is filled. A provision must answer 507 Insufficient Storage with the
 * refusing store's message (what happened, that nothing was changed, what to do), create no Boat, and succeed
 * once space is freed. (A journal's own full-disk refusal is mapped the same way: http-errors.test.ts.) Needs root (CAP_SYS_ADMIN) to mount; fails (never skips) without it.
 */
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type BoatSimulator, startBoatSimulator } from "@drydock/boat-provider/simulator";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../src/config.js";
import { startServer } from "../src/server.js";
import { api, mountTmpfs, TEST_STORAGES, unmountTmpfs } from "./helpers.js";

const mountPoint = `/tmp/drydock-full-disk-server-${process.pid}`;
let sim: BoatSimulator;

beforeAll(async () => {
  mountTmpfs(mountPoint, "4m");
  sim = await startBoatSimulator({ port: 0 });
});

afterAll(async () => {
  await sim?.close();
  unmountTmpfs(mountPoint);
});

/** Fills the file system of `dir` to the last byte with `filler`. */
function fill(filler: string): void {
  try {
    writeFileSync(filler, Buffer.alloc(8 * 1024 * 1024));
  } catch {
    // ENOSPC: the disk is now full, as intended (the file holds what fitted).
  }
}

describe("a full disk under a running server", () => {
  for (const storage of TEST_STORAGES) {
    it(`on ${storage}: a provision answers 507 Insufficient Storage saying what to do, creates nothing; freed, it succeeds`, async () => {
      const dataDir = join(mountPoint, storage);
      const server = await startServer(
        loadConfig({
          DRYDOCK_DATA_DIR: dataDir,
          DRYDOCK_STORAGE: storage,
          PORT: "0",
          LOG_LEVEL: "silent",
          BOAT_API_URL: sim.apiUrl,
          BOAT_API_TOKEN: sim.token,
        }),
        { print: () => {} },
      );
      const filler = join(mountPoint, `filler-${storage}`);
      try {
        await server.startup;
        const call = api(server.url, server.token);
        expect((await call("POST", "/v1/bots", { name: "Full", botId: "full" })).status).toBe(201);
        const before = sim.stats().createsCommitted;

        fill(filler);
        const refused = await call("POST", "/v1/bots/full/computer");
        expect(refused.status, refused.text).toBe(507);
        // The first store a provision writes is the bot registry (bots.json, or the sqlite bots table): its
        // refusal, as every store's on a full disk, is 507 with the storage fault's own code (as every
        // storage fault below a package's refusal answers, see http-errors.ts) and says what to do.
        expect(refused.json.error.code).toBe("storage_unavailable");
        // The cause, that nothing was changed, and what to do (json-journal's and the storage's wording differ
        // in punctuation only).
        expect(refused.json.error.message).toContain("the disk is full (ENOSPC)");
        expect(refused.json.error.message).toMatch(/nothing was changed/i);
        expect(refused.json.error.message).toMatch(/free space on (the|that) file system/);
        expect(refused.json.error.message).not.toMatch(/repair|invalid|lock is unavailable/i);
        expect(sim.stats().createsCommitted).toBe(before);

        rmSync(filler);
        const created = await call("POST", "/v1/bots/full/computer");
        expect(created.status, created.text).toBe(201);
        expect(sim.stats().createsCommitted - before).toBe(1);
      } finally {
        await server.close();
        rmSync(filler, { force: true });
      }
    });
  }
});
