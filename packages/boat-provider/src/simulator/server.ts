import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { isIP } from "node:net";
import { BoatSimulatorError, isBoatSimulatorError } from "../errors.js";
import {
  BOAT_ID,
  clockBodySchema,
  createSandboxBodySchema,
  type DeletionOperation,
  type FaultAction,
  faultsBodySchema,
  KEY_RETENTION_MS,
  MAX_CURSOR_LENGTH,
  MAX_LIST_LIMIT,
  OPERATION_ID,
  renameSandboxBodySchema,
  type Sandbox,
  type SimOperationRecord,
  type SimSandboxRecord,
  type SimStateFile,
  type SimStats,
  simSandboxPatchSchema,
} from "../schema.js";
import { loadStateFile, writeStateFile } from "./state-file.js";

export interface BoatSimulatorOptions {
  /** Loopback only unless `allowNonLoopback`. Default 127.0.0.1. */
  host?: string;
  /** 0 = any free port. */
  port?: number;
  /** Bearer token the simulator accepts; random when absent. */
  token?: string;
  /** The wall clock under the simulator's clock (which is now() + every /_sim/clock advance). */
  now?: () => number;
  /** Simulator time a new Boat stays missing from, and a deleted one stays in, the listing. Default 0. */
  listLagMs?: number;
  /** Persist every committed change here (atomic write) and resume from it on start. */
  stateFile?: string;
  /** Serving a fake provider with a known token beyond this machine is refused unless asked for. */
  allowNonLoopback?: boolean;
  /** Polls a deletion operation takes to finish: poll 1 → processing, poll N → completed. Default 2. */
  deletionPolls?: number;
  /**
   * Simulator time after which an accepted deletion finishes (or ends blocked) even if nobody polls it, as
   * boat.dev's own work goes on while a client is down: seen by the next request or clock move. Default 5 min.
   */
  deletionMs?: number;
  /** Simulator time a deleted Boat answers 410 gone before it answers 404. Default 60 s. */
  goneWindowMs?: number;
  /** Simulator time a new Boat reports "provisioning" before "running". Default 1 s. */
  provisionMs?: number;
  /** Fixed-window rate limit on /api/v1 requests, in simulator time. Default none. */
  rateLimit?: { limit: number; windowMs: number };
}

export interface BoatSimulator {
  /** The origin, `http://127.0.0.1:PORT`; controls live at `url + "/_sim/..."`. */
  url: string;
  /** `url + "/api/v1"`: what the client takes as `baseUrl`. */
  apiUrl: string;
  token: string;
  close(): Promise<void>;
  stats(): SimStats;
  /** The simulator's clock (ms). */
  now(): number;
  /** In-process twin of POST /_sim/clock. */
  advanceClock(ms: number): void;
  /** Every Boat ever created, with its history (twin of GET /_sim/sandboxes). */
  sandboxes(): SimSandboxRecord[];
}

interface FaultState {
  action: FaultAction;
  method?: string;
  path?: RegExp;
  remaining: number;
  status?: number;
  code?: string;
  ms?: number;
  retryAfterS?: number;
}

interface KeyState {
  fingerprint: string;
  firstSeenAt: number;
  /** Unset while the first request with this key is still running. */
  boatId?: string;
}

interface Outcome {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
}

/** The request was abandoned because the simulator is closing. */
class Closing extends Error {}

const BOAT_ALPHABET = "23456789abcdefghjkmnpqrstuvwxyz";
const MAX_BODY_BYTES = 64 * 1024;
const DEFAULT_LIST_LIMIT = 50;

function isLoopback(host: string): boolean {
  const bare = host.replace(/^\[|\]$/g, "");
  if (bare === "localhost") return true;
  if (isIP(bare) === 4) return bare.startsWith("127.");
  if (isIP(bare) === 6) return bare === "::1";
  return false;
}

