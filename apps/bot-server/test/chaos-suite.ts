/**
 * Randomized chaos: the real server process is SIGKILLed at a random moment of every round (a timer, not a
 * named crash point) while a mixed workload runs against it — bots created and deleted, computers
 * provisioned and deleted (some twice at once), files written and deleted, checkpoints taken and restored —
 * and boat.dev misbehaves (5xx, 429 with Retry-After, dropped connections, commits whose answer is lost,
 * slow answers, blocked deletions). Then it is restarted on the same data directory and the next round goes
 * on. The boat.dev simulator runs in this (the test) process behind a recording proxy, so its Boats and the
 * proxy's log of every provider request are the truth across the server's deaths.
 *
 * After every restart (not only at the end) the truth is checked:
 *   - no bot ever had two billable Boats at once (every Boat the simulator ever created is attributed to its
 *     bot by its idempotency key; the bot's Boats' lifetimes may not overlap), and no name is live twice;
 *   - no DELETE leaves without a durable prepared deletion fence, no two DELETEs of a Boat are at boat.dev at
 *     once, and a DELETE whose answer never came back (or whose receipt was taken) is not followed by a
 *     second one inside the in-flight window (DELETE_IN_FLIGHT_MS, on the sending server's clock) without a
 *     proof in between; no fence is lost while its Boat may exist;
 *   - an interrupted restore is settled by the operator's fenced path (recovery controller: preview, then the
 *     eligible action — a seeded pick when several are — against the previewed fence; a settled saga left
 *     unarchived is released) and the workspace is then byte for byte its state before the restore or the
 *     checkpoint's; every other workspace is exactly what the acknowledged operations made it (an
 *     interrupted write or delete: before or after, nothing else), and acknowledged checkpoints stay;
 *   - GET /v1/recovery answers 200, lists nothing the workload did not start (no invented bot, Boat or
 *     restore) and hides nothing: every live Boat shows as its bot's computer or as an open item, every
 *     computer needing attention has its item, and no workspace stays locked without a listed restore (such
 *     a lock is reported, then moved away by hand as an operator would have to, so the run goes on).
 * Each restart comes back a few seconds later on the server's Boat clock (DRYDOCK_TEST_CLOCK_OFFSET_MS, read
 * by fixtures/server-entry.ts), the last one past the in-flight window.
 * At the end, with the faults cleared and the clock past the in-flight window, every computer is driven to
 * what the workload last asked for through the routes, and then the recovery report is empty, each bot has
 * exactly the Boats it should (one or none) and boat.dev bills no Boat that no bot owns.
 *
 * DRYDOCK_CHAOS_SEED replays a run's plan (kill times, faults, operations; the interleaving still depends on
 * timing); DRYDOCK_CHAOS_ROUNDS or DRYDOCK_RELIABILITY_SCALE change the number of rounds (default 8);
 * DRYDOCK_CHAOS_VERBOSE=1 prints the operation trail of a passing run too.
 *
 * The suite runs once per storage backend (chaos.test.ts: file, chaos-sqlite.test.ts: sqlite): every server
 * it spawns runs with DRYDOCK_STORAGE set to it, the journals are read through that backend (journal-view.ts:
 * the JSON files, or the database through a read-only connection), and after every restart the data
 * directory must hold that backend and no other.
 */
