/**
 * `drydock storage migrate --to file|sqlite` (issue #23): the preview counts what would move and prints a
 * fenced paste-back command; the apply moves the journals, bots and meta (verified by @drydock/storage's
 * `migrateStorage`), rebinds the directory and retires the source; a state that moved since the preview is
 * refused (exit 4), and so is a directory in use — by a real `drydock-server` process or by a `drydock`
 * command holding its storage open with --yes (exit 5, STORAGE_IN_USE naming the pid). In-process `main`
 * with buffer streams, except the server, which is the real one started through tsx.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { type BoatSimulator, startBoatSimulator } from "@drydock/boat-provider/simulator";
import { MIGRATE_CRASH_POINTS, openStorage, type StorageExport, type StorageKind } from "@drydock/storage";
import { sqliteBackend } from "@drydock/storage-sqlite";
import { killWorkerAt } from "@drydock/test-kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
// The bot server's own helper, which starts it as its tests do (a real process, its own group).
import { type ServerChild, spawnServer } from "../../bot-server/test/helpers.js";
import { type BufferIo, bufferIo, EXIT_CODES, main, StorageMigrateDocumentSchema } from "../src/index.js";
import { seedFileRows, snapshotTree } from "./harness.js";

const HERE = dirname(fileURLToPath(import.meta.url));
const REPO_ROOT = join(HERE, "..", "..", "..");
const SERVER_MAIN = join(REPO_ROOT, "apps", "bot-server", "src", "main.ts");
/** storage-sqlite's migration worker: migrateStorage stopped dead at a crash point, for the parent to SIGKILL. */
const MIGRATE_WORKER = join(REPO_ROOT, "packages", "storage-sqlite", "test", "fixtures", "migrate-worker.ts");
const JOURNAL_FILES = ["bots.json", "box-create-requests.json", "box-delete-requests.json"];

const dirs: string[] = [];
let sim: BoatSimulator;
beforeAll(async () => {
  sim = await startBoatSimulator({ provisionMs: 0 });
});
afterAll(async () => {
  await sim?.close();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

async function cli(args: readonly string[], io: BufferIo = bufferIo(), env: Record<string, string> = {}) {
  const code = await main(args, { io, env });
  return { code, out: io.out(), err: io.err() };
}

async function openKind(dir: string, kind: StorageKind) {
  return openStorage({ dataDir: dir, storage: kind, backends: { sqlite: sqliteBackend } });
}

/** Everything `dir`'s `kind` store holds, read through the real backend. */
async function exported(dir: string, kind: StorageKind): Promise<StorageExport> {
  const storage = await openKind(dir, kind);
  try {
    return await storage.exportAll();
  } finally {
    await storage.close();
  }
}

/** A data directory on the file backend with rows of every kind (harness.ts `seedFileRows`). */
async function fileDir(): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), "drydock-cli-migrate-"));
  dirs.push(dir);
  await seedFileRows(dir);
  return dir;
}

/** A real process migrating `dir` to sqlite, SIGKILLed at `point`: the directory as a killed migration leaves it. */
async function killMigrationAt(dir: string, point: string): Promise<void> {
  const ended = await killWorkerAt(MIGRATE_WORKER, [dir, "migrate", "sqlite", point], (line) =>
    line.startsWith("at-point "),
  );
  expect(ended.signal).toBe("SIGKILL");
}

/** `drydock --data-dir <dir> storage migrate --to <to> …` as argv. */
function migrateArgs(dir: string, to: StorageKind, ...rest: string[]): string[] {
  return ["--data-dir", dir, "storage", "migrate", "--to", to, ...rest];
}

/** The paste-back command a preview printed (its last `drydock …` line), as argv. */
function printed(out: string): string[] {
  const line = out
    .split("\n")
    .map((text) => text.trim())
    .filter((text) => text.startsWith("drydock "))
    .at(-1);
  expect(line, out).toBeDefined();
  return (line as string).split(" ").slice(1);
}

