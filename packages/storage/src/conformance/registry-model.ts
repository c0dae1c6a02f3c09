import type { Outcome } from "./model.js";

/**
 * The reference model of the bot registry, written from the contract (bots.ts) and the bot server's
 * documented behaviour, not from any backend: bots in creation order, each with its deletion marks. A mark
 * is modelled by the registry instance (generation: one per open) that set it; its random id and process
 * facts are the backend's.
 */
export interface ModelMark {
  /** Which open of the store set it (a restart is a new registry instance). */
  generation: number;
  since: number;
  /** The caller's handle on it: the index in the run's held marks. */
  ref: number;
}

export interface ModelBot {
  botId: string;
  name: string;
  createdAt: number;
  deletions: ModelMark[];
}

const ok = (value: unknown): Outcome => ({ ok: true, value });
const refused = (code: string, detail: string): Outcome => ({ ok: false, code, detail });

export class RegistryModel {
  bots: ModelBot[] = [];
  generation = 0;
  marksMade = 0;
  constructor(
    readonly clock: { now: number },
    readonly limit: number,
  ) {}

  find(botId: string): ModelBot | undefined {
    return this.bots.find((b) => b.botId === botId);
  }

  create(botId: string, name: string): Outcome {
    if (this.find(botId)) return refused("BOT_EXISTS", `A bot with id '${botId}' already exists.`);
    if (this.bots.length >= this.limit) {
      return refused("TOO_MANY_BOTS", `This installation already has ${this.limit} bots; delete one first.`);
    }
    const bot = { botId, name, createdAt: this.clock.now, deletions: [] };
    this.bots.push(bot);
    return ok(view(bot));
  }

  remove(botId: string): Outcome {
    this.bots = this.bots.filter((b) => b.botId !== botId);
    return ok(undefined);
  }

  /** A new mark (the run holds it as `ref`), replacing this instance's own leftover; null: no such bot. */
  mark(botId: string): Outcome {
    const bot = this.find(botId);
    if (bot === undefined) return ok(null);
    const kept = bot.deletions.filter((m) => m.generation !== this.generation);
    if (kept.length >= 64) return refused("BOT_BUSY", "Too many deletions of this bot are under way.");
    const mark = { generation: this.generation, since: this.clock.now, ref: this.marksMade++ };
    bot.deletions = [...kept, mark];
    return ok({ since: mark.since });
  }

  unmark(botId: string, ref: number): Outcome {
    const bot = this.find(botId);
    if (bot) bot.deletions = bot.deletions.filter((m) => m.ref !== ref);
    return ok(undefined);
  }

  /** liveMarks(ownIdle) then dropAbandonedMarks: this instance's marks go (their process, this one, lives). */
  dropAbandoned(botId: string): Outcome {
    const bot = this.find(botId);
    if (bot === undefined) return ok(null);
    const abandoned = bot.deletions.filter((m) => m.generation === this.generation);
    bot.deletions = bot.deletions.filter((m) => m.generation !== this.generation);
    return ok({ live: bot.deletions.length, abandoned: abandoned.length });
  }

  get(botId: string): Outcome {
    const bot = this.find(botId);
    return ok(bot === undefined ? null : view(bot));
  }

  sorted(): ModelBot[] {
    return [...this.bots].sort((a, b) => (a.botId < b.botId ? -1 : a.botId > b.botId ? 1 : 0));
  }

  page(after: string | undefined, limit: number): Outcome {
    const rest = this.sorted().filter((b) => after === undefined || b.botId > after);
    const bots = rest.slice(0, limit);
    const last = bots.at(-1);
    return ok({ ids: bots.map((b) => b.botId), next: rest.length > limit && last ? last.botId : null });
  }

  /** The export's bots, as `canonicalBots` shows a backend's. */
  exported(): unknown[] {
    return this.sorted().map(view);
  }
}

/** A bot as the suite compares it: every field, and each mark by what the model can know (its time). */
export function view(bot: {
  botId: string;
  name: string;
  createdAt: number;
  deletions?: readonly { since: number }[] | undefined;
}): unknown {
  return {
    botId: bot.botId,
    name: bot.name,
    createdAt: bot.createdAt,
    marks: (bot.deletions ?? []).map((m) => m.since),
  };
}
