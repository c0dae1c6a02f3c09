import Table from "cli-table3";
import { createColors } from "picocolors";
import type { ExitCode } from "./errors.js";
import type { CliIo } from "./io.js";
import { JSON_SCHEMA_VERSION } from "./json-schemas.js";

/** What a command hands to `main`: the data (printed as is with --json) and its human rendering. */
export interface Rendered {
  data: unknown;
  human: string;
  /** Defaults to 0. `status` uses 6 when it could not look at the provider. */
  exitCode?: ExitCode;
  /**
   * Set on a preview that could be applied: the exact paste-back command it printed. On a terminal (and
   * without --yes, --json, --no-input or CI) `main` asks `apply? [y/N]` and, on `y`, runs the same command
   * with `--yes` and the fences read from this line, never with freshly read state.
   */
  confirm?: { command: string };
}

export type Colors = ReturnType<typeof createColors>;

export function colors(enabled: boolean): Colors {
  return createColors(enabled);
}

/** An aligned table. Borders only on a TTY; plain, whitespace-aligned columns for pipes and logs. */
export function table(
  headers: string[],
  rows: (string | number | null | undefined)[][],
  tty: boolean,
): string {
  if (rows.length === 0) return "";
  const cells = rows.map((row) =>
    row.map((cell) => (cell === null || cell === undefined ? "-" : String(cell))),
  );
  if (!tty) {
    const widths = headers.map((header, column) =>
      Math.max(header.length, ...cells.map((row) => (row[column] ?? "").length)),
    );
    const line = (row: string[]) =>
      row
        .map((cell, column) => (column === row.length - 1 ? cell : cell.padEnd(widths[column] ?? 0)))
        .join("  ")
        .trimEnd();
    return `${[line(headers), ...cells.map(line)].join("\n")}\n`;
  }
  const rendered = new Table({ head: headers, style: { head: [], border: [] } });
  for (const row of cells) rendered.push(row);
  return `${rendered.toString()}\n`;
}

export function renderError(
  io: CliIo,
  error: { code: string; message: string; exitCode: ExitCode; json: boolean },
): void {
  if (error.json) {
    io.stderr.write(
      `${JSON.stringify({ schemaVersion: JSON_SCHEMA_VERSION, ok: false, error: { code: error.code, message: error.message }, exitCode: error.exitCode })}\n`,
    );
    return;
  }
  io.stderr.write(`drydock: ${error.message} [${error.code}, exit ${error.exitCode}]\n`);
}

/** Milliseconds as "3h 12m" / "45s": ages and windows for people. */
export function duration(ms: number): string {
  const seconds = Math.max(0, Math.floor(ms / 1000));
  if (seconds < 60) return `${seconds}s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes}m`;
  const hours = Math.floor(minutes / 60);
  if (hours < 48) return `${hours}h ${minutes % 60}m`;
  return `${Math.floor(hours / 24)}d ${hours % 24}h`;
}
