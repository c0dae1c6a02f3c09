import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CREATE_JOURNAL_FILE, openBoatCreateJournal } from "@drydock/boat-create-journal";
import { DELETE_JOURNAL_FILE, openBoatDeleteJournal } from "@drydock/boat-delete-journal";
import { failNthCall, nodeFileOps } from "@drydock/file-lock";
import { afterEach, describe, expect, it } from "vitest";
import { isStorageError, openFileStorage, openStorage, type Storage } from "../src/index.js";

const BODY = '{"ttlSeconds":28800,"noEnv":true}';
const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});
function dataDir(): string {
  const root = mkdtempSync(join(tmpdir(), "drydock-storage-file-"));
  cleanups.push(() => rmSync(root, { recursive: true, force: true }));
  return join(root, "data");
}

async function drive(createJournal: Storage["createJournal"], deleteJournal: Storage["deleteJournal"]) {
  const { request } = await createJournal.beginBoatCreate("bot-1", BODY);
  const remembered = await createJournal.rememberCreatedBoat(request, "bx_aaaaaaaa");
  await createJournal.resolveBoatCreate(remembered);
  await createJournal.beginBoatCreate("bot-2", BODY);
  await deleteJournal.prepareBoatDeletion({ boxId: "bx_bbbbbbbb", name: "drydock-x", ownerBotId: "bot-2" });
  await deleteJournal.markBoatDeletionBlocked("bx_bbbbbbbb");
}

describe("the file backend", () => {
  it("writes byte for byte what the journal packages write (the seeds' format)", async () => {
    let n = 0;
    const options = {
      now: () => 1_767_000_000_000,
      newKey: () => `00000000-0000-4000-8000-${(++n).toString(16).padStart(12, "0")}`,
    };
    const viaStorage = dataDir();
    const storage = await openFileStorage({ dataDir: viaStorage, ...options });
    await drive(storage.createJournal, storage.deleteJournal);
    n = 0;
    const direct = dataDir();
    await drive(
      openBoatCreateJournal({ dataDir: direct, ...options }),
      openBoatDeleteJournal({ dataDir: direct, now: options.now }),
    );
    for (const file of [CREATE_JOURNAL_FILE, DELETE_JOURNAL_FILE]) {
      expect(readFileSync(join(viaStorage, file)).equals(readFileSync(join(direct, file)))).toBe(true);
    }
    expect(readdirSync(viaStorage).sort()).toEqual(readdirSync(direct).sort());
    const exported = await storage.exportAll();
    expect(exported.creates).toEqual(
      JSON.parse(readFileSync(join(direct, CREATE_JOURNAL_FILE), "utf8")).requests,
    );
    expect(exported.deletes).toEqual(
      JSON.parse(readFileSync(join(direct, DELETE_JOURNAL_FILE), "utf8")).records,
    );
    await storage.close();
  });

  it("keeps meta singletons as the seeds keep environment-id: <dataDir>/<key> holding the value and a newline", async () => {
    const dir = dataDir();
    const storage = await openStorage({ dataDir: dir });
    expect(storage.kind).toBe("file");
    const id = "3f0c8a1e-5b7d-4c2a-9e6f-000000000001";
    expect(await storage.meta.getOrCreate("environment-id", () => id)).toBe(id);
    expect(readFileSync(join(dir, "environment-id"), "utf8")).toBe(`${id}\n`);
    // Beside the seeds' file, only the backend binding (storage.json) that openStorage writes on first use.
    expect(readdirSync(dir).sort()).toEqual(["environment-id", "storage.json"]);
    expect(JSON.parse(readFileSync(join(dir, "storage.json"), "utf8"))).toEqual({ version: 1, kind: "file" });
  });

  for (const [errno, what, todo] of [
    ["ENOSPC", "the disk is full", "free space"],
    ["EROFS", "the file system is read-only", "remount it read-write"],
    ["EACCES", "permission was denied", "give the user running drydock"],
    ["EMFILE", "this process has too many open files", "retry in a moment"],
  ] as const) {
    it(`an ${errno} while writing: says what happened, that nothing was changed, what to do; file unchanged`, async () => {
      const dir = dataDir();
      const plain = await openFileStorage({ dataDir: dir });
      await plain.createJournal.beginBoatCreate("bot-0", BODY);
      const bytes = readFileSync(join(dir, CREATE_JOURNAL_FILE));
      let refused = 0;
      // Every call of the write fails in turn (bounded), as QUALITY.md's injected faults do.
      for (let n = 1; n <= 12; n += 1) {
        const faulty = failNthCall(nodeFileOps, { n, code: errno });
        const storage = await openFileStorage({ dataDir: dir, fs: faulty.ops });
        const error = await storage.createJournal.beginBoatCreate("bot-1", BODY).then(
          () => null,
          (e: unknown) => e,
        );
        if (error === null) {
          // The write got through before call n: undo it for the next round.
          await plain.createJournal.discardBoatCreate((await plain.exportAll()).creates[1] as never);
          continue;
        }
        const journalError = error as {
          name: string;
          code: string;
          detail: string;
          message: string;
          cause: unknown;
        };
        expect(journalError.name).toBe("BoatCreateJournalError");
        expect(journalError.code).toBe("BOAT_CREATE_PAUSED");
        if (!isStorageError(journalError.cause)) continue; // a failure after the rename keeps the journal's wording
        refused += 1;
        expect(journalError.message).toContain(
          `because ${what} (${errno}). Nothing was changed. To continue, ${todo}`,
        );
        expect(journalError.message).not.toMatch(/invalid|repair|is lock is/i);
        expect(readFileSync(join(dir, CREATE_JOURNAL_FILE)).equals(bytes)).toBe(true);
      }
      expect(refused).toBeGreaterThan(0);
      expect((await plain.exportAll()).creates.map((r) => r.botId)).toEqual(["bot-0"]);
    });
  }
});

describe("openStorage", () => {
  it("refuses an unknown backend, and sqlite without its factory, naming what to do", async () => {
    await expect(openStorage({ dataDir: dataDir(), storage: "mysql://db/drydock" })).rejects.toMatchObject({
      code: "STORAGE_INVALID_ARGUMENT",
      message: expect.stringContaining("expected file, sqlite, or a postgres:// URL"),
    });
    await expect(openStorage({ dataDir: dataDir(), storage: "postgres://db/drydock" })).rejects.toMatchObject(
      {
        code: "STORAGE_INVALID_ARGUMENT",
        message: expect.stringContaining("install @drydock/storage-postgres"),
      },
    );
    await expect(openStorage({ dataDir: dataDir(), storage: "sqlite" })).rejects.toMatchObject({
      code: "STORAGE_INVALID_ARGUMENT",
      message: expect.stringContaining("install @drydock/storage-sqlite"),
    });
    await expect(openStorage({ dataDir: "" })).rejects.toMatchObject({ code: "STORAGE_INVALID_ARGUMENT" });
  });

  it("passes the common and backend options to an injected backend factory", async () => {
    const dir = dataDir();
    let seen: Record<string, unknown> | undefined;
    const fake = await openFileStorage({ dataDir: dir });
    const storage = await openStorage({
      dataDir: dir,
      storage: "sqlite",
      backends: {
        sqlite: async (options) => {
          seen = options;
          return fake;
        },
      },
      backendOptions: { busyTimeoutMs: 7 },
    });
    expect(storage).toBe(fake);
    expect(seen).toEqual({ dataDir: dir, busyTimeoutMs: 7 });
  });
});
