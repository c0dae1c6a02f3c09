import type { BoatCreateRequest } from "@drydock/boat-create-journal";
import { isBoatCreateJournalError } from "@drydock/boat-create-journal";
import { isBoatDeleteJournalError } from "@drydock/boat-delete-journal";
import fc from "fast-check";
import type { DeletionMark } from "../bots.js";
import { isBotRegistryError } from "../bots.js";
import type { Storage, StorageExport } from "../contract.js";
import { CreateModel, DeleteModel, type Outcome, type Receipt } from "./model.js";
import { RegistryModel, view } from "./registry-model.js";

/**
 * Journal commands as plain data, so one generated sequence can run against the reference model and
 * against any backend (the differential test runs the same sequence on two backends).
 */
export type JournalCommand =
  | { op: "begin"; bot: string; body: string }
  | { op: "remember"; held: number; boat: string }
  | { op: "resolve"; held: number }
  | { op: "discard"; held: number }
  | { op: "adopt"; bot: string; boat: string }
  | { op: "adoptOnce"; bot: string; boat: string; expectedNull: boolean }
  | { op: "retire"; boat: string }
  | { op: "snapshot" }
  | { op: "rowsOf"; bot: string }
  | { op: "prepare"; boat: string; renamed: boolean; owner: string | null }
  | { op: "accept"; boat: string; operation: number; status: "pending" | "processing" | "completed" }
  | { op: "block"; boat: string; operation: number | null }
  | { op: "retireFence"; boat: string }
  | { op: "getFence"; boat: string }
  | { op: "hasPending"; bot: string }
  | { op: "advance"; ms: number }
  | { op: "restart" }
  | RegistryCommand;

/** The bot registry's commands (same runs, same restarts and clock). */
export type RegistryCommand =
  | { op: "botCreate"; bot: string; name: string }
  | { op: "botRemove"; bot: string }
  | { op: "botMark"; bot: string }
  | { op: "botUnmark"; bot: string; held: number }
  | { op: "botDropAbandoned"; bot: string }
  | { op: "botGet"; bot: string }
  | { op: "botPage"; after: string | null; limit: number }
  | { op: "botCount" }
  | { op: "botList" };

export const BOTS = ["bot-a", "bot-b", "bot-c"] as const;
export const BODIES = ['{"ttlSeconds":28800,"noEnv":true}', '{"ttlSeconds":7200,"noEnv":true}'] as const;
export const BOATS = ["bx_aaaaaaaa", "bx_bbbbbbbb", "bx_cccccccc"] as const;
export const OPERATIONS = ["bdop_" + "a".repeat(32), "bdop_" + "b".repeat(32)] as const;
export const T0 = 1_767_000_000_000;
export const keyOf = (n: number) => `00000000-0000-4000-8000-${n.toString(16).padStart(12, "0")}`;

/** The registry's ids: upper case sorts before lower case, `_` between: page order is byte order. */
export const REGISTRY_BOTS = ["bot-a", "bot-b", "Bot-E", "bot_9", "x"] as const;

const bot = fc.constantFrom(...BOTS);
const registryBot = fc.constantFrom(...REGISTRY_BOTS);

export const registryCommandArb: fc.Arbitrary<RegistryCommand> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      op: fc.constant("botCreate" as const),
      bot: registryBot,
      name: fc.constantFrom("Ann", "B", "n".repeat(200)),
    }),
  },
  { weight: 2, arbitrary: fc.record({ op: fc.constant("botRemove" as const), bot: registryBot }) },
  { weight: 3, arbitrary: fc.record({ op: fc.constant("botMark" as const), bot: registryBot }) },
  {
    weight: 2,
    arbitrary: fc.record({ op: fc.constant("botUnmark" as const), bot: registryBot, held: fc.nat(7) }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant("botDropAbandoned" as const), bot: registryBot }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant("botGet" as const), bot: registryBot }) },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant("botPage" as const),
      after: fc.option(fc.constantFrom(...REGISTRY_BOTS, "A", "bot-"), { nil: null }),
      limit: fc.integer({ min: 1, max: 3 }),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ op: "botCount" as const }) },
  { weight: 1, arbitrary: fc.constant({ op: "botList" as const }) },
);
const boat = fc.constantFrom(...BOATS);
const held = fc.nat(7);

