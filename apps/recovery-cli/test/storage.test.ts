/**
 * `drydock` on the storage backends: the backend comes from the data directory's binding unless
 * `--storage`/DRYDOCK_STORAGE say otherwise, a choice the directory is not bound to is refused with the
 * binding's message, `status` names the backend, and the lists page with a stable order and a printed
 * `next:` line. In-process `main` with buffer streams; the state is written through the real backends.
 */
import { spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { scopedBoatName } from "@drydock/boat-lifecycle";
import { acquireWorkspaceLock, openSagaStore } from "@drydock/restore-saga";
import { openStorage, type Storage } from "@drydock/storage";
import { sqliteBackend } from "@drydock/storage-sqlite";
import { afterAll, describe, expect, it } from "vitest";
import { bufferIo, EXIT_CODES, main } from "../src/index.js";

const dirs: string[] = [];
const opens: Storage[] = [];
afterAll(async () => {
  for (const opened of opens) await opened.close();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

const BODY = JSON.stringify({ ttlSeconds: 28_800, noEnv: true });

/** A data directory bound to `kind`, with an environment id and create rows for `bots`, written through it. */
async function boundDir(kind: "file" | "sqlite", bots: readonly string[] = []) {
  const dir = mkdtempSync(join(tmpdir(), `drydock-cli-storage-${kind}-`));
  dirs.push(dir);
  const storage = await openStorage({ dataDir: dir, storage: kind, backends: { sqlite: sqliteBackend } });
  opens.push(storage);
  const environmentId = await storage.meta.getOrCreate("environment-id", randomUUID);
  for (const botId of bots) await storage.createJournal.beginBoatCreate(botId, BODY);
  return { dir, storage, environmentId };
}

async function cli(args: readonly string[], env: Record<string, string> = {}) {
  const io = bufferIo();
  const code = await main(args, { io, env });
  return { code, out: io.out(), err: io.err() };
}

describe("which backend drydock reads", () => {
  it("the data directory's binding by default: a sqlite directory's rows and environment id, with no flag", async () => {
    const { dir, environmentId } = await boundDir("sqlite", ["ada", "bob"]);
    const run = await cli(["creates", "list", "--data-dir", dir, "--json"]);
    expect(run.code, run.err).toBe(0);
    const listed = JSON.parse(run.out);
    expect(listed.creates.map((row: { botId: string }) => row.botId)).toEqual(["ada", "bob"]);
    // The environment id is the storage's meta: Boat names are computed from it.
    expect(listed.creates[0].expectedName).toBe(scopedBoatName(environmentId, "ada"));
    expect(listed.environmentIdMissing).toBe(false);
    // Saying the bound backend changes nothing.
    const said = await cli(["creates", "list", "--data-dir", dir, "--storage", "sqlite", "--json"]);
    const stable = (rows: { botId: string; createdAt: string; expectedName: string }[]) =>
      rows.map(({ botId, createdAt, expectedName }) => ({ botId, createdAt, expectedName }));
    expect(stable(JSON.parse(said.out).creates)).toEqual(stable(listed.creates));
  });

  for (const [bound, other] of [
    ["sqlite", "file"],
    ["file", "sqlite"],
  ] as const) {
    it(`a ${bound} directory refuses --storage ${other} and DRYDOCK_STORAGE=${other} (exit 2), naming both and the migrate command`, async () => {
      const { dir } = await boundDir(bound, ["ada"]);
      for (const run of [
        await cli(["creates", "list", "--data-dir", dir, "--storage", other]),
        await cli(["status", "--data-dir", dir], { DRYDOCK_STORAGE: other }),
      ]) {
        expect(run.code).toBe(EXIT_CODES.USAGE);
        expect(run.out).toBe("");
        expect(run.err).toContain(
          `The data directory ${dir} is bound to the ${bound} storage backend, but ${other} was asked for. Nothing was changed.`,
        );
        expect(run.err).toContain(`drydock storage migrate --data-dir ${JSON.stringify(dir)} --to ${other}`);
        expect(run.err).toContain("storage_backend_mismatch");
      }
    });
  }

  it("--storage sqlite on a directory never bound to it is not found (exit 3), and nothing is created", async () => {
    const dir = mkdtempSync(join(tmpdir(), "drydock-cli-storage-unbound-"));
    dirs.push(dir);
    // Not a data directory yet: refused (exit 3), nothing written.
    expect((await cli(["creates", "list", "--data-dir", dir, "--storage", "sqlite"])).code).toBe(
      EXIT_CODES.NOT_FOUND,
    );
    expect(readdirSync(dir)).toEqual([]);
    mkdirSync(join(dir, "workspaces"));
    const run = await cli(["creates", "list", "--data-dir", dir, "--storage", "sqlite"]);
    expect(run.code).toBe(EXIT_CODES.NOT_FOUND);
    expect(run.err).toContain(`The data directory ${dir} is not bound to the sqlite storage backend`);
    expect(readdirSync(dir).sort()).toEqual(["workspaces"]);
    // Reading it as file binds nothing either (binding is the server's first start's job).
    expect((await cli(["creates", "list", "--data-dir", dir])).code).toBe(0);
    expect(readdirSync(dir).sort()).toEqual(["workspaces"]);
  });

  it("a postgres URL on a file-bound directory, or an unknown backend, is a usage error that never echoes the URL", async () => {
    const { dir } = await boundDir("file");
    const pg = await cli(["status", "--data-dir", dir, "--storage", "postgres://u:hunter2-pw@db/x"]);
    expect(pg.code).toBe(EXIT_CODES.USAGE);
    expect(pg.err).toMatch(/bound to the file storage backend, but postgres was asked for/);
    expect(pg.err).not.toContain("hunter2-pw");
    const unknown = await cli(["status", "--data-dir", dir, "--storage", "mysql"]);
    expect(unknown.code).toBe(EXIT_CODES.USAGE);
    expect(unknown.err).toContain('unknown storage "mysql"');
  });

  for (const kind of ["file", "sqlite"] as const) {
    it(`status names the ${kind} backend and where it keeps its state`, async () => {
      const { dir } = await boundDir(kind);
      const human = await cli(["status", "--data-dir", dir]);
      const location = kind === "sqlite" ? join(dir, "drydock.sqlite") : `${dir}, one JSON file per journal`;
      expect(human.out.split("\n")[0]).toBe(`storage: ${kind} (${location})`);
      const json = JSON.parse((await cli(["status", "--data-dir", dir, "--json"])).out);
      expect(json.storage).toEqual({ kind, location });
    });
  }
});

/** Follows a list's `next:` lines from its first page; returns each page's rows (by `idOf`). */
async function allPages(first: readonly string[], idOf: (out: string) => string[]): Promise<string[][]> {
  const pages: string[][] = [];
  let args: readonly string[] | null = first;
  for (let guard = 0; args !== null && guard < 20; guard += 1) {
    const run = await cli(args);
    expect(run.code, run.err).toBe(0);
    pages.push(idOf(run.out));
    const next = /^next: (drydock .*)$/m.exec(run.out)?.[1];
    args = next === undefined ? null : next.split(" ").slice(1);
  }
  return pages;
}

for (const kind of ["file", "sqlite"] as const) {
  describe(`pages of the lists on ${kind}`, () => {
    it("creates list: --limit pages in bot order, the printed next: line pastes as is, and the last page has none", async () => {
      const bots = ["g", "c", "a", "f", "b", "e", "d"];
      const { dir } = await boundDir(kind, bots);
      const botsIn = (out: string) =>
        out
          .split("\n")
          .filter((line) => /^\S+\s+-\s+no\s/.test(line))
          .map((line) => line.split(/\s+/)[0] as string);
      const pages = await allPages(["creates", "list", "--data-dir", dir, "--limit", "3"], botsIn);
      expect(pages).toEqual([["a", "b", "c"], ["d", "e", "f"], ["g"]]);
    });

    it("--json carries nextCursor; a row added before the cursor never shifts the next page; a bad cursor or limit is exit 2", async () => {
      const { dir, storage } = await boundDir(kind, ["b1", "b2", "b3", "b4", "b5"]);
      /** One `creates list --json` page of 2 rows, after `cursor`: its bots and its nextCursor. */
      const page = async (cursor?: string) => {
        const args = ["creates", "list", "--data-dir", dir, "--limit", "2", "--json"];
        const listed = JSON.parse(
          (await cli(cursor === undefined ? args : [...args, "--cursor", cursor])).out,
        );
        return {
          bots: listed.creates.map((row: { botId: string }) => row.botId),
          nextCursor: listed.nextCursor as string | null,
        };
      };
      const first = await page();
      expect(first.bots).toEqual(["b1", "b2"]);
      expect(first.nextCursor).toEqual(expect.any(String));
      await storage.createJournal.beginBoatCreate("a0", BODY);
      const second = await page(first.nextCursor as string);
      expect(second.bots).toEqual(["b3", "b4"]);
      const third = await page(second.nextCursor as string);
      expect(third.bots).toEqual(["b5"]);
      expect(third.nextCursor).toBeNull();
      // The default page (100) holds them all.
      const all = JSON.parse((await cli(["creates", "list", "--data-dir", dir, "--json"])).out);
      expect(all.creates).toHaveLength(6);
      expect(all.nextCursor).toBeNull();

      for (const bad of [
        ["--cursor", "not-a-cursor"],
        ["--limit", "0"],
        ["--limit", "501"],
        ["--limit", "ten"],
      ]) {
        const run = await cli(["creates", "list", "--data-dir", dir, ...bad]);
        expect(run.code, bad.join(" ")).toBe(EXIT_CODES.USAGE);
        expect(run.out).toBe("");
      }
    });

    it("locks list pages in lock-path order, every lock on exactly one page", async () => {
      const { dir } = await boundDir(kind);
      const held = [];
      for (const name of ["w1", "w2", "w3"]) {
        const workspaceRoot = join(dir, "workspaces", name);
        mkdirSync(workspaceRoot, { recursive: true });
        held.push(
          await acquireWorkspaceLock({
            dataDir: dir,
            workspaceRoot,
            transactionId: `edit-${name}`,
            purpose: "workspace-edit",
          }),
        );
      }
      try {
        const all = JSON.parse((await cli(["locks", "list", "--data-dir", dir, "--json"])).out);
        const paths = all.locks.map((row: { path: string }) => row.path);
        expect(paths.length).toBeGreaterThanOrEqual(3);
        expect(paths).toEqual([...paths].sort());
        const pathsIn = (out: string) =>
          paths.filter((path: string) => out.split("\n").some((line) => line.startsWith(`${path} `)));
        const pages = await allPages(["locks", "list", "--data-dir", dir, "--limit", "2"], pathsIn);
        expect(pages.every((page) => page.length <= 2)).toBe(true);
        expect(pages.flat()).toEqual(paths);
      } finally {
        for (const lock of held) lock.release();
      }
    });

    it("restores list pages by bot, then operation: each restore on exactly one page", async () => {
      const { dir } = await boundDir(kind);
      // Restores killed right after `created` by a process that is gone: each is listed with its abort.
      const deadPid = spawnSync(process.execPath, ["-e", ""]).pid as number;
      const stateDir = join(dir, "restore-sagas");
      for (const [bot, operationId] of [
        ["bot-b", "op-2"],
        ["bot-a", "op-9"],
        ["bot-b", "op-1"],
      ] as const) {
        const workspaceRoot = join(dir, "workspaces", bot);
        mkdirSync(workspaceRoot, { recursive: true });
        await openSagaStore({ stateDir, workspaceRoot }).create(operationId, {
          kind: "checkpoint-restore",
          checkpointId: "cp-1",
          checkpointManifestDigest: `sha256:${"a".repeat(64)}`,
          actorPid: deadPid,
        });
      }
      // The operation column of each table row, in the printed order.
      const opsIn = (out: string) =>
        out
          .split("\n")
          .map((line) => line.split(/\s+/)[1] ?? "")
          .filter((word) => /^op-\d$/.test(word));
      const pages = await allPages(["restores", "list", "--data-dir", dir, "--limit", "2"], opsIn);
      expect(pages).toEqual([["op-9", "op-1"], ["op-2"]]);
    });

    it("deletions list pages in Boat order", async () => {
      const { dir, storage } = await boundDir(kind);
      for (const boxId of ["bx_cccccccc", "bx_aaaaaaaa", "bx_bbbbbbbb"]) {
        await storage.deleteJournal.prepareBoatDeletion({ boxId, name: `n-${boxId}`, ownerBotId: null });
      }
      const boxesIn = (out: string) =>
        out
          .split("\n")
          .filter((line) => line.startsWith("bx_"))
          .map((line) => line.split(/\s+/)[0] as string);
      const pages = await allPages(["deletions", "list", "--data-dir", dir, "--limit", "2"], boxesIn);
      expect(pages).toEqual([["bx_aaaaaaaa", "bx_bbbbbbbb"], ["bx_cccccccc"]]);
    });
  });
}
