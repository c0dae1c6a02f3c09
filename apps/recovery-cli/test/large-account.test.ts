/**
 * `drydock status --json` in an account of thousands of Boats (issue #23): it used to fail closed past
 * boat.dev's 10th page of 200 ("the inventory is incomplete"); the Boat recovery plan now walks the whole
 * list, so status answers, and a Boat with this installation's name listed past page 10 is reported. A list
 * fault makes status say what it could not look at (exit 6), and the next run is complete. In-process
 * `main` against the boat.dev simulator over HTTP, seeded cheaply.
 */
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createBoatLifecycle, scopedBoatName } from "@drydock/boat-lifecycle";
import { createBoatClient } from "@drydock/boat-provider";
import { type BoatSimulator, startBoatSimulator } from "@drydock/boat-provider/simulator";
import { openStorage, type Storage } from "@drydock/storage";
import { simFaults } from "@drydock/test-kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bufferIo, EXIT_CODES, main } from "../src/index.js";

let sim: BoatSimulator;
let storage: Storage;
let dir: string;
let late: string;

beforeAll(async () => {
  sim = await startBoatSimulator({ provisionMs: 0 });
  dir = mkdtempSync(join(tmpdir(), "drydock-large-account-"));
  storage = await openStorage({ dataDir: dir, storage: "file" });
  const environmentId = await storage.meta.getOrCreate("environment-id", randomUUID);
  const lifecycle = createBoatLifecycle({
    client: createBoatClient({ baseUrl: sim.apiUrl, token: sim.token }),
    createJournal: storage.createJournal,
    deleteJournal: storage.deleteJournal,
    environmentId,
    sleep: async () => {},
  });
  await lifecycle.provision("bot-one");
  // 2,400 foreign Boats (the old cap was 2,000), then one with this installation's name that no journal knows.
  sim.seed({ count: 2_400, namePrefix: "someone-else-" });
  [late] = sim.seed({ names: [scopedBoatName(environmentId, "lost-bot")] }) as [string];
}, 60_000);
afterAll(async () => {
  await storage?.close();
  await sim?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function status() {
  const io = bufferIo();
  const code = await main(["status", "--data-dir", dir, "--json"], {
    io,
    env: { BOAT_API_URL: sim.apiUrl, BOAT_API_TOKEN: sim.token },
  });
  // biome-ignore lint/suspicious/noExplicitAny: parsed CLI output; every field used is asserted below.
  return { code, err: io.err(), json: JSON.parse(io.out()) as Record<string, any> };
}

const faults = (rules: unknown[]) => simFaults(sim, rules);

describe("drydock status --json past boat.dev's 10th page", () => {
  it("answers, complete, with the unknown Boat listed on page 13", async () => {
    const run = await status();
    expect(run.code, run.err).toBe(EXIT_CODES.OK);
    const text = JSON.stringify(run.json);
    expect(text).not.toMatch(/inventory is incomplete|pages of Boats|could not be listed/);
    expect(text).toContain(late);
  });

  it("a list fault: exit 6, saying boat.dev could not be listed and that a retry reads it again; the next run is complete", async () => {
    await faults([{ method: "GET", path: "^/sandboxes$", action: "fail-before", status: 503, times: 1 }]);
    const failed = await status();
    expect(failed.code).toBe(EXIT_CODES.PROVIDER_UNAVAILABLE);
    const text = JSON.stringify(failed.json);
    expect(text).toContain(
      "boat.dev's list failed after 0 pages (0 Boats) read so far; a retry reads it again from its start",
    );
    expect(text).not.toContain(late);
    const again = await status();
    expect(again.code, again.err).toBe(EXIT_CODES.OK);
    expect(JSON.stringify(again.json)).toContain(late);
  });
});
