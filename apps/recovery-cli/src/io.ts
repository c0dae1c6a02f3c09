/**
 * The CLI's streams, injected (as gh's iostreams): tests pass buffers, `main.ts` passes the process's.
 * Data goes to `stdout`; errors, warnings and progress go to `stderr`.
 */
export interface CliIo {
  stdout: { write(chunk: string): unknown };
  stderr: { write(chunk: string): unknown };
  /** Whether stdout is a terminal: colour and tables are for people only. */
  stdoutIsTTY: boolean;
  /** Whether stderr is a terminal: progress is drawn there only then. Absent: not a terminal. */
  stderrIsTTY?: boolean;
  /** Whether stdin is a terminal a person types at: only then may a preview ask `apply? [y/N]`. */
  stdinIsTTY?: boolean;
  /**
   * Reads one answer from the person at stdin after printing `question` (to stdout, where the preview is).
   * Absent: the CLI never asks (the preview prints its paste-back command, as in a pipe).
   */
  prompt?(question: string): Promise<string>;
}

export interface BufferIo extends CliIo {
  out(): string;
  err(): string;
}

/**
 * In-memory streams for tests and for embedding the CLI. `tty` makes stdout a terminal; `stderrTty` and
 * `stdinTty` the others; `answers` scripts what a person types at each prompt (a function runs at the
 * moment the question is asked, so a test can change the state between the preview and the answer).
 */
export function bufferIo(
  options: {
    tty?: boolean;
    stderrTty?: boolean;
    stdinTty?: boolean;
    answers?: readonly (string | (() => string | Promise<string>))[];
  } = {},
): BufferIo {
  let out = "";
  let err = "";
  const answers = [...(options.answers ?? [])];
  return {
    stdout: {
      write(chunk: string) {
        out += chunk;
        return true;
      },
    },
    stderr: {
      write(chunk: string) {
        err += chunk;
        return true;
      },
    },
    stdoutIsTTY: options.tty ?? false,
    stderrIsTTY: options.stderrTty ?? false,
    stdinIsTTY: options.stdinTty ?? false,
    ...(options.answers === undefined
      ? {}
      : {
          async prompt(question: string) {
            out += question;
            const next = answers.shift();
            // No scripted answer left: a person who just pressed Enter (the default, "no").
            const answer = typeof next === "function" ? await next() : (next ?? "");
            out += `${answer}\n`;
            return answer;
          },
        }),
    out: () => out,
    err: () => err,
  };
}
