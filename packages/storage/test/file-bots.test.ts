import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BOTS_FILE } from "@drydock/facts";
import { failNthCall, nodeFileOps } from "@drydock/file-lock";
import { afterEach, describe, expect, it } from "vitest";
import { isStorageError, openFileBotRegistry, openFileStorage } from "../src/index.js";

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});
function dataDir(): string {
  const root = mkdtempSync(join(tmpdir(), "drydock-storage-bots-"));
  cleanups.push(() => rmSync(root, { recursive: true, force: true }));
  return join(root, "data");
}

describe("the file backend's bot registry", () => {
  it("writes bots.json exactly as the bot server always has: {version:1,bots:[…]}, creation order, 2-space JSON", async () => {
    const dir = dataDir();
    const storage = await openFileStorage({ dataDir: dir, now: () => 1_767_000_000_000 });
    await storage.bots.create({ botId: "zed", name: "Zed" });
    await storage.bots.create({ botId: "amy", name: "Amy" });
    const text = readFileSync(join(dir, BOTS_FILE), "utf8");
    expect(text).toBe(
      `${JSON.stringify(
        {
          version: 1,
          bots: [
            { botId: "zed", name: "Zed", createdAt: 1_767_000_000_000 },
            { botId: "amy", name: "Amy", createdAt: 1_767_000_000_000 },
          ],
        },
        null,
        2,
      )}\n`,
    );
    expect((await storage.exportAll()).bots.map((b) => b.botId)).toEqual(["amy", "zed"]);
  });

  for (const [errno, what] of [
    ["ENOSPC", "the disk is full"],
    ["EROFS", "the file system is read-only"],
  ] as const) {
    it(`an ${errno} while writing: a StorageError that says so, never "invalid" or "repair"; bots.json unchanged`, async () => {
      const dir = dataDir();
      await openFileBotRegistry(dir).create({ botId: "kept", name: "Kept" });
      const bytes = readFileSync(join(dir, BOTS_FILE));
      let refused = 0;
      for (let n = 1; n <= 12; n += 1) {
        const faulty = failNthCall(nodeFileOps, { n, code: errno });
        const error = await openFileBotRegistry(dir, { fs: faulty.ops })
          .create({ botId: "new", name: "New" })
          .then(
            () => null,
            (e: unknown) => e,
          );
        if (error === null) {
          await openFileBotRegistry(dir).remove("new");
          continue;
        }
        expect(isStorageError(error)).toBe(true);
        const message = (error as Error).message;
        if (!message.includes(errno)) continue; // a failure after the rename: the state is already visible
        refused += 1;
        expect(message).toContain(
          `the bot registry ${join(dir, BOTS_FILE)} (bots cannot be changed) because`,
        );
        expect(message).toContain(what);
        expect(message).not.toMatch(/invalid|repair/i);
        expect(readFileSync(join(dir, BOTS_FILE)).equals(bytes)).toBe(true);
      }
      expect(refused).toBeGreaterThan(0);
    });
  }

  it("damaged bytes are STORAGE_CORRUPT in today's words, and the file is never rewritten", async () => {
    const dir = dataDir();
    await openFileBotRegistry(dir).create({ botId: "kept", name: "Kept" });
    writeFileSync(join(dir, BOTS_FILE), '{"version":1,"bots":[{"botId":"x y"}]}\n');
    const error = await openFileBotRegistry(dir)
      .create({ botId: "new", name: "New" })
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect(isStorageError(error) && error.code).toBe("STORAGE_CORRUPT");
    expect((error as Error).message).toBe(
      `The bot registry ${join(dir, BOTS_FILE)} is invalid, so bots cannot be changed. Repair or restore it before retrying; drydock never overwrites a file it could not read.`,
    );
    expect(readFileSync(join(dir, BOTS_FILE), "utf8")).toBe('{"version":1,"bots":[{"botId":"x y"}]}\n');
  });
});
