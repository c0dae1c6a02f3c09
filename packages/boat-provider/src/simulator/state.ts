import { createHash, randomBytes } from "node:crypto";
import {
  KEY_RETENTION_MS,
  type SimOperationRecord,
  type SimSandboxRecord,
  type SimSeedBody,
  type SimStateFile,
  type SimStateLogRecord,
  type SimStats,
} from "../schema.js";
import type { SimChange, SimContext } from "./context.js";

/**
 * The simulator's state: everything committed lives in these structures and, with a state file, on disk
 * after each change (`ctx.persist()`).
 */
export interface SimState {
  /** Every /_sim/clock advance so far: the simulator's clock is the wall clock plus this. */
  clockOffsetMs: number;
  counters: SimStateFile["counters"];
  boats: Map<string, SimSandboxRecord>;
  operations: Map<string, SimOperationRecord>;
  /** By SHA-256 of the Idempotency-Key. */
  keys: Map<string, KeyState>;
  /** The fixed window of `rateLimit` (not persisted). */
  rateWindow: { start: number; count: number };
}

export interface KeyState {
  fingerprint: string;
  firstSeenAt: number;
  /** Unset while the first request with this key is still running. */
  boatId?: string;
}

const BOAT_ALPHABET = "23456789abcdefghjkmnpqrstuvwxyz";

/** A fresh state, or the one a state file recorded. */
export function restoreState(restored: SimStateFile | null): SimState {
  const state: SimState = {
    clockOffsetMs: restored?.clockOffsetMs ?? 0,
    counters: {
      createsCommitted: 0,
      createRequests: 0,
      deletesAccepted: 0,
      deleteRequests: 0,
      ...restored?.counters,
    },
    boats: new Map(),
    operations: new Map(),
    keys: new Map(),
    rateWindow: { start: 0, count: 0 },
  };
  for (const boat of restored?.sandboxes ?? []) state.boats.set(boat.id, boat);
  for (const op of restored?.operations ?? []) state.operations.set(op.id, op);
  for (const key of restored?.keys ?? []) {
    state.keys.set(key.keyHash, {
      fingerprint: key.fingerprint,
      firstSeenAt: key.firstSeenAt,
      boatId: key.boatId,
    });
  }
  return state;
}

/** The committed keys among `hashes`, as records. */
function keyRecords(state: SimState, hashes: Iterable<string>): SimStateFile["keys"] {
  const records: SimStateFile["keys"] = [];
  for (const keyHash of hashes) {
    const key = state.keys.get(keyHash);
    // A key whose first request is still running is not committed: a restart releases it, as a crash of
    // the provider before the Boat existed would.
    if (key?.boatId !== undefined) {
      records.push({
        keyHash,
        fingerprint: key.fingerprint,
        firstSeenAt: key.firstSeenAt,
        boatId: key.boatId,
      });
    }
  }
  return records;
}

/** What the state file holds. */
export function snapshotState(state: SimState): SimStateFile {
  return {
    version: 2,
    clockOffsetMs: state.clockOffsetMs,
    counters: { ...state.counters },
    sandboxes: [...state.boats.values()],
    operations: [...state.operations.values()],
    keys: keyRecords(state, state.keys.keys()),
  };
}

/** The log record of one change: the clock, the counters, and the records it touched as they now are. */
export function changeRecord(state: SimState, change: SimChange): SimStateLogRecord {
  const pick = <T>(map: Map<string, T>, ids: readonly string[] = []): T[] =>
    ids.flatMap((id) => {
      const found = map.get(id);
      return found === undefined ? [] : [found];
    });
  return {
    clockOffsetMs: state.clockOffsetMs,
    counters: { ...state.counters },
    sandboxes: pick(state.boats, change.boats),
    operations: pick(state.operations, change.operations),
    keys: keyRecords(state, change.keys ?? []),
  };
}

