import { afterEach, describe, expect, it } from "vitest";
import { DELETE_IN_FLIGHT_MS, LIFECYCLE_MESSAGES } from "../src/index.js";
import {
  createOutside,
  deletes,
  type Harness,
  harness,
  polls,
  posts,
  rejection,
  setBusy,
} from "./helpers.js";

let h: Harness | undefined;
const use = async (options?: Parameters<typeof harness>[0]) => {
  h = await harness(options);
  return h;
};
afterEach(async () => {
  await h?.close();
  h = undefined;
});

async function provisioned(t: Harness, botId = "bot-1") {
  const result = await t.lifecycle.provision(botId);
  t.wire.length = 0;
  return result;
}

describe("deleteBoat: fenced, confirmed, target-bound", () => {
  it("confirm header equals the id; pending → processing → completed in 2 polls; both journals retired", async () => {
    const t = await use();
    const { boxId, name } = await provisioned(t);
    expect(await t.lifecycle.deleteBoat({ boxId, confirmName: name, ownerBotId: "bot-1" })).toEqual({
      ok: true,
    });
    expect(deletes(t)).toEqual([
      expect.objectContaining({ path: `/sandboxes/${boxId}`, confirmDelete: boxId }),
    ]);
    expect(polls(t)).toHaveLength(2);
    expect(t.createFile()?.requests).toEqual([]);
    expect(t.deleteFile()?.records).toEqual([]);
    expect(t.stats()).toMatchObject({ live: 0, deletesAccepted: 1, deleteRequests: 1 });
    // The next findBoat lists (no fence) and finds nothing.
    expect(await t.lifecycle.findBoat("bot-1")).toBeNull();
  });

  it("the fence is durable before DELETE leaves", async () => {
    const t = await use();
    const { boxId, name } = await provisioned(t);
    let checked = false;
    t.restart({
      crash: {
        point(point) {
          if (point === "delete.after-prepare") {
            expect(deletes(t)).toHaveLength(0);
            expect(t.deleteFile()?.records).toEqual([
              expect.objectContaining({ boxId, name, ownerBotId: "bot-1", phase: "prepared" }),
            ]);
            checked = true;
          }
        },
      },
    });
    await t.lifecycle.deleteBoat({ boxId, confirmName: name, ownerBotId: "bot-1" });
    expect(checked).toBe(true);
  });

  it("needs the fresh exact name: a stale confirmation sends no DELETE", async () => {
    const t = await use();
    const { boxId } = await provisioned(t);
    const error = await rejection(
      t.lifecycle.deleteBoat({ boxId, confirmName: "ogb-old-name", ownerBotId: "bot-1" }),
    );
    expect(error).toMatchObject({
      code: "confirmation_mismatch",
      status: 409,
      message: LIFECYCLE_MESSAGES.confirmationMismatch,
    });
    expect(deletes(t)).toHaveLength(0);
    expect(t.deleteFile()).toBeNull();
  });

  it("a Boat renamed behind our back needs the new name", async () => {
    const t = await use();
    const { boxId, name } = await provisioned(t);
    await t.outside.renameSandbox(boxId, "renamed-by-hand");
    const error = await rejection(t.lifecycle.deleteBoat({ boxId, confirmName: name, ownerBotId: "bot-1" }));
    expect(error.code).toBe("confirmation_mismatch");
    expect(
      await t.lifecycle.deleteBoat({ boxId, confirmName: "renamed-by-hand", ownerBotId: "bot-1" }),
    ).toEqual({
      ok: true,
    });
  });

  it("503 refusal keeps the fence; the retry confirms with one accepted operation", async () => {
    const t = await use();
    const { boxId, name } = await provisioned(t);
    await t.faults({ method: "DELETE", path: "^/sandboxes/", action: "fail-before", status: 503 });
    const error = await rejection(t.lifecycle.deleteBoat({ boxId, confirmName: name, ownerBotId: "bot-1" }));
    expect(error).toMatchObject({ code: "provider_unavailable", status: 502 });
    expect(error.message).toMatch(
      /^boat delete failed: .*The computer was kept fenced; retry Delete to reconcile it$/,
    );
    expect(t.deleteFile()?.records).toEqual([expect.objectContaining({ boxId, phase: "prepared" })]);
    expect(await t.lifecycle.findBoat("bot-1").catch((e: { code: string }) => e.code)).toBe(
      "computer_deleting",
    );
    t.clock.offsetMs += DELETE_IN_FLIGHT_MS; // past the in-flight window: the explicit retry may re-send DELETE
    expect(await t.lifecycle.deleteBoat({ boxId, confirmName: name, ownerBotId: "bot-1" })).toEqual({
      ok: true,
    });
    expect(t.stats()).toMatchObject({ deletesAccepted: 1, live: 0 });
  });

  it("busy Boat (409 sandbox_busy): 'boat delete failed: …', fence blocked, Boat untouched; an explicit retry works", async () => {
    const t = await use();
    const { boxId, name } = await provisioned(t);
    await setBusy(t, boxId, true);
    const error = await rejection(t.lifecycle.deleteBoat({ boxId, confirmName: name, ownerBotId: "bot-1" }));
    expect(error).toMatchObject({ code: "provider_refused", status: 409 });
    expect(error.message.startsWith("boat delete failed: ")).toBe(true);
    expect(t.deleteFile()?.records).toEqual([
      expect.objectContaining({ boxId, phase: "blocked", status: "blocked" }),
    ]);
    expect(t.stats()).toMatchObject({ live: 1, deletesAccepted: 0 });
    await setBusy(t, boxId, false);
    expect(await t.lifecycle.deleteBoat({ boxId, confirmName: name, ownerBotId: "bot-1" })).toEqual({
      ok: true,
    });
  });

  it("blocked operation: 409 'deletion operation is blocked', the receipt is kept", async () => {
    const t = await use();
    const { boxId, name } = await provisioned(t);
    await t.faults({ action: "block-deletion" });
    const error = await rejection(t.lifecycle.deleteBoat({ boxId, confirmName: name, ownerBotId: "bot-1" }));
    expect(error).toMatchObject({
      code: "deletion_blocked",
      status: 409,
      message: LIFECYCLE_MESSAGES.deletionBlocked(boxId),
    });
    expect(error.message).toContain("deletion operation is blocked");
    expect(t.deleteFile()?.records).toEqual([
      expect.objectContaining({
        boxId,
        phase: "blocked",
        status: "blocked",
        operationId: expect.stringMatching(/^bdop_/),
      }),
    ]);
    expect(await t.lifecycle.reconcileDeletion(boxId)).toBe("blocked");
  });

  it("pending: {ok, pending}; a second delete sends no DELETE; a later direct absence retires everything", async () => {
    const t = await use({ sim: { deletionPolls: 12 } });
    const { boxId, name } = await provisioned(t);
    expect(await t.lifecycle.deleteBoat({ boxId, confirmName: name, ownerBotId: "bot-1" })).toEqual({
      ok: true,
      pending: true,
    });
    expect(t.deleteFile()?.records).toEqual([
      expect.objectContaining({ boxId, phase: "accepted", status: "processing" }),
    ]);
    expect(await t.lifecycle.deleteBoat({ boxId, confirmName: name, ownerBotId: "bot-1" })).toEqual({
      ok: true,
      pending: true,
    });
    expect(deletes(t)).toHaveLength(1);
    expect(t.stats()).toMatchObject({ deleteRequests: 1, deletesAccepted: 1 });
    expect(await t.lifecycle.reconcileDeletion(boxId)).toBe("pending");
    // The operation finishes at boat.dev; the next reconcile proves it.
    for (let i = 0; i < 20 && (await t.lifecycle.reconcileDeletion(boxId)) !== "confirmed"; i += 1) {}
    expect(t.deleteFile()?.records).toEqual([]);
    expect(t.createFile()?.requests).toEqual([]);
  });

  it("direct read 503 after polling: still pending, fence kept", async () => {
    const t = await use({ sim: { deletionPolls: 100 } });
    const { boxId, name } = await provisioned(t);
    await t.faults({
      method: "GET",
      path: "^/deletion-operations/",
      action: "fail-before",
      status: 503,
      times: 6,
    });
    // The revalidation read before DELETE works; every read after it answers 503.
    let reads = 0;
    t.tamper((request, response) => {
      if (request.method === "GET" && request.path.startsWith("/sandboxes/bx_") && ++reads > 1) {
        return new Response(
          JSON.stringify({ ok: false, error: { code: "service_unavailable", message: "down", status: 503 } }),
          { status: 503, headers: { "content-type": "application/json" } },
        );
      }
      return response;
    });
    expect(await t.lifecycle.deleteBoat({ boxId, confirmName: name, ownerBotId: "bot-1" })).toEqual({
      ok: true,
      pending: true,
    });
    expect(reads).toBe(2);
    // A failing poll stops polling (never proof either way); the direct read decides.
    expect(polls(t)).toHaveLength(1);
    expect(t.deleteFile()?.records).toEqual([
      expect.objectContaining({ boxId, phase: "accepted", status: "pending" }),
    ]);
    expect(t.createFile()?.requests).toHaveLength(1);
  });

  it("malformed receipt: 'invalid deletion receipt', fence kept", async () => {
    const t = await use();
    const { boxId, name } = await provisioned(t);
    t.tamper(async (request, response) => {
      if (request.method !== "DELETE") return response;
      const body = (await response.json()) as { operation: Record<string, unknown> };
      body.operation.targetId = "bx_22222222";
      return new Response(JSON.stringify(body), {
        status: response.status,
        headers: { "content-type": "application/json" },
      });
    });
    const error = await rejection(t.lifecycle.deleteBoat({ boxId, confirmName: name, ownerBotId: "bot-1" }));
    expect(error).toMatchObject({
      code: "invalid_receipt",
      status: 503,
      message: LIFECYCLE_MESSAGES.invalidReceipt(boxId),
    });
    expect(t.deleteFile()?.records).toEqual([expect.objectContaining({ boxId, phase: "prepared" })]);
  });

  it("DELETE answered 404: the Boat is gone, both journals retired", async () => {
    const t = await use();
    const { boxId, name } = await provisioned(t);
    await t.faults({
      method: "DELETE",
      path: "^/sandboxes/",
      action: "fail-before",
      status: 404,
      code: "not_found",
    });
    expect(await t.lifecycle.deleteBoat({ boxId, confirmName: name, ownerBotId: "bot-1" })).toEqual({
      ok: true,
    });
    expect(t.createFile()?.requests).toEqual([]);
    expect(t.deleteFile()?.records).toEqual([]);
  });

  it("a proxy's envelope-less 404 is no proof the Boat is gone: 502, nothing retired, no DELETE", async () => {
    const t = await use();
    const { boxId, name } = await provisioned(t);
    const rows = t.createFile()?.requests;
    t.tamper((request, response) =>
      request.method === "GET" && request.path === `/sandboxes/${boxId}`
        ? new Response("<html><body>404 Not Found</body></html>", {
            status: 404,
            headers: { "content-type": "text/html" },
          })
        : response,
    );
    const error = await rejection(t.lifecycle.deleteBoat({ boxId, confirmName: name, ownerBotId: "bot-1" }));
    expect(error).toMatchObject({ code: "provider_unavailable", status: 502 });
    expect(deletes(t)).toHaveLength(0);
    expect(t.createFile()?.requests).toEqual(rows);
    expect(t.deleteFile()).toBeNull();
    expect(t.stats()).toMatchObject({ live: 1, deleteRequests: 0 });
  });

  it("a foreign Boat is not deletable: no DELETE is sent", async () => {
    const t = await use();
    const foreign = await createOutside(t, "someone-elses-computer");
    t.wire.length = 0;
    const error = await rejection(
      t.lifecycle.deleteBoat({ boxId: foreign, confirmName: "someone-elses-computer", ownerBotId: "bot-1" }),
    );
    expect(error).toMatchObject({ code: "not_found", status: 404 });
    expect(deletes(t)).toHaveLength(0);
    expect(t.stats()).toMatchObject({ deleteRequests: 0, live: 1 });
  });

  it("another bot's Boat is not deletable under this bot", async () => {
    const t = await use();
    const { boxId, name } = await provisioned(t, "bot-a");
    const error = await rejection(t.lifecycle.deleteBoat({ boxId, confirmName: name, ownerBotId: "bot-b" }));
    expect(error.code).toBe("not_found");
    expect(t.stats()).toMatchObject({ deleteRequests: 0 });
  });

  it("a Boat already gone: {ok}, journals retired, no DELETE", async () => {
    const t = await use();
    const { boxId, name } = await provisioned(t);
    const op = await t.outside.deleteSandbox(boxId);
    await t.outside.getDeletionOperation(op.id);
    await t.outside.getDeletionOperation(op.id);
    t.wire.length = 0;
    expect(await t.lifecycle.deleteBoat({ boxId, confirmName: name, ownerBotId: "bot-1" })).toEqual({
      ok: true,
    });
    expect(deletes(t)).toHaveLength(0);
    expect(t.createFile()?.requests).toEqual([]);
  });

  it("deleting an id boat.dev proves absent is idempotent: {ok}, no DELETE sent", async () => {
    const t = await use();
    expect(
      await t.lifecycle.deleteBoat({ boxId: "bx_22222222", confirmName: "whatever", ownerBotId: "bot-1" }),
    ).toEqual({ ok: true });
    expect(deletes(t)).toHaveLength(0);
    expect(t.stats().deleteRequests).toBe(0);
  });

  it("a stalled revalidation read is bounded by the client timeout: 503, nothing sent", async () => {
    const t = await use({ timeoutMs: 400 });
    const { boxId, name } = await provisioned(t);
    await t.faults({ method: "GET", path: "^/sandboxes/bx_", action: "delay", ms: 2_000 });
    const error = await rejection(t.lifecycle.deleteBoat({ boxId, confirmName: name, ownerBotId: "bot-1" }));
    expect(error).toMatchObject({ code: "provider_unavailable", status: 503 });
    expect(deletes(t)).toHaveLength(0);
    expect(t.deleteFile()).toBeNull();
  });

  it("a stalled direct read after polling is bounded by the client timeout: still pending, fence kept", async () => {
    const t = await use({ sim: { deletionPolls: 50 }, timeoutMs: 400 });
    const { boxId, name } = await provisioned(t);
    await t.faults({ method: "GET", path: "^/deletion-operations/", action: "fail-before", status: 503 });
    let answered = 0;
    t.tamper(async (request, response) => {
      if (request.method === "GET" && request.path.startsWith("/sandboxes/bx_") && ++answered === 1) {
        // The revalidation read has been answered: stall the next read of the Boat.
        await t.faults({ method: "GET", path: "^/sandboxes/bx_", action: "delay", ms: 2_000 });
      }
      return response;
    });
    expect(await t.lifecycle.deleteBoat({ boxId, confirmName: name, ownerBotId: "bot-1" })).toEqual({
      ok: true,
      pending: true,
    });
    const boatReads = t.wire.filter((r) => r.method === "GET" && r.path.startsWith("/sandboxes/bx_"));
    expect(boatReads).toHaveLength(2);
    expect(answered).toBe(1); // the second read was sent and cut by the timeout
    expect(deletes(t)).toHaveLength(1);
    expect(t.deleteFile()?.records).toEqual([expect.objectContaining({ boxId, phase: "accepted" })]);
  });

  it("the fence blocks provisioning; once proven finished the caller must retry deliberately", async () => {
    const t = await use({ sim: { deletionPolls: 12 } });
    const { boxId, name } = await provisioned(t);
    expect(await t.lifecycle.deleteBoat({ boxId, confirmName: name, ownerBotId: "bot-1" })).toMatchObject({
      pending: true,
    });
    const fenced = await rejection(t.lifecycle.provision("bot-1"));
    expect(fenced).toMatchObject({
      code: "computer_deleting",
      status: 409,
      message: LIFECYCLE_MESSAGES.computerDeleting,
    });
    expect(posts(t)).toHaveLength(0);
    for (let i = 0; i < 20 && (await t.lifecycle.reconcileDeletion(boxId)) !== "confirmed"; i += 1) {}
    // Confirmed by reconcile: no record left, so provisioning proceeds and creates a new Boat.
    const next = await t.lifecycle.provision("bot-1");
    expect(next.boxId).not.toBe(boxId);
    expect(t.stats()).toMatchObject({ createsCommitted: 2, live: 1 });
  });

  it("provision itself proves a finished deletion, then refuses once: previous_deletion_finished", async () => {
    const t = await use({ sim: { deletionPolls: 7 } });
    const { boxId, name } = await provisioned(t);
    expect(await t.lifecycle.deleteBoat({ boxId, confirmName: name, ownerBotId: "bot-1" })).toMatchObject({
      pending: true,
    });
    // Poll 7 completes the operation inside provision's reconcile.
    const finished = await rejection(t.lifecycle.provision("bot-1"));
    expect(finished).toMatchObject({
      code: "previous_deletion_finished",
      status: 409,
      message: LIFECYCLE_MESSAGES.previousDeletionFinished,
    });
    expect(posts(t)).toHaveLength(0);
    await t.lifecycle.provision("bot-1");
    expect(t.stats()).toMatchObject({ createsCommitted: 2, live: 1 });
  });

  it("reconcileDeletion of an unknown id: not_found", async () => {
    const t = await use();
    expect((await rejection(t.lifecycle.reconcileDeletion("bx_22222222"))).code).toBe("not_found");
    expect((await rejection(t.lifecycle.reconcileDeletion("nope"))).code).toBe("invalid_argument");
  });
});
