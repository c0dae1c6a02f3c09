import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openFileStorage, type Storage } from "@drydock/storage";
import {
  applyToStorage,
  canonicalExport,
  type JournalCommand,
  journalCommandArb,
  keyOf,
  newRunState,
  type RunState,
} from "@drydock/storage/conformance";
import fc from "fast-check";
import { beforeAll, describe, expect, it } from "vitest";
import { open } from "./fixtures/postgres-backend.js";
import { freshDatabase } from "./helpers.js";

/**
 * The same random command sequences on the file backend and on PostgreSQL, side by side: after every
 * command, the same answer (values, and refusals by code and detail) and the same canonical export.
 */

beforeAll(async () => {
  await freshDatabase();
});

type Opener = (dataDir: string, options: { now: () => number; newKey: () => string }) => Promise<Storage>;

/** One backend under test: its own data directory, run state (minted keys) and reopenable handle. */
async function side(opener: Opener, root: string, name: string, clock: { now: number }) {
  const dataDir = join(root, name);
  const state: RunState = { ...newRunState(), clock };
  const options = { now: () => clock.now, newKey: () => keyOf(++state.minted.n) };
  const storage = {
    current: await opener(dataDir, options),
    async reopen() {
      await this.current.close();
      this.current = await opener(dataDir, options);
    },
  };
  return {
    step: async (command: JournalCommand) => {
      const outcome = await applyToStorage(storage, state, command);
      // Every member of the contract's export: journals, bots and meta.
      return { outcome, exported: canonicalExport(await storage.current.exportAll()) };
    },
    close: () => storage.current.close(),
  };
}

describe("differential: file and postgres", () => {
  it("answer the same command sequences with the same results, errors and exports", async () => {
    let commandsRun = 0;
    let refusals = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(journalCommandArb, { minLength: 1, maxLength: 60, size: "large" }),
        async (commands) => {
          const root = mkdtempSync(join(tmpdir(), "drydock-pgdiff-"));
          const clock = { now: 1_767_000_000_000 };
          const file = await side((dataDir, o) => openFileStorage({ dataDir, ...o }), root, "file", clock);
          const postgres = await side(open, root, "postgres", clock);
          try {
            for (const command of commands) {
              if (command.op === "advance") clock.now += command.ms;
              const expected = await file.step(command);
              const actual = await postgres.step(command);
              expect(actual, JSON.stringify(command)).toEqual(expected);
              commandsRun += 1;
              if (!expected.outcome.ok) refusals += 1;
            }
          } finally {
            await file.close();
            await postgres.close();
            rmSync(root, { recursive: true, force: true });
          }
        },
      ),
      { numRuns: 15 },
    );
    // The sequences exercised refusals too, not only happy paths.
    expect(commandsRun).toBeGreaterThan(100);
    expect(refusals).toBeGreaterThan(0);
  }, 240_000);
});
