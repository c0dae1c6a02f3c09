// The file backend's store-held workspaces, beyond the conformance suite: where the files are, a damaged head
// refused with its bytes unchanged, and OS refusals (ENOSPC) during a blob or a head write typed, with the
// head unchanged and the next call working.
import { createHash } from "node:crypto";
import {
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  truncateSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type FileOpName, failNthCall, nodeFileOps } from "@drydock/file-lock";
import { afterEach, describe, expect, it } from "vitest";
import {
  isStorageError,
  isWorkspaceError,
  openFileStorage,
  STORE_WORKSPACES_DIR,
  workspacesOf,
} from "../src/index.js";

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});
function dataDir(): string {
  const root = mkdtempSync(join(tmpdir(), "drydock-storage-ws-"));
  cleanups.push(() => rmSync(root, { recursive: true, force: true }));
  return join(root, "data");
}
const bytes = (text: string) => Buffer.from(text, "utf8");
const sha = (text: string) => createHash("sha256").update(text).digest("hex");
async function refusal(call: () => Promise<unknown>): Promise<unknown> {
  return call().then(
    (value) => {
      throw new Error(`expected a refusal, got ${JSON.stringify(value)}`);
    },
    (error: unknown) => error,
  );
}
const codeOf = async (call: () => Promise<unknown>) => {
  const error = await refusal(call);
  return isStorageError(error) || isWorkspaceError(error) ? error.code : `not typed: ${String(error)}`;
};

