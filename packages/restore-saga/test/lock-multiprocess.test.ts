import { spawn } from "node:child_process";
import * as fs from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import {
  acquireWorkspaceLock,
  inspectWorkspaceLock,
  ownerDigest,
  takeoverWorkspaceLock,
} from "../src/index.js";
import { makeTempDir, rejection, removeDir } from "./helpers.js";

const FIXTURE = fileURLToPath(new URL("./fixtures/lock-child.ts", import.meta.url));
const PACKAGE_DIR = fileURLToPath(new URL("..", import.meta.url));

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

describe("workspace lock across processes", () => {
  it("refuses an overlapping workspace while another process holds it, and takes over only once it is dead", async () => {
    const base = makeTempDir("wsmp");
    cleanups.push(() => removeDir(base));
    const dataDir = join(base, "data");
    const parent = join(base, "ws");
    const child = join(parent, "inner");
    fs.mkdirSync(child, { recursive: true });
    const proc = spawn(
      process.execPath,
      ["--conditions=@drydock/source", "--import", "tsx", FIXTURE, dataDir, child, "op-child"],
      {
        cwd: PACKAGE_DIR,
        detached: true,
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    cleanups.push(() => {
      try {
        process.kill(-proc.pid!, "SIGKILL");
      } catch {
        // Already gone.
      }
    });
    const exited = new Promise<void>((done) => proc.on("exit", () => done()));
    const digest = await new Promise<string>((resolve, reject) => {
      let out = "";
      let err = "";
      proc.stdout.on("data", (chunk: Buffer) => {
        out += chunk.toString();
        const match = /ready (sha256:[0-9a-f]{64})\n/.exec(out);
        if (match) resolve(match[1]!);
      });
      proc.stderr.on("data", (chunk: Buffer) => {
        err += chunk.toString();
      });
      proc.on("exit", () => reject(new Error(`lock child exited: ${err}`)));
    });

    const live = await rejection(
      acquireWorkspaceLock({ dataDir, workspaceRoot: parent, transactionId: "op-parent", waitMs: 50 }),
    );
    expect(live.code).toBe("WORKSPACE_LOCKED");
    expect(live.details).toMatchObject({
      ownerOperationId: "op-child",
      ownerPid: proc.pid,
      ownerWorkspaceRoot: child,
    });
    const owner = inspectWorkspaceLock({ dataDir, workspaceRoot: child })!;
    expect(ownerDigest(owner)).toBe(digest);
    const refused = await rejection(
      takeoverWorkspaceLock({
        dataDir,
        workspaceRoot: child,
        transactionId: "op-child",
        expectedOwner: owner,
      }),
    );
    expect(refused.code).toBe("WORKSPACE_LOCKED");

    process.kill(-proc.pid!, "SIGKILL");
    await exited;
    const dead = await rejection(
      acquireWorkspaceLock({ dataDir, workspaceRoot: parent, transactionId: "op-parent" }),
    );
    expect(dead.code).toBe("RECOVERY_REQUIRED");
    expect(inspectWorkspaceLock({ dataDir, workspaceRoot: child })).toEqual(owner);

    const lease = await takeoverWorkspaceLock({
      dataDir,
      workspaceRoot: child,
      transactionId: "op-child",
      expectedOwner: owner,
    });
    expect(lease.priorOwner).toEqual(owner);
    expect(lease.owner.pid).toBe(process.pid);
    lease.release();
    const parentLock = await acquireWorkspaceLock({
      dataDir,
      workspaceRoot: parent,
      transactionId: "op-parent",
    });
    parentLock.release();
  });
});