/** The preview of `--to <to>`, checked: exit 0, nothing changed, and the paste-back command. */
async function preview(dir: string, to: StorageKind): Promise<{ out: string; pasted: string[] }> {
  const before = snapshotTree(dir);
  const run = await cli(["--data-dir", dir, "storage", "migrate", "--to", to]);
  expect(run.code, run.err).toBe(0);
  expect(snapshotTree(dir)).toEqual(before);
  return { out: run.out, pasted: printed(run.out) };
}

/** `creates list` and `deletions list` as --json rows (the fields that do not move with the clock). */
async function listed(dir: string, extra: readonly string[] = []) {
  const creates = await cli(["--data-dir", dir, ...extra, "creates", "list", "--json"]);
  const deletions = await cli(["--data-dir", dir, ...extra, "deletions", "list", "--json"]);
  expect(creates.code, creates.err).toBe(0);
  expect(deletions.code, deletions.err).toBe(0);
  return {
    creates: JSON.parse(creates.out).creates.map((row: Record<string, unknown>) => ({
      botId: row.botId,
      createdAt: row.createdAt,
      expectedName: row.expectedName,
    })),
    deletions: JSON.parse(deletions.out).deletions.map((row: Record<string, unknown>) => ({
      boxId: row.boxId,
      name: row.name,
      phase: row.phase,
    })),
  };
}

function bindingOf(dir: string): unknown {
  return JSON.parse(readFileSync(join(dir, "storage.json"), "utf8"));
}

function claimsIn(dir: string): string[] {
  try {
    return readdirSync(join(dir, "locks")).filter((name) => name.startsWith("claim-"));
  } catch {
    return [];
  }
}

