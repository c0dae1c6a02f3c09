/**
 * The Boat commands as an operator meets them: what each prints must work when pasted, exit codes follow
 * the documented table, and nothing answers "ok" for something it could not look at. In-process `main`
 * with buffer streams against the boat.dev simulator over HTTP. Run on each storage backend
 * (boats.test.ts: file, boats-sqlite.test.ts: sqlite, boats-postgres.test.ts: postgres): the state is written
 * through that backend, and the CLI finds the backend by the data directory's binding. On postgres each data
 * directory gets a fresh schema in one database of the project's cluster, and every CLI run gets the URL the
 * way an operator gives it (DRYDOCK_STORAGE) with the directory's DRYDOCK_POSTGRES_SCHEMA; the final token scan
 * also looks for the database password.
 */
import { spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createBoatLifecycle, LifecycleError, scopedBoatName } from "@drydock/boat-lifecycle";
import { type BoatClient, createBoatClient } from "@drydock/boat-provider";
import { type BoatSimulator, type FaultRule, startBoatSimulator } from "@drydock/boat-provider/simulator";
import { acquireWorkspaceLock, openSagaStore } from "@drydock/restore-saga";
import { openStorage, type Storage } from "@drydock/storage";
import { postgresBackend } from "@drydock/storage-postgres";
import { sqliteBackend } from "@drydock/storage-sqlite";
import { createDatabaseAt } from "@drydock/test-kit/postgres";
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from "vitest";
import { bufferIo, classifyError, EXIT_CODES, main } from "../src/index.js";

