// The migration-only workspace import (`drydock storage migrate --to postgres`) on a real PostgreSQL: a bot's
// head and checkpoints written under their own ids and creation times, read back whole; a re-run of the same
// import changes nothing; bytes that do not hash to the manifest, or a head or checkpoint id already holding
// something else, are refused with nothing changed.
import { createHash } from "node:crypto";
import { isWorkspaceError, type WorkspaceFile } from "@drydock/storage";
import { describe, expect, it } from "vitest";
import type { WorkspaceImport } from "../src/index.js";
import { refusal, useStores } from "./helpers.js";

const stores = useStores("wsimport", {});

const sha = (data: Uint8Array) => createHash("sha256").update(data).digest("hex");
function fileOf(path: string, text: string): { file: WorkspaceFile; bytes: Buffer } {
  const bytes = Buffer.from(text, "utf8");
  return { file: { type: "file", path, size: bytes.length, mode: 0o600, sha256: sha(bytes) }, bytes };
}

function importOf(head: string, checkpoint: string, createdAt = 1_700_000_000_123): WorkspaceImport {
  const now = fileOf("notes.txt", head);
  const then = fileOf("notes.txt", checkpoint);
  return {
    files: [now.file],
    checkpoints: [{ checkpointId: "cp-ada-1", createdAt, files: [then.file] }],
    blobs: new Map([
      [now.file.sha256, now.bytes],
      [then.file.sha256, then.bytes],
    ]),
  };
}

async function codeOf(call: () => Promise<unknown>): Promise<string> {
  const error = await refusal(call);
  if (isWorkspaceError(error)) return error.code;
  throw error;
}

describe("workspaces: the migration's import", () => {
  it("writes the head (version 1) and each checkpoint with its id and createdAt; a re-run changes nothing; the checkpoint restores", async () => {
    const storage = await stores.open();
    const ws = storage.workspaces;
    const input = importOf("now\n", "then\n");
    await ws.importWorkspace("ada", input);
    const first = await ws.exportWorkspace("ada");
    expect(first).toEqual({
      files: input.files,
      checkpoints: [
        { checkpointId: "cp-ada-1", createdAt: 1_700_000_000_123, files: input.checkpoints[0]?.files },
      ],
      badBlobs: [],
    });
    await ws.importWorkspace("ada", input);
    expect(await ws.exportWorkspace("ada")).toEqual(first);
    expect((await ws.head("ada")).version).toBe(1);
    await ws.restore("ada", "cp-ada-1", "op-import-1");
    expect(Buffer.from((await ws.readFile("ada", "notes.txt")).bytes).toString()).toBe("then\n");
  });

  it("refuses bytes that do not hash to the manifest, and a head or checkpoint id holding something else: nothing changed", async () => {
    const storage = await stores.open();
    const ws = storage.workspaces;
    const damaged = importOf("now\n", "then\n");
    const [sha256] = [...damaged.blobs.keys()];
    (damaged.blobs as Map<string, Uint8Array>).set(sha256 as string, Buffer.from("not it"));
    expect(await codeOf(() => ws.importWorkspace("ada", damaged))).toBe("WORKSPACE_INVALID_ARGUMENT");
    expect(await ws.exportWorkspace("ada")).toEqual({ files: [], checkpoints: [], badBlobs: [] });

    await ws.importWorkspace("ada", importOf("now\n", "then\n"));
    const before = await ws.exportWorkspace("ada");
    expect(await codeOf(() => ws.importWorkspace("ada", importOf("other\n", "then\n")))).toBe(
      "WORKSPACE_ID_CONFLICT",
    );
    expect(await codeOf(() => ws.importWorkspace("bob", importOf("now\n", "then\n")))).toBe(
      "WORKSPACE_ID_CONFLICT",
    );
    expect(await ws.exportWorkspace("ada")).toEqual(before);
    expect(await ws.exportWorkspace("bob")).toEqual({ files: [], checkpoints: [], badBlobs: [] });
  });
});
