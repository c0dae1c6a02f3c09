import { randomUUID } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import * as facts from "@drydock/facts";
import { afterEach, describe, expect, it } from "vitest";
import {
  BOAT_DELETING,
  BOAT_DELETION_FINISHED,
  type BoatDeleteJournal,
  BoatDeleteJournalError,
  DELETE_JOURNAL_FILE,
  DELETE_JOURNAL_LOCK_FILE,
  isBoatDeleteJournalError,
  isJournalStateError,
  JournalStateError,
  OPERATION_ID,
  openBoatDeleteJournal,
} from "../src/index.js";
import { BOAT_ID, BOT_ID } from "../src/schema.js";
import { deadPid, expectPaused, refusal, tempDataDir } from "./helpers.js";

const BOX = "bx_abcdefgh";
const OTHER_BOX = "bx_zzzzzzzz";
const OP = `bdop_${"0123456789abcdef".repeat(2)}`;
const OP2 = `bdop_${"f".repeat(32)}`;
const NAME = "ogb-0123456789ab-bot1-abcdef";
const T0 = 1_767_000_000_000;
const target = { boxId: BOX, name: NAME, ownerBotId: "bot-1" };
const receipt = (over: Record<string, unknown> = {}) => ({
  id: OP,
  kind: "sandbox",
  targetId: BOX,
  status: "pending",
  stage: "removing",
  ...over,
});

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

function setup(options: { now?: () => number; waitMs?: number } = {}) {
  const dir = tempDataDir();
  cleanups.push(dir.cleanup);
  const file = join(dir.dataDir, DELETE_JOURNAL_FILE);
  const lock = join(dir.dataDir, DELETE_JOURNAL_LOCK_FILE);
  // Each open is a "restart": a new journal object with no memory of the previous one.
  const open = (): BoatDeleteJournal =>
    openBoatDeleteJournal({
      dataDir: dir.dataDir,
      ...(options.now ? { now: options.now } : {}),
      lock: { waitMs: options.waitMs ?? 2_000 },
    });
  return { ...dir, file, lock, open, text: () => readFileSync(file, "utf8") };
}

describe("prepareBoatDeletion", () => {
  it("survives a restart; the file is exactly { version, records }, 0600 in a 0700 directory, without secrets", async () => {
    const s = setup({ now: () => T0 });
    const prepared = await s.open().prepareBoatDeletion({ ...target, token: "box_secret" } as never);
    expect(prepared).toEqual({ ...target, phase: "prepared", requestedAt: T0, updatedAt: T0 });
    expect(await s.open().getBoatDeletion(BOX)).toEqual(prepared);
    expect(s.text()).toBe(`${JSON.stringify({ version: 1, records: [prepared] }, null, 2)}\n`);
    expect(s.text()).not.toContain("secret");
    expect(statSync(s.file).mode & 0o777).toBe(0o600);
    expect(statSync(s.dataDir).mode & 0o777).toBe(0o700);
    expect(readdirSync(s.dataDir)).toEqual([DELETE_JOURNAL_FILE]);
  });

  it("returns an existing prepared or accepted fence unchanged, so no second DELETE is sent blind", async () => {
    let now = T0;
    const s = setup({ now: () => now });
    const journal = s.open();
    const prepared = await journal.prepareBoatDeletion(target);
    now += 1_000;
    expect(await journal.prepareBoatDeletion(target)).toEqual(prepared);
    const accepted = await journal.markBoatDeletionAccepted(BOX, receipt());
    const before = s.text();
    expect(await journal.prepareBoatDeletion(target)).toEqual(accepted);
    expect(s.text()).toBe(before);
  });

  it("refuses a remembered target whose name or owner changed", async () => {
    const s = setup();
    const journal = s.open();
    await journal.prepareBoatDeletion(target);
    await expectPaused(
      journal.prepareBoatDeletion({ ...target, name: "renamed" }),
      "conflicted with the remembered deletion target",
    );
    await expectPaused(
      journal.prepareBoatDeletion({ ...target, ownerBotId: "bot-2" }),
      "conflicted with the remembered deletion target",
    );
  });
});

