// The Boat rules on plain values: create rows, fences and a registry as literals in, a verdict out. The
// lifecycle is a stand-in that only names Boats; nothing here reaches boat.dev or a journal.
import { describe, expect, it } from "vitest";
import type { BoatContext, CreateRow, Registry } from "../src/boat/context.js";
import { adoptRefusal } from "../src/boat/rules.js";
import { createWindowLeftMs, keyStillRetried } from "../src/boat/window.js";
import { CREATE_WINDOW_MS, type RecoveryDeletionRecord } from "../src/index.js";

const T = 1_800_000_000_000;
const BOX = "bx_abcdefgh";
const OTHER_BOX = "bx_bcdefghj";
const nameOf = (botId: string) => `ogb-0123456789ab-${botId.replace(/[^a-z0-9]/g, "").slice(0, 8)}-abcdef`;
const unused = () => {
  throw new Error("not used by the rules");
};

const ctx: BoatContext = {
  lifecycle: {
    boatNameFor: nameOf,
    legacyBoatNameFor: (botId) => `legacy-${botId}`,
    reconcileDeletion: unused,
    deleteBoat: unused,
  },
  createJournal: {
    boatCreateRecoverySnapshot: unused,
    adoptResolvedBoat: unused,
    retireDeletedBoatCreate: unused,
  },
  deleteJournal: { boatDeletionSnapshot: unused, getBoatDeletion: unused },
  client: { getSandbox: unused, renameSandbox: unused, listSandboxes: unused },
  ownScope: "0123456789ab",
  now: () => T,
  prefix: "drydock",
};

const row = (fields: Partial<CreateRow> & { botId: string }): CreateRow => ({
  resolved: false,
  createdAt: T - 60_000,
  ageMs: 60_000,
  ...fields,
});
const NO_REGISTRY: Registry = { kind: "none" };
const fence = (fields: Partial<RecoveryDeletionRecord>): RecoveryDeletionRecord => ({
  boxId: OTHER_BOX,
  name: "x",
  ownerBotId: null,
  phase: "prepared",
  requestedAt: T,
  updatedAt: T,
  ...fields,
});

describe("the create key's window", () => {
  it("counts down from the row's creation and stops at zero", () => {
    const fresh = row({ botId: "bot-a", createdAt: T - 1_000 });
    expect(createWindowLeftMs(fresh, T)).toBe(CREATE_WINDOW_MS - 1_000);
    expect(createWindowLeftMs(fresh, T + CREATE_WINDOW_MS)).toBe(0);
    // A row stamped ahead of this clock never has more than the whole window left.
    expect(createWindowLeftMs(row({ botId: "bot-a", createdAt: T + 5_000 }), T)).toBe(CREATE_WINDOW_MS);
  });

  it("holds only for a row without a Boat id, inside the window", () => {
    expect(keyStillRetried(row({ botId: "bot-a" }), T)).toBe(true);
    expect(keyStillRetried(row({ botId: "bot-a", boxId: BOX }), T)).toBe(false);
    expect(keyStillRetried(row({ botId: "bot-a", createdAt: T - CREATE_WINDOW_MS }), T)).toBe(false);
    expect(keyStillRetried(undefined, T)).toBe(false);
  });
});

describe("why an adopt is refused", () => {
  it("allows a Boat with the bot's name and no row, and the bot's own remembered unnamed Boat", () => {
    expect(adoptRefusal(ctx, "bot-a", BOX, nameOf("bot-a"), [], [], T, NO_REGISTRY)).toBeNull();
    const remembered = [row({ botId: "bot-a", boxId: BOX, createdAt: T - CREATE_WINDOW_MS })];
    expect(adoptRefusal(ctx, "bot-a", BOX, null, remembered, [], T, NO_REGISTRY)).toBeNull();
  });

  it("refuses early a Boat remembered for another bot, or one a deletion fence names", () => {
    expect(
      adoptRefusal(
        ctx,
        "bot-a",
        BOX,
        nameOf("bot-a"),
        [row({ botId: "bot-b", boxId: BOX })],
        [],
        T,
        NO_REGISTRY,
      ),
    ).toEqual({
      early: true,
      message: `Boat ${BOX} is remembered for bot bot-b; it cannot be adopted by bot-a.`,
    });
    expect(
      adoptRefusal(ctx, "bot-a", BOX, nameOf("bot-a"), [], [fence({ ownerBotId: "bot-a" })], T, NO_REGISTRY),
    ).toMatchObject({ early: true, message: expect.stringContaining("`drydock deletions list`") });
  });

  it("refuses a Boat that would orphan the bot's recorded one, or drop its still-retried key", () => {
    expect(
      adoptRefusal(
        ctx,
        "bot-a",
        BOX,
        nameOf("bot-a"),
        [row({ botId: "bot-a", boxId: OTHER_BOX })],
        [],
        T,
        NO_REGISTRY,
      ),
    ).toMatchObject({
      early: false,
      message: expect.stringContaining(`already has Boat ${OTHER_BOX} recorded`),
    });
    expect(
      adoptRefusal(ctx, "bot-a", BOX, nameOf("bot-a"), [row({ botId: "bot-a" })], [], T, NO_REGISTRY),
    ).toMatchObject({ early: false, message: expect.stringContaining("whose key drydock still retries") });
    // Past the window the key is no longer sent: the Boat with the bot's name may be adopted.
    const expired = [row({ botId: "bot-a", createdAt: T - CREATE_WINDOW_MS })];
    expect(adoptRefusal(ctx, "bot-a", BOX, nameOf("bot-a"), expired, [], T, NO_REGISTRY)).toBeNull();
  });

  it("refuses a name that is not the bot's, an unregistered bot, and an unreadable registry", () => {
    expect(adoptRefusal(ctx, "bot-a", BOX, "someone-else", [], [], T, NO_REGISTRY)).toMatchObject({
      early: false,
      message: expect.stringContaining("is named someone-else, not bot bot-a's name"),
    });
    const registered: Registry = { kind: "read", ids: new Set(["bot-b"]) };
    expect(adoptRefusal(ctx, "bot-a", BOX, nameOf("bot-a"), [], [], T, registered)).toMatchObject({
      message: expect.stringContaining("Bot bot-a is not registered"),
    });
    expect(
      adoptRefusal(ctx, "bot-a", BOX, nameOf("bot-a"), [], [], T, { kind: "read", ids: new Set(["bot-a"]) }),
    ).toBeNull();
    expect(
      adoptRefusal(ctx, "bot-a", BOX, nameOf("bot-a"), [], [], T, { kind: "unreadable", reason: "EACCES" }),
    ).toMatchObject({ message: expect.stringContaining("The bot registry could not be read (EACCES)") });
  });
});