export const journalCommandArb: fc.Arbitrary<JournalCommand> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({ op: fc.constant("begin" as const), bot, body: fc.constantFrom(...BODIES) }),
  },
  { weight: 3, arbitrary: fc.record({ op: fc.constant("remember" as const), held, boat }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant("resolve" as const), held }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant("discard" as const), held }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant("adopt" as const), bot, boat }) },
  {
    weight: 1,
    arbitrary: fc.record({ op: fc.constant("adoptOnce" as const), bot, boat, expectedNull: fc.boolean() }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant("retire" as const), boat }) },
  { weight: 1, arbitrary: fc.constant({ op: "snapshot" as const }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant("rowsOf" as const), bot }) },
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant("prepare" as const),
      boat,
      renamed: fc.constantFrom(false, false, false, true),
      owner: fc.option(bot, { nil: null }),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant("accept" as const),
      boat,
      operation: fc.nat(1),
      status: fc.constantFrom("pending" as const, "processing" as const, "completed" as const),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      op: fc.constant("block" as const),
      boat,
      operation: fc.option(fc.nat(1), { nil: null }),
    }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant("retireFence" as const), boat }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant("getFence" as const), boat }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant("hasPending" as const), bot }) },
  {
    weight: 1,
    arbitrary: fc.record({
      op: fc.constant("advance" as const),
      ms: fc.constantFrom(1, 60_000, 23 * 3_600_000, 3_600_000),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ op: "restart" as const }) },
  { weight: 6, arbitrary: registryCommandArb },
);

const identityOf = (boxId: string, renamed: boolean, owner: string | null) => ({
  boxId,
  name: renamed ? `renamed-${boxId}` : `drydock-${boxId}`,
  ownerBotId: owner,
});
const receiptOf = (boxId: string, operation: number, status: Receipt["status"]): Receipt => ({
  id: OPERATIONS[operation] as string,
  kind: "sandbox",
  targetId: boxId,
  status,
});

/** A run's shared state: the clock, the key counter and the requests a caller holds (the last 8). */
export interface RunState {
  clock: { now: number };
  minted: { n: number };
  held: BoatCreateRequest[];
  /** The deletion marks a caller holds (the model's refs, or a backend's marks), in the order they were made. */
  heldMarks: unknown[];
}

export function newRunState(): RunState {
  return { clock: { now: T0 }, minted: { n: 0 }, held: [], heldMarks: [] };
}

const heldMark = (state: RunState, index: number) =>
  state.heldMarks.length === 0 ? undefined : state.heldMarks[index % state.heldMarks.length];

function applyToRegistryModel(r: RegistryModel, state: RunState, command: RegistryCommand): Outcome {
  switch (command.op) {
    case "botCreate":
      return r.create(command.bot, command.name);
    case "botRemove":
      return r.remove(command.bot);
    case "botMark": {
      const outcome = r.mark(command.bot);
      if (outcome.ok && outcome.value !== null) state.heldMarks.push(r.marksMade - 1);
      return outcome;
    }
    case "botUnmark": {
      const ref = heldMark(state, command.held);
      return ref === undefined ? { ok: true, value: "skipped" } : r.unmark(command.bot, ref as number);
    }
    case "botDropAbandoned":
      return r.dropAbandoned(command.bot);
    case "botGet":
      return r.get(command.bot);
    case "botPage":
      return r.page(command.after ?? undefined, command.limit);
    case "botCount":
      return { ok: true, value: r.bots.length };
    case "botList":
      return { ok: true, value: r.bots.map((b) => b.botId) };
  }
}

