import { appendFileSync } from "node:fs";
import type { FaultRule } from "@drydock/boat-provider/simulator";
import { describe, expect, it } from "vitest";
import {
  DELETE_IN_FLIGHT_MS,
  LIFECYCLE_CRASH_POINTS,
  type LifecycleCrashPoint,
  legacyBoatName,
} from "../src/index.js";
import { createOutside, ENV_ID, type Harness, harness } from "./helpers.js";
import { runChild } from "./process.js";
import {
  backendInUse,
  TEST_BACKENDS,
  TEST_POSTGRES_URL_ENV,
  TEST_STORAGE_ENV,
  type TestBackend,
} from "./storage.js";

/**
 * Crash sweep (SQLite's method). For every crash point of provision and delete (and of the cleanup that
 * provision runs through delete): a child process runs the flow against a simulator started here and
 * SIGKILLs itself at the point; then this process opens the journals afresh (a restart), runs
 * recoverAtStartup and the same flow again, and checks the invariants:
 *   - at most one billable Boat per bot (the simulator's stats are the truth);
 *   - every live Boat is known to the create journal (by id, or by its key while unnamed) or findable by
 *     its deterministic name;
 *   - no deletion fence is lost while its Boat may exist;
 *   - no DELETE is sent blind: once a receipt was journaled, recovery only polls and reads.
 * The sweep runs once per storage backend (file: today's JSON files; sqlite: one database file; postgres: a
 * database of the run's own in the project's PostgreSQL): the child and this process open the journals
 * through @drydock/storage's openStorage with the backend named in DRYDOCK_TEST_STORAGE (and the database in
 * DRYDOCK_TEST_POSTGRES_URL), the invariants are the same, and each run checks that the data directory
 * really holds the backend it asked for (storage.json's binding, and only that backend's files).
 */

type Flow = "provision" | "delete";

interface Scenario {
  label: string;
  flow: Flow;
  point: LifecycleCrashPoint;
  faults?: FaultRule[];
  /** Prepares the provider/journals; returns the Boat a delete flow targets. */
  setup?: (t: Harness) => Promise<{ boxId: string; name: string } | undefined>;
  /** Whether the flow's final state has a live Boat for the bot. */
  endsLive: boolean;
  /** Boats ever billed by the end (default: one, or two when provision cleaned up the first). */
  creates?: number;
}

const BOT = "sweep-bot";
const renameRefused: FaultRule = {
  method: "PATCH",
  path: "^/sandboxes/",
  action: "fail-before",
  status: 422,
  code: "invalid_request",
};
const provisioned = async (t: Harness) => {
  const { boxId, name } = await t.lifecycle.provision(BOT);
  return { boxId, name };
};

const DELETE_POINTS = LIFECYCLE_CRASH_POINTS.filter(
  (p) => p.startsWith("delete.") && p !== "delete.after-blocked" && p !== "delete.after-restamp",
);
/** A provisioned Boat whose prepared fence is older than the in-flight window (a crashed caller's). */
const oldFence = async (t: Harness) => {
  const target = await provisioned(t);
  // The child runs on the real clock: the fence is stamped a window and a second in its past.
  const past = await t.journalsAt(() => Date.now() - DELETE_IN_FLIGHT_MS - 1_000);
  try {
    await past.deleteJournal.prepareBoatDeletion({ ...target, ownerBotId: BOT });
  } finally {
    await past.close();
  }
  return target;
};
const scenarios: Scenario[] = [
  ...(
    [
      "provision.after-begin",
      "provision.after-create-response",
      "provision.after-remember",
      "provision.after-rename",
      "provision.after-resolve",
    ] as const
  ).map((point) => ({ label: "provision", flow: "provision" as const, point, endsLive: true })),
  {
    label: "provision refused (4xx)",
    flow: "provision",
    point: "provision.after-discard",
    faults: [
      { method: "POST", path: "^/sandboxes$", action: "fail-before", status: 400, code: "invalid_request" },
    ],
    endsLive: true,
  },
  {
    label: "provision after the remembered Boat was deleted behind its back",
    flow: "provision",
    point: "provision.after-discard-stale",
    setup: async (t) => {
      const { boxId } = await t.lifecycle.provision(BOT);
      const op = await t.outside.deleteSandbox(boxId);
      for (let i = 0; i < 10 && (await t.outside.getDeletionOperation(op.id)).status !== "completed"; i += 1);
      return undefined;
    },
    endsLive: true,
    creates: 2,
  },
  {
    label: "provision adopting a legacy-named Boat",
    flow: "provision",
    point: "provision.after-adopt",
    setup: async (t) => {
      await createOutside(t, legacyBoatName(BOT));
      return undefined;
    },
    endsLive: true,
  },
  ...DELETE_POINTS.map((point) => ({
    label: "delete",
    flow: "delete" as const,
    point,
    setup: provisioned,
    endsLive: false,
  })),
  {
    label: "delete blocked",
    flow: "delete",
    point: "delete.after-blocked",
    setup: provisioned,
    faults: [{ action: "block-deletion" }],
    endsLive: false,
  },
  // The explicit retry of an old prepared fence re-stamps it before DELETE leaves: Delete again, and
  // provisioning for the bot behind that fence.
  {
    label: "delete retry of an old fence",
    flow: "delete",
    point: "delete.after-restamp",
    setup: oldFence,
    endsLive: false,
  },
  {
    label: "provision behind an old fence",
    flow: "provision",
    point: "delete.after-restamp",
    setup: async (t) => {
      await oldFence(t);
      return undefined;
    },
    endsLive: true,
    creates: 2,
  },
  // Provision's cleanup of the Boat it created runs through the delete flow's points.
  ...DELETE_POINTS.map((point) => ({
    label: "provision cleanup",
    flow: "provision" as const,
    point,
    faults: [renameRefused],
    endsLive: true,
  })),
];

