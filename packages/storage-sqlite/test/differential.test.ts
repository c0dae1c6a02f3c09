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

async function run(open: Open, commands: JournalCommand[], clock: { now: number }) {
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
  const trace: { outcome: Outcome; exported: unknown }[] = [];
  try {
    for (const command of commands) {
      if (command.op === "advance") clock.now += command.ms;
      trace.push({
        outcome: await applyToStorage(storage, state, command),
        exported: canonicalExport(await storage.current.exportAll()),
      });
    }
    return trace;
  } finally {
    await storage.current.close();
    rmSync(root, { recursive: true, force: true });
  }
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

async function exportAfter(open: Open, commands: JournalCommand[], clock: { now: number }) {
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
      await applyToStorage(storage, state, command);
    }
    return await storage.current.exportAll();
  } finally {
    await storage.current.close();
    rmSync(root, { recursive: true, force: true });
  }
}