export function boatsSuite(storage: "file" | "sqlite" | "postgres"): void {
  let sim: BoatSimulator;
  /** On postgres: this file's database (its URL holds a password), and each data directory's schema. */
  let databaseUrl = "";
  const schemas = new Map<string, string>();
  let client: BoatClient;
  const dirs: string[] = [];
  /** Every storage a test opened (closed at the end). */
  const opens: Storage[] = [];
  /** Every output of every run, for the final token scan. */
  const transcript: string[] = [];

  beforeAll(async () => {
    // Deletions stay pending for many polls: an accepted fence is still being deleted when reconciled.
    sim = await startBoatSimulator({ provisionMs: 0, deletionPolls: 50 });
    client = createBoatClient({ baseUrl: sim.apiUrl, token: sim.token });
    if (storage === "postgres") databaseUrl = await createDatabaseAt(inject("postgresUrl"), "boats");
  });
  afterAll(async () => {
    for (const opened of opens) await opened.close();
    await sim?.close();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });
  afterEach(async () => {
    await faults([]);
  });

  async function faults(rules: FaultRule[]): Promise<void> {
    const response = await fetch(`${sim.url}/_sim/faults`, {
      method: rules.length === 0 ? "DELETE" : "POST",
      headers: { authorization: `Bearer ${sim.token}`, "content-type": "application/json" },
      ...(rules.length === 0 ? {} : { body: JSON.stringify({ rules }) }),
    });
    await response.arrayBuffer();
  }

  async function closedPortUrl(): Promise<string> {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as { port: number };
    await new Promise<void>((resolve) => server.close(() => resolve()));
    return `http://127.0.0.1:${port}/api/v1`;
  }

  interface Run {
    code: number;
    out: string;
    err: string;
  }

  async function cli(args: readonly string[], env: Record<string, string> = {}): Promise<Run> {
    const io = bufferIo();
    const code = await main(args, { io, env: { ...storageEnv(args), ...env } });
    transcript.push(io.out(), io.err());
    return { code, out: io.out(), err: io.err() };
  }

  const provider = () => ({ BOAT_API_URL: sim.apiUrl, BOAT_API_TOKEN: sim.token });

  /**
   * What an operator of this backend has in the environment: on postgres the server's DRYDOCK_STORAGE, and the
   * schema of the data directory the command names (a directory this suite never made gets the URL alone).
   */
  function storageEnv(args: readonly string[]): Record<string, string> {
    if (storage !== "postgres") return {};
    const at = args.indexOf("--data-dir");
    const schema = at < 0 ? undefined : schemas.get(args[at + 1] as string);
    return {
      DRYDOCK_STORAGE: databaseUrl,
      ...(schema === undefined ? {} : { DRYDOCK_POSTGRES_SCHEMA: schema }),
    };
  }

  /** The data directory's storage on this suite's backend (binding it on first use), kept open until the end. */
  async function openAt(dir: string, now?: () => number): Promise<Storage> {
    if (storage === "postgres" && !schemas.has(dir)) schemas.set(dir, `boats_${schemas.size + 1}`);
    const opened = await openStorage({
      dataDir: dir,
      storage: storage === "postgres" ? databaseUrl : storage,
      backends: { sqlite: sqliteBackend, postgres: postgresBackend },
      ...(storage === "postgres" ? { backendOptions: { schema: schemas.get(dir) } } : {}),
      ...(now ? { now } : {}),
    });
    opens.push(opened);
    return opened;
  }

  /** Registers bots the way the bot server does on this backend: bots.json on file, the storage's registry else. */
  async function register(dir: string, bots: { botId: string; name: string }[]): Promise<void> {
    if (storage === "file") {
      writeFileSync(
        join(dir, "bots.json"),
        JSON.stringify({ version: 1, bots: bots.map((b) => ({ ...b, createdAt: Date.now() })) }),
      );
      return;
    }
    const opened = await openAt(dir);
    for (const bot of bots) await opened.bots.create(bot);
  }

  async function dataDir() {
    const dir = mkdtempSync(join(tmpdir(), "drydock-boats-"));
    dirs.push(dir);
    const ago = (ms: number) => () => Date.now() - ms;
    const opened = await openAt(dir);
    const environmentId = await opened.meta.getOrCreate("environment-id", randomUUID);
    const { createJournal, deleteJournal } = opened;
    const lifecycle = createBoatLifecycle({
      client,
      createJournal,
      deleteJournal,
      environmentId,
      sleep: async () => {},
    });
    return {
      dir,
      environmentId,
      createJournal,
      /** A delete journal whose clock is `ms` in the past: fences it writes are that old. */
      deleteJournalAgo: async (ms: number) => (await openAt(dir, ago(ms))).deleteJournal,
      deleteJournal,
      lifecycle,
    };
  }

  /** A Boat of `botId` whose deletion was prepared two minutes ago and never confirmed (past its window). */
  async function fencedBoat(d: Awaited<ReturnType<typeof dataDir>>, botId: string) {
    const boat = await d.lifecycle.provision(botId);
    await (await d.deleteJournalAgo(120_000)).prepareBoatDeletion({
      boxId: boat.boxId,
      name: boat.name,
      ownerBotId: botId,
    });
    return boat;
  }

  /**
   * The data directory's top-level files, name → bytes, and on postgres the schema's rows (exportAll): the
   * "nothing changed" checks.
   */
  async function snapshot(dir: string): Promise<Record<string, string>> {
    const files = Object.fromEntries(
      readdirSync(dir, { withFileTypes: true })
        // SQLite's shared-memory index (-shm) changes on every open; it holds no state.
        .filter((entry) => entry.isFile() && !entry.name.endsWith("-shm"))
        .map((entry) => [entry.name, readFileSync(join(dir, entry.name), "latin1")]),
    );
    if (storage !== "postgres") return files;
    return { ...files, "(database rows)": JSON.stringify(await (await openAt(dir)).exportAll()) };
  }

  // biome-ignore lint/suspicious/noExplicitAny: parsed CLI output; every field used is asserted by the test.
  type Parsed = Record<string, any>;

  async function planItems(dir: string): Promise<Parsed[]> {
    const run = await cli(["reconcile", "--data-dir", dir, "--json"], provider());
    expect(run.code, run.err).toBe(0);
    return (JSON.parse(run.out) as Parsed).plan.items;
  }

  /** The arguments of a printed command line (printed commands contain no quoting and no token). */
  function argsOf(command: string): string[] {
    const parts = command.split(" ");
    expect(parts[0]).toBe("drydock");
    return parts.slice(1);
  }

  /** The command lines a human rendering offers to paste (after "→ "). */
  function arrows(text: string): string[] {
    return text
      .split("\n")
      .filter((line) => line.trimStart().startsWith("→ "))
      .map((line) => line.trimStart().slice(2));
  }

  /** `sh -n`: the line parses as a POSIX shell command. */
  function parsesInSh(line: string): boolean {
    return spawnSync("sh", ["-n", "-c", line]).status === 0;
  }

  describe("deletions reconcile says what it could not see", () => {
    it("exits 6 when boat.dev answers 503 to everything or cannot be reached, changing nothing", async () => {
      const d = await dataDir();
      const boat = await d.lifecycle.provision("bot-accepted");
      await d.deleteJournal.prepareBoatDeletion({
        boxId: boat.boxId,
        name: boat.name,
        ownerBotId: "bot-accepted",
      });
      await d.deleteJournal.markBoatDeletionAccepted(boat.boxId, await client.deleteSandbox(boat.boxId));
      const item = (await planItems(d.dir)).find((candidate) => candidate.boxId === boat.boxId)!;
      expect(item.action.name).toBe("reconcileDeletion");
      const before = await d.deleteJournal.boatDeletionSnapshot();

      await faults([{ action: "fail-before", status: 503, code: "service_unavailable", times: 1_000 }]);
      const busy = await cli(argsOf(item.action.command), provider());
      expect(busy.code, busy.out + busy.err).toBe(EXIT_CODES.PROVIDER_UNAVAILABLE);
      expect(busy.out).toBe("");
      await faults([]);

      const down = await cli(argsOf(item.action.command), {
        BOAT_API_URL: await closedPortUrl(),
        BOAT_API_TOKEN: sim.token,
      });
      expect(down.code, down.out + down.err).toBe(EXIT_CODES.PROVIDER_UNAVAILABLE);
      expect(down.out).toBe("");
      expect(await d.deleteJournal.boatDeletionSnapshot()).toEqual(before);
      // boat.dev back: the same printed command applies (the deletion still runs there: the fence stays
      // accepted); pasted again, the state it was printed for has moved (its poll did): exit 4, nothing changed.
      const up = await cli([...argsOf(item.action.command), "--json"], provider());
      expect(up.code, up.out + up.err).toBe(0);
      expect(JSON.parse(up.out)).toMatchObject({ ok: true, boxId: boat.boxId });
      const applied = await d.deleteJournal.boatDeletionSnapshot();
      expect(applied).toEqual([expect.objectContaining({ boxId: boat.boxId, phase: "accepted" })]);
      const again = await cli(argsOf(item.action.command), provider());
      expect(again.code, again.out + again.err).toBe(EXIT_CODES.STATE_CHANGED);
      expect(again.err).toContain("nothing was changed");
      expect(await d.deleteJournal.boatDeletionSnapshot()).toEqual(applied);
    });

    it("a prepared fence whose Boat exists: says no deletion is running and prints the retry that moves it", async () => {
      const d = await dataDir();
      const boat = await fencedBoat(d, "bot-prepared");
      // deletions list shows the fence as this backend holds it: prepared two minutes ago, past its window.
      const fences = await cli(["deletions", "list", "--data-dir", d.dir, "--json"]);
      expect(fences.code, fences.err).toBe(0);
      expect(JSON.parse(fences.out).deletions).toEqual([
        expect.objectContaining({
          boxId: boat.boxId,
          ownerBotId: "bot-prepared",
          phase: "prepared",
          inFlightLeftMs: 0,
        }),
      ]);
      expect(JSON.parse(fences.out).deletions[0].ageMs).toBeGreaterThanOrEqual(120_000);
      const item = (await planItems(d.dir)).find((candidate) => candidate.boxId === boat.boxId)!;
      expect(item.action.name).toBe("retryDeletion");
      const deletes = sim.stats().deleteRequests;
      const run = await cli(
        [
          "deletions",
          "reconcile",
          boat.boxId,
          "--expected-state",
          item.stateDigest,
          "--data-dir",
          d.dir,
          "--yes",
        ],
        provider(),
      );
      expect(run.code, run.err).toBe(0);
      expect(run.out).not.toMatch(/is pending/);
      expect(run.out).toMatch(/No deletion of .* is running/);
      expect(arrows(run.out)).toEqual([item.action.command]);
      expect(sim.stats().deleteRequests).toBe(deletes);
    });
  });

  describe("adopt commands", () => {
    it("a Boat named for a bot whose key-only create is inside its window: reconcile and status print no adopt for it", async () => {
      const d = await dataDir();
      await d.createJournal.beginBoatCreate("bot-key", JSON.stringify({ ttlSeconds: 28_800, noEnv: true }));
      const { sandbox } = await client.createSandbox(
        { ttlSeconds: 600, noEnv: true },
        { idempotencyKey: randomUUID() },
      );
      await client.renameSandbox(sandbox.id, scopedBoatName(d.environmentId, "bot-key"));
      for (const command of ["reconcile", "status"]) {
        const run = await cli([command, "--data-dir", d.dir], provider());
        expect(run.code, run.err).toBe(0);
        expect(run.out).toContain(sandbox.id);
        expect(run.out).not.toContain("creates adopt bot-key");
      }
    });

    it("a preview of a target the plan knows nothing of exits 3 and changes nothing; a deletion retry of a Boat without a fence names no 'gone' fence", async () => {
      const d = await dataDir();
      const adopt = await cli(["creates", "adopt", "nobody", "bx_23456789", "--data-dir", d.dir], provider());
      expect(adopt.code).toBe(EXIT_CODES.NOT_FOUND);
      expect(adopt.err).toMatch(/knows nothing of nobody bx_23456789/);
      const retire = await cli(["creates", "retire", "gil", "--data-dir", d.dir], provider());
      expect(retire.code).toBe(EXIT_CODES.NOT_FOUND);
      expect(retire.err).toMatch(/knows nothing of gil/);
      const retry = await cli(
        [
          "deletions",
          "retry",
          "bx_23456789",
          "--expected-state",
          `sha256:${"0".repeat(64)}`,
          "--yes",
          "--data-dir",
          d.dir,
        ],
        provider(),
      );
      expect(retry.code).not.toBe(0);
      expect(retry.err).toMatch(
        /No deletion fence stands for Boat bx_23456789 \(settled since the plan, or there never was one\)/,
      );
    });

    it("a provider other than the one the data directory is bound to is refused (exit 2): nothing is read or sent", async () => {
      const d = await dataDir();
      writeFileSync(join(d.dir, "boat-provider"), "embedded\n");
      // A provider nobody answers at: a command that tried to reach it would exit 6, not 2.
      const nowhere = { BOAT_API_URL: await closedPortUrl(), BOAT_API_TOKEN: "tok-closed-port-0123456789" };
      for (const command of [["reconcile"], ["status"], ["creates", "retire", "bot-x"]]) {
        const run = await cli([...command, "--data-dir", d.dir], nowhere);
        expect(run.code, `${command.join(" ")}: ${run.err}`).toBe(EXIT_CODES.USAGE);
        expect(run.err).toMatch(
          /journals describe the Boats of the bot server's embedded simulator, not of boat\.dev at/,
        );
      }
      // Bound to this provider, the same commands run.
      writeFileSync(join(d.dir, "boat-provider"), `${sim.apiUrl}\n`);
      expect((await cli(["reconcile", "--data-dir", d.dir], provider())).code).toBe(0);
      // Bound to the embedded simulator whose server runs (its file, written by a live process): giving that
      // simulator's address by hand is the same provider.
      writeFileSync(join(d.dir, "boat-provider"), "embedded\n");
      writeFileSync(
        join(d.dir, "embedded-boat-dev.json"),
        JSON.stringify({ version: 1, apiUrl: sim.apiUrl, token: sim.token, serverPid: process.pid }),
        { mode: 0o600 },
      );
      const byHand = await cli(["reconcile", "--data-dir", d.dir], provider());
      expect(byHand.code, byHand.err).toBe(0);
    });

    it("a preview while boat.dev's list cannot be read exits 6: a Boat only the list shows is never called unknown", async () => {
      const d = await dataDir();
      const lost = (
        await client.createSandbox({ ttlSeconds: 600, noEnv: true }, { idempotencyKey: randomUUID() })
      ).sandbox;
      await client.renameSandbox(lost.id, scopedBoatName(d.environmentId, "bot-listed"));
      const down = { BOAT_API_URL: await closedPortUrl(), BOAT_API_TOKEN: "tok-closed-port-0123456789" };
      const preview = await cli(["creates", "adopt", "bot-listed", lost.id, "--data-dir", d.dir], down);
      expect(preview.code).toBe(EXIT_CODES.PROVIDER_UNAVAILABLE);
      expect(preview.err).toMatch(/could not be read .*cannot say what it needs for bot-listed/);
      expect(preview.err).not.toMatch(/knows nothing/);
      const up = await cli(["creates", "adopt", "bot-listed", lost.id, "--data-dir", d.dir], provider());
      expect(up.code, up.err).toBe(0);
    });

    it("a Boat with a bot's deterministic name and no journal row: the adopt preview finds it and its command adopts; a registered bot's is planned", async () => {
      const d = await dataDir();
      // On file this directory has no registry at all (no bots.json, no workspaces/): nothing is judged by
      // one. A row backend's registry is its own table, always there: the bot is registered in it.
      if (storage !== "file") await register(d.dir, [{ botId: "bot-lost", name: "Lost" }]);
      const lost = (
        await client.createSandbox({ ttlSeconds: 600, noEnv: true }, { idempotencyKey: randomUUID() })
      ).sandbox;
      await client.renameSandbox(lost.id, scopedBoatName(d.environmentId, "bot-lost"));
      const preview = await cli(["creates", "adopt", "bot-lost", lost.id, "--data-dir", d.dir], provider());
      expect(preview.code, preview.err).toBe(0);
      expect(preview.out).not.toContain("does not propose");
      const [command] = preview.out
        .split("\n")
        .map((line) => line.trim())
        .filter((line) => line.startsWith("drydock ") && line.includes("--expected-state"));
      expect(command).toMatch(
        new RegExp(`creates adopt bot-lost ${lost.id} --expected-state sha256:[0-9a-f]{64} --yes$`),
      );
      const applied = await cli([...argsOf(command!), "--json"], provider());
      expect(applied.code, applied.err).toBe(0);
      expect(JSON.parse(applied.out)).toMatchObject({
        ok: true,
        action: "adopt",
        botId: "bot-lost",
        boxId: lost.id,
      });
      // The same fenced command pasted again: the state moved (by this very command), exit 4, nothing changed.
      const again = await cli(argsOf(command!), provider());
      expect(again.code, again.out + again.err).toBe(EXIT_CODES.STATE_CHANGED);
      expect(again.err).toContain(`Boat ${lost.id} is already bot bot-lost's`);
      // Its preview says so and changes nothing.
      const after = await cli(["creates", "adopt", "bot-lost", lost.id, "--data-dir", d.dir], provider());
      expect(after.code, after.err).toBe(0);
      expect(after.out).toContain(`Boat ${lost.id} is already bot bot-lost's`);

      // The bot server's registry names the bot: `reconcile` itself prints the adopt.
      await register(d.dir, [{ botId: "bot-reg", name: "Registered" }]);
      const registered = (
        await client.createSandbox({ ttlSeconds: 600, noEnv: true }, { idempotencyKey: randomUUID() })
      ).sandbox;
      await client.renameSandbox(registered.id, scopedBoatName(d.environmentId, "bot-reg"));
      const plan = await cli(["reconcile", "--data-dir", d.dir], provider());
      const adopt = arrows(plan.out).find((line) => line.includes(registered.id));
      expect(adopt).toMatch(new RegExp(`creates adopt bot-reg ${registered.id} --expected-state sha256:`));
      expect((await cli(argsOf(adopt!), provider())).code).toBe(0);
    });
  });

  describe("creates retire", () => {
    it("a recorded Boat boat.dev deleted: the plan prints the fenced retire, it applies once, the same line pasted again exits 4 and changes nothing", async () => {
      const d = await dataDir();
      await register(d.dir, [{ botId: "bot-gone", name: "Gone" }]);
      const boat = await d.lifecycle.provision("bot-gone");
      // Deleted in boat.dev behind drydock's back, polled until boat.dev says it finished.
      const receipt = await client.deleteSandbox(boat.boxId);
      let status = receipt.status;
      for (let poll = 0; poll < 200 && status !== "completed"; poll += 1) {
        status = (await client.getDeletionOperation(receipt.id, { targetId: boat.boxId })).status;
      }
      expect(status).toBe("completed");
      const item = (await planItems(d.dir)).find((candidate) => candidate.botId === "bot-gone")!;
      expect(item).toMatchObject({ kind: "create_boat_gone", action: { name: "retireCreate" } });
      // The preview changes nothing and prints the same fenced command.
      const before = await snapshot(d.dir);
      const preview = await cli(["creates", "retire", "bot-gone", "--data-dir", d.dir], provider());
      expect(preview.code, preview.err).toBe(0);
      expect(preview.out).toContain(item.action.command);
      expect(await snapshot(d.dir)).toEqual(before);
      // A fence of another state (a digest no plan printed) is refused: exit 4, nothing changed.
      const stale = await cli(
        [...argsOf(item.action.command.replace(/sha256:[0-9a-f]{64}/, `sha256:${"1".repeat(64)}`)), "--json"],
        provider(),
      );
      expect(stale.code, stale.out + stale.err).toBe(EXIT_CODES.STATE_CHANGED);
      expect(await snapshot(d.dir)).toEqual(before);
      const applied = await cli([...argsOf(item.action.command), "--json"], provider());
      expect(applied.code, applied.err).toBe(0);
      expect(JSON.parse(applied.out)).toMatchObject({ ok: true, action: "retireCreate", botId: "bot-gone" });
      expect(
        (await d.createJournal.boatCreateRecoverySnapshot()).find((row) => row.botId === "bot-gone"),
      ).toBeUndefined();
      const after = await snapshot(d.dir);
      const again = await cli(argsOf(item.action.command), provider());
      expect(again.code, again.out + again.err).toBe(EXIT_CODES.STATE_CHANGED);
      expect(again.err).toContain("The create journal has no record for bot bot-gone now");
      expect(await snapshot(d.dir)).toEqual(after);
      const listed = await cli(["creates", "list", "--data-dir", d.dir, "--json"]);
      expect(listed.code, listed.err).toBe(0);
      expect(JSON.parse(listed.out).creates.map((row: Parsed) => row.botId)).not.toContain("bot-gone");
    });
  });

  describe("a bot server's data directory without bots.json", () => {
    it("has no bots, as the server reads it: no adopt offered for a Boat named for a bot, a recorded Boat's bot is gone", async () => {
      const d = await dataDir();
      mkdirSync(join(d.dir, "workspaces"));
      // A Boat boat.dev lists under a bot's name that no journal knows, and a journaled Boat of another bot.
      const named = (
        await client.createSandbox({ ttlSeconds: 600, noEnv: true }, { idempotencyKey: randomUUID() })
      ).sandbox;
      await client.renameSandbox(named.id, scopedBoatName(d.environmentId, "bot-named"));
      const recorded = await d.lifecycle.provision("bot-recorded");
      const items = await planItems(d.dir);
      expect(items.find((item) => item.boxId === named.id)?.action.command ?? null).toBeNull();
      expect(items.find((item) => item.boxId === recorded.boxId)).toMatchObject({
        kind: "create_bot_unregistered",
        botId: "bot-recorded",
      });
      const status = await cli(["status", "--data-dir", d.dir], provider());
      expect(status.out).toContain("ATTENTION");
      const refused = await cli(["creates", "adopt", "bot-named", named.id, "--data-dir", d.dir], provider());
      expect(refused.code, refused.err).toBe(0);
      expect(refused.out).toContain("Bot bot-named is not registered");
      expect(refused.out).not.toContain("--expected-state");
      // On file, without workspaces/ (not a server's directory) there is no registry: the adopt is offered.
      // (On a row backend the registry is the storage's own table: it always exists.)
      if (storage !== "file") return;
      rmSync(join(d.dir, "workspaces"), { recursive: true });
      const offered = await cli(["creates", "adopt", "bot-named", named.id, "--data-dir", d.dir], provider());
      expect(offered.code, offered.err).toBe(0);
      expect(offered.out).toMatch(new RegExp(`creates adopt bot-named ${named.id} --expected-state sha256:`));
    });
  });

  describe("adopting a Boat that is not the named bot's", () => {
    it("is refused (exit 5) saying whose name the Boat carries, or that it carries none of the bot's; nothing changes", async () => {
      const d = await dataDir();
      await register(d.dir, [{ botId: "ada", name: "Ada" }]);
      const boat = async (name: string) => {
        const { sandbox } = await client.createSandbox(
          { ttlSeconds: 600, noEnv: true },
          { idempotencyKey: randomUUID() },
        );
        await client.renameSandbox(sandbox.id, name);
        return sandbox.id;
      };
      const adas = await boat(scopedBoatName(d.environmentId, "ada"));
      const zeds = await boat(scopedBoatName(d.environmentId, "zed"));
      const foreign = await boat("someone-elses-computer");
      const before = await snapshot(d.dir);

      const wrong = await cli(["creates", "adopt", "gus", adas, "--data-dir", d.dir], provider());
      expect(wrong.code, wrong.out + wrong.err).toBe(EXIT_CODES.UNSAFE);
      expect(wrong.err).toContain(`Boat ${adas} carries bot ada's name`);
      expect(wrong.err).toContain("not bot gus's");
      expect(wrong.err).not.toMatch(/knows nothing/);

      for (const boxId of [zeds, foreign]) {
        const none = await cli(["creates", "adopt", "gus", boxId, "--data-dir", d.dir], provider());
        expect(none.code, none.out + none.err).toBe(EXIT_CODES.UNSAFE);
        expect(none.err).toContain(`carries no name of bot gus`);
      }
      // ada's own adopt is still offered.
      const own = await cli(["creates", "adopt", "ada", adas, "--data-dir", d.dir], provider());
      expect(own.code, own.err).toBe(0);
      expect(own.out).toMatch(new RegExp(`creates adopt ada ${adas} --expected-state sha256:`));
      expect(await snapshot(d.dir)).toEqual(before);
    });
  });

  describe("a missing or wrong --data-dir is exit 3 for every command", () => {
    it("names the path and says what a data directory is; a journal that cannot be read is named by its file", async () => {
      const base = mkdtempSync(join(tmpdir(), "drydock-nodir-"));
      dirs.push(base);
      const missing = join(base, "typo");
      const file = join(base, "a-file");
      writeFileSync(file, "not a directory\n");
      const commands = [
        ["creates", "list"],
        ["status"],
        ["deletions", "list"],
        ["restores", "list"],
        ["restores", "purge"],
        ["locks", "list"],
        ["locks", "gc"],
        ["reconcile"],
        ["deletions", "reconcile", "bx_22222222"],
      ];
      // A directory that exists but holds nothing drydock writes (the parent of a data directory, /tmp): read
      // as one it would show empty journals and "OK" about the wrong place.
      const parent = join(base, "not-a-data-dir");
      mkdirSync(join(parent, "something-else"), { recursive: true });
      for (const [path, words] of [
        [missing, /does not exist/],
        [file, /is not a directory/],
        [parent, /holds nothing drydock writes, so it is not a drydock data directory/],
      ] as const) {
        for (const command of commands) {
          const run = await cli([...command, "--data-dir", path], provider());
          expect(run.code, `${command.join(" ")} ${path}: ${run.out}${run.err}`).toBe(EXIT_CODES.NOT_FOUND);
          expect(run.out).toBe("");
          expect(run.err).toContain(path);
          expect(run.err).toMatch(words);
          expect(run.err).toContain("box-create-requests.json");
        }
      }

      // The file backend's own journal file, unreadable (a directory in its place): named in every refusal.
      if (storage !== "file") return;
      const d = await dataDir();
      mkdirSync(join(d.dir, "box-create-requests.json"));
      const listed = await cli(["creates", "list", "--data-dir", d.dir]);
      expect(listed.code).toBe(EXIT_CODES.UNSAFE);
      expect(listed.err).toContain(join(d.dir, "box-create-requests.json"));
      const status = await cli(["status", "--data-dir", d.dir, "--json"]);
      expect(status.code).toBe(EXIT_CODES.PROVIDER_UNAVAILABLE); // no boat.dev configured: INCOMPLETE
      const finding = (JSON.parse(status.out) as Parsed).findings.find(
        (candidate: Parsed) => candidate.area === "journal",
      );
      expect(finding.message).toContain(join(d.dir, "box-create-requests.json"));
    });
  });

  describe("printed commands work when pasted", () => {
    it("status of an embedded simulator's data directory with its server down says to start the server, never to set a URL", async () => {
      const d = await dataDir();
      writeFileSync(join(d.dir, "boat-provider"), "embedded\n");
      await fencedBoat(d, "bot-emb");
      const run = await cli(["status", "--data-dir", d.dir]);
      expect(run.code, run.err).toBe(EXIT_CODES.PROVIDER_UNAVAILABLE);
      expect(run.out.trim().split("\n").at(-1)).toMatch(
        /^ATTENTION: 1 item\(s\) need a person; .* INCOMPLETE: boat\.dev was not checked: this data directory uses the bot server's embedded simulator, which runs only with its server: start the bot server on it/,
      );
      // Setting BOAT_API_URL on it would be refused (PROVIDER_MISMATCH): nothing says to.
      expect(run.out).not.toContain("BOAT_API_URL");
      const lines = arrows(run.out);
      expect(lines.length).toBe(1);
      expect(lines[0]).toContain("# with the bot server running on this data directory");
    });

    it("status without a provider prints shell-valid commands that never carry a token and say how boat.dev is configured", async () => {
      const d = await dataDir();
      await d.createJournal.beginBoatCreate("bot-nokey", JSON.stringify({ ttlSeconds: 28_800, noEnv: true }));
      await fencedBoat(d, "bot-fenced");
      const run = await cli(["status", "--data-dir", d.dir]);
      expect(run.code, run.err).toBe(EXIT_CODES.PROVIDER_UNAVAILABLE); // INCOMPLETE: boat.dev not checked
      const lines = arrows(run.out);
      expect(lines.length).toBeGreaterThanOrEqual(2);
      for (const line of lines) {
        expect(parsesInSh(line), line).toBe(true);
        expect(line).not.toMatch(/<|--provider-token/);
        expect(line).toContain("BOAT_API_URL");
        expect(line).toContain("BOAT_API_TOKEN");
      }
      // Pasted with the provider in the environment, as the line says, the commands run.
      for (const line of lines) {
        const command = line.replace(/\s+#.*$/, "");
        const pasted = await cli(argsOf(command), provider());
        expect(pasted.code, `${command}: ${pasted.err}`).toBe(0);
      }
    });

    it("with a running server's embedded simulator (embedded-boat-dev.json), printed commands need nothing else; a dead server's file is ignored", async () => {
      const d = await dataDir();
      await fencedBoat(d, "bot-embedded");
      const saved = (serverPid: number) =>
        writeFileSync(
          join(d.dir, "embedded-boat-dev.json"),
          `${JSON.stringify({ version: 1, apiUrl: sim.apiUrl, token: sim.token, serverPid })}\n`,
          { mode: 0o600 },
        );
      saved(process.pid);
      const run = await cli(["status", "--data-dir", d.dir]);
      expect(run.code, run.err).toBe(0);
      const [line] = arrows(run.out);
      expect(line).toBeDefined();
      expect(line).not.toContain("BOAT_API");
      expect(line).not.toContain(sim.token);
      // Pasted as printed, with nothing in the environment, the command reaches the same simulator.
      const pasted = await cli(argsOf((line as string).replace(/\s+#.*$/, "")));
      expect(pasted.code, pasted.err).toBe(0);

      // The file of a server that has exited names a simulator that went with it: not used.
      saved(spawnSync(process.execPath, ["-e", ""]).pid as number);
      const stale = await cli(["reconcile", "--data-dir", d.dir]);
      expect(stale.code).toBe(2);
      expect(stale.err).toContain("BOAT_API_URL");
    });

    it("with --provider-url/--provider-token, printed commands name the URL, never the token, and say to pass the token the same way", async () => {
      const d = await dataDir();
      const boat = await fencedBoat(d, "bot-flags");
      const flags = ["--provider-url", sim.apiUrl, "--provider-token", sim.token];
      for (const command of [["reconcile"], ["status"], ["deletions", "retry", boat.boxId]]) {
        const run = await cli([...command, "--data-dir", d.dir, ...flags]);
        expect(run.code, run.err).toBe(0);
        expect(run.out).not.toContain(sim.token);
        expect(run.out).toMatch(/--provider-token/);
        const retry =
          arrows(run.out).find((line) => line.includes("deletions retry")) ??
          run.out
            .split("\n")
            .map((line) => line.trim())
            .find((line) => line.startsWith("drydock ") && line.includes("deletions retry"));
        expect(retry, run.out).toContain(`--provider-url ${sim.apiUrl}`);
        const command2 = retry!.replace(/\s+#.*$/, "");
        expect(parsesInSh(retry!)).toBe(true);
        // Without the token the command says how to give it (exit 2), and sends nothing.
        const bare = await cli(argsOf(command2));
        expect(bare.code).toBe(EXIT_CODES.USAGE);
        expect(bare.err).toMatch(/--provider-token|BOAT_API_TOKEN/);
      }
      const plan = await cli(["reconcile", "--data-dir", d.dir, ...flags]);
      const retry = arrows(plan.out)
        .find((line) => line.includes("deletions retry"))!
        .replace(/\s+#.*$/, "");
      const pasted = await cli([...argsOf(retry), "--provider-token", sim.token]);
      expect(pasted.code, pasted.err).toBe(0);
    });
  });

  describe("exit codes follow the documented table", () => {
    it("maps each lifecycle code: a refusal a retry may cure is 6, a policy refusal 5", () => {
      const lifecycle = (code: LifecycleError["code"], status?: number) =>
        classifyError(new LifecycleError({ code, message: "x", ...(status === undefined ? {} : { status }) }))
          .exitCode;
      expect(lifecycle("deletion_unconfirmed")).toBe(6);
      expect(lifecycle("provider_unavailable")).toBe(6);
      expect(lifecycle("invalid_receipt")).toBe(6);
      expect(lifecycle("provider_refused", 429)).toBe(6);
      expect(lifecycle("provider_refused", 408)).toBe(6);
      expect(lifecycle("provider_refused", 403)).toBe(5);
      expect(lifecycle("provider_refused", 422)).toBe(5);
      expect(lifecycle("deletion_blocked")).toBe(5);
      expect(lifecycle("name_mismatch")).toBe(5);
      expect(lifecycle("recovery_paused")).toBe(5);
      expect(lifecycle("confirmation_mismatch")).toBe(4);
      expect(lifecycle("not_found")).toBe(3);
      expect(lifecycle("invalid_argument")).toBe(2);
    });

    it("deletions retry: a lost DELETE answer and a 429 exit 6, a policy refusal 5, each in drydock's words", async () => {
      const d = await dataDir();
      const cases: [string, FaultRule, number][] = [
        ["lost answer", { action: "drop-after", method: "DELETE", times: 1 }, 6],
        ["429", { action: "rate-limit", method: "DELETE", times: 1, retryAfterS: 5 }, 6],
        ["403", { action: "fail-before", method: "DELETE", status: 403, code: "forbidden", times: 1 }, 5],
      ];
      for (const [label, rule, exit] of cases) {
        const botId = `bot-${label.replace(/\W/g, "")}`;
        const boat = await d.lifecycle.provision(botId);
        await (await d.deleteJournalAgo(120_000)).prepareBoatDeletion({
          boxId: boat.boxId,
          name: boat.name,
          ownerBotId: botId,
        });
        const item = (await planItems(d.dir)).find((candidate) => candidate.boxId === boat.boxId)!;
        expect(item.action.name, label).toBe("retryDeletion");
        await faults([rule]);
        const run = await cli(argsOf(item.action.command), provider());
        await faults([]);
        expect(run.code, `${label}: ${run.err}`).toBe(exit);
        expect(run.err, label).not.toMatch(/retry Delete/);
        expect(run.err, label).toContain(`drydock --data-dir ${d.dir} reconcile`);
      }
    });
  });

  describe("status and reconcile say what they could not settle or see", () => {
    it("a journaled Boat whose direct read fails while the list works makes status INCOMPLETE (exit 6), naming it", async () => {
      const d = await dataDir();
      // A registered bot (on file this directory has no registry; on a row backend it is the storage's table).
      if (storage !== "file") await register(d.dir, [{ botId: "bot-unread", name: "Unread" }]);
      const boat = await d.lifecycle.provision("bot-unread");
      expect((await cli(["status", "--data-dir", d.dir], provider())).code).toBe(0);
      await faults([{ action: "fail-before", method: "GET", path: "^/sandboxes/bx_", times: 1_000 }]);
      const run = await cli(["status", "--data-dir", d.dir], provider());
      const json = JSON.parse(
        (await cli(["status", "--data-dir", d.dir, "--json"], provider())).out,
      ) as Parsed;
      await faults([]);
      expect(run.code, run.out + run.err).toBe(EXIT_CODES.PROVIDER_UNAVAILABLE);
      const verdict = run.out.trim().split("\n").at(-1)!;
      expect(verdict).toMatch(
        new RegExp(
          `^INCOMPLETE: boat\\.dev could not read Boat ${boat.boxId} \\(bot bot-unread\\): .+; 0 item\\(s\\) need attention locally\\.$`,
        ),
      );
      expect(verdict).not.toMatch(/^OK/);
      expect(json.providerChecked).toBe(false);
      expect(json.verdict).toBe(verdict);
      // reconcile too: the plan is printed, and exit 6 says it is incomplete, naming the Boat.
      await faults([{ action: "fail-before", method: "GET", path: "^/sandboxes/bx_", times: 1_000 }]);
      const reconcile = await cli(["reconcile", "--data-dir", d.dir], provider());
      await faults([]);
      expect(reconcile.code, reconcile.out + reconcile.err).toBe(EXIT_CODES.PROVIDER_UNAVAILABLE);
      expect(reconcile.out).toContain(`warning: boat.dev could not read Boat ${boat.boxId} (bot bot-unread)`);
      expect(reconcile.out).toContain("INCOMPLETE");
      expect(reconcile.out).not.toContain("journals and boat.dev agree");
    });

    it("a restore whose process still runs is in progress: the verdict says to run status again, never a plain OK", async () => {
      const d = await dataDir();
      const workspaceRoot = join(d.dir, "workspaces", "bot-restoring");
      mkdirSync(workspaceRoot, { recursive: true });
      const store = openSagaStore({ stateDir: join(d.dir, "restore-sagas"), workspaceRoot });
      const created = await store.create("op-running", {
        kind: "checkpoint-restore",
        checkpointId: "cp-1",
        checkpointManifestDigest: `sha256:${"a".repeat(64)}`,
        actorPid: process.pid,
      });
      // This process is the restore's: it holds the workspace lock and is alive.
      const held = await acquireWorkspaceLock({ dataDir: d.dir, workspaceRoot, transactionId: "op-running" });
      try {
        await store.advance("op-running", {
          expectedSeq: created.seq,
          expectedHash: created.headHash,
          phase: "locked",
          evidence: { workspaceLockOwner: held.owner, lockOwnerDigest: held.ownerDigest },
        });
        const prefix = `drydock --data-dir ${d.dir}`;
        const run = await cli(["status", "--data-dir", d.dir], provider());
        expect(run.code, run.err).toBe(0);
        const lines = run.out.trim().split("\n");
        expect(lines).toContainEqual(expect.stringMatching(/^· restore op-running: running \(locked\)$/));
        expect(lines.at(-1)).toBe(
          `OK: nothing needs a person now; 1 item(s) are still in progress; run \`${prefix} status\` again shortly.`,
        );
        const json = JSON.parse(
          (await cli(["status", "--data-dir", d.dir, "--json"], provider())).out,
        ) as Parsed;
        expect(json.findings.find((finding: Parsed) => finding.subject === "op-running")).toMatchObject({
          attention: false,
          inProgress: true,
          command: null,
        });
      } finally {
        held.release();
      }
    });

    it("status prints the advice of an item without a command, and a fence inside its in-flight window is a wait, not work by hand", async () => {
      const d = await dataDir();
      const boat = await d.lifecycle.provision("bot-young");
      // Prepared 5 s ago by another process: its DELETE may still be on the wire for 25 s more.
      await (await d.deleteJournalAgo(5_000)).prepareBoatDeletion({
        boxId: boat.boxId,
        name: boat.name,
        ownerBotId: "bot-young",
      });
      const prefix = `drydock --data-dir ${d.dir}`;
      const run = await cli(["status", "--data-dir", d.dir], provider());
      expect(run.code, run.err).toBe(0);
      const lines = run.out.trim().split("\n");
      const at = lines.findIndex((line) => line.includes(`deletion ${boat.boxId}:`));
      expect(at, run.out).toBeGreaterThanOrEqual(0);
      // The advice, under the item: how long to wait, then the command (with this data directory).
      expect(lines[at + 1]).toMatch(
        new RegExp(
          `^ {4}The deletion was prepared \\d+ s ago .*Wait \\d+ s, then run \`${prefix} reconcile\` again\\.$`,
        ),
      );
      // reconcile's table agrees with status: the fence is in progress (a wait), not work for a person.
      const table = await cli(["reconcile", "--data-dir", d.dir], provider());
      const row = table.out
        .split("\n")
        .find((line) => line.includes("deletion_fence") && line.includes(boat.boxId));
      expect(row, table.out).toMatch(/wait \d+ s/);
      expect(row).not.toMatch(/person/);
      const verdict = lines.at(-1)!;
      expect(verdict).not.toMatch(/by hand/);
      expect(verdict).toMatch(
        new RegExp(
          `^OK: nothing needs a person now; 1 item\\(s\\) are still in progress; run \`${prefix} status\` again in (2[0-9]|30) s\\.$`,
        ),
      );
      const json = JSON.parse(
        (await cli(["status", "--data-dir", d.dir, "--json"], provider())).out,
      ) as Parsed;
      const finding = json.findings.find((candidate: Parsed) => candidate.subject === boat.boxId);
      expect(finding).toMatchObject({
        attention: false,
        command: null,
        advice: expect.stringMatching(/Wait \d+ s/),
      });
      expect(finding.waitMs).toBeGreaterThan(0);
      expect(json.verdict).toBe(verdict);

      // With an item a person must settle by hand (a create past its window): its advice is printed under it,
      // and the verdict counts it apart from the wait.
      await (await openAt(d.dir, () => Date.now() - 25 * 3_600_000)).createJournal.beginBoatCreate(
        "bot-expired",
        JSON.stringify({ ttlSeconds: 28_800, noEnv: true }),
      );
      const both = await cli(["status", "--data-dir", d.dir], provider());
      expect(both.code, both.err).toBe(0);
      const bothLines = both.out.trim().split("\n");
      const expired = bothLines.findIndex((line) => line.includes("create bot-expired:"));
      expect(expired, both.out).toBeGreaterThanOrEqual(0);
      expect(bothLines[expired + 1]).toMatch(/^ {4}Look in boat\.dev for an unnamed Boat created around /);
      expect(bothLines.at(-1)).toMatch(
        /^ATTENTION: 1 item\(s\) need a person; none has a command to run: .* 1 item\(s\) are still in progress; run `.* status` again in \d+ s\.$/,
      );
    });

    it("a fenced Boat renamed in boat.dev: reconcile prints no retry (it could only refuse) but what to do, status counts it, and the retry printed before the rename exits 4", async () => {
      const d = await dataDir();
      const boat = await d.lifecycle.provision("bot-renamed-fence");
      await (await d.deleteJournalAgo(60_000)).prepareBoatDeletion({
        boxId: boat.boxId,
        name: boat.name,
        ownerBotId: "bot-renamed-fence",
      });
      const retry = arrows((await cli(["reconcile", "--data-dir", d.dir], provider())).out).find((line) =>
        line.includes(`deletions retry ${boat.boxId}`),
      );
      expect(retry).toBeDefined();
      await client.renameSandbox(boat.boxId, "renamed-in-boat-dev");

      const run = await cli(["reconcile", "--data-dir", d.dir], provider());
      expect(run.code, run.err).toBe(0);
      expect(arrows(run.out).filter((line) => line.includes(boat.boxId))).toEqual([]);
      expect(run.out).toContain(
        `boat.dev shows Boat ${boat.boxId} named renamed-in-boat-dev, not the fenced ${boat.name}`,
      );
      const status = await cli(["status", "--data-dir", d.dir], provider());
      expect(status.out.trim().split("\n").at(-1)).toMatch(/^ATTENTION: 1 item\(s\) need a person/);
      const stale = await cli(argsOf(retry!), provider());
      expect(stale.code, stale.out + stale.err).toBe(EXIT_CODES.STATE_CHANGED);
    });

    it("reconcile with boat.dev unreadable (401, unreachable) says the comparison is incomplete and what to fix; exit 6", async () => {
      const d = await dataDir();
      for (const env of [
        { BOAT_API_URL: sim.apiUrl, BOAT_API_TOKEN: "not-the-token" },
        { BOAT_API_URL: await closedPortUrl(), BOAT_API_TOKEN: sim.token },
      ]) {
        const run = await cli(["reconcile", "--data-dir", d.dir], env);
        expect(run.code, run.out + run.err).toBe(EXIT_CODES.PROVIDER_UNAVAILABLE);
        expect(run.out).not.toContain("journals and boat.dev agree");
        expect(run.out).toMatch(/could not be read/);
        expect(run.out).toMatch(/the comparison with boat\.dev is incomplete/);
        expect(run.out).toMatch(/BOAT_API_URL.*BOAT_API_TOKEN.*401/);
        expect(arrows(run.out)).toEqual([]);
        expect(run.out).toContain(`  drydock --data-dir ${d.dir} reconcile\n`);
      }
      // Reachable and accepted, with nothing to do: they agree (exit 0).
      const ok = await cli(["reconcile", "--data-dir", d.dir], provider());
      expect(ok.code, ok.err).toBe(0);
      expect(ok.out).toContain("Nothing needs a person: journals and boat.dev agree.");
    });
  });

  describe("secrets", () => {
    it("no output of this file carries the provider token", () => {
      expect(transcript.length).toBeGreaterThan(20);
      expect(transcript.join("\n").includes(sim.token)).toBe(false);
    });

    // Registered on postgres only (the other backends have no URL): never a skipped test.
    if (storage === "postgres") {
      it("no output of this file carries the database password or URL", () => {
        const password = new URL(databaseUrl).password;
        expect(password.length).toBeGreaterThan(0);
        const all = transcript.join("\n");
        expect(all.includes(password)).toBe(false);
        expect(all.includes(databaseUrl)).toBe(false);
      });
    }
  });
}