const RECEIPT_JOURNALED = new Set<LifecycleCrashPoint>([
  "delete.after-accepted",
  "delete.after-receipt-progress",
  "delete.after-receipt-completed",
  "delete.after-retire-create",
  "delete.after-retire-deletion",
]);

/** Figures for `pnpm reliability` (scripts/reliability.mjs); a no-op unless DRYDOCK_RELIABILITY_OUT is set. */
function reliability(backend: TestBackend, metric: string, value: number): void {
  const out = process.env.DRYDOCK_RELIABILITY_OUT;
  if (out) appendFileSync(out, `${JSON.stringify({ area: "lifecycle", backend, metric, value })}\n`);
}
/** Most billable (live) Boats the simulator ever held for the one bot, after a crash or at the end, per backend. */
const maxLive = new Map<TestBackend, number>();
const noteLive = (backend: TestBackend, live: number) =>
  maxLive.set(backend, Math.max(maxLive.get(backend) ?? 0, live));
/** Boats billed (creates committed by the simulator) over every run, per backend. */
const billed = new Map<TestBackend, number>();

async function sweepOne(s: Scenario, backend: TestBackend): Promise<void> {
  // Four polls per deletion: after a restart an accepted operation is still running for a while, so the
  // rerun meets a pending receipt (where a blind second DELETE would be tempting).
  const t = await harness({ sim: { deletionPolls: 4 }, storage: backend });
  const run = { kill: () => {} };
  try {
    const target = s.setup === undefined ? undefined : await s.setup(t);
    if (s.faults !== undefined) await t.faults(...s.faults);
    const child = runChild({
      DRYDOCK_SIM_API_URL: t.sim.apiUrl,
      DRYDOCK_SIM_TOKEN: t.sim.token,
      DRYDOCK_DATA_DIR: t.dataDir,
      DRYDOCK_ENV_ID: ENV_ID,
      DRYDOCK_BOT_ID: BOT,
      DRYDOCK_FLOW: s.flow,
      DRYDOCK_CRASH_POINT: s.point,
      [TEST_STORAGE_ENV]: backend,
      ...(t.postgresUrl === null ? {} : { [TEST_POSTGRES_URL_ENV]: t.postgresUrl }),
      ...(target === undefined ? {} : { DRYDOCK_BOX_ID: target.boxId, DRYDOCK_CONFIRM_NAME: target.name }),
    });
    run.kill = child.kill;
    const exit = await child.done;
    const context = `[${backend}] ${s.label} @ ${s.point}: ${exit.stdout} ${exit.stderr}`;
    // The point was reached, and the process really died there.
    expect(exit.stdout, context).toContain(`crash ${s.point}\n`);
    expect(exit.signal, context).toBe("SIGKILL");
    await t.clearFaults();

    // --- Invariants right after the crash -------------------------------------------------------------
    const afterCrash = t.stats();
    noteLive(backend, afterCrash.live);
    expect(afterCrash.live, context).toBeLessThanOrEqual(1);
    const boats = t.sim.sandboxes();
    const crashRows = await t.rows();
    const fences = crashRows.deletes;
    for (const boat of boats) {
      const deletionStarted = boat.history.some((event) => event.event === "deletion_requested");
      // A Boat whose deletion was requested but is not proven finished keeps its fence.
      if (deletionStarted && boat.deletedAt === null) {
        expect(
          fences.map((f) => f.boxId),
          context,
        ).toContain(boat.id);
      }
      if (boat.deletedAt === null) {
        // Live and unnamed: only the create journal's key (a key-only row) can find it again.
        const rows = crashRows.creates;
        const known =
          rows.some((row) => row.boxId === boat.id) ||
          boat.name === t.lifecycle.boatNameFor(BOT) ||
          boat.name === legacyBoatName(BOT) ||
          (boat.name === null && rows.some((row) => row.botId === BOT && row.boxId === undefined));
        expect(known, context).toBe(true);
      }
    }

    // --- Restart: fresh journals, startup recovery (which must send nothing that creates or deletes) --
    const lifecycle = await t.reopen();
    const before = t.stats();
    const report = await lifecycle.recoverAtStartup();
    expect(report.journalErrors, context).toEqual([]);
    expect(t.stats().createRequests, context).toBe(before.createRequests);
    expect(t.stats().deleteRequests, context).toBe(before.deleteRequests);

    // --- The same flow again, to completion ----------------------------------------------------------
    // A crashed caller's prepared fence counts as its DELETE still in flight for DELETE_IN_FLIGHT_MS; the
    // rerun comes after that window (a rerun inside it is answered "in progress": delete-in-flight.test.ts).
    t.clock.offsetMs += DELETE_IN_FLIGHT_MS;
    if (s.flow === "provision") {
      let result: { boxId: string } | undefined;
      for (let attempt = 0; attempt < 6 && result === undefined; attempt += 1) {
        try {
          result = await lifecycle.provision(BOT);
        } catch (error) {
          // A fence left by the crashed cleanup: reconciled by provision itself, then a deliberate retry.
          expect(["computer_deleting", "previous_deletion_finished"], context).toContain(
            (error as { code: string }).code,
          );
        }
      }
      expect(result, context).toBeDefined();
    } else if (target !== undefined) {
      const first = await lifecycle.deleteBoat({
        boxId: target.boxId,
        confirmName: target.name,
        ownerBotId: BOT,
      });
      let outcome = first.pending === true ? "pending" : "confirmed";
      for (let i = 0; i < 10 && outcome !== "confirmed"; i += 1) {
        outcome = await lifecycle.reconcileDeletion(target.boxId);
      }
      expect(outcome, context).toBe("confirmed");
    }

    // --- Final invariants ------------------------------------------------------------------------------
    const end = t.stats();
    noteLive(backend, end.live);
    expect(end.live, context).toBe(s.endsLive ? 1 : 0);
    const endRows = await t.rows();
    const rows = endRows.creates;
    for (const boat of t.sim.sandboxes().filter((b) => b.deletedAt === null)) {
      expect(
        rows.some((row) => row.boxId === boat.id && row.resolved === true),
        context,
      ).toBe(true);
      expect([t.lifecycle.boatNameFor(BOT), legacyBoatName(BOT)], context).toContain(boat.name);
    }
    if (!s.endsLive) {
      expect(rows, context).toEqual([]);
      expect(endRows.deletes, context).toEqual([]);
    }
    // One deletion operation per Boat at most, and none re-sent once its receipt was journaled.
    const operations = (await (
      await fetch(`${t.sim.url}/_sim/sandboxes`, { headers: { authorization: `Bearer ${t.sim.token}` } })
    ).json()) as { operations: Array<{ targetId: string; status: string }> };
    const perTarget = new Map<string, number>();
    for (const op of operations.operations) {
      if (op.status !== "blocked") perTarget.set(op.targetId, (perTarget.get(op.targetId) ?? 0) + 1);
    }
    for (const count of perTarget.values()) expect(count, context).toBeLessThanOrEqual(1);
    if (RECEIPT_JOURNALED.has(s.point)) expect(end.deleteRequests, context).toBe(end.deletesAccepted);
    // Exactly the Boats the scenario needs were ever billed: one, or two when the first was cleaned up.
    expect(end.createsCommitted, context).toBe(s.creates ?? (s.label === "provision cleanup" ? 2 : 1));
    billed.set(backend, (billed.get(backend) ?? 0) + end.createsCommitted);
    // The run used the backend it asked for: bound to it, and only its files hold journal state.
    expect(backendInUse(t.dataDir), context).toEqual({
      binding: backend,
      sqliteFile: backend === "sqlite",
      journalFiles: backend === "file",
    });
  } finally {
    run.kill();
    await t.close();
  }
}

