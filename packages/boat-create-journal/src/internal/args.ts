import { createPaused, invalidArgument } from "../errors.js";
import {
  BOAT_ID,
  BOT_ID,
  type BoatCreateRequest,
  BoatCreateRequestSchema,
  MAX_REQUEST_BODY_LENGTH,
} from "../schema.js";
import type { BoatCreateRowFacts } from "./logic.js";

/**
 * Argument checks run before any file is opened: a value the journal would refuse to load must never be
 * written, and a caller's mistake must not look like a damaged journal (400, not 503).
 */

export function assertBotId(value: unknown, message: string): asserts value is string {
  if (typeof value !== "string" || !BOT_ID.test(value)) throw invalidArgument(message);
}

export function assertBoatId(value: unknown, message: string): asserts value is string {
  if (typeof value !== "string" || !BOAT_ID.test(value)) throw invalidArgument(message);
}

export function assertRequestBody(value: unknown): asserts value is string {
  if (typeof value !== "string" || value.length === 0 || value.length > MAX_REQUEST_BODY_LENGTH) {
    throw invalidArgument("invalid cloud computer create request");
  }
}

/** A request handed back by the caller must be a row this journal could have returned. */
export function parseRequest(value: unknown): BoatCreateRequest {
  let parsed: ReturnType<typeof BoatCreateRequestSchema.safeParse>;
  try {
    parsed = BoatCreateRequestSchema.safeParse(value);
  } catch {
    // A hostile object (throwing getter, revoked proxy) is a bad argument, not a journal fault.
    throw invalidArgument("invalid cloud computer create request");
  }
  if (!parsed.success) throw invalidArgument("invalid cloud computer create request");
  return parsed.data;
}

/** A caller's row facts, checked and copied (only the compared fields). */
export function rowFacts(expected: BoatCreateRowFacts, botId: unknown): BoatCreateRowFacts {
  if (
    typeof expected !== "object" ||
    expected === null ||
    expected.botId !== botId ||
    typeof expected.resolved !== "boolean" ||
    typeof expected.createdAt !== "number"
  ) {
    throw invalidArgument(
      "expected must be a create row's facts (botId, boxId, resolved, createdAt) of this bot",
    );
  }
  assertBotId(expected.botId, "invalid bot id for cloud computer ownership");
  return {
    botId: expected.botId,
    boxId: expected.boxId,
    resolved: expected.resolved,
    createdAt: expected.createdAt,
  };
}

/** A clock that reads zero, negative or non-finite would stamp rows the journal itself refuses to load. */
export function readClock(now: () => number): number {
  const value = now();
  if (typeof value !== "number" || !Number.isFinite(value) || value <= 0) {
    throw createPaused("unavailable", new RangeError("the journal clock returned an invalid time"));
  }
  return value;
}
