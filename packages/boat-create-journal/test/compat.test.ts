import { mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { CREATE_JOURNAL_FILE, openBoatCreateJournal } from "../src/index.js";
import { tempDataDir } from "./helpers.js";
import { seedSerialize, seedVerdict } from "./seed-oracle.js";

/**
 * Compatibility with data directories written by the original system: its file is read and continued, and
 * after each drydock write the bytes are exactly what the original would have written for that state.
 */

const T0 = 1_767_000_000_000;
const BODY = '{"ttlSeconds":28800,"noEnv":true}';
const key = (n: number) => `3f0c8a1e-5b7d-4c2a-9e6f-${n.toString(16).padStart(12, "0")}`;

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

function seedDataDir(requests: unknown[]) {
  const dir = tempDataDir();
  cleanups.push(dir.cleanup);
  mkdirSync(dir.dataDir, { mode: 0o700 });
  const file = join(dir.dataDir, CREATE_JOURNAL_FILE);
  writeFileSync(file, seedSerialize(requests), { mode: 0o600 });
  return { ...dir, file, text: () => readFileSync(file, "utf8") };
}

describe("a journal written by the original system", () => {
  const pendingA = { botId: "bot-a", requestBody: BODY, idempotencyKey: key(1), createdAt: T0 };
  const rememberedB = {
    botId: "bot-b",
    requestBody: BODY,
    idempotencyKey: key(2),
    createdAt: T0,
    boxId: "bx_bbbbbbbb",
  };
  const adoptedC = {
    botId: "bot-c",
    requestBody: '{"adopted":"legacy-name","boxId":"bx_cccccccc"}',
    idempotencyKey: key(3),
    createdAt: T0 - 5,
    boxId: "bx_cccccccc",
    resolved: true,
  };
  // A field this version does not know: the original keeps it, so must drydock.
  const futureD = {
    botId: "bot-d",
    requestBody: BODY,
    idempotencyKey: key(4),
    createdAt: T0,
    note: { by: "newer" },
  };

  it("is read, and its pending key is reused without a write", async () => {
    const s = seedDataDir([pendingA, rememberedB, adoptedC, futureD]);
    const before = s.text();
    const journal = openBoatCreateJournal({ dataDir: s.dataDir, now: () => T0 + 1_000 });
    expect(await journal.boatCreateRecoverySnapshot()).toEqual([
      { botId: "bot-a", resolved: false, createdAt: T0, ageMs: 1_000 },
      { botId: "bot-b", boxId: "bx_bbbbbbbb", resolved: false, createdAt: T0, ageMs: 1_000 },
      { botId: "bot-c", boxId: "bx_cccccccc", resolved: true, createdAt: T0 - 5, ageMs: 1_005 },
      { botId: "bot-d", resolved: false, createdAt: T0, ageMs: 1_000 },
    ]);
    const attempt = await journal.beginBoatCreate("bot-a", BODY);
    expect(attempt).toEqual({ request: pendingA, startedNow: false });
    expect(s.text()).toBe(before);
  });

  it("is continued with the exact bytes the original would write at each step", async () => {
    const s = seedDataDir([pendingA, rememberedB, adoptedC, futureD]);
    const journal = openBoatCreateJournal({
      dataDir: s.dataDir,
      now: () => T0 + 2_000,
      newKey: () => key(9),
    });
    const rememberedA = await journal.rememberCreatedBoat(pendingA, "bx_aaaaaaaa");
    // The original drops the bot's rows and appends the completed one.
    expect(s.text()).toBe(
      seedSerialize([rememberedB, adoptedC, futureD, { ...pendingA, boxId: "bx_aaaaaaaa" }]),
    );

    await journal.resolveBoatCreate(rememberedB);
    const resolvedB = { ...rememberedB, resolved: true };
    expect(s.text()).toBe(seedSerialize([resolvedB, adoptedC, futureD, rememberedA]));

    // The unknown field survives rewrites of its own row and of others, in its original position.
    await journal.rememberCreatedBoat(futureD, "bx_dddddddd");
    const rememberedD = { ...futureD, boxId: "bx_dddddddd" };
    expect(s.text()).toBe(seedSerialize([resolvedB, adoptedC, rememberedA, rememberedD]));

    await journal.adoptResolvedBoat("bot-e", "bx_eeeeeeee");
    const adoptedE = {
      botId: "bot-e",
      requestBody: '{"adopted":"legacy-name","boxId":"bx_eeeeeeee"}',
      idempotencyKey: key(9),
      createdAt: T0 + 2_000,
      boxId: "bx_eeeeeeee",
      resolved: true,
    };
    expect(s.text()).toBe(seedSerialize([resolvedB, adoptedC, rememberedA, rememberedD, adoptedE]));

    await journal.retireDeletedBoatCreate("bx_cccccccc");
    await journal.discardBoatCreate(rememberedD);
    const final = seedSerialize([resolvedB, rememberedA, adoptedE]);
    expect(s.text()).toBe(final);
    expect(seedVerdict(final)).toBe("ok");
    expect(statSync(s.file).mode & 0o777).toBe(0o600);
  });

  it("keeps a member a newer writer added beside the requests, in place (a rolling upgrade must not erase it)", async () => {
    const s = seedDataDir([pendingA]);
    const newer = { version: 1, requests: [pendingA], paused: { by: "newer", since: T0 } };
    writeFileSync(s.file, `${JSON.stringify(newer, null, 2)}\n`);
    const journal = openBoatCreateJournal({ dataDir: s.dataDir, now: () => T0 + 10 });
    await journal.rememberCreatedBoat(pendingA, "bx_aaaaaaaa");
    const after = { ...newer, requests: [{ ...pendingA, boxId: "bx_aaaaaaaa" }] };
    expect(s.text()).toBe(`${JSON.stringify(after, null, 2)}\n`);
    await journal.retireDeletedBoatCreate("bx_aaaaaaaa");
    expect(JSON.parse(s.text())).toEqual({ ...newer, requests: [] });
  });

  it("keeps a fractional createdAt, which the original format allows", async () => {
    const s = seedDataDir([{ ...pendingA, createdAt: T0 + 0.5 }]);
    const journal = openBoatCreateJournal({ dataDir: s.dataDir, now: () => T0 + 10 });
    const { request } = await journal.beginBoatCreate("bot-a", BODY);
    expect(request.createdAt).toBe(T0 + 0.5);
    await journal.rememberCreatedBoat(request, "bx_aaaaaaaa");
    expect(s.text()).toBe(seedSerialize([{ ...pendingA, createdAt: T0 + 0.5, boxId: "bx_aaaaaaaa" }]));
  });

  it("that the original itself refuses (a second Boat for one bot) is refused too, and kept", async () => {
    const twoBoats = [
      rememberedB,
      { ...rememberedB, requestBody: "other", idempotencyKey: key(7), boxId: "bx_zzzzzzzz" },
    ];
    const s = seedDataDir(twoBoats);
    expect(seedVerdict(s.text())).toBe("invalid");
    const before = s.text();
    await expect(
      openBoatCreateJournal({ dataDir: s.dataDir }).beginBoatCreate("bot-b", BODY),
    ).rejects.toMatchObject({
      code: "BOAT_CREATE_PAUSED",
      detail: "invalid",
    });
    expect(s.text()).toBe(before);
  });
});
