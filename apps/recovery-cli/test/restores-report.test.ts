/**
 * `status` and `restores list` over a data directory where one workspace's restores cannot be listed: the
 * gap is an attention line naming its bot, every other restore is still reported, and `status` exits 0
 * (OPERATORS.md: it exits non-zero only when it could not look at all).
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { acquireLock } from "@drydock/file-lock";
import { reportRestores } from "@drydock/recovery-controller";
import { openSagaStore } from "@drydock/restore-saga";
import { afterEach, describe, expect, it } from "vitest";
import { bufferIo, main } from "../src/index.js";

let dir: string | undefined;
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

describe("a workspace whose restores cannot be listed", () => {
  it("is an attention finding naming its bot; the other bots' restores are still shown (status exits 6 here: no boat.dev)", async () => {
    dir = mkdtempSync(join(tmpdir(), "drydock-gap-"));
    const broken = join(dir, "workspaces", "bot1");
    const fine = join(dir, "workspaces", "bot2");
    mkdirSync(broken, { recursive: true });
    mkdirSync(fine, { recursive: true });
    const stateDir = join(dir, "restore-sagas");
    // bot2: a restore killed right after `created` by a process that is gone.
    const deadPid = spawnSync(process.execPath, ["-e", ""]).pid!;
    await openSagaStore({ stateDir, workspaceRoot: fine }).create("op-bot2", {
      kind: "checkpoint-restore",
      checkpointId: "cp-1",
      checkpointManifestDigest: `sha256:${"a".repeat(64)}`,
      actorPid: deadPid,
    });
    // bot1: its shard is a file, so its sagas cannot be listed.
    writeFileSync(openSagaStore({ stateDir, workspaceRoot: broken }).shardDir, "not a directory");

    const status = bufferIo();
    // 6: boat.dev is not configured here, so the verdict is INCOMPLETE besides its attention items.
    expect(await main(["status", "--data-dir", dir], { io: status, env: {} })).toBe(6);
    expect(status.err()).toBe("");
    expect(status.out()).toContain("op-bot2");
    expect(status.out()).toContain("restores abort op-bot2");
    expect(status.out()).toMatch(/bot bot1: the restores of bot bot1 could not be listed/);
    const verdict = status.out().trim().split("\n").at(-1)!;
    expect(verdict).toContain("ATTENTION: 2 item(s)");
    expect(verdict).not.toMatch(/run the command shown beside each\.$/);

    const json = bufferIo();
    expect(await main(["status", "--data-dir", dir, "--json"], { io: json, env: {} })).toBe(6);
    const findings = JSON.parse(json.out()).findings as { subject: string; attention: boolean }[];
    expect(findings).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ subject: "op-bot2", attention: true }),
        expect.objectContaining({ subject: "bot bot1", attention: true, command: null }),
      ]),
    );

    const list = bufferIo();
    expect(await main(["restores", "list", "--data-dir", dir], { io: list, env: {} })).toBe(0);
    expect(list.err()).toBe("");
    expect(list.out()).toContain("op-bot2");
    expect(list.out()).toMatch(/bot bot1: the restores of bot bot1 could not be listed/);
    const listJson = bufferIo();
    expect(await main(["restores", "list", "--data-dir", dir, "--json"], { io: listJson, env: {} })).toBe(0);
    const listed = JSON.parse(listJson.out());
    expect(listed.restores.map((item: { operationId: string }) => item.operationId)).toEqual(["op-bot2"]);
    expect(listed.gaps).toEqual([
      { botId: "bot1", message: expect.stringContaining("the restores of bot bot1 could not be listed") },
    ]);
  });
});

describe("a restore whose create died before its saga was published", () => {
  it("is no finding: `status` and `restores list` show it as nothing to do and leave its directory (they change no file); the server's report removes it", async () => {
    dir = mkdtempSync(join(tmpdir(), "drydock-orphan-"));
    const workspace = join(dir, "workspaces", "bot1");
    mkdirSync(workspace, { recursive: true });
    const stateDir = join(dir, "restore-sagas");
    // The create stopped right after its genesis HEAD (the crash hook throws, so its locks were let go).
    const crashing = openSagaStore({
      stateDir,
      workspaceRoot: workspace,
      crash: {
        point(name: string) {
          if (name === "saga.after-genesis-head") throw new Error("killed");
        },
      },
    });
    await expect(
      crashing.create("op-orphan", {
        kind: "checkpoint-restore",
        checkpointId: "cp-1",
        checkpointManifestDigest: `sha256:${"a".repeat(64)}`,
        actorPid: process.pid,
      }),
    ).rejects.toThrow();
    const orphan = join(crashing.shardDir, "op-orphan");
    expect(existsSync(join(orphan, "HEAD"))).toBe(true);

    const status = bufferIo();
    expect(await main(["status", "--data-dir", dir], { io: status, env: {} })).toBe(6);
    expect(status.out().trim().split("\n").at(-1)).toContain(
      "INCOMPLETE: nothing needs a person in the journals, restores and locks, but boat.dev was not checked",
    );
    expect(existsSync(join(orphan, "HEAD"))).toBe(true);

    const list = bufferIo();
    expect(await main(["restores", "list", "--data-dir", dir, "--json"], { io: list, env: {} })).toBe(0);
    const listed = JSON.parse(list.out());
    expect(listed.gaps).toEqual([]);
    expect(listed.restores).toEqual([
      expect.objectContaining({
        botId: "bot1",
        operationId: "op-orphan",
        phase: "unpublished",
        attention: false,
        inProgress: false,
        command: null,
      }),
    ]);
    expect(listed.restores[0].problem).toMatch(/leaves its directory as it is/);
    expect(existsSync(join(orphan, "HEAD"))).toBe(true);

    // The bot server's report (not read-only) removes it and reports nothing.
    const served = await reportRestores({ dataDir: dir, commandPrefix: "drydock" });
    expect(served).toEqual({ restores: [], gaps: [] });
    expect(existsSync(orphan)).toBe(false);
  });
});

describe("a restore saga another live process is writing just now (a server still creating it)", () => {
  it("is in progress in `status`: no 'needs a person' line, the verdict says to run status again", async () => {
    dir = mkdtempSync(join(tmpdir(), "drydock-busy-"));
    const workspace = join(dir, "workspaces", "bot1");
    mkdirSync(workspace, { recursive: true });
    const store = openSagaStore({ stateDir: join(dir, "restore-sagas"), workspaceRoot: workspace });
    await store.create("op-busy", {
      kind: "checkpoint-restore",
      checkpointId: "cp-1",
      checkpointManifestDigest: `sha256:${"a".repeat(64)}`,
      actorPid: process.pid,
    });
    // A live process (this one, as file-lock sees it) holds the saga's own lock for the whole look.
    const held = await acquireLock(join(store.shardDir, ".locks", "op-busy.lock"), { label: "test" });
    try {
      const status = bufferIo();
      expect(await main(["status", "--data-dir", dir], { io: status, env: {} })).toBe(6);
      const lines = status.out().trim().split("\n");
      expect(lines).toContainEqual(
        expect.stringMatching(
          /^· restore op-busy: another drydock process is writing this restore's saga just now/,
        ),
      );
      expect(status.out()).not.toMatch(/^! restore op-busy/m);
      expect(lines.at(-1)).toMatch(
        /^INCOMPLETE: nothing needs a person in the journals, restores and locks, .* 1 item\(s\) are still in progress; run `.* status` again shortly \(with BOAT_API_URL and BOAT_API_TOKEN set in the environment\)\.$/,
      );
    } finally {
      held.release();
    }
  });
});
