/**
 * The CLI's streams, injected (as gh's iostreams): tests pass buffers, `main.ts` passes the process's.
 * Data goes to `stdout`; errors, warnings and progress go to `stderr`.
 */
export interface CliIo {
  stdout: { write(chunk: string): unknown };
  stderr: { write(chunk: string): unknown };
  /** Whether stdout is a terminal: colour and tables are for people only. */
  stdoutIsTTY: boolean;
}

export interface BufferIo extends CliIo {
  out(): string;
  err(): string;
}

/** In-memory streams for tests and for embedding the CLI. */
export function bufferIo(options: { tty?: boolean } = {}): BufferIo {
  let out = "";
  let err = "";
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
    out: () => out,
    err: () => err,
  };
}
