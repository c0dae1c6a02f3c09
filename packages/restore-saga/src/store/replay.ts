import { join } from "node:path";
import { isProcessLevelErrno } from "@drydock/file-lock";
import { errnoOf, SagaError } from "../errors.js";
import { canonicalJson, plainDigest, prettyCanonical } from "../internal/canonical.js";
import {
  isTempName,
  PublishFailure,
  readRegularFile,
  replaceFile,
  transientFailure,
} from "../internal/files.js";
import { basePhase, checkProgression, isTerminalPhase, PHASE_EVIDENCE } from "../phases.js";
import { type SagaEvent, SagaEventSchema, type SagaHead, SagaHeadSchema } from "../schema.js";
import { present, type StoreContext, stateLock, workspaceIdentity } from "./context.js";
import { assertOperationId, corrupt, writeFailed } from "./failures.js";
import {
  EVENT_FILE,
  eventFileName,
  eventHash,
  HEAD_MAX_BYTES,
  headAnchor,
  makeHead,
  parseExact,
} from "./format.js";
import type { SagaState } from "./types.js";

/** Replay and verification: a saga directory read back, every event and HEAD checked, the one repair made. */

export interface Replay {
  state: SagaState | null;
  /** True when the directory holds no event (a create that never published). */
  orphan: boolean;
}

/**
 * Replays one saga directory. With `repair` (caller holds the saga lock): temporaries are deleted, never
 * promoted, and a HEAD exactly one event behind is rolled forward. Anything else inconsistent: CORRUPT.
 */
export function replay(
  ctx: StoreContext,
  id: string,
  dir: string,
  repair: boolean,
  archived: boolean,
): Replay {
  const temps: string[] = [];
  const result = replayFiles(ctx, id, dir, repair, archived, temps);
  // Only once the chain verified: a CORRUPT saga's files are left exactly as they are, as its error says.
  // A read-only store reads past them (a temporary is never promoted) and leaves them for the next writer.
  for (const name of ctx.readOnly ? [] : temps) {
    try {
      ctx.fs.unlinkSync(join(dir, name));
    } catch (error) {
      if (errnoOf(error) !== "ENOENT") {
        throw new SagaError({
          code: "LOCK_FAILED",
          operationId: id,
          cause: error,
          message: `A leftover temporary file of restore saga ${id} could not be removed (${errnoOf(error) ?? "error"}). The saga itself verified, and a temporary file is never promoted; retry.`,
        });
      }
    }
  }
  return result;
}

/** The replay itself; the temporaries it finds (with `repair`) are collected in `temps`, not deleted. */
export function replayFiles(
  ctx: StoreContext,
  id: string,
  dir: string,
  repair: boolean,
  archived: boolean,
  temps: string[],
): Replay {
  const listing = listSagaDir(ctx, id, dir, repair, archived, temps);
  const chain = verifyEvents(ctx, id, dir, listing, archived);
  return settleHead(ctx, id, dir, repair, archived, listing, chain);
}

/** What a saga directory holds, by name: its event files by seq, whether it has a HEAD, and its temps. */
interface SagaDirListing {
  eventFiles: Map<number, { name: string; phase: string }>;
  hasHead: boolean;
  /** The links a file may have beyond its own name: one per temp that is a second name of it. */
  extraLinks: (stat: { dev: number | bigint; ino: number | bigint }) => number;
}

/** The events a replay verified, with their bytes, and whether all of them are what the memo holds. */
interface VerifiedEvents {
  events: SagaEvent[];
  eventBytes: Buffer[];
  memo: ReturnType<StoreContext["verified"]["recall"]>;
  trusted: boolean;
}

