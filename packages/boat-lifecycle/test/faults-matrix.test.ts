import type { FaultAction, FaultRule } from "@drydock/boat-provider/simulator";
import { describe, expect, it } from "vitest";
import { DELETE_IN_FLIGHT_MS, LIFECYCLE_MESSAGES } from "../src/index.js";
import { type Harness, harness, rejection } from "./helpers.js";
import { TEST_BACKENDS } from "./storage.js";

/**
 * Every fault action of the simulator against provision and against delete (the fault matrix): the caller
 * gets the original's message and status for each ambiguous outcome, and no fault ever bills a second Boat or
 * starts a second deletion of one Boat. On each storage backend (file: today's JSON files; sqlite), the
 * journals opened through @drydock/storage's openStorage.
 */

interface Expected {
  code: string;
  status: number;
  message: string | RegExp;
}

const POST: Pick<FaultRule, "method" | "path"> = { method: "POST", path: "^/sandboxes$" };
const DELETE: Pick<FaultRule, "method" | "path"> = { method: "DELETE", path: "^/sandboxes/" };

const kept = /Its request was kept, so retrying reuses it and cannot create a second computer$/;
const fenced = /^boat delete failed: .*The computer was kept fenced; retry Delete to reconcile it$/;

const provisionCases: Array<[FaultAction, FaultRule[], Expected | null]> = [
  [
    "fail-before",
    [{ ...POST, action: "fail-before", status: 503, times: 2 }],
    { code: "provider_unavailable", status: 502, message: kept },
  ],
  [
    "fail-after",
    [{ ...POST, action: "fail-after", status: 500, times: 2 }],
    { code: "provider_unavailable", status: 502, message: kept },
  ],
  [
    "drop-after",
    [{ ...POST, action: "drop-after", times: 2 }],
    { code: "provider_unavailable", status: 503, message: LIFECYCLE_MESSAGES.createUnconfirmed },
  ],
  [
    "drop-before",
    [{ ...POST, action: "drop-before", times: 2 }],
    { code: "provider_unavailable", status: 503, message: LIFECYCLE_MESSAGES.createUnconfirmed },
  ],
  [
    "delay",
    [{ ...POST, action: "delay", ms: 4_000 }],
    { code: "create_in_progress", status: 409, message: LIFECYCLE_MESSAGES.createInProgress },
  ],
  [
    "in-progress",
    [{ ...POST, action: "in-progress", times: 4 }],
    { code: "create_in_progress", status: 409, message: LIFECYCLE_MESSAGES.createInProgress },
  ],
  [
    "rate-limit",
    [{ ...POST, action: "rate-limit", times: 2 }],
    { code: "provider_refused", status: 429, message: /rate limiting/ },
  ],
  [
    "block-deletion",
    [
      { method: "PATCH", path: "^/sandboxes/", action: "fail-before", status: 422, code: "invalid_request" },
      { action: "block-deletion" },
    ],
    {
      code: "cleanup_unconfirmed",
      status: 503,
      message:
        /^boat naming failed: .*The new computer's deletion was not confirmed: the deletion operation is blocked\. Check box bx_\w+ in boat\.dev\.$/,
    },
  ],
];

const deleteCases: Array<[FaultAction, FaultRule[], Expected]> = [
  [
    "fail-before",
    [{ ...DELETE, action: "fail-before", status: 503 }],
    { code: "provider_unavailable", status: 502, message: fenced },
  ],
  [
    "fail-after",
    [{ ...DELETE, action: "fail-after", status: 500 }],
    { code: "provider_unavailable", status: 502, message: fenced },
  ],
  [
    "drop-after",
    [{ ...DELETE, action: "drop-after" }],
    { code: "deletion_unconfirmed", status: 503, message: LIFECYCLE_MESSAGES.deleteUnconfirmed },
  ],
  [
    "drop-before",
    [{ ...DELETE, action: "drop-before" }],
    { code: "deletion_unconfirmed", status: 503, message: LIFECYCLE_MESSAGES.deleteUnconfirmed },
  ],
  [
    "delay",
    [{ ...DELETE, action: "delay", ms: 4_000 }],
    { code: "deletion_unconfirmed", status: 503, message: LIFECYCLE_MESSAGES.deleteUnconfirmed },
  ],
  [
    "in-progress",
    [{ ...DELETE, action: "in-progress" }],
    { code: "provider_refused", status: 409, message: /^boat delete failed: / },
  ],
  [
    "rate-limit",
    [{ ...DELETE, action: "rate-limit" }],
    { code: "provider_refused", status: 429, message: fenced },
  ],
  [
    "block-deletion",
    [{ action: "block-deletion" }],
    {
      code: "deletion_blocked",
      status: 409,
      message: /the deletion operation is blocked — check boat\.dev and retry$/,
    },
  ],
];

