import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { openSqliteStorage } from "../src/index.js";

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

describe("the SQLite registry's page between commits", () => {
  it("hands out the same frozen page while nothing committed, and a fresh one after any connection's commit", async () => {
    const root = mkdtempSync(join(tmpdir(), "drydock-page-cache-"));
    cleanups.push(() => rmSync(root, { recursive: true, force: true }));
    const dataDir = join(root, "data");
    const reader = await openSqliteStorage({ dataDir });
    // A second connection, as another process sharing the data directory would hold.
    const writer = await openSqliteStorage({ dataDir });
    try {
      await writer.bots.create({ botId: "bot-a", name: "A" });
      const first = await reader.bots.page({ limit: 10 });
      expect(first.bots.map((b) => b.botId)).toEqual(["bot-a"]);
      // Unchanged store: the very same page (the server's listing memo compares rows by identity).
      expect(await reader.bots.page({ limit: 10 })).toBe(first);
      expect(Object.isFrozen(first.bots[0])).toBe(true);

      // Another connection commits: the page is read again.
      await writer.bots.create({ botId: "bot-b", name: "B" });
      const second = await reader.bots.page({ limit: 10 });
      expect(second.bots.map((b) => b.botId)).toEqual(["bot-a", "bot-b"]);

      // This connection commits (a mark, then its removal): each shows.
      const mark = await reader.bots.markDeleting("bot-a");
      expect((await reader.bots.page({ limit: 10 })).bots[0]?.deletions?.length).toBe(1);
      await writer.bots.unmarkDeleting("bot-a", mark!);
      expect((await reader.bots.page({ limit: 10 })).bots[0]?.deletions).toBeUndefined();
      await writer.bots.remove("bot-b");
      expect((await reader.bots.page({ limit: 10 })).bots.map((b) => b.botId)).toEqual(["bot-a"]);
    } finally {
      await reader.close();
      await writer.close();
    }
  });
});
