import { KEY_SAFETY_MARGIN_MS } from "@drydock/boat-create-journal";
import { afterEach, describe, expect, it } from "vitest";
import { recoveryReportSchema } from "../src/index.js";
import { deletes, type Harness, harness, patches, posts } from "./helpers.js";

let h: Harness | undefined;
const use = async (options?: Parameters<typeof harness>[0]) => {
  h = await harness(options);
  return h;
};
afterEach(async () => {
  await h?.close();
  h = undefined;
});

const DAY = 24 * 60 * 60 * 1000;
/** Where a key stops being sent: boat.dev's 24 hours less the create journal's 1-hour safety margin. */
const TRUSTED = DAY - KEY_SAFETY_MARGIN_MS;

describe("recoverAtStartup", () => {
  it("reports unresolved creates with their age against the 24-hour window, and never creates anything", async () => {
    const t = await use();
    await t.faults({ method: "POST", path: "^/sandboxes$", action: "fail-before", status: 503, times: 2 });
    await t.lifecycle.provision("bot-1").catch(() => undefined); // key-only row
    await t.faults({ method: "POST", path: "^/sandboxes$", action: "drop-after", times: 2 });
    await t.lifecycle.provision("bot-2").catch(() => undefined); // key-only row, Boat committed
    await t.lifecycle.provision("bot-3"); // resolved: not reported
    t.clock.offsetMs = TRUSTED - 60_000;
    t.wire.length = 0;

    const report = await t.restart().recoverAtStartup();
    expect(recoveryReportSchema.safeParse(report).success).toBe(true);
    expect(report.deletions).toEqual([]);
    expect(report.journalErrors).toEqual([]);
    expect(report.unresolvedCreates.map((c) => c.botId).sort()).toEqual(["bot-1", "bot-2"]);
    for (const entry of report.unresolvedCreates) {
      expect(entry.expired).toBe(false);
      expect(entry.ageMs).toBeGreaterThanOrEqual(TRUSTED - 60_000);
      expect(entry.retryWindowLeftMs).toBeLessThanOrEqual(60_000);
      expect(entry.retryWindowLeftMs).toBeGreaterThan(0);
      expect(entry.boxId).toBeUndefined();
    }
    expect(JSON.stringify(report)).not.toMatch(/[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}/); // no key leaks
    expect(posts(t)).toHaveLength(0);
    expect(patches(t)).toHaveLength(0);
    expect(deletes(t)).toHaveLength(0);

    // From the deadline on, the key is never sent again: expired, although boat.dev still keeps it an hour.
    t.clock.offsetMs = TRUSTED;
    const atDeadline = await t.lifecycle.recoverAtStartup();
    expect(atDeadline.unresolvedCreates).toHaveLength(2);
    expect(atDeadline.unresolvedCreates.every((c) => c.expired && c.retryWindowLeftMs === 0)).toBe(true);

    t.clock.offsetMs = DAY + 1;
    const later = await t.lifecycle.recoverAtStartup();
    expect(later.unresolvedCreates.every((c) => c.expired && c.retryWindowLeftMs === 0)).toBe(true);
  });

  it("a remembered but unresolved Boat is never reported expired: it needs no key", async () => {
    const t = await use();
    // The process dies right after boat.dev's answer was remembered, before the rename.
    t.restart({
      crash: {
        point(name) {
          if (name === "provision.after-remember") throw new Error("killed");
        },
      },
    });
    await expect(t.lifecycle.provision("bot-1")).rejects.toThrow("killed");
    t.clock.offsetMs = DAY + 1;
    const report = await t.restart().recoverAtStartup();
    expect(report.unresolvedCreates).toEqual([
      expect.objectContaining({ botId: "bot-1", boxId: expect.stringMatching(/^bx_/), expired: false }),
    ]);
    // And it is indeed finished without its key: a direct read, a rename, no POST.
    await t.lifecycle.provision("bot-1");
    expect(posts(t)).toHaveLength(1);
  });

  it("polls accepted deletions, retires the ones proven finished, sends no DELETE", async () => {
    const t = await use({ sim: { deletionPolls: 7 } }); // 6 polls in deleteBoat, the 7th at startup
    const a = await t.lifecycle.provision("bot-a");
    const b = await t.lifecycle.provision("bot-b");
    expect(
      await t.lifecycle.deleteBoat({ boxId: a.boxId, confirmName: a.name, ownerBotId: "bot-a" }),
    ).toMatchObject({
      pending: true,
    });
    await t.faults({ action: "block-deletion" });
    await t.lifecycle
      .deleteBoat({ boxId: b.boxId, confirmName: b.name, ownerBotId: "bot-b" })
      .catch(() => undefined);
    t.wire.length = 0;
    const report = await t.restart().recoverAtStartup();
    expect(report.deletions).toEqual(
      expect.arrayContaining([
        { boxId: a.boxId, ownerBotId: "bot-a", phaseBefore: "accepted", outcome: "confirmed" },
        expect.objectContaining({
          boxId: b.boxId,
          ownerBotId: "bot-b",
          outcome: expect.stringMatching(/pending|blocked/),
        }),
      ]),
    );
    expect(deletes(t)).toHaveLength(0);
    expect(posts(t)).toHaveLength(0);
    expect((t.deleteFile()?.records ?? []).map((r) => r.boxId)).toEqual([b.boxId]);
    expect((t.createFile()?.requests ?? []).map((r) => r.boxId)).toEqual([b.boxId]);
  });

  it("a prepared fence (DELETE maybe never sent) is only reconciled by a direct read, never re-sent", async () => {
    const t = await use();
    const a = await t.lifecycle.provision("bot-a");
    await t.faults({ method: "DELETE", path: "^/sandboxes/", action: "drop-before" });
    await t.lifecycle
      .deleteBoat({ boxId: a.boxId, confirmName: a.name, ownerBotId: "bot-a" })
      .catch(() => undefined);
    t.wire.length = 0;
    const report = await t.restart().recoverAtStartup();
    expect(report.deletions).toEqual([
      { boxId: a.boxId, ownerBotId: "bot-a", phaseBefore: "prepared", outcome: "pending" },
    ]);
    expect(deletes(t)).toHaveLength(0);
  });

  it("an unreadable journal is reported, not repaired, and nothing is sent", async () => {
    const t = await use();
    await t.lifecycle.provision("bot-1");
    const { writeFileSync } = await import("node:fs");
    const { join } = await import("node:path");
    writeFileSync(join(t.dataDir, "box-delete-requests.json"), "{not json");
    t.wire.length = 0;
    const report = await t.restart().recoverAtStartup();
    expect(report.journalErrors).toHaveLength(1);
    expect(report.journalErrors[0]).toContain("Cloud computer deletion is paused");
    expect(t.wire).toHaveLength(0);
    const { readFileSync } = await import("node:fs");
    expect(readFileSync(join(t.dataDir, "box-delete-requests.json"), "utf8")).toBe("{not json");
    // Provisioning refuses with the journal's own words.
    const error = await t.lifecycle.provision("bot-2").catch((e: { code: string; message: string }) => e);
    expect(error).toMatchObject({ code: "recovery_paused", status: 503 });
  });
});
