/**
 * The store-backed workspace (postgres) with injected races: the store's compare-and-set fails as it does
 * when another change came first, or the bot is deleted (its workspace retired) between the head's read and
 * the change. The real store's CAS is proven in storage-postgres's workspaces tests and through real servers
 * in workspaces-postgres.test.ts; this proves what the server does around it.
 */
import { WorkspaceError, type WorkspaceStore, type WorkspaceWriteOptions } from "@drydock/storage";
import { describe, expect, it } from "vitest";
import type { Bot } from "../src/bots.js";
import { STORE_CHANGE_ATTEMPTS, storeWorkspaces } from "../src/domain/workspace-store.js";

const ada: Bot = { botId: "ada", name: "Ada", createdAt: 1 } as Bot;

/** A store whose head is at `version`, whose writes fail their CAS while `conflicts` lasts. */
function racyStore(state: { version: number; conflicts: number; writes: WorkspaceWriteOptions[] }) {
  return {
    head: async (botId: string) => ({ botId, version: state.version, files: [] }),
    writeFile: async (_botId: string, path: string, bytes: Uint8Array, options?: WorkspaceWriteOptions) => {
      state.writes.push({ ...options });
      if (options?.expectedVersion !== state.version || state.conflicts > 0) {
        state.conflicts -= 1;
        state.version += 1; // the other change that came first
        throw new WorkspaceError("WORKSPACE_VERSION_CONFLICT", "another change came first", state.version);
      }
      state.version += 1;
      return {
        file: { type: "file" as const, path, mode: 0o600, size: bytes.byteLength, sha256: "0".repeat(64) },
        version: state.version,
      };
    },
  } as unknown as WorkspaceStore;
}

describe("a change on the store's workspace", () => {
  it("is tried again from a fresh head when another change came first, each try on the version it read", async () => {
    const state = { version: 4, conflicts: 2, writes: [] as WorkspaceWriteOptions[] };
    const backend = storeWorkspaces(racyStore(state), { bots: { get: async () => ada } });
    expect(await backend.writeFile(ada, "a.txt", Buffer.from("abc"))).toEqual({ bytes: 3 });
    expect(state.writes).toEqual([{ expectedVersion: 4 }, { expectedVersion: 5 }, { expectedVersion: 6 }]);
  });

  it("gives up after its tries with the store's 409, nothing written", async () => {
    const state = { version: 0, conflicts: Number.POSITIVE_INFINITY, writes: [] as WorkspaceWriteOptions[] };
    const backend = storeWorkspaces(racyStore(state), { bots: { get: async () => ada } });
    await expect(backend.writeFile(ada, "a.txt", Buffer.from("abc"))).rejects.toMatchObject({
      code: "WORKSPACE_VERSION_CONFLICT",
    });
    expect(state.writes).toHaveLength(STORE_CHANGE_ATTEMPTS);
  });

  it("is refused (404 bot_not_found) when the bot was deleted, or deleted and created again, before it", async () => {
    for (const now of [null, { ...ada, createdAt: 2 }]) {
      const state = { version: 3, conflicts: 0, writes: [] as WorkspaceWriteOptions[] };
      const backend = storeWorkspaces(racyStore(state), { bots: { get: async () => now as Bot | null } });
      await expect(backend.writeFile(ada, "a.txt", Buffer.from("abc"))).rejects.toMatchObject({
        status: 404,
        code: "bot_not_found",
      });
      expect(state.writes).toEqual([]);
    }
  });

  it("re-checks the bot on every try: deleted while a concurrent change made it try again, nothing written", async () => {
    const state = { version: 1, conflicts: 1, writes: [] as WorkspaceWriteOptions[] };
    let reads = 0;
    // The bot is there for the first try, deleted (its workspace retired: the conflict) before the second.
    const bots = { get: async () => (reads++ === 0 ? ada : null) };
    const backend = storeWorkspaces(racyStore(state), { bots });
    await expect(backend.writeFile(ada, "a.txt", Buffer.from("abc"))).rejects.toMatchObject({
      code: "bot_not_found",
    });
    expect(state.writes).toEqual([{ expectedVersion: 1 }]);
  });
});
