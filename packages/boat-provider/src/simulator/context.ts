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
  /** Called after every committed change, before the answer goes out (writes the state file, if any). */
  persist(): void;
}