describe("drydock storage migrate: preview and apply", () => {
  it("file → sqlite: the preview counts the rows and prints a fenced command; pasting it migrates, rebinds, retires the JSON files, and status/lists read the same rows", async () => {
    const dir = await fileDir();
    const source = await exported(dir, "file");
    const lists = await listed(dir);
    expect(lists.creates.map((row: { botId: string }) => row.botId)).toEqual(["ada", "bob"]);

    const { out, pasted } = await preview(dir, "sqlite");
    expect(out).toContain(
      "Preview: move 2 create row(s), 1 deletion fence(s), 2 bot(s), 1 meta value(s) from file to sqlite.",
    );
    expect(out).toContain("Stop every drydock server on this data directory first");
    expect(out).toContain("Nothing was changed.");
    expect(pasted.slice(0, 6)).toEqual(["--data-dir", dir, "storage", "migrate", "--to", "sqlite"]);
    expect(pasted.slice(6, 8)).toEqual(["--yes", "--expected-state"]);
    expect(pasted[8]).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(existsSync(join(dir, "drydock.sqlite"))).toBe(false);

    const applied = await cli(pasted);
    expect(applied.code, applied.err).toBe(0);
    expect(applied.out).toContain(
      "Migrated 2 create row(s), 1 deletion fence(s), 2 bot(s), 1 meta value(s) from file to sqlite (migrated)",
    );
    expect(applied.out).toContain("start the server with DRYDOCK_STORAGE=sqlite");
    expect(bindingOf(dir)).toEqual({ version: 1, kind: "sqlite" });
    // Every row is in the database, field for field.
    expect(await exported(dir, "sqlite")).toEqual(source);
    // The JSON files are retired: they name where the state went and keep what they held.
    for (const name of JOURNAL_FILES) {
      const retired = JSON.parse(readFileSync(join(dir, name), "utf8"));
      expect(retired, name).toMatchObject({ version: "migrated", to: "sqlite", at: expect.any(Number) });
      expect(retired.was, name).toBeDefined();
    }
    // No claim or progress record is left behind.
    expect(claimsIn(dir)).toEqual([]);
    expect(existsSync(join(dir, "locks", "storage-migrate.json"))).toBe(false);

    // drydock reads the same rows from sqlite, by the binding and by --storage sqlite.
    const status = await cli(["--data-dir", dir, "--storage", "sqlite", "status"]);
    expect(status.out.split("\n")[0]).toBe(`storage: sqlite (${join(dir, "drydock.sqlite")})`);
    expect(await listed(dir, ["--storage", "sqlite"])).toEqual(lists);
    expect(await listed(dir)).toEqual(lists);
    // The file backend is refused now (the binding's message, naming the migrate command back).
    const asFile = await cli(["--data-dir", dir, "--storage", "file", "creates", "list"]);
    expect(asFile.code).toBe(EXIT_CODES.USAGE);
    expect(asFile.err).toContain("is bound to the sqlite storage backend, but file was asked for");

    // A second preview: already bound, nothing to do.
    const again = await cli(["--data-dir", dir, "storage", "migrate", "--to", "sqlite"]);
    expect(again.code).toBe(0);
    expect(again.out).toContain("already bound to sqlite. Nothing was changed.");
  });

  it("round trip back to file: the same rows, the JSON files live again (version 1), the database retired", async () => {
    const dir = await fileDir();
    const source = await exported(dir, "file");
    const lists = await listed(dir);
    expect((await cli((await preview(dir, "sqlite")).pasted)).code).toBe(0);

    const back = await preview(dir, "file");
    expect(back.out).toContain(
      "Preview: move 2 create row(s), 1 deletion fence(s), 2 bot(s), 1 meta value(s) from sqlite to file.",
    );
    const applied = await cli(back.pasted);
    expect(applied.code, applied.err).toBe(0);
    expect(bindingOf(dir)).toEqual({ version: 1, kind: "file" });
    expect(await exported(dir, "file")).toEqual(source);
    for (const name of JOURNAL_FILES) {
      expect(JSON.parse(readFileSync(join(dir, name), "utf8")).version, name).toBe(1);
    }
    expect(await listed(dir)).toEqual(lists);
    // The database was retired: drydock refuses to open it.
    await expect(sqliteBackend({ dataDir: dir }).then((storage) => storage.close())).rejects.toMatchObject({
      code: "STORAGE_BACKEND_MISMATCH",
    });

    // And forward again: the retired database is moved aside, a new one takes the rows.
    const forward = await cli((await preview(dir, "sqlite")).pasted);
    expect(forward.code, forward.err).toBe(0);
    expect(await exported(dir, "sqlite")).toEqual(source);
    expect(readdirSync(dir).some((name) => /^drydock\.sqlite\.retired-\d+$/.test(name))).toBe(true);
  });

  it("a row written after the preview: the pasted command is refused (exit 4) and nothing is changed", async () => {
    const dir = await fileDir();
    const { pasted } = await preview(dir, "sqlite");
    const storage = await openKind(dir, "file");
    try {
      await storage.bots.create({ botId: "carol", name: "Carol" });
    } finally {
      await storage.close();
    }
    const before = snapshotTree(dir);
    const stale = await cli(pasted);
    expect(stale.code).toBe(EXIT_CODES.STATE_CHANGED);
    expect(stale.out).toBe("");
    expect(stale.err).toContain("The data directory's state changed since the preview");
    expect(stale.err).toContain("Nothing was changed. Run the preview again.");
    expect(stale.err).toContain("[fence_mismatch, exit 4]");
    expect(snapshotTree(dir)).toEqual(before);
    expect(existsSync(join(dir, "drydock.sqlite"))).toBe(false);
    // The new preview's command carries carol across.
    const fresh = await preview(dir, "sqlite");
    expect(fresh.out).toContain("3 bot(s)");
    expect((await cli(fresh.pasted)).code).toBe(0);
    expect((await exported(dir, "sqlite")).bots.map((bot) => bot.botId)).toEqual(["ada", "bob", "carol"]);
  });

  it("--yes without --expected-state is a usage error (exit 2); a backend it cannot move to is refused by the parser; nothing changes", async () => {
    const dir = await fileDir();
    const before = snapshotTree(dir);
    const bare = await cli(["--data-dir", dir, "storage", "migrate", "--to", "sqlite", "--yes"]);
    expect(bare.code).toBe(EXIT_CODES.USAGE);
    expect(bare.err).toContain("--yes needs --expected-state (the preview prints it). Nothing was changed.");
    const postgres = await cli(["--data-dir", dir, "storage", "migrate", "--to", "postgres"]);
    expect(postgres.code).toBe(EXIT_CODES.USAGE);
    // A directory no backend ever wrote to (only workspaces) is read as file: nothing to move, nothing bound.
    const unbound = mkdtempSync(join(tmpdir(), "drydock-cli-migrate-unbound-"));
    dirs.push(unbound);
    mkdirSync(join(unbound, "workspaces"));
    const asFile = await cli(["--data-dir", unbound, "storage", "migrate", "--to", "file", "--yes"]);
    expect(asFile.code, asFile.err).toBe(0);
    expect(asFile.out).toContain("not bound to a backend yet and is read as file: there is nothing to move");
    expect(readdirSync(unbound)).toEqual(["workspaces"]);
    const missing = await cli(["--data-dir", dir, "storage", "migrate"]);
    expect(missing.code).toBe(EXIT_CODES.USAGE);
    expect(snapshotTree(dir)).toEqual(before);
  });

  it("--json: the preview and the apply are versioned documents matching the exported schema", async () => {
    const dir = await fileDir();
    const previewRun = await cli(["--data-dir", dir, "storage", "migrate", "--to", "sqlite", "--json"]);
    expect(previewRun.code, previewRun.err).toBe(0);
    const document = StorageMigrateDocumentSchema.parse(JSON.parse(previewRun.out));
    expect(document).toMatchObject({
      schemaVersion: 1,
      preview: true,
      changed: false,
      from: "file",
      to: "sqlite",
      counts: { creates: 2, deletes: 1, bots: 2, meta: 1 },
    });
    const expectedState = (document as { expectedState: string }).expectedState;
    const applied = await cli(
      migrateArgs(dir, "sqlite", "--yes", "--expected-state", expectedState, "--json"),
    );
    expect(applied.code, applied.err).toBe(0);
    expect(StorageMigrateDocumentSchema.parse(JSON.parse(applied.out))).toEqual({
      schemaVersion: 1,
      ok: true,
      preview: false,
      changed: true,
      from: "file",
      to: "sqlite",
      outcome: "migrated",
      counts: { creates: 2, deletes: 1, bots: 2, meta: 1 },
    });
  });

  it("at a terminal the preview asks `apply? [y/N]`: n changes nothing, y migrates with the preview's own fence", async () => {
    const dir = await fileDir();
    const person = (answer: string) => bufferIo({ tty: true, stdinTty: true, answers: [answer] });
    const before = snapshotTree(dir);
    const declined = await cli(["--data-dir", dir, "storage", "migrate", "--to", "sqlite"], person("n"));
    expect(declined.code).toBe(0);
    expect(declined.out).toContain("Not applied; nothing was changed.");
    expect(snapshotTree(dir)).toEqual(before);

    const accepted = await cli(["--data-dir", dir, "storage", "migrate", "--to", "sqlite"], person("y"));
    expect(accepted.code, accepted.err).toBe(0);
    expect(accepted.out).toContain("Preview: move 2 create row(s)");
    expect(accepted.out).toContain("from file to sqlite (migrated)");
    expect(bindingOf(dir)).toEqual({ version: 1, kind: "sqlite" });
  });
});