function sha256(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

/** Key order never makes two equal bodies look different. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : 1));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

export async function startBoatSimulator(options: BoatSimulatorOptions = {}): Promise<BoatSimulator> {
  const host = options.host ?? "127.0.0.1";
  if (!isLoopback(host) && options.allowNonLoopback !== true) {
    throw new BoatSimulatorError({
      code: "simulator_host_refused",
      message: `The boat.dev simulator refuses to listen on ${host}: it accepts a fixed token and has no real security. Use a loopback host, or pass allowNonLoopback: true if you really mean it.`,
    });
  }
  const token = options.token ?? randomBytes(24).toString("base64url");
  const tokenBytes = Buffer.from(`Bearer ${token}`, "utf8");
  const wallNow = options.now ?? Date.now;
  const listLagMs = options.listLagMs ?? 0;
  const deletionPolls = options.deletionPolls ?? 2;
  const deletionMs = options.deletionMs ?? 300_000;
  const goneWindowMs = options.goneWindowMs ?? 60_000;
  const provisionMs = options.provisionMs ?? 1_000;
  const stateFile = options.stateFile;

  // ------------------------------------------------------------------------------------------------
  // State. Everything committed is in these structures and, with a stateFile, on disk after each change.
  const restored = stateFile === undefined ? null : loadStateFile(stateFile);
  let clockOffsetMs = restored?.clockOffsetMs ?? 0;
  const counters = {
    createsCommitted: 0,
    createRequests: 0,
    deletesAccepted: 0,
    deleteRequests: 0,
    ...restored?.counters,
  };
  const boats = new Map<string, SimSandboxRecord>();
  const operations = new Map<string, SimOperationRecord>();
  const keys = new Map<string, KeyState>();
  for (const boat of restored?.sandboxes ?? []) boats.set(boat.id, boat);
  for (const op of restored?.operations ?? []) operations.set(op.id, op);
  for (const key of restored?.keys ?? []) {
    keys.set(key.keyHash, { fingerprint: key.fingerprint, firstSeenAt: key.firstSeenAt, boatId: key.boatId });
  }
  let faults: FaultState[] = [];
  let rateWindow = { start: 0, count: 0 };
  let closing = false;
  const pendingDelays = new Set<{ timer: NodeJS.Timeout; reject: (error: Error) => void }>();

  const simNow = (): number => wallNow() + clockOffsetMs;

  function snapshot(): SimStateFile {
    const keyRecords: SimStateFile["keys"] = [];
    for (const [keyHash, key] of keys) {
      // A key whose first request is still running is not committed: a restart releases it, as a crash of
      // the provider before the Boat existed would.
      if (key.boatId !== undefined) {
        keyRecords.push({
          keyHash,
          fingerprint: key.fingerprint,
          firstSeenAt: key.firstSeenAt,
          boatId: key.boatId,
        });
      }
    }
    return {
      version: 1,
      clockOffsetMs,
      counters: { ...counters },
      sandboxes: [...boats.values()],
      operations: [...operations.values()],
      keys: keyRecords,
    };
  }

  /** Called after every committed change, before the answer goes out. */
  function persist(): void {
    if (stateFile !== undefined) writeStateFile(stateFile, snapshot());
  }

  function liveKey(keyHash: string): KeyState | undefined {
    const key = keys.get(keyHash);
    if (key === undefined) return undefined;
    // Retention is measured on the simulator clock from the key's first use: at 24 h − 1 ms it still
    // replays, from 24 h on it is forgotten and the same key creates a new Boat.
    if (key.boatId !== undefined && simNow() - key.firstSeenAt >= KEY_RETENTION_MS) {
      keys.delete(keyHash);
      return undefined;
    }
    return key;
  }

  function newBoatId(): string {
    for (;;) {
      const bytes = randomBytes(8);
      let id = "bx_";
      for (const byte of bytes) id += BOAT_ALPHABET[byte % BOAT_ALPHABET.length];
      if (!boats.has(id)) return id;
    }
  }

  function newOperationId(): string {
    for (;;) {
      const id = `bdop_${randomBytes(16).toString("hex")}`;
      if (!operations.has(id)) return id;
    }
  }

  function sandboxView(boat: SimSandboxRecord): Sandbox {
    const state =
      boat.state === "provisioning" && simNow() - boat.createdAt >= provisionMs ? "running" : boat.state;
    return {
      id: boat.id,
      name: boat.name,
      state,
      createdAt: iso(boat.createdAt),
      ttlSeconds: boat.ttlSeconds,
    };
  }

  function operationView(op: SimOperationRecord): DeletionOperation {
    const stage =
      op.status === "processing" ? "removing" : op.status === "completed" ? "completed" : undefined;
    return {
      id: op.id,
      kind: "sandbox",
      targetId: op.targetId,
      status: op.status,
      ...(stage === undefined ? {} : { stage }),
      requestedAt: iso(op.requestedAt),
      ...(op.completedAt === null ? {} : { completedAt: iso(op.completedAt) }),
    };
  }

  function finishOperation(op: SimOperationRecord): void {
    const at = simNow();
    op.completedAt = at;
    const boat = boats.get(op.targetId);
    if (op.endsBlocked) {
      op.status = "blocked";
      boat?.history.push({ at, event: "deletion_blocked", operationId: op.id });
      return;
    }
    op.status = "completed";
    if (boat && boat.deletedAt === null) {
      boat.deletedAt = at;
      boat.history.push({ at, event: "deleted", operationId: op.id });
    }
  }

  /** Finishes every deletion whose simulated time is up; true when one changed. */
  function settleDueOperations(): boolean {
    let changed = false;
    for (const op of operations.values()) {
      if (
        (op.status === "pending" || op.status === "processing") &&
        simNow() - op.requestedAt >= deletionMs
      ) {
        finishOperation(op);
        changed = true;
      }
    }
    return changed;
  }

  function stats(): SimStats {
    const perName: Record<string, number> = {};
    let live = 0;
    let unnamed = 0;
    for (const boat of boats.values()) {
      if (boat.deletedAt !== null) continue;
      live += 1;
      if (boat.name === null) unnamed += 1;
      else perName[boat.name] = (perName[boat.name] ?? 0) + 1;
    }
    return { ...counters, live, perName, unnamed };
  }

  // ------------------------------------------------------------------------------------------------
  // Answers

  function error(
    status: number,
    code: string,
    message: string,
    extra: { retryAfterS?: number; details?: Record<string, unknown> } = {},
  ): Outcome {
    return {
      status,
      body: {
        ok: false,
        error: { code, message, status, ...(extra.details ? { details: extra.details } : {}) },
      },
      ...(extra.retryAfterS === undefined ? {} : { headers: { "retry-after": String(extra.retryAfterS) } }),
    };
  }

  const notFound = (): Outcome => error(404, "not_found", "No such sandbox.");

  /** A Boat as GET/PATCH/DELETE see it: missing, recently deleted (410) or long deleted (404). */
  /** A live Boat, or the answer for a missing one: 410 `gone` only for a read of one deleted recently. */
  function lookup(id: string, read = false): { boat: SimSandboxRecord } | { outcome: Outcome } {
    const boat = BOAT_ID.test(id) ? boats.get(id) : undefined;
    if (!boat) return { outcome: notFound() };
    if (boat.deletedAt !== null) {
      if (read && simNow() - boat.deletedAt < goneWindowMs) {
        return { outcome: error(410, "gone", "This sandbox was deleted.") };
      }
      return { outcome: notFound() };
    }
    return { boat };
  }

  function takeFault(method: string, path: string): FaultState | undefined {
    for (const fault of faults) {
      // block-deletion is consumed when a deletion operation starts, not by request matching.
      if (fault.action === "block-deletion" || fault.remaining <= 0) continue;
      if (fault.method !== undefined && fault.method !== method) continue;
      if (fault.path !== undefined && !fault.path.test(path)) continue;
      fault.remaining -= 1;
      faults = faults.filter((candidate) => candidate.remaining > 0);
      return fault;
    }
    return undefined;
  }

  function takeBlockDeletion(path: string): boolean {
    const fault = faults.find(
      (candidate) =>
        candidate.action === "block-deletion" &&
        candidate.remaining > 0 &&
        (candidate.method === undefined || candidate.method === "DELETE") &&
        (candidate.path === undefined || candidate.path.test(path)),
    );
    if (!fault) return false;
    fault.remaining -= 1;
    faults = faults.filter((candidate) => candidate.remaining > 0);
    return true;
  }

  /** The `delay` fault: waits real time, abandoned (throws Closing) when the simulator closes. */
  function pauseFor(fault: FaultState | undefined): Promise<void> {
    if (fault?.action !== "delay") return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const entry = {
        timer: setTimeout(() => {
          pendingDelays.delete(entry);
          if (closing) reject(new Closing());
          else resolve();
        }, fault.ms ?? 1_000),
        reject,
      };
      pendingDelays.add(entry);
    });
  }

  // ------------------------------------------------------------------------------------------------
  // API handlers. Each runs the `delay` fault (pause) right before its commit point.

  async function create(
    headers: IncomingMessage["headers"],
    body: unknown,
    fault: FaultState | undefined,
  ): Promise<Outcome> {
    const rawKey = headers["idempotency-key"];
    const key = Array.isArray(rawKey) ? rawKey[0] : rawKey;
    if (key === undefined || key.length === 0) {
      return error(400, "idempotency_key_required", "Send an Idempotency-Key header (a UUID v4).");
    }
    // BOAT_DEV_API: `Idempotency-Key: <uuid v4>`; anything else is refused before a key is looked at.
    if (!/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i.test(key)) {
      return error(400, "invalid_request", "The Idempotency-Key must be a UUID v4.");
    }
    const parsed = createSandboxBodySchema.safeParse(body);
    if (!parsed.success) {
      return error(400, "invalid_request", "The body must be { ttlSeconds, noEnv }.", {
        details: { issues: parsed.error.issues.map((issue) => issue.message) },
      });
    }
    const keyHash = sha256(key);
    const fingerprint = canonicalJson(parsed.data);
    const existing = liveKey(keyHash);
    if (existing) {
      if (existing.fingerprint !== fingerprint) {
        return error(
          409,
          "idempotency_key_reused",
          "This Idempotency-Key was used with a different body; use a new key for a different request.",
        );
      }
      if (existing.boatId === undefined) {
        return error(
          409,
          "idempotency_in_progress",
          "A request with this Idempotency-Key is still running.",
          {
            retryAfterS: 1,
          },
        );
      }
      const boat = boats.get(existing.boatId);
      if (!boat) return error(500, "internal_error", "The replayed sandbox is missing.");
      return {
        status: 200,
        body: { ok: true, type: "sandbox.created", sandbox: sandboxView(boat) },
        headers: { "idempotent-replayed": "true" },
      };
    }
    // Reserve the key before the (possibly delayed) commit, so a concurrent request with the same key
    // sees "in progress" instead of creating a second Boat.
    const reservation: KeyState = { fingerprint, firstSeenAt: simNow() };
    keys.set(keyHash, reservation);
    try {
      await pauseFor(fault);
    } catch (reason) {
      // No Boat exists yet: the key is released, as boat.dev does for a create that failed early.
      if (keys.get(keyHash) === reservation) keys.delete(keyHash);
      throw reason;
    }
    const at = simNow();
    const boat: SimSandboxRecord = {
      id: newBoatId(),
      name: null,
      state: "provisioning",
      createdAt: at,
      ttlSeconds: parsed.data.ttlSeconds,
      busy: false,
      keyHash,
      deletedAt: null,
      history: [{ at, event: "created" }],
    };
    boats.set(boat.id, boat);
    reservation.boatId = boat.id;
    counters.createsCommitted += 1;
    persist();
    return { status: 201, body: { ok: true, type: "sandbox.created", sandbox: sandboxView(boat) } };
  }

  async function read(id: string, fault: FaultState | undefined): Promise<Outcome> {
    await pauseFor(fault);
    const found = lookup(id, true);
    if ("outcome" in found) return found.outcome;
    return { status: 200, body: { ok: true, sandbox: sandboxView(found.boat) } };
  }

  async function rename(id: string, body: unknown, fault: FaultState | undefined): Promise<Outcome> {
    const parsed = renameSandboxBodySchema.safeParse(body);
    if (!parsed.success)
      return error(400, "invalid_request", "The body must be { name } (1–100 characters).");
    await pauseFor(fault);
    const found = lookup(id);
    if ("outcome" in found) return found.outcome;
    const boat = found.boat;
    if (boat.name !== parsed.data.name) {
      boat.name = parsed.data.name;
      boat.history.push({ at: simNow(), event: "renamed", name: boat.name });
      persist();
    }
    return { status: 200, body: { ok: true, sandbox: sandboxView(boat) } };
  }

  async function list(query: URLSearchParams, fault: FaultState | undefined): Promise<Outcome> {
    const rawLimit = query.get("limit");
    const limit = rawLimit === null ? DEFAULT_LIST_LIMIT : Number(rawLimit);
    if (
      !/^\d{1,3}$/.test(rawLimit ?? "1") ||
      !Number.isInteger(limit) ||
      limit < 1 ||
      limit > MAX_LIST_LIMIT
    ) {
      return error(400, "invalid_request", `limit must be an integer from 1 to ${MAX_LIST_LIMIT}.`);
    }
    const cursor = query.get("cursor");
    let after: { createdAt: number; id: string } | null = null;
    if (cursor !== null) {
      after = decodeCursor(cursor);
      if (after === null) return error(400, "invalid_cursor", "The cursor is not one this API handed out.");
    }
    await pauseFor(fault);
    const now = simNow();
    // Eventual consistency: the listing lags the truth by listLagMs of simulator time, in both directions.
    const visible = [...boats.values()]
      .filter((boat) => boat.createdAt + listLagMs <= now)
      .filter((boat) => boat.deletedAt === null || now < boat.deletedAt + listLagMs)
      .sort((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    // Keyset pagination on (createdAt, id): a Boat appearing or vanishing between pages never shifts the
    // pages after it, which an offset cursor would.
    const cursorKey = after;
    const start =
      cursorKey === null
        ? visible
        : visible.filter(
            (boat) =>
              boat.createdAt > cursorKey.createdAt ||
              (boat.createdAt === cursorKey.createdAt && boat.id > cursorKey.id),
          );
    const page = start.slice(0, limit);
    const last = page[page.length - 1];
    const nextCursor = start.length > limit && last ? encodeCursor(last.createdAt, last.id) : null;
    return {
      status: 200,
      body: { ok: true, sandboxes: page.map(sandboxView), pageInfo: { nextCursor } },
    };
  }

  async function remove(
    id: string,
    path: string,
    headers: IncomingMessage["headers"],
    fault: FaultState | undefined,
  ): Promise<Outcome> {
    const confirm = headers["x-boat-confirm-delete"];
    if (confirm !== id) {
      return error(409, "confirmation_mismatch", "X-Boat-Confirm-Delete must equal the sandbox id.");
    }
    await pauseFor(fault);
    const found = lookup(id);
    if ("outcome" in found) return found.outcome;
    const boat = found.boat;
    // Deleting again while the operation runs returns the same operation: no second deletion starts.
    for (const op of operations.values()) {
      if (op.targetId === id && (op.status === "pending" || op.status === "processing")) {
        return { status: 202, body: { ok: true, type: "deletion.operation", operation: operationView(op) } };
      }
    }
    if (boat.busy) return error(409, "sandbox_busy", "The sandbox cannot be deleted right now; retry later.");
    const at = simNow();
    const op: SimOperationRecord = {
      id: newOperationId(),
      targetId: id,
      status: "pending",
      requestedAt: at,
      completedAt: null,
      polls: 0,
      endsBlocked: takeBlockDeletion(path),
    };
    operations.set(op.id, op);
    counters.deletesAccepted += 1;
    boat.history.push({ at, event: "deletion_requested", operationId: op.id });
    if (deletionPolls <= 0) finishOperation(op);
    persist();
    return { status: 202, body: { ok: true, type: "deletion.operation", operation: operationView(op) } };
  }

  async function poll(opId: string, fault: FaultState | undefined): Promise<Outcome> {
    await pauseFor(fault);
    const op = OPERATION_ID.test(opId) ? operations.get(opId) : undefined;
    if (!op) return error(404, "not_found", "No such deletion operation.");
    if (op.status === "pending" || op.status === "processing") {
      op.polls += 1;
      if (op.polls >= deletionPolls) finishOperation(op);
      else op.status = "processing";
      persist();
    }
    return { status: 200, body: { ok: true, operation: operationView(op) } };
  }

  // ------------------------------------------------------------------------------------------------
  // Routing

  async function handleApi(
    req: IncomingMessage,
    res: ServerResponse,
    path: string,
    query: URLSearchParams,
    requestId: string,
  ): Promise<void> {
    const method = req.method ?? "GET";
    // boat.dev's deletions go on between requests: whatever finished meanwhile is seen by this one.
    if (settleDueOperations()) persist();
    const sandboxMatch = /^\/sandboxes\/([^/]+)$/.exec(path);
    const opMatch = /^\/deletion-operations\/([^/]+)$/.exec(path);
    let route: ((body: unknown, fault: FaultState | undefined) => Promise<Outcome>) | undefined;
    let known = true;
    if (path === "/sandboxes") {
      if (method === "POST") {
        counters.createRequests += 1;
        persist();
        route = (body, fault) => create(req.headers, body, fault);
      } else if (method === "GET") route = (_body, fault) => list(query, fault);
    } else if (sandboxMatch) {
      const id = safeDecode(sandboxMatch[1] ?? "");
      if (method === "GET") route = (_body, fault) => read(id, fault);
      else if (method === "PATCH") route = (body, fault) => rename(id, body, fault);
      else if (method === "DELETE") {
        counters.deleteRequests += 1;
        persist();
        route = (_body, fault) => remove(id, path, req.headers, fault);
      }
    } else if (opMatch) {
      const opId = safeDecode(opMatch[1] ?? "");
      if (method === "GET") route = (_body, fault) => poll(opId, fault);
    } else {
      known = false;
    }
    if (route === undefined) {
      send(res, requestId, known ? error(405, "method_not_allowed", "Method not allowed.") : notFound());
      return;
    }
    if (options.rateLimit) {
      const now = simNow();
      if (now - rateWindow.start >= options.rateLimit.windowMs) rateWindow = { start: now, count: 0 };
      rateWindow.count += 1;
      if (rateWindow.count > options.rateLimit.limit) {
        const retryAfterS = Math.max(
          1,
          Math.ceil((rateWindow.start + options.rateLimit.windowMs - now) / 1000),
        );
        send(res, requestId, error(429, "rate_limited", "Too many requests.", { retryAfterS }));
        return;
      }
    }
    const fault = takeFault(method, path);
    switch (fault?.action) {
      case "drop-before":
        req.socket.destroy();
        return;
      case "fail-before":
        send(
          res,
          requestId,
          error(
            fault.status ?? 503,
            fault.code ?? "service_unavailable",
            "Injected failure; nothing was done.",
          ),
        );
        return;
      case "in-progress":
        send(
          res,
          requestId,
          error(409, "idempotency_in_progress", "A request with this Idempotency-Key is still running.", {
            retryAfterS: fault.retryAfterS ?? 1,
          }),
        );
        return;
      case "rate-limit":
        send(
          res,
          requestId,
          error(429, "rate_limited", "Too many requests.", { retryAfterS: fault.retryAfterS ?? 1 }),
        );
        return;
      default:
        break;
    }
    const body = await readJsonBody(req);
    if (body === TOO_LARGE) {
      send(res, requestId, error(413, "payload_too_large", "The body is larger than 64 KiB."), true);
      return;
    }
    if (body === NOT_JSON) {
      send(res, requestId, error(400, "invalid_request", "The body is not valid JSON."));
      return;
    }
    const outcome = await route(body, fault);
    if (fault?.action === "fail-after") {
      send(
        res,
        requestId,
        error(
          fault.status ?? 500,
          fault.code ?? "internal_error",
          "Injected failure after the change was made.",
        ),
      );
      return;
    }
    if (fault?.action === "drop-after") {
      req.socket.destroy();
      return;
    }
    send(res, requestId, outcome);
  }

  async function handleSim(
    req: IncomingMessage,
    res: ServerResponse,
    path: string,
    requestId: string,
  ): Promise<void> {
    const method = req.method ?? "GET";
    const body = await readJsonBody(req);
    if (body === TOO_LARGE || body === NOT_JSON) {
      send(res, requestId, error(400, "invalid_request", "The body must be JSON of at most 64 KiB."));
      return;
    }
    const patchMatch = /^\/_sim\/sandboxes\/([^/]+)$/.exec(path);
    if (path === "/_sim/faults" && method === "POST") {
      const parsed = faultsBodySchema.safeParse(body);
      if (!parsed.success) {
        send(res, requestId, error(400, "invalid_request", `Invalid fault rules: ${parsed.error.message}`));
        return;
      }
      for (const rule of parsed.data.rules) {
        faults.push({
          action: rule.action,
          ...(rule.method === undefined ? {} : { method: rule.method.toUpperCase() }),
          ...(rule.path === undefined ? {} : { path: new RegExp(rule.path) }),
          remaining: rule.times,
          ...(rule.status === undefined ? {} : { status: rule.status }),
          ...(rule.code === undefined ? {} : { code: rule.code }),
          ...(rule.ms === undefined ? {} : { ms: rule.ms }),
          ...(rule.retryAfterS === undefined ? {} : { retryAfterS: rule.retryAfterS }),
        });
      }
      send(res, requestId, { status: 200, body: { ok: true, active: faults.length } });
    } else if (path === "/_sim/faults" && method === "DELETE") {
      faults = [];
      send(res, requestId, { status: 200, body: { ok: true, active: 0 } });
    } else if (path === "/_sim/faults" && method === "GET") {
      const active = faults.map((fault) => ({
        action: fault.action,
        method: fault.method ?? null,
        path: fault.path?.source ?? null,
        remaining: fault.remaining,
      }));
      send(res, requestId, { status: 200, body: { ok: true, rules: active } });
    } else if (path === "/_sim/clock" && method === "POST") {
      const parsed = clockBodySchema.safeParse(body);
      if (!parsed.success) {
        send(res, requestId, error(400, "invalid_request", "The body must be { advanceMs }."));
        return;
      }
      advanceClock(parsed.data.advanceMs);
      send(res, requestId, { status: 200, body: { ok: true, now: simNow() } });
    } else if (path === "/_sim/clock" && method === "GET") {
      send(res, requestId, { status: 200, body: { ok: true, now: simNow() } });
    } else if (path === "/_sim/stats" && method === "GET") {
      send(res, requestId, { status: 200, body: stats() });
    } else if (path === "/_sim/sandboxes" && method === "GET") {
      send(res, requestId, {
        status: 200,
        body: { sandboxes: [...boats.values()], operations: [...operations.values()] },
      });
    } else if (patchMatch && method === "PATCH") {
      const parsed = simSandboxPatchSchema.safeParse(body);
      const boat = boats.get(safeDecode(patchMatch[1] ?? ""));
      if (!parsed.success) {
        send(res, requestId, error(400, "invalid_request", "The body must be { busy?, state? }."));
      } else if (!boat) {
        send(res, requestId, notFound());
      } else {
        if (parsed.data.busy !== undefined) boat.busy = parsed.data.busy;
        if (parsed.data.state !== undefined) boat.state = parsed.data.state;
        boat.history.push({ at: simNow(), event: "patched" });
        persist();
        send(res, requestId, { status: 200, body: { ok: true, sandbox: boat } });
      }
    } else {
      send(res, requestId, error(404, "not_found", "No such simulator control."));
    }
  }

  function advanceClock(ms: number): void {
    if (!Number.isInteger(ms) || ms < 0) throw new RangeError("advanceMs must be a non-negative integer");
    clockOffsetMs += ms;
    settleDueOperations();
    persist();
  }

  function authorized(req: IncomingMessage): boolean {
    const header = req.headers.authorization;
    if (typeof header !== "string") return false;
    const given = Buffer.from(header, "utf8");
    return given.length === tokenBytes.length && timingSafeEqual(given, tokenBytes);
  }

  const server = createServer((req, res) => {
    const requestId = `req_${randomBytes(8).toString("hex")}`;
    const handle = async (): Promise<void> => {
      const url = new URL(req.url ?? "/", "http://simulator.invalid");
      const path = url.pathname;
      if (!authorized(req)) {
        send(res, requestId, error(401, "unauthorized", "Send Authorization: Bearer <token>."));
        return;
      }
      if (path === "/api/v1" || path.startsWith("/api/v1/")) {
        await handleApi(req, res, path.slice("/api/v1".length) || "/", url.searchParams, requestId);
      } else if (path.startsWith("/_sim/")) {
        await handleSim(req, res, path, requestId);
      } else {
        send(res, requestId, error(404, "not_found", "Not found."));
      }
    };
    handle().catch((reason: unknown) => {
      if (reason instanceof Closing) {
        req.socket.destroy();
        return;
      }
      const detail = isBoatSimulatorError(reason) ? reason.message : "unexpected simulator failure";
      if (!res.headersSent) send(res, requestId, error(500, "internal_error", detail));
      else req.socket.destroy();
    });
  });
  // Idle keep-alive sockets must not outlive a test; close() also drops them explicitly.
  server.keepAliveTimeout = 5_000;

  await new Promise<void>((resolve, reject) => {
    const onError = (reason: Error): void => {
      reject(
        new BoatSimulatorError({
          code: "simulator_start_failed",
          message: `The boat.dev simulator could not listen on ${host}:${options.port ?? 0}: ${reason.message}.`,
          cause: reason,
        }),
      );
    };
    server.once("error", onError);
    server.listen(options.port ?? 0, host, () => {
      server.off("error", onError);
      resolve();
    });
  });
  const address = server.address();
  if (address === null || typeof address === "string") {
    server.close();
    throw new BoatSimulatorError({
      code: "simulator_start_failed",
      message: "The simulator has no TCP address.",
    });
  }
  const urlHost = isIP(address.address) === 6 ? `[${address.address}]` : address.address;
  const url = `http://${urlHost}:${address.port}`;
  // The first write: a fresh state file exists as soon as the simulator runs.
  persist();

  return {
    url,
    apiUrl: `${url}/api/v1`,
    token,
    stats,
    now: simNow,
    advanceClock,
    sandboxes: () => structuredClone([...boats.values()]),
    async close() {
      closing = true;
      for (const entry of pendingDelays) {
        clearTimeout(entry.timer);
        entry.reject(new Closing());
      }
      pendingDelays.clear();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}

const TOO_LARGE = Symbol("too large");
const NOT_JSON = Symbol("not JSON");

async function readJsonBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of req) {
    total += (chunk as Buffer).length;
    if (total > MAX_BODY_BYTES) return TOO_LARGE;
    chunks.push(chunk as Buffer);
  }
  if (total === 0) return undefined;
  try {
    return JSON.parse(Buffer.concat(chunks).toString("utf8"));
  } catch {
    return NOT_JSON;
  }
}

function send(res: ServerResponse, requestId: string, outcome: Outcome, close = false): void {
  if (res.headersSent || res.destroyed) return;
  let body = outcome.body;
  if (body && typeof body === "object" && (body as { ok?: unknown }).ok === false) {
    body = { ...(body as object), requestId };
  }
  const text = JSON.stringify(body);
  res.writeHead(outcome.status, {
    "content-type": "application/json; charset=utf-8",
    "content-length": Buffer.byteLength(text),
    "x-request-id": requestId,
    ...(close ? { connection: "close" } : {}),
    ...outcome.headers,
  });
  res.end(text);
}

/** A malformed %-escape is just an id that matches nothing (→ 404), never a crash. */
function safeDecode(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return "";
  }
}

function encodeCursor(createdAt: number, id: string): string {
  return Buffer.from(JSON.stringify({ c: createdAt, i: id }), "utf8").toString("base64url");
}

function decodeCursor(cursor: string): { createdAt: number; id: string } | null {
  if (cursor.length > MAX_CURSOR_LENGTH || !/^[A-Za-z0-9_-]+$/.test(cursor)) return null;
  try {
    const value = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8")) as {
      c?: unknown;
      i?: unknown;
    };
    if (!Number.isSafeInteger(value.c) || typeof value.i !== "string" || !BOAT_ID.test(value.i)) return null;
    return { createdAt: value.c as number, id: value.i };
  } catch {
    return null;
  }
}
