import * as fs from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { openRestoreStores, type RestoreStores, restoreCheckpointWith, SagaError } from "../src/index.js";
import {
  makeRestoreFixture,
  makeTempDir,
  rejection,
  removeDir,
  sagaStoreFor,
  sameTree,
  snapshotTree,
} from "./helpers.js";

let base: string;
let fixture: Awaited<ReturnType<typeof makeRestoreFixture>>;

beforeEach(async () => {
  base = makeTempDir("stores");
  fixture = await makeRestoreFixture(base, 12);
});

afterEach(() => {
  removeDir(base);
});

function stores(): RestoreStores {
  return openRestoreStores({ dataDir: fixture.dataDir, workspaceRoot: fixture.workspace, durable: false });
}

describe("restoreCheckpointWith: the stores are given, not opened", () => {
  it("restores through the lock source it is given, taking the lock once for its own operation", async () => {
    const given = stores();
    const asked: string[] = [];
    const result = await restoreCheckpointWith(
      {
        ...given,
        workspaceLock: {
          acquire: (transactionId) => {
            asked.push(transactionId);
            return given.workspaceLock.acquire(transactionId);
          },
        },
      },
      { workspaceRoot: fixture.workspace, checkpointId: fixture.checkpointId, operationId: "op-given" },
    );
    expect(asked).toEqual(["op-given"]);
    expect(result).toMatchObject({ operationId: "op-given", phase: "completed", archived: true });
    expect(sameTree(snapshotTree(fixture.workspace), fixture.after)).toBe(true);
    expect((await given.sagas.loadArchived("op-given")).phase).toBe("completed");
  });

  it("refuses a saga store of another workspace before anything is written", async () => {
    const other = join(base, "other");
    fs.mkdirSync(other);
    const before = snapshotTree(fixture.workspace);
    const error = await rejection(
      restoreCheckpointWith(
        { ...stores(), sagas: sagaStoreFor(fixture.dataDir, other) },
        { workspaceRoot: fixture.workspace, checkpointId: fixture.checkpointId, operationId: "op-mixed" },
      ),
    );
    expect(error.code).toBe("INVALID_ARGUMENT");
    expect(error.message).toContain(other);
    expect(sameTree(snapshotTree(fixture.workspace), before)).toBe(true);
    expect((await sagaStoreFor(fixture.dataDir, other).listPending()).items).toEqual([]);
    expect((await sagaStoreFor(fixture.dataDir, fixture.workspace).listPending()).items).toEqual([]);
  });

  it("aborts and archives its saga when the lock source it is given refuses, and rethrows that refusal", async () => {
    const given = stores();
    const before = snapshotTree(fixture.workspace);
    const error = await rejection(
      restoreCheckpointWith(
        {
          ...given,
          workspaceLock: {
            acquire: async () => {
              throw new SagaError({ code: "LOCK_FAILED", message: "held elsewhere (test)" });
            },
          },
        },
        { workspaceRoot: fixture.workspace, checkpointId: fixture.checkpointId, operationId: "op-refused" },
      ),
    );
    expect(error.code).toBe("LOCK_FAILED");
    expect(error.message).toBe("held elsewhere (test)");
    const archived = await given.sagas.loadArchived("op-refused");
    expect(archived.phase).toBe("aborted");
    expect(archived.events.at(-1)?.evidence).toMatchObject({ errorCode: "LOCK_FAILED" });
    expect(sameTree(snapshotTree(fixture.workspace), before)).toBe(true);
  });
});
