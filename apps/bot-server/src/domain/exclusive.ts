import { HttpProblem } from "../http-errors.js";

/**
 * One lifecycle operation per bot at a time, in this process. Two processes are still safe (the journals
 * serialize them); this only turns an overlapping click into a clear 409 instead of a queue.
 */
export class BotExclusivity {
  private readonly busy = new Set<string>();
  /** Bumped whenever the busy set changes: a bot's computer view depends on it (see the listing). */
  version = 0;

  has(botId: string): boolean {
    return this.busy.has(botId);
  }

  async run<T>(botId: string, fn: () => Promise<T>): Promise<T> {
    if (this.busy.has(botId)) {
      throw new HttpProblem(
        409,
        "bot_busy",
        "Another operation on this bot is still running; retry when it finishes.",
      );
    }
    this.busy.add(botId);
    this.version += 1;
    try {
      return await fn();
    } finally {
      this.busy.delete(botId);
      this.version += 1;
    }
  }
}
