// The bot registry and the migration, measured (never asserted in tests):
//   node --conditions=@drydock/source --import tsx packages/storage-sqlite/bench/registry.ts [bots]
// A page of 100 and count() at 1 and N bots on SQLite, a create on a full file registry (4,095 bots) beside
// SQLite at N, and migrateStorage of a 4,095-bot file data directory to SQLite and back.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Bot, migrateStorage, openFileStorage, type Storage } from "@drydock/storage";
import { openSqliteStorage, sqliteBackend } from "../src/index.js";

const N = Number(process.argv[2] ?? 100_000);
const bots = (n: number): Bot[] =>
  Array.from({ length: n }, (_, i) => ({
    botId: `b${String(i).padStart(7, "0")}`,
    name: `Bot ${i}`,
    createdAt: 1 + i,
  }));

async function median(label: string, runs: number, fn: (i: number) => Promise<unknown>): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < runs; i += 1) {
    const t = performance.now();
    await fn(i);
    times.push(performance.now() - t);
  }
  times.sort((a, b) => a - b);
  const m = times[Math.floor(times.length / 2)] as number;
  console.log(`${label}: median ${m.toFixed(3)} ms over ${runs}`);
  return m;
}

async function filled(open: (dataDir: string) => Promise<Storage>, n: number) {
  const root = mkdtempSync(join(tmpdir(), "drydock-bench-registry-"));
  const storage = await open(join(root, "data"));
  await storage.importAll({ creates: [], deletes: [], meta: {}, bots: bots(n) });
  return { storage, root, dataDir: join(root, "data") };
}

for (const n of [1, N]) {
  const { storage, root } = await filled((dataDir) => openSqliteStorage({ dataDir }), n);
  await median(`sqlite page(100) mid-registry at ${n} bots`, 50, () =>
    storage.bots.page({ after: `b${String(Math.floor(n / 2)).padStart(7, "0")}`, limit: 100 }),
  );
  await median(`sqlite count() at ${n} bots`, 50, () => storage.bots.count());
  await median(`sqlite create+remove at ${n} bots`, 50, async (i) => {
    await storage.bots.create({ botId: `new-${i}`, name: "New" });
    await storage.bots.remove(`new-${i}`);
  });
  await storage.close();
  rmSync(root, { recursive: true, force: true });
}
{
  const { storage, root, dataDir } = await filled((d) => openFileStorage({ dataDir: d }), 4_095);
  await median("file page(100) at 4,095 bots", 20, () =>
    storage.bots.page({ after: "b0002000", limit: 100 }),
  );
  await median("file create+remove at 4,095 bots", 10, async (i) => {
    await storage.bots.create({ botId: `new-${i}`, name: "New" });
    await storage.bots.remove(`new-${i}`);
  });
  await storage.close();
  let t = performance.now();
  await migrateStorage({ dataDir, to: "sqlite", backends: { sqlite: sqliteBackend } });
  console.log(`migrate file → sqlite, 4,095 bots: ${(performance.now() - t).toFixed(0)} ms`);
  t = performance.now();
  await migrateStorage({ dataDir, to: "file", backends: { sqlite: sqliteBackend } });
  console.log(`migrate sqlite → file, 4,095 bots: ${(performance.now() - t).toFixed(0)} ms`);
  rmSync(root, { recursive: true, force: true });
}
