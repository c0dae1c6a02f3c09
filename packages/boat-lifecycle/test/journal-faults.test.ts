import { afterEach, describe, expect, it } from "vitest";
import { DELETE_IN_FLIGHT_MS } from "../src/index.js";
import { faultyFs, type Harness, harness, rejection } from "./helpers.js";

/**
 * A journal write that fails (EIO on the atomic rename) in the middle of a flow: the caller gets the
 * journal's own 503 words, nothing is half-written, and the flow stays recoverable without a second Boat
 * or a lost fence.
 */

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

const CREATE = "box-create-requests.json";
const DELETE = "box-delete-requests.json";

describe("journal write failures inside the flows", () => {
  it("resolve cannot be written: the Boat this attempt created is cleaned up, the journal's message surfaces", async () => {
    const fs = faultyFs();
    const t = await harness({ fs: fs.ops });
    h = t;
    t.restart({
      crash: {
        point(name) {
          if (name === "provision.after-rename") fs.state.failRenameTo = CREATE;
        },
      },
    });
    const error = await rejection(t.lifecycle.provision("bot-1"));
    expect(fs.state.failures).toBe(1);
    expect(error).toMatchObject({ code: "recovery_paused", status: 503 });
    expect(error.message).toContain("Cloud computer creation is paused because its recovery state is");
    // Cleanup proved the deletion and retired everything.
    expect(t.stats()).toMatchObject({ createsCommitted: 1, deletesAccepted: 1, live: 0 });
    expect(t.createFile()?.requests).toEqual([]);
    expect(t.deleteFile()?.records).toEqual([]);
  });

  it("remember cannot be written: the key stays, and the next provision replays the same Boat", async () => {
    const fs = faultyFs();
    const t = await harness({ fs: fs.ops });
    h = t;
    t.restart({
      crash: {
        point(name) {
          if (name === "provision.after-create-response") fs.state.failRenameTo = CREATE;
        },
      },
    });
    const error = await rejection(t.lifecycle.provision("bot-1"));
    expect(error).toMatchObject({ code: "recovery_paused", status: 503 });
    const rows = t.createFile()?.requests ?? [];
    expect(rows).toHaveLength(1);
    expect(rows[0]?.boxId).toBeUndefined();
    t.restart();
    const result = await t.lifecycle.provision("bot-1");
    expect(result.createdThisAttempt).toBe(false);
    expect(t.stats()).toMatchObject({ createsCommitted: 1, live: 1, unnamed: 0 });
  });

  it("the receipt cannot be journaled: the fence stays prepared; the retry gets the same operation back", async () => {
    const fs = faultyFs();
    const t = await harness({ fs: fs.ops, sim: { deletionPolls: 3 } });
    h = t;
    const { boxId, name } = await t.lifecycle.provision("bot-1");
    t.restart({
      crash: {
        point(point) {
          if (point === "delete.after-delete-response") fs.state.failRenameTo = DELETE;
        },
      },
    });
    const error = await rejection(t.lifecycle.deleteBoat({ boxId, confirmName: name, ownerBotId: "bot-1" }));
    expect(error).toMatchObject({ code: "recovery_paused", status: 503 });
    expect(error.message).toContain("Cloud computer deletion is paused");
    expect(t.deleteFile()?.records).toEqual([expect.objectContaining({ boxId, phase: "prepared" })]);
    t.restart();
    t.clock.offsetMs += DELETE_IN_FLIGHT_MS; // past the in-flight window: the explicit retry may re-send DELETE
    expect(await t.lifecycle.deleteBoat({ boxId, confirmName: name, ownerBotId: "bot-1" })).toEqual({
      ok: true,
    });
    expect(t.stats()).toMatchObject({ deletesAccepted: 1, deleteRequests: 2, live: 0 });
  });

  it("finish order: the create row is retired first; if that write fails the fence still stands", async () => {
    const fs = faultyFs();
    const t = await harness({ fs: fs.ops });
    h = t;
    const { boxId, name } = await t.lifecycle.provision("bot-1");
    fs.state.failRenameTo = CREATE; // the first create-journal write of the deletion: retiring the row
    const error = await rejection(t.lifecycle.deleteBoat({ boxId, confirmName: name, ownerBotId: "bot-1" }));
    expect(error.code).toBe("recovery_paused");
    expect(t.stats().live).toBe(0);
    // The Boat is gone, but neither record was dropped out of order: the fence keeps the bot from
    // provisioning until a reconcile proves the absence again.
    expect(t.deleteFile()?.records).toEqual([expect.objectContaining({ boxId })]);
    expect(t.createFile()?.requests).toEqual([expect.objectContaining({ boxId })]);
    expect((await rejection(t.lifecycle.findBoat("bot-1"))).code).toBe("computer_deleting");
    expect(await t.lifecycle.reconcileDeletion(boxId)).toBe("confirmed");
    expect(t.deleteFile()?.records).toEqual([]);
    expect(t.createFile()?.requests).toEqual([]);
  });
});
