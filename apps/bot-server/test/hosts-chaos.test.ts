/**
 * Several hosts on one machine (issue 24): one PostgreSQL (test-kit's cluster, a database of this file's
 * own, one schema shared by every server), the standalone boat.dev simulator (drydock-boat-sim, its own
 * process), and three drydock-server processes (each its own data directory, port and instance lease, a
 * short DRYDOCK_LEASE_TTL_MS), each talking to boat.dev through a recording proxy of its own (so every
 * provider request is attributed to the server process that sent it). Client lanes create bots, provision
 * and delete their computers, change their workspaces (write and delete files, create checkpoints, restore
 * them) and delete bots at random against random servers, while a chaos loop SIGKILLs
 * a server and restarts it, or SIGSTOPs one until its lease has passed by the database's clock and then
 * SIGCONTs it (the zombie), and boat.dev misbehaves now and then. Every count is bounded; every wait is for
 * a condition with a generous deadline, never a duration that must hold.
 *
 * Afterwards (the servers stopped):
 *   - at most one billable Boat per bot at any time, and no name live twice (the simulator's record of every
 *     Boat it ever created, attributed by the create key a server's POST carried);
 *   - no two DELETEs of one Boat at boat.dev at once and no blind re-send inside the in-flight window (the
 *     proxies' logs: chaos-kit's checkDeletes);
 *   - every POST carried a key a create row held when it left (or was a 200 replay of a Boat its key had
 *     already made: nothing new billed), and every live Boat is known to the journals;
 *   - instance epochs only increased: an instance's epoch never changes, the greatest epoch never goes down,
 *     each server process's registrations have increasing epochs, the zombie's lapsed row is not live and its
 *     re-registration has a greater epoch;
 *   - the zombie started no side effect (create POST or DELETE) from its resumption until it re-registered
 *     (its lease is checked before each and again as undici writes it: leaseGatedFetch; a request the pause
 *     caught between its gate and its write is refused on resume, not sent);
 *   - every acknowledged bot creation is in the registry, every acknowledged bot deletion is not, and an
 *     acknowledged provision nothing deleted afterwards is the bot's create row and a live Boat;
 *   - `drydock status --json`, `creates list --json` and `deletions list --json` against the same database
 *     read it as postgres, check boat.dev, and list exactly the journals' rows.
 *   - workspaces (a lane owns its bots' workspaces and changes each one call at a time, so a model of what
 *     was acknowledged is exact for answered calls; a call whose answer was lost, or a 503 lease_lost, leaves
 *     the head either before or after it, until the lane's next read resolves which — that read must be one
 *     of them). Through a live server (the lanes stopped) and from the database (the servers stopped, the
 *     store's `workspaces` and its tables): each standing bot's head is a state the model allows, never a mix
 *     of a checkpoint's and the previous head's beyond what acknowledged writes explain, and exactly its last
 *     acknowledged restore's checkpoint when nothing was written after it; every acknowledged checkpoint
 *     exists with exactly the files (path → sha256) it captured; every restore answered 200 is recorded as
 *     completed (GET /v1/restores/:operationId and the database); every restore in the database is completed
 *     or listed by GET /v1/recovery;
 *   - each paused server is asked, while it sleeps, to restore a checkpoint of a bot no lane touches: the
 *     database holds no restore of that bot started between the zombie's resumption and its re-registration,
 *     and a 200 to it is a restore recorded after the re-registration.
 * Reported in the summary line: checkpoints and restores sent (acknowledged), workspace calls with an
 * unknown outcome (resolved by a read), restores asked of a paused server (refused with lease_lost).
 *
 * DRYDOCK_HOSTS_SEED replays a run's plan (the interleaving still depends on timing);
 * DRYDOCK_RELIABILITY_SCALE sizes it (events and bots); DRYDOCK_HOSTS_VERBOSE=1 prints the trail of a passing run.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { appendFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { promisify } from "node:util";
import { scopedBoatName } from "@drydock/boat-lifecycle";
import type { FaultRule, SimSandboxRecord } from "@drydock/boat-provider/simulator";
import { ENVIRONMENT_ID_FILE } from "@drydock/facts";
import { type InstanceView, openPostgresStorage, type PostgresStorage } from "@drydock/storage-postgres";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkBoatsPerBot, checkDeletes, parseSeed, type Rng, seededRng, sha256 } from "./chaos-kit.js";
import {
  type Api,
  api,
  REPO_ROOT,
  type RecordedCall,
  type RecordingProxy,
  type ServerChild,
  spawnServer,
  startRecordingProxy,
  tempDir,
  usePostgresDatabase,
} from "./helpers.js";

const SEED =
  parseSeed(process.env.DRYDOCK_HOSTS_SEED, "DRYDOCK_HOSTS_SEED") ?? Math.floor(Math.random() * 2 ** 31);
const SCALE = Number(process.env.DRYDOCK_RELIABILITY_SCALE ?? "1") || 1;
/** Chaos events (kills and pauses), at least two of each kind. */
const EVENTS = Math.max(4, Math.round(6 * SCALE));
const BOTS = Math.max(4, Math.round(6 * SCALE));
const LANES = 4;
/** Requests per lane at most (the lanes also stop when the chaos loop ends). */
const MAX_OPS_PER_LANE = 40 * EVENTS;
const SERVERS = 3;
const LEASE_TTL_MS = 1_500;
const SCHEMA = "hosts";
/** A bot no lane touches: each paused server is asked to restore its checkpoint while it sleeps. */
const ZOMBIE_BOT = "host-zombie-probe";
const TOKEN = "hosts-chaos-token-0123456789";
const SIM_TOKEN = "hosts-chaos-simulator-token";
const SIM_BIN = join(REPO_ROOT, "packages", "boat-provider", "src", "bin.ts");
const CLI_MAIN = join(REPO_ROOT, "apps", "recovery-cli", "src", "main.ts");
/** Generous bound on every condition wait (a loaded two-core machine). */
const WAIT_MS = 60_000;

const execFileAsync = promisify(execFile);
const rngFor = (...label: (string | number)[]): Rng => seededRng(SEED, ...label);

/** Faults whose aftermath any host must handle (answers lost, refused, slow; deletions blocked). */
const FAULTS: ((r: Rng) => FaultRule)[] = [
  (r) => ({ action: "fail-before", method: "POST", path: "^/sandboxes$", status: r.pick([500, 502, 503]) }),
  () => ({ action: "drop-after", method: "POST", path: "^/sandboxes$" }),
  (r) => ({ action: "delay", method: "POST", path: "^/sandboxes$", ms: r.int(50, 400) }),
  (r) => ({ action: "rate-limit", method: r.pick(["POST", "DELETE", "GET"] as const), retryAfterS: 0 }),
  () => ({ action: "fail-before", method: "DELETE", path: "^/sandboxes/bx_" }),
  () => ({ action: "drop-after", method: "DELETE", path: "^/sandboxes/bx_" }),
  (r) => ({ action: "delay", method: "DELETE", path: "^/sandboxes/bx_", ms: r.int(50, 400) }),
  () => ({ action: "block-deletion" }),
];

/** Who sent a provider request: the server slot and that slot's process generation. */
type Sender = { slot: number; gen: number };

interface Slot {
  index: number;
  dataDir: string;
  proxy: RecordingProxy;
  server: ServerChild | null;
  call: Api;
  gen: number;
  /** SIGKILLed and not yet restarted: requests to it fail. */
  down: boolean;
}

