import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openFileStorage, type Storage, type StorageExport } from "@drydock/storage";
import {
  applyToStorage,
  canonicalExport,
  type JournalCommand,
  journalCommandArb,
  keyOf,
  newRunState,
  type Outcome,
} from "@drydock/storage/conformance";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { openSqliteStorage } from "../src/index.js";

/**
 * The same random command sequences on the file backend and on SQLite: the same answers (values, and
 * refusals by code and detail) after every command, and the same canonical export of every row.
 */

type Open = (dataDir: string, options: { now: () => number; newKey: () => string }) => Promise<Storage>;

/** Runs `commands` on a fresh store; `each` sees every answer; returns the final export. */
async function session(
  open: Open,
  commands: JournalCommand[],
  clock: { now: number },
  each: (outcome: Outcome, storage: Storage) => Promise<void> = async () => {},
): Promise<StorageExport> {
  const root = mkdtempSync(join(tmpdir(), "drydock-diff-"));
  const dataDir = join(root, "data");
  const state = { ...newRunState(), clock };
  const options = { now: () => clock.now, newKey: () => keyOf(++state.minted.n) };
  const storage = {
    current: await open(dataDir, options),
    async reopen() {
      await this.current.close();
      this.current = await open(dataDir, options);
    },
  };
  try {
    for (const command of commands) {
      if (command.op === "advance") clock.now += command.ms;
      await each(await applyToStorage(storage, state, command), storage.current);
    }
    return await storage.current.exportAll();
  } finally {
    await storage.current.close();
    rmSync(root, { recursive: true, force: true });
  }
}

async function run(open: Open, commands: JournalCommand[], clock: { now: number }) {
  const trace: { outcome: Outcome; exported: unknown }[] = [];
  await session(open, commands, clock, async (outcome, storage) => {
    trace.push({ outcome, exported: canonicalExport(await storage.exportAll()) });
  });
  return trace;
}

describe("differential: file and sqlite", () => {
  it("answer the same command sequences with the same results, errors and exports", async () => {
    let commandsRun = 0;
    let refusals = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(journalCommandArb, { minLength: 1, maxLength: 60, size: "large" }),
        async (commands) => {
          const T = 1_767_000_000_000;
          const file = await run((dataDir, o) => openFileStorage({ dataDir, ...o }), commands, { now: T });
          const sqlite = await run((dataDir, o) => openSqliteStorage({ dataDir, ...o }), commands, {
            now: T,
          });
          expect(sqlite).toEqual(file);
          commandsRun += commands.length;
          refusals += file.filter((step) => !step.outcome.ok).length;
        },
      ),
      { numRuns: 30 },
    );
    // The sequences exercised refusals too, not only happy paths.
    expect(commandsRun).toBeGreaterThan(100);
    expect(refusals).toBeGreaterThan(0);
  });
});

describe("differential: import across backends", () => {
  it("a file store's export imports into sqlite, and a sqlite store's into file, exporting equal (keys, times, marks)", async () => {
    let bots = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(journalCommandArb, { minLength: 1, maxLength: 40, size: "large" }),
        async (commands) => {
          const T = 1_767_000_000_000;
          const backends: Open[] = [
            (dataDir, o) => openFileStorage({ dataDir, ...o }),
            (dataDir, o) => openSqliteStorage({ dataDir, ...o }),
          ];
          for (const [from, to] of [
            [backends[0], backends[1]],
            [backends[1], backends[0]],
          ] as [Open, Open][]) {
            const exported = await exportAfter(from, commands, { now: T });
            bots += exported.bots.length;
            const root = mkdtempSync(join(tmpdir(), "drydock-diff-"));
            const target = await to(join(root, "data"), { now: () => T, newKey: () => keyOf(0) });
            try {
              await target.importAll(exported);
              expect(await target.exportAll()).toEqual(exported);
            } finally {
              await target.close();
              rmSync(root, { recursive: true, force: true });
            }
          }
        },
      ),
      { numRuns: 15 },
    );
    expect(bots).toBeGreaterThan(0);
  });
});

function exportAfter(open: Open, commands: JournalCommand[], clock: { now: number }) {
  return session(open, commands, clock);
}
