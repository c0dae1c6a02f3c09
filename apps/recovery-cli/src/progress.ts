import type { CliIo } from "./io.js";

/** Progress of a long operation: `step` after each unit of work, `done` when it ends (success or not). */
export interface Progress {
  /** One more of `total` done (`total` may grow as the operation discovers work; null: not known). */
  step(label?: string): void;
  /** Announces what is being done now, without counting (a phase of work of unknown size). */
  phase(label: string): void;
  /** Clears the progress line. Safe to call twice. */
  done(): void;
}

const SILENT: Progress = { step() {}, phase() {}, done() {} };

/**
 * A progress line on stderr, redrawn in place (`\r` + clear to end of line): only when stderr is a
 * terminal and the run is not --json (a script reading stderr for the JSON error envelope must find only
 * that). Anywhere else it is silent; stdout never sees it, so data stays pipeable.
 */
export function progressReporter(
  io: CliIo,
  options: { json: boolean; title: string; total?: number | null },
): Progress {
  if (io.stderrIsTTY !== true || options.json) return SILENT;
  let done = 0;
  let drawn = false;
  const total = options.total ?? null;
  const draw = (text: string): void => {
    io.stderr.write(`\r\u001b[2K${options.title}: ${text}`);
    drawn = true;
  };
  return {
    step(label) {
      done += 1;
      draw(`${done}${total === null ? "" : `/${total}`}${label ? ` ${label}` : ""}`);
    },
    phase(label) {
      draw(label);
    },
    done() {
      if (drawn) io.stderr.write("\r\u001b[2K");
      drawn = false;
    },
  };
}