interface BotModel {
  id: string;
  exists: "no" | "yes" | "unknown" | "gone";
  /** DELETEs of the computer or the bot sent and not answered yet. */
  deletesInFlight: number;
  /** The Boat of the last acknowledged provision, while no delete was sent after it. */
  ackedBoat: string | null;
  /** Its workspace as the owning lane's answered calls leave it (only that lane changes it). */
  ws: WorkspaceModel;
  /** False once a DELETE of the bot was sent: its workspace may be retired, so it is no longer modelled. */
  filesTrusted: boolean;
}

/** A workspace state: path → hex sha256 of the file's bytes (the store's manifest without modes and sizes). */
type Files = Readonly<Record<string, string>>;

/** The paths lanes write and delete (one nested, as a restore must bring back directories too). */
const WS_PATHS = ["notes.txt", "a.txt", "dir/b.txt"] as const;

const filesKey = (files: Files): string =>
  JSON.stringify(
    Object.keys(files)
      .sort()
      .map((path) => [path, files[path]]),
  );
const sameFiles = (a: Files, b: Files): boolean => filesKey(a) === filesKey(b);
/** The states, without repeats. */
const distinct = (states: readonly Files[]): Files[] => [
  ...new Map(states.map((s) => [filesKey(s), s])).values(),
];
const showFiles = (files: Files): string =>
  `{${Object.keys(files)
    .sort()
    .map((path) => `${path}:${(files[path] as string).slice(0, 8)}`)
    .join(", ")}}`;

/**
 * What was acknowledged of one bot's workspace. Its lane sends one call at a time, so for answered calls the
 * model is exact: `states` holds one state. A call whose answer was lost (a kill, a 503 lease_lost) may or
 * may not have applied: `states` then holds the states before and after, and the lane reads the workspace
 * again before its next change (the read must be one of them: anything else is an acknowledged change lost,
 * or a restore half applied).
 */
export interface WorkspaceModel {
  states: Files[];
  /** A call's outcome is unknown and no read has resolved it yet. */
  unsure: boolean;
  /** Acknowledged checkpoints (201) → the files they captured. */
  checkpoints: Map<string, Files>;
  /** Restores answered 200. */
  restores: AckedRestore[];
  /** The last change sent was this acknowledged restore (no write or delete sent since). */
  lastRestore: AckedRestore | null;
}

interface AckedRestore {
  operationId: string;
  checkpointId: string;
  files: Files;
}

/** The model after a change: applied when acknowledged; when its answer was lost, before or after. */
export function applyChange(model: WorkspaceModel, change: (files: Files) => Files, acked: boolean): void {
  const after = model.states.map(change);
  model.states = distinct(acked ? after : [...model.states, ...after]);
  if (!acked) model.unsure = true;
}

interface Pause {
  slot: number;
  gen: number;
  pid: number;
  old: { id: string; epoch: number };
  contAt: number;
  /** Database time the zombie's new registration started (its side effects are allowed again from then). */
  reRegisteredAt: number;
  newEpoch: number;
  /** The operation id of the restore of ZOMBIE_BOT asked of it while paused, when that answered 200. */
  probeRestore: string | null;
  /** This process's registrations once it re-registered (for messages). */
  registrations: string;
}

class Hosts {
  private readonly tmp = tempDir("hosts");
  private sim: ChildProcess | null = null;
  private simUrl = "";
  readonly slots: Slot[] = [];
  private reader!: PostgresStorage;
  private envId = "";
  /** The bots the lanes pick from; a deleted bot's place is taken by a new one. */
  private readonly bots: BotModel[] = [];
  /** Every bot the run ever had. */
  private readonly everyBot: BotModel[] = [];
  private nextBot = 0;
  private readonly pauses: Pause[] = [];
  /** sha256(idempotency key) → the bot whose create row held it when the POST arrived. */
  private readonly keyOwner = new Map<string, string>();
  /** Create POSTs whose key no create row held when they left (judged in check(), with boat.dev's answer). */
  private readonly unheldKeys: { slot: number; seq: number; keyHash: string; call: RecordedCall }[] = [];
  /** Every instance epoch ever read, by id (an id's epoch never changes). */
  private readonly epochs = new Map<string, number>();
  private maxEpoch = 0;
  private stopped = false;
  readonly violations: string[] = [];
  readonly trail: string[] = [];
  readonly figures = {
    kills: 0,
    pauses: 0,
    requests: 0,
    unanswered: 0,
    leaseLost: 0,
    faults: 0,
    boats: 0,
    fileWrites: 0,
    fileWritesAcked: 0,
    checkpoints: 0,
    checkpointsAcked: 0,
    restores: 0,
    restoresAcked: 0,
    /** Workspace calls (write, delete, checkpoint, restore) whose answer was lost or was lease_lost. */
    unknownOutcomes: 0,
    /** Reads of a workspace that resolved an unknown outcome. */
    resyncs: 0,
    zombieRestores: 0,
    zombieRestoresRefused: 0,
    workspacesChecked: 0,
  };
  private writeSeq = 0;
  private zombieCheckpoint = "";
  /** Operation ids GET /v1/recovery listed at the end (a restore not completed must be among them). */
  private reportedRestores = new Set<string>();

  constructor(private readonly url: string) {}

  private note(line: string): void {
    this.trail.push(`[${new Date().toISOString().slice(11, 23)}] ${line}`);
  }

  private violation(message: string): void {
    if (this.violations.includes(message)) return;
    this.violations.push(message);
    this.note(`VIOLATION ${message}`);
  }

  // --- processes --------------------------------------------------------------------------------------------

  private async startSimulator(): Promise<void> {
    const child = spawn(
      process.execPath,
      ["--conditions=@drydock/source", "--import", "tsx", SIM_BIN, "--port", "0", "--token", SIM_TOKEN],
      { cwd: REPO_ROOT, stdio: ["ignore", "pipe", "pipe"], detached: true },
    );
    this.sim = child;
    let out = "";
    child.stdout?.on("data", (d: Buffer) => {
      out += d.toString();
    });
    child.stderr?.on("data", (d: Buffer) => {
      out += d.toString();
    });
    const deadline = Date.now() + WAIT_MS;
    while (!/BOAT_API_TOKEN=/.test(out)) {
      if (child.exitCode !== null) throw new Error(`drydock-boat-sim exited before listening:\n${out}`);
      if (Date.now() > deadline) throw new Error(`drydock-boat-sim did not start:\n${out}`);
      await sleep(50);
    }
    this.simUrl = (/listening on (http:\/\/\S+)/.exec(out) as RegExpExecArray)[1] as string;
  }

  private async simControl(method: string, path: string, body?: unknown): Promise<unknown> {
    const res = await api(this.simUrl, SIM_TOKEN)(method, path, body);
    if (res.status !== 200)
      throw new Error(`simulator ${method} ${path} answered ${res.status}: ${res.text}`);
    return res.json;
  }

  private async startServer(slot: Slot): Promise<void> {
    slot.gen += 1;
    slot.server = await spawnServer(slot.dataDir, {
      BOAT_API_URL: `${slot.proxy.url}/api/v1`,
      BOAT_API_TOKEN: SIM_TOKEN,
      // One boat.dev behind three addresses (a recording proxy per server): named alike, as the shared
      // store requires of every server.
      BOAT_API_IDENTITY: "chaos-simulator",
      DRYDOCK_STORAGE: this.url,
      DRYDOCK_POSTGRES_SCHEMA: SCHEMA,
      DRYDOCK_LEASE_TTL_MS: String(LEASE_TTL_MS),
      DRYDOCK_TOKEN: TOKEN,
    });
    slot.call = api(slot.server.url, TOKEN);
    slot.down = false;
    this.note(`server ${slot.index} generation ${slot.gen} started (pid ${slot.server.child.pid})`);
  }

