import * as nodeFs from "node:fs";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type BoatCreateJournal, openBoatCreateJournal } from "@drydock/boat-create-journal";
import { type BoatDeleteJournal, openBoatDeleteJournal } from "@drydock/boat-delete-journal";
import { type BoatClient, createBoatClient } from "@drydock/boat-provider";
import {
  type BoatSimulator,
  type BoatSimulatorOptions,
  type FaultRule,
  type SimStats,
  startBoatSimulator,
} from "@drydock/boat-provider/simulator";
import { errnoError, type FileOps, nodeFileOps } from "@drydock/file-lock";
import { createDatabaseAt } from "@drydock/test-kit/postgres";
import { afterEach, inject } from "vitest";
import {
  type BoatLifecycle,
  type BoatLifecycleOptions,
  type CrashHook,
  createBoatLifecycle,
} from "../src/index.js";
import { openTestStorage, type TestBackend } from "./storage.js";

export const ENV_ID = "0b6a1c52-7f8e-4d3a-9c21-5e4f3a2b1c0d";

/** One HTTP request as it left the client (the wire, observed through the client's fetch seam). */
export interface WireRequest {
  method: string;
  path: string;
  idempotencyKey: string | null;
  confirmDelete: string | null;
  body: unknown;
}

type Tamper = (request: WireRequest, response: Response) => Promise<Response> | Response;

export interface Harness {
  sim: BoatSimulator;
  dataDir: string;
  client: BoatClient;
  lifecycle: BoatLifecycle;
  /** Every request the lifecycle's client sent, in order. */
  wire: WireRequest[];
  /** Every wait the lifecycle asked for (instant in tests). */
  sleeps: number[];
  /**
   * One clock for this installation (journals, lifecycle) and the simulator (key retention, operations):
   * advance it to age create keys on both sides, as real time would.
   */
  clock: { offsetMs: number };
  faults(...rules: FaultRule[]): Promise<void>;
  clearFaults(): Promise<void>;
  stats(): SimStats;
  /** A fresh lifecycle with freshly opened journals over the same data dir: a process restart. */
  restart(options?: RestartOptions): BoatLifecycle;
  /**
   * A restart that also reopens the storage (closing the previous handle): the one to use under
   * `HarnessOptions.storage`, where `restart()` refuses. Without a storage it is `restart()`.
   */
  reopen(options?: RestartOptions): Promise<BoatLifecycle>;
  /** The backend the journals are opened with (`HarnessOptions.storage`), or null: the journal packages directly. */
  backend: TestBackend | null;
  /** On postgres: this harness's own database in the project's cluster (children open it too); else null. */
  postgresUrl: string | null;
  /**
   * The journals' rows as stored: today's files for the file backend (and without a storage), a fresh
   * `exportAll()` for any other backend.
   */
  rows(): Promise<{
    creates: Array<Record<string, unknown>>;
    deletes: Array<Record<string, unknown>>;
  }>;
  /** Opens the journals once more on their own clock (a second caller, e.g. one from the past); close after. */
  journalsAt(now: () => number): Promise<{
    createJournal: BoatCreateJournal;
    deleteJournal: BoatDeleteJournal;
    close(): Promise<void>;
  }>;
  /** Rewrites the next answers matching a predicate (malformed provider answers). */
  tamper(fn: Tamper | null): void;
  /** Requests matching this fail as a refused connection would (proven not sent); null: none. */
  unreachable(fn: ((request: WireRequest) => boolean) | null): void;
  createFile(): { version: number; requests: Array<Record<string, unknown>> } | null;
  deleteFile(): { version: number; records: Array<Record<string, unknown>> } | null;
  /** A second client on the same provider, for acting behind the lifecycle's back. */
  outside: BoatClient;
  close(): Promise<void>;
}

/**
 * The journals' file-system seam, built from node:fs, with one switch: while `failRenameTo` names a
 * journal file, the atomic rename that would publish it fails with EIO (once), as a full or failing disk
 * would. Nothing is written half-way: the journal keeps its previous bytes.
 */