/** Lists the saga directory and sorts its names (no file is read; temps are collected with `repair`). */
function listSagaDir(
  ctx: StoreContext,
  id: string,
  dir: string,
  repair: boolean,
  archived: boolean,
  temps: string[],
): SagaDirListing {
  const dirStat = present(ctx, dir);
  if (!dirStat) {
    throw new SagaError({
      code: "NOT_FOUND",
      operationId: id,
      message: `No ${archived ? "archived" : "active"} restore saga ${id} exists for ${ctx.workspaceRoot}.`,
    });
  }
  if (!dirStat.isDirectory()) throw corrupt(id, "its directory is a symlink or not a directory");
  let names: string[];
  try {
    names = ctx.fs.readdirSync(dir);
  } catch (error) {
    const errno = errnoOf(error);
    if (isProcessLevelErrno(errno)) {
      throw transientFailure(`The directory of restore saga ${id}`, "listed", errno, error, id);
    }
    throw corrupt(id, `its directory cannot be listed (${errno ?? "error"})`, error);
  }
  const eventFiles = new Map<number, { name: string; phase: string }>();
  const tempLinks = new Map<string, number>();
  const extraLinks = (stat: { dev: number | bigint; ino: number | bigint }): number =>
    tempLinks.get(`${stat.dev}:${stat.ino}`) ?? 0;
  let hasHead = false;
  for (const name of names) {
    if (name === "HEAD") {
      hasHead = true;
      continue;
    }
    if (isTempName(name)) {
      if (!repair) throw corrupt(id, `it holds a temporary file ${name}`);
      temps.push(name);
      // A writer killed between link(2) and unlinking its temp left the temp as a second name of the
      // event (or genesis HEAD) it published: that one link is expected until the temp is removed.
      const stat = present(ctx, join(dir, name));
      if (stat?.isFile()) {
        const key = `${stat.dev}:${stat.ino}`;
        tempLinks.set(key, (tempLinks.get(key) ?? 0) + 1);
      }
      continue;
    }
    const match = EVENT_FILE.exec(name);
    if (!match) throw corrupt(id, `it holds an unexpected file ${JSON.stringify(name)}`);
    const seq = Number(match[1]);
    if (eventFiles.has(seq)) throw corrupt(id, `it holds two events with seq ${seq}`);
    eventFiles.set(seq, { name, phase: match[2]! });
  }
  if (eventFiles.size > ctx.limits.maxEvents)
    throw corrupt(id, `it holds more than ${ctx.limits.maxEvents} events`);
  return { eventFiles, hasHead, extraLinks };
}

/** Reads and verifies every event in seq order (a file the memo verified before is compared, not parsed). */
function verifyEvents(
  ctx: StoreContext,
  id: string,
  dir: string,
  { eventFiles, extraLinks }: SagaDirListing,
  archived: boolean,
): VerifiedEvents {
  const expectedIdentity = archived ? null : workspaceIdentity(ctx);

  const memo = ctx.verified.recall(dir);
  let trusted = memo !== undefined;
  const events: SagaEvent[] = [];
  const eventBytes: Buffer[] = [];
  for (let seq = 1; seq <= eventFiles.size; seq += 1) {
    const file = eventFiles.get(seq);
    if (!file) throw corrupt(id, `event ${seq} is missing`);
    const bytes = readRegularFile(ctx.fs, join(dir, file.name), {
      maxBytes: ctx.limits.maxEventBytes,
      what: `saga event ${id}/${file.name}`,
      extraLinks,
    });
    if (!bytes) throw corrupt(id, `event ${file.name} vanished while being read`);
    eventBytes.push(bytes);
    const known = trusted ? memo?.events[seq - 1] : undefined;
    // The file name is part of what was verified (its phase must be the event's): equal bytes renamed to
    // another phase are verified in full, and fail there.
    trusted =
      known !== undefined &&
      file.name === eventFileName(known.event.seq, known.event.phase) &&
      known.bytes.equals(bytes);
    if (trusted && known) {
      // The very bytes this store verified before, under the same name, after the very same prefix: the
      // checks below would give the same answer. Only what lies outside the file is checked again (the
      // workspace identity).
      checkCreatedBinding(ctx, id, known.event, expectedIdentity);
      events.push(known.event);
      continue;
    }
    const parsed = SagaEventSchema.safeParse(parseExact(bytes, id, `event ${file.name}`));
    if (!parsed.success) throw corrupt(id, `event ${file.name} does not match the event schema`);
    const event = parsed.data;
    const { hash, ...body } = event;
    if (event.operationId !== id) throw corrupt(id, `event ${file.name} belongs to ${event.operationId}`);
    if (event.seq !== seq || event.phase !== file.phase) {
      throw corrupt(id, `event ${file.name} holds seq ${event.seq} ${event.phase}`);
    }
    if (eventHash(body) !== hash) throw corrupt(id, `event ${file.name} does not match its hash`);
    const previous = events.at(-1);
    if (event.prevHash !== (previous ? previous.hash : null)) {
      throw corrupt(id, `event ${file.name} does not chain to its predecessor`);
    }
    if (previous && Date.parse(event.timestamp) < Date.parse(previous.timestamp)) {
      throw corrupt(id, `event ${file.name} goes back in time`);
    }
    if (!PHASE_EVIDENCE[event.phase].safeParse(event.evidence).success) {
      throw corrupt(id, `event ${file.name} carries evidence its phase does not allow`);
    }
    const reason = checkProgression(events, event, { operationId: id, workspaceRoot: ctx.workspaceRoot });
    if (reason) throw corrupt(id, `event ${file.name} breaks the phase machine (${reason})`);
    if ("lockOwnerDigest" in event.evidence) {
      if (plainDigest(event.evidence.workspaceLockOwner) !== event.evidence.lockOwnerDigest) {
        throw corrupt(id, `event ${file.name} records a lock owner digest that does not match its owner`);
      }
    }
    checkCreatedBinding(ctx, id, event, expectedIdentity);
    events.push(Object.freeze(event));
  }
  return { events, eventBytes, memo, trusted };
}

