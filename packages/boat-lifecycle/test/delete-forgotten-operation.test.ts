import { afterEach, describe, expect, it } from "vitest";
import { type BoatLifecycle, LIFECYCLE_MESSAGES } from "../src/index.js";
import { deletes, type Harness, harness, polls, secondProcess } from "./helpers.js";

let open: Harness | undefined;
afterEach(async () => {
  await open?.close();
  open = undefined;
});
const use = async (options?: Parameters<typeof harness>[0]) => {
  open = await harness(options);
  return open;
};

/** Another lifecycle on the same data dir that records its warnings. */
function observed(t: Harness): { lifecycle: BoatLifecycle; warnings: string[] } {
  const warnings: string[] = [];
  const lifecycle = secondProcess(t, undefined, { logger: { warn: (message) => warnings.push(message) } });
  return { lifecycle, warnings };
}

const forgotten = {
  method: "GET",
  path: "^/deletion-operations/",
  action: "fail-before",
  status: 404,
  code: "not_found",
  times: 1000,
} as const;

async function acceptedAndPending(t: Harness) {
  const { boxId, name } = await t.lifecycle.provision("bot-1");
  expect(await t.lifecycle.deleteBoat({ boxId, confirmName: name, ownerBotId: "bot-1" })).toEqual({
    ok: true,
    pending: true,
  });
  const fence = t.deleteFile()?.records[0];
  expect(fence).toMatchObject({ phase: "accepted" });
  return { boxId, name, operationId: fence?.operationId as string };
}

describe("an accepted fence whose operation boat.dev no longer knows", () => {
  it("404 not_found on the poll while the Boat exists: the fence is blocked (operation kept), and an explicit Delete retry is allowed", async () => {
    const t = await use({ sim: { deletionPolls: 50 } });
    const { boxId, name, operationId } = await acceptedAndPending(t);
    // boat.dev forgot the operation (retention, a failed operation purged); the Boat is still there.
    await t.faults(forgotten);
    const other = observed(t);
    expect(await other.lifecycle.reconcileDeletion(boxId)).toBe("blocked");
    expect(t.deleteFile()?.records).toEqual([
      expect.objectContaining({ boxId, phase: "blocked", status: "blocked", operationId }),
    ]);
    expect(other.warnings).toContain(LIFECYCLE_MESSAGES.deletionOperationUnknown(boxId, operationId));
    const warning = other.warnings.find((w) => w.includes(operationId));
    expect(warning).toMatch(
      new RegExp(`boat\\.dev no longer knows deletion operation ${operationId} .*still exists`),
    );
    expect(warning).toMatch(/explicit Delete retry is now allowed/);
    // Reconciling sent no DELETE; it stays blocked on every further reconcile.
    expect(t.stats().deleteRequests).toBe(1);
    expect(await t.lifecycle.reconcileDeletion(boxId)).toBe("blocked");
    expect(t.stats().deleteRequests).toBe(1);
    // The explicit retry re-prepares the fence and sends DELETE again.
    await t.clearFaults();
    t.wire.length = 0;
    await t.lifecycle.deleteBoat({ boxId, confirmName: name, ownerBotId: "bot-1" });
    expect(deletes(t)).toHaveLength(1);
    expect(t.deleteFile()?.records[0]?.phase).toBe("accepted");
  });

  it("410 gone on the poll while following our own DELETE: blocked, not pending forever", async () => {
    const t = await use({ sim: { deletionPolls: 50 } });
    const { boxId, name } = await t.lifecycle.provision("bot-1");
    await t.faults({ ...forgotten, status: 410, code: "gone" });
    const error = await t.lifecycle.deleteBoat({ boxId, confirmName: name, ownerBotId: "bot-1" }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(error).toMatchObject({ code: "deletion_blocked" });
    expect(t.deleteFile()?.records[0]).toMatchObject({ phase: "blocked", status: "blocked" });
    expect(t.deleteFile()?.records[0]?.operationId).toMatch(/^bdop_/);
    expect(t.stats().deleteRequests).toBe(1);
  });

  it("the operation unknown and the Boat proven gone: finished", async () => {
    const t = await use({ sim: { deletionPolls: 50 } });
    const { boxId } = await acceptedAndPending(t);
    await t.faults(forgotten, {
      method: "GET",
      path: "^/sandboxes/",
      action: "fail-before",
      status: 404,
      code: "not_found",
      times: 1000,
    });
    expect(await t.lifecycle.reconcileDeletion(boxId)).toBe("confirmed");
    expect(t.deleteFile()?.records).toEqual([]);
  });

  it("a proxy's envelope-less 404 on the poll proves nothing: the fence stays accepted and pending", async () => {
    const t = await use({ sim: { deletionPolls: 50 } });
    const { boxId } = await acceptedAndPending(t);
    t.tamper((request, response) =>
      request.path.startsWith("/deletion-operations/")
        ? new Response("<html><body>404 Not Found</body></html>", {
            status: 404,
            headers: { "content-type": "text/html" },
          })
        : response,
    );
    t.wire.length = 0;
    for (let i = 0; i < 3; i += 1) expect(await t.lifecycle.reconcileDeletion(boxId)).toBe("pending");
    expect(polls(t)).toHaveLength(3);
    expect(t.deleteFile()?.records[0]).toMatchObject({ phase: "accepted" });
    expect(t.stats().deleteRequests).toBe(1);
  });
});
