/**
 * The Boat recovery plan in an account of thousands of Boats (issue #23): it walks boat.dev's whole list
 * with no page cap (it used to fail closed past 10 pages of 200), finds a Boat with this installation's
 * name on any page, and a page that fails mid-walk leaves a plan that says how far it got and that a retry
 * reads the list again, after which the next plan is complete. A real simulator over HTTP, seeded.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openBoatCreateJournal } from "@drydock/boat-create-journal";
import { openBoatDeleteJournal } from "@drydock/boat-delete-journal";
import { createBoatLifecycle, scopedBoatName } from "@drydock/boat-lifecycle";
import { createBoatClient } from "@drydock/boat-provider";
import { type BoatSimulator, startBoatSimulator } from "@drydock/boat-provider/simulator";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createBoatRecovery } from "../src/index.js";

const ENV = "env-large-account";
let sim: BoatSimulator;
let dir: string;
/** List requests seen, and a page number (1-based, per plan) that fails once with a 503. */
let lists = 0;
let failPage: number | null = null;
let listsThisPlan = 0;

const countingFetch = (input: string, init: RequestInit): Promise<Response> => {
  if (new URL(input).pathname.endsWith("/sandboxes") && (init.method ?? "GET") === "GET") {
    lists += 1;
    listsThisPlan += 1;
    if (failPage !== null && listsThisPlan === failPage) {
      failPage = null;
      return Promise.resolve(
        new Response(
          JSON.stringify({
            ok: false,
            error: { code: "service_unavailable", message: "boat.dev is briefly unavailable", status: 503 },
            requestId: "req-large",
          }),
          { status: 503, headers: { "content-type": "application/json" } },
        ),
      );
    }
  }
  return fetch(input, init);
};

let orphan: string;
let recovery: ReturnType<typeof createBoatRecovery>;

beforeAll(async () => {
  sim = await startBoatSimulator({ provisionMs: 0 });
  // 2,400 foreign Boats (12 pages of 200), then one with this installation's name: on page 13.
  sim.seed({ count: 2_400, namePrefix: "someone-else-" });
  [orphan] = sim.seed({ names: [scopedBoatName(ENV, "lost-bot")] }) as [string];
  dir = mkdtempSync(join(tmpdir(), "drydock-plan-large-"));
  const client = createBoatClient({ baseUrl: sim.apiUrl, token: sim.token, fetch: countingFetch });
  const createJournal = openBoatCreateJournal({ dataDir: dir });
  const deleteJournal = openBoatDeleteJournal({ dataDir: dir });
  const lifecycle = createBoatLifecycle({
    client,
    createJournal,
    deleteJournal,
    environmentId: ENV,
    sleep: async () => {},
  });
  recovery = createBoatRecovery({ lifecycle, createJournal, deleteJournal, client, environmentId: ENV });
}, 60_000);
afterAll(async () => {
  await sim?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("the Boat recovery plan past boat.dev's 10th page", () => {
  it("walks every page (13 for 2,401 Boats) and reports the Boat with our name on the last", async () => {
    lists = 0;
    listsThisPlan = 0;
    const plan = await recovery.plan();
    expect(plan.providerError).toBeNull();
    expect(plan.providerListed).toBe(true);
    expect(lists).toBe(13);
    expect(plan.items.map((item) => [item.kind, item.boxId])).toEqual([["unknown_boat", orphan]]);
  });

  it("a page failing mid-walk: the plan says how far it got and that a retry starts again; the retry is complete", async () => {
    listsThisPlan = 0;
    failPage = 12;
    const failed = await recovery.plan();
    expect(failed.providerListed).toBe(false);
    expect(failed.providerError).toMatch(/boat\.dev is briefly unavailable/);
    expect(failed.providerError).toContain(
      "(boat.dev's list failed after 11 pages (2200 Boats) read so far; a retry reads it again from its start)",
    );
    expect(failed.items).toEqual([]);
    listsThisPlan = 0;
    const retried = await recovery.plan();
    expect(retried.providerListed).toBe(true);
    expect(retried.items.map((item) => item.boxId)).toEqual([orphan]);
  });
});
