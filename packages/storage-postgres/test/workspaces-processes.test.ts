// Workspaces used by real, separate processes on one PostgreSQL: two writers on the same bot (versions strictly
// increase, no acknowledged write is lost, a compare-and-set counter loses no increment), and a process
// SIGKILLed mid-restore at each crash point (the head is wholly old or wholly new; a retry with the same
// operation id applies the restore exactly once).
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { spawnWorker, type Worker } from "@drydock/test-kit";
import { describe, expect, it } from "vitest";
import type { PostgresStorage } from "../src/index.js";
import { useStores } from "./helpers.js";

const WORKER = fileURLToPath(new URL("./fixtures/workspace-worker.ts", import.meta.url));
const stores = useStores("wsp");

function start(storage: PostgresStorage, args: string[], go = "-"): Worker {
  const worker = spawnWorker(WORKER, [stores.url(), storage.schema, go, ...args]);
  stores.later(() => worker.kill());
  return worker;
}

/** Two workers that begin their changes together: each waits for the go file once it is ready. */
async function together(storage: PostgresStorage, args: string[][]): Promise<Worker[]> {
  const go = join(stores.dataDir(), "..", "go");
  const workers = args.map((a) => start(storage, a, go));
  await Promise.all(workers.map((worker) => worker.waitFor((line) => line === "ready")));
  writeFileSync(go, "");
  return workers;
}

async function finished(worker: Worker): Promise<string[]> {
  const { code, stderr } = await worker.exited;
  if (code !== 0) throw new Error(`worker exited ${code}: ${stderr}`);
  return worker.lines;
}

async function contents(storage: PostgresStorage, botId: string) {
  const head = await storage.workspaces.head(botId);
  const files: Record<string, string> = {};
  for (const file of head.files) {
    files[file.path] = Buffer.from((await storage.workspaces.readFile(botId, file.path)).bytes).toString();
  }
  return { version: head.version, files };
}

describe("workspaces: two processes on one bot", () => {
  it("writers: each one's acknowledged versions strictly increase, no two acks share a version, every ack'ed write is read back", async () => {
    const storage = await stores.open();
    const N = 40;
    const workers = await together(storage, [
      ["writer", "ada", "p", String(N)],
      ["writer", "ada", "q", String(N)],
    ]);
    const outputs = await Promise.all(workers.map(finished));
    const versions: number[] = [];
    const acked: Record<string, string> = {};
    for (const [index, lines] of outputs.entries()) {
      const mine = lines.filter((line) => line.startsWith("ack ")).map((line) => line.split(" "));
      expect(mine).toHaveLength(N);
      const own = mine.map(([, , version]) => Number(version));
      expect(own).toEqual([...own].sort((a, b) => a - b));
      expect(new Set(own).size).toBe(N);
      versions.push(...own);
      for (const [, path] of mine)
        acked[path as string] = `${index === 0 ? "p" : "q"}:${(path as string).split("/")[1]}`;
    }
    expect(new Set(versions).size).toBe(2 * N);
    expect(await contents(storage, "ada")).toEqual({ version: 2 * N, files: acked });
  });

  it("a compare-and-set counter: two processes' increments are all kept (the refused ones retried)", async () => {
    const storage = await stores.open();
    const N = 15;
    const workers = await together(storage, [
      ["counter", "ada", String(N)],
      ["counter", "ada", String(N)],
    ]);
    const outputs = await Promise.all(workers.map(finished));
    const values = outputs.flatMap((lines) =>
      lines.filter((line) => line.startsWith("ack ")).map((line) => Number(line.split(" ")[1])),
    );
    // Every acknowledged increment produced a distinct value: none overwrote another.
    expect(values.sort((a, b) => a - b)).toEqual(Array.from({ length: 2 * N }, (_, i) => i + 1));
    expect(await contents(storage, "ada")).toEqual({ version: 2 * N, files: { counter: String(2 * N) } });
  });
});

describe("workspaces: a process SIGKILLed mid-restore", () => {
  for (const [point, applied] of [
    ["postgres:after-begin", false],
    ["postgres:before-commit", false],
    ["postgres:after-commit", true],
  ] as const) {
    it(`at ${point}: the head is wholly ${applied ? "new" : "old"}; a retry with the same operation id applies it once`, async () => {
      const storage = await stores.open();
      const ws = storage.workspaces;
      await ws.writeFile("ada", "plan.md", Buffer.from("version one"));
      await ws.writeFile("ada", "keep", Buffer.from("kept"));
      await ws.checkpoint("ada", "cp-1");
      await ws.writeFile("ada", "plan.md", Buffer.from("version two"));
      await ws.deleteFile("ada", "keep");
      await ws.writeFile("ada", "extra", Buffer.from("extra"));
      const old = await contents(storage, "ada");
      const restored = { version: old.version + 1, files: { keep: "kept", "plan.md": "version one" } };

      const worker = start(storage, ["crash", "ada", "cp-1", "op-1", point]);
      const { signal } = await worker.exited;
      expect(signal).toBe("SIGKILL");
      expect(worker.lines).toContain(`at ${point}`);
      expect(await contents(storage, "ada")).toEqual(applied ? restored : old);
      expect((await ws.getRestore("op-1")) !== null).toBe(applied);

      // The retry (another process would do the same): applied exactly once either way.
      const retried = await ws.restore("ada", "cp-1", "op-1");
      expect([retried.fromVersion, retried.toVersion]).toEqual([old.version, old.version + 1]);
      expect(await contents(storage, "ada")).toEqual(restored);
      expect(await ws.restore("ada", "cp-1", "op-1")).toEqual(retried);
      expect((await ws.head("ada")).version).toBe(old.version + 1);
    });
  }
});
