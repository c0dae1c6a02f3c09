import { createPaused } from "../errors.js";
import {
  type BoatCreateAttempt,
  type BoatCreateJournalFile,
  type BoatCreateRecoveryEntry,
  type BoatCreateRequest,
  type BoatCreateView,
  KEY_RETENTION_MS,
  keyTrustDeadline,
  MAX_REQUESTS,
} from "../schema.js";

/**
 * The journal's decisions as pure functions of (document, arguments, clock): each returns the next document
 * (only when something must be written) and the caller's result, or throws the seed's refusal. Arguments are
 * already validated by the caller. Nothing here touches a file, so every rule is testable on its own and
 * the file layer only adds locking, reading and the atomic write.
 */

export interface Step<R> {
  next?: BoatCreateJournalFile;
  result: R;
}

export interface CreateContext {
  /** Milliseconds since the epoch, read once per call. */
  now: number;
  /** Mints a fresh idempotency key (UUID v4). */
  newKey: () => string;
}

const copy = (request: BoatCreateRequest): BoatCreateRequest => ({ ...request });
/** The next document: its own members (a newer writer's too, and their order) kept, the requests replaced. */
const file = (doc: BoatCreateJournalFile, requests: BoatCreateRequest[]): BoatCreateJournalFile => ({
  ...doc,
  requests,
});

/** The exact row a caller holds: same bot, same body, same key. */
function sameAttempt(a: BoatCreateRequest, b: BoatCreateRequest): boolean {
  return a.botId === b.botId && a.requestBody === b.requestBody && a.idempotencyKey === b.idempotencyKey;
}

/** Recorded before the request leaves the process; a known Boat wins over a changed body, never a second create. */
export function beginStep(
  doc: BoatCreateJournalFile,
  botId: string,
  requestBody: string,
  ctx: CreateContext,
): Step<BoatCreateAttempt> {
  const known = doc.requests.find((request) => request.botId === botId && request.boxId !== undefined);
  if (known) return { result: { request: copy(known), startedNow: false } };

  const pending = doc.requests.find((request) => request.botId === botId);
  if (pending) {
    if (pending.requestBody !== requestBody) {
      // The earlier key may own a Boat; a new key for a new body could bill a second one.
      throw createPaused("waiting for an earlier cloud computer request to be reconciled");
    }
    const ageMs = ctx.now - pending.createdAt;
    if (ageMs >= KEY_RETENTION_MS) {
      // Past boat.dev's 24-hour idempotency window, neither this key nor a new one is safe: a retry may
      // create a second billable Boat. Only a person can reconcile it.
      throw createPaused("older than boat.dev's 24-hour retry window");
    }
    if (ctx.now >= keyTrustDeadline(pending.createdAt)) {
      // Inside the safety margin: with clock skew or the waits of one call, a retry could reach boat.dev
      // after it forgot the key. The key is kept (never a new one); a person reconciles it.
      throw createPaused("too close to the end of boat.dev's 24-hour retry window");
    }
    return { result: { request: copy(pending), startedNow: false } };
  }

  if (doc.requests.length >= MAX_REQUESTS) throw createPaused("full");
  const request: BoatCreateRequest = {
    botId,
    requestBody,
    idempotencyKey: ctx.newKey(),
    createdAt: ctx.now,
  };
  // Crash window: once this write is durable the key exists before boat.dev ever sees it, so any retry
  // after a crash reuses it; without the write a lost response could not be retried safely.
  return {
    next: file(doc, [...doc.requests, request]),
    result: { request: copy(request), startedNow: true },
  };
}

/** Persist the returned identity before the caller renames it; the bot's other rows are dropped. */
export function rememberStep(
  doc: BoatCreateJournalFile,
  request: BoatCreateRequest,
  boxId: string,
): Step<BoatCreateRequest> {
  const current = doc.requests.find((candidate) => sameAttempt(candidate, request));
  if (!current || (current.boxId !== undefined && current.boxId !== boxId)) {
    throw createPaused("out of date");
  }
  const completed: BoatCreateRequest = { ...current, boxId };
  const others = doc.requests.filter((candidate) => candidate.botId !== request.botId);
  return { next: file(doc, [...others, completed]), result: copy(completed) };
}

/** Only after the deterministic rename succeeded: the row becomes the durable bot → Boat ownership record. */
export function resolveStep(doc: BoatCreateJournalFile, request: BoatCreateRequest): Step<BoatCreateRequest> {
  const current = doc.requests.find(
    (candidate) => sameAttempt(candidate, request) && candidate.boxId === request.boxId,
  );
  if (current?.boxId === undefined) throw createPaused("out of date");
  const resolved: BoatCreateRequest = { ...current, resolved: true };
  const next = doc.requests.map((candidate) =>
    candidate.idempotencyKey === current.idempotencyKey ? resolved : candidate,
  );
  return { next: file(doc, next), result: copy(resolved) };
}

/**
 * Sanitised: provider request bodies and idempotency keys never cross this boundary. Takes the fields one by
 * one (never a spread), so a field added to the file format stays out until it is named here.
 */
export function viewOf(request: Readonly<BoatCreateRequest>): BoatCreateView {
  return {
    botId: request.botId,
    ...(request.boxId !== undefined ? { boxId: request.boxId } : {}),
    resolved: request.resolved === true,
    createdAt: request.createdAt,
  };
}