  async setup(): Promise<void> {
    await this.startSimulator();
    this.reader = await openPostgresStorage({
      url: this.url,
      schema: SCHEMA,
      dataDir: join(this.tmp.dir, "reader"),
    });
    for (let index = 0; index < SERVERS; index++) {
      const dataDir = join(this.tmp.dir, `host-${index}`);
      mkdirSync(dataDir);
      const slot: Slot = {
        index,
        dataDir,
        proxy: await startRecordingProxy(this.simUrl, {
          onArrive: (call) => {
            call.tag = { slot: index, gen: this.slots[index]?.gen ?? 0 } satisfies Sender;
          },
          beforeForward: (call) => this.judgeCreate(index, call),
        }),
        server: null,
        call: () => Promise.reject(new Error("no server")),
        gen: 0,
        down: true,
      };
      this.slots.push(slot);
    }
    // The three start at once, as replicas behind a load balancer would.
    await Promise.all(this.slots.map((slot) => this.startServer(slot)));
    const envId = (await this.reader.exportAll()).meta[ENVIRONMENT_ID_FILE];
    if (envId === undefined)
      throw new Error("three servers started on one schema but stored no environment id");
    this.envId = envId;
    for (let i = 0; i < BOTS; i++) this.bots.push(this.newBot());
    // The zombie probe's bot: a checkpoint holding `before`, and a head holding `after`.
    const call = (this.slots[0] as Slot).call;
    const must = async (status: number, method: string, path: string, body?: unknown) => {
      const res = await call(method, path, body);
      if (res.status !== status)
        throw new Error(`setup: ${method} ${path} answered ${res.status}, not ${status}: ${res.text}`);
      return res;
    };
    await must(201, "POST", "/v1/bots", { name: ZOMBIE_BOT, botId: ZOMBIE_BOT });
    await must(201, "PUT", `/v1/bots/${ZOMBIE_BOT}/files/z.txt`, "before");
    const made = await must(201, "POST", `/v1/bots/${ZOMBIE_BOT}/checkpoints`);
    this.zombieCheckpoint = made.json.checkpoint.checkpointId as string;
    await must(201, "PUT", `/v1/bots/${ZOMBIE_BOT}/files/z.txt`, "after");
  }

  private newBot(): BotModel {
    const bot: BotModel = {
      id: `host-bot-${this.nextBot++}`,
      exists: "no",
      deletesInFlight: 0,
      ackedBoat: null,
      ws: { states: [{}], unsure: false, checkpoints: new Map(), restores: [], lastRestore: null },
      filesTrusted: true,
    };
    this.everyBot.push(bot);
    return bot;
  }

  async dispose(): Promise<void> {
    for (const slot of this.slots) {
      const pid = slot.server?.child.pid;
      if (pid !== undefined) {
        try {
          process.kill(-pid, "SIGCONT");
        } catch {
          // gone
        }
      }
      slot.server?.kill();
      await slot.proxy.close();
    }
    if (this.sim?.pid !== undefined && this.sim.exitCode === null) process.kill(-this.sim.pid, "SIGKILL");
    await this.reader?.close();
    this.tmp.cleanup();
  }

  /**
   * At the proxy, before a create POST is forwarded: its key must be held by a create row now (the row is
   * written before the first POST; while the POST is held here boat.dev has answered nothing, so no
   * deletion or refusal can have retired the row yet).
   */
  private async judgeCreate(slot: number, call: RecordedCall): Promise<void> {
    if (call.method !== "POST" || !/^\/api\/v1\/sandboxes(\?|$)/.test(call.path)) return;
    const key = call.idempotencyKey;
    if (key === undefined) {
      this.violation(`server ${slot}: POST /sandboxes without an idempotency key`);
      return;
    }
    try {
      const row = (await this.reader.exportAll()).creates.find((r) => r.idempotencyKey === key);
      if (row === undefined) {
        this.note(`server ${slot}: POST /sandboxes #${call.seq} with a key no create row holds`);
        this.unheldKeys.push({ slot, seq: call.seq, keyHash: sha256(key), call });
      } else this.keyOwner.set(sha256(key), row.botId);
    } catch (error) {
      this.violation(`the journals could not be read for a POST: ${String(error)}`);
    }
  }

  private async instances(): Promise<InstanceView[]> {
    const rows = (await this.reader.instances.list()).instances;
    for (const row of rows) {
      const seen = this.epochs.get(row.id);
      if (seen !== undefined && seen !== row.epoch)
        this.violation(`instance ${row.id}'s epoch changed from ${seen} to ${row.epoch}`);
      this.epochs.set(row.id, row.epoch);
    }
    const max = Math.max(0, ...rows.map((r) => r.epoch));
    if (max < this.maxEpoch)
      this.violation(`the greatest instance epoch went down from ${this.maxEpoch} to ${max}`);
    this.maxEpoch = Math.max(this.maxEpoch, max);
    return rows;
  }

  private async until<T>(what: string, probe: () => Promise<T | undefined>): Promise<T> {
    const deadline = Date.now() + WAIT_MS;
    for (;;) {
      const value = await probe();
      if (value !== undefined) return value;
      if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
      await sleep(50);
    }
  }

  // --- the chaos loop ---------------------------------------------------------------------------------------

  async chaos(): Promise<void> {
    for (let event = 0; event < EVENTS; event++) {
      const r = rngFor("event", event);
      await sleep(r.int(200, 900));
      const rules = Array.from({ length: r.int(0, 2) }, () => ({ ...r.pick(FAULTS)(r), times: 1 }));
      if (rules.length > 0) await this.simControl("POST", "/_sim/faults", { rules });
      this.figures.faults += rules.length;
      const slot = r.pick(this.slots);
      // The first two events are one kill and one pause; then either, at random.
      const kill = event === 0 || (event > 1 && r.chance(0.5));
      if (kill) await this.killAndRestart(slot, r);
      else await this.pauseAndResume(slot, r);
      await this.instances();
    }
  }

  private async killAndRestart(slot: Slot, r: Rng): Promise<void> {
    const server = slot.server as ServerChild;
    slot.down = true;
    server.kill();
    const exit = await server.exited;
    if (exit.signal !== "SIGKILL")
      this.violation(`server ${slot.index} ended by itself before the kill (${JSON.stringify(exit)})`);
    this.figures.kills += 1;
    this.note(`SIGKILL server ${slot.index} generation ${slot.gen}`);
    await sleep(r.int(0, 600));
    await this.startServer(slot);
  }