describe("drydock storage migrate is offline", () => {
  it("refused (exit 5, STORAGE_IN_USE naming the pid) while a drydock --yes command holds the directory's storage open; it migrates once that command is done", async () => {
    const dir = await fileDir();
    const { pasted } = await preview(dir, "sqlite");
    let refusal: { code: number; err: string } | null = null;
    let claimsWhileHeld: string[] = [];
    // The --yes command's first boat.dev request is held here: its storage (and its claim) are open.
    const gate: typeof fetch = async () => {
      claimsWhileHeld = claimsIn(dir);
      refusal = await cli(pasted);
      throw new TypeError("fetch failed (the test's gate)");
    };
    const io = bufferIo();
    await main(
      [
        "--data-dir",
        dir,
        "deletions",
        "retry",
        "bx_aaaaaaaa",
        "--expected-state",
        `sha256:${"0".repeat(64)}`,
        "--yes",
      ],
      { io, env: { BOAT_API_URL: sim.apiUrl, BOAT_API_TOKEN: sim.token }, fetch: gate },
    );
    expect(claimsWhileHeld, io.err()).toEqual([expect.stringMatching(/^claim-cli-\d+-[0-9a-f]{12}\.json$/)]);
    expect(refusal).not.toBeNull();
    const refused = refusal as unknown as { code: number; err: string };
    expect(refused.code).toBe(EXIT_CODES.UNSAFE);
    expect(refused.err).toContain(`is in use by cli pid ${process.pid}, so nothing was migrated`);
    expect(refused.err).toContain("storage_in_use");
    expect(existsSync(join(dir, "drydock.sqlite"))).toBe(false);
    expect(existsSync(join(dir, "storage.json")) && bindingOf(dir)).toEqual({ version: 1, kind: "file" });
    // The command closed its storage: its claim is gone, and the same paste now migrates.
    expect(claimsIn(dir)).toEqual([]);
    const applied = await cli(pasted);
    expect(applied.code, applied.err).toBe(0);
    expect(bindingOf(dir)).toEqual({ version: 1, kind: "sqlite" });
  });

  it("refused (exit 5, naming the server's pid) while a real drydock-server runs on the directory; after SIGTERM the same paste migrates", async () => {
    const dir = await fileDir();
    const server = await startServer(dir);
    try {
      // A bot the server itself registers: it is part of what moves.
      const created = await fetch(`${server.url}/v1/bots`, {
        method: "POST",
        headers: { authorization: `Bearer ${server.token}`, "content-type": "application/json" },
        body: JSON.stringify({ botId: "dan", name: "Dan" }),
      });
      expect(created.status).toBe(201);
      expect(claimsIn(dir)).toEqual([
        expect.stringMatching(new RegExp(`^claim-server-${server.child.pid}-[0-9a-f]{12}\\.json$`)),
      ]);
      const { out, pasted } = await preview(dir, "sqlite");
      expect(out).toContain("3 bot(s)");
      const before = snapshotTree(dir);
      const refused = await cli(pasted);
      expect(refused.code, refused.err).toBe(EXIT_CODES.UNSAFE);
      expect(refused.err).toContain(`${dir} is in use by server pid ${server.child.pid}`);
      expect(refused.err).toContain("Stop every drydock process using it (server and CLI)");
      expect(existsSync(join(dir, "drydock.sqlite"))).toBe(false);
      // Nothing of the state moved (the migrate lock file comes and goes; the journals are as they were).
      for (const name of JOURNAL_FILES) expect(snapshotTree(dir)[name]).toBe(before[name]);

      server.child.kill("SIGTERM");
      expect(await server.exited).toEqual({ code: 0, signal: null });
      expect(claimsIn(dir)).toEqual([]);
      const applied = await cli(pasted);
      expect(applied.code, applied.err).toBe(0);
      expect((await exported(dir, "sqlite")).bots.map((bot) => bot.botId)).toEqual(["ada", "bob", "dan"]);
    } finally {
      server.kill();
    }
  }, 120_000);
});