export function snapshotOf(doc: BoatCreateJournalFile, now: number): BoatCreateRecoveryEntry[] {
  return doc.requests.map((request) => ({ ...viewOf(request), ageMs: Math.max(0, now - request.createdAt) }));
}

/** Never steals an identity remembered for another bot; fails closed on a cross-bot conflict. */
export function adoptStep(
  doc: BoatCreateJournalFile,
  botId: string,
  boxId: string,
  ctx: CreateContext,
): Step<undefined> {
  const sameBoat = doc.requests.find((request) => request.boxId === boxId);
  if (sameBoat && sameBoat.botId !== botId) {
    throw createPaused("conflicted with another bot's remembered cloud computer");
  }
  const retained = doc.requests.filter((request) => request.botId !== botId);
  if (retained.length >= MAX_REQUESTS) throw createPaused("full");
  const ownRows = doc.requests.length - retained.length;
  if (ownRows === 1 && sameBoat?.resolved === true) return { result: undefined };
  const adopted: BoatCreateRequest = sameBoat
    ? { ...sameBoat, resolved: true }
    : {
        botId,
        // Synthetic but unique per Boat, so the (bot, body) identity invariant still holds.
        requestBody: JSON.stringify({ adopted: "legacy-name", boxId }),
        idempotencyKey: ctx.newKey(),
        createdAt: ctx.now,
        boxId,
        resolved: true,
      };
  return { next: file(doc, [...retained, adopted]), result: undefined };
}

/**
 * The facts of a row a caller read (a recovery snapshot's, without `ageMs`): a row is "unchanged" only when
 * every one of them still matches.
 */
export interface BoatCreateRowFacts {
  botId: string;
  boxId?: string | undefined;
  resolved: boolean;
  createdAt: number;
}

function sameFacts(row: BoatCreateRequest, expected: BoatCreateRowFacts): boolean {
  return (
    row.botId === expected.botId &&
    row.boxId === expected.boxId &&
    (row.resolved === true) === expected.resolved &&
    row.createdAt === expected.createdAt
  );
}

/**
 * `adoptStep` as a compare-and-set: only while the bot's row is still exactly `expected` (null: the bot has
 * no row), and only when it writes. False (nothing written) when the row moved, or the Boat is already the
 * bot's resolved Boat: of two callers adopting from the same reading, exactly one gets true.
 */
export function adoptOnceStep(
  doc: BoatCreateJournalFile,
  botId: string,
  boxId: string,
  expected: BoatCreateRowFacts | null,
  ctx: CreateContext,
): Step<boolean> {
  // The bot's first row is the one a reader of the snapshot (same order) sees and fences: a journal may
  // also hold a second row of the bot (a key-only one beside a remembered Boat, from an older writer), which
  // must not make the compare-and-set fail for ever while every plan prints the same adopt.
  const own = doc.requests.filter((request) => request.botId === botId);
  const current = own[0];
  const unchanged =
    expected === null ? own.length === 0 : current !== undefined && sameFacts(current, expected);
  if (!unchanged) return { result: false };
  const step = adoptStep(doc, botId, boxId, ctx);
  return step.next === undefined ? { result: false } : { next: step.next, result: true };
}

/**
 * `retireStep` for exactly the row a caller read: only while it is still exactly `expected` (it has a Boat
 * id). False (nothing written) when it is gone or differs: of two callers retiring the same reading,
 * exactly one gets true.
 */
export function retireOnceStep(doc: BoatCreateJournalFile, expected: BoatCreateRowFacts): Step<boolean> {
  // Exactly that row, wherever it is among the bot's rows (not merely the bot's first).
  const current =
    expected.boxId === undefined ? undefined : doc.requests.find((request) => sameFacts(request, expected));
  if (current === undefined) return { result: false };
  return {
    next: file(
      doc,
      doc.requests.filter((request) => request !== current),
    ),
    result: true,
  };
}

/** Only for a Boat the provider confirmed deleted, never after a failed or ambiguous deletion. */
export function retireStep(doc: BoatCreateJournalFile, boxId: string): Step<undefined> {
  const next = doc.requests.filter((request) => request.boxId !== boxId);
  return next.length === doc.requests.length
    ? { result: undefined }
    : { next: file(doc, next), result: undefined };
}

/**
 * Only when the request provably created nothing (a definitive client refusal), or its remembered Boat is
 * proven gone. The stored row must still be exactly the caller's (same bot, body, key and Boat id): another
 * process may have remembered a Boat under the same key meanwhile, and erasing that row would let the next
 * provision bill a second Boat. A row already gone is nothing to discard.
 */
export function discardStep(doc: BoatCreateJournalFile, request: BoatCreateRequest): Step<undefined> {
  const current = doc.requests.find((candidate) => candidate.idempotencyKey === request.idempotencyKey);
  if (current === undefined) return { result: undefined };
  if (!sameAttempt(current, request) || current.boxId !== request.boxId) throw createPaused("out of date");
  return {
    next: file(
      doc,
      doc.requests.filter((candidate) => candidate !== current),
    ),
    result: undefined,
  };
}