  private async pauseAndResume(slot: Slot, r: Rng): Promise<void> {
    const pid = slot.server?.child.pid as number;
    const old = await this.until(`server ${slot.index}'s live instance is listed`, async () =>
      (await this.instances()).find((row) => row.pid === pid && row.state === "live"),
    );
    process.kill(-pid, "SIGSTOP");
    this.figures.pauses += 1;
    this.note(`SIGSTOP server ${slot.index} (instance ${old.id}, epoch ${old.epoch})`);
    // Side effects asked of the zombie while it sleeps: they wait in its sockets and reach it as it wakes.
    const probes = Promise.all(
      this.bots
        .filter((bot) => bot.exists === "yes")
        .slice(0, 4)
        .map((bot, i) => (i % 3 === 2 ? this.deleteComputer(slot, bot) : this.provision(slot, bot))),
    );
    // And a restore: refused (lease_lost) as it wakes, or applied only once it has registered again.
    this.figures.zombieRestores += 1;
    const probeRestore = this.send(
      slot,
      `${ZOMBIE_BOT} restore (asked of the paused server)`,
      "POST",
      `/v1/bots/${ZOMBIE_BOT}/checkpoints/${this.zombieCheckpoint}/restore`,
      [200],
    ).then((res) => {
      if (res === null) this.figures.zombieRestoresRefused += 1;
      return res?.status === 200 ? (res.json?.operationId as string) : null;
    });
    const passed = await this.until(
      `server ${slot.index}'s lease has passed by the database's clock`,
      async () => {
        const row = (await this.instances()).find((x) => x.id === old.id);
        return row !== undefined && row.leaseLeftMs <= 0 ? row : undefined;
      },
    );
    await sleep(r.int(0, 500));
    const contAt = Date.now();
    process.kill(-pid, "SIGCONT");
    this.note(`SIGCONT server ${slot.index}`);
    const renewed = await this.until(`server ${slot.index} re-registers with a greater epoch`, async () =>
      (await this.instances()).find((row) => row.pid === pid && row.epoch > old.epoch),
    );
    await probes;
    const probeOperation = await probeRestore;
    const after = await this.instances();
    const lapsed = after.find((row) => row.id === old.id);
    if (lapsed?.state === "live" && lapsed.leaseLeftMs > 0)
      this.violation(`server ${slot.index}'s lapsed instance ${old.id} holds a lease again after its pause`);
    // Nothing renews a lease once it has passed (a renewal that waited across its end included).
    if (lapsed !== undefined && lapsed.leaseUntil !== passed.leaseUntil)
      this.violation(
        `server ${slot.index}'s lapsed instance ${old.id} was renewed after its lease passed (lease end ${passed.leaseUntil}, then ${lapsed.leaseUntil})`,
      );
    // Every registration of this process, for a violation's message: epoch, state, start, lease end.
    const registrations = after
      .filter((row) => row.pid === pid)
      .sort((a, b) => a.epoch - b.epoch)
      .map((row) => `epoch ${row.epoch} ${row.state} from ${row.startedAt} until ${row.leaseUntil}`)
      .join("; ");
    this.pauses.push({
      slot: slot.index,
      gen: slot.gen,
      pid,
      old: { id: old.id, epoch: old.epoch },
      contAt,
      reRegisteredAt: renewed.startedAt,
      newEpoch: renewed.epoch,
      probeRestore: probeOperation,
      registrations,
    });
  }

  // --- the clients ------------------------------------------------------------------------------------------

  async lane(n: number): Promise<void> {
    const r = rngFor("lane", n);
    for (let ops = 0; ops < MAX_OPS_PER_LANE && !this.stopped; ops++) {
      const place = r.int(0, this.bots.length - 1);
      if ((this.bots[place] as BotModel).exists === "gone") this.bots[place] = this.newBot();
      const bot = this.bots[place] as BotModel;
      const slot = r.pick(this.slots.filter((s) => !s.down));
      if (slot === undefined) {
        await sleep(20);
        continue;
      }
      if (bot.exists === "no" || bot.exists === "unknown") await this.createBot(slot, bot);
      else if (bot.exists === "yes") {
        const roll = r.next();
        // A lane owns the workspaces of the places p with p % LANES = n (one call at a time per workspace):
        // a workspace change goes to one of its own bots.
        const own = this.bots.filter((b, p) => p % LANES === n && b.exists === "yes" && b.filesTrusted);
        if (roll < 0.3) await this.provision(slot, bot);
        else if (roll < 0.5) await this.deleteComputer(slot, bot);
        else if (roll < 0.9 && own.length > 0) await this.workspaceOp(slot, r.pick(own), r);
        // The bot at place 0 is never deleted: at least one modelled workspace stands at the end.
        else if (roll < 0.94 && place !== 0) await this.deleteBot(slot, bot);
        else
          await this.send(slot, `${bot.id} view computer`, "GET", `/v1/bots/${bot.id}/computer`, [200, 404]);
      }
      await sleep(r.int(0, 40));
    }
  }

  /** One request; null when no answer came (its server was killed meanwhile, else a violation). */
  private async send(
    slot: Slot,
    label: string,
    method: string,
    path: string,
    expected: number[],
    body?: unknown,
  ): Promise<Awaited<ReturnType<Api>> | null> {
    const gen = slot.gen;
    this.figures.requests += 1;
    try {
      const res = await slot.call(method, path, body);
      this.note(`${label} @${slot.index}/${gen} → ${res.status} ${res.json?.error?.code ?? ""}`);
      if (res.json?.error?.code === "lease_lost") {
        // A server past its lease refuses any write (its epoch is fenced), maybe after an earlier step of
        // the request took effect (a Boat deleted before the bot's removal was refused): told like a request
        // whose answer was lost, so the model keeps what it knows as unknown.
        this.figures.leaseLost += 1;
        if (res.status !== 503)
          this.violation(`${label} on server ${slot.index}: lease_lost with status ${res.status}, not 503`);
        return null;
      }
      if (!expected.includes(res.status))
        this.violation(
          `${label} on server ${slot.index}: unexpected answer ${res.status} ${res.text.slice(0, 300)}`,
        );
      return res;
    } catch (error) {
      this.figures.unanswered += 1;
      this.note(`${label} @${slot.index}/${gen} → no answer`);
      if (slot.gen === gen && !slot.down)
        this.violation(
          `${label}: no answer from server ${slot.index}, which was not killed (${String(error)})`,
        );
      return null;
    }
  }

  private async createBot(slot: Slot, bot: BotModel): Promise<void> {
    if (bot.exists === "unknown") {
      const res = await this.send(slot, `${bot.id} read bot`, "GET", `/v1/bots/${bot.id}`, [200, 404]);
      if (res?.status === 200) bot.exists = "yes";
      if (res?.status !== 404) return;
    }
    const res = await this.send(slot, `${bot.id} create bot`, "POST", "/v1/bots", [201, 409], {
      name: bot.id,
      botId: bot.id,
    });
    if (res === null) bot.exists = "unknown";
    else if (res.status === 201 || res.json?.error?.code === "bot_exists") bot.exists = "yes";
  }

  private async provision(slot: Slot, bot: BotModel): Promise<void> {
    const res = await this.send(
      slot,
      `${bot.id} provision`,
      "POST",
      `/v1/bots/${bot.id}/computer`,
      [200, 201, 404, 409, 429, 502, 503],
    );
    if (res === null) return;
    const computer = res.json?.computer;
    if (res.status === 200 || res.status === 201) {
      if (computer?.status !== "ready" || computer.name !== scopedBoatName(this.envId, bot.id))
        this.violation(`${bot.id} provision on server ${slot.index} acknowledged ${res.text.slice(0, 300)}`);
      else if (bot.deletesInFlight === 0) bot.ackedBoat = computer.boxId as string;
    }
  }

  /**
   * One change of the bot's workspace by its owning lane: a write, a delete, a checkpoint or a restore of an
   * acknowledged checkpoint. After an unknown outcome the workspace is read first (a read that answers
   * nothing defers the change).
   */
  private async workspaceOp(slot: Slot, bot: BotModel, r: Rng): Promise<void> {
    const ws = bot.ws;
    if (ws.unsure && !(await this.resync(slot, bot))) return;
    const current = ws.states[0] as Files;
    const roll = r.next();
    const present = WS_PATHS.filter((path) => current[path] !== undefined);
    if (roll < 0.15 && present.length > 0) await this.changeFile(slot, bot, r.pick(present), null);
    else if (roll < 0.55 || (roll < 0.75 && ws.checkpoints.size === 0))
      await this.changeFile(slot, bot, r.pick(WS_PATHS), `${bot.id} write ${++this.writeSeq}`);
    else if (roll < 0.75) await this.checkpoint(slot, bot);
    else if (ws.checkpoints.size > 0) await this.restore(slot, bot, r.pick([...ws.checkpoints.keys()]));
    else await this.checkpoint(slot, bot);
  }

