/**
 * What the chaos tests share (chaos-suite.ts: one server SIGKILLed at random; hosts-chaos.test.ts: three
 * servers on one PostgreSQL): seeded randomness, and the two Boat invariants judged from boat.dev's side —
 * the simulator's record of every Boat it ever created, and a recording proxy's log of every DELETE.
 * Each check returns its findings as sentences (empty: it holds), so each suite reports them its own way.
 */
import { createHash } from "node:crypto";
import { DELETE_IN_FLIGHT_MS } from "@drydock/boat-lifecycle";
import type { SimSandboxRecord } from "@drydock/boat-provider/simulator";
import type { RecordedCall } from "./helpers.js";

/** A seed from an environment variable (`name`), or undefined when it is unset or blank. */
export function parseSeed(raw: string | undefined, name: string): number | undefined {
  if (raw === undefined || raw.trim() === "") return undefined;
  const seed = Number(raw);
  if (!Number.isSafeInteger(seed) || seed < 0) throw new Error(`${name} must be an integer, got '${raw}'`);
  return seed;
}

export interface Rng {
  next(): number;
  int(lo: number, hi: number): number;
  pick<T>(items: readonly T[]): T;
  chance(p: number): boolean;
}

/** mulberry32, seeded from the run seed and a label, so each lane of each round has its own stream. */
export function seededRng(seed: number, ...label: (string | number)[]): Rng {
  let a = createHash("sha256")
    .update(`${seed}/${label.join("/")}`)
    .digest()
    .readUInt32LE(0);
  const next = () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
  return {
    next,
    int: (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)),
    pick: (items) => items[Math.floor(next() * items.length)] as (typeof items)[number],
    chance: (p) => next() < p,
  };
}