describe("prepareBoatDeletionOnce", () => {
  it("says whether this very call wrote the prepared fence: none or blocked before → true; one standing → false", async () => {
    let now = T0;
    const s = setup({ now: () => now });
    const journal = s.open();
    const first = await journal.prepareBoatDeletionOnce(target);
    expect(first).toEqual({
      record: { ...target, phase: "prepared", requestedAt: T0, updatedAt: T0 },
      prepared: true,
    });
    now += 1_000;
    // Another process's call (a new journal object) finds it standing and writes nothing.
    const before = s.text();
    expect(await s.open().prepareBoatDeletionOnce(target)).toEqual({ record: first.record, prepared: false });
    expect(s.text()).toBe(before);
    const accepted = await journal.markBoatDeletionAccepted(BOX, receipt());
    expect(await journal.prepareBoatDeletionOnce(target)).toEqual({ record: accepted, prepared: false });
    await journal.markBoatDeletionBlocked(BOX, receipt({ status: "blocked" }));
    now += 1_000;
    const again = await journal.prepareBoatDeletionOnce(target);
    expect(again.prepared).toBe(true);
    expect(again.record).toMatchObject({ phase: "prepared", requestedAt: T0 + 2_000 });
  });
});

describe("restampBoatDeletion", () => {
  it("compare-and-set of a prepared fence's updatedAt: of two callers holding the same copy, one wins", async () => {
    let now = T0;
    const s = setup({ now: () => now });
    const read = await s.open().prepareBoatDeletion(target);
    const before = s.text();
    now += 40_000;
    const [a, b] = await Promise.all([
      s.open().restampBoatDeletion(BOX, read),
      s.open().restampBoatDeletion(BOX, read),
    ]);
    const stamped = { ...read, updatedAt: T0 + 40_000 };
    expect([a, b].filter((r) => r.restamped)).toEqual([{ record: stamped, restamped: true }]);
    expect([a, b].filter((r) => !r.restamped)).toEqual([{ record: stamped, restamped: false }]);
    // Same file format: only updatedAt changed.
    expect(s.text()).toBe(before.replace(`"updatedAt": ${T0}`, `"updatedAt": ${T0 + 40_000}`));
    expect(await s.open().getBoatDeletion(BOX)).toEqual(stamped);
  });

  it("writes nothing for an accepted, blocked or retired fence; refuses a fence of another Boat", async () => {
    const s = setup({ now: () => T0 });
    const journal = s.open();
    const read = await journal.prepareBoatDeletion(target);
    const accepted = await journal.markBoatDeletionAccepted(BOX, receipt());
    expect(await journal.restampBoatDeletion(BOX, accepted)).toEqual({ record: accepted, restamped: false });
    const blocked = await journal.markBoatDeletionBlocked(BOX);
    expect(await journal.restampBoatDeletion(BOX, blocked)).toEqual({ record: blocked, restamped: false });
    await journal.retireBoatDeletion(BOX);
    expect(await journal.restampBoatDeletion(BOX, read)).toEqual({ record: null, restamped: false });
    await expect(journal.restampBoatDeletion(OTHER_BOX, read)).rejects.toMatchObject({
      code: "INVALID_ARGUMENT",
      message: "invalid or mismatched cloud computer deletion fence",
    });
    await expect(journal.restampBoatDeletion(BOX, { boxId: BOX } as never)).rejects.toMatchObject({
      code: "INVALID_ARGUMENT",
    });
  });
});