  /** A call's answer was lost (or lease_lost): counted; the model already holds before and after. */
  private unknownOutcome(bot: BotModel, what: string): void {
    this.figures.unknownOutcomes += 1;
    this.note(
      `${bot.id}: ${what} has an unknown outcome; its workspace may be ${bot.ws.states.map(showFiles).join(" or ")}`,
    );
  }

  /**
   * Reads every modelled path (from `slot`); the workspace must be one of the states the model allows, which
   * it then becomes. False when a read answered nothing (the model stays unsure).
   */
  private async resync(slot: Slot, bot: BotModel): Promise<boolean> {
    const read = await this.readWorkspace(slot, bot);
    if (read === null) return false;
    this.figures.resyncs += 1;
    this.judgeHead(bot, read, `read through server ${slot.index}`);
    bot.ws.states = [read];
    bot.ws.unsure = false;
    return true;
  }

  /** The modelled paths of the bot's workspace through a server; null when a read answered nothing usable. */
  private async readWorkspace(slot: Slot, bot: BotModel): Promise<Files | null> {
    const files: Record<string, string> = {};
    for (const path of WS_PATHS) {
      const res = await this.send(
        slot,
        `${bot.id} read ${path}`,
        "GET",
        `/v1/bots/${bot.id}/files/${path}`,
        [200, 404],
      );
      if (res === null) return null;
      if (res.status === 200) files[path] = sha256(res.text);
      else if (res.json?.error?.code !== "file_not_found") return null;
    }
    return files;
  }

  /** A head (read through a server or from the database) must be a state the model allows. */
  private judgeHead(bot: BotModel, head: Files, where: string): void {
    if (!bot.filesTrusted || bot.exists !== "yes") return;
    const ws = bot.ws;
    if (!ws.states.some((s) => sameFiles(s, head)))
      this.violation(
        `${bot.id}: the workspace ${where} is ${showFiles(head)}, which no state the model allows: ${ws.states.map(showFiles).join(" or ")} (an acknowledged change lost, a refused one applied, or a restore half applied)`,
      );
    const last = ws.lastRestore;
    if (last !== null && !ws.unsure && !sameFiles(head, last.files))
      this.violation(
        `${bot.id}: restore ${last.operationId} of ${last.checkpointId} was acknowledged and nothing was written since, but the workspace ${where} is ${showFiles(head)}, not its checkpoint's ${showFiles(last.files)}`,
      );
  }

  /** PUT a path with a value never written before, or (value null) DELETE it. */
  private async changeFile(slot: Slot, bot: BotModel, path: string, value: string | null): Promise<void> {
    const ok = value === null ? 200 : 201;
    if (value !== null) this.figures.fileWrites += 1;
    const res = await this.send(
      slot,
      `${bot.id} ${value === null ? "delete" : "write"} ${path}`,
      value === null ? "DELETE" : "PUT",
      `/v1/bots/${bot.id}/files/${path}`,
      [ok, 404, 409, 503],
      value ?? undefined,
    );
    if (value === null && res?.json?.error?.code === "file_not_found" && bot.filesTrusted)
      this.violation(
        `${bot.id}: ${path} was acknowledged and never deleted, but DELETE answered file_not_found`,
      );
    if (res !== null && res.status !== ok) return; // refused: nothing was changed
    if (res !== null && value !== null) this.figures.fileWritesAcked += 1;
    bot.ws.lastRestore = null;
    applyChange(
      bot.ws,
      (files) => {
        const others = Object.entries(files).filter(([p]) => p !== path);
        return Object.fromEntries(value === null ? others : [...others, [path, sha256(value)]]);
      },
      res !== null,
    );
    if (res === null) this.unknownOutcome(bot, `${value === null ? "delete" : "write"} of ${path}`);
  }

  /** A checkpoint (the model is exact here: resynced first); recorded with the files it must hold. */
  private async checkpoint(slot: Slot, bot: BotModel): Promise<void> {
    this.figures.checkpoints += 1;
    const files = bot.ws.states[0] as Files;
    const res = await this.send(
      slot,
      `${bot.id} checkpoint`,
      "POST",
      `/v1/bots/${bot.id}/checkpoints`,
      [201, 404, 409, 503],
    );
    if (res === null) {
      // Its id is unknown, so no restore can name it: the workspace itself is not changed by a checkpoint.
      this.unknownOutcome(bot, "checkpoint");
      return;
    }
    if (res.status !== 201) return;
    const made = res.json?.checkpoint as { checkpointId: string; files: number } | undefined;
    if (typeof made?.checkpointId !== "string") {
      this.violation(`${bot.id}: checkpoint acknowledged without an id: ${res.text.slice(0, 200)}`);
      return;
    }
    this.figures.checkpointsAcked += 1;
    if (bot.filesTrusted && made.files !== Object.keys(files).length)
      this.violation(
        `${bot.id}: checkpoint ${made.checkpointId} captured ${made.files} file(s), but the workspace was ${showFiles(files)}`,
      );
    bot.ws.checkpoints.set(made.checkpointId, files);
  }

  private async restore(slot: Slot, bot: BotModel, checkpointId: string): Promise<void> {
    this.figures.restores += 1;
    const files = bot.ws.checkpoints.get(checkpointId) as Files;
    const res = await this.send(
      slot,
      `${bot.id} restore ${checkpointId}`,
      "POST",
      `/v1/bots/${bot.id}/checkpoints/${checkpointId}/restore`,
      [200, 404, 409, 503],
    );
    if (res?.json?.error?.code === "checkpoint_not_found" && bot.filesTrusted)
      this.violation(
        `${bot.id}: checkpoint ${checkpointId} was acknowledged, but its restore answered checkpoint_not_found`,
      );
    if (res !== null && res.status !== 200) return;
    applyChange(bot.ws, () => files, res !== null);
    if (res === null) {
      bot.ws.lastRestore = null;
      this.unknownOutcome(bot, `restore of ${checkpointId}`);
      return;
    }
    this.figures.restoresAcked += 1;
    const operationId = res.json?.operationId;
    if (typeof operationId !== "string" || res.json?.phase !== "completed") {
      this.violation(
        `${bot.id}: restore of ${checkpointId} answered 200 without a completed operation: ${res.text.slice(0, 200)}`,
      );
      return;
    }
    const restore = { operationId, checkpointId, files };
    bot.ws.restores.push(restore);
    bot.ws.lastRestore = restore;
  }

  private async deleteComputer(slot: Slot, bot: BotModel): Promise<void> {
    bot.ackedBoat = null;
    bot.deletesInFlight += 1;
    await this.send(
      slot,
      `${bot.id} delete computer`,
      "DELETE",
      `/v1/bots/${bot.id}/computer`,
      [200, 202, 404, 409, 429, 502, 503],
      {
        confirmName: scopedBoatName(this.envId, bot.id),
      },
    );
    bot.deletesInFlight -= 1;
  }

  private async deleteBot(slot: Slot, bot: BotModel): Promise<void> {
    bot.ackedBoat = null;
    // A deletion may retire the workspace, even one whose answer is lost or refused after a step.
    bot.filesTrusted = false;
    bot.deletesInFlight += 1;
    const res = await this.send(
      slot,
      `${bot.id} delete bot`,
      "DELETE",
      `/v1/bots/${bot.id}`,
      [200, 404, 409, 429, 502, 503],
      {
        confirmName: scopedBoatName(this.envId, bot.id),
      },
    );
    bot.deletesInFlight -= 1;
    if (res === null) bot.exists = "unknown";
    else if (res.status === 200) bot.exists = "gone";
  }

