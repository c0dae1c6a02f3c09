import { type BoatCreateJournal, keyTrustDeadline } from "@drydock/boat-create-journal";
import type { BoatDeleteJournal } from "@drydock/boat-delete-journal";
import { DELETE_IN_FLIGHT_MS, deletionInFlightLeftMs } from "@drydock/boat-lifecycle";
import type { Bot } from "../bots.js";

export type ComputerStatus = "none" | "provisioning" | "ready" | "deleting" | "needs_attention";
export type ComputerView = { status: ComputerStatus; boxId?: string; name?: string; problem?: string };
export type CreateRow = Awaited<ReturnType<BoatCreateJournal["peekBoatCreates"]>>[number];
export type DeletionRow = Awaited<ReturnType<BoatDeleteJournal["peekBoatDeletions"]>>[number];
/** Both journals' rows by bot: the first create row and every deletion fence of each bot. */
export type Journals = { creates: Map<string, CreateRow>; deletions: Map<string, DeletionRow[]> };

/** Redaction is structural: responses are built from these fields only, never by spreading internal records. */
export type BotView = { readonly botId: string; readonly name: string; readonly createdAt: string };
// Keyed by the registry's rows: `peek` hands out the same frozen row while bots.json is unchanged, so a
// listing formats each bot once, not once per request (Date#toISOString is most of a row's cost).
const botViews = new WeakMap<Readonly<Bot>, BotView>();
export function botView(bot: Readonly<Bot>): BotView {
  let view = botViews.get(bot);
  if (view === undefined) {
    view = { botId: bot.botId, name: bot.name, createdAt: new Date(bot.createdAt).toISOString() };
    botViews.set(bot, view);
  }
  return view;
}

/** Both journals' rows indexed by bot (a fence with no owning bot, one an operator prepared by hand, in none). */
export function indexJournals(creates: readonly CreateRow[], deletions: readonly DeletionRow[]): Journals {
  const journals: Journals = { creates: new Map(), deletions: new Map() };
  for (const row of creates) if (!journals.creates.has(row.botId)) journals.creates.set(row.botId, row);
  for (const record of deletions) {
    if (record.ownerBotId === null) continue;
    const list = journals.deletions.get(record.ownerBotId);
    if (list) list.push(record);
    else journals.deletions.set(record.ownerBotId, [record]);
  }
  return journals;
}

/**
 * Both journals read once per request, however many bots the answer covers, without their locks: these
 * are views (json-journal's `peek`), and every decision is taken again under the locks by the routes
 * and the lifecycle that act. The last index built is kept with the two arrays it came from: the journals'
 * peek methods hand out the very same frozen arrays while their files are unchanged, so a poll rebuilds
 * nothing.
 */
export function journalReader(
  createJournal: Pick<BoatCreateJournal, "peekBoatCreates">,
  deleteJournal: Pick<BoatDeleteJournal, "peekBoatDeletions">,
): () => Promise<Journals> {
  let indexed: {
    creates: readonly CreateRow[];
    deletions: readonly DeletionRow[];
    journals: Journals;
  } | null = null;
  return async () => {
    const [creates, deletions] = await Promise.all([
      createJournal.peekBoatCreates(),
      deleteJournal.peekBoatDeletions(),
    ]);
    if (indexed?.creates === creates && indexed.deletions === deletions) return indexed.journals;
    const journals = indexJournals(creates, deletions);
    indexed = { creates, deletions, journals };
    return journals;
  };
}

/**
 * The first instant after `now` at which some computer's view changes by time alone (see computerView): a
 * create row's key stops being retried, or a prepared deletion fence leaves its in-flight window.
 */
export function nextExpiry(journals: Journals, now: number): number {
  let next = Number.POSITIVE_INFINITY;
  const consider = (at: number) => {
    if (at > now && at < next) next = at;
  };
  for (const row of journals.creates.values()) consider(keyTrustDeadline(row.createdAt));
  for (const records of journals.deletions.values()) {
    for (const record of records)
      if (record.phase === "prepared") consider(record.updatedAt + DELETE_IN_FLIGHT_MS);
  }
  return next;
}

/**
 * A fence prepared longer ago than the in-flight window whose DELETE boat.dev never confirmed: nothing is
 * sending it any more, and only a person's Delete (fenced to this Boat) sends it again.
 */
export const unconfirmedFence = (records: readonly DeletionRow[], now: number): DeletionRow | undefined =>
  records.find((r) => r.phase === "prepared" && deletionInFlightLeftMs(r, now) === 0);

/** What a computer's view depends on besides the journals. */
export interface ComputerViewInputs {
  now: number;
  /** Whether this process runs a lifecycle operation on the bot right now. */
  busy: boolean;
  /** The bot's scoped Boat name (the lifecycle's `boatNameFor`); asked only for a ready computer. */
  boatName(): string;
  /** The `drydock` command naming this data directory (recovery-controller's `drydockCommandPrefix`). */
  commandPrefix(): string;
}

/** The computer's state from the journals only (no provider call), so listing bots stays cheap. */
export function computerView(botId: string, journals: Journals, inputs: ComputerViewInputs): ComputerView {
  const { now } = inputs;
  const deletions = journals.deletions.get(botId) ?? [];
  const blocked = deletions.find((r) => r.phase === "blocked");
  if (blocked) {
    return {
      status: "needs_attention",
      boxId: blocked.boxId,
      name: blocked.name,
      problem: "boat.dev could not delete this computer; check boat.dev, then retry Delete.",
    };
  }
  const unconfirmed = unconfirmedFence(deletions, now);
  if (unconfirmed) {
    return {
      status: "needs_attention",
      boxId: unconfirmed.boxId,
      name: unconfirmed.name,
      problem: `This computer's deletion was started but boat.dev never confirmed it, and nothing is sending it now. Delete it again (DELETE /v1/bots/${botId}/computer with { "confirmName": "${unconfirmed.name}" }): the same Boat, never a second one.`,
    };
  }
  const deleting = deletions[0];
  if (deleting) return { status: "deleting", boxId: deleting.boxId, name: deleting.name };
  const row = journals.creates.get(botId);
  if (!row) return { status: "none" };
  if (row.resolved && row.boxId) return { status: "ready", boxId: row.boxId, name: inputs.boatName() };
  if (inputs.busy) return { status: "provisioning", ...(row.boxId ? { boxId: row.boxId } : {}) };
  // A row with a Boat id needs no key: it is finished by reading that Boat, never "expired".
  const expired = row.boxId === undefined && now >= keyTrustDeadline(row.createdAt);
  return {
    status: "needs_attention",
    ...(row.boxId ? { boxId: row.boxId } : {}),
    problem: expired
      ? `An earlier computer creation is too close to or past the end of boat.dev's 24-hour retry window, so drydock will not retry it; check boat.dev for an unnamed Boat (run: ${inputs.commandPrefix()} status).`
      : // This server knows only its own calls: another server on the directory may still be running this
        // one (GET /v1/recovery counts it as in progress for 2 minutes). POSTing again is safe either way.
        "An earlier computer creation did not finish here: it was interrupted, or another server on this data directory is still working on it. POST the computer again to finish it with the same request (safe either way: the same request never creates a second computer).",
  };
}