describe("markBoatDeletionAccepted", () => {
  it("moves pending -> processing -> completed, ignores a stale pending, and snapshots are copies", async () => {
    let now = T0;
    const s = setup({ now: () => now });
    const journal = s.open();
    await journal.prepareBoatDeletion(target);
    now += 10;
    expect(await journal.markBoatDeletionAccepted(BOX, receipt())).toMatchObject({
      phase: "accepted",
      operationId: OP,
      status: "pending",
      updatedAt: T0 + 10,
    });
    now += 10;
    const processing = await journal.markBoatDeletionAccepted(BOX, receipt({ status: "processing" }));
    expect(processing.status).toBe("processing");
    now += 10;
    expect(await journal.markBoatDeletionAccepted(BOX, receipt({ status: "pending" }))).toEqual(processing);
    expect((await s.open().getBoatDeletion(BOX))?.status).toBe("processing");
    expect((await journal.markBoatDeletionAccepted(BOX, receipt({ status: "completed" }))).status).toBe(
      "completed",
    );
    expect((await journal.markBoatDeletionAccepted(BOX, receipt({ status: "processing" }))).status).toBe(
      "completed",
    );

    const snapshot = await journal.boatDeletionSnapshot();
    snapshot[0]!.status = "pending";
    expect((await journal.boatDeletionSnapshot())[0]!.status).toBe("completed");
    await journal.retireBoatDeletion(BOX);
    await journal.retireBoatDeletion(BOX);
    expect(await journal.boatDeletionSnapshot()).toEqual([]);
    expect(JSON.parse(s.text())).toEqual({ version: 1, records: [] });
  });

  it("keeps updatedAt from moving backwards when the clock does", async () => {
    let now = T0 + 1_000;
    const s = setup({ now: () => now });
    const journal = s.open();
    await journal.prepareBoatDeletion(target);
    now = T0;
    expect((await journal.markBoatDeletionAccepted(BOX, receipt())).updatedAt).toBe(T0 + 1_000);
  });

  it("refuses receipts not bound to this target: other targetId, kind, non-bdop id, unknown status", async () => {
    const s = setup();
    const journal = s.open();
    await journal.prepareBoatDeletion(target);
    const before = s.text();
    for (const bad of [
      receipt({ targetId: OTHER_BOX }),
      receipt({ kind: "box" }),
      receipt({ id: "op_123" }),
      receipt({ id: `bdop_${"A".repeat(32)}` }),
      receipt({ status: "done" }),
      { ...receipt(), targetId: undefined },
      null,
      "bdop",
    ]) {
      const error = await refusal(journal.markBoatDeletionAccepted(BOX, bad));
      expect({ code: error.code, status: error.status, message: error.message }).toEqual({
        code: "INVALID_ARGUMENT",
        status: 400,
        message: "invalid or mismatched cloud computer deletion operation",
      });
    }
    const blocked = await refusal(journal.markBoatDeletionAccepted(BOX, receipt({ status: "blocked" })));
    expect(blocked.message).toBe("blocked cloud computer deletion must use markBoatDeletionBlocked");
    expect(s.text()).toBe(before);
  });

  it("refuses a second operation id and an operation id already bound to another Boat", async () => {
    const s = setup();
    const journal = s.open();
    await journal.prepareBoatDeletion(target);
    await journal.prepareBoatDeletion({ ...target, boxId: OTHER_BOX });
    await journal.markBoatDeletionAccepted(BOX, receipt());
    await expectPaused(
      journal.markBoatDeletionAccepted(BOX, receipt({ id: OP2 })),
      "conflicted with another deletion operation",
    );
    await expectPaused(
      journal.markBoatDeletionAccepted(OTHER_BOX, receipt({ targetId: OTHER_BOX })),
      "conflicted with another deletion operation",
    );
    await expectPaused(
      journal.markBoatDeletionBlocked(OTHER_BOX, receipt({ targetId: OTHER_BOX, status: "blocked" })),
      "conflicted with another deletion operation",
    );
  });

  it("refuses a receipt for a Boat without a fence as out of date", async () => {
    const s = setup();
    await expectPaused(s.open().markBoatDeletionAccepted(BOX, receipt()), "out of date");
    await expectPaused(s.open().markBoatDeletionBlocked(BOX), "out of date");
  });
});

describe("markBoatDeletionBlocked", () => {
  it("keeps the fence; only an explicit re-prepare yields a clean prepared record", async () => {
    let now = T0;
    const s = setup({ now: () => now });
    const journal = s.open();
    await journal.prepareBoatDeletion(target);
    await journal.markBoatDeletionAccepted(BOX, receipt());
    now += 5;
    const blocked = await journal.markBoatDeletionBlocked(BOX, receipt({ status: "blocked" }));
    expect(blocked).toMatchObject({
      phase: "blocked",
      operationId: OP,
      status: "blocked",
      updatedAt: T0 + 5,
    });
    expect(await journal.hasPendingBoatDeletionForBot("bot-1")).toBe(true);
    // A late receipt does not revive a blocked fence.
    await expectPaused(
      journal.markBoatDeletionAccepted(BOX, receipt({ status: "processing" })),
      "out of date",
    );
    now += 5;
    expect(await journal.prepareBoatDeletion(target)).toEqual({
      ...target,
      phase: "prepared",
      requestedAt: T0 + 10,
      updatedAt: T0 + 10,
    });
  });

  it("blocks bare when DELETE was refused, and refuses a receipt that is not blocked", async () => {
    const s = setup({ now: () => T0 });
    const journal = s.open();
    await journal.prepareBoatDeletion(target);
    const error = await refusal(journal.markBoatDeletionBlocked(BOX, receipt({ status: "pending" })));
    expect(error.code).toBe("INVALID_ARGUMENT");
    const bare = await journal.markBoatDeletionBlocked(BOX);
    expect(bare).toEqual({ ...target, phase: "blocked", requestedAt: T0, updatedAt: T0, status: "blocked" });
    expect("operationId" in bare).toBe(false);
  });
});