  async run(): Promise<void> {
    const lanes = Array.from({ length: LANES }, (_, n) => this.lane(n));
    try {
      await this.chaos();
    } finally {
      this.stopped = true;
      await Promise.all(lanes);
    }
    await Promise.all(this.slots.map((s) => s.proxy.idle()));
    await this.checkWorkspacesLive();
    // Quiesce: every server stopped cleanly, so the journals and the registry hold still for the checks.
    for (const slot of this.slots) {
      slot.server?.child.kill("SIGTERM");
      await slot.server?.exited;
      slot.down = true;
    }
    await this.check();
  }

  // --- afterwards -------------------------------------------------------------------------------------------

  /**
   * Through a live server, the lanes stopped: each modelled workspace is a state the model allows (its last
   * acknowledged restore's checkpoint if nothing was written since), every acknowledged checkpoint is listed
   * with as many files as it captured, every restore answered 200 is recorded as completed, and GET
   * /v1/recovery's restores are kept for the stored check.
   */
  private async checkWorkspacesLive(): Promise<void> {
    const slot = this.slots.find((s) => !s.down);
    if (slot === undefined) throw new Error("no server is up after the chaos loop");
    for (const bot of this.everyBot) {
      if (bot.exists !== "yes" || !bot.filesTrusted) continue;
      const ws = bot.ws;
      const head = await this.readWorkspace(slot, bot);
      if (head === null) {
        this.violation(`${bot.id}: its workspace could not be read through server ${slot.index} at the end`);
        continue;
      }
      this.judgeHead(bot, head, `read through server ${slot.index} at the end`);
      if (ws.checkpoints.size > 0) {
        const res = await this.send(
          slot,
          `${bot.id} list checkpoints`,
          "GET",
          `/v1/bots/${bot.id}/checkpoints`,
          [200],
        );
        const listed = new Map(
          ((res?.json?.checkpoints ?? []) as { checkpointId: string; files: number }[]).map((c) => [
            c.checkpointId,
            c,
          ]),
        );
        for (const [checkpointId, files] of ws.checkpoints) {
          const found = listed.get(checkpointId);
          if (found === undefined || found.files !== Object.keys(files).length)
            this.violation(
              `${bot.id}: acknowledged checkpoint ${checkpointId} of ${showFiles(files)} is ${found === undefined ? "not listed" : `listed with ${found.files} file(s)`} by server ${slot.index}`,
            );
        }
      }
      for (const restore of ws.restores) {
        const res = await this.send(
          slot,
          `${bot.id} read restore`,
          "GET",
          `/v1/restores/${restore.operationId}`,
          [200, 404],
        );
        const view = res?.json?.restore;
        if (
          res?.json?.botId !== bot.id ||
          view?.phase !== "completed" ||
          view.checkpointId !== restore.checkpointId
        )
          this.violation(
            `${bot.id}: restore ${restore.operationId} of ${restore.checkpointId} answered 200, but GET /v1/restores shows ${res === null ? "nothing" : `${res.status} ${res.text.slice(0, 200)}`}`,
          );
      }
      this.figures.workspacesChecked += 1;
    }
    const recovery = await this.send(slot, "recovery", "GET", "/v1/recovery", [200]);
    if (recovery?.status !== 200)
      this.violation(`GET /v1/recovery answered ${recovery?.status ?? "nothing"}`);
    this.reportedRestores = new Set(
      ((recovery?.json?.restores ?? []) as { operationId: string }[]).map((r) => r.operationId),
    );
  }

  /**
   * From the database (the servers stopped): each modelled head is a state the model allows, each
   * acknowledged checkpoint holds exactly the files it captured, each acknowledged restore is recorded as
   * completed, no restore is in any other state unless GET /v1/recovery listed it, and no paused server
   * restored anything from its resumption until it registered again.
   */
  private async checkWorkspacesStored(): Promise<void> {
    const workspaces = this.reader.workspaces;
    if (workspaces === undefined) {
      this.violation("the postgres store has no workspaces");
      return;
    }
    const client = new pg.Client({ connectionString: this.url });
    await client.connect();
    let restores: {
      operation_id: string;
      bot_id: string;
      checkpoint_id: string;
      state: string;
      started_ms: number;
    }[];
    let manifests: Map<
      string,
      { bot_id: string; manifest: { path: string; sha256: string; type: string }[] }
    >;
    try {
      restores = (
        await client.query(
          `SELECT operation_id, bot_id, checkpoint_id, state, extract(epoch FROM started_at)::float8 * 1000 AS started_ms FROM "${SCHEMA}".ws_restores`,
        )
      ).rows;
      const rows = (
        await client.query(`SELECT checkpoint_id, bot_id, manifest FROM "${SCHEMA}".ws_checkpoints`)
      ).rows;
      manifests = new Map(rows.map((row) => [row.checkpoint_id as string, row]));
    } finally {
      await client.end();
    }
    const toFiles = (entries: readonly { path: string; sha256: string; type: string }[]): Files =>
      Object.fromEntries(entries.filter((e) => e.type === "file").map((e) => [e.path, e.sha256]));

    for (const row of restores) {
      if (row.state !== "completed" && !this.reportedRestores.has(row.operation_id))
        this.violation(
          `restore ${row.operation_id} of ${row.bot_id} is ${row.state}, and GET /v1/recovery does not report it`,
        );
    }
    const recorded = new Map(restores.map((row) => [row.operation_id, row]));
    for (const bot of this.everyBot) {
      if (bot.exists !== "yes" || !bot.filesTrusted) continue;
      this.judgeHead(bot, toFiles((await workspaces.head(bot.id)).files), "in the database");
      for (const [checkpointId, files] of bot.ws.checkpoints) {
        const row = manifests.get(checkpointId);
        if (row?.bot_id !== bot.id || !sameFiles(toFiles(row.manifest), files))
          this.violation(
            `${bot.id}: acknowledged checkpoint ${checkpointId} must hold ${showFiles(files)}; the database holds ${row === undefined ? "no such checkpoint" : `${showFiles(toFiles(row.manifest))} of ${row.bot_id}`}`,
          );
      }
      for (const restore of bot.ws.restores) {
        const found = await workspaces.getRestore(restore.operationId);
        if (
          found?.state !== "completed" ||
          found.botId !== bot.id ||
          found.checkpointId !== restore.checkpointId
        )
          this.violation(
            `${bot.id}: restore ${restore.operationId} of ${restore.checkpointId} answered 200, but the database records ${found === null ? "no such restore" : JSON.stringify(found)}`,
          );
      }
    }
    // The zombie restored nothing between its resumption and its new registration.
    for (const pause of this.pauses) {
      for (const row of restores) {
        if (
          row.bot_id === ZOMBIE_BOT &&
          row.started_ms >= pause.contAt &&
          row.started_ms < pause.reRegisteredAt
        )
          this.violation(
            `restore ${row.operation_id} of ${ZOMBIE_BOT} started at ${row.started_ms}, after server ${pause.slot} (zombie) resumed at ${pause.contAt} and before it registered again at ${pause.reRegisteredAt} (its registrations: ${pause.registrations})`,
          );
      }
      const probe = pause.probeRestore === null ? undefined : recorded.get(pause.probeRestore);
      if (pause.probeRestore !== null && (probe === undefined || probe.started_ms < pause.reRegisteredAt))
        this.violation(
          `server ${pause.slot} answered 200 to the restore asked while it was paused, but it is ${probe === undefined ? "not recorded" : `recorded as started at ${probe.started_ms}, before it registered again at ${pause.reRegisteredAt}`}`,
        );
    }
  }