export function faultyFs() {
  const state: { failRenameTo: string | null; failures: number } = { failRenameTo: null, failures: 0 };
  const ops: FileOps = {
    ...nodeFileOps,
    renameSync: (from: nodeFs.PathLike, to: nodeFs.PathLike) => {
      if (state.failRenameTo !== null && String(to).endsWith(state.failRenameTo)) {
        state.failRenameTo = null;
        state.failures += 1;
        throw errnoError("EIO", "rename", String(to));
      }
      nodeFs.renameSync(from, to);
    },
  };
  return { ops, state };
}

type RestartOptions = {
  crash?: CrashHook;
  knownBotIds?: () => readonly string[];
  onCreateRetry?: BoatLifecycleOptions["onCreateRetry"];
  nameSweep?: BoatLifecycleOptions["nameSweep"];
  beforeSideEffect?: BoatLifecycleOptions["beforeSideEffect"];
};

export interface HarnessOptions {
  /**
   * Open the journals through @drydock/storage's `openStorage` with this backend (the crash sweep's
   * backends), instead of the journal packages directly. Incompatible with `fs`.
   */
  storage?: TestBackend;
  /** File-system seam for both journals (see `faultyFs`). */
  fs?: ReturnType<typeof faultyFs>["ops"];
  sim?: BoatSimulatorOptions;
  timeoutMs?: number;
  knownBotIds?: () => readonly string[];
  /** Real waits instead of instant ones (for tests where the provider must make progress meanwhile). */
  realSleep?: boolean;
  /** Instant waits still move the shared clock by their length (for tests about time running out). */
  sleepMovesClock?: boolean;
  /** The lifecycle's name sweep options (inline page budget, page size, background pace). */
  nameSweep?: BoatLifecycleOptions["nameSweep"];
}

function readJson<T>(path: string): T | null {
  try {
    return JSON.parse(readFileSync(path, "utf8")) as T;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw error;
  }
}

