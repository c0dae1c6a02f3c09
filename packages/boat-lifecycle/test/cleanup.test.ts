import { afterEach, describe, expect, it } from "vitest";
import { deletes, type Harness, harness, patches, polls, posts, rejection } from "./helpers.js";

let h: Harness | undefined;
const use = async (options?: Parameters<typeof harness>[0]) => {
  h = await harness(options);
  return h;
};
afterEach(async () => {
  await h?.close();
  h = undefined;
});

const renameRefused = {
  method: "PATCH",
  path: "^/sandboxes/",
  action: "fail-before",
  status: 422,
  code: "invalid_request",
} as const;

describe("provision cleanup: only a Boat this very attempt created", () => {
  it("rename failure: the new Boat is deleted with the confirm header and polled; the rename error surfaces", async () => {
    const t = await use();
    await t.faults(renameRefused);
    const error = await rejection(t.lifecycle.provision("bot-1"));
    expect(error).toMatchObject({ code: "provider_refused", status: 422 });
    expect(error.message).toContain("boat naming failed");
    const boxId = (posts(t).length === 1 && t.sim.sandboxes()[0]?.id) as string;
    expect(deletes(t)).toEqual([
      expect.objectContaining({ path: `/sandboxes/${boxId}`, confirmDelete: boxId }),
    ]);
    expect(polls(t).length).toBeGreaterThanOrEqual(1);
    // Proven deleted: both journals are clean, nothing is live.
    expect(t.createFile()?.requests).toEqual([]);
    expect(t.deleteFile()?.records).toEqual([]);
    expect(t.stats()).toMatchObject({ createsCommitted: 1, deletesAccepted: 1, live: 0 });
  });

  it("a recovered Boat (key resumed from an earlier run) is never deleted when naming fails", async () => {
    const t = await use();
    await t.faults({ method: "POST", path: "^/sandboxes$", action: "drop-after", times: 2 });
    await rejection(t.lifecycle.provision("bot-1")); // committed, answer lost twice: key kept
    t.restart();
    await t.faults(renameRefused);
    const error = await rejection(t.lifecycle.provision("bot-1"));
    expect(error.message).toContain("boat naming failed");
    expect(deletes(t)).toHaveLength(0);
    expect(t.stats()).toMatchObject({ live: 1 });
    // Its row is kept (remembered, unresolved) so the next provision finishes it.
    expect(t.createFile()?.requests).toEqual([
      expect.objectContaining({ botId: "bot-1", boxId: expect.any(String) }),
    ]);
    expect(t.createFile()?.requests[0]?.resolved).toBeUndefined();
    const result = await t.lifecycle.provision("bot-1");
    expect(result.createdThisAttempt).toBe(false);
    expect(t.stats()).toMatchObject({ createsCommitted: 1, live: 1, unnamed: 0 });
  });

  it("cleanup still pending (polls and direct read unavailable): 503 names the Boat, keeps its row and its fence", async () => {
    const t = await use();
    await t.faults(renameRefused, {
      method: "GET",
      path: "^/deletion-operations/",
      action: "fail-before",
      status: 503,
      times: 10,
    });
    // The identity read before cleanup works; after DELETE every read fails.
    let reads = 0;
    t.tamper((request, response) => {
      if (request.method === "GET" && /^\/sandboxes\/bx_/.test(request.path)) {
        reads += 1;
        if (reads > 1) {
          return new Response(
            JSON.stringify({
              ok: false,
              error: { code: "service_unavailable", message: "down", status: 503 },
            }),
            {
              status: 503,
              headers: { "content-type": "application/json" },
            },
          );
        }
      }
      return response;
    });
    const error = await rejection(t.lifecycle.provision("bot-1"));
    const boxId = t.sim.sandboxes()[0]?.id as string;
    expect(error).toMatchObject({ code: "cleanup_unconfirmed", status: 503 });
    expect(error.message).toContain("boat naming failed");
    expect(error.message).toContain(
      "boat.dev accepted deletion of the new computer, but it is still pending; its recovery record was kept, along with its deletion fence.",
    );
    expect(error.message).toContain(`Check box ${boxId} in boat.dev.`);
    expect(t.createFile()?.requests).toEqual([expect.objectContaining({ boxId })]);
    expect(t.deleteFile()?.records).toEqual([
      expect.objectContaining({ boxId, phase: "accepted", ownerBotId: "bot-1" }),
    ]);
    // Poll first, then the direct read, after the DELETE.
    const order = t.wire.map((r) => `${r.method} ${r.path.split("/")[1]}`);
    const del = order.indexOf("DELETE sandboxes");
    expect(order.slice(del + 1)).toContain("GET deletion-operations");
    expect(order.at(-1)).toBe("GET sandboxes");

    // The bot is fenced until the deletion is proven (the operation needs two polls to complete).
    t.tamper(null);
    await t.clearFaults();
    const fenced = await rejection(t.lifecycle.provision("bot-1"));
    expect(fenced).toMatchObject({ code: "computer_deleting", status: 409 });
    expect(t.deleteFile()?.records).toHaveLength(1);
    const finished = await rejection(t.lifecycle.provision("bot-1"));
    expect(finished).toMatchObject({ code: "previous_deletion_finished", status: 409 });
    expect(t.createFile()?.requests).toEqual([]);
    expect(t.deleteFile()?.records).toEqual([]);
  });

  it("DELETE answered 404 during cleanup: the row is retired and the original error surfaces", async () => {
    const t = await use();
    await t.faults(renameRefused, {
      method: "DELETE",
      path: "^/sandboxes/",
      action: "fail-before",
      status: 404,
      code: "not_found",
    });
    const error = await rejection(t.lifecycle.provision("bot-1"));
    expect(error.message).toContain("boat naming failed");
    expect(error.code).toBe("provider_refused");
    expect(t.createFile()?.requests).toEqual([]);
    expect(t.deleteFile()?.records).toEqual([]);
  });

  it("cleanup DELETE lost: '…deletion was not confirmed … Check box <id> in boat.dev.'; fence kept, no second Boat", async () => {
    const t = await use();
    await t.faults(renameRefused, { method: "DELETE", path: "^/sandboxes/", action: "drop-after" });
    const error = await rejection(t.lifecycle.provision("bot-1"));
    const boxId = t.sim.sandboxes()[0]?.id as string;
    expect(error.code).toBe("cleanup_unconfirmed");
    expect(error.message).toMatch(
      new RegExp(
        `^boat naming failed: .*\\. The new computer's deletion was not confirmed: Could not confirm whether boat\\.dev accepted the delete\\..*Check box ${boxId} in boat\\.dev\\.$`,
      ),
    );
    expect(t.deleteFile()?.records).toEqual([expect.objectContaining({ boxId, phase: "prepared" })]);
    // The next provision reconciles the fence first (re-sends DELETE: boat.dev answers with the running
    // operation), and never creates while the old Boat may exist.
    const next = await rejection(t.lifecycle.provision("bot-1"));
    expect(["computer_deleting", "previous_deletion_finished"]).toContain(next.code);
    expect(t.stats()).toMatchObject({ createsCommitted: 1, deletesAccepted: 1 });
  });

  it("cleanup blocked at boat.dev: the caller is told, the fence stays blocked", async () => {
    const t = await use();
    await t.faults(renameRefused, { action: "block-deletion" });
    const error = await rejection(t.lifecycle.provision("bot-1"));
    const boxId = t.sim.sandboxes()[0]?.id as string;
    expect(error.code).toBe("cleanup_unconfirmed");
    expect(error.message).toContain(
      "The new computer's deletion was not confirmed: the deletion operation is blocked",
    );
    expect(t.deleteFile()?.records).toEqual([expect.objectContaining({ boxId, phase: "blocked" })]);
    expect(patches(t)).toHaveLength(1);
  });

  it("a rename whose answer was lost is retried once (PATCH is idempotent), no cleanup needed", async () => {
    const t = await use();
    await t.faults({ method: "PATCH", path: "^/sandboxes/", action: "drop-after" });
    const result = await t.lifecycle.provision("bot-1");
    expect(patches(t)).toHaveLength(2);
    expect(deletes(t)).toHaveLength(0);
    expect(result.createdThisAttempt).toBe(true);
    expect(t.stats()).toMatchObject({ live: 1, unnamed: 0 });
  });

  it("cancelled after the Boat was created: the Boat this attempt created is cleaned up", async () => {
    const t = await use();
    const controller = new AbortController();
    t.restart({
      crash: {
        point(name) {
          if (name === "provision.after-remember") controller.abort();
        },
      },
    });
    const error = await rejection(t.lifecycle.provision("bot-1", { signal: controller.signal }));
    expect(error.code).toBe("cancelled");
    expect(t.stats()).toMatchObject({ createsCommitted: 1, live: 0 });
    expect(t.createFile()?.requests).toEqual([]);
  });
});
