import { mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { DELETE_JOURNAL_FILE, openBoatDeleteJournal } from "../src/index.js";
import { tempDataDir } from "./helpers.js";
import { seedSerialize, seedVerdict } from "./seed-oracle.js";

/**
 * Compatibility with data directories written by the original system: its file is read and continued, and
 * after each drydock write the bytes are exactly what the original would have written for that state.
 */

const T0 = 1_767_000_000_000;
const OP_A = `bdop_${"a".repeat(32)}`;
const OP_B = `bdop_${"b".repeat(32)}`;
const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

function seedDataDir(records: unknown[]) {
  const dir = tempDataDir();
  cleanups.push(dir.cleanup);
  mkdirSync(dir.dataDir, { mode: 0o700 });
  const file = join(dir.dataDir, DELETE_JOURNAL_FILE);
  writeFileSync(file, seedSerialize(records), { mode: 0o600 });
  return { ...dir, file, text: () => readFileSync(file, "utf8") };
}

const preparedA = {
  boxId: "bx_aaaaaaaa",
  name: "ogb-a",
  ownerBotId: "bot-a",
  phase: "prepared",
  requestedAt: T0,
  updatedAt: T0,
};
const acceptedB = {
  boxId: "bx_bbbbbbbb",
  name: "ogb-b",
  ownerBotId: null,
  phase: "accepted",
  requestedAt: T0,
  updatedAt: T0 + 5,
  operationId: OP_B,
  status: "pending",
};
// A bare blocked fence (DELETE refused outright) with a field this version does not know.
const blockedC = {
  boxId: "bx_cccccccc",
  name: "ogb-c",
  ownerBotId: "bot-c",
  phase: "blocked",
  requestedAt: T0,
  updatedAt: T0 + 9,
  note: "kept",
  status: "blocked",
};

describe("a delete journal written by the original system", () => {
  it("is read as it is, without a write", async () => {
    const s = seedDataDir([preparedA, acceptedB, blockedC]);
    const before = s.text();
    const journal = openBoatDeleteJournal({ dataDir: s.dataDir });
    expect(await journal.boatDeletionSnapshot()).toEqual([preparedA, acceptedB, blockedC]);
    expect(
      await journal.prepareBoatDeletion({ boxId: "bx_aaaaaaaa", name: "ogb-a", ownerBotId: "bot-a" }),
    ).toEqual(preparedA);
    expect(await journal.hasPendingBoatDeletionForBot("bot-c")).toBe(true);
    expect(s.text()).toBe(before);
  });

  it("is continued with the exact bytes the original would write at each step", async () => {
    const s = seedDataDir([preparedA, acceptedB, blockedC]);
    const journal = openBoatDeleteJournal({ dataDir: s.dataDir, now: () => T0 + 100 });
    const receipt = {
      id: OP_A,
      kind: "sandbox",
      targetId: "bx_aaaaaaaa",
      status: "processing",
      stage: "removing",
    };
    await journal.markBoatDeletionAccepted("bx_aaaaaaaa", receipt);
    const acceptedA = {
      ...preparedA,
      phase: "accepted",
      updatedAt: T0 + 100,
      operationId: OP_A,
      status: "processing",
    };
    expect(s.text()).toBe(seedSerialize([acceptedA, acceptedB, blockedC]));

    await journal.markBoatDeletionBlocked("bx_bbbbbbbb", {
      id: OP_B,
      kind: "sandbox",
      targetId: "bx_bbbbbbbb",
      status: "blocked",
    });
    const blockedB = { ...acceptedB, phase: "blocked", updatedAt: T0 + 100, status: "blocked" };
    expect(s.text()).toBe(seedSerialize([acceptedA, blockedB, blockedC]));

    // The explicit retry of a blocked fence replaces it by a clean prepared record at the end.
    await journal.prepareBoatDeletion({ boxId: "bx_cccccccc", name: "ogb-c", ownerBotId: "bot-c" });
    const retriedC = {
      boxId: "bx_cccccccc",
      name: "ogb-c",
      ownerBotId: "bot-c",
      phase: "prepared",
      requestedAt: T0 + 100,
      updatedAt: T0 + 100,
    };
    expect(s.text()).toBe(seedSerialize([acceptedA, blockedB, retriedC]));

    await journal.retireBoatDeletion("bx_aaaaaaaa");
    const final = seedSerialize([blockedB, retriedC]);
    expect(s.text()).toBe(final);
    expect(seedVerdict(final)).toBe("ok");
    expect(statSync(s.file).mode & 0o777).toBe(0o600);
  });

  it("keeps a member a newer writer added beside the records, in place (a rolling upgrade must not erase it)", async () => {
    const s = seedDataDir([preparedA]);
    const newer = { version: 1, records: [preparedA], paused: { by: "newer", since: T0 } };
    writeFileSync(s.file, `${JSON.stringify(newer, null, 2)}\n`);
    await openBoatDeleteJournal({ dataDir: s.dataDir, now: () => T0 + 1 }).markBoatDeletionBlocked(
      "bx_aaaaaaaa",
    );
    const blockedA = { ...preparedA, phase: "blocked", status: "blocked", updatedAt: T0 + 1 };
    expect(s.text()).toBe(`${JSON.stringify({ ...newer, records: [blockedA] }, null, 2)}\n`);
  });

  it("keeps an unknown field in its place when another record is rewritten", async () => {
    const s = seedDataDir([blockedC, preparedA]);
    await openBoatDeleteJournal({ dataDir: s.dataDir, now: () => T0 + 1 }).markBoatDeletionBlocked(
      "bx_aaaaaaaa",
    );
    const blockedA = { ...preparedA, phase: "blocked", status: "blocked", updatedAt: T0 + 1 };
    expect(s.text()).toBe(seedSerialize([blockedC, blockedA]));
  });

  it("that the original itself refuses (an operation id on two Boats) is refused too, and kept", async () => {
    const s = seedDataDir([acceptedB, { ...acceptedB, boxId: "bx_dddddddd" }]);
    expect(seedVerdict(s.text())).toBe("invalid");
    const before = s.text();
    await expect(openBoatDeleteJournal({ dataDir: s.dataDir }).boatDeletionSnapshot()).rejects.toMatchObject({
      code: "BOAT_DELETE_PAUSED",
      detail: "invalid",
    });
    expect(s.text()).toBe(before);
  });
});