describe("a completed receipt is final", () => {
  it("markBoatDeletionBlocked (bare or with its receipt) leaves a completed fence unchanged on disk", async () => {
    let now = T0;
    const s = setup({ now: () => now });
    const journal = s.open();
    await journal.prepareBoatDeletion(target);
    const completed = await journal.markBoatDeletionAccepted(BOX, receipt({ status: "completed" }));
    const bytes = s.text();
    now += 5;
    expect(await journal.markBoatDeletionBlocked(BOX)).toEqual(completed);
    expect(await journal.markBoatDeletionBlocked(BOX, receipt({ status: "blocked" }))).toEqual(completed);
    expect(s.text()).toBe(bytes);
    expect(await s.open().getBoatDeletion(BOX)).toMatchObject({ phase: "accepted", status: "completed" });
  });
});

describe("reads", () => {
  it("hasPendingBoatDeletionForBot sees every phase and only that bot; ownerless fences belong to no bot", async () => {
    const s = setup();
    const journal = s.open();
    await journal.prepareBoatDeletion(target);
    await journal.prepareBoatDeletion({ boxId: OTHER_BOX, name: "orphan", ownerBotId: null });
    expect(await journal.hasPendingBoatDeletionForBot("bot-1")).toBe(true);
    expect(await journal.hasPendingBoatDeletionForBot("bot-2")).toBe(false);
    expect((await journal.getBoatDeletion(OTHER_BOX))?.ownerBotId).toBeNull();
    await journal.retireBoatDeletion(BOX);
    expect(await journal.hasPendingBoatDeletionForBot("bot-1")).toBe(false);
  });
});

describe("bad arguments", () => {
  it("invalid id, name or owner are refused with 400 before any file or directory is touched", async () => {
    const s = setup();
    const journal = s.open();
    const cases: [Promise<unknown>, string][] = [
      [
        journal.prepareBoatDeletion({ ...target, boxId: "bx_ABCDEFGH" }),
        "invalid cloud computer id for deletion",
      ],
      [journal.prepareBoatDeletion({ ...target, name: "" }), "invalid cloud computer name for deletion"],
      [journal.prepareBoatDeletion({ ...target, name: "a\nb" }), "invalid cloud computer name for deletion"],
      [
        journal.prepareBoatDeletion({ ...target, name: "n\u0000" }),
        "invalid cloud computer name for deletion",
      ],
      [
        journal.prepareBoatDeletion({ ...target, name: "x".repeat(101) }),
        "invalid cloud computer name for deletion",
      ],
      [
        journal.prepareBoatDeletion({ ...target, ownerBotId: "bot 1" }),
        "invalid cloud computer owner for deletion",
      ],
      [
        journal.prepareBoatDeletion({ ...target, ownerBotId: undefined } as never),
        "invalid cloud computer owner for deletion",
      ],
      [journal.prepareBoatDeletion(null as never), "invalid cloud computer id for deletion"],
      [journal.markBoatDeletionAccepted("nope", receipt()), "invalid cloud computer id for deletion"],
      [journal.markBoatDeletionBlocked("nope"), "invalid cloud computer id for deletion"],
      [journal.markBoatDeletionBlocked(BOX, null), "invalid or mismatched cloud computer deletion operation"],
      [journal.getBoatDeletion("nope"), "invalid cloud computer id for deletion"],
      [journal.hasPendingBoatDeletionForBot("bot/1"), "invalid bot id for cloud computer deletion"],
      [journal.retireBoatDeletion("bx_1234567"), "invalid deleted cloud computer id"],
    ];
    for (const [promise, message] of cases) {
      const error = await refusal(promise);
      expect(error).toBeInstanceOf(JournalStateError);
      expect({ code: error.code, status: error.status, message: error.message }).toEqual({
        code: "INVALID_ARGUMENT",
        status: 400,
        message,
      });
    }
    expect(existsSync(s.dataDir)).toBe(false);
  });
});

