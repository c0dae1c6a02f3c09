// Conformance fixture: one process of a race or a crash test. argv: <backend module> <dataDir> <goFile>
// <mode> [arg]. Race modes print "ready", wait for the go file so both processes act at the same moment,
// then print one JSON line. Crash modes stop dead at the named crash point (printing "at-point") for the
// parent to SIGKILL.
import { existsSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { pathToFileURL } from "node:url";
import type { Storage, StorageCrashHook } from "../contract.js";

const [moduleFile, dataDir, goFile, mode, arg] = process.argv.slice(2);
if (!moduleFile || !dataDir || !goFile || !mode)
  throw new Error("usage: race-worker <module> <dataDir> <goFile> <mode> [arg]");
const backend = (await import(pathToFileURL(moduleFile).href)) as {
  open(dataDir: string, options?: { crash?: StorageCrashHook }): Promise<Storage>;
};

const BODY = '{"ttlSeconds":28800,"noEnv":true}';

if (mode.startsWith("crash-")) {
  const crash: StorageCrashHook = (point) => {
    if (point !== arg) return;
    process.stdout.write("at-point\n");
    // Blocks the only thread inside the transaction; only SIGKILL ends it.
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
  };
  const storage = await backend.open(dataDir, { crash });
  if (mode === "crash-ws-restore") await storage.workspaces.restore("ada", "cp-1", "op-crash");
  else if (mode === "crash-begin") await storage.createJournal.beginBoatCreate("bot-1", BODY);
  else
    await storage.deleteJournal.prepareBoatDeletion({
      boxId: "bx_aaaaaaaa",
      name: "drydock-bx_aaaaaaaa",
      ownerBotId: "bot-1",
    });
  process.stdout.write("finished\n");
} else if (mode === "bot-mark") {
  // Sets a deletion mark and stays alive (holding it) until the parent kills it.
  const storage = await backend.open(dataDir);
  const mark = await storage.bots.markDeleting(arg as string);
  process.stdout.write(`${JSON.stringify(mark)}\n`);
  setInterval(() => {}, 60_000);
} else if (mode === "meta-fresh") {
  // Both processes open a data directory nobody created yet at the same moment: one creates the store,
  // the other must find it whole (never a half-created one), and both agree on the first writer's value.
  process.stdout.write("ready\n");
  await waitForGo(goFile);
  const storage = await backend.open(dataDir);
  const value = await storage.meta.getOrCreate("environment-id", () => arg as string);
  await storage.close();
  process.stdout.write(`${JSON.stringify({ value })}\n`);
} else {
  const storage = await backend.open(dataDir);
  // Primed: this process has read the state before the race, so a stale in-memory view would show.
  await storage.exportAll();
  process.stdout.write("ready\n");
  await waitForGo(goFile);
  let line: unknown;
  if (mode === "begin") {
    const attempt = await storage.createJournal.beginBoatCreate(arg as string, BODY);
    line = { startedNow: attempt.startedNow, key: attempt.request.idempotencyKey };
  } else if (mode === "bot-create") {
    line = await storage.bots.create({ botId: arg as string, name: `by ${process.pid}` }).then(
      () => ({ created: true }),
      (error: { code?: string }) => ({ created: false, code: error.code }),
    );
  } else if (mode === "prepare") {
    const once = await storage.deleteJournal.prepareBoatDeletionOnce({
      boxId: arg as string,
      name: `drydock-${arg}`,
      ownerBotId: "bot-1",
    });
    line = { prepared: once.prepared };
  } else if (mode === "ws-write") {
    // Both processes compare-and-set the same head version: one wins, the other is told the current one.
    line = await storage.workspaces
      .writeFile("ada", "f", Buffer.from(arg as string), { expectedVersion: 1 })
      .then(
        (done) => ({ version: done.version }),
        (error: { code?: string; currentVersion?: number }) => ({
          code: error.code,
          currentVersion: error.currentVersion,
        }),
      );
  } else {
    line = { value: await storage.meta.getOrCreate("environment-id", () => arg as string) };
  }
  await storage.close();
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

async function waitForGo(file: string): Promise<void> {
  for (let i = 0; i < 2_000 && !existsSync(file); i += 1) await sleep(5);
  if (!existsSync(file)) throw new Error("go file never appeared");
}
