import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { spawnWorker } from "@drydock/test-kit";
import { afterEach, describe, expect, it } from "vitest";
import { bindStorage, openStorage, readStorageBinding } from "../src/index.js";

const WORKER = new URL("./fixtures/bind-worker.ts", import.meta.url).pathname;
const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});
function dataDir(): string {
  const root = mkdtempSync(join(tmpdir(), "drydock-storage-binding-"));
  cleanups.push(() => rmSync(root, { recursive: true, force: true }));
  return join(root, "data");
}

describe("the data directory's storage binding", () => {
  it("binds a new directory on first use, and refuses another backend naming both and the migrate command", async () => {
    const dir = dataDir();
    expect(await readStorageBinding(dir)).toBeNull();
    await bindStorage(dir, "sqlite");
    expect(JSON.parse(readFileSync(join(dir, "storage.json"), "utf8"))).toEqual({
      version: 1,
      kind: "sqlite",
    });
    const before = readFileSync(join(dir, "storage.json"));
    const refusal = await bindStorage(dir, "file").catch((error: unknown) => error);
    expect(refusal).toMatchObject({ code: "STORAGE_BACKEND_MISMATCH", status: 409 });
    const message = (refusal as Error).message;
    expect(message).toContain("bound to the sqlite storage backend, but file was asked for");
    expect(message).toContain("Nothing was changed");
    expect(message).toContain(`drydock storage migrate --data-dir "${dir}" --to file`);
    expect(readFileSync(join(dir, "storage.json")).equals(before)).toBe(true);
    // openStorage checks the binding before it opens (or creates) anything of the file backend.
    await expect(openStorage({ dataDir: dir, storage: "file" })).rejects.toMatchObject({
      code: "STORAGE_BACKEND_MISMATCH",
    });
    expect(await readStorageBinding(dir)).toEqual({ kind: "sqlite" });
  });

  it("takes a directory the file backend (or the seeds) wrote before bindings existed as bound to file", async () => {
    for (const name of [
      "bots.json",
      "box-create-requests.json",
      "box-delete-requests.json",
      "environment-id",
    ]) {
      const dir = dataDir();
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, name), "whatever the seeds wrote");
      expect(await readStorageBinding(dir)).toEqual({ kind: "file" });
      await expect(bindStorage(dir, "sqlite")).rejects.toMatchObject({ code: "STORAGE_BACKEND_MISMATCH" });
      expect((await bindStorage(dir, "file")).kind).toBe("file");
    }
  });

  it("refuses a damaged binding or one from a newer drydock, and never rewrites it", async () => {
    const cases: [string, string][] = [
      ["{not json", "STORAGE_CORRUPT"],
      ['{"version":1,"kind":"oracle"}', "STORAGE_CORRUPT"],
      ['{"version":2,"kind":"file"}', "STORAGE_NEWER"],
    ];
    for (const [bytes, code] of cases) {
      const dir = dataDir();
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, "storage.json"), bytes);
      await expect(bindStorage(dir, "file")).rejects.toMatchObject({ code });
      await expect(openStorage({ dataDir: dir })).rejects.toMatchObject({ code });
      expect(readFileSync(join(dir, "storage.json"), "utf8")).toBe(bytes);
    }
  });

  it("a binding that cannot be read is never taken for a missing one (which would bind anew)", async () => {
    const dir = dataDir();
    mkdirSync(join(dir, "storage.json"), { recursive: true });
    const error = await bindStorage(dir, "sqlite").catch((e: unknown) => e);
    expect((error as NodeJS.ErrnoException).code).toBe("EISDIR");
    expect(await readStorageBinding(dir).catch((e: unknown) => (e as NodeJS.ErrnoException).code)).toBe(
      "EISDIR",
    );
  });

  it("two processes binding a new directory at once to different backends: exactly one wins, the other is refused", async () => {
    for (let round = 0; round < 4; round += 1) {
      const dir = dataDir();
      const goFile = `${dir}.go`;
      const workers = (["file", "sqlite"] as const).map((kind) => spawnWorker(WORKER, [dir, kind, goFile]));
      try {
        await Promise.all(workers.map((w) => w.waitFor((line) => line === "ready")));
        writeFileSync(goFile, "");
        const outs = await Promise.all(
          workers.map((w) => w.waitFor((line) => line.startsWith("bound") || line.startsWith("refused"))),
        );
        const bound = JSON.parse(readFileSync(join(dir, "storage.json"), "utf8")).kind as string;
        expect(outs.sort()).toEqual([`bound ${bound}`, "refused STORAGE_BACKEND_MISMATCH"].sort());
      } finally {
        for (const w of workers) w.kill();
      }
    }
  }, 120_000);
});