describe("damaged journal files are refused and never rewritten", () => {
  it("a truncated file is unreadable and a duplicate-id file is invalid; bytes stay as they were", async () => {
    const s = setup({ now: () => T0 });
    const journal = s.open();
    await journal.prepareBoatDeletion(target);
    const good = s.text();
    const truncated = good.slice(0, 40);
    writeFileSync(s.file, truncated);
    await expectPaused(journal.boatDeletionSnapshot(), "unreadable");
    await expectPaused(journal.prepareBoatDeletion({ ...target, boxId: OTHER_BOX }), "unreadable");
    expect(s.text()).toBe(truncated);
    const record = JSON.parse(good).records[0];
    const duplicate = `${JSON.stringify({ version: 1, records: [record, record] }, null, 2)}\n`;
    writeFileSync(s.file, duplicate);
    await expectPaused(journal.retireBoatDeletion(BOX), "invalid");
    await expectPaused(journal.hasPendingBoatDeletionForBot("bot-1"), "invalid");
    expect(s.text()).toBe(duplicate);
  });
});

describe("the journal lock", () => {
  const owner = (pid: number) =>
    `${JSON.stringify({ version: 1, pid, token: randomUUID(), createdAt: T0 })}\n`;

  it("retires a stale lock left by an exited process", async () => {
    const s = setup();
    mkdirSync(s.dataDir, { recursive: true, mode: 0o700 });
    writeFileSync(s.lock, owner(deadPid()));
    expect((await s.open().prepareBoatDeletion(target)).phase).toBe("prepared");
    expect(existsSync(s.lock)).toBe(false);
  });

  it("does not overwrite a corrupt lock, and writes no journal", async () => {
    const s = setup();
    mkdirSync(s.dataDir, { recursive: true, mode: 0o700 });
    writeFileSync(s.lock, '{"version":1,"pid":"x"}\n');
    await expectPaused(s.open().prepareBoatDeletion(target), "lock is invalid");
    expect(readFileSync(s.lock, "utf8")).toBe('{"version":1,"pid":"x"}\n');
    expect(existsSync(s.file)).toBe(false);
  });

  it("reports a live holder as 'locked by another drydock process'", async () => {
    const s = setup({ waitMs: 100 });
    mkdirSync(s.dataDir, { recursive: true, mode: 0o700 });
    writeFileSync(s.lock, owner(process.pid));
    await expectPaused(s.open().boatDeletionSnapshot(), "locked by another drydock process");
  });

  it("a cancelled wait for the lock comes back as the journal's own error, for updates and reads alike", async () => {
    const s = setup();
    mkdirSync(s.dataDir, { recursive: true, mode: 0o700 });
    // A live holder (this very process), so the journal must wait, and the wait is cancelled at once.
    writeFileSync(s.lock, owner(process.pid));
    const journal = openBoatDeleteJournal({
      dataDir: s.dataDir,
      lock: { waitMs: 2_000, signal: AbortSignal.abort() },
    });
    for (const call of [journal.prepareBoatDeletion(target), journal.boatDeletionSnapshot()]) {
      const error = await refusal(call);
      expect(error).toBeInstanceOf(BoatDeleteJournalError);
      expect([error.code, error.detail]).toEqual([
        "BOAT_DELETE_PAUSED",
        "locked, and the caller cancelled the wait for it",
      ]);
      expect((error.cause as { code?: unknown }).code).toBe("LOCK_ABORTED");
    }
    expect(existsSync(s.file)).toBe(false);
  });

  it("peekBoatDeletions answers while a live process holds the lock: frozen fences, one array per unchanged file", async () => {
    const s = setup({ waitMs: 100 });
    const writer = s.open();
    await writer.prepareBoatDeletion(target);
    const viewer = s.open();
    const lockBytes = owner(process.pid);
    writeFileSync(s.lock, lockBytes);
    let fences: Awaited<ReturnType<BoatDeleteJournal["peekBoatDeletions"]>>;
    try {
      fences = await viewer.peekBoatDeletions();
      await expectPaused(writer.boatDeletionSnapshot(), "locked by another drydock process");
      expect(fences).toEqual(JSON.parse(s.text()).records);
      expect(Object.isFrozen(fences) && Object.isFrozen(fences[0])).toBe(true);
      expect(await viewer.peekBoatDeletions()).toBe(fences);
      expect(readFileSync(s.lock, "utf8")).toBe(lockBytes);
    } finally {
      rmSync(s.lock);
    }
    await writer.retireBoatDeletion(BOX);
    expect(await viewer.peekBoatDeletions()).toEqual([]);
    writeFileSync(s.file, "[]");
    await expectPaused(viewer.peekBoatDeletions(), "invalid");
    expect(readFileSync(s.file, "utf8")).toBe("[]");
  });
});