/** Reads HEAD and checks that it names the last event; rolls it forward (with `repair`) when one behind. */
function settleHead(
  ctx: StoreContext,
  id: string,
  dir: string,
  repair: boolean,
  archived: boolean,
  { hasHead, extraLinks }: SagaDirListing,
  { events, eventBytes, memo, trusted }: VerifiedEvents,
): Replay {
  if (!hasHead) {
    if (events.length === 0) return { state: null, orphan: true };
    throw corrupt(id, "its HEAD is missing");
  }
  const headBytes = readRegularFile(ctx.fs, join(dir, "HEAD"), {
    maxBytes: HEAD_MAX_BYTES,
    what: `HEAD of ${id}`,
    extraLinks,
  });
  if (!headBytes) throw corrupt(id, "its HEAD vanished while being read");
  const knownHead = memo?.head?.bytes.equals(headBytes) ? memo.head : undefined;
  const last = events.at(-1);
  if (knownHead && trusted && memo?.events.length === events.length && last !== undefined) {
    // Every file is byte for byte what this store verified (or wrote) last time, when this HEAD named
    // this last event: settled, with nothing to repair.
    return settled(ctx, id, dir, events, eventBytes, knownHead, archived);
  }
  const head = knownHead ? knownHead.head : verifyHead(id, headBytes);
  const namesEvent = (event: SagaEvent | undefined): boolean =>
    event !== undefined &&
    canonicalJson(makeHead(id, event)) === canonicalJson(head) &&
    head.state === "committed";
  const isGenesis = head.state === "unpublished" && canonicalJson(makeHead(id, null)) === canonicalJson(head);

  let rolledForward = false;
  if (events.length === 0) {
    if (isGenesis) return { state: null, orphan: true };
    throw corrupt(id, "HEAD names an event that does not exist");
  }
  if (namesEvent(last)) {
    // Settled.
  } else if (events.length === 1 ? isGenesis : namesEvent(events.at(-2))) {
    // The one repair: a crash between publishing event N and replacing HEAD leaves HEAD one behind.
    if (!repair) throw corrupt(id, "its HEAD is one event behind");
    // A read-only store reads the state HEAD will name once the next writer settles it, and writes nothing.
    if (ctx.readOnly) return settled(ctx, id, dir, events, eventBytes, null, archived);
    try {
      replaceFile(ctx.fs, dir, "HEAD", Buffer.from(prettyCanonical(makeHead(id, last!)), "utf8"));
    } catch (error) {
      const failure = error instanceof PublishFailure ? error : null;
      throw writeFailed(
        id,
        failure?.stage === "after" ? "head_settlement_unknown" : "event_committed_head_unsettled",
        failure?.cause ?? error,
        { seq: last!.seq, hash: last!.hash },
      );
    }
    rolledForward = true;
  } else {
    throw corrupt(
      id,
      `HEAD (seq ${head.seq}) does not name the last event (seq ${events.length}) or the one before`,
    );
  }

  return settled(
    ctx,
    id,
    dir,
    events,
    eventBytes,
    rolledForward ? null : { bytes: headBytes, head },
    archived,
  );
}

