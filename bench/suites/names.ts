import { openBoatCreateJournal } from "@drydock/boat-create-journal";
import { openBoatDeleteJournal } from "@drydock/boat-delete-journal";
import { createBoatLifecycle } from "@drydock/boat-lifecycle";
import { createBoatClient } from "@drydock/boat-provider";
import { startBoatSimulator } from "@drydock/boat-provider/simulator";
import { scratchDir } from "../lib/dirs.js";
import { describeEnvironment } from "../lib/env.js";
import type { SuiteResult } from "../lib/report.js";
import { fmtMs, fmtRatio, summarize } from "../lib/stats.js";

/**
 * The deterministic-name lookup in a large account (issue #23, decision 0029): the provision time of the
 * 1st bot (which reads boat.dev's whole list once: the name sweep) against the 2,001st..2,100th, in an
 * account that starts with 5,000 foreign Boats, and the list requests each provision sends. Beside it, one
 * `listAllSandboxes` walk of the same account: what every provision paid before (and, past 10 pages, the
 * point at which provisioning stopped).
 */
export async function runNames(opts: { quick: boolean }): Promise<SuiteResult> {
  const { dir, cleanup } = scratchDir("names");
  const environment = describeEnvironment(dir);
  const foreign = 5_000;
  const before = opts.quick ? 200 : 2_000; // bots provisioned before the measured ones
  const measured = opts.quick ? 20 : 100;
  const sim = await startBoatSimulator({ provisionMs: 0 });
  try {
    sim.seed({ count: foreign, namePrefix: "someone-else-" });
    const requests = { list: 0, other: 0 };
    const counting = async (input: string, init: RequestInit): Promise<Response> => {
      if ((init.method ?? "GET") === "GET" && new URL(input).pathname.endsWith("/sandboxes"))
        requests.list += 1;
      else requests.other += 1;
      return fetch(input, init);
    };
    const client = createBoatClient({ baseUrl: sim.apiUrl, token: sim.token, fetch: counting });
    const lifecycle = createBoatLifecycle({
      client,
      createJournal: openBoatCreateJournal({ dataDir: dir }),
      deleteJournal: openBoatDeleteJournal({ dataDir: dir }),
      environmentId: "5d1e7a7e-0000-4000-8000-00000000b0a7",
      // Enough for the first provision to finish the sweep itself (the background walk is not started:
      // recoverAtStartup is not called), so its time includes the whole walk.
      nameSweep: { inlinePages: 1_000 },
    });

    const timeOne = async (botId: string) => {
      const listBefore = requests.list;
      const otherBefore = requests.other;
      const t0 = performance.now();
      const result = await lifecycle.provision(botId);
      const ms = performance.now() - t0;
      if (!result.createdThisAttempt) throw new Error(`${botId}: expected a new Boat`);
      return { ms, lists: requests.list - listBefore, others: requests.other - otherBefore };
    };

    const first = await timeOne("bot-1");
    const fillStart = performance.now();
    for (let i = 2; i <= before; i += 1) await lifecycle.provision(`bot-${i}`);
    const fillMs = performance.now() - fillStart;
    const later: Array<{ ms: number; lists: number; others: number }> = [];
    for (let i = before + 1; i <= before + measured; i += 1) later.push(await timeOne(`bot-${i}`));
    const laterSummary = summarize(later.map((x) => x.ms));
    const laterLists = later.reduce((sum, x) => sum + x.lists, 0) / later.length;
    const laterOthers = later.reduce((sum, x) => sum + x.others, 0) / later.length;

    // The lookup alone: findBoat of bots no journal row knows (the name index, no Boat found, nothing
    // created), so the create journal's writes are not in the figure.
    const lookups: number[] = [];
    const lookupListsBefore = requests.list;
    for (let i = 0; i < measured; i += 1) {
      const t0 = performance.now();
      if ((await lifecycle.findBoat(`nobody-${i}`)) !== null) throw new Error("found a Boat for nobody");
      lookups.push(performance.now() - t0);
    }
    const lookup = summarize(lookups);
    const lookupLists = (requests.list - lookupListsBefore) / measured;

    // The previous lookup: one full list walk per provision (here without its 10-page cap).
    const walks: number[] = [];
    let walkPages = 0;
    for (let round = 0; round < 3; round += 1) {
      const listBefore = requests.list;
      const t0 = performance.now();
      await client.listAllSandboxes({ maxPages: 10_000 });
      walks.push(performance.now() - t0);
      walkPages = requests.list - listBefore;
    }
    const walk = summarize(walks);
    const stats = sim.stats();
    const account = stats.live;
    if (stats.createsCommitted !== before + measured) throw new Error("a provision billed a second Boat");

    return {
      id: "names",
      title: "Deterministic-name lookup in a large account (the name sweep)",
      environment,
      tables: [
        {
          title: `Provisioning in an account that starts with ${foreign} foreign Boats (boat.dev simulator on loopback, file journals)`,
          columns: [
            "provision",
            "ms (mean)",
            "p99 ms",
            "list requests per provision",
            "other requests per provision",
          ],
          rows: [
            [
              "bot 1 (reads the whole list once)",
              fmtMs(first.ms),
              "—",
              String(first.lists),
              String(first.others),
            ],
            [
              `bots ${before + 1}–${before + measured}`,
              fmtMs(laterSummary.meanMs),
              fmtMs(laterSummary.p99Ms),
              laterLists.toFixed(2),
              laterOthers.toFixed(2),
            ],
          ],
        },
        {
          title: `The name lookup alone against the walk every provision made before, same account (${account} Boats)`,
          columns: ["lookup", "ms (mean)", "p99 ms", "list requests", "÷ the index lookup"],
          rows: [
            [
              `findBoat of a bot no journal knows (name index), ${measured}×`,
              fmtMs(lookup.meanMs),
              fmtMs(lookup.p99Ms),
              lookupLists.toFixed(2),
              "—",
            ],
            [
              "listAllSandboxes (limit 200, no cap), 3×",
              fmtMs(walk.meanMs),
              fmtMs(walk.p99Ms),
              String(walkPages),
              fmtRatio(walk.meanMs / lookup.meanMs),
            ],
          ],
        },
      ],
      figures: {
        firstProvisionMs: first.ms,
        firstProvisionListRequests: first.lists,
        laterProvisionMeanMs: laterSummary.meanMs,
        laterProvisionP99Ms: laterSummary.p99Ms,
        laterListRequestsPerProvision: laterLists,
        indexLookupMeanMs: lookup.meanMs,
        indexLookupListRequests: lookupLists,
        fullListWalkMs: walk.meanMs,
        fullListWalkPages: walkPages,
        fillProvisionsMs: fillMs,
      },
      notes: [
        `Bots 2..${before} were provisioned in between (${(fillMs / 1000).toFixed(1)} s in all), so the account holds ${foreign + before} Boats when the later bots are measured; their time includes the create journal's growth (file backend), not any list.`,
        "Before decision 0029, every provision the journal could not answer walked the list like the last row, and failed past 10 pages (2,000 Boats).",
      ],
    };
  } finally {
    await sim.close();
    cleanup();
  }
}