describe("the file backend's workspaces", () => {
  it("live under <dataDir>/store-workspaces/ (never the server's <dataDir>/workspaces/): blobs by sha256, one head file per bot", async () => {
    const dir = dataDir();
    const storage = await openFileStorage({ dataDir: dir });
    await storage.workspaces.writeFile("ada", "notes/plan.md", bytes("the plan"));
    await storage.workspaces.checkpoint("ada", "cp-1");
    const root = join(dir, STORE_WORKSPACES_DIR);
    expect(STORE_WORKSPACES_DIR).toBe("store-workspaces");
    expect(existsSync(join(dir, "workspaces"))).toBe(false);
    expect(readFileSync(join(root, "blobs", sha("the plan")), "utf8")).toBe("the plan");
    expect(statSync(join(root, "blobs", sha("the plan"))).mode & 0o777).toBe(0o600);
    const head = JSON.parse(readFileSync(join(root, "heads", "ada.json"), "utf8"));
    expect(head).toMatchObject({
      format: 1,
      version: 1,
      files: [{ path: "notes/plan.md", sha256: sha("the plan") }],
    });
    expect(head.checkpoints.map((c: { checkpointId: string }) => c.checkpointId)).toEqual(["cp-1"]);
    // No temp file is left behind by a completed change.
    for (const sub of ["blobs", "heads"])
      expect(readdirSync(join(root, sub)).filter((f) => f.includes(".tmp-"))).toEqual([]);
    await storage.close();
  });

  for (const [name, damage] of [
    ["truncated", (path: string) => truncateSync(path, 17)],
    ["not JSON", (path: string) => writeFileSync(path, "\u0000\u0001garbage")],
    [
      "a manifest that breaks its format",
      (path: string) =>
        writeFileSync(
          path,
          JSON.stringify({
            format: 1,
            version: 2,
            files: [{ type: "file", path: "/etc" }],
            checkpoints: [],
            restores: [],
          }),
        ),
    ],
  ] as const) {
    it(`a head file that is ${name}: STORAGE_CORRUPT on every call, never read as empty, its bytes unchanged`, async () => {
      const dir = dataDir();
      const storage = await openFileStorage({ dataDir: dir });
      const ws = storage.workspaces;
      await ws.writeFile("ada", "f", bytes("one"));
      await ws.checkpoint("ada", "cp-1");
      const path = join(dir, STORE_WORKSPACES_DIR, "heads", "ada.json");
      damage(path);
      const damaged = readFileSync(path);
      const calls = [
        () => ws.head("ada"),
        () => ws.readFile("ada", "f"),
        () => ws.writeFile("ada", "g", bytes("g")),
        () => ws.deleteFile("ada", "f"),
        () => ws.checkpoint("ada", "cp-2"),
        () => ws.restore("ada", "cp-1", "op-1"),
        () => ws.listCheckpoints("ada"),
        () => ws.retireWorkspace("ada"),
      ];
      for (const call of calls) {
        const error = await refusal(call);
        expect(isStorageError(error) && error.code).toBe("STORAGE_CORRUPT");
        expect((error as Error).message).toMatch(/is damaged .*has not changed it/);
      }
      expect(readFileSync(path).equals(damaged)).toBe(true);
      // Another bot's workspace is its own.
      expect((await ws.writeFile("bob", "f", bytes("fine"))).version).toBe(1);
      await storage.close();
    });
  }

  // Fail exactly one call that creates a file in `sub` (the blob's or the head's temp file) with ENOSPC.
  const failFirstCreateIn = (sub: string) =>
    failNthCall(nodeFileOps, {
      n: 1,
      code: "ENOSPC",
      count: (name: FileOpName, args: unknown[]) =>
        name === "openSync" &&
        String(args[0]).includes(`/${STORE_WORKSPACES_DIR}/${sub}/`) &&
        String(args[0]).includes(".tmp-"),
    });

  for (const sub of ["blobs", "heads"]) {
    it(`a full disk while writing the ${sub === "blobs" ? "blob" : "head"}: ENOSPC in words that never say invalid, the head unchanged, the next call works`, async () => {
      const dir = dataDir();
      const plain = await openFileStorage({ dataDir: dir });
      await plain.workspaces.writeFile("ada", "kept", bytes("kept"));
      await plain.close();
      const headPath = join(dir, STORE_WORKSPACES_DIR, "heads", "ada.json");
      const headBytes = readFileSync(headPath);
      const faulty = failFirstCreateIn(sub);
      const storage = await openFileStorage({ dataDir: dir, fs: faulty.ops });
      const error = await refusal(() => storage.workspaces.writeFile("ada", "new", bytes("new bytes")));
      expect(faulty.fired()).toBe(true);
      expect(isStorageError(error) && [error.code, error.errno]).toEqual(["STORAGE_UNAVAILABLE", "ENOSPC"]);
      expect((error as Error).message).toMatch(/disk is full \(ENOSPC\)\. Nothing was changed\./);
      expect((error as Error).message).not.toMatch(/invalid|repair/i);
      expect(readFileSync(headPath).equals(headBytes)).toBe(true);
      expect((await storage.workspaces.head("ada")).files.map((f) => f.path)).toEqual(["kept"]);
      expect(
        (await storage.workspaces.writeFile("ada", "new", bytes("new bytes"), { expectedVersion: 1 }))
          .version,
      ).toBe(2);
      expect(Buffer.from((await storage.workspaces.readFile("ada", "new")).bytes).toString()).toBe(
        "new bytes",
      );
      await storage.close();
    });
  }

  it("workspacesOf: the bot server's choice is by kind — the store's on postgres, local files (null) on file and sqlite", async () => {
    const storage = await openFileStorage({ dataDir: dataDir() });
    expect(storage.workspaces).toBeDefined();
    expect(workspacesOf(storage)).toBeNull();
    expect(workspacesOf({ kind: "sqlite", workspaces: storage.workspaces })).toBeNull();
    expect(workspacesOf({ kind: "postgres", workspaces: storage.workspaces })).toBe(storage.workspaces);
    await storage.close();
  });

  it("a blob file that went missing: STORAGE_CORRUPT on read, a restore from it refused whole", async () => {
    const dir = dataDir();
    const storage = await openFileStorage({ dataDir: dir });
    const ws = storage.workspaces;
    await ws.writeFile("ada", "g", bytes("g"));
    await ws.checkpoint("ada", "cp-1");
    rmSync(join(dir, STORE_WORKSPACES_DIR, "blobs", sha("g")));
    expect(await codeOf(() => ws.readFile("ada", "g"))).toBe("STORAGE_CORRUPT");
    await ws.deleteFile("ada", "g");
    const head = await ws.head("ada");
    expect(await codeOf(() => ws.restore("ada", "cp-1", "op-1"))).toBe("STORAGE_CORRUPT");
    expect(await ws.head("ada")).toEqual(head);
    expect(await ws.getRestore("op-1")).toBeNull();
    await storage.close();
  });
});
