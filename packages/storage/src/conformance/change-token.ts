// The optional Storage.changeToken: equal tokens from one Storage object mean the registry and the journals
// did not change in between. The model-based runs (index.ts) check that over random sequences; this part
// checks each kind of write, reads, and another process's writes.
import { setTimeout as sleep } from "node:timers/promises";
import { expect, it } from "vitest";
import type { Storage } from "../contract.js";
import type { ConformanceTarget, Fresh } from "./index.js";
import { spawnRace } from "./index.js";

const BODY = '{"ttlSeconds":28800,"noEnv":true}';

/**
 * The token once it stands still: a backend may move it with no change while it cannot prove there was
 * none (the file backend for 2 s after a document changed, as its peeks), but not for ever.
 */
async function settled(token: () => string): Promise<string> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const first = token();
    if (token() === first) return first;
    if (Date.now() > deadline) throw new Error("changeToken kept moving for 10 s with nothing written");
    await sleep(100);
  }
}

export function describeChangeToken(target: ConformanceTarget, fresh: Fresh, workerPath: string): void {
  /** `body` with a store opened on `dir` (closed after), and its token as a function. */
  const opened = async (
    dir: ReturnType<Fresh>,
    body: (storage: Storage, token: () => string) => Promise<void>,
  ): Promise<void> => {
    const storage = await target.open(dir.dataDir);
    try {
      await body(storage, () => (storage.changeToken as () => string)());
    } finally {
      await storage.close();
    }
  };

  it(`changeToken is ${target.changeToken ? "offered" : "left out"}, as the target declares`, () =>
    opened(fresh(), async (storage) => {
      expect(typeof storage.changeToken).toBe(target.changeToken ? "function" : "undefined");
    }));
  if (!target.changeToken) return;

  // A hang guard, not a timing goal: the file backend's token settles 2 s after each write.
  const SETTLING_MS = 120_000;
  it(
    "changeToken stays while only reads happen, and moves with every write of the registry and the journals",
    () =>
      opened(fresh(), async (storage, token) => {
        // From a settled token each time: a write must move a token that had stopped moving.
        const moves = async (what: string, write: () => Promise<unknown>) => {
          const before = await settled(token);
          await write();
          expect(token(), `${what} must move the token`).not.toBe(before);
        };
        await moves("bots.create", () => storage.bots.create({ botId: "ada", name: "Ada" }));
        await moves("createJournal.beginBoatCreate", () =>
          storage.createJournal.beginBoatCreate("ada", BODY),
        );
        await moves("createJournal.adoptResolvedBoat", () =>
          storage.createJournal.adoptResolvedBoat("ada", "bx_aaaaaaaa"),
        );
        await moves("deleteJournal.prepareBoatDeletion", () =>
          storage.deleteJournal.prepareBoatDeletion({ boxId: "bx_aaaaaaaa", name: "n", ownerBotId: "ada" }),
        );
        await moves("bots.markDeleting", () => storage.bots.markDeleting("ada"));
        await moves("deleteJournal.retireBoatDeletion", () =>
          storage.deleteJournal.retireBoatDeletion("bx_aaaaaaaa"),
        );
        await moves("createJournal.retireDeletedBoatCreate", () =>
          storage.createJournal.retireDeletedBoatCreate("bx_aaaaaaaa"),
        );
        await moves("bots.remove", () => storage.bots.remove("ada"));
        await storage.bots.create({ botId: "bea", name: "Bea" });
        const still = await settled(token);
        await storage.bots.page({ limit: 10 });
        await storage.bots.list();
        await storage.bots.get("bea");
        await storage.bots.count();
        await storage.createJournal.peekBoatCreates();
        await storage.deleteJournal.peekBoatDeletions();
        await storage.exportAll();
        expect(token(), "reads must leave the token").toBe(still);
      }),
    SETTLING_MS,
  );

  it(
    "changeToken moves when another process writes the registry or a journal",
    () => {
      const dir = fresh();
      return opened(dir, async (storage, token) => {
        await storage.exportAll();
        for (const [mode, arg] of [
          ["bot-create", "cy"],
          ["begin", "cy"],
          ["prepare", "bx_bbbbbbbb"],
        ] as const) {
          const before = await settled(token);
          const [answer] = await spawnRace(target, dir, workerPath, mode, [[arg]]);
          expect(answer, mode).not.toHaveProperty("code");
          expect(token(), `another process's ${mode} must move the token`).not.toBe(before);
        }
        expect((await storage.bots.list()).map((b) => b.botId)).toEqual(["cy"]);
      });
    },
    SETTLING_MS,
  );
}