export function sha256(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

/**
 * At most one billable Boat per bot, ever at once: every Boat is attributed to a bot (`ownerOf`, e.g. by the
 * create key that made it), carries no other name than that bot's (`nameOf`), and a bot's Boats never overlap
 * in time (a Boat is billable from its creation until its deletion completed). Returns the findings and the
 * attribution (Boat id → bot id) for further checks.
 */
export function checkBoatsPerBot(
  boats: readonly SimSandboxRecord[],
  ownerOf: (boat: SimSandboxRecord) => string | undefined,
  nameOf: (botId: string) => string,
): { findings: string[]; owner: Map<string, string> } {
  const findings: string[] = [];
  const owner = new Map<string, string>();
  const byBot = new Map<string, SimSandboxRecord[]>();
  for (const boat of boats) {
    const botId = ownerOf(boat);
    if (botId === undefined) {
      findings.push(`Boat ${boat.id} was created under a key no create request of the server carried`);
      continue;
    }
    owner.set(boat.id, botId);
    byBot.set(botId, [...(byBot.get(botId) ?? []), boat]);
    const names = new Set(
      [boat.name, ...boat.history.map((h) => h.name)].filter((n) => typeof n === "string"),
    );
    for (const name of names) {
      if (name !== nameOf(botId)) findings.push(`Boat ${boat.id} of bot ${botId} was named ${name}`);
    }
  }
  for (const [botId, list] of byBot) {
    list.sort((a, b) => a.createdAt - b.createdAt);
    for (let i = 1; i < list.length; i++) {
      const earlier = list[i - 1] as SimSandboxRecord;
      const later = list[i] as SimSandboxRecord;
      if (earlier.deletedAt === null || earlier.deletedAt > later.createdAt) {
        findings.push(
          `bot ${botId} had two billable Boats at once: ${earlier.id} (created ${earlier.createdAt}, ${earlier.deletedAt === null ? "still live" : `deleted ${earlier.deletedAt}`}) and ${later.id} (created ${later.createdAt})`,
        );
      }
    }
  }
  return { findings, owner };
}

/** The DELETEs of one Boat among recorded provider calls (paths `/api/v1/sandboxes/bx_…`). */
export function deleteCallsOf(calls: readonly RecordedCall[]): (RecordedCall & { boxId: string })[] {
  const out: (RecordedCall & { boxId: string })[] = [];
  for (const call of calls) {
    const boxId = /^\/api\/v1\/sandboxes\/(bx_[a-z0-9]+)$/.exec(call.path)?.[1];
    if (call.method === "DELETE" && boxId !== undefined) out.push({ ...call, boxId });
  }
  return out;
}

/** Between a fence's prepare and its DELETE leaving there are a journal write and a crash point. */
const PREPARE_TO_SEND_SLACK_MS = 2_000;

export interface DeleteJudging {
  /** Every recorded provider call (the proofs of a blocked deletion are among them), in order of arrival. */
  calls: readonly RecordedCall[];
  ownerOf: (boxId: string) => string | undefined;
  /** The sending process's clock when the call arrived (the lifecycle's in-flight window runs on it). */
  clockOf: (call: RecordedCall) => number;
  /** Whether two calls came from the same process (one that holds the first one's receipt). */
  sameSender: (a: RecordedCall, b: RecordedCall) => boolean;
  /** How a call is named in a finding (e.g. `#12` or `#12 from server 2`). */
  label: (call: RecordedCall) => string;
  /** Where a call was sent from, for the resend finding (e.g. `round 3`). */
  origin: (call: RecordedCall) => string;
}

/**
 * No blind second DELETE. For each Boat, in order of arrival at boat.dev: a DELETE never arrives while an
 * earlier one is still being handled; and after a DELETE whose answer did not reach its sender (or that
 * answered with a receipt, which the sender then follows by polling), the next DELETE comes only from
 * another process once the in-flight window has passed on its clock, or after boat.dev proved the deletion
 * blocked (a re-prepared fence). A DELETE answered with an error was not in flight any more.
 */
export function checkDeletes(j: DeleteJudging): string[] {
  const findings: string[] = [];
  const byBoat = new Map<string, (RecordedCall & { boxId: string })[]>();
  const sorted = [...j.calls].sort((a, b) => a.arrivedAt - b.arrivedAt);
  for (const call of deleteCallsOf(sorted)) byBoat.set(call.boxId, [...(byBoat.get(call.boxId) ?? []), call]);
  const blockedProofs = sorted.filter(
    (c) =>
      c.delivered &&
      (c.json?.operation?.status === "blocked" ||
        (c.status === 409 && c.json?.error?.code === "sandbox_busy")),
  );
  for (const [boxId, calls] of byBoat) {
    for (let i = 1; i < calls.length; i++) {
      const next = calls[i] as RecordedCall;
      for (const earlier of calls.slice(0, i)) {
        if (earlier.doneAt === undefined || earlier.doneAt > next.arrivedAt) {
          findings.push(
            `DELETE of ${boxId} (bot ${j.ownerOf(boxId)}) arrived (${j.label(next)}) while ${j.label(earlier)} was still at boat.dev`,
          );
        }
      }
      const prev = calls[i - 1] as RecordedCall;
      if (prev.delivered && prev.status !== undefined && prev.status >= 400) continue;
      const proven = blockedProofs.some(
        (p) =>
          p.arrivedAt >= prev.arrivedAt &&
          p.arrivedAt < next.arrivedAt &&
          (p.json?.operation?.targetId === boxId || p.path.endsWith(`/sandboxes/${boxId}`)),
      );
      if (proven) continue;
      const receipt = prev.delivered && prev.status === 202;
      const waited = j.clockOf(next) - j.clockOf(prev);
      if (receipt && j.sameSender(prev, next)) {
        findings.push(
          `DELETE of ${boxId} re-sent (${j.label(next)}) by the server that already holds its receipt (${j.label(prev)})`,
        );
      } else if (waited < DELETE_IN_FLIGHT_MS - PREPARE_TO_SEND_SLACK_MS) {
        findings.push(
          `DELETE of ${boxId} re-sent (${j.label(next)}, ${j.origin(next)}) ${waited} ms on the server's clock after ${j.label(prev)} (${j.origin(prev)}), whose ${receipt ? "receipt was taken" : `answer never arrived (${prev.error ?? `${prev.status}, not delivered`})`}, with no proof in between; the in-flight window is ${DELETE_IN_FLIGHT_MS} ms`,
        );
      }
    }
  }
  return findings;
}