describe("a migration killed mid-way (SIGKILL at each durable step): the operator re-runs the command", () => {
  for (const point of MIGRATE_CRASH_POINTS) {
    it(`killed at ${point}: the preview and its pasted command finish it, every row on sqlite; and the way back to file keeps them`, async () => {
      const dir = await fileDir();
      const source = await exported(dir, "file");
      await killMigrationAt(dir, point);

      const before = snapshotTree(dir);
      const resumed = await cli(["--data-dir", dir, "storage", "migrate", "--to", "sqlite"]);
      expect(resumed.code, resumed.err).toBe(0);
      expect(resumed.out).toMatch(
        /^Preview: a migration from file to sqlite started at \S+ was interrupted /,
      );
      expect(resumed.out).toContain(
        point === "migrate:marked" || point === "migrate:imported" || point === "migrate:workspaces"
          ? "while copying: the partial sqlite store is not trusted and the migration starts over"
          : "after its copy was verified: only retiring the old store and rebinding the directory remain",
      );
      const json = await cli(["--data-dir", dir, "storage", "migrate", "--to", "sqlite", "--json"]);
      expect(StorageMigrateDocumentSchema.parse(JSON.parse(json.out))).toMatchObject({
        preview: true,
        counts: null,
        interrupted: { from: "file", to: "sqlite" },
      });
      expect(snapshotTree(dir)).toEqual(before);
      const applied = await cli(printed(resumed.out));
      expect(applied.code, applied.err).toBe(0);
      expect(applied.out).toMatch(/from file to sqlite \((migrated|resumed)\)/);
      expect(bindingOf(dir)).toEqual({ version: 1, kind: "sqlite" });
      expect(await exported(dir, "sqlite")).toEqual(source);
      expect(existsSync(join(dir, "locks", "storage-migrate.json"))).toBe(false);
      expect(await listed(dir)).toEqual(await listed(dir, ["--storage", "sqlite"]));

      // Back to file: nothing the killed migration left behind may cost a row.
      const back = await cli((await preview(dir, "file")).pasted);
      expect(back.code, back.err).toBe(0);
      expect(bindingOf(dir)).toEqual({ version: 1, kind: "file" });
      expect(await exported(dir, "file")).toEqual(source);
    }, 120_000);
  }
});