export async function harness(options: HarnessOptions = {}): Promise<Harness> {
  const clock = { offsetMs: 0 };
  const journalNow = () => Date.now() + clock.offsetMs;
  const sim = await startBoatSimulator({ provisionMs: 0, now: journalNow, ...options.sim });
  const dataDir = mkdtempSync(join(tmpdir(), "drydock-lifecycle-"));
  const wire: WireRequest[] = [];
  const sleeps: number[] = [];
  let tamper: Tamper | null = null;
  let unreachable: ((request: WireRequest) => boolean) | null = null;

  const observed = async (input: string, init: RequestInit): Promise<Response> => {
    const url = new URL(input);
    const headers = new Headers(init.headers);
    const request: WireRequest = {
      method: init.method ?? "GET",
      path: url.pathname.replace(/^\/api\/v1/, "") + url.search,
      idempotencyKey: headers.get("idempotency-key"),
      confirmDelete: headers.get("x-boat-confirm-delete"),
      body: typeof init.body === "string" ? JSON.parse(init.body) : null,
    };
    wire.push(request);
    if (unreachable?.(request)) {
      // What undici says when the connection is refused: proof that nothing was sent.
      const refused = Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" });
      throw new TypeError("fetch failed", { cause: refused });
    }
    const response = await fetch(input, init);
    return tamper === null ? response : tamper(request, response);
  };
  const client = createBoatClient({
    baseUrl: sim.apiUrl,
    token: sim.token,
    fetch: observed,
    ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
  });
  const outside = createBoatClient({ baseUrl: sim.apiUrl, token: sim.token });
  const sleep = options.realSleep
    ? (ms: number) =>
        new Promise<void>((resolve) => {
          sleeps.push(ms);
          setTimeout(resolve, ms);
        })
    : async (ms: number) => {
        sleeps.push(ms);
        if (options.sleepMovesClock) clock.offsetMs += ms;
      };

  if (options.storage !== undefined && options.fs !== undefined) {
    throw new Error("harness: `storage` and `fs` do not combine (the fs seam is the file journals')");
  }
  const backend = options.storage ?? null;
  // A database of its own per harness: runs in parallel never see each other's rows.
  const postgresUrl =
    backend === "postgres" ? await createDatabaseAt(inject("postgresUrl"), "lifecycle") : null;
  const open = (now: () => number) => openTestStorage(dataDir, backend!, now, postgresUrl ?? undefined);
  /** The journal packages opened directly (no storage): synchronous, so `restart()` stays synchronous. */
  const directJournals = (now: () => number) => {
    const fs = options.fs === undefined ? {} : { fs: options.fs };
    return {
      createJournal: openBoatCreateJournal({ dataDir, now, ...fs }),
      deleteJournal: openBoatDeleteJournal({ dataDir, now, ...fs }),
      close: async () => {},
    };
  };
  const journalsAt = async (now: () => number) => {
    if (backend === null) return directJournals(now);
    const storage = await open(now);
    return {
      createJournal: storage.createJournal,
      deleteJournal: storage.deleteJournal,
      close: () => storage.close(),
    };
  };
  let journals = await journalsAt(journalNow);

  const make = (extra: RestartOptions = {}) =>
    createBoatLifecycle({
      client,
      createJournal: journals.createJournal,
      deleteJournal: journals.deleteJournal,
      environmentId: ENV_ID,
      now: journalNow,
      sleep,
      ...(extra.crash === undefined ? {} : { crash: extra.crash }),
      ...(extra.onCreateRetry === undefined ? {} : { onCreateRetry: extra.onCreateRetry }),
      ...(extra.beforeSideEffect === undefined ? {} : { beforeSideEffect: extra.beforeSideEffect }),
      ...((extra.nameSweep ?? options.nameSweep) === undefined
        ? {}
        : { nameSweep: extra.nameSweep ?? options.nameSweep }),
      ...((extra.knownBotIds ?? options.knownBotIds) === undefined
        ? {}
        : { knownBotIds: extra.knownBotIds ?? options.knownBotIds }),
    });

  const control = async (method: string, path: string, body?: unknown) => {
    const response = await fetch(`${sim.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${sim.token}`, "content-type": "application/json" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    if (!response.ok)
      throw new Error(`simulator control ${method} ${path}: ${response.status} ${await response.text()}`);
    return response.json() as Promise<unknown>;
  };

  const h: Harness = {
    sim,
    dataDir,
    client,
    lifecycle: make(),
    wire,
    sleeps,
    clock,
    async faults(...rules) {
      await control("POST", "/_sim/faults", { rules });
    },
    async clearFaults() {
      await control("DELETE", "/_sim/faults");
    },
    stats: () => sim.stats(),
    restart(extra) {
      if (backend !== null) throw new Error("harness: with a storage, restart with `await reopen()`");
      journals = directJournals(journalNow);
      h.lifecycle = make(extra);
      return h.lifecycle;
    },
    async reopen(extra) {
      h.lifecycle.close();
      await journals.close();
      journals = await journalsAt(journalNow);
      h.lifecycle = make(extra);
      return h.lifecycle;
    },
    backend,
    postgresUrl,
    async rows() {
      if (backend === null || backend === "file") {
        return { creates: h.createFile()?.requests ?? [], deletes: h.deleteFile()?.records ?? [] };
      }
      const storage = await open(journalNow);
      try {
        const { creates, deletes } = await storage.exportAll();
        return {
          creates: creates as unknown as Array<Record<string, unknown>>,
          deletes: deletes as unknown as Array<Record<string, unknown>>,
        };
      } finally {
        await storage.close();
      }
    },
    journalsAt,
    tamper(fn) {
      tamper = fn;
    },
    unreachable(fn) {
      unreachable = fn;
    },
    createFile: () => readJson(join(dataDir, "box-create-requests.json")),
    deleteFile: () => readJson(join(dataDir, "box-delete-requests.json")),
    outside,
    async close() {
      h.lifecycle.close(); // a background name sweep must not outlive its simulator
      await journals.close();
      await sim.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
  return h;
}

/** `const use = harnessPerTest()`: `await use(options)` gives a harness that is closed after its test. */
export function harnessPerTest(): (options?: HarnessOptions) => Promise<Harness> {
  let current: Harness | undefined;
  afterEach(async () => {
    const closing = current;
    current = undefined;
    await closing?.close();
  });
  return async (options) => {
    current = await harness(options);
    return current;
  };
}

/** Marks a Boat busy (DELETE answers 409 sandbox_busy) through the simulator's control API. */
export async function setBusy(h: Harness, boxId: string, busy: boolean): Promise<void> {
  const response = await fetch(`${h.sim.url}/_sim/sandboxes/${boxId}`, {
    method: "PATCH",
    headers: { authorization: `Bearer ${h.sim.token}`, "content-type": "application/json" },
    body: JSON.stringify({ busy }),
  });
  if (!response.ok) throw new Error(`could not mark ${boxId} busy`);
}

/** Creates a Boat behind the lifecycle's back (another tool, an older installation) and names it. */
export async function createOutside(h: Harness, name: string | null): Promise<string> {
  const { sandbox } = await h.outside.createSandbox(
    { ttlSeconds: 28_800, noEnv: true },
    { idempotencyKey: crypto.randomUUID() },
  );
  if (name !== null) await h.outside.renameSandbox(sandbox.id, name);
  return sandbox.id;
}

export const posts = (h: Harness) => h.wire.filter((r) => r.method === "POST" && r.path === "/sandboxes");
export const deletes = (h: Harness) => h.wire.filter((r) => r.method === "DELETE");
export const patches = (h: Harness) => h.wire.filter((r) => r.method === "PATCH");
export const polls = (h: Harness) => h.wire.filter((r) => r.path.startsWith("/deletion-operations/"));

/** Expects a rejection with a LifecycleError of this code (and returns it for further checks). */
export async function rejection(
  promise: Promise<unknown>,
): Promise<{ code: string; status: number; message: string }> {
  try {
    await promise;
  } catch (error) {
    return error as { code: string; status: number; message: string };
  }
  throw new Error("expected the call to fail");
}

/** boat.dev refusing every create with a definitive 400 (nothing created under the key). */
export const createRefused400: FaultRule = {
  method: "POST",
  path: "^/sandboxes$",
  action: "fail-before",
  status: 400,
  code: "invalid_request",
};

/**
 * Another process on the same data dir (bot server and recovery CLI): its own journals and client
 * (optionally wrapped), so the in-process per-bot lock does not serialise it with `t.lifecycle`; the
 * installation's one clock (the harness's), so tests move time for every process at once.
 */
export function secondProcess(
  t: Harness,
  wrap: (base: BoatClient) => BoatClient = (base) => base,
  extra: Pick<BoatLifecycleOptions, "logger" | "keysSharedAcrossProcesses"> = {},
): BoatLifecycle {
  const base = createBoatClient({ baseUrl: t.sim.apiUrl, token: t.sim.token });
  const now = () => Date.now() + t.clock.offsetMs;
  return createBoatLifecycle({
    client: wrap(base),
    createJournal: openBoatCreateJournal({ dataDir: t.dataDir, now }),
    deleteJournal: openBoatDeleteJournal({ dataDir: t.dataDir, now }),
    environmentId: ENV_ID,
    now,
    sleep: async () => {},
    ...extra,
  });
}

/** Holds a call at a chosen request: `enter()` there, `reached` once it is held, `release()` to go on. */
export function hold(): { reached: Promise<void>; release(): void; enter(): Promise<void> } {
  let reach!: () => void;
  let release!: () => void;
  const reached = new Promise<void>((resolve) => {
    reach = resolve;
  });
  const gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  return {
    reached,
    release,
    async enter() {
      reach();
      await gate;
    },
  };
}