  private async check(): Promise<void> {
    const data = await this.reader.exportAll();
    const { sandboxes } = (await this.simControl("GET", "/_sim/sandboxes")) as {
      sandboxes: SimSandboxRecord[];
    };
    const stats = (await this.simControl("GET", "/_sim/stats")) as { perName: Record<string, number> };
    this.figures.boats = sandboxes.length;
    const calls = this.slots.flatMap((s) => s.proxy.calls);

    await this.checkWorkspacesStored();

    for (const unheld of this.unheldKeys) {
      const made = sandboxes.filter((boat) => boat.keyHash === unheld.keyHash);
      // A replay is harmless: boat.dev answers a key it already created a Boat under with that same Boat
      // (200, Idempotent-Replayed) and bills nothing new — a retry that left after another host finished,
      // and deleted, the Boat its row held. What must never happen is a Boat created by a POST whose key no
      // row held: a 201 to it, or (its answer lost) a Boat under the key created after it left.
      const replayed =
        unheld.call.status === 200 ||
        (unheld.call.status === undefined &&
          made.length > 0 &&
          made.every((boat) => boat.createdAt < unheld.call.arrivedAt));
      if (replayed) {
        this.note(
          `server ${unheld.slot}: POST /sandboxes #${unheld.seq} replayed a Boat its key already made`,
        );
        continue;
      }
      this.violation(
        `server ${unheld.slot}: POST /sandboxes #${unheld.seq} carried a key no create row held when it left; boat.dev made ${made.length === 0 ? "no Boat" : made.map((b) => `${b.id} (${b.name}, ${b.deletedAt === null ? "live" : "deleted"})`).join(", ")} under it`,
      );
    }

    // At most one Boat per bot at any time, and no name live twice.
    const { findings, owner } = checkBoatsPerBot(
      sandboxes,
      (boat) => this.keyOwner.get(boat.keyHash),
      (botId) => scopedBoatName(this.envId, botId),
    );
    for (const f of findings) this.violation(f);
    for (const [name, count] of Object.entries(stats.perName))
      if (count > 1) this.violation(`boat.dev has ${count} live Boats named ${name}`);

    // No overlapping DELETEs, no blind re-send (real clocks: every server runs on the wall clock).
    const sender = (c: RecordedCall) => c.tag as Sender;
    for (const f of checkDeletes({
      calls,
      ownerOf: (boxId) => owner.get(boxId),
      clockOf: (c) => c.arrivedAt,
      sameSender: (a, b) => sender(a).slot === sender(b).slot && sender(a).gen === sender(b).gen,
      label: (c) => `#${c.seq} of server ${sender(c).slot}`,
      origin: (c) => `server ${sender(c).slot} generation ${sender(c).gen}`,
    }))
      this.violation(f);

    // Every live Boat is known to the journals (its create key or Boat id in a create row, or a fence).
    const keys = new Set(data.creates.map((row) => sha256(row.idempotencyKey)));
    const known = new Set([
      ...data.creates.flatMap((row) => (row.boxId === undefined ? [] : [row.boxId])),
      ...data.deletes.map((fence) => fence.boxId),
    ]);
    for (const boat of sandboxes) {
      if (boat.deletedAt === null && !keys.has(boat.keyHash) && !known.has(boat.id))
        this.violation(`live Boat ${boat.id} (${boat.name}) is known to no create row and no deletion fence`);
    }

    // Epochs only increased; each paused server re-registered above its lapsed epoch; zombies started nothing.
    const rows = await this.instances();
    const epochs = rows.map((row) => row.epoch);
    if (new Set(epochs).size !== epochs.length)
      this.violation(`two instances share an epoch: ${epochs.join(", ")}`);
    const byPid = new Map<number, InstanceView[]>();
    for (const row of rows) byPid.set(row.pid, [...(byPid.get(row.pid) ?? []), row]);
    for (const [pid, list] of byPid) {
      list.sort((a, b) => a.startedAt - b.startedAt || a.epoch - b.epoch);
      for (let i = 1; i < list.length; i++) {
        if ((list[i] as InstanceView).epoch <= (list[i - 1] as InstanceView).epoch)
          this.violation(
            `process ${pid} registered again with epoch ${(list[i] as InstanceView).epoch}, not above ${(list[i - 1] as InstanceView).epoch}`,
          );
      }
    }
    for (const pause of this.pauses) {
      if (pause.newEpoch <= pause.old.epoch)
        this.violation(
          `server ${pause.slot} re-registered after its pause with epoch ${pause.newEpoch} ≤ ${pause.old.epoch}`,
        );
      if (rows.find((row) => row.id === pause.old.id)?.state === "live")
        this.violation(`server ${pause.slot}'s lapsed instance ${pause.old.id} is live at the end`);
      for (const call of this.slots[pause.slot]?.proxy.calls ?? []) {
        const tag = sender(call);
        const sideEffect =
          (call.method === "POST" && /^\/api\/v1\/sandboxes(\?|$)/.test(call.path)) ||
          (call.method === "DELETE" && /^\/api\/v1\/sandboxes\/bx_/.test(call.path));
        if (
          sideEffect &&
          tag.gen === pause.gen &&
          call.arrivedAt >= pause.contAt &&
          call.arrivedAt < pause.reRegisteredAt
        )
          this.violation(
            `server ${pause.slot} (zombie, resumed at ${pause.contAt}) sent ${call.method} ${call.path} at ${call.arrivedAt}, before it re-registered at ${pause.reRegisteredAt}`,
          );
      }
    }

    // Acknowledged bot creations and deletions are in the registry; acknowledged provisions are kept.
    const registered = new Set(data.bots.map((b) => b.botId));
    for (const bot of this.everyBot) {
      if (bot.exists === "yes" && !registered.has(bot.id))
        this.violation(`bot ${bot.id}'s creation was acknowledged, but the registry lacks it`);
      if (bot.exists === "gone" && registered.has(bot.id))
        this.violation(`bot ${bot.id}'s deletion was acknowledged, but the registry still holds it`);
      if (bot.ackedBoat !== null && bot.exists === "yes") {
        const row = data.creates.find((r) => r.botId === bot.id);
        const boat = sandboxes.find((b) => b.id === bot.ackedBoat);
        if (row?.boxId !== bot.ackedBoat || boat === undefined || boat.deletedAt !== null)
          this.violation(
            `bot ${bot.id}'s provision of ${bot.ackedBoat} was acknowledged and nothing deleted it since, but the create row holds ${row?.boxId ?? "nothing"} and boat.dev ${boat === undefined ? "never had it" : "deleted it"}`,
          );
      }
    }

    await this.checkCli(data);
  }

