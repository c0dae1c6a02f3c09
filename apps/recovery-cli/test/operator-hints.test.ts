/**
 * Every "run …" hint the CLI prints names the data directory it was run with (`drydock --data-dir <dir>`):
 * on a server run with DRYDOCK_DATA_DIR=/srv/x, a pasted `drydock restores show X` would read ./.drydock
 * instead (exit 3, or another installation). In-process `main`, run from another directory with the data
 * directory in the environment, as an operator on such a server would.
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { drydockCommandPrefix } from "@drydock/recovery-controller";
import { openSagaStore } from "@drydock/restore-saga";
import { afterEach, describe, expect, it, vi } from "vitest";

/** When set, a release reports that archiving failed (the saga settled, not filed yet). */
const archiveFails = { on: false };

vi.mock("@drydock/recovery-controller", async (importOriginal) => {
  const actual = await importOriginal<typeof import("@drydock/recovery-controller")>();
  return {
    ...actual,
    createRestoreRecoveryController: (
      options: Parameters<typeof actual.createRestoreRecoveryController>[0],
    ) => {
      const controller = actual.createRestoreRecoveryController(options);
      return {
        ...controller,
        async abort(...args: Parameters<typeof controller.abort>) {
          const result = await controller.abort(...args);
          return archiveFails.on
            ? {
                ...result,
                archived: false,
                warning: { code: "WRITE_FAILED", message: "test: archive failed", commitState: null },
              }
            : result;
        },
      };
    },
  };
});

const { bufferIo, main } = await import("../src/index.js");

const roots: string[] = [];
afterEach(() => {
  archiveFails.on = false;
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
});

/** A data directory holding one restore killed right after `created` (its process is gone). */
async function installation(): Promise<{ dataDir: string; cwd: string; prefix: string }> {
  const root = mkdtempSync(join(tmpdir(), "drydock-hints-"));
  roots.push(root);
  const dataDir = join(root, "srv", "drydock");
  const workspace = join(dataDir, "workspaces", "bot1");
  mkdirSync(workspace, { recursive: true });
  const cwd = join(root, "elsewhere");
  mkdirSync(cwd);
  const deadPid = spawnSync(process.execPath, ["-e", ""]).pid!;
  await openSagaStore({ stateDir: join(dataDir, "restore-sagas"), workspaceRoot: workspace }).create("op-1", {
    kind: "checkpoint-restore",
    checkpointId: "cp-1",
    checkpointManifestDigest: `sha256:${"a".repeat(64)}`,
    actorPid: deadPid,
  });
  return { dataDir, cwd, prefix: drydockCommandPrefix(dataDir) };
}

async function cli(
  where: { dataDir: string; cwd: string },
  args: readonly string[],
): Promise<{ code: number; out: string; err: string }> {
  const io = bufferIo();
  const code = await main(args, { io, env: { DRYDOCK_DATA_DIR: where.dataDir }, cwd: where.cwd });
  return { code, out: io.out(), err: io.err() };
}

/** Every `drydock …` command quoted in `text`. */
function quotedCommands(text: string): string[] {
  return [...text.matchAll(/`(drydock[^`]*)`/g)].map((match) => match[1]!);
}

describe("printed hints carry the data directory", () => {
  it("restore refusals and warnings name `drydock --data-dir <dir> …`, never a bare `drydock …`", async () => {
    const at = await installation();
    const shown = await cli(at, ["restores", "show", "op-1", "--json"]);
    expect(shown.code, shown.err).toBe(0);
    const { fence } = JSON.parse(shown.out).restore as {
      fence: { expectedSeq: number; expectedHash: string };
    };
    const fenceArgs = (seq: number) => [
      "--expected-seq",
      String(seq),
      "--expected-hash",
      fence.expectedHash,
      "--expected-owner-digest",
      "none",
    ];

    const hints: string[] = [];
    // --yes without the fence (2), a fence that is not the saga's (4), an id that does not exist (3).
    const unfenced = await cli(at, ["restores", "abort", "op-1", "--yes"]);
    expect(unfenced.code).toBe(2);
    expect(unfenced.err).toContain(`\`${at.prefix} restores show op-1\``);
    const stale = await cli(at, ["restores", "abort", "op-1", ...fenceArgs(fence.expectedSeq + 1), "--yes"]);
    expect(stale.code).toBe(4);
    expect(stale.err).toContain(`Run \`${at.prefix} restores show op-1\` again.`);
    const missing = await cli(at, ["restores", "show", "op-nope"]);
    expect(missing.code).toBe(3);
    expect(missing.err).toContain(`(see \`${at.prefix} restores list\`)`);
    // A purge without its digest (2), or with the digest of another list (4).
    const purgeBare = await cli(at, ["restores", "purge", "--older-than-days", "7", "--yes"]);
    expect(purgeBare.code).toBe(2);
    expect(purgeBare.err).toContain(`run \`${at.prefix} restores purge --older-than-days 7\``);
    const purgeStale = await cli(at, [
      "restores",
      "purge",
      "--older-than-days",
      "0",
      "--expected-state",
      `sha256:${"0".repeat(64)}`,
      "--yes",
    ]);
    expect(purgeStale.code).toBe(4);
    expect(purgeStale.err).toContain(`Run \`${at.prefix} restores purge --older-than-days 0\` again`);
    // A Boat action applied without its --expected-state (2): the plan to read first.
    const adopt = await cli(at, ["creates", "adopt", "bot1", "bx_22222222", "--yes"]);
    expect(adopt.code).toBe(2);
    expect(adopt.err).toContain(`\`${at.prefix} reconcile\``);
    hints.push(unfenced.err, stale.err, missing.err, purgeBare.err, purgeStale.err, adopt.err);

    // A settled restore whose archiving failed: the release that files it later.
    archiveFails.on = true;
    const aborted = await cli(at, ["restores", "abort", "op-1", ...fenceArgs(fence.expectedSeq), "--yes"]);
    expect(aborted.code, aborted.err).toBe(0);
    expect(aborted.out).toContain(`\`${at.prefix} restores release op-1\` files it later`);
    hints.push(aborted.out);

    const commands = hints.flatMap(quotedCommands);
    expect(commands.length).toBeGreaterThanOrEqual(7);
    for (const command of commands) expect(command.startsWith(`${at.prefix} `), command).toBe(true);
  });
});