async function applyToRegistry(
  storage: Storage,
  state: RunState,
  command: RegistryCommand,
): Promise<unknown> {
  const bots = storage.bots;
  switch (command.op) {
    case "botCreate":
      return view(await bots.create({ botId: command.bot, name: command.name }));
    case "botRemove":
      return bots.remove(command.bot);
    case "botMark": {
      const mark = await bots.markDeleting(command.bot);
      if (mark === null) return null;
      state.heldMarks.push(mark);
      return { since: mark.since };
    }
    case "botUnmark": {
      const mark = heldMark(state, command.held);
      return mark === undefined ? "skipped" : bots.unmarkDeleting(command.bot, mark as DeletionMark);
    }
    case "botDropAbandoned": {
      const bot = await bots.get(command.bot);
      if (bot === null) return null;
      const { live, abandoned } = await bots.liveMarks(bot, { ownIdle: true });
      await bots.dropAbandonedMarks(command.bot, abandoned);
      return { live: live.length, abandoned: abandoned.length };
    }
    case "botGet": {
      const bot = await bots.get(command.bot);
      return bot === null ? null : view(bot);
    }
    case "botPage": {
      const page = await bots.page({
        ...(command.after === null ? {} : { after: command.after }),
        limit: command.limit,
      });
      return { ids: page.bots.map((b) => b.botId), next: page.next };
    }
    case "botCount":
      return bots.count();
    case "botList":
      return (await bots.list()).map((b) => b.botId);
  }
}

/** An export as the suite compares it: bots by `view` (a mark's random id and process are the backend's). */
export function canonicalExport(exported: StorageExport): unknown {
  return { ...exported, bots: exported.bots.map(view) };
}

function hold(
  state: RunState,
  outcome: Outcome,
  pick: (value: unknown) => BoatCreateRequest | undefined,
): void {
  if (!outcome.ok) return;
  if (typeof outcome.value !== "object" || outcome.value === null) return;
  const request = pick(outcome.value);
  if (request === undefined) return;
  state.held.push({ ...request });
  if (state.held.length > 8) state.held.shift();
}

const heldAt = (state: RunState, index: number) =>
  state.held.length === 0 ? undefined : state.held[index % state.held.length];

const pickers: Partial<Record<JournalCommand["op"], (value: unknown) => BoatCreateRequest | undefined>> = {
  begin: (value) => (value as { request: BoatCreateRequest }).request,
  remember: (value) => value as BoatCreateRequest,
  resolve: (value) => value as BoatCreateRequest,
};

/** What the reference model answers. `advance` and `restart` change no journal. */
export function applyToModel(
  models: { create: CreateModel; delete: DeleteModel; registry: RegistryModel },
  state: RunState,
  command: JournalCommand,
): Outcome {
  const { create: c, delete: d } = models;
  const outcome = ((): Outcome => {
    if (command.op.startsWith("bot"))
      return applyToRegistryModel(models.registry, state, command as RegistryCommand);
    switch (command.op) {
      case "begin":
        return c.begin(command.bot, command.body);
      case "remember":
      case "resolve":
      case "discard": {
        const request = heldAt(state, command.held);
        if (request === undefined) return { ok: true, value: "skipped" };
        if (command.op === "remember") return c.remember(request, command.boat);
        return command.op === "resolve" ? c.resolve(request) : c.discard(request);
      }
      case "adopt":
        return c.adopt(command.bot, command.boat);
      case "adoptOnce": {
        const own = c.rows.find((r) => r.botId === command.bot);
        const unchanged = command.expectedNull ? own === undefined : own !== undefined;
        if (!unchanged) return { ok: true, value: false };
        const before = JSON.stringify(c.rows);
        const result = c.adopt(command.bot, command.boat);
        if (!result.ok) return result;
        return { ok: true, value: JSON.stringify(c.rows) !== before };
      }
      case "retire":
        return c.retire(command.boat);
      case "snapshot":
        return c.snapshot();
      case "rowsOf":
        return c.snapshot(command.bot);
      case "prepare":
        return d.prepare(identityOf(command.boat, command.renamed, command.owner));
      case "accept":
        return d.accept(command.boat, receiptOf(command.boat, command.operation, command.status));
      case "block":
        return d.block(
          command.boat,
          command.operation === null ? null : receiptOf(command.boat, command.operation, "blocked"),
        );
      case "retireFence":
        return d.retire(command.boat);
      case "getFence":
        return d.get(command.boat);
      case "hasPending":
        return d.hasPending(command.bot);
      case "advance":
        state.clock.now += command.ms;
        return { ok: true, value: undefined };
      case "restart":
        models.registry.generation += 1;
        return { ok: true, value: undefined };
      default:
        throw new Error(`unknown command ${command.op}`);
    }
  })();
  hold(state, outcome, pickers[command.op] ?? (() => undefined));
  return outcome;
}