  /** `drydock` against the same database agrees with the journals read directly. */
  private async checkCli(data: Awaited<ReturnType<PostgresStorage["exportAll"]>>): Promise<void> {
    const dataDir = (this.slots[0] as Slot).dataDir;
    const status = await drydock(dataDir, ["status", "--json"], this.cliEnv());
    const doc = JSON.parse(status.stdout || "null");
    if (
      doc?.storage?.kind !== "postgres" ||
      doc.providerChecked !== true ||
      /^INCOMPLETE/.test(doc.verdict ?? "INCOMPLETE")
    )
      this.violation(
        `drydock status --json (exit ${status.code}) did not read the postgres store and boat.dev: ${status.stdout.slice(0, 400)} ${status.stderr.slice(0, 400)}`,
      );
    const creates = { creates: await this.cliList(dataDir, ["creates", "list"], "creates") };
    const listed = ((creates.creates ?? []) as { botId: string; boxId: string | null }[])
      .map((c) => `${c.botId}:${c.boxId}`)
      .sort();
    const stored = data.creates.map((c) => `${c.botId}:${c.boxId ?? null}`).sort();
    if (JSON.stringify(listed) !== JSON.stringify(stored))
      this.violation(
        `drydock creates list shows ${JSON.stringify(listed)}; the journal holds ${JSON.stringify(stored)}`,
      );
    const deletions = { deletions: await this.cliList(dataDir, ["deletions", "list"], "deletions") };
    const fenced = ((deletions.deletions ?? []) as { boxId: string; phase: string }[])
      .map((d) => `${d.boxId}:${d.phase}`)
      .sort();
    const fences = data.deletes.map((d) => `${d.boxId}:${d.phase}`).sort();
    if (JSON.stringify(fenced) !== JSON.stringify(fences))
      this.violation(
        `drydock deletions list shows ${JSON.stringify(fenced)}; the journal holds ${JSON.stringify(fences)}`,
      );
    // Every finding about a create or a deletion names a bot or Boat the journals hold.
    const names = [
      ...data.creates.map((c) => c.botId),
      ...data.creates.flatMap((c) => (c.boxId ? [c.boxId] : [])),
      ...data.deletes.map((d) => d.boxId),
    ];
    for (const f of (doc?.findings ?? []) as { area: string; subject: string }[]) {
      if ((f.area === "create" || f.area === "deletion") && !names.some((n) => f.subject.includes(n)))
        this.violation(`drydock status reports ${f.area} '${f.subject}', which the journals do not hold`);
    }
    this.note(`drydock status: ${doc?.verdict}; ${listed.length} create rows, ${fenced.length} fences`);
  }

  /** Every row of a `drydock … list --json`, page by page (each page must exit 0). */
  private async cliList(dataDir: string, command: string[], key: string): Promise<unknown[]> {
    const rows: unknown[] = [];
    let cursor: string | null = null;
    do {
      const page = await drydock(
        dataDir,
        [...command, "--json", ...(cursor === null ? [] : ["--cursor", cursor])],
        this.cliEnv(),
      );
      if (page.code !== 0) {
        this.violation(
          `drydock ${command.join(" ")} --json exited ${page.code}: ${page.stdout.slice(0, 300)} ${page.stderr.slice(0, 300)}`,
        );
        return rows;
      }
      const doc = JSON.parse(page.stdout) as Record<string, unknown> & { nextCursor: string | null };
      rows.push(...((doc[key] as unknown[]) ?? []));
      cursor = doc.nextCursor;
    } while (cursor !== null);
    return rows;
  }

  /** The CLI on server 0's data directory: its database, and the provider that directory is bound to. */
  private cliEnv(): Record<string, string> {
    return {
      DRYDOCK_STORAGE: this.url,
      DRYDOCK_POSTGRES_SCHEMA: SCHEMA,
      BOAT_API_URL: `${(this.slots[0] as Slot).proxy.url}/api/v1`,
      BOAT_API_TOKEN: SIM_TOKEN,
    };
  }

  report(): string {
    return [
      `hosts chaos seed ${SEED} (replay: DRYDOCK_HOSTS_SEED=${SEED})`,
      `${this.violations.length} violation(s):`,
      ...this.violations.map((v, i) => `  ${i + 1}. ${v}`),
      "last operations:",
      ...this.trail.slice(process.env.DRYDOCK_HOSTS_VERBOSE === "1" ? 0 : -150).map((line) => `  ${line}`),
      ...this.slots.map(
        (s) => `server ${s.index} output (tail):\n${(s.server?.output() ?? "").slice(-1_500)}`,
      ),
    ].join("\n");
  }
}

/** `drydock` (src/main.ts via tsx) as a real process. */
async function drydock(
  dataDir: string,
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const argv = ["--conditions=@drydock/source", "--import", "tsx", CLI_MAIN, "--data-dir", dataDir, ...args];
  const options = {
    cwd: REPO_ROOT,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", ...env },
    maxBuffer: 64 * 1024 * 1024,
  };
  try {
    const { stdout, stderr } = await execFileAsync(process.execPath, argv, options);
    return { code: 0, stdout, stderr };
  } catch (error) {
    // A non-zero exit: execFile's error carries the code and both outputs.
    const failed = error as { code?: unknown; stdout?: string; stderr?: string };
    return {
      code: typeof failed.code === "number" ? failed.code : null,
      stdout: failed.stdout ?? "",
      stderr: failed.stderr ?? String(error),
    };
  }
}

const database = usePostgresDatabase();
let hosts: Hosts;
beforeAll(() => {
  hosts = new Hosts(database());
});
afterAll(async () => {
  await hosts?.dispose();
});

describe("several hosts on one PostgreSQL (postgres storage): three servers SIGKILLed, paused past their lease and resumed", () => {
  it(
    `seed ${SEED}, ${EVENTS} events, ${BOTS} bots: one Boat per bot, no overlapping DELETE, nothing unknown, epochs only up, no zombie side effect, nothing acknowledged lost, every restore recorded and none half applied (replay: DRYDOCK_HOSTS_SEED=${SEED})`,
    async () => {
      try {
        await hosts.setup();
        await hosts.run();
      } catch (error) {
        throw new Error(
          `${hosts.report()}\n\nthe run itself failed: ${(error as Error).stack ?? String(error)}`,
        );
      }
      const f = hosts.figures;
      console.log(`hosts chaos seed ${SEED}: ${JSON.stringify(f)}`);
      const out = process.env.DRYDOCK_RELIABILITY_OUT;
      if (out) {
        for (const [metric, value] of [
          ["SIGKILLs of a server (then restarted)", f.kills],
          ["pauses past the lease (SIGSTOP, then SIGCONT: a zombie)", f.pauses],
          ["client requests to random servers", f.requests],
          ["requests cut by a kill (outcome unknown)", f.unanswered],
          ["lease_lost answers (a server past its lease refused a side effect)", f.leaseLost],
          ["boat.dev faults injected", f.faults],
          ["Boats boat.dev created", f.boats],
          ["workspace writes sent (acknowledged)", `${f.fileWrites} (${f.fileWritesAcked})`],
          ["checkpoints sent (acknowledged)", `${f.checkpoints} (${f.checkpointsAcked})`],
          ["restores sent (acknowledged)", `${f.restores} (${f.restoresAcked})`],
          [
            "workspace calls with an unknown outcome (then resolved by a read)",
            `${f.unknownOutcomes} (${f.resyncs})`,
          ],
          [
            "restores asked of a paused server (refused with lease_lost)",
            `${f.zombieRestores} (${f.zombieRestoresRefused})`,
          ],
          ["workspaces checked against the model (live server and database)", f.workspacesChecked],
          ["invariant violations", hosts.violations.length],
        ] as const) {
          appendFileSync(out, `${JSON.stringify({ area: "hosts", backend: "postgres", metric, value })}\n`);
        }
      }
      if (process.env.DRYDOCK_HOSTS_VERBOSE === "1") console.log(hosts.report());
      expect(f.kills, "the chaos loop SIGKILLed no server").toBeGreaterThan(0);
      expect(f.pauses, "the chaos loop paused no server past its lease").toBeGreaterThan(0);
      expect(f.workspacesChecked, "no modelled workspace was checked").toBeGreaterThan(0);
      expect(f.restoresAcked, "no restore was acknowledged").toBeGreaterThan(0);
      expect(hosts.violations, hosts.report()).toEqual([]);
    },
    WAIT_MS * 4 + EVENTS * 30_000,
  );
});