/**
 * The state a replay found, remembered as verified. `head` is the HEAD read when it named the last event;
 * null when the replay rolled HEAD forward (the one rewritten is not remembered).
 */
export function settled(
  ctx: StoreContext,
  id: string,
  dir: string,
  events: SagaEvent[],
  eventBytes: Buffer[],
  head: { head: SagaHead; bytes: Buffer } | null,
  archived: boolean,
): Replay {
  const created = events[0]!;
  const last = events.at(-1)!;
  ctx.verified.remember(dir, {
    events: events.map((event, i) => ({ event, bytes: eventBytes[i]! })),
    head,
  });
  return {
    orphan: false,
    state: Object.freeze({
      operationId: id,
      workspaceRoot: ctx.workspaceRoot,
      workspaceIdentity: created.evidence.workspaceIdentity as string,
      seq: last.seq,
      headHash: last.hash,
      phase: last.phase,
      basePhase: basePhase(events),
      terminal: isTerminalPhase(last.phase),
      events: Object.freeze(events),
      headRolledForward: head === null,
      archived,
    }),
  };
}

/** The checks of event 1 that depend on more than its bytes: the store's workspace, and its identity now. */
export function checkCreatedBinding(
  ctx: StoreContext,
  id: string,
  event: SagaEvent,
  expectedIdentity: string | null,
): void {
  if (event.seq !== 1) return;
  if (event.evidence.workspaceRoot !== ctx.workspaceRoot) {
    throw new SagaError({
      code: "WORKSPACE_MISMATCH",
      operationId: id,
      message: `Restore saga ${id} belongs to another workspace. Nothing was changed.`,
    });
  }
  if (expectedIdentity !== null && event.evidence.workspaceIdentity !== expectedIdentity) {
    throw new SagaError({
      code: "WORKSPACE_MISMATCH",
      operationId: id,
      message: `The workspace ${ctx.workspaceRoot} was replaced after restore saga ${id} began (another directory now has its path). Nothing was changed; recover by hand.`,
    });
  }
}

export function verifyHead(id: string, bytes: Buffer): SagaHead {
  const parsed = SagaHeadSchema.safeParse(parseExact(bytes, id, "HEAD"));
  if (!parsed.success) throw corrupt(id, "HEAD does not match the HEAD schema");
  const head = parsed.data;
  const { anchorHash, ...headBody } = head;
  if (headAnchor(headBody) !== anchorHash) throw corrupt(id, "HEAD does not match its anchor hash");
  if (head.operationId !== id) throw corrupt(id, `HEAD belongs to ${head.operationId}`);
  return head;
}

export function loadLocked(ctx: StoreContext, id: string): SagaState {
  const result = replay(ctx, id, ctx.opDir(id), true, false);
  if (!result.state) {
    throw new SagaError({
      code: "NOT_FOUND",
      operationId: id,
      message: `Restore saga ${id} was never published (its create did not finish). It can be created again.`,
    });
  }
  return result.state;
}

export async function load(ctx: StoreContext, operationId: string): Promise<SagaState> {
  assertOperationId(operationId);
  if (!present(ctx, ctx.opDir(operationId))) {
    throw new SagaError({
      code: "NOT_FOUND",
      operationId,
      message: `No active restore saga ${operationId} exists for ${ctx.workspaceRoot}.`,
    });
  }
  return stateLock(ctx, ctx.opLock(operationId), `restore saga ${operationId}`, () =>
    loadLocked(ctx, operationId),
  );
}
