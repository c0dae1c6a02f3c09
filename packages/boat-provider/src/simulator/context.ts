import type { Faults } from "./faults.js";
import type { SimState } from "./state.js";

/** The simulator's settings, fixed at start. */
export interface SimConfig {
  listLagMs: number;
  deletionPolls: number;
  deletionMs: number;
  goneWindowMs: number;
  provisionMs: number;
  rateLimit?: { limit: number; windowMs: number };
}

/**
 * What every route handler and state function takes: built once by `startBoatSimulator`, which only wires
 * it to an HTTP server.
 */
export interface SimContext {
  readonly config: SimConfig;
  readonly state: SimState;
  readonly faults: Faults;
  /** The simulator's clock (ms): the wall clock plus every /_sim/clock advance. */
  now(): number;
  /**
   * Called after every committed change, before the answer goes out: appends the change (the clock, the
   * counters and the records it names, as they now are) to the state log, if any, and fsyncs it.
   * `fsync: false` (a counter bump alone, which acknowledges nothing) only writes it: it survives a kill
   * of the simulator, and the next fsynced change makes it durable with itself.
   */
  persist(change?: SimChange, options?: { fsync?: boolean }): void;
}

/** What a committed change touched, besides the clock and the counters (always written). */
export interface SimChange {
  /** Boat ids. */
  boats?: readonly string[];
  /** Deletion operation ids. */
  operations?: readonly string[];
  /** SHA-256 hashes of idempotency keys (only committed ones, with a Boat, are written). */
  keys?: readonly string[];
}
