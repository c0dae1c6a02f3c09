import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ENV_ID, harness } from "./helpers.js";
import { type ChildRun, resultOf, runChild } from "./process.js";

describe("two processes provisioning the same bot at the same moment", () => {
  it.each([
    ["no delay", false],
    ["the first create held open by the provider (409 in progress for the other)", true],
  ])("one Boat, both get it (%s)", async (_label, delayed) => {
    const t = await harness();
    const children: ChildRun[] = [];
    try {
      if (delayed) await t.faults({ method: "POST", path: "^/sandboxes$", action: "delay", ms: 400 });
      const gate = join(t.dataDir, "go");
      for (let i = 0; i < 2; i += 1) {
        children.push(
          runChild({
            DRYDOCK_SIM_API_URL: t.sim.apiUrl,
            DRYDOCK_SIM_TOKEN: t.sim.token,
            DRYDOCK_DATA_DIR: t.dataDir,
            DRYDOCK_ENV_ID: ENV_ID,
            DRYDOCK_BOT_ID: "twin-bot",
            DRYDOCK_FLOW: "provision",
            DRYDOCK_GATE_FILE: gate,
            DRYDOCK_REAL_SLEEP: "1",
          }),
        );
      }
      // Both have loaded everything and wait at the gate, so they truly race.
      await Promise.all(children.map((child) => child.ready));
      writeFileSync(gate, "go");
      const exits = await Promise.all(children.map((child) => child.done));
      const results = exits.map((exit) => resultOf(exit.stdout));
      for (const [index, exit] of exits.entries()) {
        expect(exit.code, exit.stderr).toBe(0);
        expect(results[index]?.ok, exit.stdout).toBe(true);
      }
      const ids = results.map((r) => (r?.result as { boxId: string } | undefined)?.boxId);
      expect(ids[0]).toMatch(/^bx_/);
      expect(ids[0]).toBe(ids[1]);
      expect(t.stats()).toMatchObject({ createsCommitted: 1, live: 1, unnamed: 0 });
      // Exactly one of them minted the key.
      const created = results.map(
        (r) => (r?.result as { createdThisAttempt: boolean } | undefined)?.createdThisAttempt,
      );
      expect(created.filter(Boolean).length).toBe(1);
      expect(t.createFile()?.requests).toEqual([
        expect.objectContaining({ botId: "twin-bot", boxId: ids[0], resolved: true }),
      ]);
    } finally {
      for (const child of children) child.kill();
      await t.close();
    }
  });
});