describe("exports", () => {
  it("names the error BoatDeleteJournalError; JournalStateError and isJournalStateError are the same, deprecated", async () => {
    const s = setup({ now: () => T0 });
    mkdirSync(s.dataDir, { recursive: true });
    writeFileSync(s.file, "[]");
    const error = await refusal(s.open().boatDeletionSnapshot());
    expect(error).toBeInstanceOf(BoatDeleteJournalError);
    expect(error.name).toBe("BoatDeleteJournalError");
    expect([error.code, error.status, error.detail]).toEqual(["BOAT_DELETE_PAUSED", 503, "invalid"]);
    expect(JournalStateError).toBe(BoatDeleteJournalError);
    expect(isJournalStateError).toBe(isBoatDeleteJournalError);
    // The guard recognises a copy from another instance of this package by its registered marker alone.
    expect(
      isBoatDeleteJournalError({ [Symbol.for("@drydock/boat-delete-journal/JournalStateError")]: true }),
    ).toBe(true);
    expect(
      isBoatDeleteJournalError({ [Symbol.for("@drydock/boat-create-journal/JournalStateError")]: true }),
    ).toBe(false);
    expect(isBoatDeleteJournalError(new Error("x"))).toBe(false);
  });

  it("names the lifecycle refusal codes and the operation id pattern of the contract", () => {
    expect(BOAT_DELETING).toBe("computer_deleting");
    expect(BOAT_DELETION_FINISHED).toBe("previous_deletion_finished");
    expect(OPERATION_ID.test(OP)).toBe(true);
    expect(OPERATION_ID.test(`${OP}0`)).toBe(false);
    expect(
      isJournalStateError(new JournalStateError({ code: "INVALID_ARGUMENT", message: "m", detail: "m" })),
    ).toBe(true);
  });

  it("uses the bot and Boat id patterns of @drydock/boat-create-journal exactly", async () => {
    // This package may not depend on the create journal; both take the patterns from @drydock/facts, so
    // they are the very same objects and cannot drift apart.
    const createSchema = await import("../../boat-create-journal/src/schema.js");
    expect(createSchema.BOT_ID).toBe(BOT_ID);
    expect(createSchema.BOAT_ID).toBe(BOAT_ID);
    expect(BOT_ID).toBe(facts.BOT_ID);
    expect(BOAT_ID).toBe(facts.BOAT_ID);
    expect(BOT_ID.toString()).toBe("/^[A-Za-z0-9_-]{1,120}$/");
    expect(BOAT_ID.toString()).toBe("/^bx_[23456789abcdefghjkmnpqrstuvwxyz]{8}$/");
  });
});

describe("a journal written by a newer drydock (a higher version)", () => {
  it("pauses saying to upgrade, never sending a person to repair it, and leaves it as it is", async () => {
    const s = setup({ now: () => T0 });
    await s.open().prepareBoatDeletion(target);
    const newer = s.text().replace('"version": 1', '"version": 3');
    writeFileSync(s.file, newer);
    for (const call of [() => s.open().boatDeletionSnapshot(), () => s.open().prepareBoatDeletion(target)]) {
      const error = await refusal(call());
      expect(error.code).toBe("BOAT_DELETE_PAUSED");
      expect(error.message).toMatch(
        /recovery state is in a newer format \(version 3; this drydock reads version 1\): upgrade this process, and leave the file as it is\.$/,
      );
      expect(error.message).not.toMatch(/repair/);
    }
    expect(s.text()).toBe(newer);
  });
});