describe.each(TEST_BACKENDS)("crash sweep (%s storage)", (backend) => {
  it("every crash point of provision, cleanup and delete: kill, restart, recover, rerun — invariants hold", async () => {
    const swept = new Set<LifecycleCrashPoint>();
    const queue = [...scenarios];
    // Three children at a time: bounded on a 2-core machine shared with other suites.
    const workers = Array.from({ length: 3 }, async () => {
      for (let s = queue.shift(); s !== undefined; s = queue.shift()) {
        await sweepOne(s, backend);
        swept.add(s.point);
      }
    });
    await Promise.all(workers);
    reliability(backend, "crash runs (kill, restart, recover, rerun)", scenarios.length);
    reliability(backend, "distinct crash points swept", swept.size);
    reliability(backend, "declared crash points", LIFECYCLE_CRASH_POINTS.length);
    reliability(backend, "max billable Boats per bot", maxLive.get(backend) ?? 0);
    reliability(
      backend,
      "Boats billed in all (each run asserted exactly the ones its scenario needs)",
      billed.get(backend) ?? 0,
    );
    expect([...swept].sort()).toEqual([...LIFECYCLE_CRASH_POINTS].sort());
    console.log(
      `crash sweep (${backend} storage): ${scenarios.length} crash runs over ${swept.size} distinct points (${LIFECYCLE_CRASH_POINTS.length} declared), all invariants held`,
    );
  }, 120_000);
});