import { randomInt } from "node:crypto";
import { appendFileSync, readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { DELETE_IN_FLIGHT_MS, scopedBoatName } from "@drydock/boat-lifecycle";
import { type BoatSimulator, type FaultRule, startBoatSimulator } from "@drydock/boat-provider/simulator";
import {
  createRestoreRecoveryController,
  type PlanItem,
  type RestoreReportItem,
} from "@drydock/recovery-controller";
import { describe, expect, it } from "vitest";
import { isWorkspaceTempName } from "../src/workspace-files.js";
import {
  checkBoatsPerBot,
  checkDeletes,
  deleteCallsOf,
  parseSeed,
  type Rng,
  seededRng,
  sha256,
} from "./chaos-kit.js";
import {
  type Api,
  api,
  type RecordedCall,
  type RecordingProxy,
  type ServerChild,
  snapshotTree,
  spawnServer,
  startRecordingProxy,
  type TestStorage,
  tempDir,
} from "./helpers.js";
import { type JournalView, journalView, readJson } from "./journal-view.js";

const SEED = parseSeed(process.env.DRYDOCK_CHAOS_SEED, "DRYDOCK_CHAOS_SEED") ?? randomInt(1, 2 ** 31);
const SCALE = Number(process.env.DRYDOCK_RELIABILITY_SCALE ?? "1") || 1;
const ROUNDS = Math.max(1, Number(process.env.DRYDOCK_CHAOS_ROUNDS ?? "0") || Math.round(8 * SCALE));

/** Each lane of each round has its own stream of the run's seed. */
const rngFor = (...label: (string | number)[]): Rng => seededRng(SEED, ...label);

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

// --- the test's model -------------------------------------------------------------------------------------

/** Workspace content: relative path → bytes (base64). */
type Files = Record<string, string>;

/** The files-lane operation that was in flight when the server died: its outcome is unknown. */
type Interrupted =
  | { kind: "write" | "delete-file"; label: string; before: Files; after: Files }
  | { kind: "checkpoint"; label: string; before: Files }
  | { kind: "restore"; label: string; checkpointId: string; before: Files; after: Files };

interface BotModel {
  id: string;
  /** no: never created (or its create did not happen); gone: deleted; unknown: the answer was lost. */
  exists: "no" | "yes" | "gone" | "unknown";
  /** A DELETE of the bot is in flight (the files lane pauses). */
  deletingBot: boolean;
  /** What the workload last asked for: finish() drives the computer there. */
  computerIntent: "boat" | "none";
  botIntent: "keep" | "delete";
  /** The workload ever asked for this bot's computer (provision or delete): items about it are not invented. */
  touched: boolean;
  /** The computer as the last answer showed it (steers the next operation; never asserted on). */
  seen: "ready" | "none" | "unknown";
  /** The workspace as the acknowledged operations left it. */
  ws: Files;
  checkpoints: Map<string, Files>;
  interrupted?: Interrupted;
}

const PATHS = ["a.txt", "b.bin", "notes.md", "d0/x.txt", "d0/y.bin", "d1/w.txt", "d1/deep/z.bin"] as const;
const CREATE_PATH = "^/sandboxes$";
const ONE_BOAT_PATH = "^/sandboxes/bx_";
const OPERATION_PATH = "^/deletion-operations/";
/** Who sent a provider request: the server generation alive then, and that process's clock offset. */
type CallTag = { gen: number; offsetMs: number; round: string };
/** The sending server's clock when the request arrived (the lifecycle's window runs on that clock). */
const serverClock = (call: RecordedCall) => call.arrivedAt + (call.tag as CallTag).offsetMs;

/** GET /v1/recovery's answer (apps/bot-server/src/app.ts). */
interface RecoveryAnswer {
  open: number;
  complete: boolean;
  boats: (PlanItem & { attention: boolean })[];
  restores: RestoreReportItem[];
  unreadable: unknown[];
  startup: unknown;
}

const FAULTS: ((r: Rng) => FaultRule)[] = [
  (r) => ({ action: "fail-before", method: "POST", path: CREATE_PATH, status: r.pick([500, 502, 503]) }),
  () => ({ action: "fail-after", method: "POST", path: CREATE_PATH }),
  () => ({ action: "drop-after", method: "POST", path: CREATE_PATH }),
  () => ({ action: "drop-before", method: "POST", path: CREATE_PATH }),
  (r) => ({ action: "delay", method: "POST", path: CREATE_PATH, ms: r.int(50, 500) }),
  () => ({ action: "in-progress", method: "POST", path: CREATE_PATH, retryAfterS: 0 }),
  (r) => ({
    action: "rate-limit",
    method: r.pick(["POST", "DELETE", "GET", "PATCH"] as const),
    retryAfterS: r.int(0, 1),
  }),
  (r) =>
    withDelay(r, {
      action: r.pick(["fail-before", "fail-after", "drop-after", "delay"] as const),
      method: "PATCH",
    }),
  (r) =>
    withDelay(r, {
      action: r.pick(["fail-before", "fail-after", "drop-after", "drop-before", "delay"] as const),
      method: "DELETE",
      path: ONE_BOAT_PATH,
    }),
  (r) =>
    withDelay(r, {
      action: r.pick(["fail-before", "drop-after", "delay"] as const),
      method: "GET",
      path: OPERATION_PATH,
    }),
  (r) =>
    withDelay(r, { action: r.pick(["fail-before", "delay"] as const), method: "GET", path: "^/sandboxes" }),
  () => ({ action: "block-deletion" }),
];

function withDelay(r: Rng, rule: FaultRule): FaultRule {
  return rule.action === "delay" ? { ...rule, ms: r.int(50, 400) } : rule;
}

function sameFiles(a: Files, b: Files): boolean {
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((k) => a[k] === b[k]);
}

function describeFiles(files: Files): string {
  return `{${Object.keys(files)
    .sort()
    .map((k) => `${k}:${sha256(files[k] as string).slice(0, 8)}`)
    .join(", ")}}`;
}

// --- one chaos run ----------------------------------------------------------------------------------------

class Chaos {
  private readonly tmp = tempDir("chaos");
  private readonly dataDir = this.tmp.dir;
  private readonly journals: JournalView;
  private sim!: BoatSimulator;
  private proxy!: RecordingProxy;
  private server: ServerChild | null = null;
  private call: Api = () => Promise.reject(new Error("no server"));
  private envId = "";
  private gen = 0;
  private offsetMs = 0;
  private round = "start";
  private stopped = false;
  private nextBotNumber = 0;
  private readonly slots: BotModel[] = [];
  private readonly bots = new Map<string, BotModel>();
  /** sha256(idempotency key) → the bot whose create-journal row held the key when its POST left. */
  private readonly keyOwner = new Map<string, string>();
  private readonly trail: string[] = [];
  readonly violations: string[] = [];
  private readonly reported = new Set<string>();
  /** Restores GET /v1/recovery listed for a cut restore: operation id → bot. */
  private readonly cutRestores = new Map<string, string>();
  /** Listed restores the operator's path could not settle (reported once, not retried). */
  private readonly unsettleable = new Set<string>();
  readonly figures = {
    rounds: 0,
    kills: 0,
    operations: 0,
    interrupted: 0,
    interruptedRestores: 0,
    restoresRecovered: 0,
    faults: 0,
    boatsCreated: 0,
    providerCalls: 0,
    deleteRequests: 0,
    deleteResends: 0,
  };

  constructor(readonly storage: TestStorage) {
    this.journals = journalView(this.dataDir, storage);
  }

  async run(): Promise<void> {
    this.sim = await startBoatSimulator({ port: 0 });
    this.proxy = await startRecordingProxy(this.sim.url, { onArrive: (call) => this.onProviderCall(call) });
    await this.restart();
    const envId = this.journals.environmentId();
    if (envId === null)
      throw new Error(`the server started on ${this.storage} storage but stored no environment id`);
    this.envId = envId;
    const setup = rngFor("setup");
    for (let i = 0, n = setup.int(3, 4); i < n; i++) {
      const bot = this.newBot();
      this.slots.push(bot);
      await this.createBot(bot);
    }
    await this.check();
    for (let round = 1; round <= ROUNDS; round++) {
      this.round = `round ${round}`;
      const r = rngFor("round", round);
      await this.injectFaults(r);
      // Short rounds kill inside the first calls; long ones let provisions finish and kill their deletions.
      await this.workload(round, r.chance(0.4) ? r.int(5, 400) : r.int(400, 1_500));
      // Every request the dead server left at boat.dev finishes first (a restarted server would meet them).
      await this.proxy.idle();
      // A restart "comes back" a few seconds later on the server's Boat clock; the last one comes back past
      // the in-flight window, so the finish may retry every fence the rounds left prepared.
      this.offsetMs += r.int(2_000, 6_000) + (round === ROUNDS ? DELETE_IN_FLIGHT_MS + 1_000 : 0);
      await this.restart();
      await this.check();
      this.figures.rounds += 1;
      if (this.violations.length > 40) break;
    }
    this.round = "finish";
    await this.finish();
  }

  async dispose(): Promise<void> {
    this.server?.kill();
    this.journals.close();
    await this.proxy?.close();
    await this.sim?.close();
    this.tmp.cleanup();
  }

  report(): string {
    return [
      `chaos seed ${SEED} (replay: DRYDOCK_CHAOS_SEED=${SEED} DRYDOCK_CHAOS_ROUNDS=${ROUNDS}), stopped in ${this.round}, server generation ${this.gen}`,
      `${this.violations.length} violation(s):`,
      ...this.violations.map((v, i) => `  ${i + 1}. ${v}`),
      "last operations:",
      ...this.trail.slice(process.env.DRYDOCK_CHAOS_VERBOSE === "1" ? 0 : -150).map((line) => `  ${line}`),
      "server output (last generation, tail):",
      (this.server?.output() ?? "").slice(-3_000),
    ].join("\n");
  }

  // --- plumbing -------------------------------------------------------------------------------------------

  private note(line: string): void {
    this.trail.push(`[${this.round} g${this.gen}] ${line}`);
  }

  private violation(message: string): void {
    // The checks after every restart look at the whole history again: a finding is reported once.
    if (this.reported.has(message)) return;
    this.reported.add(message);
    const line = `[${this.round}, server generation ${this.gen}] ${message}`;
    this.violations.push(line);
    this.note(`VIOLATION ${message}`);
  }

  private workspaceRoot(botId: string): string {
    return join(this.dataDir, "workspaces", botId);
  }

  private disk(botId: string): Files {
    return snapshotTree(this.workspaceRoot(botId), { encoding: "base64", skip: isWorkspaceTempName });
  }

  private boatName(botId: string): string {
    return scopedBoatName(this.envId, botId);
  }

  private newBot(): BotModel {
    this.nextBotNumber += 1;
    const bot: BotModel = {
      id: `chaos-${this.nextBotNumber}`,
      exists: "no",
      deletingBot: false,
      computerIntent: "none",
      botIntent: "keep",
      touched: false,
      seen: "none",
      ws: {},
      checkpoints: new Map(),
    };
    this.bots.set(bot.id, bot);
    return bot;
  }

  private async restart(): Promise<void> {
    this.gen += 1;
    const started = Date.now();
    this.server = await spawnServer(this.dataDir, {
      BOAT_API_URL: `${this.proxy.url}/api/v1`,
      BOAT_API_TOKEN: this.sim.token,
      DRYDOCK_STORAGE: this.storage,
      // The server's Boat clock (journals, lifecycle, recovery plan); read only by fixtures/server-entry.ts.
      DRYDOCK_TEST_CLOCK_OFFSET_MS: String(this.offsetMs),
    });
    this.call = api(this.server.url, this.server.token);
    this.stopped = false;
    this.note(`server started in ${Date.now() - started} ms (Boat clock +${this.offsetMs} ms)`);
    // The server runs on the backend asked for: bound to it, and only that backend's files hold journals.
    const inUse = this.journals.inUse();
    const want = { binding: this.storage, sqliteFile: this.storage === "sqlite" };
    if (
      inUse.binding !== want.binding ||
      inUse.sqliteFile !== want.sqliteFile ||
      (this.storage === "sqlite" && inUse.journalFiles)
    ) {
      this.violation(
        `the server was asked for ${this.storage} storage, but the data directory shows ${JSON.stringify(inUse)}`,
      );
    }
  }

  private async simControl(method: string, path: string, body?: unknown): Promise<void> {
    const res = await fetch(`${this.sim.url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${this.sim.token}`,
        ...(body === undefined ? {} : { "content-type": "application/json" }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    expect(res.status, await res.text()).toBe(200);
  }

  private async injectFaults(r: Rng): Promise<void> {
    const rules = Array.from({ length: r.int(0, 4) }, () => ({ ...r.pick(FAULTS)(r), times: r.int(1, 2) }));
    if (rules.length > 0) await this.simControl("POST", "/_sim/faults", { rules });
    this.figures.faults += rules.length;
    this.note(
      `faults: ${rules.map((f) => `${f.action} ${f.method ?? "*"} ${f.path ?? "*"} x${f.times}`).join("; ") || "none"}`,
    );
  }

  /**
   * Runs at the proxy when a provider request arrives, before it is forwarded (synchronously, so the
   * server's journals are read as they stood when the request left).
   */
  private onProviderCall(call: RecordedCall): void {
    call.tag = { gen: this.gen, offsetMs: this.offsetMs, round: this.round } satisfies CallTag;
    try {
      this.judgeProviderCall(call);
    } catch (error) {
      this.violation(
        `provider call #${call.seq}: the server's journals could not be read (${String(error)})`,
      );
    }
  }

  private judgeProviderCall(call: RecordedCall): void {
    const path = call.path.replace(/^\/api\/v1/, "").split("?")[0] ?? "";
    if (call.method === "POST" && path === "/sandboxes") {
      const row = this.journals.creates().find((r) => r.idempotencyKey === call.idempotencyKey);
      if (row === undefined || call.idempotencyKey === undefined) {
        this.violation(
          `provider call #${call.seq} POST /sandboxes carries a key no create-journal row holds`,
        );
      } else {
        this.keyOwner.set(sha256(call.idempotencyKey), row.botId);
      }
    }
    const boat = /^\/sandboxes\/(bx_[a-z0-9]+)$/.exec(path)?.[1];
    if (call.method === "DELETE" && boat !== undefined) {
      const fence = this.fences().find((f) => f.boxId === boat);
      if (fence === undefined) {
        this.violation(
          `provider call #${call.seq}: DELETE of ${boat} left without a deletion fence in the journal`,
        );
      } else if (fence.phase !== "prepared") {
        this.violation(
          `provider call #${call.seq}: DELETE of ${boat} left while its fence is '${fence.phase}'`,
        );
      }
    }
  }

  private fences(): { boxId: string; phase: string; ownerBotId: string | null }[] {
    return this.journals.fences();
  }

  /** One request of the workload: its answer, or null when none came back (the outcome is unknown). */
  private async send(
    label: string,
    method: string,
    path: string,
    body?: unknown,
  ): Promise<Awaited<ReturnType<Api>> | null> {
    this.figures.operations += 1;
    const started = Date.now();
    try {
      const res = await this.call(method, path, body);
      this.note(
        `${label} → ${res.status}${res.json?.error?.code ? ` ${res.json.error.code}` : ""} (${Date.now() - started} ms)`,
      );
      if (res.status === 500) this.violation(`${label} answered 500: ${res.text.slice(0, 300)}`);
      return res;
    } catch (error) {
      if (!this.stopped)
        this.violation(`${label}: no answer while the server should be alive (${String(error)})`);
      this.note(`${label} → no answer`);
      this.figures.interrupted += 1;
      return null;
    }
  }

  private unexpected(label: string, res: Awaited<ReturnType<Api>>): void {
    this.violation(`${label}: unexpected answer ${res.status} ${res.text.slice(0, 300)}`);
  }

  // --- one round ------------------------------------------------------------------------------------------

  private async workload(round: number, killAtMs: number): Promise<void> {
    const server = this.server as ServerChild;
    this.stopped = false;
    const lanes = this.slots.flatMap((_, i) => {
      const computer = rngFor("round", round, "slot", i, "computer");
      // Some bots' computers churn this round; the others mostly only look, so their restores run.
      const active = computer.chance(0.7);
      return [
        this.computerLane(i, computer, active),
        this.filesLane(i, rngFor("round", round, "slot", i, "files")),
      ];
    });
    await sleep(killAtMs);
    this.stopped = true;
    const alive = server.child.exitCode === null && server.child.signalCode === null;
    this.note(`SIGKILL ${killAtMs} ms into the round`);
    server.kill();
    const exit = await server.exited;
    if (!alive || exit.signal !== "SIGKILL") {
      this.violation(`the server ended by itself before the kill (${JSON.stringify(exit)})`);
    }
    this.figures.kills += 1;
    await Promise.all(lanes);
  }

  private async computerLane(slot: number, r: Rng, active: boolean): Promise<void> {
    while (!this.stopped) {
      let bot = this.slots[slot] as BotModel;
      if (bot.exists === "gone") {
        bot = this.newBot();
        this.slots[slot] = bot;
      }
      if (bot.exists === "no") await this.createBot(bot);
      else if (bot.exists === "yes") {
        // Mostly the transition that changes something: delete a computer seen ready, provision one seen absent.
        const provide = bot.seen === "ready" ? 0.1 : bot.seen === "none" ? 0.75 : 0.45;
        const remove = bot.seen === "ready" ? 0.72 : bot.seen === "none" ? 0.06 : 0.4;
        const roll = active ? r.next() : 1;
        const twice = r.chance(0.15);
        if (roll < provide)
          await (twice ? Promise.all([this.provision(bot), this.provision(bot)]) : this.provision(bot));
        else if (roll < provide + remove) {
          await (twice
            ? Promise.all([this.deleteComputer(bot), this.deleteComputer(bot)])
            : this.deleteComputer(bot));
        } else if (roll < provide + remove + 0.04) await this.deleteBot(bot);
        else await this.look(bot, r);
      } else return;
      await sleep(active ? r.int(0, 20) : r.int(40, 150));
    }
  }

  private async filesLane(slot: number, r: Rng): Promise<void> {
    while (!this.stopped) {
      const bot = this.slots[slot] as BotModel;
      if (bot.exists !== "yes" || bot.deletingBot || bot.interrupted !== undefined) {
        await sleep(5);
        continue;
      }
      const roll = r.next();
      if (roll < 0.36) await this.writeFile(bot, r);
      else if (roll < 0.46) await this.deleteFile(bot, r);
      else if (roll < 0.62) await this.checkpoint(bot);
      else if (roll < 0.9) await this.restore(bot, r);
      else await this.readFile(bot, r);
      await sleep(r.int(0, 15));
    }
  }

  // --- computer lane operations ---------------------------------------------------------------------------

  private async createBot(bot: BotModel): Promise<void> {
    const res = await this.send(`${bot.id} create bot`, "POST", "/v1/bots", { name: bot.id, botId: bot.id });
    if (res === null) bot.exists = "unknown";
    else if (res.status === 201) bot.exists = "yes";
    else this.unexpected(`${bot.id} create bot`, res);
  }

  private async provision(bot: BotModel): Promise<void> {
    bot.computerIntent = "boat";
    bot.botIntent = "keep";
    bot.touched = true;
    const label = `${bot.id} provision`;
    const res = await this.send(label, "POST", `/v1/bots/${bot.id}/computer`);
    if (res === null) return;
    bot.seen = "unknown";
    if (res.status === 200 || res.status === 201) {
      const computer = res.json.computer;
      if (computer?.status !== "ready" || computer.name !== this.boatName(bot.id))
        this.unexpected(label, res);
      bot.seen = "ready";
    } else if (res.json?.error?.code === "previous_deletion_finished") bot.seen = "none";
    else if (![409, 429, 502, 503].includes(res.status)) this.unexpected(label, res);
  }

  private async deleteComputer(bot: BotModel): Promise<void> {
    bot.computerIntent = "none";
    bot.touched = true;
    const label = `${bot.id} delete computer`;
    const res = await this.send(label, "DELETE", `/v1/bots/${bot.id}/computer`, {
      confirmName: this.boatName(bot.id),
    });
    if (res === null) return;
    const notFound = res.status === 404 && res.json?.error?.code === "computer_not_found";
    bot.seen = res.status === 200 || notFound ? "none" : "unknown";
    if (![200, 202, 409, 429, 502, 503].includes(res.status) && !notFound) this.unexpected(label, res);
  }

  private async deleteBot(bot: BotModel): Promise<void> {
    bot.computerIntent = "none";
    bot.botIntent = "delete";
    bot.touched = true;
    bot.deletingBot = true;
    const label = `${bot.id} delete bot`;
    const res = await this.send(label, "DELETE", `/v1/bots/${bot.id}`, {
      confirmName: this.boatName(bot.id),
    });
    bot.deletingBot = false;
    if (res === null) bot.exists = "unknown";
    else if (res.status === 200) bot.exists = "gone";
    else if (![409, 429, 502, 503].includes(res.status)) this.unexpected(label, res);
  }

  private async look(bot: BotModel, r: Rng): Promise<void> {
    const which = r.int(0, 2);
    const label = [`${bot.id} view computer`, "list bots", "inventory"][which] as string;
    const path = [`/v1/bots/${bot.id}/computer`, "/v1/bots", "/v1/computers"][which] as string;
    const res = await this.send(label, "GET", path);
    if (res !== null && res.status !== 200 && !(which === 2 && [429, 502, 503].includes(res.status))) {
      this.unexpected(label, res);
    }
  }

  // --- files lane operations ------------------------------------------------------------------------------

  /** Mostly small files, some larger ones (a longer write, checkpoint and restore to be killed in). */
  private content(r: Rng): Buffer {
    const size = r.chance(0.06)
      ? r.int(200_000, 1_000_000)
      : r.chance(0.3)
        ? r.int(1_000, 16_000)
        : r.int(1, 400);
    const pattern = Buffer.from(Array.from({ length: 251 }, () => r.int(0, 255)));
    const data = Buffer.alloc(size);
    for (let at = 0; at < size; at += pattern.length) pattern.copy(data, at);
    return data;
  }

  /** A files-lane answer that changed nothing for an expected reason (a computer call or bot deletion ran). */
  private harmless(bot: BotModel, res: Awaited<ReturnType<Api>>): boolean {
    const code = res.json?.error?.code;
    return (
      (res.status === 409 && code === "bot_busy") ||
      (res.status === 404 && code === "bot_not_found" && (bot.deletingBot || bot.exists !== "yes"))
    );
  }

  private async writeFile(bot: BotModel, r: Rng): Promise<void> {
    const path = r.pick(PATHS);
    const data = this.content(r);
    const before = bot.ws;
    const after = { ...before, [path]: data.toString("base64") };
    const label = `${bot.id} write ${path} (${data.length} B)`;
    const res = await this.send(label, "PUT", `/v1/bots/${bot.id}/files/${path}`, new Uint8Array(data));
    if (res === null) bot.interrupted = { kind: "write", label, before, after };
    else if (res.status === 201) bot.ws = after;
    else if (!this.harmless(bot, res)) this.unexpected(label, res);
  }

  private async deleteFile(bot: BotModel, r: Rng): Promise<void> {
    const present = Object.keys(bot.ws);
    const path = present.length > 0 && r.chance(0.85) ? r.pick(present) : r.pick(PATHS);
    const before = bot.ws;
    const after = Object.fromEntries(Object.entries(before).filter(([p]) => p !== path));
    const label = `${bot.id} delete file ${path}`;
    const res = await this.send(label, "DELETE", `/v1/bots/${bot.id}/files/${path}`);
    if (res === null) bot.interrupted = { kind: "delete-file", label, before, after };
    else if (res.status === 200 && path in before) bot.ws = after;
    else if (res.status === 404 && res.json?.error?.code === "file_not_found" && !(path in before)) {
      // As the model says: there was no such file.
    } else if (!this.harmless(bot, res)) this.unexpected(label, res);
  }

  private async checkpoint(bot: BotModel): Promise<void> {
    const before = bot.ws;
    const label = `${bot.id} checkpoint`;
    const res = await this.send(label, "POST", `/v1/bots/${bot.id}/checkpoints`);
    if (res === null) bot.interrupted = { kind: "checkpoint", label, before };
    else if (res.status === 201) bot.checkpoints.set(res.json.checkpoint.checkpointId as string, before);
    else if (!this.harmless(bot, res)) this.unexpected(label, res);
  }

  private async restore(bot: BotModel, r: Rng): Promise<void> {
    const ids = [...bot.checkpoints.keys()];
    if (ids.length === 0) return this.checkpoint(bot);
    const checkpointId = r.pick(ids);
    const target = bot.checkpoints.get(checkpointId) as Files;
    const before = bot.ws;
    const label = `${bot.id} restore ${checkpointId.slice(0, 12)}`;
    const res = await this.send(label, "POST", `/v1/bots/${bot.id}/checkpoints/${checkpointId}/restore`);
    if (res === null) {
      this.figures.interruptedRestores += 1;
      bot.interrupted = { kind: "restore", label, checkpointId, before, after: target };
    } else if (res.status === 200) {
      // Nothing else writes this workspace meanwhile (the files lane is the only writer): it is the checkpoint.
      const disk = this.disk(bot.id);
      if (!sameFiles(disk, target)) {
        this.violation(
          `${label} answered 200 but the workspace is ${describeFiles(disk)}, not the checkpoint's ${describeFiles(target)}`,
        );
      }
      bot.ws = disk;
    } else if (!this.harmless(bot, res)) this.unexpected(label, res);
  }

  private async readFile(bot: BotModel, r: Rng): Promise<void> {
    const path = r.pick(PATHS);
    const label = `${bot.id} read ${path}`;
    this.figures.operations += 1;
    let status: number;
    let bytes: Buffer;
    try {
      const res = await fetch(`${(this.server as ServerChild).url}/v1/bots/${bot.id}/files/${path}`, {
        headers: { authorization: `Bearer ${(this.server as ServerChild).token}` },
      });
      status = res.status;
      bytes = Buffer.from(await res.arrayBuffer());
    } catch {
      this.note(`${label} → no answer`);
      if (!this.stopped) this.violation(`${label}: no answer while the server should be alive`);
      return;
    }
    this.note(`${label} → ${status}`);
    const want = bot.ws[path];
    if (want === undefined ? status !== 404 : status !== 200 || bytes.toString("base64") !== want) {
      if (!(status === 404 && (bot.deletingBot || bot.exists !== "yes"))) {
        this.violation(
          `${label}: answered ${status} with ${bytes.length} B; the model holds ${want === undefined ? "no such file" : `${Buffer.from(want, "base64").length} B`}`,
        );
      }
    }
  }

  // --- after every restart --------------------------------------------------------------------------------

  private async recovery(): Promise<RecoveryAnswer | null> {
    const res = await this.call("GET", "/v1/recovery");
    if (res.status !== 200) {
      this.violation(`GET /v1/recovery answered ${res.status}: ${res.text.slice(0, 300)}`);
      return null;
    }
    return res.json as RecoveryAnswer;
  }

  private async check(): Promise<void> {
    const started = Date.now();
    // Startup recovery runs with whatever faults the round left; the report is read once it has finished.
    const deadline = Date.now() + 20_000;
    for (;;) {
      const report = await this.recovery();
      if (report === null) break;
      if (report.startup !== null) break;
      if (Date.now() > deadline) {
        this.violation("startup recovery did not finish within 20 s (GET /v1/recovery: startup is null)");
        break;
      }
      await sleep(50);
    }
    await this.simControl("DELETE", "/_sim/faults");

    for (const bot of this.bots.values()) {
      if (bot.exists !== "unknown") continue;
      const res = await this.call("GET", `/v1/bots/${bot.id}`);
      if (res.status === 200) bot.exists = "yes";
      else if (res.status === 404) bot.exists = bot.botIntent === "delete" ? "gone" : "no";
      else this.unexpected(`${bot.id} read bot`, res);
      this.note(`${bot.id} exists after the restart: ${bot.exists}`);
    }

    const report = await this.recovery();
    if (report !== null) {
      if (report.complete !== true)
        this.violation(`GET /v1/recovery is incomplete: ${JSON.stringify(report.unreadable)}`);
      await this.checkBoats(report);
      await this.settleRestores(report);
    }
    this.checkWorkspaceLocks();
    await this.checkWorkspaces();
    if (report !== null && report.restores.length > 0) {
      const after = await this.recovery();
      if (after !== null && after.restores.length > 0) {
        this.violation(`restores still open after the fenced recovery: ${JSON.stringify(after.restores)}`);
      }
    }
    this.note(`checked in ${Date.now() - started} ms`);
  }

  /** The Boat invariants, from the simulator's records and the proxy's log. */
  private async checkBoats(report: RecoveryAnswer): Promise<void> {
    const boats = this.sim.sandboxes();
    for (const [name, count] of Object.entries(this.sim.stats().perName)) {
      if (count > 1) this.violation(`boat.dev has ${count} live Boats named ${name}`);
    }

    // Every Boat belongs to the bot whose key created it, carries no other bot's name, and a bot's Boats
    // never overlap in time (a Boat is billable from its creation until its deletion completed).
    const { findings, owner } = checkBoatsPerBot(
      boats,
      (boat) => this.keyOwner.get(boat.keyHash),
      (botId) => this.boatName(botId),
    );
    for (const finding of findings) this.violation(finding);

    this.checkDeletes(owner);

    // No deletion fence is lost while its Boat may exist: a live Boat that was ever sent DELETE is fenced.
    const fenced = new Set(this.fences().map((f) => f.boxId));
    const deleted = new Set(this.deleteCalls().map((c) => c.boxId));
    for (const boat of boats) {
      if (boat.deletedAt === null && deleted.has(boat.id) && !fenced.has(boat.id)) {
        this.violation(
          `Boat ${boat.id} was sent DELETE and still exists, but no deletion fence remains for it`,
        );
      }
    }

    // Nothing invented: every open item is about a bot whose computer the workload touched, and a Boat
    // boat.dev really has for that bot.
    for (const item of report.boats) {
      if (item.botId !== null && this.bots.get(item.botId)?.touched !== true) {
        this.violation(
          `GET /v1/recovery lists ${item.kind} for bot ${item.botId}, whose computer the workload never touched`,
        );
      }
      if (item.boxId !== null) {
        const boatOwner = owner.get(item.boxId);
        if (boatOwner === undefined || (item.botId !== null && boatOwner !== item.botId)) {
          this.violation(
            `GET /v1/recovery lists ${item.kind} for Boat ${item.boxId} of bot ${item.botId}, which boat.dev never created for it`,
          );
        }
      }
    }

    // Nothing hidden: every live Boat is its bot's computer or an open item; every computer that needs
    // attention (or is being deleted) has its item; a ready computer is a live Boat of that bot.
    const views = new Map<string, { status: string; boxId?: string }>();
    for (const bot of this.bots.values()) {
      if (bot.exists !== "yes") continue;
      const res = await this.call("GET", `/v1/bots/${bot.id}/computer`);
      if (res.status !== 200) {
        this.unexpected(`${bot.id} view computer`, res);
        continue;
      }
      const view = res.json.computer as { status: string; boxId?: string };
      views.set(bot.id, view);
      bot.seen = view.status === "ready" ? "ready" : view.status === "none" ? "none" : "unknown";
      const items = report.boats.filter((i) => i.botId === bot.id || (view.boxId && i.boxId === view.boxId));
      if (view.status === "needs_attention" && items.length === 0) {
        this.violation(
          `bot ${bot.id}'s computer needs attention (${JSON.stringify(view)}) but GET /v1/recovery lists nothing for it`,
        );
      }
      if (view.status === "deleting" && !items.some((i) => i.kind === "deletion_fence")) {
        this.violation(
          `bot ${bot.id}'s computer is being deleted (${view.boxId}) but GET /v1/recovery lists no fence for it`,
        );
      }
      if (view.status === "provisioning")
        this.violation(`bot ${bot.id}'s computer shows provisioning with no call running`);
      if (view.status === "ready") {
        const boat = boats.find((b) => b.id === view.boxId);
        if (
          boat === undefined ||
          boat.deletedAt !== null ||
          owner.get(boat.id) !== bot.id ||
          boat.name !== this.boatName(bot.id)
        ) {
          this.violation(
            `bot ${bot.id}'s computer shows ready as ${view.boxId}, which is not a live, named Boat of it (${JSON.stringify(boat ?? null)})`,
          );
        }
      }
    }
    for (const boat of boats) {
      if (boat.deletedAt !== null) continue;
      const botId = owner.get(boat.id);
      if (botId === undefined) continue;
      const view = views.get(botId);
      if (view === undefined) {
        this.violation(
          `live Boat ${boat.id} belongs to bot ${botId}, which no longer exists (${this.bots.get(botId)?.exists})`,
        );
        continue;
      }
      const listed = report.boats.some((i) => i.boxId === boat.id || i.botId === botId);
      const shown =
        ((view.status === "ready" || view.status === "deleting") && view.boxId === boat.id) ||
        (view.status === "needs_attention" && listed);
      if (!shown) {
        this.violation(
          `live ${boat.name === null ? "unnamed " : ""}Boat ${boat.id} of bot ${botId} is hidden: its computer shows ${JSON.stringify(view)} and GET /v1/recovery ${listed ? "lists it" : "lists nothing for it"}`,
        );
      }
    }
  }

  private deleteCalls(): (RecordedCall & { boxId: string })[] {
    return deleteCallsOf(this.proxy.calls);
  }

  /** No blind second DELETE (chaos-kit's checkDeletes), on each server generation's (offset) clock. */
  private checkDeletes(owner: Map<string, string>): void {
    const findings = checkDeletes({
      calls: this.proxy.calls,
      ownerOf: (boxId) => owner.get(boxId),
      clockOf: serverClock,
      sameSender: (a, b) => (a.tag as CallTag).gen === (b.tag as CallTag).gen,
      label: (call) => `#${call.seq}`,
      origin: (call) => (call.tag as CallTag).round,
    });
    for (const finding of findings) this.violation(finding);
  }

  /**
   * Every listed restore is one the workload started and that was cut off; each is settled the operator's
   * way (preview, then the one eligible action against exactly the previewed fence). Then every interrupted
   * restore's workspace is its state before the restore or the checkpoint's, whether or not it was listed.
   */
  private async settleRestores(report: RecoveryAnswer): Promise<void> {
    const r = rngFor("settle", this.round);
    for (const item of report.restores) {
      const bot = this.bots.get(item.botId);
      // A restore an earlier cut explained, still listed because it could not be settled then (reported).
      const explained = this.cutRestores.get(item.operationId) === item.botId;
      if (bot?.interrupted?.kind === "restore") this.cutRestores.set(item.operationId, item.botId);
      else if (explained && bot !== undefined) {
        this.note(`${item.botId} restore ${item.operationId} from an earlier cut is still listed`);
      } else {
        this.violation(
          `GET /v1/recovery lists restore ${item.operationId} of ${item.botId} (${item.phase}), which no interrupted restore of the workload explains`,
        );
        continue;
      }
      if (this.unsettleable.has(item.operationId)) continue;
      const controller = createRestoreRecoveryController({
        dataDir: this.dataDir,
        workspaceRoot: this.workspaceRoot(bot.id),
      });
      let settled: { archived: boolean } | null = null;
      try {
        settled = await this.settleRestore(controller, item.operationId, bot.id, r);
        // A settled saga whose filing failed is released later, as docs/OPERATORS.md says (archived: false).
        if (settled !== null && !settled.archived) {
          settled = await this.settleRestore(controller, item.operationId, bot.id, r);
        }
      } catch (error) {
        this.violation(
          `GET /v1/recovery lists restore ${item.operationId} of ${bot.id} (${JSON.stringify(item)}), but the recovery controller cannot settle it: ${(error as Error).message}`,
        );
        this.unsettleable.add(item.operationId);
        continue;
      }
      if (settled !== null && !settled.archived) {
        this.violation(
          `restore ${item.operationId} of ${bot.id} is settled but could not be archived: ${JSON.stringify(settled)}`,
        );
      }
      this.figures.restoresRecovered += 1;
    }
    for (const bot of this.bots.values()) {
      const cut = bot.interrupted;
      if (cut?.kind !== "restore" || bot.exists !== "yes") continue;
      const disk = this.disk(bot.id);
      if (sameFiles(disk, cut.before)) this.note(`${bot.id} after the cut restore: as before it`);
      else if (sameFiles(disk, cut.after)) this.note(`${bot.id} after the cut restore: the checkpoint`);
      else {
        this.violation(
          `${cut.label}: after the restart and the fenced recovery the workspace is ${describeFiles(disk)}, neither its state before the restore ${describeFiles(cut.before)} nor the checkpoint's ${describeFiles(cut.after)}`,
        );
      }
      bot.ws = disk;
      bot.interrupted = undefined;
    }
  }

  /**
   * The operator's path: preview, then an eligible action (the preview's one, or a seeded choice when the
   * controller offers more than one: each leaves the workspace before or after) with the previewed fence.
   */
  private async settleRestore(
    controller: ReturnType<typeof createRestoreRecoveryController>,
    operationId: string,
    botId: string,
    r: Rng,
  ): Promise<{ archived: boolean } | null> {
    const preview = await controller.preview(operationId);
    const verdicts = preview.actions as Record<string, { eligible: boolean }>;
    const eligible = Object.keys(verdicts).filter((a) => verdicts[a]?.eligible === true);
    if (eligible.length === 0) {
      this.violation(
        `restore ${operationId} of ${botId} (${preview.saga.phase}) has no eligible action: ${JSON.stringify(preview.actions)}`,
      );
      this.unsettleable.add(operationId);
      return null;
    }
    const action = r.pick(eligible.sort());
    const act = (
      controller as unknown as Record<
        string,
        (id: string, input: object) => Promise<{ ok: boolean; archived: boolean; warning?: unknown }>
      >
    )[action];
    if (act === undefined) {
      this.violation(
        `restore ${operationId}: the preview offers '${action}', which the controller does not have`,
      );
      return null;
    }
    const input = action === "abort" ? { ...preview.fence, reason: "chaos: server killed" } : preview.fence;
    const result = await act.call(controller, operationId, input);
    this.note(
      `${botId} restore ${operationId} (${preview.saga.phase}; eligible ${eligible.join("/")}) settled by ${action}: ok ${result.ok}, archived ${result.archived}${result.warning ? `, warning ${JSON.stringify(result.warning)}` : ""}`,
    );
    if (!result.ok) {
      this.violation(`the ${action} of restore ${operationId} of ${botId} failed: ${JSON.stringify(result)}`);
      return null;
    }
    return result;
  }

  /**
   * With no request running, a workspace lock on disk is one a dead process left. The restores' were
   * settled above, so any left now blocks its workspace (every write answers 409 RECOVERY_REQUIRED) while
   * GET /v1/recovery lists nothing an operator could settle it with. Recorded, then moved away by hand
   * (what an operator would have to do) so the run can go on looking for more.
   */
  private checkWorkspaceLocks(): void {
    const locks = join(this.dataDir, "locks");
    let names: string[] = [];
    try {
      names = readdirSync(locks);
    } catch {
      return;
    }
    for (const name of names.filter((n) => /^ws-[0-9a-f]{64}\.lock$/.test(n))) {
      const owner = readJson(join(locks, name)) as {
        pid?: number;
        payload?: { transactionId?: string; workspaceRoot?: string };
      } | null;
      const tx = owner?.payload?.transactionId ?? "?";
      const botId = owner?.payload?.workspaceRoot?.split("/").at(-1) ?? "?";
      this.violation(
        `workspace of ${botId} is still locked by ${tx} (pid ${owner?.pid}, dead) after the restart and the recovery: its writes, checkpoints and restores answer 409 RECOVERY_REQUIRED ("Restore ${tx} … stopped without finishing") while GET /v1/recovery lists no restore for it and the recovery controller has no saga to settle (moved away by hand to go on)`,
      );
      rmSync(join(locks, name), { force: true });
    }
  }

  /** Every workspace is what the acknowledged operations made it; a cut operation left before or after. */
  private async checkWorkspaces(): Promise<void> {
    for (const bot of this.bots.values()) {
      if (bot.exists !== "yes") {
        bot.interrupted = undefined;
        continue;
      }
      const disk = this.disk(bot.id);
      const cut = bot.interrupted;
      if (cut === undefined || cut.kind === "checkpoint") {
        if (!sameFiles(disk, bot.ws)) {
          this.violation(
            `${bot.id}: the workspace is ${describeFiles(disk)}, not what the acknowledged operations made it ${describeFiles(bot.ws)}`,
          );
        }
      } else if (cut.kind === "write" || cut.kind === "delete-file") {
        if (!sameFiles(disk, cut.before) && !sameFiles(disk, cut.after)) {
          this.violation(
            `${cut.label} was cut off and left the workspace ${describeFiles(disk)}, neither before ${describeFiles(cut.before)} nor after ${describeFiles(cut.after)}`,
          );
        }
      }
      bot.ws = disk;
      // Acknowledged checkpoints are never lost; a cut one may or may not exist, and then holds what was.
      const res = await this.call("GET", `/v1/bots/${bot.id}/checkpoints`);
      if (res.status !== 200) {
        this.unexpected(`${bot.id} list checkpoints`, res);
        continue;
      }
      const listed = (res.json.checkpoints as { checkpointId: string; kind?: string }[])
        .filter((c) => c.kind === undefined || c.kind === "user")
        .map((c) => c.checkpointId);
      for (const id of bot.checkpoints.keys()) {
        if (!listed.includes(id)) this.violation(`${bot.id}: acknowledged checkpoint ${id} is gone`);
      }
      const unknown = listed.filter((id) => !bot.checkpoints.has(id));
      if (cut?.kind === "checkpoint" && unknown.length === 1)
        bot.checkpoints.set(unknown[0] as string, cut.before);
      else if (unknown.length > 0)
        this.violation(`${bot.id}: checkpoints nobody created: ${unknown.join(", ")}`);
      bot.interrupted = undefined;
    }
  }

  // --- the end ----------------------------------------------------------------------------------------------

  /**
   * Faults are cleared and the last restart came back past the in-flight window: every computer is driven
   * to what the workload last asked for through the routes alone, and every bot whose deletion was asked
   * for is deleted. Then nothing may be left open, and boat.dev bills exactly the Boats the bots own.
   */
  private async finish(): Promise<void> {
    for (const bot of this.bots.values()) {
      if (bot.exists !== "yes") continue;
      let settled = false;
      for (let attempt = 0; attempt < 30 && !settled; attempt++) {
        const view = (await this.call("GET", `/v1/bots/${bot.id}/computer`)).json?.computer;
        if (bot.computerIntent === "boat") {
          if (view?.status === "ready") settled = true;
          else if (view?.status === "needs_attention" && view.name !== undefined) {
            // The previous Boat's deletion was refused or never confirmed: a create never re-sends it (its
            // 409 names the Delete to send), so finish it as the answer says, with the Boat's name.
            await this.send(
              `${bot.id} finish: delete the fenced computer`,
              "DELETE",
              `/v1/bots/${bot.id}/computer`,
              {
                confirmName: view.name,
              },
            );
          } else await this.send(`${bot.id} finish: provision`, "POST", `/v1/bots/${bot.id}/computer`);
        } else if (view?.status === "none") settled = true;
        else if (view?.status === "needs_attention" && view.boxId === undefined) {
          // A create whose outcome is unknown is settled by retrying it (same key), then deleted.
          await this.send(`${bot.id} finish: settle the create`, "POST", `/v1/bots/${bot.id}/computer`);
        } else {
          await this.send(`${bot.id} finish: delete computer`, "DELETE", `/v1/bots/${bot.id}/computer`, {
            confirmName: this.boatName(bot.id),
          });
        }
        if (!settled) await sleep(50);
      }
      if (!settled)
        this.violation(`bot ${bot.id}'s computer never reached '${bot.computerIntent}' through the routes`);
      if (bot.botIntent === "delete") {
        const res = await this.send(`${bot.id} finish: delete bot`, "DELETE", `/v1/bots/${bot.id}`);
        if (res?.status === 200) bot.exists = "gone";
        else
          this.violation(
            `bot ${bot.id} could not be deleted at the end: ${res?.status} ${res?.text.slice(0, 300)}`,
          );
      }
    }

    const report = await this.recovery();
    if (report !== null) {
      await this.checkBoats(report);
      if (
        report.open !== 0 ||
        report.boats.length > 0 ||
        report.restores.length > 0 ||
        report.unreadable.length > 0
      ) {
        this.violation(
          `the recovery report is not empty at the end: ${JSON.stringify({ open: report.open, boats: report.boats, restores: report.restores, unreadable: report.unreadable })}`,
        );
      }
    }
    const live = this.sim.sandboxes().filter((b) => b.deletedAt === null);
    let expected = 0;
    for (const bot of this.bots.values()) {
      const own = live.filter((b) => this.keyOwner.get(b.keyHash) === bot.id);
      const want = bot.exists === "yes" && bot.computerIntent === "boat" ? 1 : 0;
      expected += want;
      if (own.length !== want) {
        this.violation(
          `at the end bot ${bot.id} (${bot.exists}, wants ${bot.computerIntent}) has ${own.length} live Boats (${own.map((b) => b.id).join(", ")}), not ${want}`,
        );
      }
    }
    if (live.length !== expected) {
      this.violation(
        `boat.dev bills ${live.length} Boats at the end; the bots own ${expected}: ${live.map((b) => `${b.id}(${b.name})`).join(", ")}`,
      );
    }
    const stats = this.sim.stats();
    this.figures.boatsCreated = stats.createsCommitted;
    this.figures.providerCalls = this.proxy.calls.length;
    this.figures.deleteRequests = stats.deleteRequests;
    const boats = new Set(this.deleteCalls().map((c) => c.boxId));
    this.figures.deleteResends = this.deleteCalls().length - boats.size;
    this.note(
      `end: ${stats.live} live Boats, ${stats.createsCommitted} created, ${stats.deleteRequests} DELETE requests, ${stats.deletesAccepted} deletions accepted`,
    );
  }
}

/** The chaos test on one storage backend (DRYDOCK_STORAGE of every server it spawns). */
export function chaosSuite(storage: TestStorage): void {
  describe(`chaos (${storage} storage): the server SIGKILLed at random moments under a mixed workload and provider faults`, () => {
    it(
      `seed ${SEED}, ${ROUNDS} rounds: one Boat per bot, no blind DELETE, no half-restored workspace, nothing hidden (replay: DRYDOCK_CHAOS_SEED=${SEED})`,
      async () => {
        const chaos = new Chaos(storage);
        try {
          await chaos.run();
        } catch (error) {
          throw new Error(
            `${chaos.report()}\n\nthe run itself failed: ${(error as Error).stack ?? String(error)}`,
          );
        } finally {
          await chaos.dispose();
        }
        console.log(`chaos (${storage} storage) seed ${SEED}: ${JSON.stringify(chaos.figures)}`);
        // Figures for `pnpm reliability` (scripts/reliability.mjs); a no-op unless DRYDOCK_RELIABILITY_OUT is set.
        const out = process.env.DRYDOCK_RELIABILITY_OUT;
        if (out) {
          const f = chaos.figures;
          for (const [metric, value] of [
            ["chaos SIGKILLs of the server at a random moment", f.kills],
            ["chaos operations run against the server", f.operations],
            ["chaos restores interrupted, then settled by the fenced operator path", f.restoresRecovered],
            ["chaos invariant violations", chaos.violations.length],
          ] as const) {
            appendFileSync(out, `${JSON.stringify({ area: "server", backend: storage, metric, value })}\n`);
          }
        }
        if (process.env.DRYDOCK_CHAOS_VERBOSE === "1") console.log(chaos.report());
        expect(chaos.violations, chaos.report()).toEqual([]);
      },
      60_000 + ROUNDS * 10_000,
    );
  });
}