/** A delayed request commits in the background after the client gave up: wait (bounded) for the commit. */
async function settle(
  t: Harness,
  committed: (stats: ReturnType<Harness["stats"]>) => boolean,
): Promise<void> {
  for (let i = 0; i < 200 && !committed(t.stats()); i += 1) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  expect(committed(t.stats())).toBe(true);
}

function check(error: { code: string; status: number; message: string }, expected: Expected) {
  expect(error.code).toBe(expected.code);
  expect(error.status).toBe(expected.status);
  if (typeof expected.message === "string") expect(error.message).toBe(expected.message);
  else expect(error.message).toMatch(expected.message);
}

describe.each(TEST_BACKENDS)("provider faults × provision (%s storage)", (backend) => {
  it.each(provisionCases)(
    "%s: the seeds' answer, then one Boat in the end",
    async (action, rules, expected) => {
      const t = await harness({ timeoutMs: action === "delay" ? 800 : 10_000, storage: backend });
      try {
        await t.faults(...rules);
        const error = await rejection(t.lifecycle.provision("bot-1"));
        if (expected !== null) check(error, expected);
        expect(t.stats().live).toBeLessThanOrEqual(1);
        if (action === "delay") await settle(t, (stats) => stats.createsCommitted === 1);
        await t.clearFaults();
        // Retrying deliberately converges on exactly one live Boat, without a second billed one unless the
        // first was cleaned up (block-deletion: the cleanup is finished by the retry first).
        let result: { boxId: string } | undefined;
        for (let i = 0; i < 4 && result === undefined; i += 1) {
          result = await t.lifecycle.provision("bot-1").catch((e: { code: string }) => {
            expect(["computer_deleting", "previous_deletion_finished"]).toContain(e.code);
            return undefined;
          });
        }
        expect(result).toBeDefined();
        expect(t.stats()).toMatchObject({ live: 1, createsCommitted: action === "block-deletion" ? 2 : 1 });
      } finally {
        await t.close();
      }
    },
  );
});

describe.each(TEST_BACKENDS)("provider faults × delete (%s storage)", (backend) => {
  it.each(deleteCases)(
    "%s: the seeds' answer, fence kept, one deletion in the end",
    async (action, rules, expected) => {
      const t = await harness({ timeoutMs: action === "delay" ? 800 : 10_000, storage: backend });
      try {
        const { boxId, name } = await t.lifecycle.provision("bot-1");
        await t.faults(...rules);
        const error = await rejection(
          t.lifecycle.deleteBoat({ boxId, confirmName: name, ownerBotId: "bot-1" }),
        );
        check(error, expected);
        // The fence stands, so the bot cannot provision a second Boat meanwhile.
        expect((await t.rows()).deletes).toEqual([expect.objectContaining({ boxId })]);
        expect((await rejection(t.lifecycle.findBoat("bot-1"))).code).toBe("computer_deleting");
        if (action === "delay") await settle(t, (stats) => stats.deletesAccepted === 1);
        await t.clearFaults();
        t.clock.offsetMs += DELETE_IN_FLIGHT_MS; // past the in-flight window: the explicit retry may re-send DELETE
        expect(await t.lifecycle.deleteBoat({ boxId, confirmName: name, ownerBotId: "bot-1" })).toEqual({
          ok: true,
        });
        const stats = t.stats();
        expect(stats).toMatchObject({ live: 0, createsCommitted: 1 });
        // One deletion operation ran to completion; a blocked one is retried explicitly with a new one.
        expect(stats.deletesAccepted).toBe(action === "block-deletion" ? 2 : 1);
        const rows = await t.rows();
        expect(rows.deletes).toEqual([]);
        expect(rows.creates).toEqual([]);
      } finally {
        await t.close();
      }
    },
  );
});
