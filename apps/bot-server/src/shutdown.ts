import { constants } from "node:os";

export interface ShutdownOptions {
  /** DRYDOCK_SHUTDOWN_TIMEOUT_MS: how long the first signal waits for in-flight requests. */
  timeoutMs: number;
  /** Where shutdown says what it does (stderr by default). */
  say?: (line: string) => void;
  /** process.exit by default. */
  exit?: (code: number) => void;
}

/** Exit code of a shutdown cut at its deadline (requests were still in flight). */
export const SHUTDOWN_DEADLINE_EXIT = 1;

/**
 * SIGTERM/SIGINT: stop accepting, let in-flight requests finish, release the locks and the embedded
 * simulator (`close`), exit 0. A request that hangs cannot hold the process: after `timeoutMs` it exits 1
 * anyway (what the cut requests held is a dead owner's, reaped by the next start: workspace locks of edits
 * at start, a restore's by its fenced recovery). A second signal exits at once with 128 + its number.
 */
export function exitOnSignals(close: () => Promise<void>, options: ShutdownOptions): void {
  const say = options.say ?? ((line: string) => process.stderr.write(`drydock-server: ${line}\n`));
  const exit = options.exit ?? ((code: number) => process.exit(code));
  let stopping = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping) {
      say(`second ${signal}: exiting at once`);
      exit(128 + (constants.signals[signal] ?? 15));
      return;
    }
    stopping = true;
    say(`${signal}: shutting down (in-flight requests have ${options.timeoutMs} ms)`);
    const deadline = setTimeout(() => {
      say(`shutdown deadline of ${options.timeoutMs} ms passed with requests still in flight; exiting`);
      exit(SHUTDOWN_DEADLINE_EXIT);
    }, options.timeoutMs);
    close().then(
      () => {
        clearTimeout(deadline);
        say("shut down");
        exit(0);
      },
      (error: unknown) => {
        clearTimeout(deadline);
        say(`shutdown failed: ${String(error)}`);
        exit(1);
      },
    );
  };
  process.on("SIGTERM", onSignal);
  process.on("SIGINT", onSignal);
}