/** The change `finishOperation` (or any step of a deletion) makes: the operation and its Boat. */
export function operationChange(ops: readonly SimOperationRecord[]): SimChange {
  return { operations: ops.map((op) => op.id), boats: ops.map((op) => op.targetId) };
}

export function liveKey(ctx: SimContext, keyHash: string): KeyState | undefined {
  const key = ctx.state.keys.get(keyHash);
  if (key === undefined) return undefined;
  // Retention is measured on the simulator clock from the key's first use: at 24 h − 1 ms it still
  // replays, from 24 h on it is forgotten and the same key creates a new Boat.
  if (key.boatId !== undefined && ctx.now() - key.firstSeenAt >= KEY_RETENTION_MS) {
    ctx.state.keys.delete(keyHash);
    return undefined;
  }
  return key;
}

export function newBoatId(state: SimState): string {
  for (;;) {
    const bytes = randomBytes(8);
    let id = "bx_";
    for (const byte of bytes) id += BOAT_ALPHABET[byte % BOAT_ALPHABET.length];
    if (!state.boats.has(id)) return id;
  }
}

export function newOperationId(state: SimState): string {
  for (;;) {
    const id = `bdop_${randomBytes(16).toString("hex")}`;
    if (!state.operations.has(id)) return id;
  }
}

export function finishOperation(ctx: SimContext, op: SimOperationRecord): void {
  const at = ctx.now();
  op.completedAt = at;
  const boat = ctx.state.boats.get(op.targetId);
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

/** Finishes every deletion whose simulated time is up; the operations it finished. */
export function settleDueOperations(ctx: SimContext): SimOperationRecord[] {
  const finished: SimOperationRecord[] = [];
  for (const op of ctx.state.operations.values()) {
    if (
      (op.status === "pending" || op.status === "processing") &&
      ctx.now() - op.requestedAt >= ctx.config.deletionMs
    ) {
      finishOperation(ctx, op);
      finished.push(op);
    }
  }
  return finished;
}

/** The simulator clock moves forward by `ms`; deletions whose time is up finish. */
export function advanceClock(ctx: SimContext, ms: number): void {
  if (!Number.isInteger(ms) || ms < 0) throw new RangeError("advanceMs must be a non-negative integer");
  ctx.state.clockOffsetMs += ms;
  ctx.persist(operationChange(settleDueOperations(ctx)));
}

/**
 * Test-only seeding (POST /_sim/sandboxes): Boats that exist at once, as if created long enough ago for
 * the list to show them, in the given order (createdAt one millisecond apart, ending now). They have no
 * idempotency key (their keyHash is a hash of their id) and count neither as creates nor as requests.
 */
export function seedSandboxes(ctx: SimContext, body: SimSeedBody): SimSandboxRecord[] {
  const names =
    "names" in body
      ? body.names
      : Array.from({ length: body.count }, (_, i) =>
          body.namePrefix === undefined ? null : `${body.namePrefix}${i}`,
        );
  const now = ctx.now();
  const seeded = names.map((name, i): SimSandboxRecord => {
    const id = newBoatId(ctx.state);
    const at = now - (names.length - 1 - i) - ctx.config.listLagMs;
    const boat: SimSandboxRecord = {
      id,
      name,
      state: "running",
      createdAt: at,
      ttlSeconds: 28_800,
      busy: false,
      keyHash: createHash("sha256").update(`seed:${id}`).digest("hex"),
      deletedAt: null,
      history: [{ at, event: "created" }],
    };
    ctx.state.boats.set(id, boat);
    return boat;
  });
  ctx.persist({ boats: seeded.map((boat) => boat.id) });
  return seeded;
}

export function simStats(state: SimState): SimStats {
  const perName: Record<string, number> = {};
  let live = 0;
  let unnamed = 0;
  for (const boat of state.boats.values()) {
    if (boat.deletedAt !== null) continue;
    live += 1;
    if (boat.name === null) unnamed += 1;
    else perName[boat.name] = (perName[boat.name] ?? 0) + 1;
  }
  return { ...state.counters, live, perName, unnamed };
}
