/**
 * Phase and status sets shared across layers. The restore saga's phases stay in
 * `@drydock/restore-saga` (`PHASES`, `TERMINAL_PHASES`): only the saga defines them, and every other layer
 * imports them from there.
 */

/** A deletion fence's phase: written (DELETE maybe sent), accepted by boat.dev, or blocked. */
export const BOAT_DELETION_PHASES = ["prepared", "accepted", "blocked"] as const;
export type BoatDeletionPhaseName = (typeof BOAT_DELETION_PHASES)[number];

/** A boat.dev deletion operation's status; it only moves forward (pending < processing < completed). */
export const BOAT_DELETION_STATUSES = ["pending", "processing", "blocked", "completed"] as const;
export type BoatDeletionStatusName = (typeof BOAT_DELETION_STATUSES)[number];
