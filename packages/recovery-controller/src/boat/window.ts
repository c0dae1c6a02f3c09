/** The create key's retry window, as the plan and the actions both apply it. */
import { CREATE_WINDOW_MS } from "../schema.js";
import type { CreateRow } from "./context.js";

/** Time left in boat.dev's 24-hour window less drydock's 1-hour margin (CREATE_WINDOW_MS); 0 past it. */
export function createWindowLeftMs(row: CreateRow, at: number): number {
  return Math.max(0, CREATE_WINDOW_MS - Math.max(0, at - row.createdAt));
}

/**
 * The one window rule of the plan and the actions: a create row without a Boat id whose key drydock still
 * retries. While it holds, that key is the only way to find a Boat it may have created, so nothing may
 * adopt another Boat for the bot (the row would be replaced and the key dropped).
 */
export function keyStillRetried(row: CreateRow | undefined, at: number): boolean {
  return row !== undefined && row.boxId === undefined && createWindowLeftMs(row, at) > 0;
}