/** A journal refusal as data: the code and the short detail (messages may differ in wording per backend). */
export function outcomeOfError(error: unknown): Outcome {
  const e = error as { code?: unknown; detail?: unknown; name?: unknown };
  if (
    (isBoatCreateJournalError(error) || isBoatDeleteJournalError(error)) &&
    typeof e.code === "string" &&
    typeof e.detail === "string"
  ) {
    return { ok: false, code: e.code, detail: e.detail };
  }
  if (isBotRegistryError(error)) return { ok: false, code: error.code, detail: error.message };
  throw error;
}

/**
 * Runs one command on a backend. `reopen` replaces the storage (restart). The held requests are the
 * caller's (the same indexes the model used).
 */
export async function applyToStorage(
  storage: { current: Storage; reopen(): Promise<void> },
  state: RunState,
  command: JournalCommand,
): Promise<Outcome> {
  const c = storage.current.createJournal;
  const d = storage.current.deleteJournal;
  let outcome: Outcome;
  try {
    const value = await (async (): Promise<unknown> => {
      if (command.op.startsWith("bot"))
        return applyToRegistry(storage.current, state, command as RegistryCommand);
      switch (command.op) {
        case "begin":
          return c.beginBoatCreate(command.bot, command.body);
        case "remember":
        case "resolve":
        case "discard": {
          const request = heldAt(state, command.held);
          if (request === undefined) return "skipped";
          if (command.op === "remember") return c.rememberCreatedBoat(request, command.boat);
          return command.op === "resolve" ? c.resolveBoatCreate(request) : c.discardBoatCreate(request);
        }
        case "adopt":
          return c.adoptResolvedBoat(command.bot, command.boat);
        case "adoptOnce": {
          const own = (await c.boatCreateRecoverySnapshot()).find((r) => r.botId === command.bot);
          const expected = command.expectedNull
            ? null
            : own === undefined
              ? { botId: command.bot, resolved: false, createdAt: 1 }
              : { botId: own.botId, boxId: own.boxId, resolved: own.resolved, createdAt: own.createdAt };
          return c.adoptResolvedBoatOnce(command.bot, command.boat, expected);
        }
        case "retire":
          return c.retireDeletedBoatCreate(command.boat);
        case "snapshot":
          return c.boatCreateRecoverySnapshot();
        case "rowsOf":
          return c.boatCreateRowsOf(command.bot);
        case "prepare":
          return d.prepareBoatDeletionOnce(identityOf(command.boat, command.renamed, command.owner));
        case "accept":
          return d.markBoatDeletionAccepted(
            command.boat,
            receiptOf(command.boat, command.operation, command.status),
          );
        case "block":
          return command.operation === null
            ? d.markBoatDeletionBlocked(command.boat)
            : d.markBoatDeletionBlocked(command.boat, receiptOf(command.boat, command.operation, "blocked"));
        case "retireFence":
          return d.retireBoatDeletion(command.boat);
        case "getFence":
          return d.getBoatDeletion(command.boat);
        case "hasPending":
          return d.hasPendingBoatDeletionForBot(command.bot);
        case "advance":
          return undefined;
        case "restart":
          await storage.reopen();
          return undefined;
        default:
          throw new Error(`unknown command ${command.op}`);
      }
    })();
    outcome = { ok: true, value };
  } catch (error) {
    outcome = outcomeOfError(error);
  }
  hold(state, outcome, pickers[command.op] ?? (() => undefined));
  return outcome;
}

export function newModels(
  state: RunState,
  botLimit = Number.POSITIVE_INFINITY,
): { create: CreateModel; delete: DeleteModel; registry: RegistryModel } {
  let minted = 0;
  return {
    create: new CreateModel(state.clock, () => keyOf(++minted)),
    delete: new DeleteModel(state.clock),
    registry: new RegistryModel(state.clock, botLimit),
  };
}