describe("a migration killed after its copy was verified", () => {
  it("is finished only towards its own target: --to the other backend is refused (exit 5) and changes nothing", async () => {
    const dir = await fileDir();
    await killMigrationAt(dir, "migrate:retired");
    const before = snapshotTree(dir);
    for (const args of [[], ["--yes", "--expected-state", `sha256:${"0".repeat(64)}`]]) {
      const refused = await cli(["--data-dir", dir, "storage", "migrate", "--to", "file", ...args]);
      expect(refused.code).toBe(EXIT_CODES.UNSAFE);
      expect(refused.err).toContain("was interrupted after its copy was verified");
      expect(refused.err).toContain(
        `Finish it first with \`drydock --data-dir ${dir} storage migrate --to sqlite\``,
      );
    }
    expect(snapshotTree(dir)).toEqual(before);
    // A stale fence on the finishing command is refused too (exit 4), nothing changed.
    const stale = await cli(
      migrateArgs(dir, "sqlite", "--yes", "--expected-state", `sha256:${"0".repeat(64)}`),
    );
    expect(stale.code).toBe(EXIT_CODES.STATE_CHANGED);
    expect(snapshotTree(dir)).toEqual(before);
  }, 120_000);
});

/**
 * The real `drydock-server` (src/main.ts through tsx, the bot server's own test helper) on `dir`, answering,
 * with its startup recovery finished: that recovery may settle journal rows (a deletion fence boat.dev
 * proves finished), so a preview's fence is taken on the state the server leaves.
 */
async function startServer(dir: string): Promise<ServerChild> {
  const server = await spawnServer(
    dir,
    { DRYDOCK_STORAGE: "file", BOAT_API_URL: sim.apiUrl, BOAT_API_TOKEN: sim.token },
    { entry: SERVER_MAIN },
  );
  // Once it answers, main.ts has installed its signal handling (SIGTERM is a graceful stop).
  expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
  for (let guard = 0; (await recoveryReport(server.url, server.token)).startup === null; guard += 1) {
    if (guard > 1_200) throw new Error(`the server's startup recovery did not finish:\n${server.output()}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return server;
}

async function recoveryReport(url: string, token: string): Promise<{ startup: unknown }> {
  const answer = await fetch(`${url}/v1/recovery`, { headers: { authorization: `Bearer ${token}` } });
  expect(answer.status).toBe(200);
  return (await answer.json()) as { startup: unknown };
}
